<?php
// GET and POST forms, cookies, a header and a cookie set by PHP.
header('Content-Type: text/plain; charset=utf-8');
header('X-App: form');
setcookie('seen', 'yes', ['path' => '/', 'httponly' => true]);
echo "method=", $_SERVER['REQUEST_METHOD'], "\n";
ksort($_GET);
ksort($_POST);
ksort($_COOKIE);
foreach ($_GET as $k => $v) { echo "get $k=$v\n"; }
foreach ($_POST as $k => $v) { echo "post $k=$v\n"; }
foreach ($_COOKIE as $k => $v) { echo "cookie $k=$v\n"; }
