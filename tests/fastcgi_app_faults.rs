//! FastCGI applications that misbehave, and the FastCGI module's
//! settings, against a FastCGI responder written here (std::net, one
//! thread per connection) whose answer the request's URI picks: a record
//! stream cut short, bad versions, types and headers, a header too big,
//! an application that never answers, a body on a 204, stderr lines.
//! porter and Debian's nginx run the same config against it and must
//! give the same status and body and log the same line; neither may
//! crash. Then `fastcgi_param` inheritance and `if_not_empty`,
//! `fastcgi_keep_conn` with an `upstream` keepalive pool,
//! `fastcgi_catch_stderr`, `fastcgi_intercept_errors`,
//! `fastcgi_hide_header` and `fastcgi_next_upstream`.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;

fn record(kind: u8, content: &[u8]) -> Vec<u8> {
    let len = content.len();
    let pad = (8 - len % 8) % 8;
    let mut v = vec![1, kind, 0, 1, (len >> 8) as u8, len as u8, pad as u8, 0];
    v.extend_from_slice(content);
    v.resize(v.len() + pad, 0);
    v
}

fn stdout(data: &[u8]) -> Vec<u8> {
    record(6, data)
}

fn end_request() -> Vec<u8> {
    record(3, &[0; 8])
}

/// One request as the responder read it.
struct Request {
    keep_conn: bool,
    params: BTreeMap<String, String>,
}

fn read_exact(s: &mut TcpStream, n: usize) -> Option<Vec<u8>> {
    let mut v = vec![0; n];
    s.read_exact(&mut v).ok()?;
    Some(v)
}

fn pair_len(b: &[u8], i: &mut usize) -> usize {
    if b[*i] < 128 {
        *i += 1;
        b[*i - 1] as usize
    } else {
        let n = u32::from_be_bytes([b[*i] & 0x7f, b[*i + 1], b[*i + 2], b[*i + 3]]);
        *i += 4;
        n as usize
    }
}

/// Reads records up to the empty STDIN.
fn read_request(s: &mut TcpStream) -> Option<Request> {
    let (mut keep_conn, mut params, mut stream) = (false, BTreeMap::new(), Vec::new());
    loop {
        let h = read_exact(s, 8)?;
        let len = (h[4] as usize) << 8 | h[5] as usize;
        let content = read_exact(s, len)?;
        read_exact(s, h[6] as usize)?;
        match (h[1], len) {
            (1, _) => keep_conn = content[2] & 1 != 0,
            (4, 0) => {
                let mut i = 0;
                while i < stream.len() {
                    let n = pair_len(&stream, &mut i);
                    let v = pair_len(&stream, &mut i);
                    let name = String::from_utf8_lossy(&stream[i..i + n]).into_owned();
                    let value = String::from_utf8_lossy(&stream[i + n..i + n + v]).into_owned();
                    params.insert(name, value);
                    i += n + v;
                }
            }
            (4, _) => stream.extend_from_slice(&content),
            (5, 0) => return Some(Request { keep_conn, params }),
            _ => {}
        }
    }
}

