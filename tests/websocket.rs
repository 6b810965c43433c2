//! WebSocket (any `Upgrade`) through `proxy_pass`, against the real binary
//! on loopback: a Python `websockets` echo server behind porter (and
//! behind Debian's nginx where the test compares; skipped, saying so, when
//! nginx is absent), and raw origins where the upstream must misbehave or
//! stay silent. Python's `websockets` is Debian's `python3-websockets`;
//! without it the tests that need it skip, unless
//! `PORTER_REQUIRE_WEBSOCKETS=1` (CI) makes that a failure.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{one_server_conf, support, Nginx, Server, TempDir};

const PYTHON: &str = "/usr/bin/python3";

/// The standard WebSocket location (nginx's documentation), with
/// `proxy_read_timeout` and the upstream's URL filled in.
fn ws_location(upstream: &str, read_timeout: &str) -> String {
    format!(
        "    location / {{\n      proxy_pass {upstream};\n      proxy_http_version 1.1;\n      \
         proxy_set_header Upgrade $http_upgrade;\n      \
         proxy_set_header Connection $connection_upgrade;\n      \
         proxy_read_timeout {read_timeout};\n    }}"
    )
}

const MAP: &str = "  map $http_upgrade $connection_upgrade { default upgrade; '' close; }";

/// Whether Python's `websockets` is there; `false` means skip (a failure
/// under `PORTER_REQUIRE_WEBSOCKETS=1`).
fn have_websockets() -> bool {
    let ok = Command::new(PYTHON)
        .args(["-c", "import websockets"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("PORTER_REQUIRE_WEBSOCKETS").is_none(),
            "python3-websockets is required (PORTER_REQUIRE_WEBSOCKETS)"
        );
        eprintln!("skipped: no python3-websockets (apt-get install python3-websockets)");
    }
    ok
}

/// The echo server, stopped by PID on drop.
struct Echo {
    child: Child,
    port: u16,
}

