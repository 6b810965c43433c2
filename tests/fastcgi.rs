//! `fastcgi_pass` against a real PHP: Debian's php-fpm, started here in
//! the foreground with its own pools (one on a unix socket in a temp dir,
//! one on a loopback TCP port) serving the small app in
//! `tests/common/php/`. porter loads Debian's `fastcgi.conf` and
//! `snippets/fastcgi-php.conf` unchanged (copied from
//! `tests/configs/debian/etc`, BSD-2-Clause, see `LICENSE-copyright`
//! there), and Debian's nginx answers the same requests beside it: forms,
//! cookies, statuses and headers set by PHP, PATH_INFO, the front
//! controller behind `try_files`, a script slower than
//! `fastcgi_read_timeout`, an FPM that is down; then a 100 MB upload
//! (porter's RSS stays bounded) and a streamed download.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::php::*;
use crate::common::*;

/// The server block both servers run: Debian's PHP snippet for `.php`
/// (with PATH_INFO), a front controller for everything else.
fn site(snippet: &str, pass: &str, extra: &str) -> String {
    format!(
        "  server {{\n    listen 127.0.0.1:{{PORT}};\n    server_name localhost;\n    \
         root {root};\n    index index.php;\n    client_max_body_size 200m;\n    \
         location / {{ try_files $uri $uri/ /index.php?$args; }}\n    \
         location ~ \\.php(/|$) {{\n      include {snippet};\n      fastcgi_pass {pass};\n      \
         fastcgi_read_timeout 2s;\n{extra}\n    }}\n  }}",
        root = app_root().display()
    )
}

/// porter with Debian's files in its prefix, included as Debian's
/// site does (relative paths, unchanged).
fn porter(pass: &str, extra: &str) -> Server {
    let prefix = TempDir::new("fcgi");
    for f in [
        "fastcgi.conf",
        "fastcgi_params",
        "snippets/fastcgi-php.conf",
    ] {
        prefix.write(f, std::fs::read(debian_etc(f)).unwrap());
    }
    let conf = one_worker_conf(&site("snippets/fastcgi-php.conf", pass, extra));
    Server::start_in(prefix, &conf, &[])
}

/// nginx with the same site; the snippet's `include fastcgi.conf` made
/// absolute (nginx's prefix is its own temp dir).
fn nginx(pass: &str, extra: &str, keep: &TempDir) -> Nginx {
    let snippet = std::fs::read_to_string(debian_etc("snippets/fastcgi-php.conf"))
        .unwrap()
        .replace(
            "include fastcgi.conf;",
            &format!("include {};", debian_etc("fastcgi.conf").display()),
        );
    let path = keep.write("fastcgi-php.conf", snippet);
    Nginx::start(&site(path.to_str().unwrap(), pass, extra)).expect("nginx is not installed")
}

fn request(port: u16, method: &str, target: &str, headers: &str, body: &[u8]) -> Resp {
    let mut req =
        format!("{method} {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{headers}")
            .into_bytes();
    if !body.is_empty() || method == "POST" {
        req.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    }
    req.extend_from_slice(b"\r\n");
    req.extend_from_slice(body);
    raw(port, &req)
}

/// What must match between the two servers: status, the headers PHP and
/// the FastCGI module decide, the body.
fn essence(r: &Resp) -> String {
    let mut s = format!("{}\n", r.status_line);
    for h in [
        "content-type",
        "content-length",
        "location",
        "set-cookie",
        "x-app",
        "status",
        "x-powered-by",
    ] {
        if let Some(v) = r.header(h) {
            s.push_str(&format!("{h}: {v}\n"));
        }
    }
    // nginx's error pages name nginx; the status says what they are.
    if r.status < 400 || r.header("content-type") != Some("text/html") {
        s.push_str(&r.text());
    }
    s
}