/// The answer to `path`, and whether the connection stays open after it.
fn answer(req: &Request) -> (Vec<u8>, bool) {
    let path = req.params.get("REQUEST_URI").cloned().unwrap_or_default();
    let path = path.split('?').next().unwrap_or("");
    let ok = |body: &[u8]| {
        let mut v = stdout(b"Content-Type: text/plain\r\n\r\n");
        v.extend(stdout(body));
        v.extend(stdout(b""));
        v.extend(end_request());
        v
    };
    let cut = |v: Vec<u8>| (v, false);
    match path {
        "/ok" => (ok(b"ok\n"), req.keep_conn),
        "/params" => {
            let mut body = String::new();
            for (k, v) in &req.params {
                if k.starts_with("T_") || k.starts_with("HTTP_X") {
                    body.push_str(&format!("{k}={v}\n"));
                }
            }
            (ok(body.as_bytes()), req.keep_conn)
        }
        "/big" => {
            let mut v = stdout(b"Content-Type: text/plain\r\n\r\n");
            for _ in 0..32 {
                v.extend(stdout(&[b'x'; 32768]));
            }
            v.extend(stdout(b""));
            v.extend(end_request());
            (v, req.keep_conn)
        }
        "/cut-head" => cut(stdout(b"Content-Type: text/pl")),
        "/cut-body" => cut(stdout(b"Content-Length: 100\r\n\r\n0123456789")),
        "/bad-version" => cut(vec![2, 6, 0, 1, 0, 0, 0, 0]),
        "/bad-type" => cut(vec![1, 9, 0, 1, 0, 0, 0, 0]),
        "/bad-id" => cut(vec![1, 6, 0, 2, 0, 0, 0, 0]),
        "/bad-header" => cut(stdout(b"Bad Header\r\n\r\n")),
        "/bad-status" => cut(stdout(b"Status: abc\r\n\r\n")),
        "/too-big" => cut(stdout(&[b'a'; 6000])),
        "/empty-stdout" => cut(stdout(b"")),
        "/end-only" => cut(end_request()),
        "/body-204" => {
            let mut v = stdout(b"Status: 204 No Content\r\n\r\nextra body");
            v.extend(stdout(b""));
            v.extend(end_request());
            cut(v)
        }
        "/too-long" => {
            let mut v = stdout(b"Content-Length: 3\r\n\r\nabcdef");
            v.extend(stdout(b""));
            v.extend(end_request());
            cut(v)
        }
        "/stderr" => {
            let mut v = record(7, b"FATAL: boom...\n");
            v.extend(ok(b"after\n"));
            cut(v)
        }
        "/404" => {
            let mut v =
                stdout(b"Status: 404 Not Found\r\nX-Secret: s\r\nX-Open: o\r\n\r\napp 404\n");
            v.extend(stdout(b""));
            v.extend(end_request());
            cut(v)
        }
        _ => cut(ok(b"unknown\n")),
    }
}

/// The responder on a loopback port; counts its connections.
struct App {
    port: u16,
    conns: Arc<AtomicUsize>,
}

impl App {
    fn start() -> App {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let conns = Arc::new(AtomicUsize::new(0));
        let c = conns.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                c.fetch_add(1, Ordering::SeqCst);
                std::thread::spawn(move || serve(&mut s));
            }
        });
        App { port, conns }
    }
}

fn serve(s: &mut TcpStream) {
    while let Some(req) = read_request(s) {
        let path = req.params.get("REQUEST_URI").cloned().unwrap_or_default();
        if path.starts_with("/never") {
            std::thread::sleep(Duration::from_secs(5));
            return;
        }
        let (bytes, keep) = answer(&req);
        if s.write_all(&bytes).is_err() || !keep {
            return;
        }
    }
}

fn location(app: u16, extra: &str) -> String {
    format!(
        "  server {{\n    listen 127.0.0.1:{{PORT}};\n    server_name localhost;\n    \
         location / {{\n      fastcgi_pass 127.0.0.1:{app};\n      \
         fastcgi_param REQUEST_URI $request_uri;\n      fastcgi_read_timeout 1s;\n{extra}\n    }}\n  }}"
    )
}

