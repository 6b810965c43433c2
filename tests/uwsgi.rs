//! `uwsgi_pass` against a real uWSGI: Debian's `uwsgi` with its python3
//! plugin, started here on a loopback port and a unix socket, serving the
//! WSGI app in `tests/common/wsgi_app.py`. porter loads Debian's
//! `uwsgi_params` unchanged from its prefix, and Debian's nginx answers
//! the same requests beside it: forms, cookies, statuses and headers set
//! by the app, an app slower than `uwsgi_read_timeout`, an app that is
//! down; then a 100 MB upload (porter's RSS stays bounded) and a streamed
//! download. A scripted server written here records the packets both
//! servers send (compared var by var) and answers them badly on demand.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::common::apps::*;
use crate::common::*;

/// Debian's uWSGI serving the WSGI app on a TCP port and a unix socket.
struct Uwsgi {
    port: u16,
    sock: PathBuf,
    _proc: Proc,
    _dir: TempDir,
}

impl Uwsgi {
    fn start() -> Uwsgi {
        let dir = TempDir::new("uwsgi");
        set_mode(dir.path(), 0o755);
        let port = free_port();
        let sock = dir.path().join("app.sock");
        let child = Command::new("/usr/bin/uwsgi")
            .args(["--plugin", "python3", "--master", "--processes", "4"])
            .args([
                "--die-on-term",
                "--chmod-socket=666",
                "--buffer-size",
                "32768",
            ])
            .arg("--socket")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--socket")
            .arg(&sock)
            .arg("--wsgi-file")
            .arg(support("wsgi_app.py"))
            .arg("--logto")
            .arg(dir.path().join("uwsgi.log"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("uWSGI is not installed (apt-get install uwsgi-core uwsgi-plugin-python3)");
        let u = Uwsgi {
            port,
            sock,
            _proc: Proc(child),
            _dir: dir,
        };
        wait_ready(u.port, Some(&u.sock), "uWSGI");
        u
    }
}

/// The server block both servers run: Debian's `uwsgi_params`, two params
/// of the test's own, `pass` as the target.
fn site(params: &str, pass: &str, extra: &str) -> String {
    let root = support("");
    format!(
        "  server {{\n    listen 127.0.0.1:{{PORT}};\n    server_name localhost;\n    \
         root {root};\n    client_max_body_size 200m;\n    \
         location / {{\n      include {params};\n      uwsgi_param CUSTOM yes;\n      \
         uwsgi_param EMPTY $arg_none if_not_empty;\n      uwsgi_pass {pass};\n      \
         uwsgi_read_timeout 2s;\n{extra}\n    }}\n    \
         location ~ \\.py$ {{ include {params}; uwsgi_pass {pass}; }}\n  }}",
        root = root.display()
    )
}

/// porter with Debian's `uwsgi_params` in its prefix, included by a
/// relative name as Debian's sites do.
fn porter(pass: &str, extra: &str) -> Server {
    porter_with("", pass, extra)
}

fn porter_with(http: &str, pass: &str, extra: &str) -> Server {
    let prefix = TempDir::new("uwsgi-p");
    prefix.write(
        "uwsgi_params",
        std::fs::read(debian_etc("uwsgi_params")).unwrap(),
    );
    let conf = one_worker_conf(&format!("{http}\n{}", site("uwsgi_params", pass, extra)));
    Server::start_in(prefix, &conf, &[])
}

fn nginx(pass: &str, extra: &str) -> Nginx {
    nginx_with("", pass, extra)
}

fn nginx_with(http: &str, pass: &str, extra: &str) -> Nginx {
    let params = debian_etc("uwsgi_params").display().to_string();
    Nginx::start(&format!("{http}\n{}", site(&params, pass, extra)))
        .expect("nginx is not installed")
}

/// Starts porter or nginx (`true`) with `http` and `pass`.
fn start(nginx_side: bool, http: &str, pass: &str) -> Box<dyn Port> {
    match nginx_side {
        true => Box::new(nginx_with(http, pass, "")),
        false => Box::new(porter_with(http, pass, "")),
    }
}

#[test]
fn wsgi_app_answers_as_nginx_does() {
    let app = Uwsgi::start();
    let passes = [
        format!("127.0.0.1:{}", app.port),
        format!("unix:{}", app.sock.display()),
    ];
    wsgi_answers_as_nginx(&passes, &start);
    for pass in &passes {
        let p = porter(pass, "");
        // The variables the app saw, spelled out once; a repeated header
        // goes as one, as current NGINX sends it (1.22 sent each line).
        let r = request(
            p.port,
            "GET",
            "/params?z=1",
            "Cookie: k=v\r\nCookie: l=w\r\n",
            b"",
        );
        for want in [
            "QUERY_STRING=z=1\n",
            "PATH_INFO=/params\n",
            "CUSTOM=yes\n",
            "EMPTY=(unset)\n",
            "HTTP_HOST=localhost\n",
            "HTTP_COOKIE=k=v; l=w\n",
            "REQUEST_URI=/params?z=1\n",
        ] {
            assert!(r.text().contains(want), "{want:?} in {}", r.text());
        }
    }
}

/// A uwsgi packet's length once its head and body (by `CONTENT_LENGTH`)
/// are in.
fn packet_len(b: &[u8]) -> Option<usize> {
    if b.len() < 4 {
        return None;
    }
    let size = u16::from_le_bytes([b[1], b[2]]) as usize;
    if b.len() < 4 + size {
        return None;
    }
    let body = vars(b)
        .iter()
        .find(|(n, _)| n == "CONTENT_LENGTH")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    Some(4 + size + body)
}

/// A packet's vars, in order.
fn vars(b: &[u8]) -> Vec<(String, String)> {
    let size = u16::from_le_bytes([b[1], b[2]]) as usize;
    let mut out = Vec::new();
    let mut i = 4;
    let take = |i: &mut usize| {
        let n = u16::from_le_bytes([b[*i], b[*i + 1]]) as usize;
        let s = String::from_utf8_lossy(&b[*i + 2..*i + 2 + n]).into_owned();
        *i += 2 + n;
        s
    };
    while i < 4 + size {
        let n = take(&mut i);
        let v = take(&mut i);
        out.push((n, v));
    }
    out
}

/// What differs between the two servers by nature: their ports.
fn comparable(v: Vec<(String, String)>) -> Vec<(String, String)> {
    v.into_iter()
        .filter(|(n, _)| n != "REMOTE_PORT" && n != "SERVER_PORT")
        .collect()
}

const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nok\n";

#[test]
fn packets_are_nginx_s_var_for_var() {
    let app = Scripted::start(packet_len, vec![], OK.to_vec());
    let pass = format!("127.0.0.1:{}", app.port);
    let extra = "      uwsgi_modifier1 5;\n      uwsgi_modifier2 9;";
    let p = porter(&pass, extra);
    let n = nginx(&pass, extra);
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
    for (method, target, headers, body) in &cases {
        let a = request(p.port, method, target, headers, body);
        assert_eq!(a.text(), "ok\n");
        let from_porter = app.last();
        let b = request(n.port, method, target, headers, body);
        assert_eq!(b.text(), "ok\n");
        let from_nginx = app.last();
        assert_eq!(&from_porter[..1], &[5]);
        assert_eq!(from_porter[3], 9);
        assert_eq!(
            comparable(vars(&from_porter)),
            comparable(vars(&from_nginx)),
            "{method} {target}: porter, then nginx"
        );
        let end = 4 + u16::from_le_bytes([from_porter[1], from_porter[2]]) as usize;
        assert_eq!(&from_porter[end..], *body);
        assert_eq!(
            &from_nginx[4 + u16::from_le_bytes([from_nginx[1], from_nginx[2]]) as usize..],
            *body
        );
    }
    // Without the client's headers, only the params go.
    let p = porter(&pass, "      uwsgi_pass_request_headers off;");
    request(p.port, "GET", "/h", "X-Custom: 1\r\n", b"");
    assert!(vars(&app.last()).iter().all(|(n, _)| n != "HTTP_X_CUSTOM"));
}

#[test]
fn bad_answers_are_502_with_nginx_s_log_lines() {
    let answers: Vec<(&'static str, Vec<u8>)> = vec![
        (
            "/bad/header",
            b"HTTP/1.1 200 OK\r\nBad Header\r\n\r\nx".to_vec(),
        ),
        (
            "/bad/line",
            b"HTTP/1.1 abc\r\nX-App: skipped\r\n\r\n".to_vec(),
        ),
        ("/bad/nothing", b"".to_vec()),
        (
            "/bad/too-big",
            [
                b"HTTP/1.1 200 OK\r\nX-Big: ".as_slice(),
                &[b'a'; 10000],
                b"\r\n\r\n",
            ]
            .concat(),
        ),
        (
            "/bad/two-lengths",
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nab".to_vec(),
        ),
        (
            "/cgi/status",
            b"Status: 404 Gone\r\nContent-Type: text/plain\r\n\r\ngone\n".to_vec(),
        ),
        (
            "/bad/short",
            b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten..".to_vec(),
        ),
    ];
    let app = Scripted::start(packet_len, answers, OK.to_vec());
    let pass = format!("127.0.0.1:{}", app.port);
    let p = porter(&pass, "");
    let n = nginx(&pass, "");
    for (path, status) in [
        ("/bad/header", 502),
        ("/bad/line", 200),
        ("/bad/nothing", 502),
        ("/bad/too-big", 502),
        ("/cgi/status", 404),
    ] {
        let a = request(p.port, "GET", path, "", b"");
        let b = request(n.port, "GET", path, "", b"");
        assert_eq!(a.status, status, "{path}");
        assert_eq!(essence(&a), essence(&b), "{path}: porter, then nginx");
    }
    // Current NGINX refuses two lengths (1.22 passed the answer on).
    assert_eq!(
        request(p.port, "GET", "/bad/two-lengths", "", b"").status,
        502
    );
    cut_short_body_ends_the_connection(p.port);
    // Current NGINX refuses two lengths (1.22 passed them on): not in its log.
    bad_answer_lines_as_nginx(
        &p,
        &n.error_log(),
        &[
            ("upstream sent invalid header: \"Bad\\x20...\" while reading response header from upstream", 1, true),
            ("upstream prematurely closed connection while reading response header from upstream", 1, true),
            ("upstream sent too big header while reading response header from upstream", 1, true),
            ("upstream sent duplicate header line: \"Content-Length: 3\", previous value: \"Content-Length: 2\" while reading response header from upstream", 1, false),
        ],
        ("uwsgi", app.port),
    );
}

#[test]
fn connections_are_not_kept_even_with_keepalive() {
    let app = Scripted::start(packet_len, vec![], OK.to_vec());
    not_kept_even_with_keepalive(&app, &start);
}

#[test]
fn slow_app_is_504_and_a_down_app_is_502_never_the_source() {
    let app = Uwsgi::start();
    let (pass, port) = (format!("127.0.0.1:{}", app.port), app.port);
    let (p, n) = (porter(&pass, ""), nginx(&pass, ""));
    slow_then_down_as_nginx((&p, &n), app, ("uwsgi", port), ("/wsgi_app.py", "def app"));
}

#[test]
fn large_upload_streams_with_bounded_memory_and_download_arrives_whole() {
    let app = Uwsgi::start();
    upload_and_download_whole(&porter(&format!("unix:{}", app.sock.display()), ""));
}

#[test]
fn uwsgi_pass_forms_and_errors() {
    let e = config_error(&bare_conf("uwsgi_pass 127.0.0.1;"));
    assert!(e.contains("no port in upstream \"127.0.0.1\""), "{e}");
    let e = config_error(&bare_conf("uwsgi_modifier1 256;"));
    assert!(e.contains("invalid value \"256\""), "{e}");
    // `uwsgi://` leads as in NGINX.
    let app = Scripted::start(packet_len, vec![], OK.to_vec());
    let p = porter(&format!("uwsgi://127.0.0.1:{}", app.port), "");
    assert_eq!(request(p.port, "GET", "/", "", b"").text(), "ok\n");
}

/// A config with `line` in a location, for `porter -t`.
fn bare_conf(line: &str) -> String {
    format!(
        "error_log {{PREFIX}}/logs/error.log;\nevents {{ }}\nhttp {{ server {{ listen 127.0.0.1:1; \
         location / {{ {line} }} }} }}\n"
    )
}

/// `uwsgi_cache` is `fastcgi_cache`'s engine, as nginx's
/// (`apps::cache_steps_as_nginx`).
#[test]
fn uwsgi_cache_stores_and_serves_as_nginx() {
    let app = Uwsgi::start();
    let pass = format!("127.0.0.1:{}", app.port);
    let extra = cache_extra("uwsgi");
    cache_steps_as_nginx("uwsgi", &|nginx_side, http| -> Box<dyn Port> {
        match nginx_side {
            true => Box::new(nginx_with(http, &pass, &extra)),
            false => Box::new(porter_with(http, &pass, &extra)),
        }
    });
}
