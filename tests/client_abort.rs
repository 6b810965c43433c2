//! A client that closes its connection while its request waits ends the
//! request, as NGINX's `ngx_http_test_reading` and upstream connection
//! check: during a `limit_req` delay, and while a proxied request waits
//! for the upstream's answer (`proxy_ignore_client_abort off`, the
//! default), so its `limit_conn` slot is freed at once (limit_conn.t, vendored,
//! checks that against porter).

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::*;

const HTTP: &str = "limit_req_zone $binary_remote_addr zone=req:1m rate=30r/m;
    limit_conn_zone $binary_remote_addr zone=conn:1m;";

// `/w` is served by the static handler (a 404): a `return` would answer
// in the rewrite phase, before `limit_req`.
const SERVER: &str = "
    location /w { limit_req zone=req burst=10; }
    location /p { limit_conn conn 1; proxy_pass http://127.0.0.1:{PORT}/w; }
";

/// Starts `path` on a new connection and leaves it waiting.
fn start(port: u16, path: &str) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    s
}

#[test]
fn a_proxied_request_ends_when_its_client_closes() {
    let (p, _n) = both(HTTP, SERVER);
    get(p.port, "/w");
    let t = Instant::now();
    drop(start(p.port, "/p"));
    let log = p.wait_log(
        "logs/error.log",
        "so upstream connection is closed too",
        Duration::from_secs(1),
    );
    assert!(
        log.contains("client prematurely closed connection, so upstream connection is closed too"),
        "{log}"
    );
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn a_delayed_request_ends_when_its_client_closes() {
    let (p, _n) = both(HTTP, SERVER);
    get(p.port, "/w");
    drop(start(p.port, "/w"));
    let log = p.wait_log(
        "logs/error.log",
        "client prematurely closed connection",
        Duration::from_secs(1),
    );
    assert!(log.contains("delaying request"), "{log}");
    assert!(
        log.contains("client prematurely closed connection"),
        "{log}"
    );
}
