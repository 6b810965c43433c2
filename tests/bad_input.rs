//! Malformed requests get the right 4xx/5xx, the connection is closed
//! safely, and the server keeps serving; `TRACE` is NGINX's 405, beside
//! Debian's nginx (`tests/common/beside.rs`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use crate::common::beside::{self, Both};
use crate::common::differential::{self, req, Cases};
use crate::common::*;

fn server() -> (TempDir, Server) {
    let root = TempDir::new("bad");
    root.write("a.txt", "ok\n");
    let s = Server::start(&http_conf(&format!(
        "    root {};\n",
        root.path().display()
    )));
    (root, s)
}

/// Sends `req`, expects `status` with `Connection: close`, then EOF.
fn expect_close(port: u16, req: &[u8], status: u16) {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(req).unwrap();
    let mut buf = Vec::new();
    let r = read_response(&mut c, &mut buf, false)
        .unwrap_or_else(|| panic!("no response to {:?}", String::from_utf8_lossy(req)));
    assert_eq!(
        r.status,
        status,
        "request {:?}",
        String::from_utf8_lossy(req)
    );
    assert_eq!(
        r.header("Connection"),
        Some("close"),
        "{:?}",
        String::from_utf8_lossy(req)
    );
    assert!(r.header("Content-Type") == Some("text/html"));
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut rest = Vec::new();
    let _ = c.read_to_end(&mut rest);
    assert!(rest.is_empty(), "data after the error response");
}

#[test]
fn malformed_requests_get_400_and_close() {
    let (_r, s) = server();
    let cases: &[&[u8]] = &[
        b"get /a.txt HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /a.txt HTTP/1.1\r\n\r\n",
        b"GET /a.txt HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
        b"GET /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"GET /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
        b"GET /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
        b"GET /a.txt HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n",
        b"GET /a.txt HTTP/1.1\r\nHost: x\r\nX: a\0b\r\n\r\n",
        b"GET /a\0.txt HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET a.txt HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /a.txt HTTP/1.1\r\nHost: bad/host\r\n\r\n",
        b"GET /a.txt HTTP/1.1\r\nBad Header: x\r\nHost: x\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
        b"GET /../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n",
    ];
    for req in cases {
        expect_close(s.port, req, 400);
    }
    // Still serving.
    assert_eq!(get(s.port, "/a.txt").status, 200);
}

#[test]
fn limits_and_versions() {
    let (_r, s) = server();
    let mut long_uri = b"GET /".to_vec();
    long_uri.extend(std::iter::repeat_n(b'a', 9000));
    long_uri.extend(b" HTTP/1.1\r\nHost: x\r\n\r\n");
    expect_close(s.port, &long_uri, 414);
    let mut long_header = b"GET /a.txt HTTP/1.1\r\nHost: x\r\nX-Big: ".to_vec();
    long_header.extend(std::iter::repeat_n(b'b', 9000));
    long_header.extend(b"\r\n\r\n");
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.write_all(&long_header).unwrap();
    let mut buf = Vec::new();
    let r = read_response(&mut c, &mut buf, false).unwrap();
    assert_eq!(r.status, 400);
    assert!(
        r.text()
            .contains("<title>400 Request Header Or Cookie Too Large</title>"),
        "{}",
        r.text()
    );
    expect_close(s.port, b"GET /a.txt HTTP/2.0\r\nHost: x\r\n\r\n", 505);
    expect_close(
        s.port,
        b"GET /a.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
        501,
    );
    // A request line split across many writes still parses.
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    for b in b"GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" {
        c.write_all(&[*b]).unwrap();
    }
    let mut buf = Vec::new();
    assert_eq!(read_response(&mut c, &mut buf, false).unwrap().status, 200);
}

