<?php
// Writes its worker's pid where the test asks, then (with `part`) sends
// part of a streamed body, and waits for the test to kill the worker.
file_put_contents($_GET['pidfile'], (string)getmypid());
if (isset($_GET['part'])) {
    header('Content-Type: text/plain');
    echo str_repeat('x', 1000), "\n";
    flush();
}
sleep(30);
echo "never\n";