impl Echo {
    /// Starts `ws_echo.py` on a free port (TLS with `tls`: cert, key).
    fn start(tls: Option<(&Path, &Path)>) -> Echo {
        let port = common::free_port();
        let mut cmd = Command::new(PYTHON);
        cmd.arg(support("ws_echo.py")).arg(port.to_string());
        if let Some((c, k)) = tls {
            cmd.arg(c).arg(k);
        }
        let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready", "echo server did not start");
        Echo { child, port }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `ws_client.py URL ARGS...` within `limit`; its output.
fn client(url: &str, args: &[&str], limit: Duration) -> String {
    let mut child = Command::new(PYTHON)
        .arg(support("ws_client.py"))
        .arg(url)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ws_client.py {args:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "ws_client.py {args:?}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

fn porter(http_extra: &str, server_body: &str) -> Server {
    Server::start(&one_server_conf(http_extra, server_body))
}

/// Sends a WebSocket handshake (plus `extra` right behind it) and reads
/// the response head; the stream is left after the head, with what
/// followed it.
fn handshake(port: u16, extra: &[u8]) -> (TcpStream, String, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut req = b"GET /chat HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n\
        Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
        Sec-WebSocket-Version: 13\r\n\r\n"
        .to_vec();
    req.extend_from_slice(extra);
    s.write_all(&req).unwrap();
    let mut buf = Vec::new();
    let mut piece = [0u8; 4096];
    let end = loop {
        if let Some(i) = common::find(&buf, b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut piece).expect("no response head");
        assert!(
            n > 0,
            "closed before the head: {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&piece[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    (s, head, buf[end..].to_vec())
}

/// The head without the lines that differ by server (`Server`, `Date`).
fn comparable(head: &str) -> String {
    head.lines()
        .filter(|l| !l.starts_with("Server:") && !l.starts_with("Date:"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Reads until `want` bytes arrived (or the stream ends or stalls).
fn read_n(s: &mut TcpStream, have: &mut Vec<u8>, want: usize) {
    let mut piece = [0u8; 4096];
    while have.len() < want {
        match s.read(&mut piece) {
            Ok(0) | Err(_) => return,
            Ok(n) => have.extend_from_slice(&piece[..n]),
        }
    }
}

/// A raw origin: answers every request head with `reply`, then runs
/// `after` on the connection (a thread per connection).
fn raw_origin(reply: &'static [u8], after: fn(TcpStream)) -> u16 {
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
                if c.write_all(reply).is_ok() {
                    after(c);
                }
            });
        }
    });
    port
}

/// Echoes upper-cased; when the client's side ends, sends `bye` and closes.
fn upper_echo(mut c: TcpStream) {
    let mut b = [0u8; 4096];
    loop {
        match c.read(&mut b) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if c.write_all(&b[..n].to_ascii_uppercase()).is_err() {
                    return;
                }
            }
        }
    }
    let _ = c.write_all(b"bye");
}

/// Reads and drops everything, sending nothing.
fn silent(mut c: TcpStream) {
    let mut b = [0u8; 4096];
    while matches!(c.read(&mut b), Ok(n) if n > 0) {}
}

const SWITCH: &[u8] =
    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
const SWITCH_EARLY: &[u8] =
    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nEARLY";

#[test]
fn frames_of_1_byte_to_1_mib_ping_and_close_pass_both_ways() {
    if !have_websockets() {
        return;
    }
    let echo = Echo::start(None);
    let body = ws_location(&format!("http://127.0.0.1:{}", echo.port), "10s");
    let p = porter(MAP, &body);
    let url = format!("ws://127.0.0.1:{}/chat", p.port);
    let limit = Duration::from_secs(60);
    assert!(client(&url, &["frames"], limit).contains("ok frames"));
    assert!(client(&url, &["ping"], limit).contains("ok ping"));
    assert!(client(&url, &["close"], limit).contains("ok close 4001"));
    let log = p.wait_log("logs/error.log", "", Duration::ZERO);
    assert!(!log.contains("[error]"), "{log}");
    match Nginx::start(&format!(
        "{MAP}\n  server {{ listen 127.0.0.1:{{PORT}};\n{body}\n  }}"
    )) {
        Some(n) => {
            let url = format!("ws://127.0.0.1:{}/chat", n.port);
            assert!(client(&url, &["frames"], limit).contains("ok frames"));
            assert!(client(&url, &["close"], limit).contains("ok close 4001"));
        }
        None => eprintln!("nginx comparison skipped: {} is absent", common::NGINX),
    }
}

#[test]
fn the_101_head_is_nginxs_and_a_plain_request_is_proxied_as_before() {
    if !have_websockets() {
        return;
    }
    let echo = Echo::start(None);
    let body = ws_location(&format!("http://127.0.0.1:{}", echo.port), "10s");
    let p = porter(MAP, &body);
    let (_s, head, _) = handshake(p.port, b"");
    assert!(
        head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"),
        "{head}"
    );
    assert!(head.contains("\r\nConnection: upgrade\r\n"), "{head}");
    assert!(head.contains("\r\nUpgrade: websocket\r\n"), "{head}");
    assert!(head.contains("\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"));
    assert!(!head.contains("Content-Length"), "{head}");
    // A request without Upgrade: the echo server's own 426, as any
    // proxied response, on a connection kept alive.
    let plain = common::get(p.port, "/chat");
    assert_eq!(plain.status, 426);
    assert_eq!(plain.header("upgrade"), Some("websocket"));
    match Nginx::start(&format!(
        "{MAP}\n  server {{ listen 127.0.0.1:{{PORT}};\n{body}\n  }}"
    )) {
        Some(n) => {
            let (_s, nhead, _) = handshake(n.port, b"");
            assert_eq!(comparable(&head), comparable(&nhead));
            let nplain = common::get(n.port, "/chat");
            assert_eq!(nplain.status, plain.status);
            assert_eq!(nplain.header("upgrade"), plain.header("upgrade"));
        }
        None => eprintln!("nginx comparison skipped: {} is absent", common::NGINX),
    }
}

#[test]
fn bytes_sent_behind_either_head_go_first() {
    let origin = raw_origin(SWITCH_EARLY, upper_echo);
    let p = porter(
        "",
        &ws_location(&format!("http://127.0.0.1:{origin}"), "10s")
            .replace("$connection_upgrade", "\"upgrade\""),
    );
    let (mut s, head, mut rest) = handshake(p.port, b"hello");
    assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
    read_n(&mut s, &mut rest, 10);
    assert_eq!(rest, b"EARLYHELLO");
    s.write_all(b"more").unwrap();
    let mut more = Vec::new();
    read_n(&mut s, &mut more, 4);
    assert_eq!(more, b"MORE");
}

#[test]
fn a_half_close_passes_on_and_the_other_way_keeps_flowing() {
    // NGINX closes the whole tunnel when one side ends; porter passes the
    // half-close on (docs/differences.md), so the origin's last words
    // after the client stopped sending still arrive.
    let origin = raw_origin(SWITCH, upper_echo);
    let body = ws_location(&format!("http://127.0.0.1:{origin}"), "10s")
        .replace("$connection_upgrade", "\"upgrade\"");
    let p = porter("", &body);
    let (mut s, _, mut rest) = handshake(p.port, b"abc");
    read_n(&mut s, &mut rest, 3);
    assert_eq!(rest, b"ABC");
    s.shutdown(Shutdown::Write).unwrap();
    let mut tail = Vec::new();
    s.read_to_end(&mut tail).unwrap();
    assert_eq!(tail, b"bye");
}

#[test]
fn an_upgrade_the_client_did_not_ask_for_is_a_head_alone() {
    // NGINX 1.22 relays the 101 without a body ("TODO: prevent upgrade if
    // not requested"); porter too (proxy_upgrade.t), closing at once.
    let origin = raw_origin(SWITCH, silent);
    let body = ws_location(&format!("http://127.0.0.1:{origin}"), "10s")
        .replace("$connection_upgrade", "\"upgrade\"");
    let p = porter("", &body);
    let t0 = Instant::now();
    let r = common::get(p.port, "/chat");
    assert_eq!(r.status, 101);
    assert!(r.body.is_empty(), "{:?}", r.body);
    assert!(t0.elapsed() < Duration::from_secs(5));
}

/// Opens a tunnel to a silent origin and returns when it closes (or
/// after `limit`), the client sending a byte every 300 ms when `chatty`.
fn tunnel_lifetime(port: u16, chatty: bool, limit: Duration) -> Duration {
    let (mut s, head, _) = handshake(port, b"");
    assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
    let t0 = Instant::now();
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut b = [0u8; 64];
    while t0.elapsed() < limit {
        if chatty && s.write_all(b"x").is_err() {
            break;
        }
        match s.read(&mut b) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => break,
        }
    }
    t0.elapsed()
}

#[test]
fn a_tunnel_idle_for_proxy_read_timeout_closes_and_traffic_keeps_it_open() {
    let origin = raw_origin(SWITCH, silent);
    let body = ws_location(&format!("http://127.0.0.1:{origin}"), "1s")
        .replace("$connection_upgrade", "\"upgrade\"");
    let p = porter("", &body);
    let quiet = tunnel_lifetime(p.port, false, Duration::from_secs(6));
    assert!(
        quiet >= Duration::from_millis(800) && quiet < Duration::from_secs(3),
        "{quiet:?}"
    );
    let log = p.wait_log(
        "logs/error.log",
        "proxying upgraded",
        Duration::from_secs(3),
    );
    assert!(
        log.contains(
            "upstream timed out (110: Connection timed out) while proxying upgraded connection"
        ),
        "{log}"
    );
    // The client's bytes count as activity, as in NGINX (its upstream
    // read timer is re-armed by every event of the tunnel).
    let chatty = tunnel_lifetime(p.port, true, Duration::from_millis(2500));
    assert!(chatty >= Duration::from_millis(2400), "{chatty:?}");
    match Nginx::start(&format!(
        "  server {{ listen 127.0.0.1:{{PORT}};\n{body}\n  }}"
    )) {
        Some(n) => {
            let quiet = tunnel_lifetime(n.port, false, Duration::from_secs(6));
            assert!(quiet < Duration::from_secs(3), "nginx: {quiet:?}");
            let chatty = tunnel_lifetime(n.port, true, Duration::from_millis(2500));
            assert!(chatty >= Duration::from_millis(2400), "nginx: {chatty:?}");
        }
        None => eprintln!("nginx comparison skipped: {} is absent", common::NGINX),
    }
}

#[test]
fn tls_on_both_sides_wss_to_porter_and_proxy_pass_https() {
    if !have_websockets() {
        return;
    }
    let dir = TempDir::new("wss");
    let ca = common::tls::Ca::new();
    let (crt, key) = ca
        .leaf(&["localhost", "127.0.0.1"], common::tls::Alg::Ecdsa)
        .write(dir.path(), "leaf");
    let ca_file = dir.write("ca.pem", ca.pem());
    let echo = Echo::start(Some((&crt, &key)));
    let body = ws_location(&format!("https://127.0.0.1:{}", echo.port), "10s");
    let conf = one_server_conf(MAP, &body).replace(
        "listen 127.0.0.1:{PORT};",
        &format!(
            "listen 127.0.0.1:{{PORT}} ssl;\n    ssl_certificate {};\n    ssl_certificate_key {};",
            crt.display(),
            key.display()
        ),
    );
    let p = Server::start(&conf);
    let url = format!("wss://localhost:{}/chat", p.port);
    let ca = ca_file.to_str().unwrap();
    let limit = Duration::from_secs(60);
    assert!(client(&url, &["frames", ca], limit).contains("ok frames"));
    assert!(client(&url, &["ping", ca], limit).contains("ok ping"));
    assert!(client(&url, &["close", ca], limit).contains("ok close 4001"));
}

#[test]
fn a_thousand_sockets_at_once() {
    if !have_websockets() {
        return;
    }
    let echo = Echo::start(None);
    let body = ws_location(&format!("http://127.0.0.1:{}", echo.port), "30s");
    let conf = one_server_conf(MAP, &body)
        .replace("worker_connections 256;", "worker_connections 4096;")
        .replace(
            "worker_processes 1;",
            "worker_processes 1;\nworker_rlimit_nofile 8192;",
        );
    let p = Server::start(&conf);
    let url = format!("ws://127.0.0.1:{}/chat", p.port);
    let t0 = Instant::now();
    let out = client(&url, &["many", "1000"], Duration::from_secs(90));
    assert!(
        out.contains("ok open 1000") && out.contains("ok many 1000"),
        "{out}"
    );
    eprintln!("1000 sockets: {:?}", t0.elapsed());
}

#[test]
fn a_graceful_stop_waits_for_a_tunnel_up_to_worker_shutdown_timeout() {
    let origin = raw_origin(SWITCH, upper_echo);
    let body = ws_location(&format!("http://127.0.0.1:{origin}"), "30s")
        .replace("$connection_upgrade", "\"upgrade\"");
    let conf = one_server_conf("", &body).replace(
        "worker_processes 1;",
        "worker_processes 1;\nworker_shutdown_timeout 2s;",
    );
    let mut p = Server::start(&conf);
    let (mut s, _, mut rest) = handshake(p.port, b"a");
    read_n(&mut s, &mut rest, 1);
    assert_eq!(rest, b"A");
    let t0 = Instant::now();
    p.signal(3); // SIGQUIT: graceful
    std::thread::sleep(Duration::from_millis(500));
    // Still a tunnel while the worker drains.
    s.write_all(b"b").unwrap();
    let mut more = Vec::new();
    read_n(&mut s, &mut more, 1);
    assert_eq!(more, b"B");
    assert!(p.child.try_wait().unwrap().is_none(), "porter did not wait");
    // Closed when worker_shutdown_timeout runs out.
    let st = p.wait_exit(Duration::from_secs(10));
    assert!(st.is_some(), "porter did not stop");
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(1800) && took < Duration::from_secs(6),
        "{took:?}"
    );
}
