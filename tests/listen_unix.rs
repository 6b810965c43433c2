//! `listen unix:PATH`: HTTP on a UNIX-domain socket, as NGINX serves it.
//! The addresses a client there sees (`$remote_addr` `unix:`,
//! `$server_addr` `unix:PATH`, empty ports), `allow`/`deny unix:` and
//! `set_real_ip_from unix:` are compared with Debian's nginx running the
//! same configuration; the socket file's life (made at start, kept by a
//! reload, removed when a reload drops it and when the server stops, a
//! stale file refused at start) is checked on porter.

use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::*;

/// One server on the socket (in the directory `{SOCK}`), reached directly
/// and through a TCP server that proxies to it.
const HTTP: &str = r#"
    server {
        listen unix:{SOCK}/u.sock;
        location /vars {
            return 200 "ra=$remote_addr rp=$remote_port sa=$server_addr sp=$server_port bra=$binary_remote_addr rra=$realip_remote_addr\n";
        }
        # No `return` here: it would answer before the access phase. Let
        # in, the request finds no file (404).
        location /allow_unix { allow unix:; deny all; }
        location /deny_unix { deny unix:; }
        location /deny_v4 { deny 0.0.0.0/0; }
        # realip in a location runs after `return`'s phase: a header
        # on the 404 shows what it did.
        location /realip {
            set_real_ip_from unix:;
            add_header X-IP "ra=$remote_addr rra=$realip_remote_addr" always;
        }
        location /no_realip {
            set_real_ip_from 127.0.0.1;
            add_header X-IP "ra=$remote_addr" always;
        }
        location /redirect { return 302 /there; }
    }
    server {
        listen 127.0.0.1:{PORT};
        location / {
            proxy_pass http://unix:{SOCK}/u.sock:/;
            proxy_set_header X-Real-IP 192.0.2.7;
        }
    }
"#;

