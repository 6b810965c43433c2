//! `$upstream_response_time` ends when the upstream's response body has
//! been received, `$upstream_header_time` with its head, as in NGINX: a
//! header added before the body arrived reads `-` for the try still
//! under way; the access log, written after the body, has the whole time.
//! A client that leaves before the head still logs its try. Asked of
//! porter and, when installed, nginx on the same settings.

use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use crate::common::origin::*;
use crate::common::*;

/// The server block: `/` proxies to the origin, adding the three times
/// as headers and logging them to `log`.
fn server(origin: u16, log: &str) -> String {
    format!(
        "log_format times '$uri $upstream_connect_time:$upstream_header_time:$upstream_response_time';\n\
         server {{\n listen 127.0.0.1:{{PORT}};\n server_name localhost;\n \
         access_log {log} times;\n \
         add_header X-Header $upstream_header_time;\n \
         add_header X-Response $upstream_response_time;\n \
         location / {{ proxy_pass http://127.0.0.1:{origin}; }}\n\
         location /two {{ proxy_pass http://two; }}\n}}\n\
         upstream two {{ server 127.0.0.1:{origin}; server 127.0.0.1:{origin}; }}\n"
    )
}

/// The seconds of a time (`-` is none).
fn secs(v: &str) -> Option<f64> {
    v.parse().ok()
}

/// Waits for the log line of `uri` and returns its three times.
fn logged(path: &std::path::Path, uri: &str) -> Vec<String> {
    for _ in 0..250 {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let line = text.lines().find(|l| l.starts_with(&format!("{uri} ")));
        if let Some(l) = line {
            return l[uri.len() + 1..].split(':').map(str::to_string).collect();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("no log line for {uri} in {}", path.display());
}

#[test]
fn response_time_runs_to_the_end_of_the_body() {
    // `/body`: the head at once, the body's second half 800 ms later.
    // `/two`: the first try's connection closes after 600 ms without an
    // answer, the second answers at once. `/gone`: the head comes after
    // 1.5 s; the client leaves after 300 ms.
    let tries = AtomicUsize::new(0);
    let origin = Origin::start(move |r| match r.target.as_str() {
        "/two" if tries.fetch_add(1, SeqCst).is_multiple_of(2) => Reply::ok(b"")
            .framing(Framing::Raw(Vec::new()))
            .delay(Duration::from_millis(600)),
        "/two" => Reply::ok(b"second try"),
        "/gone" => Reply::ok(b"late").delay(Duration::from_millis(1500)),
        _ => Reply::ok(b"first--second--").paced(8, Duration::from_millis(800)),
    });
    let logs = TempDir::new("times");
    let porter_log = logs.path().join("porter.log");
    let nginx_log = logs.path().join("nginx.log");
    let p = Server::start(&one_worker_conf(&server(
        origin.port,
        &porter_log.display().to_string(),
    )));
    let n = Nginx::start(&server(origin.port, &nginx_log.display().to_string()));
    let mut runs = vec![("porter", p.port, porter_log)];
    runs.extend(n.as_ref().map(|n| ("nginx", n.port, nginx_log)));
    for (name, port, log) in runs {
        let r = get(port, "/body");
        assert_eq!(r.text(), "first--second--", "{name}");
        assert!(secs(r.header("X-Header").unwrap()).unwrap() < 0.5, "{name}");
        assert_eq!(
            r.header("X-Response"),
            Some("-"),
            "{name}: the body is still to come"
        );
        let t = logged(&log, "/body");
        assert!(secs(&t[1]).unwrap() < 0.5, "{name}: header time {t:?}");
        assert!(secs(&t[2]).unwrap() >= 0.75, "{name}: response time {t:?}");
        let r = get(port, "/two");
        assert_eq!(r.status, 200, "{name}");
        let x = r.header("X-Response").unwrap();
        let (first, second) = x.split_once(", ").expect("two tries");
        assert!(secs(first).unwrap() >= 0.55, "{name}: {x}");
        assert_eq!(second, "-", "{name}: {x}");
        assert_eq!(
            r.header("X-Header").unwrap().split_once(", ").unwrap().0,
            "-"
        );
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(b"GET /gone HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        drop(s);
        let t = logged(&log, "/gone");
        assert_eq!(t[1], "-", "{name}: no head: {t:?}");
        let rt = secs(&t[2]).expect("the try's time");
        assert!((0.25..1.4).contains(&rt), "{name}: response time {t:?}");
    }
}
