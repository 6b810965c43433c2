//! `scgi_pass` against a real SCGI server: `tests/common/scgi_server.py`
//! (stdlib only, run with Debian's `/usr/bin/python3`) serving the WSGI
//! app in `tests/common/wsgi_app.py`, one on a loopback port and one on
//! a unix socket. porter loads Debian's `scgi_params` unchanged from its
//! prefix, and Debian's nginx answers the same requests beside it: forms,
//! cookies, statuses and headers set by the app, bad answers (the server
//! misbehaves on `/bad/...`), an app slower than `scgi_read_timeout`, an
//! app that is down; then a 100 MB upload (porter's RSS stays bounded)
//! and a streamed download. A scripted server written here records the
//! netstrings both servers send, compared header by header.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::apps::*;
use crate::common::*;

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

/// Starts porter or nginx (`true`) with `http` and `pass`.
fn start(nginx_side: bool, http: &str, pass: &str) -> Box<dyn Port> {
    match nginx_side {
        true => Box::new(nginx(http, pass, "")),
        false => Box::new(porter(http, pass, "")),
    }
}

#[test]
fn wsgi_app_answers_as_nginx_does() {
    let app = App::start();
    let passes = [
        format!("127.0.0.1:{}", app.port),
        format!("unix:{}", app.sock.display()),
    ];
    wsgi_answers_as_nginx(&passes, &start);
    for pass in &passes {
        let p = porter("", pass, "");
        // The variables the app saw, spelled out once.
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
    cut_short_body_ends_the_connection(p.port);
    bad_answer_lines_as_nginx(
        &p,
        &n.error_log(),
        &[
            ("upstream sent invalid header: \"Bad\\x20...\" while reading response header from upstream", 1, true),
            ("upstream sent invalid status \"abc\" while reading response header from upstream", 1, true),
            ("upstream prematurely closed connection while reading response header from upstream", 2, true),
            ("upstream sent too big header while reading response header from upstream", 1, true),
        ],
        ("scgi", app.port),
    );
}

#[test]
fn connections_are_not_kept_even_with_keepalive() {
    let app = Scripted::start(request_len, vec![], OK.to_vec());
    not_kept_even_with_keepalive(&app, &start);
}

#[test]
fn slow_app_is_504_and_a_down_app_is_502_never_the_source() {
    let app = App::start();
    let (pass, port, sock) = (
        format!("127.0.0.1:{}", app.port),
        app.port,
        app.sock.clone(),
    );
    let (p, n) = (porter("", &pass, ""), nginx("", &pass, ""));
    slow_then_down_as_nginx((&p, &n), app, ("scgi", port), ("/scgi_server.py", "import"));
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
    upload_and_download_whole(&porter("", &format!("unix:{}", app.sock.display()), ""));
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