#[test]
fn php_app_answers_as_nginx_does() {
    let fpm = Fpm::start();
    let pass = format!("unix:{}", fpm.sock.display());
    let p = porter(&pass, "");
    let keep = TempDir::new("fcgi-nginx");
    let n = nginx(&pass, "", &keep);
    let form = b"name=J%C3%BCrgen&x=1+2";
    let cases: Vec<(&str, String, &str, &[u8])> = vec![
        (
            "GET",
            "/form.php?a=1&b=2".into(),
            "Cookie: c=3; d=4\r\n",
            b"",
        ),
        (
            "POST",
            "/form.php?q=x".into(),
            "Content-Type: application/x-www-form-urlencoded\r\n",
            form,
        ),
        (
            "GET",
            "/params.php/extra/path?q=1".into(),
            "X-Custom: yes\r\nAccept: text/plain\r\nCookie: k=v\r\n",
            b"",
        ),
        ("GET", "/status.php?code=404".into(), "", b""),
        ("GET", "/status.php?raw=418%20Teapot".into(), "", b""),
        (
            "GET",
            "/status.php?code=302&location=/form.php".into(),
            "",
            b"",
        ),
        ("GET", "/status.php?location=/x".into(), "", b""),
        ("GET", "/status.php?code=204".into(), "", b""),
        ("GET", "/nothing/here?x=y".into(), "", b""),
        ("GET", "/sub/".into(), "", b""),
        ("GET", "/hello.txt".into(), "", b""),
        ("GET", "/missing.php".into(), "", b""),
        ("GET", "/missing.php/info".into(), "", b""),
        ("HEAD", "/form.php".into(), "", b""),
        ("GET", "/stderr.php".into(), "", b""),
    ];
    for (method, target, headers, body) in &cases {
        let a = request(p.port, method, target, headers, body);
        let b = request(n.port, method, target, headers, body);
        assert_eq!(
            essence(&a),
            essence(&b),
            "{method} {target}: porter, then nginx"
        );
    }
    // A bare code gets its reason phrase, as current NGINX gives it (1.22
    // sent the three digits alone).
    let r = get(p.port, "/status.php?raw=404");
    assert_eq!(r.status_line, "HTTP/1.1 404 Not Found");
    // The application's stderr line, worded as nginx words it.
    let tail = "FastCGI sent in stderr: \"PHP message: something went wrong\" while reading response header from upstream";
    let log = p.wait_log("logs/error.log", tail, Duration::from_secs(5));
    assert!(log.contains(tail), "{log}");
    assert!(n.error_log().contains(tail), "{}", n.error_log());
    assert!(
        log.contains(&format!(
            "upstream: \"fastcgi://unix:{}:\"",
            fpm.sock.display()
        )),
        "{log}"
    );
}

#[test]
fn slow_script_is_504_and_a_down_fpm_is_502_never_the_source() {
    let fpm = Fpm::start();
    let pass = format!("127.0.0.1:{}", fpm.port);
    let p = porter(&pass, "");
    let r = get(p.port, "/slow.php?s=4");
    assert_eq!(r.status, 504);
    let log = p.wait_log(
        "logs/error.log",
        "upstream timed out",
        Duration::from_secs(5),
    );
    assert!(log.contains(&format!("upstream timed out (110: Connection timed out) while reading response header from upstream, client: 127.0.0.1, server: localhost, request: \"GET /slow.php?s=4 HTTP/1.1\", upstream: \"fastcgi://127.0.0.1:{}\", host: \"localhost\"", fpm.port)), "{log}");
    drop(fpm);
    // FPM gone: its port refuses, its socket is gone.
    let r = get(p.port, "/form.php");
    assert_eq!(r.status, 502);
    assert!(!r.text().contains("<?php"), "{}", r.text());
    let log = p.wait_log("logs/error.log", "connect() failed", Duration::from_secs(5));
    assert!(
        log.contains("connect() failed (111: Connection refused) while connecting to upstream"),
        "{log}"
    );
    let gone = TempDir::new("gone");
    let sock = gone.path().join("fpm.sock");
    let p = porter(&format!("unix:{}", sock.display()), "");
    let keep = TempDir::new("fcgi-nginx");
    let n = nginx(&format!("unix:{}", sock.display()), "", &keep);
    for port in [p.port, n.port] {
        let r = get(port, "/form.php");
        assert_eq!(r.status, 502);
        assert!(!r.text().contains("<?php"));
    }
    let line = format!(
        "connect() to unix:{} failed (2: No such file or directory) while connecting to upstream",
        sock.display()
    );
    let log = p.wait_log("logs/error.log", &line, Duration::from_secs(5));
    assert!(log.contains(&line), "{log}");
    assert!(n.error_log().contains(&line), "{}", n.error_log());
}

