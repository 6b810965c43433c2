<?php
header('X-Powered-By: test');
echo "WordPress front controller\n";
foreach (['SCRIPT_NAME', 'SCRIPT_FILENAME', 'DOCUMENT_ROOT', 'REQUEST_URI', 'QUERY_STRING', 'REQUEST_METHOD', 'HTTPS', 'SERVER_PORT', 'PATH_INFO', 'HTTP_HOST'] as $k) {
    echo $k, '=', $_SERVER[$k] ?? '(unset)', "\n";
}
echo 'open_basedir=', ini_get('open_basedir'), "\n";
