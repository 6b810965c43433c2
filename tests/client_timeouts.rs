//! Client timeouts against hostile clients over real sockets: a head
//! trickled a byte at a time (`client_header_timeout` bounds the whole
//! head), a request body held back from a static location, a reader that
//! stops (`send_timeout`). Each was a hole found by trying porter as an
//! attacker would (issue 12).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::*;

/// Reads until the server closes the connection or `limit` passes;
/// returns what was read and whether it closed (EOF or reset).
fn read_until_closed(s: &mut TcpStream, limit: Duration) -> (Vec<u8>, bool) {
    let deadline = Instant::now() + limit;
    let mut got = Vec::new();
    let mut b = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (got, false);
        }
        s.set_read_timeout(Some(left.min(Duration::from_millis(200))))
            .unwrap();
        match s.read(&mut b) {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(&b[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return (got, true),
        }
    }
}

/// Sends `bytes` one at a time, `pace` apart, until the server closes;
/// returns how long after the first byte the connection was seen closed
/// (`None`: still open after `limit`).
fn trickle(s: &mut TcpStream, bytes: &[u8], pace: Duration, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    s.set_read_timeout(Some(pace)).unwrap();
    let mut b = [0u8; 4096];
    for &c in bytes.iter().cycle() {
        if start.elapsed() > limit {
            return None;
        }
        if s.write_all(&[c]).is_err() {
            return Some(start.elapsed());
        }
        match s.read(&mut b) {
            Ok(0) => return Some(start.elapsed()),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return Some(start.elapsed()),
        }
    }
    None
}

#[test]
fn client_header_timeout_bounds_the_whole_head() {
    let srv = Server::start(&http_conf(
        "    client_header_timeout 2s;\n    location / { return 200 ok; }",
    ));
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").unwrap();
    // One header byte every 300 ms: each read comes well inside the
    // timeout, the whole head never does.
    let closed = trickle(
        &mut s,
        b"X-Slow: aaaaaaaaaaaaaaaaaaaaaaaa\r\n",
        Duration::from_millis(300),
        Duration::from_secs(8),
    );
    let t = closed.expect("a head trickled for 8 s was not closed with client_header_timeout 2s");
    assert!(t < Duration::from_secs(4), "closed after {t:?}");
    srv.wait_log(
        "logs/error.log",
        "client timed out (110: Connection timed out) while reading client request headers",
        Duration::from_secs(2),
    );

    // A keep-alive connection's next head gets its own deadline.
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    assert_eq!(read_response(&mut s, &mut buf, false).unwrap().status, 200);
    std::thread::sleep(Duration::from_millis(2500));
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").unwrap();
    let t = trickle(
        &mut s,
        b"X-Slow: a\r\n",
        Duration::from_millis(300),
        Duration::from_secs(8),
    )
    .expect("the second head was not timed out");
    assert!(t < Duration::from_secs(4), "closed after {t:?}");
}

fn static_conf(root: &std::path::Path, extra: &str) -> String {
    http_conf(&format!(
        "    root {};\n{extra}\n    location / {{ }}",
        root.display()
    ))
}

#[test]
fn held_back_body_to_a_static_file_is_answered_at_once() {
    let root = TempDir::new("hb");
    root.write("a.txt", "hello\n");
    let srv = Server::start(&static_conf(
        root.path(),
        "    lingering_time 3s;\n    lingering_timeout 1s;",
    ));
    // The body is announced, one byte sent: the 405 comes at once.
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.write_all(b"POST /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\nx")
        .unwrap();
    let t0 = Instant::now();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = Vec::new();
    let r = read_response(&mut s, &mut buf, false).expect("no answer while the body is held back");
    assert_eq!(r.status, 405);
    assert!(
        t0.elapsed() < Duration::from_secs(1),
        "answered after {:?}",
        t0.elapsed()
    );
    // Trickling the rest a byte every 200 ms: the discard ends with
    // lingering_time (3 s), not with the body.
    let closed = trickle(
        &mut s,
        b"y",
        Duration::from_millis(200),
        Duration::from_secs(10),
    );
    let t = closed.expect("a trickled body was drained for 10 s");
    assert!(t < Duration::from_secs(5), "closed after {t:?}");

    // A silent client is closed after lingering_timeout (1 s).
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n")
        .unwrap();
    let (got, closed) = read_until_closed(&mut s, Duration::from_secs(4));
    assert!(
        got.starts_with(b"HTTP/1.1 200 OK"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    assert!(closed, "a silent body was waited for more than 4 s");

    // A body that does arrive after the response is drained and the
    // connection carries the next request.
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(read_response(&mut s, &mut buf, false).unwrap().status, 200);
    s.write_all(b"12345GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let r = read_response(&mut s, &mut buf, false).expect("no second response");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"hello\n"[..]));
}

#[test]
fn a_reader_that_stops_is_reset_after_send_timeout() {
    let root = TempDir::new("slowread");
    root.write("big.bin", vec![b'x'; 32 << 20]);
    let srv = Server::start(&static_conf(
        root.path(),
        "    send_timeout 1s;\n    reset_timedout_connection on;",
    ));
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    // Read nothing while the send timeout runs out.
    std::thread::sleep(Duration::from_millis(3500));
    srv.wait_log(
        "logs/error.log",
        "client timed out (110: Connection timed out) while sending response to client",
        Duration::from_secs(2),
    );
    // What the kernel had buffered may arrive, then the reset: never the
    // whole file, never a clean end.
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = 0usize;
    let mut b = vec![0u8; 1 << 16];
    let end = loop {
        match s.read(&mut b) {
            Ok(0) => break "eof",
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break "reset",
            Err(e) => panic!("{e} after {got} bytes"),
        }
    };
    assert_eq!(end, "reset", "after {got} bytes");
    assert!(got < 32 << 20);
}

#[test]
fn header_timeout_resets_only_a_connection_that_sent_something() {
    // NGINX 1.22 resets (`reset_timedout_connection`) when a request timed
    // out; a connection that never sent a byte has no request: it times
    // out in `ngx_http_wait_request_handler` and closes with a FIN.
    let root = TempDir::new("hdrreset");
    root.write("a.txt", "hello\n");
    let srv = Server::start(&static_conf(
        root.path(),
        "    client_header_timeout 1s;\n    reset_timedout_connection on;",
    ));
    let end_of = |send: &[u8]| {
        let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        s.write_all(send).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut b = [0u8; 512];
        loop {
            match s.read(&mut b) {
                Ok(0) => return "eof",
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return "reset",
                Err(e) => panic!("{e}"),
            }
        }
    };
    assert_eq!(end_of(b""), "eof", "a connection that sent nothing");
    assert_eq!(end_of(b"GET /a.txt HTTP/1.1\r\n"), "reset", "a head begun");
}
