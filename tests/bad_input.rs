//! Malformed requests get the right 4xx/5xx, the connection is closed
//! safely, and the server keeps serving.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::*;

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
