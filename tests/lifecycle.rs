//! Process life as NGINX users expect it: daemon and pid file, `-s`,
//! graceful and fast shutdown, reload (good and bad configs), worker limits,
//! privilege drop, and the log formats.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

const SIGHUP: i32 = 1;
const SIGQUIT: i32 = 3;
const SIGTERM: i32 = 15;

fn root_with_big_file() -> TempDir {
    let root = TempDir::new("life");
    root.write("a.txt", "ok\n");
    root.write("big.bin", vec![b'x'; 48 * 1024 * 1024]);
    root
}

fn conf(root: &TempDir, extra_server: &str, extra_main: &str) -> String {
    http_conf(&format!(
        "    root {};\n{extra_server}",
        root.path().display()
    ))
    .replace("daemon off;\n", &format!("daemon off;\n{extra_main}\n"))
}

/// Starts a download of big.bin and reads only its head, so the request
/// stays in flight (the server blocks on a full socket).
fn start_slow_download(port: u16) -> (TcpStream, usize) {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = c.read(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200 OK"));
    let head_end = buf[..n].windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    (c, n - head_end)
}

fn finish_download(mut c: TcpStream, already: usize) -> usize {
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut total = already;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => return total,
            Ok(n) => {
                total += n;
                if total >= 48 * 1024 * 1024 {
                    return total;
                }
            }
        }
    }
}

#[test]
fn pid_file_written_after_bind_and_removed_at_exit() {
    let root = root_with_big_file();
    let mut s = Server::start(&conf(&root, "", ""));
    let pid = s.read("porter.pid");
    assert_eq!(pid.trim(), s.child.id().to_string());
    s.signal(SIGTERM);
    let st = s
        .wait_exit(Duration::from_secs(5))
        .expect("exit on SIGTERM");
    assert!(st.success());
    assert!(!s.prefix.path().join("porter.pid").exists());
    let log = s.read("logs/error.log");
    assert!(log.contains("[notice]") && log.contains("exit"), "{log}");
}

