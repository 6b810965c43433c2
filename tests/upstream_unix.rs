//! Upstream servers on unix sockets, as NGINX takes them: `server
//! unix:PATH` in an `upstream` block (weights, keep-alive pool) and
//! `proxy_pass http://unix:PATH:/uri/`. The origin listens on a socket in
//! a temp dir and echoes the request line and Host it got; porter and
//! Debian's nginx run the same config against it and must send the same
//! request, print the same `$upstream_addr` and log the same error line
//! when the socket is not there.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::*;

/// An HTTP/1.1 origin on a unix socket: answers every request with its
/// request line and Host header, keeping the connection unless asked to
/// close.
struct UnixOrigin {
    path: PathBuf,
    conns: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<String>>>,
}

impl UnixOrigin {
    fn start(path: &Path) -> UnixOrigin {
        let l = UnixListener::bind(path).unwrap();
        // Workers started as root run as `nobody`, as NGINX's do.
        set_mode(path, 0o777);
        let o = UnixOrigin {
            path: path.to_path_buf(),
            conns: Arc::default(),
            seen: Arc::default(),
        };
        let (conns, seen) = (o.conns.clone(), o.seen.clone());
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { return };
                conns.fetch_add(1, Ordering::SeqCst);
                let seen = seen.clone();
                std::thread::spawn(move || serve(s, seen));
            }
        });
        o
    }
}

fn serve(s: UnixStream, seen: Arc<Mutex<Vec<String>>>) {
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let (mut host, mut close) = (String::new(), line.contains("HTTP/1.0"));
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (n, v) = h.split_once(':').unwrap_or((h, ""));
            match n.to_ascii_lowercase().as_str() {
                "host" => host = v.trim().to_string(),
                "connection" if v.trim().eq_ignore_ascii_case("close") => close = true,
                _ => {}
            }
        }
        let body = format!("{} host={host}", line.trim_end());
        seen.lock().unwrap().push(body.clone());
        let _ = write!(
            w,
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n{}\r\n{body}",
            body.len(),
            if close { "Connection: close\r\n" } else { "" }
        );
        if close {
            return;
        }
    }
}

/// The `http { }` body; each server writes its logs to `logs`.
fn http_body(sock: &Path, missing: &Path, logs: &Path) -> String {
    let (s, m, l) = (sock.display(), missing.display(), logs.display());
    format!(
        "log_format ua '$request_uri $upstream_addr $upstream_status';\n\
         error_log {l}/error.log info;\n\
         upstream u {{ server unix:{s} weight=2 max_fails=1; keepalive 4; }}\n\
         upstream gone {{ server unix:{m}; }}\n\
         server {{\n listen 127.0.0.1:{{PORT}};\n access_log {l}/ua.log ua;\n\
           location /pool/ {{ proxy_pass http://u; proxy_http_version 1.1; proxy_set_header Connection \"\"; }}\n\
           location /b/ {{ proxy_pass http://unix:{s}:/new/; }}\n\
           location /plain/ {{ proxy_pass http://unix:{s}; }}\n\
           location /missing/ {{ proxy_pass http://unix:{m}:/x/; }}\n\
           location /gone/ {{ proxy_pass http://gone; }}\n\
         }}\n"
    )
}

fn porter_conf(body: &str) -> String {
    format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\nerror_log {{PREFIX}}/logs/error.log info;\n\
         events {{ worker_connections 64; }}\nhttp {{\n{body}}}\n"
    )
}

/// The status and body of `GET path` on a new connection.
fn fetch(port: u16, path: &str) -> (u16, String) {
    let r = get(port, path);
    (r.status, r.text())
}

/// The error-log lines mentioning `needle`, without the time, pid and
/// connection numbers that differ between runs.
fn lines_with(log: &str, needle: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains(needle))
        .map(|l| l.split_once("[error] ").map_or(l, |(_, t)| t))
        .map(|t| log_message(t).to_string())
        .collect()
}

struct Run {
    answers: Vec<(u16, String)>,
    ua: String,
    errors: Vec<String>,
}

