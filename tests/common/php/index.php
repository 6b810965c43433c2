<?php
// The front controller behind `try_files $uri $uri/ /index.php?$args`.
header('Content-Type: text/plain');
echo "front uri=", $_SERVER['REQUEST_URI'], " args=", $_SERVER['QUERY_STRING'],
    " script=", $_SERVER['SCRIPT_NAME'], "\n";
