//! `listen ... udp` in `stream` (src/stream/udp.rs, udp_session.rs): UDP
//! sessions beside Debian's nginx 1.22 on the same configuration — a
//! DNS-like exchange with `proxy_responses 1` and several clients at once
//! kept apart, `proxy_timeout` ending sessions (200, or 502 with answers
//! missing) and their access-log lines, `return` as one datagram, round
//! robin over two UDP peers, a graceful stop waiting for a session's next
//! upstream datagram — and, porter's alone, `worker_connections` counting
//! UDP sessions and the configuration errors of `listen ... udp`. The
//! vendored nginx-tests `stream_udp_*.t` files check the rest.

use crate::common::*;
use std::net::UdpSocket;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Debian's stream module (dynamic there).
const STREAM_SO: &str = "/work/nginx-mods/usr/lib/nginx/modules/ngx_stream_module.so";

/// A UDP peer answering each datagram with it, after `delay`, prefixed
/// with `PORT:` (its own port) when `tag`.
fn udp_peer(tag: bool, delay: Duration) -> u16 {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = s.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        while let Ok((n, from)) = s.recv_from(&mut buf) {
            std::thread::sleep(delay);
            let mut out = if tag {
                format!("{port}:").into_bytes()
            } else {
                Vec::new()
            };
            out.extend_from_slice(&buf[..n]);
            let _ = s.send_to(&out, from);
        }
    });
    port
}

fn echo() -> u16 {
    udp_peer(false, Duration::ZERO)
}

fn client() -> UdpSocket {
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    c
}

/// The next datagram `c` gets, or `-` when none comes in time.
fn answer(c: &UdpSocket) -> String {
    let mut buf = [0u8; 65536];
    match c.recv(&mut buf) {
        Ok(n) => String::from_utf8_lossy(&buf[..n]).into_owned(),
        Err(_) => "-".into(),
    }
}

fn ask(c: &UdpSocket, port: u16, data: &str) -> String {
    c.send_to(data.as_bytes(), ("127.0.0.1", port)).unwrap();
    answer(c)
}

/// porter or nginx running a test's configuration.
enum Proc {
    Porter(Server),
    Nginx(Child, TempDir),
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Proc::Nginx(c, _) = self {
            stop_child(c, 15);
        }
    }
}

/// One server under test: its process and the UDP ports of `{U0}`, `{U1}`.
struct Under {
    proc: Proc,
    udp: Vec<u16>,
}

impl Under {
    fn prefix(&self) -> &Path {
        match &self.proc {
            Proc::Porter(s) => s.prefix.path(),
            Proc::Nginx(_, d) => d.path(),
        }
    }

    fn child(&mut self) -> &mut Child {
        match &mut self.proc {
            Proc::Porter(s) => &mut s.child,
            Proc::Nginx(c, _) => c,
        }
    }

