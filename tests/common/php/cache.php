<?php
// The app behind tests/fastcgi_cache.rs: counts the requests for each
// name `n` (per server port, in COUNTER_DIR) and answers with the cache
// headers the query asks for; `validators` answers 304 to a matching
// If-None-Match / If-Modified-Since (counted apart as NAME.cond).
$dir = $_SERVER['COUNTER_DIR'] . '/' . $_SERVER['SERVER_PORT'];
@mkdir($dir, 0777, true);
$n = preg_replace('/[^a-z0-9_]/', '', $_GET['n'] ?? 'x');
function bump($path) {
    $f = fopen($path, 'c+');
    flock($f, LOCK_EX);
    $c = (int)stream_get_contents($f) + 1;
    ftruncate($f, 0);
    rewind($f);
    fwrite($f, (string)$c);
    flock($f, LOCK_UN);
    fclose($f);
    return $c;
}
if (isset($_GET['sleep'])) {
    usleep((int)$_GET['sleep'] * 1000);
}
$etag = '"v1"';
$lm = 'Mon, 02 Jan 2023 03:04:05 GMT';
if (isset($_GET['validators'])) {
    if (!isset($_GET['lmonly'])) {
        header('ETag: ' . $etag);
    }
    header('Last-Modified: ' . $lm);
    $inm = $_SERVER['HTTP_IF_NONE_MATCH'] ?? '';
    $ims = $_SERVER['HTTP_IF_MODIFIED_SINCE'] ?? '';
    if ($inm === $etag || ($inm === '' && $ims === $lm)) {
        bump("$dir/$n.cond");
        http_response_code(304);
        exit;
    }
}
$c = bump("$dir/$n.count");
if (isset($_GET['code'])) {
    http_response_code((int)$_GET['code']);
}
if (isset($_GET['cc'])) {
    header('Cache-Control: ' . $_GET['cc']);
}
if (isset($_GET['xae'])) {
    header('X-Accel-Expires: ' . $_GET['xae']);
}
if (isset($_GET['expires'])) {
    header('Expires: ' . gmdate('D, d M Y H:i:s', time() + (int)$_GET['expires']) . ' GMT');
}
if (isset($_GET['cookie'])) {
    setcookie('k', 'v');
}
header('Content-Type: text/plain');
header('X-Count: ' . $c);
if (isset($_GET['short'])) {
    // Announces more than it sends: a short answer, never to be stored.
    header('Content-Length: 100');
    echo "short\n";
    exit;
}
echo "n=$n count=$c method={$_SERVER['REQUEST_METHOD']}\n";