fn exercise(port: u16, logs: &Path) -> Run {
    let read_log = |rel: &str| std::fs::read_to_string(logs.join(rel)).unwrap_or_default();
    let paths = ["/b/x?a=1", "/plain/y", "/pool/z", "/missing/m", "/gone/g"];
    let answers = paths.iter().map(|p| fetch(port, p)).collect();
    std::thread::sleep(Duration::from_millis(300));
    let log = read_log("error.log");
    let mut errors = lines_with(&log, "while connecting to upstream");
    errors.sort();
    Run {
        answers,
        ua: read_log("ua.log"),
        errors,
    }
}

#[test]
fn unix_socket_upstreams_send_print_and_fail_as_nginx_does() {
    let dir = TempDir::new("unix");
    let sock = dir.path().join("o.sock");
    let missing = dir.path().join("none.sock");
    let o = UnixOrigin::start(&sock);
    let (plogs, nlogs) = (TempDir::new("unixp"), TempDir::new("unixn"));
    let s = Server::start(&porter_conf(&http_body(&sock, &missing, plogs.path())));
    let porter = exercise(s.port, plogs.path());
    let (sd, md) = (sock.display(), missing.display());
    assert_eq!(
        porter.answers,
        vec![
            (200, "GET /new/x?a=1 HTTP/1.0 host=localhost".to_string()),
            (200, "GET /plain/y HTTP/1.0 host=localhost".to_string()),
            (200, "GET /pool/z HTTP/1.1 host=u".to_string()),
            (502, porter.answers[3].1.clone()),
            (502, porter.answers[4].1.clone()),
        ]
    );
    assert_eq!(
        porter.ua,
        format!(
            "/b/x?a=1 unix:{sd} 200\n/plain/y unix:{sd} 200\n/pool/z unix:{sd} 200\n\
             /missing/m unix:{md} 502\n/gone/g unix:{md} 502\n"
        )
    );
    let want_missing = format!(
        "connect() to unix:{md} failed (2: No such file or directory) while connecting to upstream, \
         client: 127.0.0.1, server: , request: \"GET /missing/m HTTP/1.1\", \
         upstream: \"http://unix:{md}:/x/m\", host: \"localhost\""
    );
    assert!(porter.errors.contains(&want_missing), "{:?}", porter.errors);
    let Some(n) = Nginx::start(&http_body(&sock, &missing, nlogs.path())) else {
        eprintln!("skipping the nginx comparison: {NGINX} is not installed");
        return;
    };
    let nginx = exercise(n.port, nlogs.path());
    assert_eq!(porter.answers[..3], nginx.answers[..3]);
    assert_eq!(porter.ua, nginx.ua);
    assert_eq!(porter.errors, nginx.errors);
    drop(o);
}

#[test]
fn keepalive_pool_reuses_one_unix_connection() {
    let dir = TempDir::new("unixka");
    let sock = dir.path().join("o.sock");
    let o = UnixOrigin::start(&sock);
    let body = http_body(&sock, &dir.path().join("none.sock"), dir.path());
    let s = Server::start(&porter_conf(&body));
    for i in 0..5 {
        assert_eq!(fetch(s.port, &format!("/pool/{i}")).0, 200);
    }
    assert_eq!(o.seen.lock().unwrap().len(), 5);
    assert_eq!(o.conns.load(Ordering::SeqCst), 1, "pool not used");
    assert!(o.path.exists());
}

#[test]
fn unix_paths_nginx_refuses_are_config_errors() {
    let long = format!("/tmp/{}", "a".repeat(120));
    for (server, want) in [
        (
            "upstream u { server unix:; }".to_string(),
            "no path in the unix domain socket in upstream \"unix:\"",
        ),
        (
            format!("upstream u {{ server unix:{long}; }}"),
            "too long path in the unix domain socket",
        ),
    ] {
        let err = config_error(&porter_conf(&format!(
            "{server}\nserver {{ listen 127.0.0.1:1; location / {{ proxy_pass http://u; }} }}\n"
        )));
        assert!(err.contains(want), "{err}");
    }
}
