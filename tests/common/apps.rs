//! What tests/uwsgi.rs and tests/scgi.rs share: a child process stopped
//! by PID on drop, a scripted application server that records the bytes
//! it is sent and answers canned bytes (to compare what porter and nginx
//! send, and how they take bad answers), a request helper, the part of a
//! response both servers must agree on, a large upload, the cache steps.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Child;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::*;

/// A child process (an application server), stopped by PID on drop.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        stop_child(&mut self.0, 15);
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

/// How a test file starts one side with `http` in the `http` block and
/// `pass` as its `*_pass` (`true`: nginx).
pub type Start<'a> = &'a dyn Fn(bool, &str, &str) -> Box<dyn Port>;

/// The WSGI app's answers through porter and nginx, for each of `passes`
/// (a TCP address and a unix socket): forms, cookies, statuses and
/// headers set by the app, HEAD, a missing page, and a chunked body (read
/// whole, sent with its length); the essence of each must be nginx's.
pub fn wsgi_answers_as_nginx(passes: &[String], start: Start<'_>) {
    let form = b"name=J%C3%BCrgen&x=1+2";
    let cases: Vec<(&str, &str, &str, &[u8])> = vec![
        ("GET", "/form?a=1&b=2", "Cookie: c=3; d=4\r\n", b""),
        (
            "POST",
            "/form?q=x",
            "Content-Type: application/x-www-form-urlencoded\r\n",
            form,
        ),
        (
            "GET",
            "/params?z=1&none=",
            "X-Custom: yes\r\nAccept: text/plain\r\nCookie: k=v\r\n",
            b"",
        ),
        ("GET", "/status?code=201", "", b""),
        ("GET", "/status?code=404&reason=Gone%20Away", "", b""),
        ("GET", "/status?code=302&location=/form", "", b""),
        ("GET", "/status?code=204", "", b""),
        ("HEAD", "/form", "", b""),
        ("GET", "/nothing/here?x=y", "", b""),
    ];
    for pass in passes {
        let p = start(false, "", pass);
        let n = start(true, "", pass);
        for (method, target, headers, body) in &cases {
            let a = request(p.port(), method, target, headers, body);
            let b = request(n.port(), method, target, headers, body);
            assert_eq!(
                essence(&a),
                essence(&b),
                "{method} {target} via {pass}: porter, then nginx"
            );
        }
        // A chunked body is read whole and goes with its length.
        let chunked = b"POST /form?c=1 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
            Content-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n\
            5\r\na=1&b\r\n4\r\n=2&c\r\n2\r\n=3\r\n0\r\n\r\n";
        let (a, b) = (raw(p.port(), chunked), raw(n.port(), chunked));
        assert!(a.text().contains("post b=2\npost c=3\n"), "{}", a.text());
        assert_eq!(
            essence(&a),
            essence(&b),
            "chunked via {pass}: porter, then nginx"
        );
    }
}

/// A body cut short by the app (`/bad/short`: 100 bytes announced, ten
/// sent): the ten go out and the client connection ends there.
pub fn cut_short_body_ends_the_connection(port: u16) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"GET /bad/short HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.read_to_end(&mut got);
    assert!(got.starts_with(b"HTTP/1.1 200 OK\r\n"));
    assert!(
        got.ends_with(b"only ten.."),
        "{}",
        String::from_utf8_lossy(&got)
    );
}

/// The bad answers' log lines: each `(needle, times)` in porter's log
/// that many times and, where `in_nginx`, in nginx's too; then the cut
/// body's line and the `upstream: "SCHEME://127.0.0.1:PORT"` part.
pub fn bad_answer_lines_as_nginx(
    p: &Server,
    nlog: &str,
    lines: &[(&str, usize, bool)],
    (scheme, port): (&str, u16),
) {
    let log = p.wait_log(
        "logs/error.log",
        "while reading upstream",
        Duration::from_secs(5),
    );
    for (needle, times, in_nginx) in lines {
        assert_eq!(lines_with(&log, needle).len(), *times, "{needle} in {log}");
        if *in_nginx {
            assert!(nlog.contains(needle), "{needle} in nginx's {nlog}");
        }
    }
    assert!(
        log.contains("upstream prematurely closed connection while reading upstream"),
        "{log}"
    );
    let upstream = format!("upstream: \"{scheme}://127.0.0.1:{port}\"");
    assert!(log.contains(&upstream), "{log}");
}

