//! `scgi_pass` against a real SCGI server: `tests/support/scgi_server.py`
//! (stdlib only, run with Debian's `/usr/bin/python3`) serving the WSGI
//! app in `tests/support/wsgi_app.py`, one on a loopback port and one on
//! a unix socket. porter loads Debian's `scgi_params` unchanged from its
//! prefix, and Debian's nginx answers the same requests beside it: forms,
//! cookies, statuses and headers set by the app, bad answers (the server
//! misbehaves on `/bad/...`), an app slower than `scgi_read_timeout`, an
//! app that is down; then a 100 MB upload (porter's RSS stays bounded)
//! and a streamed download. A scripted server written here records the
//! netstrings both servers send, compared header by header.

#[path = "support/apps.rs"]
mod apps;
mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use apps::*;
use common::*;

/// The SCGI server on `where` (a port, or `unix:PATH`).
fn scgi_server(at: &str) -> Proc {
    let child = Command::new("/usr/bin/python3")
        .arg(support("scgi_server.py"))
        .arg(at)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 is not installed");
    Proc(child)
}

/// The app on a TCP port and on a unix socket.
struct App {
    port: u16,
    sock: PathBuf,
    _tcp: Proc,
    _unix: Proc,
    _dir: TempDir,
}

impl App {
    fn start() -> App {
        let dir = TempDir::new("scgi");
        set_mode(dir.path(), 0o755);
        let port = free_port();
        let sock = dir.path().join("app.sock");
        let tcp = scgi_server(&port.to_string());
        let unix = scgi_server(&format!("unix:{}", sock.display()));
        wait_ready(port, Some(&sock), "the SCGI server");
        App {
            port,
            sock,
            _tcp: tcp,
            _unix: unix,
            _dir: dir,
        }
    }
}

/// The server block both servers run: Debian's `scgi_params`, two params
/// of the test's own, `pass` as the target.
fn site(params: &str, pass: &str, extra: &str) -> String {
    format!(
        "  server {{\n    listen 127.0.0.1:{{PORT}};\n    server_name localhost;\n    \
         root {root};\n    client_max_body_size 200m;\n    \
         location / {{\n      include {params};\n      scgi_param CUSTOM yes;\n      \
         scgi_param EMPTY $arg_none if_not_empty;\n      scgi_pass {pass};\n      \
         scgi_read_timeout 2s;\n{extra}\n    }}\n    \
         location ~ \\.py$ {{ include {params}; scgi_pass {pass}; }}\n  }}",
        root = support("").display()
    )
}

fn porter(http: &str, pass: &str, extra: &str) -> Server {
    let prefix = TempDir::new("scgi-p");
    prefix.write(
        "scgi_params",
        std::fs::read(debian_etc("scgi_params")).unwrap(),
    );
    let conf = one_worker_conf(&format!("{http}\n{}", site("scgi_params", pass, extra)));
    Server::start_in(prefix, &conf, &[])
}

fn nginx(http: &str, pass: &str, extra: &str) -> Nginx {
    let params = debian_etc("scgi_params").display().to_string();
    Nginx::start(&format!("{http}\n{}", site(&params, pass, extra)))
        .expect("nginx is not installed")
}

