<?php
echo "sub index script=", $_SERVER['SCRIPT_NAME'], "\n";
