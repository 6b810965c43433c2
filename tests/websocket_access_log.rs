//! The access log of an upgraded connection (NGINX's proxy_upgrade.t,
//! checks 29–31), porter beside Debian's nginx (skipped, saying so, when
//! nginx is absent): `$bytes_sent` counts every byte the client read, the
//! head included, `$body_bytes_sent` what came through the tunnel, and
//! `$sent_http_connection` reads `upgrade`; a `101` the client did not ask
//! for goes out as a head alone (`$body_bytes_sent` 0), as nginx sends it.

use crate::common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{one_server_conf, Nginx, Server, TempDir};

/// A raw origin: answers each request head with a `101` and
/// `handshaked`, then echoes upper-cased until the client's side ends.
fn origin() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { return };
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match c.read(&mut b) {
                        Ok(1) => head.push(b[0]),
                        _ => return,
                    }
                }
                let reply = b"HTTP/1.1 101 Switching\r\nUpgrade: foo\r\n\
                    Connection: Upgrade\r\n\r\nhandshaked\r\n";
                if c.write_all(reply).is_err() {
                    return;
                }
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = c.read(&mut buf) {
                    if c.write_all(&buf[..n].to_ascii_uppercase()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// The location of proxy_upgrade.t, logging to `log`.
fn conf(origin: u16, log: &Path) -> (String, String) {
    // The log at the server's level: nginx's helper sets `access_log off`
    // at the http level.
    let http = "  log_format test \"$bytes_sent $body_bytes_sent $sent_http_connection\";";
    let body = format!(
        "    access_log {} test;\n    location / {{\n      proxy_pass http://127.0.0.1:{origin};\n      \
         proxy_http_version 1.1;\n      proxy_set_header Upgrade $http_upgrade;\n      \
         proxy_set_header Connection \"Upgrade\";\n      proxy_read_timeout 2s;\n    }}",
        log.display()
    );
    (http.to_string(), body)
}

/// Sends a request (with `Upgrade: foo` when `upgrade`), then `send`
/// once the head came, half-closes, and reads to the end: all the bytes
/// read, and the head's length.
fn exchange(port: u16, upgrade: bool, send: &[u8]) -> (Vec<u8>, usize) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let up = if upgrade { "Upgrade: foo\r\n" } else { "" };
    let req = format!("GET / HTTP/1.1\r\nHost: localhost\r\n{up}Connection: Upgrade\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut piece = [0u8; 4096];
    let head = loop {
        if let Some(i) = common::find(&got, b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut piece).unwrap();
        assert!(n > 0, "closed before the head");
        got.extend_from_slice(&piece[..n]);
    };
    assert!(got.starts_with(b"HTTP/1.1 101 "), "{got:?}");
    if upgrade {
        while !got.ends_with(b"handshaked\r\n") {
            let n = s.read(&mut piece).unwrap();
            assert!(n > 0, "closed before the origin's first bytes");
            got.extend_from_slice(&piece[..n]);
        }
        s.write_all(send).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        s.shutdown(Shutdown::Write).unwrap();
    }
    s.read_to_end(&mut got).unwrap();
    (got, head)
}

/// The log's lines once it has `n` (or after ten seconds).
fn lines(log: &Path, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let v: Vec<String> = text.lines().map(str::to_string).collect();
        if v.len() >= n || Instant::now() > deadline {
            return v;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Both exchanges against the server on `port`, checked against its log.
fn check(name: &str, port: u16, log: &Path) {
    let (got, head) = exchange(port, true, b"abc");
    assert!(got.ends_with(b"handshaked\r\nABC"), "{name}: {got:?}");
    let want = format!("{} {} upgrade", got.len(), got.len() - head);
    assert_eq!(lines(log, 1)[0], want, "{name}: upgraded");
    let (got, head) = exchange(port, false, b"");
    assert_eq!(got.len(), head, "{name}: an unasked 101 has no body");
    assert_eq!(
        lines(log, 2)[1],
        format!("{} 0 upgrade", got.len()),
        "{name}: unasked"
    );
}

#[test]
fn an_upgraded_connection_logs_the_bytes_the_client_read() {
    let origin = origin();
    let dir = TempDir::new("wslog");
    let (http, body) = conf(origin, &dir.path().join("porter.log"));
    let p = Server::start(&one_server_conf(&http, &body));
    check("porter", p.port, &dir.path().join("porter.log"));
    let (http, body) = conf(origin, &dir.path().join("nginx.log"));
    let server = format!(
        "{http}\nserver {{\n    listen 127.0.0.1:{{PORT}};\n    server_name localhost;\n{body}\n}}\n"
    );
    match Nginx::start(&server) {
        Some(n) => check("nginx", n.port, &dir.path().join("nginx.log")),
        None => eprintln!("nginx not installed: porter checked alone"),
    }
}
