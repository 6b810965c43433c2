//! What tests/uwsgi.rs and tests/scgi.rs share: a child process stopped
//! by PID on drop, a scripted application server that records the bytes
//! it is sent and answers canned bytes (to compare what porter and nginx
//! send, and how they take bad answers), a request helper, the part of a
//! response both servers must agree on, a large upload, the cache steps.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;

/// The tests' helper programs and the WSGI app.
pub fn support(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/support")
        .join(file)
}

/// Debian's `/etc/nginx` as kept in the corpus (`uwsgi_params`,
/// `scgi_params`, BSD-2-Clause, see `LICENSE-copyright` there).
pub fn debian_etc(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/configs/debian/etc")
        .join(file)
}

/// A child process (an application server), stopped by PID on drop.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits until `port` accepts, or `path` (a unix socket) exists.
pub fn wait_ready(port: u16, path: Option<&Path>, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !(TcpStream::connect(("127.0.0.1", port)).is_ok() && path.is_none_or(|p| p.exists())) {
        assert!(Instant::now() < deadline, "{what} did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An application server written here: each connection's request is read
/// until `complete` says how long it is, recorded, and answered with the
/// first canned answer whose needle the request holds (else `fallback`),
/// then the connection is closed.
pub struct Scripted {
    pub port: u16,
    /// The requests received, whole.
    pub requests: Arc<Mutex<Vec<Vec<u8>>>>,
    /// Connections accepted.
    pub connections: Arc<AtomicUsize>,
}

impl Scripted {
    pub fn start(
        complete: fn(&[u8]) -> Option<usize>,
        answers: Vec<(&'static str, Vec<u8>)>,
        fallback: Vec<u8>,
    ) -> Scripted {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let (reqs, conns) = (Arc::clone(&requests), Arc::clone(&connections));
        let answers = Arc::new(answers);
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                conns.fetch_add(1, Ordering::SeqCst);
                let (reqs, answers, fallback) =
                    (Arc::clone(&reqs), Arc::clone(&answers), fallback.clone());
                std::thread::spawn(move || {
                    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                    let mut buf = Vec::new();
                    let mut tmp = [0u8; 65536];
                    while complete(&buf).is_none_or(|n| buf.len() < n) {
                        match s.read(&mut tmp) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&tmp[..n]),
                        }
                    }
                    let answer = answers
                        .iter()
                        .find(|(needle, _)| find(&buf, needle.as_bytes()).is_some())
                        .map_or(&fallback, |(_, a)| a);
                    reqs.lock().unwrap().push(buf);
                    let _ = s.write_all(answer);
                });
            }
        });
        Scripted {
            port,
            requests,
            connections,
        }
    }

    /// The last request received.
    pub fn last(&self) -> Vec<u8> {
        self.requests.lock().unwrap().last().cloned().unwrap()
    }
}

/// One request on a new connection (`Connection: close`).
pub fn request(port: u16, method: &str, target: &str, headers: &str, body: &[u8]) -> Resp {
    let mut req =
        format!("{method} {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{headers}")
            .into_bytes();
    if !body.is_empty() || method == "POST" {
        req.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    }
    req.extend_from_slice(b"\r\n");
    req.extend_from_slice(body);
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(&req).unwrap();
    let mut buf = Vec::new();
    read_response(&mut s, &mut buf, method == "HEAD")
        .unwrap_or_else(|| panic!("no response to {method} {target} on port {port}"))
}

/// What must match between the two servers: status, the headers the app
/// and the module decide (every `Set-Cookie`), the body.
pub fn essence(r: &Resp) -> String {
    let mut s = format!("{}\n", r.status_line);
    for h in [
        "content-type",
        "content-length",
        "transfer-encoding",
        "location",
        "set-cookie",
        "x-app",
        "status",
    ] {
        for (n, v) in &r.headers {
            if n.eq_ignore_ascii_case(h) {
                s.push_str(&format!("{h}: {v}\n"));
            }
        }
    }
    // nginx's error pages name nginx; the status says what they are.
    if r.status < 400 || r.header("content-type") != Some("text/html") {
        s.push_str(&r.text());
    }
    s
}

