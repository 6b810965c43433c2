//! `limit_rate` and `limit_rate_after` on the real binary: the time a
//! body takes at a given rate, from a file (`sendfile` on and off) and
//! from a proxied stream, within generous bounds of what NGINX's rule
//! gives (`rate` bytes a second beyond `limit_rate_after`, the first
//! second included), and side by side with Debian's nginx on the same
//! config when it is installed (the two times within a factor of 2).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::origin::{pattern, Origin, Reply};
use crate::common::{one_worker_conf, Nginx, Server, TempDir};

const RATE: u64 = 200 * 1024;
const SIZE: usize = 1024 * 1024;

fn conf(root: &std::path::Path, origin: u16) -> String {
    format!(
        "types {{ application/octet-stream bin; }}\n\
         server {{\n  listen 127.0.0.1:{{PORT}};\n  root {root};\n\
           location /s/ {{ sendfile on; limit_rate {RATE}; }}\n\
           location /c/ {{ alias {root}/s/; sendfile off; limit_rate {RATE}; }}\n\
           location /after/ {{ alias {root}/s/; limit_rate {RATE}; limit_rate_after 400k; }}\n\
           location /free/ {{ alias {root}/s/; }}\n\
           location /p/ {{ proxy_pass http://127.0.0.1:{origin}; limit_rate {RATE}; }}\n\
         }}",
        root = root.display()
    )
}

fn porter(http_body: &str) -> Server {
    Server::start(&one_worker_conf(http_body))
}

/// Seconds to read the whole response to GET `path`, and the body bytes
/// that had arrived after 1.5 s.
fn timed(port: u16, path: &str) -> (f64, usize) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let start = Instant::now();
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
        .unwrap();
    let mut got = 0usize;
    let mut at_1_5 = None;
    let mut buf = vec![0u8; 65536];
    loop {
        let n = s.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        got += n;
        if at_1_5.is_none() && start.elapsed() >= Duration::from_millis(1500) {
            at_1_5 = Some(got);
        }
    }
    assert!(got > SIZE, "{path}: only {got} bytes");
    (start.elapsed().as_secs_f64(), at_1_5.unwrap_or(got))
}

fn setup() -> (TempDir, Origin, String) {
    let root = TempDir::new("limit-rate");
    root.write("s/f.bin", pattern(SIZE, 7));
    let body = pattern(SIZE, 7);
    let origin = Origin::start(move |_| {
        let mut r = Reply::ok(&body);
        r.headers = vec![("Content-Type".into(), "application/octet-stream".into())];
        r
    });
    let c = conf(root.path(), origin.port);
    (root, origin, c)
}

#[test]
fn bodies_go_out_at_the_rate() {
    let (_root, _origin, c) = setup();
    let srv = porter(&c);
    // 1 MiB at 200 KiB/s, the first second included: done after ~4 s,
    // and ~400 KiB in by 1.5 s.
    let paths = ["/s/f.bin", "/c/f.bin", "/p/f.bin"];
    let results: Vec<(f64, usize)> = std::thread::scope(|sc| {
        let hs: Vec<_> = paths
            .iter()
            .map(|p| sc.spawn(move || timed(srv.port, p)))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (p, (secs, early)) in paths.iter().zip(&results) {
        eprintln!("{p}: {secs:.2} s, {early} bytes by 1.5 s");
        assert!((3.0..7.0).contains(secs), "{p}: {secs:.2} s");
        assert!(*early <= 3 * RATE as usize, "{p}: {early} bytes by 1.5 s");
    }
    let (after, _) = timed(srv.port, "/after/f.bin");
    // 400 KiB free and 200 KiB in the first second: ~2 s.
    assert!(
        (1.2..4.0).contains(&after),
        "limit_rate_after: {after:.2} s"
    );
    let (free, _) = timed(srv.port, "/free/f.bin");
    assert!(free < 1.0, "no limit: {free:.2} s");
}

#[test]
fn the_pace_matches_nginx() {
    let (_root, _origin, c) = setup();
    let Some(ngx) = Nginx::start(&c) else {
        eprintln!("skipping: /usr/sbin/nginx is not installed");
        return;
    };
    let srv = porter(&c);
    for path in ["/s/f.bin", "/after/f.bin"] {
        let (p, n) = std::thread::scope(|sc| {
            let a = sc.spawn(|| timed(srv.port, path).0);
            let b = sc.spawn(|| timed(ngx.port, path).0);
            (a.join().unwrap(), b.join().unwrap())
        });
        let ratio = p / n;
        eprintln!("{path}: porter {p:.2} s, nginx {n:.2} s");
        assert!(
            (0.5..2.0).contains(&ratio),
            "{path}: porter {p:.2} s, nginx {n:.2} s"
        );
    }
}