/// A request over the socket at `path`; the whole answer.
fn over_unix(path: &Path, req: &str) -> String {
    let mut s = UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// A request over TCP to `port`; the whole answer.
fn over_tcp(port: u16, req: &str) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Status line, `Location` and body (of a 200: error pages name the
/// server) of an answer, the socket's directory named as `{PREFIX}`.
fn essence(answer: &str, prefix: &Path) -> String {
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((answer, ""));
    let status = head.lines().next().unwrap_or("");
    let header = |name: &str| {
        head.lines()
            .find(|l| l.to_ascii_lowercase().starts_with(name))
            .unwrap_or("")
    };
    let location = format!("{} {}", header("location:"), header("x-ip:"));
    let body = if status.contains(" 200 ") { body } else { "" };
    format!("{status} | {location} | {body}").replace(prefix.to_str().unwrap(), "{PREFIX}")
}

const PATHS: &[&str] = &[
    "/vars",
    "/allow_unix",
    "/deny_unix",
    "/deny_v4",
    "/realip",
    "/no_realip",
    "/redirect",
];

#[test]
fn answers_on_a_unix_socket_as_nginx() {
    let (n_dir, p_dir) = (TempDir::new("unix-nginx"), TempDir::new("unix-porter"));
    let (n_prefix, p_prefix) = (n_dir.path(), p_dir.path());
    let http = |dir: &Path| HTTP.replace("{SOCK}", dir.to_str().unwrap());
    let Some(nginx) = Nginx::start(&http(n_prefix)) else {
        eprintln!("skipped: {NGINX} is not installed");
        return;
    };
    let porter = Server::start(&one_worker_conf(&http(p_prefix)));
    for path in PATHS {
        let req = format!("GET {path} HTTP/1.0\r\nHost: h\r\n\r\n");
        // Directly on the socket.
        let want = essence(&over_unix(&n_prefix.join("u.sock"), &req), n_prefix);
        let got = essence(&over_unix(&p_prefix.join("u.sock"), &req), p_prefix);
        assert_eq!(got, want, "{path} on the socket");
        // Through the TCP server's proxy_pass (X-Real-IP set).
        let want = essence(&over_tcp(nginx.port, &req), n_prefix);
        let got = essence(&over_tcp(porter.port, &req), p_prefix);
        assert_eq!(got, want, "{path} proxied");
    }
    // What nginx answered, spelled out (so the comparison cannot pass on
    // two empty answers).
    let req = "GET /vars HTTP/1.0\r\n\r\n";
    let sock = p_prefix.join("u.sock");
    let got = over_unix(&sock, req);
    assert!(
        got.ends_with(&format!(
            "ra=unix: rp= sa=unix:{} sp= bra=unix: rra=unix:\n",
            sock.display()
        )),
        "{got}"
    );
    assert!(over_unix(&sock, "GET /deny_unix HTTP/1.0\r\n\r\n").contains(" 403 "));
    assert!(over_unix(&sock, "GET /allow_unix HTTP/1.0\r\n\r\n").contains(" 404 "));
    let realip = over_tcp(porter.port, "GET /realip HTTP/1.0\r\n\r\n");
    assert!(
        realip.contains("\r\nX-IP: ra=192.0.2.7 rra=unix:\r\n"),
        "{realip}"
    );
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

const LIFE: &str = r#"
    server {
        listen 127.0.0.1:{PORT};
        listen unix:{PREFIX}/a.sock;
        return 200 "a\n";
    }
"#;

#[test]
fn the_socket_file_is_made_kept_by_reload_and_removed_at_stop() {
    let dir = TempDir::new("unix-life");
    let conf = one_worker_conf(LIFE);
    let mut porter = Server::start_in(dir, &conf, &[]);
    let sock = porter.prefix.path().join("a.sock");
    assert!(sock.exists(), "socket file made at start");
    let ino = std::fs::metadata(&sock).unwrap().ino();
    assert!(over_unix(&sock, "GET / HTTP/1.0\r\n\r\n").ends_with("\r\n\r\na\n"));

    // A reload with the same listen keeps the socket (and its file).
    let text = std::fs::read_to_string(porter.prefix.path().join("porter.conf")).unwrap();
    porter
        .prefix
        .write("porter.conf", text.replace("\"a\\n\"", "\"b\\n\""));
    porter.signal(1);
    wait_until("the reload", || {
        over_unix(&sock, "GET / HTTP/1.0\r\n\r\n").ends_with("\r\n\r\nb\n")
    });
    assert_eq!(
        std::fs::metadata(&sock).unwrap().ino(),
        ino,
        "same socket file"
    );

    // A reload that moves the listen removes the old file, makes the new.
    let text = std::fs::read_to_string(porter.prefix.path().join("porter.conf")).unwrap();
    porter
        .prefix
        .write("porter.conf", text.replace("a.sock", "c.sock"));
    porter.signal(1);
    let moved = porter.prefix.path().join("c.sock");
    wait_until("the second reload", || moved.exists() && !sock.exists());
    assert!(over_unix(&moved, "GET / HTTP/1.0\r\n\r\n").ends_with("\r\n\r\nb\n"));

    // A graceful stop removes it.
    porter.signal(3);
    assert!(porter.wait_exit(Duration::from_secs(10)).is_some());
    assert!(!moved.exists(), "socket file removed at stop");
}

#[test]
fn a_stale_socket_file_is_refused_as_nginx_does() {
    let dir = TempDir::new("unix-stale");
    std::fs::create_dir_all(dir.path().join("logs")).unwrap();
    std::os::unix::net::UnixListener::bind(dir.path().join("a.sock")).unwrap();
    let conf = config_text(&one_worker_conf(LIFE), free_port(), dir.path());
    let conf = dir.write("porter.conf", conf);
    let out = run(&[
        "-p",
        dir.path().to_str().unwrap(),
        "-c",
        conf.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let want = format!(
        "bind() to unix:{}/a.sock failed (98: Address already in use)",
        dir.path().display()
    );
    assert!(err.contains(&want), "{err}");
}