/// Sends `total` bytes of a pattern as the body of a POST to `path` and
/// reads the answer, watching porter's RSS meanwhile: (response, RSS
/// before, peak RSS) in KiB.
pub fn upload(p: &Server, path: &str, total: usize) -> (Resp, u64, u64) {
    let mut s = TcpStream::connect(("127.0.0.1", p.port)).unwrap();
    s.write_all(
        format!(
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
             Content-Type: application/octet-stream\r\nContent-Length: {total}\r\n\r\n"
        )
        .as_bytes(),
    )
    .unwrap();
    // Workers are threads of the one process.
    let pid = p.child.id();
    let before = rss_kib(pid);
    let sender = std::thread::spawn(move || {
        let block = pattern();
        let mut left = total;
        while left > 0 {
            let n = left.min(block.len());
            s.write_all(&block[..n]).unwrap();
            left -= n;
        }
        s
    });
    let mut peak = before;
    while !sender.is_finished() {
        peak = peak.max(rss_kib(pid));
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut s = sender.join().unwrap();
    let mut buf = Vec::new();
    let r = read_response(&mut s, &mut buf, false).expect("a response to the upload");
    (r, before, peak)
}

/// The upload's 64 KiB block.
pub fn pattern() -> Vec<u8> {
    (0..65536u32).map(|i| (i * 7 % 251) as u8).collect()
}

/// The error log's lines holding `needle`, as [`log_message`] gives them.
pub fn lines_with(log: &str, needle: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains(needle))
        .map(|l| log_message(l).to_string())
        .collect()
}

/// The cache steps tests/uwsgi.rs and tests/scgi.rs run against
/// `PREFIX_cache` (`fastcgi_cache`'s engine, the proxy cache's) on porter
/// and on nginx: `start(http)` starts one server with `http` (the zone) in
/// its `http` block and `cache_extra(prefix)` in the location, and gives
/// its port. A MISS is stored, the next request is a HIT with the same
/// body, another key is a MISS, a bypass goes to the app, POST is not
/// looked up (no status); the statuses must be nginx's.
pub fn cache_steps_as_nginx(prefix: &str, start: &dyn Fn(bool, &str) -> Box<dyn Port>) {
    let mut results = Vec::new();
    for nginx_side in [false, true] {
        let dir = TempDir::new("app-cache");
        set_mode(dir.path(), 0o777);
        let http = format!(
            "{prefix}_cache_path {} levels=1:2 keys_zone=z:1m;",
            dir.path().display()
        );
        let server = start(nginx_side, &http);
        let mut seen = Vec::new();
        for (method, target) in [
            ("GET", "/token"),
            ("GET", "/token"),
            ("GET", "/token?other=1"),
            ("GET", "/token?nocache=1"),
            ("POST", "/token"),
            ("GET", "/token"),
        ] {
            let r = request(server.port(), method, target, "", b"");
            assert_eq!(r.status, 200, "{method} {target}");
            let status = r.header("X-Cache").unwrap_or("-").to_string();
            seen.push((status, r.text()));
        }
        let statuses: Vec<&str> = seen.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(
            statuses,
            ["MISS", "HIT", "MISS", "BYPASS", "-", "HIT"],
            "nginx: {nginx_side}"
        );
        // The HITs repeat the first MISS's body; the others are new.
        assert_eq!(seen[1].1, seen[0].1);
        assert_eq!(seen[5].1, seen[0].1);
        assert_ne!(seen[2].1, seen[0].1);
        assert_ne!(seen[3].1, seen[0].1);
        results.push(statuses.join(","));
    }
    assert_eq!(results[0], results[1], "porter, then nginx");
}

/// The location lines of [`cache_steps_as_nginx`].
pub fn cache_extra(prefix: &str) -> String {
    format!(
        "{prefix}_cache z; {prefix}_cache_key $request_method$request_uri; \
         {prefix}_cache_valid 200 1m; {prefix}_cache_bypass $arg_nocache; \
         add_header X-Cache $upstream_cache_status always;"
    )
}

/// A running server's port, porter's or nginx's.
pub trait Port {
    fn port(&self) -> u16;
}

impl Port for Server {
    fn port(&self) -> u16 {
        self.port
    }
}

impl Port for Nginx {
    fn port(&self) -> u16 {
        self.port
    }
}
