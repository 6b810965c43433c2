//! `mirror` and `mirror_request_body` (NGINX's mirror module) on the real
//! binary, beside Debian's nginx 1.22 on the same origin: what the mirror
//! location's upstream receives (method, URI with the request's
//! arguments, header lines, the body or none), two mirrors, a failing
//! mirror that changes nothing for the client, and the timing NGINX has:
//! the response is sent while a slow mirror runs, and the connection's
//! next request is answered only once the mirror is done.
//!
//! Run: `cargo test --release --test area_vars mirror::`.

use crate::common;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::origin::{Origin, Reply};
use crate::common::{one_worker_conf, raw, read_response, Nginx, Resp, Server, NGINX};

const SLOW: Duration = Duration::from_millis(1000);

fn origin() -> Origin {
    Origin::start(|r| {
        if r.target.starts_with("/slowmirror") {
            return Reply::ok(b"mirror").delay(SLOW);
        }
        if r.target.starts_with("/mirror") {
            return Reply::ok(b"mirror answer, dropped").status(404);
        }
        Reply::ok(format!("main {} {} {}\n", r.method, r.target, r.body.len()).as_bytes())
    })
}

fn http(o: u16) -> String {
    format!(
        "server {{\n  listen 127.0.0.1:{{PORT}};\n  server_name localhost;\n\
  location / {{\n    mirror /m;\n    proxy_pass http://127.0.0.1:{o};\n  }}\n\
  location /nobody/ {{\n    mirror /m2;\n    mirror_request_body off;\n    proxy_pass http://127.0.0.1:{o};\n  }}\n\
  location /two/ {{\n    mirror /m;\n    mirror /m2;\n    proxy_pass http://127.0.0.1:{o};\n  }}\n\
  location /slow/ {{\n    mirror /ms;\n    proxy_pass http://127.0.0.1:{o};\n  }}\n\
  location /down/ {{\n    mirror /md;\n    proxy_pass http://127.0.0.1:{o};\n  }}\n\
  location /off/ {{\n    mirror off;\n    proxy_pass http://127.0.0.1:{o};\n  }}\n\
  location = /m {{\n    internal;\n    proxy_pass http://127.0.0.1:{o}/mirror$request_uri;\n\
    proxy_set_header X-Mirror yes;\n  }}\n\
  location = /m2 {{\n    internal;\n    proxy_pass http://127.0.0.1:{o}/mirror2$request_uri;\n\
    proxy_pass_request_body off;\n    proxy_set_header Content-Length \"\";\n  }}\n\
  location = /ms {{\n    internal;\n    proxy_pass http://127.0.0.1:{o}/slowmirror$request_uri;\n  }}\n\
  location = /md {{\n    internal;\n    proxy_pass http://127.0.0.1:1;\n  }}\n\
}}\n"
    )
}

fn ask(port: u16, method: &str, target: &str, body: &str) -> Resp {
    let req = format!(
        "{method} {target} HTTP/1.1\r\nHost: localhost\r\nX-Client: 1\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    raw(port, req.as_bytes())
}

const CASES: &[(&str, &str, &str)] = &[
    ("GET", "/a?x=1", ""),
    ("POST", "/form?y=2", "field=value&more=1"),
    ("PUT", "/nobody/f", "not mirrored"),
    ("POST", "/two/t", "both"),
    ("GET", "/down/d", ""),
    ("GET", "/off/o", ""),
];

/// The client's answer and every request the origin got for it (sorted:
/// the mirrors run beside the main request).
fn run_cases(port: u16, o: &Origin) -> Vec<(String, Vec<String>)> {
    CASES
        .iter()
        .map(|(m, t, b)| {
            let before = o.count();
            let r = ask(port, m, t, b);
            let answer = format!("{} {}", r.status, r.text());
            // The mirrors are done before the connection closes.
            std::thread::sleep(Duration::from_millis(100));
            let mut got: Vec<String> = o.requests()[before..]
                .iter()
                .map(|q| {
                    let mut h: Vec<String> = q
                        .headers
                        .iter()
                        .filter(|(n, _)| !n.eq_ignore_ascii_case("host"))
                        .map(|(n, v)| format!("{}: {v}", n.to_ascii_lowercase()))
                        .collect();
                    h.sort();
                    format!("{} {h:?} {:?}", q.line, String::from_utf8_lossy(&q.body))
                })
                .collect();
            got.sort();
            (answer, got)
        })
        .collect()
}

#[test]
fn mirrors_get_a_copy_of_the_request_as_nginx_s_do() {
    let o = origin();
    let conf = http(o.port);
    let srv = Server::start(&one_worker_conf(&conf));
    let ours = run_cases(srv.port, &o);
    assert_eq!(ours[0].0, "200 main GET /a?x=1 0\n");
    assert_eq!(ours[0].1.len(), 2, "{:?}", ours[0].1);
    let post = &ours[1].1;
    assert!(
        post.iter()
            .any(|l| l.starts_with("POST /mirror/form?y=2 HTTP/1.0")
                && l.contains("x-mirror: yes")
                && l.contains("x-client: 1")
                && l.ends_with("\"field=value&more=1\"")),
        "{post:?}"
    );
    assert_eq!(ours[1].0, "200 main POST /form?y=2 18\n");
    assert!(
        ours[2]
            .1
            .iter()
            .any(|l| l.starts_with("PUT /mirror2/nobody/f") && l.ends_with("\"\"")),
        "{:?}",
        ours[2].1
    );
    assert_eq!(ours[3].1.len(), 3);
    assert_eq!(ours[4].0, "200 main GET /down/d 0\n");
    assert_eq!(ours[5].1.len(), 1);
    let Some(ngx) = Nginx::start(&conf) else {
        eprintln!("skipping the comparison: {NGINX} is not installed");
        return;
    };
    let theirs = run_cases(ngx.port, &o);
    for (i, c) in CASES.iter().enumerate() {
        assert_eq!(ours[i], theirs[i], "{c:?}");
    }
}

/// Two requests on one connection to a location whose mirror takes
/// [`SLOW`]: when the first answer arrived, and when the second did.
fn keepalive_timing(port: u16) -> (Duration, Duration) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = b"GET /slow/1 HTTP/1.1\r\nHost: localhost\r\n\r\n";
    let mut buf = Vec::new();
    let t = Instant::now();
    s.write_all(req).unwrap();
    let r = read_response(&mut s, &mut buf, false).unwrap();
    assert_eq!(r.status, 200);
    let first = t.elapsed();
    s.write_all(req).unwrap();
    let r = read_response(&mut s, &mut buf, false).unwrap();
    assert_eq!(r.status, 200);
    (first, t.elapsed())
}