#[test]
fn garbage_and_abrupt_clients_do_not_hurt_the_server() {
    let (_r, s) = server();
    // Random bytes, half-sent requests and immediate closes.
    let mut seed: u64 = 0x9e3779b97f4a7c15;
    for i in 0..200 {
        let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        let len = (i * 37) % 600 + 1;
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed & 0xff) as u8
            })
            .collect();
        let _ = c.write_all(&bytes);
        if i % 3 == 0 {
            let _ = c.write_all(b"\r\n\r\n");
            let mut junk = [0u8; 1024];
            c.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            let _ = c.read(&mut junk);
        }
    }
    for _ in 0..20 {
        let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        c.write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n").unwrap();
    }
    assert_eq!(get(s.port, "/a.txt").status, 200);
    assert!(s.child.id() > 0);
}

#[test]
fn malformed_requests_answer_as_nginx() {
    differential::compare("malformed requests", |root, c| {
        malformed_cases(root, c);
        oversized_and_odd_cases(root, c);
    });
}

#[test]
fn porter_refuses_what_nginx_tolerates() {
    differential::compare("deliberate differences", stricter_cases);
}

/// Malformed heads: method, Host, framing headers, folding, NUL bytes,
/// versions.
fn malformed_cases(_root: &Path, c: &mut Cases) {
    let raw = |s: &str| vec![s.as_bytes().to_vec()];
    c.same(
        "lowercase method",
        raw("get /txt/a.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
    );
    c.same(
        "missing Host on HTTP/1.1",
        raw("GET /txt/a.txt HTTP/1.1\r\nConnection: close\r\n\r\n"),
    );
    c.same(
        "duplicate Host",
        raw("GET /txt/a.txt HTTP/1.1\r\nHost: localhost\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
    );
    c.same(
        "empty Host",
        raw("GET /txt/a.txt HTTP/1.1\r\nHost:\r\nConnection: close\r\n\r\n"),
    );
    c.same(
        "Host with a slash",
        raw("GET /txt/a.txt HTTP/1.1\r\nHost: bad/host\r\nConnection: close\r\n\r\n"),
    );
    c.same(
        "Content-Length and Transfer-Encoding",
        raw("POST /txt/a.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n"),
    );
    c.same(
        "invalid Content-Length",
        raw("GET /txt/a.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: abc\r\nConnection: close\r\n\r\n"),
    );
    c.same(
        "duplicate Content-Length",
        raw("GET /txt/a.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
    );
    c.same(
        "Transfer-Encoding gzip",
        raw("POST /txt/a.txt HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\nConnection: close\r\n\r\n"),
    );
    c.same(
        "obs-fold",
        raw("GET /txt/a.txt HTTP/1.1\r\nHost: localhost\r\nX-Folded: a\r\n  b\r\nConnection: close\r\n\r\n"),
    );
    c.same(
        "NUL in a header value",
        vec![b"GET /txt/a.txt HTTP/1.1\r\nHost: localhost\r\nX-Nul: a\0b\r\nConnection: close\r\n\r\n".to_vec()],
    );
    c.same(
        "NUL in the request line",
        vec![b"GET /txt/a\0.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".to_vec()],
    );
    c.same(
        "HTTP/2.0 in the request line",
        raw("GET /txt/a.txt HTTP/2.0\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
    );
    c.same(
        "HTTP/1.2 (treated as 1.1)",
        raw("GET /txt/a.txt HTTP/1.2\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
    );
    c.same(
        "garbage version",
        raw("GET /txt/a.txt HTTX/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
    );
}

/// Heads over the limits, odd but valid forms, odd Hosts and versions.
fn oversized_and_odd_cases(_root: &Path, c: &mut Cases) {
    let a = "/txt/a.txt";
    let raw = |s: &str| vec![s.as_bytes().to_vec()];
    let long_uri = format!("/{}", "a".repeat(9000));
    c.same("URI over 8k (414)", vec![req("GET", &long_uri, "")]);
    c.same(
        "header line over 8k",
        vec![req("GET", a, &format!("X-Long: {}\r\n", "b".repeat(9000)))],
    );
    let many: String = (0..8)
        .map(|i| format!("X-Big-{i}: {}\r\n", "c".repeat(5000)))
        .collect();
    c.same("head over 32k", vec![req("GET", a, &many)]);
    let lots: String = (0..500).map(|i| format!("X-H{i}: v\r\n")).collect();
    c.same("500 short header lines", vec![req("GET", a, &lots)]);
    c.same(
        "leading empty lines",
        raw("\r\n\r\nGET /txt/a.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
    );
    c.same(
        "bare LF line endings",
        raw("GET /txt/a.txt HTTP/1.1\nHost: localhost\nConnection: close\n\n"),
    );
    c.same(
        "URI not starting with /",
        raw("GET txt/a.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
    );
    c.same(
        "mixed-case header names",
        raw("GET /txt/a.txt HTTP/1.1\r\nhOsT: localhost\r\nCONNECTION: close\r\n\r\n"),
    );
    c.same(
        "Host with port",
        raw("GET /sub HTTP/1.1\r\nHost: localhost:1234\r\nConnection: close\r\n\r\n"),
    );
    for host in [
        ".localhost",
        "localhost.",
        "LOCALHOST",
        "a\\b",
        "x:y:z",
        "[::1]:80",
        "a..b",
        "a b",
        ".",
    ] {
        c.same(
            &format!("Host {host:?}"),
            vec![
                format!("GET /sub HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
                    .into_bytes(),
            ],
        );
    }
    c.same(
        "empty Host on HTTP/1.0",
        raw("GET /txt/a.txt HTTP/1.0\r\nHost:\r\n\r\n"),
    );
    for v in [
        "HTTP/1.00",
        "HTTP/1.999",
        "HTTP/1.1000",
        "HTTP/01.1",
        "HTTP/0.9",
        "HTTP/1.",
        "HTTP/2",
        "HTTP/10.0",
    ] {
        c.same(
            &format!("version {v}"),
            vec![
                format!("GET /txt/a.txt {v}\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                    .into_bytes(),
            ],
        );
    }
}

/// Deliberate differences: porter refuses what nginx tolerates.
fn stricter_cases(_root: &Path, c: &mut Cases) {
    let raw = |s: &str| vec![s.as_bytes().to_vec()];
    c.stricter(
        "header line without a colon",
        raw("GET /txt/a.txt HTTP/1.1\r\nHost: localhost\r\nNoColonHere\r\nConnection: close\r\n\r\n"),
        "a header line without ':' is malformed (RFC 9112 5); nginx silently ignores it",
    );
    c.stricter(
        "double space in the request line",
        raw("GET  /txt/a.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
        "the request line is method SP target SP version (RFC 9112 3); nginx skips extra spaces",
    );
    c.stricter(
        "trailing space after the version",
        raw("GET /txt/a.txt HTTP/1.1 \r\nHost: localhost\r\nConnection: close\r\n\r\n"),
        "nothing may follow the version (RFC 9112 3); nginx skips trailing spaces",
    );
    c.stricter(
        "HTTP/0.9 request",
        raw("GET /txt/a.txt\r\n"),
        "porter does not speak HTTP/0.9; nginx answers with a bare body",
    );
    c.stricter(
        "URI not UTF-8 after percent-decoding",
        raw("GET /txt/%ff.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
        "porter keeps URIs as UTF-8 text; nginx maps any bytes to a file name",
    );
    c.stricter(
        "raw non-UTF-8 byte in the URI",
        vec![
            b"GET /txt/\xff.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".to_vec(),
        ],
        "porter keeps URIs as UTF-8 text; nginx maps any bytes to a file name",
    );
}

#[test]
fn trace_is_405() {
    let b = Both::start("", "location / { return 200 ok; }", 0);
    for (who, port) in b.ports() {
        let r = beside::ask(
            port,
            "TRACE / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(r.status, 405, "{who}");
    }
}