#[test]
fn misbehaving_applications_get_nginx_statuses_and_lines() {
    let app = App::start();
    let body = location(app.port, "");
    let p = Server::start(&one_worker_conf(&body));
    let n = Nginx::start(&body).expect("nginx is not installed");
    let up = format!("upstream: \"fastcgi://127.0.0.1:{}\"", app.port);
    let cases: &[(&str, u16, &str)] = &[
        ("/cut-head", 502, "upstream prematurely closed connection while reading response header from upstream"),
        ("/bad-version", 502, "upstream sent unsupported FastCGI protocol version: 2 while reading response header from upstream"),
        ("/bad-type", 502, "upstream sent invalid FastCGI record type: 9 while reading response header from upstream"),
        ("/bad-id", 502, "upstream sent unexpected FastCGI request id low byte: 2 while reading response header from upstream"),
        ("/bad-header", 502, "upstream sent invalid header: \"Bad\\x20...\" while reading response header from upstream"),
        ("/bad-status", 502, "upstream sent invalid status \"abc\" while reading response header from upstream"),
        ("/too-big", 502, "upstream sent too big header while reading response header from upstream"),
        ("/empty-stdout", 502, "upstream prematurely closed FastCGI stdout while reading response header from upstream"),
        ("/end-only", 502, "upstream sent unexpected FastCGI record: 3 while reading response header from upstream"),
        ("/never", 504, "upstream timed out (110: Connection timed out) while reading response header from upstream"),
        ("/body-204", 204, "upstream sent more data than specified in \"Content-Length\" header while reading upstream"),
        ("/too-long", 200, "upstream sent more data than specified in \"Content-Length\" header while reading upstream"),
        ("/stderr", 200, "FastCGI sent in stderr: \"FATAL: boom\" while reading response header from upstream"),
        ("/cut-body", 200, "upstream prematurely closed connection while reading upstream"),
    ];
    for (path, status, line) in cases {
        if *path == "/cut-body" {
            // The head goes out with the upstream's length, then the body
            // stops short and the connection closes.
            for port in [p.port, n.port] {
                let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
                s.write_all(req(path).as_bytes()).unwrap();
                let got = String::from_utf8_lossy(&read_all(&mut s)).into_owned();
                assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{got}");
                assert!(got.contains("Content-Length: 100\r\n"), "{got}");
                assert!(got.ends_with("\r\n\r\n0123456789"), "{got}");
            }
        }
        let (a, b) = match *path {
            "/cut-body" => (None, None),
            _ => (
                try_raw(p.port, req(path).as_bytes()),
                try_raw(n.port, req(path).as_bytes()),
            ),
        };
        if let (Some(a), Some(b)) = (a, b) {
            assert_eq!((a.status, b.status), (*status, *status), "{path}");
            if *status < 500 {
                assert_eq!(a.text(), b.text(), "{path}");
            }
        } else {
            assert_eq!(*path, "/cut-body");
        }
        let want = format!("{line}, client: 127.0.0.1, server: localhost, request: \"GET {path} HTTP/1.1\", {up}, host: \"localhost\"");
        let log = p.wait_log("logs/error.log", &want, Duration::from_secs(3));
        assert!(log.contains(&want), "porter, {path}: {log}");
        if *path == "/cut-body" {
            // nginx ends a FastCGI body cut short silently (buffered, its
            // pipe has no length to miss: `p->upstream_eof && p->length
            // == -1`); porter says so, as it does for a proxied body.
            continue;
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(3);
        while !n.error_log().contains(&want) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            n.error_log().contains(&want),
            "nginx, {path}: {}",
            n.error_log()
        );
    }
    // Still serving.
    assert_eq!(get(p.port, "/ok").text(), "ok\n");
}

fn req(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
}

#[test]
fn params_inherit_as_nginx_merges_them() {
    let app = App::start();
    let conf = format!(
        "  fastcgi_param T_OUTER outer;\n  fastcgi_param REQUEST_URI $request_uri;\n\
         server {{\n    listen 127.0.0.1:{{PORT}};\n    server_name localhost;\n    \
         location /params {{ fastcgi_pass 127.0.0.1:{a}; }}\n    \
         location /inner/ {{\n      fastcgi_pass 127.0.0.1:{a};\n      \
         fastcgi_param REQUEST_URI /params;\n      fastcgi_param T_INNER $arg_v;\n      \
         fastcgi_param T_EMPTY $arg_none if_not_empty;\n      fastcgi_param T_SET $arg_v if_not_empty;\n    }}\n    \
         location /nohdr/ {{\n      fastcgi_pass 127.0.0.1:{a};\n      fastcgi_param REQUEST_URI /params;\n      \
         fastcgi_param T_NOHDR 1;\n      fastcgi_pass_request_headers off;\n    }}\n  }}",
        a = app.port
    );
    let p = Server::start(&one_worker_conf(&conf));
    let n = Nginx::start(&conf).expect("nginx is not installed");
    // Repeated headers travel as one, as current NGINX sends them (1.22
    // sent each).
    let outer = get_with(p.port, "/params", "X-One: 1\r\nX-One: 2\r\n");
    assert_eq!(outer.text(), "HTTP_X_ONE=1, 2\nT_OUTER=outer\n");
    for port in [p.port, n.port] {
        let outer = get_with(port, "/params", "X-One: 1\r\n");
        assert_eq!(outer.text(), "HTTP_X_ONE=1\nT_OUTER=outer\n");
        let inner = get_with(port, "/inner/?v=7", "X-Two: 2\r\n");
        assert_eq!(inner.text(), "HTTP_X_TWO=2\nT_INNER=7\nT_SET=7\n");
        let nohdr = get_with(port, "/nohdr/", "X-Two: 2\r\n");
        // A level with any fastcgi_param replaces the outer list.
        assert_eq!(nohdr.text(), "T_NOHDR=1\n");
    }
}

