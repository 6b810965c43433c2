<?php
// The CGI parameters porter and nginx send (those that do not differ by
// server: ports and software are left out).
header('Content-Type: text/plain');
$keys = ['SCRIPT_FILENAME', 'SCRIPT_NAME', 'PATH_INFO', 'QUERY_STRING', 'REQUEST_METHOD',
    'CONTENT_TYPE', 'CONTENT_LENGTH', 'REQUEST_URI', 'DOCUMENT_URI', 'DOCUMENT_ROOT',
    'SERVER_PROTOCOL', 'REQUEST_SCHEME', 'GATEWAY_INTERFACE', 'REMOTE_ADDR', 'SERVER_ADDR',
    'SERVER_NAME', 'REDIRECT_STATUS', 'HTTPS', 'HTTP_HOST', 'HTTP_X_CUSTOM', 'HTTP_COOKIE',
    'HTTP_ACCEPT', 'CUSTOM'];
foreach ($keys as $k) {
    echo $k, "=", $_SERVER[$k] ?? '(unset)', "\n";
}
