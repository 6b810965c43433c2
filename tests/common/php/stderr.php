<?php
// A line on the FastCGI stderr stream (error_log() under php-fpm).
error_log("something went wrong...");
echo "after stderr\n";