/// 100 MB of a pattern, in 64 KiB writes.
fn send_pattern(s: &mut TcpStream, total: usize) {
    let block: Vec<u8> = (0..65536u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut left = total;
    while left > 0 {
        let n = left.min(block.len());
        s.write_all(&block[..n]).unwrap();
        left -= n;
    }
}

#[test]
fn large_upload_streams_to_php_with_bounded_memory() {
    let fpm = Fpm::start();
    let p = porter(&format!("unix:{}", fpm.sock.display()), "");
    let total = 100 * 1024 * 1024;
    let mut crc = crc32fast::Hasher::new();
    let block: Vec<u8> = (0..65536u32).map(|i| (i * 7 % 251) as u8).collect();
    for _ in 0..total / block.len() {
        crc.update(&block);
    }
    let want = format!("bytes={total} crc32={:08x}\n", crc.finalize());
    let mut s = TcpStream::connect(("127.0.0.1", p.port)).unwrap();
    s.write_all(
        format!(
            "POST /upload.php HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
             Content-Type: application/octet-stream\r\nContent-Length: {total}\r\n\r\n"
        )
        .as_bytes(),
    )
    .unwrap();
    // Workers are threads of the one process.
    let worker = p.child.id();
    let before = rss_kib(worker);
    let sender = std::thread::spawn(move || {
        send_pattern(&mut s, total);
        s
    });
    let mut peak = before;
    while !sender.is_finished() {
        peak = peak.max(rss_kib(worker));
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut s = sender.join().unwrap();
    let mut buf = Vec::new();
    let r = read_response(&mut s, &mut buf, false).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), want);
    assert!(
        peak < before + 32 * 1024,
        "RSS grew from {before} KiB to {peak} KiB"
    );
}