/// uwsgi and SCGI connections are never kept, `keepalive` or not: five
/// requests on one client connection are five upstream connections, on
/// porter as on nginx (`app` counts them; `start` gets the group).
pub fn not_kept_even_with_keepalive(app: &Scripted, start: Start<'_>) {
    let group = format!(
        "  upstream app {{ server 127.0.0.1:{}; keepalive 4; }}",
        app.port
    );
    let p = start(false, &group, "app");
    let mut s = TcpStream::connect(("127.0.0.1", p.port())).unwrap();
    let mut buf = Vec::new();
    for i in 0..5 {
        write!(s, "GET /k?i={i} HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
        let r = read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!(r.text(), "ok\n");
    }
    assert_eq!(app.connections.load(Ordering::SeqCst), 5);
    let n = start(true, &group, "app");
    for _ in 0..5 {
        assert_eq!(request(n.port(), "GET", "/k", "", b"").status, 200);
    }
    assert_eq!(app.connections.load(Ordering::SeqCst), 10);
}

/// An app slower than `*_read_timeout 2s` is 504 with NGINX's line on
/// both servers (`SCHEME://127.0.0.1:PORT`); then, `app` dropped, its
/// port refuses: 502 with NGINX's line, and `source` (the app's file
/// under the root, and a text only it holds) is never served.
pub fn slow_then_down_as_nginx<A>(
    (p, n): (&Server, &Nginx),
    app: A,
    (scheme, port): (&str, u16),
    source: (&str, &str),
) {
    for port in [p.port, n.port] {
        assert_eq!(request(port, "GET", "/slow?s=4", "", b"").status, 504);
    }
    let log = p.wait_log(
        "logs/error.log",
        "upstream timed out",
        Duration::from_secs(5),
    );
    let line = format!("upstream timed out (110: Connection timed out) while reading response header from upstream, client: 127.0.0.1, server: localhost, request: \"GET /slow?s=4 HTTP/1.1\", upstream: \"{scheme}://127.0.0.1:{port}\", host: \"localhost\"");
    assert!(log.contains(&line), "{log}");
    assert!(n.error_log().contains(&line), "{}", n.error_log());
    drop(app);
    for port in [p.port, n.port] {
        for path in ["/form", source.0] {
            let r = request(port, "GET", path, "", b"");
            assert_eq!(r.status, 502, "{path}");
            assert!(!r.text().contains(source.1), "{}", r.text());
        }
    }
    let line = "connect() failed (111: Connection refused) while connecting to upstream";
    let log = p.wait_log("logs/error.log", line, Duration::from_secs(5));
    assert_eq!(lines_with(&log, line).len(), 2, "{log}");
    assert!(n.error_log().contains(line));
}

/// A 100 MB upload the app hashes arrives whole while porter's RSS grows
/// by less than 32 MiB; a 64 MB streamed download arrives whole, chunked.
pub fn upload_and_download_whole(p: &Server) {
    let total = 100 * 1024 * 1024;
    let mut h = <sha2::Sha256 as sha2::Digest>::new();
    let block = pattern();
    for _ in 0..total / block.len() {
        sha2::Digest::update(&mut h, &block);
    }
    let want = format!("bytes={total} sha256={:x}\n", sha2::Digest::finalize(h));
    let (r, before, peak) = upload(p, "/upload", total);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), want);
    assert!(
        peak < before + 32 * 1024,
        "RSS grew from {before} KiB to {peak} KiB"
    );
    let r = request(p.port, "GET", "/download?mb=64", "", b"");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert_eq!(r.body.len(), 64 << 20);
    assert!(r.body.chunks(16).all(|c| c == b"0123456789abcdef"));
}