    /// The access log `rel` once it has `n` lines (5 s at most: porter
    /// writes from its log thread), its lines sorted.
    fn log(&self, rel: &str, n: usize) -> String {
        let path = self.prefix().join(rel);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if text.lines().count() >= n || Instant::now() > deadline {
                let mut lines: Vec<_> = text.lines().map(str::to_string).collect();
                lines.sort();
                return lines.join("\n");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The `stream` block's servers: `body`, `{U0}`… made free ports, and a
/// TCP server on `{PORT}` that says the process is up.
fn stream_block(body: &str, udp: &[u16]) -> String {
    let mut b = body.to_string();
    for (i, p) in udp.iter().enumerate() {
        b = b.replace(&format!("{{U{i}}}"), &p.to_string());
    }
    format!("stream {{\nserver {{ listen 127.0.0.1:{{PORT}}; return up; }}\n{b}\n}}\n")
}

fn start_porter(body: &str, ports: usize) -> Under {
    let udp: Vec<u16> = (0..ports).map(|_| free_port()).collect();
    let conf = format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\nevents {{}}\n{}",
        stream_block(body, &udp)
    );
    let proc = Proc::Porter(Server::start(&conf));
    Under { proc, udp }
}

/// Debian's nginx with its stream module, or `None` when either is missing.
fn start_nginx(body: &str, ports: usize) -> Option<Under> {
    if !Path::new(NGINX).exists() || !Path::new(STREAM_SO).exists() {
        return None;
    }
    let udp: Vec<u16> = (0..ports).map(|_| free_port()).collect();
    let dir = TempDir::new("nginx-udp");
    std::fs::create_dir_all(dir.path().join("logs")).unwrap();
    let port = free_port();
    let p = dir.path().display().to_string();
    let text = format!(
        "load_module {STREAM_SO};\ndaemon off;\nworker_processes 1;\npid {p}/nginx.pid;\n\
         error_log {p}/logs/error.log info;\nevents {{ worker_connections 256; }}\n{}",
        stream_block(body, &udp)
            .replace("{PORT}", &port.to_string())
            .replace("{PREFIX}", &p)
    );
    let conf = dir.write("nginx.conf", text);
    let child = Command::new(NGINX)
        .arg("-p")
        .arg(dir.path())
        .arg("-e")
        .arg(dir.path().join("logs/error.log"))
        .arg("-c")
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let proc = Proc::Nginx(child, dir);
    assert!(
        wait_port(port, Duration::from_secs(10)),
        "nginx did not start"
    );
    Some(Under { proc, udp })
}

/// Runs `run` on porter, then on nginx when installed, and asserts both
/// told the same; porter's transcript.
fn both(body: &str, ports: usize, run: impl Fn(&mut Under) -> String) -> String {
    let got = run(&mut start_porter(body, ports));
    match start_nginx(body, ports) {
        Some(mut n) => assert_eq!(got, run(&mut n), "porter, then nginx"),
        None => eprintln!("nginx or its stream module missing: porter's transcript only"),
    }
    got
}

const LOG: &str = "log_format u \"$protocol $status $bytes_sent $bytes_received \
                   $upstream_bytes_sent $upstream_bytes_received\";";

#[test]
fn dns_like_exchanges_keep_clients_apart_and_log_as_nginx() {
    let b = echo();
    let body = format!(
        "{LOG}\nserver {{ listen 127.0.0.1:{{U0}} udp; proxy_pass 127.0.0.1:{b};\n\
         proxy_responses 1; access_log {{PREFIX}}/logs/u.log u; }}"
    );
    let got = both(&body, 1, |u| {
        let mut out = vec![ask(&client(), u.udp[0], "query-0")];
        // Four clients at once: each gets its own answer.
        let cs: Vec<_> = (1..5).map(|_| client()).collect();
        for (i, c) in cs.iter().enumerate() {
            let q = format!("query-{}{}", i + 1, "x".repeat(i));
            c.send_to(q.as_bytes(), ("127.0.0.1", u.udp[0])).unwrap();
        }
        out.extend(cs.iter().map(answer));
        out.push(u.log("logs/u.log", 5));
        out.join("\n")
    });
    let want = "query-0\nquery-1\nquery-2x\nquery-3xx\nquery-4xxx\n\
                UDP 200 10 10 10 10\nUDP 200 7 7 7 7\nUDP 200 7 7 7 7\n\
                UDP 200 8 8 8 8\nUDP 200 9 9 9 9";
    assert_eq!(got, want);
}

#[test]
fn proxy_timeout_ends_sessions_200_or_502_with_answers_missing_as_nginx() {
    let b = echo();
    let body = format!(
        "{LOG}\nproxy_timeout 1s;\n\
         server {{ listen 127.0.0.1:{{U0}} udp; proxy_pass 127.0.0.1:{b};\n\
         access_log {{PREFIX}}/logs/u.log u; }}\n\
         server {{ listen 127.0.0.1:{{U1}} udp; proxy_pass 127.0.0.1:{b};\n\
         proxy_responses 2; access_log {{PREFIX}}/logs/u.log u; }}"
    );
    let got = both(&body, 2, |u| {
        let t = Instant::now();
        let (c, c2) = (client(), client());
        // Two datagrams in one session: it lasts until the timeout.
        let mut out = vec![ask(&c, u.udp[0], "a"), ask(&c, u.udp[0], "bc")];
        out.push(ask(&c2, u.udp[1], "xyz"));
        let log = u.log("logs/u.log", 2);
        let took = t.elapsed();
        assert!(took >= Duration::from_millis(900), "{took:?}");
        out.push(log);
        out.join("\n")
    });
    assert_eq!(got, "a\nbc\nxyz\nUDP 200 3 3 3 3\nUDP 502 3 3 3 3");
}

#[test]
fn return_answers_with_one_datagram_as_nginx() {
    let body = format!(
        "{LOG}\nserver {{ listen 127.0.0.1:{{U0}} udp;\n\
         return \"$protocol $remote_addr:$remote_port $server_port\";\n\
         access_log {{PREFIX}}/logs/u.log u; }}"
    );
    let got = both(&body, 1, |u| {
        let c = client();
        let me = c.local_addr().unwrap().port();
        let fix = |s: String| {
            s.replace(&me.to_string(), "CLIENT")
                .replace(&u.udp[0].to_string(), "SERVER")
        };
        let out = [
            fix(ask(&c, u.udp[0], "hello")),
            // The session ended with its answer: this one is the next.
            fix(ask(&c, u.udp[0], "again!")),
            c.set_read_timeout(Some(Duration::from_millis(300)))
                .map_or("-".into(), |_| answer(&c)),
            u.log("logs/u.log", 2),
        ];
        out.join("\n")
    });
    assert_eq!(
        got,
        "UDP 127.0.0.1:CLIENT SERVER\nUDP 127.0.0.1:CLIENT SERVER\n-\n\
         UDP 200 25 5 - -\nUDP 200 25 6 - -"
    );
}

#[test]
fn round_robin_spreads_udp_sessions_over_two_peers_as_nginx() {
    let (b1, b2) = (
        udp_peer(true, Duration::ZERO),
        udp_peer(true, Duration::ZERO),
    );
    let body = format!(
        "upstream u {{ server 127.0.0.1:{b1}; server 127.0.0.1:{b2}; }}\n\
         server {{ listen 127.0.0.1:{{U0}} udp; proxy_pass u; proxy_responses 1; }}"
    );
    let got = both(&body, 1, |u| {
        let out: Vec<_> = (0..4)
            .map(|i| ask(&client(), u.udp[0], &i.to_string()))
            .collect();
        out.join(" ")
    });
    assert_eq!(got, format!("{b1}:0 {b2}:1 {b1}:2 {b2}:3"));
}

#[test]
fn a_refused_peer_answers_empty_and_counts_as_failed_as_nginx() {
    let live = udp_peer(true, Duration::ZERO);
    let dead = free_port();
    let body = format!(
        "log_format up \"$status $upstream_addr $bytes_sent\";\n\
         upstream u {{ server 127.0.0.1:{dead}; server 127.0.0.1:{live}; }}\n\
         server {{ listen 127.0.0.1:{{U0}} udp; proxy_pass u; proxy_responses 1;\n\
         access_log {{PREFIX}}/logs/u.log up; }}"
    );
    let got = both(&body, 1, |u| {
        // No next peer for a datagram: the ICMP error is an empty answer,
        // and the peer's failure keeps it out of the next sessions.
        let out: Vec<_> = (0..4)
            .map(|i| ask(&client(), u.udp[0], &i.to_string()))
            .collect();
        format!("{}\n{}", out.join(" "), u.log("logs/u.log", 4))
    });
    let want = format!(
        " {live}:1 {live}:2 {live}:3\n200 127.0.0.1:{dead} 0\n\
         200 127.0.0.1:{live} 7\n200 127.0.0.1:{live} 7\n200 127.0.0.1:{live} 7"
    );
    assert_eq!(got, want);
}

#[test]
fn a_graceful_stop_ends_a_udp_session_at_its_next_upstream_datagram_as_nginx() {
    let late = udp_peer(false, Duration::from_millis(1500));
    let body = format!(
        "{LOG}\nserver {{ listen 127.0.0.1:{{U0}} udp; proxy_pass 127.0.0.1:{late};\n\
         proxy_timeout 20s; access_log {{PREFIX}}/logs/u.log u; }}"
    );
    let got = both(&body, 1, |u| {
        let c = client();
        c.send_to(b"late", ("127.0.0.1", u.udp[0])).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let t = Instant::now();
        unsafe { libc::kill(u.child().id() as i32, libc::SIGQUIT) };
        assert!(
            wait_child(u.child(), Duration::from_secs(10)),
            "still running"
        );
        let took = t.elapsed();
        // Not at once (the session runs on), not at its timeout (the
        // peer's answer ends it, and goes nowhere).
        assert!(took >= Duration::from_millis(800), "{took:?}");
        assert!(took < Duration::from_secs(8), "{took:?}");
        c.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        format!("{}\n{}", answer(&c), u.log("logs/u.log", 1))
    });
    assert_eq!(got, "-\nUDP 200 0 4 4 0");
}

#[test]
fn udp_sessions_count_in_worker_connections() {
    let b = echo();
    let conf = format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\nevents {{ worker_connections 2; }}\n\
         stream {{ server {{ listen 127.0.0.1:{{PORT}}; return up; }}\n\
         server {{ listen 127.0.0.1:{{U0}} udp; proxy_pass 127.0.0.1:{b}; proxy_timeout 3s; }} }}"
    );
    let u0 = free_port();
    let porter = Server::start(&conf.replace("{U0}", &u0.to_string()));
    // The start-up probe's TCP session ended; two UDP sessions fill the
    // worker, the third client's datagram is dropped.
    std::thread::sleep(Duration::from_millis(200));
    let cs: Vec<_> = (0..3).map(|_| client()).collect();
    assert_eq!(ask(&cs[0], u0, "one"), "one");
    assert_eq!(ask(&cs[1], u0, "two"), "two");
    cs[2]
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    assert_eq!(ask(&cs[2], u0, "three"), "-");
    let log = porter.wait_log(
        "logs/error.log",
        "2 worker_connections are not enough",
        Duration::from_secs(5),
    );
    assert!(log.contains("2 worker_connections are not enough"), "{log}");
    // A session's own next datagram still goes through.
    assert_eq!(ask(&cs[0], u0, "one more"), "one more");
}

#[test]
fn listen_udp_refuses_tcp_only_parameters_as_nginx() {
    let dir = TempDir::new("stream-udp-conf");
    for (param, name) in [
        ("backlog=10", "backlog"),
        ("so_keepalive=on", "so_keepalive"),
        ("proxy_protocol", "proxy_protocol"),
        ("fastopen=5", "fastopen"),
    ] {
        let text = format!(
            "events {{}}\nstream {{\nserver {{ listen 127.0.0.1:1 udp {param}; return x; }}\n}}\n"
        );
        let path = dir.write("bad.conf", text);
        let out = run(&["-t", "-c", path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        let want = format!("\"{name}\" parameter is incompatible with \"udp\"");
        assert!(err.contains(&want) && err.contains("bad.conf:3"), "{err}");
    }
}
