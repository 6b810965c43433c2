//! `keepalive_disable`: by default a POST from MSIE up to 6 closes its
//! connection; `safari` closes Safari's on Mac OS X after any request;
//! `none` keeps both. nginx answers the same configuration the same.

use crate::common::*;

const SERVER: &str = "server { listen 127.0.0.1:{PORT}; server_name localhost;
    location / { return 200 \"ok\\n\"; }
    location /safari { keepalive_disable safari; return 200 \"ok\\n\"; }
    location /none { keepalive_disable none; return 200 \"ok\\n\"; } }";

/// The `Connection` header of each request (method, path, User-Agent).
fn connection_headers(port: u16) -> Vec<String> {
    let cases = [
        (
            "POST",
            "/",
            "Mozilla/4.0 (compatible; MSIE 5.0; Windows 98)",
        ),
        ("GET", "/", "Mozilla/4.0 (compatible; MSIE 5.0; Windows 98)"),
        (
            "POST",
            "/",
            "Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)",
        ),
        (
            "POST",
            "/",
            "Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1; SV1)",
        ),
        ("POST", "/", "Mozilla/4.0 (compatible; MSIE 7.0)"),
        ("GET", "/", "Mac OS X Safari/7534.48.3"),
        ("GET", "/safari", "Mac OS X Safari/7534.48.3"),
        ("GET", "/safari", "Mac OS X Chrome/90 Safari/7534.48.3"),
        ("POST", "/none", "MSIE 5.0; Windows"),
    ];
    cases
        .iter()
        .map(|(m, p, ua)| {
            let req = format!(
                "{m} {p} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: {ua}\r\nContent-Length: 0\r\n\r\n"
            );
            let r = raw(port, req.as_bytes());
            format!("{m} {p} {ua}: {}", r.header("connection").unwrap_or("-"))
        })
        .collect()
}

#[test]
fn the_browsers_named_get_their_connection_closed() {
    let s = Server::start(&one_worker_conf(SERVER));
    let porter = connection_headers(s.port);
    let closed: Vec<bool> = porter.iter().map(|l| l.ends_with("close")).collect();
    assert_eq!(
        closed,
        [true, false, true, false, false, false, true, false, false],
        "{porter:#?}"
    );
    match Nginx::start(SERVER) {
        Some(n) => assert_eq!(porter, connection_headers(n.port)),
        None => eprintln!("skipped the comparison: nginx is not installed"),
    }
}

#[test]
fn an_unknown_browser_is_nginx_s_error() {
    let conf = one_worker_conf("server { listen 127.0.0.1:1; keepalive_disable opera; }");
    let e = config_error(&conf);
    assert!(e.contains("invalid value \"opera\""), "{e}");
}