#[test]
fn streamed_download_arrives_whole() {
    let fpm = Fpm::start();
    let p = porter(&format!("unix:{}", fpm.sock.display()), "");
    let mut s = TcpStream::connect(("127.0.0.1", p.port)).unwrap();
    s.write_all(
        b"GET /download.php?mb=64 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut buf = Vec::new();
    let r = read_response(&mut s, &mut buf, false).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert_eq!(r.body.len(), 64 << 20);
    assert!(r.body.chunks(16).all(|c| c == b"0123456789abcdef"));
}

#[test]
fn tcp_group_with_keepalive_serves_many_requests() {
    let fpm = Fpm::start();
    let conf = format!(
        "  upstream php {{ server 127.0.0.1:{}; keepalive 4; }}\n{}",
        fpm.port,
        site(
            "snippets/fastcgi-php.conf",
            "php",
            "      fastcgi_keep_conn on;"
        )
    );
    let prefix = TempDir::new("fcgi");
    for f in ["fastcgi.conf", "snippets/fastcgi-php.conf"] {
        prefix.write(f, std::fs::read(debian_etc(f)).unwrap());
    }
    let p = Server::start_in(prefix, &one_worker_conf(&conf), &[]);
    let mut s = TcpStream::connect(("127.0.0.1", p.port)).unwrap();
    let mut buf = Vec::new();
    for i in 0..50 {
        write!(s, "GET /form.php?i={i} HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
        let r = read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!(r.status, 200);
        assert!(r.text().contains(&format!("get i={i}\n")), "{}", r.text());
    }
    let _ = s.read(&mut [0u8; 1]);
}

/// Asks for `killme.php` (its worker's pid written to a file in `dir`),
/// waits for the pid and, with `part`, for the part of the body the
/// script sends, then kills that FPM worker: what the client got, to the
/// close.
fn killed_mid_response(port: u16, dir: &TempDir, part: bool) -> Vec<u8> {
    let pidfile = dir.path().join(format!("pid-{part}"));
    let _ = std::fs::remove_file(&pidfile);
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let q = if part { "part=1&" } else { "" };
    write!(
        s,
        "GET /killme.php?{q}pidfile={} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        pidfile.display()
    )
    .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let pid = loop {
        assert!(Instant::now() < deadline, "no pid from the script");
        if let Some(p) = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|t| t.parse::<u32>().ok())
        {
            break p;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let want = [b"x".repeat(1000), b"\n".to_vec()].concat();
    while part && find(&got, &want).is_none() {
        let mut tmp = [0u8; 4096];
        match s.read(&mut tmp) {
            Ok(0) | Err(_) => panic!(
                "port {port}: cut before the first part: {}",
                String::from_utf8_lossy(&got)
            ),
            Ok(n) => got.extend_from_slice(&tmp[..n]),
        }
    }
    let killed = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
    assert!(killed.unwrap().success());
    let _ = s.read_to_end(&mut got);
    got
}

#[test]
fn fpm_worker_killed_mid_response_cuts_or_502s_and_serving_goes_on() {
    let fpm = Fpm::start();
    let pass = format!("unix:{}", fpm.sock.display());
    // Unbuffered, nginx passes the part on as it comes (buffered, it
    // holds it); porter streams either way.
    let extra = "      fastcgi_buffering off;";
    let p = porter(&pass, extra);
    let keep = TempDir::new("fcgi-nginx");
    let n = nginx(&pass, extra, &keep);
    let dir = TempDir::new("fpm-kill");
    set_mode(dir.path(), 0o777);
    for port in [p.port, n.port] {
        // Part of the body went out: the client gets it, then the close,
        // never the chunked body's end.
        let got = killed_mid_response(port, &dir, true);
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.contains(&"x".repeat(1000)), "{text}");
        assert!(!text.ends_with("0\r\n\r\n"), "{text}");
        // Nothing went out yet: 502.
        let got = killed_mid_response(port, &dir, false);
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{text}");
        // The server goes on (FPM starts another worker).
        assert_eq!(request(port, "GET", "/form.php?a=1", "", b"").status, 200);
    }
    let head = "while reading response header from upstream";
    let log = p.wait_log("logs/error.log", head, Duration::from_secs(5));
    // One error line for each request, as nginx's: the worker's socket is
    // reset (or closed) under the read, in the body or in the header.
    let errors = |log: &str| -> Vec<String> {
        log.lines()
            .filter(|l| l.contains("[error]"))
            .map(|l| log_message(l).to_string())
            .collect()
    };
    let (pe, ne) = (errors(&log), errors(&n.error_log()));
    assert_eq!(pe.len(), 2, "{log}");
    assert_eq!(ne.len(), 2, "{}", n.error_log());
    for (i, (what, req)) in [("while reading upstream", "part=1&"), (head, "?pidfile=")]
        .into_iter()
        .enumerate()
    {
        for line in [&pe[i], &ne[i]] {
            assert!(
                line.starts_with("recv() failed (104: Connection reset by peer)")
                    || line.starts_with("upstream prematurely closed connection"),
                "{line}"
            );
            assert!(line.contains(what) && line.contains(req), "{line}");
        }
    }
    assert!(!log.contains("[crit]") && !log.contains("[alert]"), "{log}");
}
