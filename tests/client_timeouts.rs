//! Hostile clients and broken origins over real sockets: a head trickled
//! a byte at a time, a request body held back from a static location,
//! ambiguous upstream framing, `Vary: *` in its less obvious forms, an
//! alias without its trailing slash, `Last-Modified` on a proxied error,
//! and the reason phrase of statuses NGINX's table leaves empty. Each was a
//! hole found by trying porter as an attacker would (issue 12).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::origin::*;
use common::*;

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

fn cache_conf(origin: u16) -> String {
    format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n  proxy_cache_path {{PREFIX}}/cache levels=1:2 keys_zone=one:1m;\n  \
           server {{\n    listen 127.0.0.1:{{PORT}};\n    server_name localhost;\n    \
             location / {{\n      proxy_pass http://127.0.0.1:{origin};\n      proxy_cache one;\n      \
               proxy_cache_valid 200 404 10m;\n      \
               add_header X-Cache $upstream_cache_status always;\n    }}\n    \
             location = /two {{ return 203 two; }}\n  }}\n}}\n"
    )
}

#[test]
fn ambiguous_upstream_framing_is_a_502_and_never_cached() {
    let cases: [(&str, &[u8], &str); 3] = [
        (
            "/dup",
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
            "upstream sent duplicate header line: \"Content-Length: 6\", previous value: \"Content-Length: 5\" while reading response header from upstream",
        ),
        (
            "/xchunked",
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: xchunked\r\n\r\nhello",
            "upstream sent \"Content-Length\" and \"Transfer-Encoding\" headers at the same time while reading response header from upstream",
        ),
        (
            "/gzip",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            "upstream sent unknown \"Transfer-Encoding\": \"gzip, chunked\" while reading response header from upstream",
        ),
    ];
    let origin = Origin::start(move |req| {
        let raw = cases
            .iter()
            .find(|c| c.0 == req.target)
            .map_or(&b""[..], |c| c.1);
        Reply::ok(b"").framing(Framing::Raw(raw.to_vec()))
    });
    let srv = Server::start(&cache_conf(origin.port));
    for (path, _, log) in cases {
        for round in 0..2 {
            let r = get(srv.port, path);
            assert_eq!(r.status, 502, "{path} round {round}");
            assert_ne!(r.header("X-Cache"), Some("HIT"), "{path}");
        }
        srv.wait_log("logs/error.log", log, Duration::from_secs(3));
    }
    assert_eq!(origin.count(), 6, "every request went to the origin");
}

#[test]
fn vary_star_anywhere_is_never_cached() {
    let origin = Origin::start(|req| {
        let r = Reply::ok(b"v").header("Cache-Control", "max-age=600");
        match req.target.as_str() {
            "/list" => r.header("Vary", "Accept-Encoding, *"),
            "/second" => r.header("Vary", "Accept-Encoding").header("Vary", "*"),
            _ => r.header("Vary", "Accept-Encoding"),
        }
    });
    let srv = Server::start(&cache_conf(origin.port));
    for path in ["/list", "/second"] {
        for _ in 0..2 {
            let r = get(srv.port, path);
            assert_eq!(r.status, 200);
            assert_ne!(r.header("X-Cache"), Some("HIT"), "{path}");
        }
    }
    assert_eq!(origin.count(), 4);
    // The control: a plain Vary is cached.
    get(srv.port, "/plain");
    assert_eq!(get(srv.port, "/plain").header("X-Cache"), Some("HIT"));
}

#[test]
fn alias_without_trailing_slash_does_not_leave_its_directory() {
    let root = TempDir::new("alias");
    root.write("img/a.png", "image");
    root.write("secret", "the secret");
    root.write("imgfoo.png", "sibling");
    let dir = root.path().display();
    let srv = Server::start(&http_conf(&format!(
        "    location /img {{ alias {dir}/img/; }}\n    location /pre {{ alias {dir}/img; }}"
    )));
    assert_eq!(get(srv.port, "/img/a.png").text(), "image");
    let r = get(srv.port, "/img../secret");
    assert_eq!(r.status, 404, "served {:?}", r.text());
    assert_eq!(get(srv.port, "/img..").status, 404);
    srv.wait_log(
        "logs/error.log",
        "/img/../secret\" is outside of the root or alias directory",
        Duration::from_secs(2),
    );
    // An alias without a slash is a prefix, as in NGINX: a sibling name
    // that only extends it stays allowed.
    assert_eq!(get(srv.port, "/prefoo.png").text(), "sibling");
    assert_eq!(get(srv.port, "/pre/a.png").text(), "image");
}

