//! HTTP/1.0 and keep-alive: `keepalive_requests`, a connection kept after
//! error answers and request bodies, `Expect: 100-continue`, asked of
//! porter and of Debian's nginx on the same docroot
//! (`tests/common/differential.rs`); `keepalive_time`; `Expect:
//! 100-continue` with an empty body, proxied and on a file
//! (`tests/common/beside.rs`).

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use crate::common::beside::{self, Both};
use crate::common::differential::{self, etag_of, req, req_ka, Cases};
use crate::common::origin::{Origin, Reply};
use crate::common::{both, read_response};

#[test]
fn http_1_0_and_keep_alive_answer_as_nginx() {
    differential::compare("HTTP/1.0 and keep-alive", |root, c| {
        keepalive_cases(root, c);
        kept_connection_cases(root, c);
        expect_continue_cases(root, c);
    });
}

/// HTTP/1.0 with and without keep-alive, `keepalive_requests`.
fn keepalive_cases(_root: &Path, c: &mut Cases) {
    c.same(
        "HTTP/1.0 without Host",
        vec![b"GET /txt/a.txt HTTP/1.0\r\n\r\n".to_vec()],
    );
    c.same(
        "HTTP/1.0 directory redirect without Host (server_name)",
        vec![b"GET /sub HTTP/1.0\r\n\r\n".to_vec()],
    );
    c.same(
        "HTTP/1.0 keep-alive then close",
        vec![
            b"GET /txt/a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n".to_vec(),
            b"GET /one.txt HTTP/1.0\r\n\r\n".to_vec(),
            b"GET /one.txt HTTP/1.0\r\n\r\n".to_vec(),
        ],
    );
    c.same(
        "HTTP/1.0 HEAD",
        vec![b"HEAD /txt/a.txt HTTP/1.0\r\nHost: localhost\r\n\r\n".to_vec()],
    );
    c.same(
        "HTTP/1.1 keep-alive, second closes",
        vec![req_ka("GET", "/txt/a.txt", ""), req("GET", "/one.txt", "")],
    );
    c.same(
        "keepalive_requests 3 closes after the third",
        vec![
            req_ka("GET", "/txt/a.txt", ""),
            req_ka("HEAD", "/one.txt", ""),
            req_ka("GET", "/empty.txt", ""),
            req_ka("GET", "/txt/b.txt", ""),
        ],
    );
}

/// A connection kept after errors, redirects, 304s and request bodies,
/// or closed after a 400.
fn kept_connection_cases(root: &Path, c: &mut Cases) {
    let a = "/txt/a.txt";
    let et = etag_of(root, "txt/a.txt");
    c.same(
        "keep-alive after 404 and 403",
        vec![
            req_ka("GET", "/static/missing.css", ""),
            req_ka("GET", "/noindex/", ""),
            req("GET", "/txt/a.txt", ""),
        ],
    );
    c.same(
        "keep-alive after 405 with a body",
        vec![
            req_ka("POST", "/txt/a.txt", "Content-Length: 5\r\n\r\nhello")
                .strip_suffix(b"\r\n")
                .unwrap()
                .to_vec(),
            req("GET", "/one.txt", ""),
        ],
    );
    c.same(
        "keep-alive after 301 and 304",
        vec![
            req_ka("GET", "/sub", ""),
            req_ka("GET", a, &format!("If-None-Match: {et}\r\n")),
            req("GET", "/one.txt", ""),
        ],
    );
    c.same(
        "keep-alive, then 400 closes",
        vec![
            req_ka("GET", "/one.txt", ""),
            b"get /one.txt HTTP/1.1\r\nHost: localhost\r\n\r\n".to_vec(),
            req("GET", "/one.txt", ""),
        ],
    );
    c.same(
        "chunked request body on GET, then another request",
        vec![
            req_ka(
                "GET",
                "/one.txt",
                "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n",
            ),
            req("GET", "/txt/a.txt", ""),
        ],
    );
    c.same(
        "Connection: keep-alive on HTTP/1.1 with Range",
        vec![
            req_ka("GET", a, "Range: bytes=0-0,2-2\r\n"),
            req("GET", a, "Range: bytes=-3\r\n"),
        ],
    );
}

/// Expect: 100-continue is answered when a handler that reads or discards
/// the body runs, not for error pages. Each case sends a second request so
/// that both the interim and the final response are read.
fn expect_continue_cases(_root: &Path, c: &mut Cases) {
    for (t, extra) in [
        ("/one.txt", ""),
        ("/exact", ""),
        ("/moved", ""),
        ("/missing.txt", ""),
        ("/e200/missing", ""),
        ("/sub", ""),
        ("/sub/", ""),
        ("/one.txt", "Range: bytes=5-\r\n"),
        ("/one.txt", "If-Match: \"x\"\r\n"),
    ] {
        c.same(
            &format!("Expect: 100-continue on {t} {}", extra.trim_end()),
            vec![
                req_ka("GET", t, &format!("Expect: 100-continue\r\n{extra}")),
                req("GET", "/one.txt", ""),
            ],
        );
    }
    c.same(
        "Expect: 100-continue on HTTP/1.0",
        vec![
            b"GET /one.txt HTTP/1.0\r\nConnection: keep-alive\r\nExpect: 100-continue\r\n\r\n"
                .to_vec(),
            b"GET /one.txt HTTP/1.0\r\n\r\n".to_vec(),
        ],
    );
}

#[test]
fn keepalive_time_closes_after_the_next_request() {
    let (p, n) = both("keepalive_time 1s;", "location / { return 200 ok; }");
    let ports: Vec<u16> = std::iter::once(p.port)
        .chain(n.as_ref().map(|n| n.port))
        .collect();
    for port in ports {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut buf = Vec::new();
        let req = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
        s.write_all(req).unwrap();
        let r = read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!(r.header("connection"), Some("keep-alive"), "port {port}");
        std::thread::sleep(Duration::from_millis(1300));
        s.write_all(req).unwrap();
        let r = read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.header("connection"), Some("close"), "port {port}");
    }
}

#[test]
fn expect_100_continue_with_empty_body() {
    let origin = Origin::start(|_| Reply::ok(b"up"));
    let b = Both::start(
        "",
        "location /p/ { proxy_pass http://127.0.0.1:{ORIGIN}; }\nlocation / { root {DOCROOT}; }",
        origin.port,
    );
    for (who, port) in b.ports() {
        for path in ["/p/x", "/f.txt"] {
            let a = beside::raw_answer(
                port,
                &format!("POST {path} HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
            );
            if path == "/p/x" {
                assert!(
                    a.starts_with("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200"),
                    "{who}: {a}"
                );
            } else {
                // A POST to a file: refused before the body is asked for.
                assert!(a.starts_with("HTTP/1.1 405 "), "{who}: {a}");
            }
        }
    }
}
