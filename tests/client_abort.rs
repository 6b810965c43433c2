//! A client that closes its connection while its request waits ends the
//! request, as NGINX's `ngx_http_test_reading` and upstream connection
//! check: during a `limit_req` delay, and while a proxied request waits
//! for the upstream's answer (`proxy_ignore_client_abort off`, the
//! default). Its `limit_conn` slot is freed at once, so the next request
//! of the key passes. nginx behaves the same on the same configuration.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;

const HTTP: &str = "limit_req_zone $binary_remote_addr zone=req:1m rate=30r/m;
    limit_conn_zone $binary_remote_addr zone=conn:1m;";

const SERVER: &str = "
    location /w { limit_req zone=req burst=10; return 200 \"w\\n\"; }
    location /p { limit_conn conn 1; proxy_pass http://127.0.0.1:{PORT}/w; }
    location /keep { limit_conn conn 1; proxy_ignore_client_abort on;
                     proxy_pass http://127.0.0.1:{PORT}/w; }
    location /one { limit_conn conn 1; return 200 \"one\\n\"; }";

/// Starts `path` on a new connection and leaves it waiting.
fn start(port: u16, path: &str) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    s
}

/// `/one`'s status while a proxied request of the same key waits, and
/// just after its client closed; then the same with
/// `proxy_ignore_client_abort on`.
fn statuses(port: u16) -> Vec<u16> {
    get(port, "/w");
    let waiting = start(port, "/p");
    let mut seen = vec![get(port, "/one").status];
    drop(waiting);
    std::thread::sleep(Duration::from_millis(300));
    seen.push(get(port, "/one").status);
    let kept = start(port, "/keep");
    drop(kept);
    std::thread::sleep(Duration::from_millis(300));
    seen.push(get(port, "/one").status);
    seen
}

#[test]
fn a_closed_client_frees_its_connection_slot() {
    let (p, n) = both(HTTP, SERVER);
    let t = Instant::now();
    assert_eq!(statuses(p.port), [503, 200, 503]);
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    let log = p.read("logs/error.log");
    assert!(
        log.contains("client prematurely closed connection, so upstream connection is closed too"),
        "{log}"
    );
    if let Some(n) = n {
        assert_eq!(statuses(n.port), [503, 200, 503]);
    }
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