#[test]
fn keep_conn_reuses_connections_of_an_upstream_pool() {
    let app = App::start();
    let conf = format!(
        "  upstream app {{ server 127.0.0.1:{}; keepalive 2; }}\n  server {{\n    \
         listen 127.0.0.1:{{PORT}};\n    server_name localhost;\n    location / {{\n      \
         fastcgi_pass app;\n      fastcgi_keep_conn on;\n      fastcgi_param REQUEST_URI $request_uri;\n    }}\n  }}",
        app.port
    );
    let p = Server::start(&one_worker_conf(&conf));
    for _ in 0..20 {
        assert_eq!(get(p.port, "/ok").text(), "ok\n");
    }
    assert_eq!(app.conns.load(Ordering::SeqCst), 1);
    // Without fastcgi_keep_conn each request has its own connection.
    let app2 = App::start();
    let p2 = Server::start(&one_worker_conf(&location(app2.port, "")));
    for _ in 0..5 {
        assert_eq!(get(p2.port, "/ok").text(), "ok\n");
    }
    assert_eq!(app2.conns.load(Ordering::SeqCst), 5);
}

#[test]
fn catch_stderr_intercept_errors_and_hidden_headers() {
    let app = App::start();
    let extra = "      fastcgi_catch_stderr FATAL;\n      fastcgi_hide_header X-Secret;\n";
    let body = location(app.port, extra);
    let p = Server::start(&one_worker_conf(&body));
    assert_eq!(get(p.port, "/stderr").status, 502);
    let r = get(p.port, "/404");
    assert_eq!((r.status, r.text().as_str()), (404, "app 404\n"));
    assert_eq!(r.header("x-secret"), None);
    assert_eq!(r.header("x-open"), Some("o"));
    assert_eq!(r.header("status"), None);
    let intercept = location(
        app.port,
        "      fastcgi_intercept_errors on;\n      error_page 404 /e404;\n    }\n    location = /e404 {\n      return 404 \"mine\\n\";",
    );
    let p = Server::start(&one_worker_conf(&intercept));
    let r = get(p.port, "/404");
    assert_eq!((r.status, r.text().as_str()), (404, "mine\n"));
}

#[test]
fn next_upstream_passes_a_refused_request_to_the_next_server() {
    let app = App::start();
    let dead = free_port();
    // max_fails=0: the dead server stays in the rotation, so every other
    // request meets it first.
    let conf = format!(
        "  upstream app {{ server 127.0.0.1:{dead} max_fails=0; server 127.0.0.1:{}; }}\n  server {{\n    \
         listen 127.0.0.1:{{PORT}};\n    server_name localhost;\n    location / {{\n      \
         fastcgi_pass app;\n      fastcgi_param REQUEST_URI $request_uri;\n      \
         add_header X-Up $upstream_addr;\n    }}\n    location /once/ {{\n      \
         fastcgi_pass app;\n      fastcgi_next_upstream off;\n      fastcgi_param REQUEST_URI /ok;\n    }}\n  }}",
        app.port
    );
    let p = Server::start(&one_worker_conf(&conf));
    let mut passed_on = 0;
    for _ in 0..4 {
        let r = get(p.port, "/ok");
        assert_eq!(r.status, 200);
        let up = r.header("x-up").unwrap_or_default().to_string();
        if up == format!("127.0.0.1:{dead}, 127.0.0.1:{}", app.port) {
            passed_on += 1;
        }
    }
    assert_eq!(passed_on, 2);
    let refused = (0..4)
        .filter(|_| get(p.port, "/once/").status == 502)
        .count();
    assert_eq!(refused, 2);
}

#[test]
fn limit_rate_paces_the_reads_from_the_application() {
    let app = App::start();
    let p = Server::start(&one_worker_conf(&location(
        app.port,
        "      fastcgi_limit_rate 400k;",
    )));
    let t0 = std::time::Instant::now();
    let r = get(p.port, "/big");
    assert_eq!(r.body.len(), 1 << 20);
    // 400 KiB the first second, 400 more each next: over two seconds.
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(1900), "{took:?}");
    let t0 = std::time::Instant::now();
    let p = Server::start(&one_worker_conf(&location(app.port, "")));
    assert_eq!(get(p.port, "/big").body.len(), 1 << 20);
    assert!(t0.elapsed() < Duration::from_millis(1500));
}