#[test]
fn daemon_on_forks_and_signal_option_stops_it() {
    let root = root_with_big_file();
    let prefix = TempDir::new("daemon");
    std::fs::create_dir_all(prefix.path().join("logs")).unwrap();
    let port = free_port();
    let text =
        config_text(&conf(&root, "", ""), port, prefix.path()).replace("daemon off;", "daemon on;");
    prefix.write("porter.conf", &text);
    let p = prefix.path().to_str().unwrap();
    let status = Command::new(BIN)
        .args(["-p", p, "-c", "porter.conf"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(
        status.success(),
        "the foreground process exits 0 after forking"
    );
    assert!(wait_port(port, Duration::from_secs(5)));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !prefix.path().join("porter.pid").exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let pid: i32 = std::fs::read_to_string(prefix.path().join("porter.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    assert_eq!(get(port, "/a.txt").status, 200);
    let out = run(&["-p", p, "-c", "porter.conf", "-s", "stop"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::path::Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!prefix.path().join("porter.pid").exists());
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
    let out = run(&["-p", p, "-c", "porter.conf", "-s", "reload"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("porter.pid\" failed (2: No such file or directory)"));
}

#[test]
fn sigquit_finishes_in_flight_requests() {
    let root = root_with_big_file();
    let mut s = Server::start(&conf(&root, "", ""));
    let (c, got) = start_slow_download(s.port);
    s.signal(SIGQUIT);
    // No longer accepting (soon: the signal is handled on the master's
    // loop, on a busy machine not within a fixed time), but the download
    // completes.
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", s.port)).is_ok() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(TcpStream::connect(("127.0.0.1", s.port)).is_err());
    assert_eq!(finish_download(c, got), 48 * 1024 * 1024);
    let st = s
        .wait_exit(Duration::from_secs(10))
        .expect("exit after SIGQUIT");
    assert!(st.success());
}

#[test]
fn sigquit_closes_idle_keep_alive_connections_and_lets_new_ones_ask() {
    let root = root_with_big_file();
    let mut s = Server::start(&conf(&root, "", ""));
    // Idle between keep-alive requests.
    let mut idle = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    idle.write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    assert_eq!(
        read_response(&mut idle, &mut buf, false).unwrap().status,
        200
    );
    // Accepted, no byte sent yet.
    let mut fresh = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    let (c, got) = start_slow_download(s.port);
    std::thread::sleep(Duration::from_millis(200));
    s.signal(SIGQUIT);
    // The idle one is closed at once (not at `keepalive_timeout`).
    let t = Instant::now();
    assert!(read_all(&mut idle).is_empty());
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    // The new one still gets its answer, and then the connection closes.
    fresh
        .write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    let r = read_response(&mut fresh, &mut buf, false).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("connection"), Some("close"));
    assert_eq!(finish_download(c, got), 48 * 1024 * 1024);
    drop(fresh);
    let st = s
        .wait_exit(Duration::from_secs(10))
        .expect("exit after SIGQUIT");
    assert!(st.success());
}

#[test]
fn worker_shutdown_timeout_caps_graceful_shutdown() {
    let root = root_with_big_file();
    let mut s = Server::start(&conf(&root, "", "worker_shutdown_timeout 1s;"));
    let (c, _) = start_slow_download(s.port);
    let t = Instant::now();
    s.signal(SIGQUIT);
    s.wait_exit(Duration::from_secs(10)).expect("exit");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    drop(c);
}

#[test]
fn sigterm_is_fast() {
    let root = root_with_big_file();
    let mut s = Server::start(&conf(&root, "", ""));
    let (_c, _) = start_slow_download(s.port);
    let t = Instant::now();
    s.signal(SIGTERM);
    s.wait_exit(Duration::from_secs(5))
        .expect("exit on SIGTERM");
    assert!(t.elapsed() < Duration::from_secs(2));
}

#[test]
fn reload_applies_a_good_config_and_keeps_in_flight_connections() {
    let root = root_with_big_file();
    let s = Server::start(&conf(
        &root,
        "    location /v { return 200 \"one\"; }\n",
        "",
    ));
    assert_eq!(get(s.port, "/v").text(), "one");
    let (c, got) = start_slow_download(s.port);
    let text = config_text(
        &conf(&root, "    location /v { return 200 \"two\"; }\n", ""),
        s.port,
        s.prefix.path(),
    );
    s.prefix.write("porter.conf", text);
    s.signal(SIGHUP);
    let deadline = Instant::now() + Duration::from_secs(5);
    while get(s.port, "/v").text() != "two" {
        assert!(Instant::now() < deadline, "reload did not apply");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(finish_download(c, got), 48 * 1024 * 1024);
    let log = s.wait_log("logs/error.log", "reconfigured", Duration::from_secs(3));
    assert!(
        log.contains("signal 1 (SIGHUP) received, reconfiguring"),
        "{log}"
    );
}

#[test]
fn reload_with_a_bad_config_keeps_the_old_one() {
    let root = root_with_big_file();
    let s = Server::start(&conf(
        &root,
        "    location /v { return 200 \"one\"; }\n",
        "",
    ));
    let good = s.read("porter.conf");
    let bad = good.replace("location /v {", "location /v {\n bogus_directive 1;\n");
    s.prefix.write("porter.conf", &bad);
    s.signal(SIGHUP);
    let log = s.wait_log("logs/error.log", "bogus_directive", Duration::from_secs(5));
    let line = bad
        .lines()
        .position(|l| l.contains("bogus_directive"))
        .unwrap()
        + 1;
    let want = format!("[emerg] {}#", s.child.id());
    assert!(log.contains(&want), "{log}");
    assert!(
        log.contains(&format!(
            "unknown directive \"bogus_directive\" (not an NGINX directive either: a typo, or a third-party module's) in {}:{line}",
            s.prefix.path().join("porter.conf").display()
        )),
        "{log}"
    );
    assert_eq!(get(s.port, "/v").text(), "one");
}

#[test]
fn worker_connections_is_enforced() {
    let root = root_with_big_file();
    let s = Server::start(
        &conf(&root, "", "")
            .replace("worker_connections 256;", "worker_connections 4;")
            .replace("worker_processes 2;", "worker_processes 1;"),
    );
    let held: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
            c.write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
                .unwrap();
            let mut buf = Vec::new();
            assert_eq!(read_response(&mut c, &mut buf, false).unwrap().status, 200);
            // Inside its next head: not reusable (an idle keep-alive
            // connection would be reclaimed for the fifth, as in NGINX).
            c.write_all(b"GET /a.txt HTTP/1.1\r\n").unwrap();
            c
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    // The fifth is accepted and closed at once.
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    let _ = c.write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(read_all(&mut c).is_empty());
    let log = s.wait_log(
        "logs/error.log",
        "worker_connections are not enough",
        Duration::from_secs(3),
    );
    assert!(log.contains("4 worker_connections are not enough"), "{log}");
    drop(held);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(get(s.port, "/a.txt").status, 200);
}

#[test]
fn rlimit_nofile_is_applied() {
    let root = root_with_big_file();
    let s = Server::start(&conf(&root, "", "worker_rlimit_nofile 12345;"));
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", s.child.id())).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    assert!(line.contains("12345"), "{line}");
}

/// The nice value of each worker thread (`porter-wN`) of process `pid`.
fn worker_nice(pid: u32) -> Vec<i64> {
    [
        thread_stat_field(pid, "porter-w0", 19),
        thread_stat_field(pid, "porter-w1", 19),
    ]
    .concat()
}

#[test]
fn worker_priority_sets_the_workers_nice_value() {
    if !rustix_is_root() {
        eprintln!("not root: skipping worker_priority test");
        return;
    }
    let root = root_with_big_file();
    let s = Server::start(&conf(&root, "", "worker_priority -5; user nobody;"));
    assert_eq!(get(s.port, "/a.txt").status, 200);
    // The second worker may still be starting when the first answers.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut nice = worker_nice(s.child.id());
    while nice != [-5, -5] && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        nice = worker_nice(s.child.id());
    }
    assert_eq!(nice, vec![-5, -5]);
    // Not a number: NGINX's error, with the file and line.
    let dir = TempDir::new("wprio");
    let bad = dir.write("bad.conf", "events {}\nworker_priority high;\n");
    let out = common::run(&["-t", "-c", bad.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("\"worker_priority\" directive invalid number in")
            && err.contains("bad.conf:2"),
        "{err}"
    );
}

#[test]
fn user_drops_privileges_in_workers() {
    if !rustix_is_root() {
        eprintln!("not root: skipping privilege test");
        return;
    }
    let root = root_with_big_file();
    root.write("private.txt", "secret");
    set_mode(&root.path().join("private.txt"), 0o600);
    let s = Server::start(&conf(&root, "", "user nobody;"));
    assert_eq!(get(s.port, "/a.txt").status, 200);
    assert_eq!(get(s.port, "/private.txt").status, 403);
    let log = s.wait_log(
        "logs/error.log",
        "Permission denied",
        Duration::from_secs(3),
    );
    assert!(
        log.contains("private.txt\" failed (13: Permission denied)"),
        "{log}"
    );
    // Worker threads run as nobody; the master thread keeps root.
    let pid = s.child.id();
    let mut saw_worker = false;
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let t = t.unwrap().path();
        let comm = std::fs::read_to_string(t.join("comm")).unwrap();
        let status = std::fs::read_to_string(t.join("status")).unwrap();
        let uid = status
            .lines()
            .find(|l| l.starts_with("Uid:"))
            .unwrap()
            .to_string();
        if comm.starts_with("porter-w") {
            saw_worker = true;
            assert!(uid.contains("65534"), "{comm}: {uid}");
        }
    }
    assert!(saw_worker);
}

fn rustix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
}

#[test]
fn access_and_error_log_formats() {
    let root = root_with_big_file();
    let s = Server::start(
        &conf(
            &root,
            "    location /custom { access_log {PREFIX}/logs/custom.log short; return 200 \"c\"; }\n",
            "",
        )
        .replace(
            "  access_log {PREFIX}/logs/access.log;",
            "  access_log {PREFIX}/logs/access.log;\n  log_format short '$request_method $uri $status $arg_q \"$http_x_test\"';",
        ),
    );
    get_with(
        s.port,
        "/a.txt?x=1",
        "User-Agent: tester/1.0\r\nReferer: http://ref/\r\n",
    );
    get_with(s.port, "/custom?q=9", "X-Test: va\"l\r\n");
    get(s.port, "/missing");
    let access = s.wait_log("logs/access.log", "/missing", Duration::from_secs(3));
    let line = access.lines().find(|l| l.contains("/a.txt")).unwrap();
    // combined: $remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"
    let re_ok = line.starts_with("127.0.0.1 - - [")
        && line.contains("] \"GET /a.txt?x=1 HTTP/1.1\" 200 3 \"http://ref/\" \"tester/1.0\"");
    assert!(re_ok, "{line}");
    assert!(
        access.contains("\"GET /missing HTTP/1.1\" 404 "),
        "{access}"
    );
    let custom = s.wait_log("logs/custom.log", "GET", Duration::from_secs(3));
    assert_eq!(custom, "GET /custom 200 9 \"va\\x22l\"\n");
    let err = s.wait_log("logs/error.log", "/missing", Duration::from_secs(3));
    let line = err.lines().find(|l| l.contains("/missing")).unwrap();
    // 2026/11/22 08:00:00 [error] PID#TID: *N open() "..." failed (2: ...), client: ..., server: ..., request: "...", host: "..."
    let b = line.as_bytes();
    assert!(
        b[4] == b'/' && b[7] == b'/' && b[10] == b' ' && b[13] == b':' && b[16] == b':',
        "{line}"
    );
    assert!(
        line[19..].starts_with(&format!(" [error] {}#", s.child.id())),
        "{line}"
    );
    assert!(line.contains(": *"), "{line}");
    assert!(
        line.ends_with(", client: 127.0.0.1, server: , request: \"GET /missing HTTP/1.1\", host: \"localhost\""),
        "{line}"
    );
}
