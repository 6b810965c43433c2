<?php
// A streamed download: MB megabytes of a repeated pattern, flushed as it goes.
header('Content-Type: application/octet-stream');
$mb = (int)($_GET['mb'] ?? 1);
$block = str_repeat('0123456789abcdef', 65536);
for ($i = 0; $i < $mb; $i++) {
    echo $block;
    flush();
}