#[test]
fn proxied_error_keeps_its_last_modified_and_reason() {
    const LM: &str = "Tue, 01 Jan 2030 00:00:00 GMT";
    let origin = Origin::start(|req| {
        match req.target.as_str() {
        "/gone" => Reply::ok(b"no").status(404).header("Last-Modified", LM),
        "/moved" => Reply::ok(b"")
            .status(301)
            .header("Location", "/x")
            .header("Last-Modified", LM),
        _ => Reply::ok(b"").framing(Framing::Raw(
            format!("HTTP/1.1 203 Non-Authoritative Information\r\nLast-Modified: {LM}\r\nContent-Length: 2\r\n\r\nok")
                .into_bytes(),
        )),
    }
    });
    let srv = Server::start(&cache_conf(origin.port));
    for path in ["/gone", "/moved", "/info"] {
        let r = get(srv.port, path);
        assert_eq!(
            r.header("Last-Modified"),
            Some(LM),
            "{path}: {:?}",
            r.headers
        );
    }
    let r = get(srv.port, "/info");
    assert_eq!(r.status_line, "HTTP/1.1 203 Non-Authoritative Information");
    // porter's own 203 has a reason phrase too (NGINX sends "203 ").
    assert_eq!(
        get(srv.port, "/two").status_line,
        "HTTP/1.1 203 Non-Authoritative Information"
    );
}

/// Debian's nginx as the reference for the Last-Modified and status-line
/// bytes of a proxied 404 and 203.
#[test]
fn nginx_passes_last_modified_and_reason_as_porter_does() {
    const LM: &str = "Tue, 01 Jan 2030 00:00:00 GMT";
    let origin = Origin::start(|req| {
        match req.target.as_str() {
        "/gone" => Reply::ok(b"no").status(404).header("Last-Modified", LM),
        _ => Reply::ok(b"").framing(Framing::Raw(
            format!("HTTP/1.1 203 Non-Authoritative Information\r\nLast-Modified: {LM}\r\nContent-Length: 2\r\n\r\nok")
                .into_bytes(),
        )),
    }
    });
    let Some(nginx) = Nginx::start(&format!(
        "server {{ listen 127.0.0.1:{{PORT}}; location / {{ proxy_pass http://127.0.0.1:{}; }} }}",
        origin.port
    )) else {
        eprintln!("skipped: nginx is not installed");
        return;
    };
    let srv = Server::start(&cache_conf(origin.port));
    for path in ["/gone", "/info"] {
        let n = get(nginx.port, path);
        let p = get(srv.port, path);
        assert_eq!(n.header("Last-Modified"), Some(LM), "nginx {path}");
        assert_eq!(
            p.header("Last-Modified"),
            n.header("Last-Modified"),
            "{path}"
        );
        assert_eq!(p.status_line, n.status_line, "{path}");
    }
}

/// A worker at `worker_connections` 8 with one worker process.
fn small_worker_conf(server_body: &str) -> String {
    http_conf(server_body)
        .replace("worker_processes 2", "worker_processes 1")
        .replace("worker_connections 256", "worker_connections 8")
}

fn open_conns(port: u16, n: usize, send: &[u8]) -> Vec<TcpStream> {
    let v: Vec<TcpStream> = (0..n)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.write_all(send).unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    v
}

#[test]
fn silent_connections_at_the_limit_are_reclaimed_for_a_request() {
    let srv = Server::start(&small_worker_conf("    location / { return 200 ok; }"));
    // The worker is up and accepting.
    assert_eq!(get(srv.port, "/").status, 200);
    // Eight connections that never send a byte fill the worker.
    let _silent = open_conns(srv.port, 8, b"");
    for i in 0..5 {
        let r = try_raw(
            srv.port,
            b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(r.map(|r| r.status), Some(200), "request {i} kept out");
    }
    srv.wait_log(
        "logs/error.log",
        "8 worker_connections are not enough, reusing connections",
        Duration::from_secs(2),
    );
}

#[test]
fn refused_connections_are_logged_at_most_once_a_second() {
    let srv = Server::start(&small_worker_conf(
        "    client_header_timeout 30s;\n    location / { return 200 ok; }",
    ));
    assert_eq!(get(srv.port, "/").status, 200);
    // Eight connections inside their heads: nothing to reclaim.
    let _busy = open_conns(srv.port, 8, b"GET / HTTP/1.1\r\n");
    let t0 = Instant::now();
    for _ in 0..40 {
        let r = try_raw(
            srv.port,
            b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        assert!(r.is_none(), "a connection over the limit was served");
    }
    let secs = t0.elapsed().as_secs() as usize + 1;
    std::thread::sleep(Duration::from_millis(200));
    let log = srv.read("logs/error.log");
    let lines = log.matches("8 worker_connections are not enough").count();
    assert!(
        (1..=secs + 1).contains(&lines),
        "{lines} log lines for 40 refused connections in {secs} s"
    );
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