#[test]
fn a_slow_mirror_delays_the_next_request_not_the_response() {
    let o = origin();
    let conf = http(o.port);
    let srv = Server::start(&one_worker_conf(&conf));
    let (first, second) = keepalive_timing(srv.port);
    assert!(first < SLOW / 2, "{first:?}");
    assert!(second >= SLOW, "{second:?}");
    // Other connections are not held up meanwhile.
    let port = srv.port;
    let bg = std::thread::spawn(move || keepalive_timing(port));
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    assert_eq!(ask(srv.port, "GET", "/off/x", "").status, 200);
    assert!(t.elapsed() < SLOW / 2, "{:?}", t.elapsed());
    bg.join().unwrap();
    let Some(ngx) = Nginx::start(&conf) else {
        eprintln!("skipping the comparison: {NGINX} is not installed");
        return;
    };
    let (first, second) = keepalive_timing(ngx.port);
    assert!(
        first < SLOW / 2 && second >= SLOW,
        "nginx: {first:?} {second:?}"
    );
}

#[test]
fn mirror_off_cannot_follow_a_mirror() {
    let err = common::config_error(&one_worker_conf(
        "server { location / { mirror /m; mirror off; } }",
    ));
    assert!(err.contains("\"mirror\" directive is duplicate"), "{err}");
}

/// The requests the origin got for one chunked POST to `/c/x?z=3`: the
/// main request's and the mirror's (sorted), without Host.
fn chunked_post(port: u16, o: &Origin) -> (String, Vec<String>) {
    let before = o.count();
    let r = raw(
        port,
        b"POST /c/x?z=3 HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\
          Connection: close\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
    );
    std::thread::sleep(Duration::from_millis(100));
    let mut got: Vec<String> = o.requests()[before..]
        .iter()
        .map(|q| {
            let framing = ["content-length", "transfer-encoding"]
                .iter()
                .map(|h| format!("{h}={:?}", q.header(h)))
                .collect::<Vec<_>>()
                .join(" ");
            format!(
                "{} {framing} {:?}",
                q.line,
                String::from_utf8_lossy(&q.body)
            )
        })
        .collect();
    got.sort();
    (format!("{} {}", r.status, r.text()), got)
}

#[test]
fn a_chunked_body_reaches_the_mirror_and_the_handler_as_in_nginx() {
    let o = origin();
    let conf = http(o.port);
    let srv = Server::start(&one_worker_conf(&conf));
    let ours = chunked_post(srv.port, &o);
    assert_eq!(ours.0, "200 main POST /c/x?z=3 11\n");
    assert!(
        ours.1
            .iter()
            .any(|l| l.starts_with("POST /mirror/c/x?z=3 ") && l.ends_with("\"hello world\"")),
        "{:?}",
        ours.1
    );
    let Some(ngx) = Nginx::start(&conf) else {
        eprintln!("skipping the comparison: {NGINX} is not installed");
        return;
    };
    assert_eq!(ours, chunked_post(ngx.port, &o));
}

#[test]
fn an_http2_request_s_body_reaches_the_mirror_and_the_handler() {
    use common::h2client::{self as c, rt};
    let o = origin();
    let conf = http(o.port).replace(
        "listen 127.0.0.1:{PORT};",
        "listen 127.0.0.1:{PORT};\n  http2 on;",
    );
    let srv = Server::start(&one_worker_conf(&conf));
    let before = o.count();
    let r = rt().block_on(async {
        let send = c::connect(srv.port).await;
        c::request(&send, "POST", "/h2/p?q=1", &[], Some(b"h2 body".to_vec()))
            .await
            .unwrap()
    });
    assert_eq!(r.status, 200);
    assert_eq!(String::from_utf8_lossy(&r.body), "main POST /h2/p?q=1 7\n");
    std::thread::sleep(Duration::from_millis(200));
    let got: Vec<(String, Vec<u8>)> = o.requests()[before..]
        .iter()
        .map(|q| (q.line.clone(), q.body.clone()))
        .collect();
    assert!(
        got.iter()
            .any(|(l, b)| l.starts_with("POST /mirror/h2/p?q=1 ") && b == b"h2 body"),
        "{got:?}"
    );
}