#[test]
fn wsgi_app_answers_as_nginx_does() {
    let app = App::start();
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
    for pass in [
        format!("127.0.0.1:{}", app.port),
        format!("unix:{}", app.sock.display()),
    ] {
        let p = porter("", &pass, "");
        let n = nginx("", &pass, "");
        for (method, target, headers, body) in &cases {
            let a = request(p.port, method, target, headers, body);
            let b = request(n.port, method, target, headers, body);
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
        let (a, b) = (raw(p.port, chunked), raw(n.port, chunked));
        assert!(a.text().contains("post b=2\npost c=3\n"), "{}", a.text());
        assert_eq!(
            essence(&a),
            essence(&b),
            "chunked via {pass}: porter, then nginx"
        );
        let r = request(p.port, "POST", "/params?z=1", "Cookie: k=v\r\n", b"abc");
        for want in [
            "QUERY_STRING=z=1\n",
            "CONTENT_LENGTH=3\n",
            "SCGI=1\n",
            "DOCUMENT_URI=/params\n",
            "CUSTOM=yes\n",
            "EMPTY=(unset)\n",
            "HTTP_HOST=localhost\n",
            "HTTP_COOKIE=k=v\n",
        ] {
            assert!(r.text().contains(want), "{want:?} in {}", r.text());
        }
    }
}

/// An SCGI request's length once its netstring and body (by
/// `CONTENT_LENGTH`) are in.
fn request_len(b: &[u8]) -> Option<usize> {
    let colon = b.iter().position(|&c| c == b':')?;
    let n: usize = std::str::from_utf8(&b[..colon]).ok()?.parse().ok()?;
    if b.len() < colon + 1 + n + 1 {
        return None;
    }
    let body = headers(b)[0].1.parse::<usize>().ok()?;
    Some(colon + 1 + n + 1 + body)
}

/// The netstring's headers, in order; and where the body starts.
fn headers(b: &[u8]) -> Vec<(String, String)> {
    let colon = b.iter().position(|&c| c == b':').unwrap();
    let n: usize = std::str::from_utf8(&b[..colon]).unwrap().parse().unwrap();
    assert_eq!(b[colon + 1 + n], b',');
    let parts: Vec<String> = b[colon + 1..colon + 1 + n]
        .split(|&c| c == 0)
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    assert_eq!(parts.last().map(String::as_str), Some(""), "NUL-terminated");
    parts[..parts.len() - 1]
        .chunks(2)
        .map(|kv| (kv[0].clone(), kv[1].clone()))
        .collect()
}

fn body_of(b: &[u8]) -> &[u8] {
    let colon = b.iter().position(|&c| c == b':').unwrap();
    let n: usize = std::str::from_utf8(&b[..colon]).unwrap().parse().unwrap();
    &b[colon + 1 + n + 1..]
}

/// What differs between the two servers by nature: their ports.
fn comparable(v: Vec<(String, String)>) -> Vec<(String, String)> {
    v.into_iter()
        .filter(|(n, _)| n != "REMOTE_PORT" && n != "SERVER_PORT")
        .collect()
}

const OK: &[u8] = b"Status: 200 OK\r\nContent-Type: text/plain\r\n\r\nok\n";

#[test]
fn netstrings_are_nginx_s_header_for_header() {
    let app = Scripted::start(request_len, vec![], OK.to_vec());
    let pass = format!("127.0.0.1:{}", app.port);
    let p = porter("", &pass, "");
    let n = nginx("", &pass, "");
    let cases: Vec<(&str, &str, &str, &[u8])> = vec![
        (
            "GET",
            "/a/b?c=d&none=",
            "X-Custom: 1\r\nCookie: a=1; b=2\r\nAccept: */*\r\n",
            b"",
        ),
        (
            "POST",
            "/post",
            "Content-Type: text/plain\r\n",
            b"hello body",
        ),
        ("GET", "/x?none=set", "X-Forwarded-For: 10.0.0.1\r\n", b""),
    ];
    for (method, target, hdrs, body) in &cases {
        assert_eq!(request(p.port, method, target, hdrs, body).text(), "ok\n");
        let from_porter = app.last();
        assert_eq!(request(n.port, method, target, hdrs, body).text(), "ok\n");
        let from_nginx = app.last();
        let h = headers(&from_porter);
        assert_eq!(h[0], ("CONTENT_LENGTH".into(), body.len().to_string()));
        assert!(h.contains(&("SCGI".into(), "1".into())));
        assert_eq!(
            comparable(h),
            comparable(headers(&from_nginx)),
            "{method} {target}: porter, then nginx"
        );
        assert_eq!(body_of(&from_porter), *body);
        assert_eq!(body_of(&from_nginx), *body);
    }
    // Without the body, its length still goes (as NGINX sends it); the
    // netstring is all there is.
    let app = Scripted::start(netstring_len, vec![], OK.to_vec());
    let pass = format!("127.0.0.1:{}", app.port);
    let p = porter("", &pass, "      scgi_pass_request_body off;");
    assert_eq!(
        request(p.port, "POST", "/nobody", "", b"12345").text(),
        "ok\n"
    );
    let last = app.last();
    assert_eq!(headers(&last)[0].1, "5");
    assert_eq!(body_of(&last), b"");
}

/// The netstring's length alone.
fn netstring_len(b: &[u8]) -> Option<usize> {
    let colon = b.iter().position(|&c| c == b':')?;
    let n: usize = std::str::from_utf8(&b[..colon]).ok()?.parse().ok()?;
    Some(colon + 1 + n + 1)
}

#[test]
fn bad_answers_are_502_with_nginx_s_log_lines() {
    let app = App::start();
    let pass = format!("127.0.0.1:{}", app.port);
    let p = porter("", &pass, "");
    let n = nginx("", &pass, "");
    for path in [
        "/bad/header",
        "/bad/status",
        "/bad/nothing",
        "/bad/half-head",
        "/bad/too-big",
    ] {
        let a = request(p.port, "GET", path, "", b"");
        let b = request(n.port, "GET", path, "", b"");
        assert_eq!(a.status, 502, "{path}");
        assert_eq!(essence(&a), essence(&b), "{path}: porter, then nginx");
    }
    // A body cut short: what came goes out, and the client connection
    // ends there.
    let mut s = TcpStream::connect(("127.0.0.1", p.port)).unwrap();
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
    let log = p.wait_log(
        "logs/error.log",
        "while reading upstream",
        Duration::from_secs(5),
    );
    let nlog = n.error_log();
    for (needle, times) in [
        ("upstream sent invalid header: \"Bad\\x20...\" while reading response header from upstream", 1),
        ("upstream sent invalid status \"abc\" while reading response header from upstream", 1),
        ("upstream prematurely closed connection while reading response header from upstream", 2),
        ("upstream sent too big header while reading response header from upstream", 1),
    ] {
        assert_eq!(lines_with(&log, needle).len(), times, "{needle} in {log}");
        assert!(nlog.contains(needle), "{needle} in nginx's {nlog}");
    }
    assert!(
        log.contains("upstream prematurely closed connection while reading upstream"),
        "{log}"
    );
    assert!(
        log.contains(&format!("upstream: \"scgi://127.0.0.1:{}\"", app.port)),
        "{log}"
    );
}

#[test]
fn connections_are_not_kept_even_with_keepalive() {
    let app = Scripted::start(request_len, vec![], OK.to_vec());
    let group = format!(
        "  upstream app {{ server 127.0.0.1:{}; keepalive 4; }}",
        app.port
    );
    let p = porter(&group, "app", "");
    let mut s = TcpStream::connect(("127.0.0.1", p.port)).unwrap();
    let mut buf = Vec::new();
    for i in 0..5 {
        write!(s, "GET /k?i={i} HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
        let r = read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!(r.text(), "ok\n");
    }
    // One client connection, a new upstream one each time, as nginx.
    use std::sync::atomic::Ordering::SeqCst;
    assert_eq!(app.connections.load(SeqCst), 5);
    let n = nginx(&group, "app", "");
    for _ in 0..5 {
        assert_eq!(request(n.port, "GET", "/k", "", b"").status, 200);
    }
    assert_eq!(app.connections.load(SeqCst), 10);
}

#[test]
fn slow_app_is_504_and_a_down_app_is_502_never_the_source() {
    let app = App::start();
    let pass = format!("127.0.0.1:{}", app.port);
    let p = porter("", &pass, "");
    let n = nginx("", &pass, "");
    for port in [p.port, n.port] {
        assert_eq!(request(port, "GET", "/slow?s=4", "", b"").status, 504);
    }
    let log = p.wait_log(
        "logs/error.log",
        "upstream timed out",
        Duration::from_secs(5),
    );
    let line = format!("upstream timed out (110: Connection timed out) while reading response header from upstream, client: 127.0.0.1, server: localhost, request: \"GET /slow?s=4 HTTP/1.1\", upstream: \"scgi://127.0.0.1:{}\", host: \"localhost\"", app.port);
    assert!(log.contains(&line), "{log}");
    assert!(n.error_log().contains(&line), "{}", n.error_log());
    let sock = app.sock.clone();
    drop(app);
    for port in [p.port, n.port] {
        for path in ["/form", "/scgi_server.py"] {
            let r = request(port, "GET", path, "", b"");
            assert_eq!(r.status, 502, "{path}");
            assert!(!r.text().contains("import"), "{}", r.text());
        }
    }
    let line = "connect() failed (111: Connection refused) while connecting to upstream";
    let log = p.wait_log("logs/error.log", line, Duration::from_secs(5));
    assert_eq!(lines_with(&log, line).len(), 2, "{log}");
    assert!(n.error_log().contains(line));
    // A unix socket that is gone.
    let p = porter("", &format!("unix:{}", sock.display()), "");
    assert_eq!(request(p.port, "GET", "/form", "", b"").status, 502);
    let line = format!(
        "connect() to unix:{} failed (2: No such file or directory) while connecting to upstream",
        sock.display()
    );
    let log = p.wait_log("logs/error.log", &line, Duration::from_secs(5));
    assert!(log.contains(&line), "{log}");
    assert!(!Path::new(&sock).exists());
}

#[test]
fn large_upload_streams_with_bounded_memory_and_download_arrives_whole() {
    let app = App::start();
    let p = porter("", &format!("unix:{}", app.sock.display()), "");
    let total = 100 * 1024 * 1024;
    let mut h = <sha2::Sha256 as sha2::Digest>::new();
    let block = pattern();
    for _ in 0..total / block.len() {
        sha2::Digest::update(&mut h, &block);
    }
    let want = format!("bytes={total} sha256={:x}\n", sha2::Digest::finalize(h));
    let (r, before, peak) = upload(&p, "/upload", total);
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

/// `scgi_cache` is `fastcgi_cache`'s engine, as nginx's
/// (`apps::cache_steps_as_nginx`).
#[test]
fn scgi_cache_stores_and_serves_as_nginx() {
    let app = App::start();
    let pass = format!("127.0.0.1:{}", app.port);
    let extra = cache_extra("scgi");
    cache_steps_as_nginx("scgi", &|nginx_side, http| -> Box<dyn Port> {
        match nginx_side {
            true => Box::new(nginx(http, &pass, &extra)),
            false => Box::new(porter(http, &pass, &extra)),
        }
    });
}
