<?php
// Reads the request body as a stream and answers its length and MD5.
$in = fopen('php://input', 'rb');
$ctx = hash_init("crc32b");
$n = 0;
while (!feof($in)) {
    $chunk = fread($in, 1 << 16);
    if ($chunk === false) { break; }
    $n += strlen($chunk);
    hash_update($ctx, $chunk);
}
echo "bytes=$n crc32=", hash_final($ctx), "\n";
