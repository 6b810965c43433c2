<?php
// A status set by PHP, with or without a reason phrase.
$code = (int)($_GET['code'] ?? 200);
if (isset($_GET['raw'])) {
    header('Status: ' . $_GET['raw']);
} else {
    http_response_code($code);
}
if (isset($_GET['location'])) {
    header('Location: ' . $_GET['location']);
}
if ($code != 204 && $code != 304) {
    echo "status $code\n";
}
