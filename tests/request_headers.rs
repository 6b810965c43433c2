//! Tuning directives that change what porter does (issue 13 item 1):
//! `merge_slashes`, `ignore_invalid_headers`, `underscores_in_headers`,
//! `max_headers`, `keepalive_time`, `access_log ... if=`, `error_log` in a
//! location and `server_tokens build`. Where Debian's nginx (1.22) has the
//! directive, the same server block runs in both and the answers are
//! compared; `max_headers` (NGINX 1.29) is checked against its
//! documented behaviour.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use common::origin::*;
use common::*;

fn nginx_body(http_extra: &str, server_body: &str) -> String {
    format!(
        "{http_extra}\nserver {{\n    listen 127.0.0.1:{{PORT}};\n    server_name localhost;\n{server_body}\n}}\n"
    )
}

/// porter, and nginx when installed, on the same settings.
fn both(http_extra: &str, server_body: &str) -> (Server, Option<Nginx>) {
    let p = Server::start(&one_server_conf(http_extra, server_body));
    let n = Nginx::start(&nginx_body(http_extra, server_body));
    if n.is_none() {
        eprintln!("nginx not installed: comparing with porter's expected answers only");
    }
    (p, n)
}

fn ask(port: u16, raw: &str) -> Resp {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(raw.as_bytes()).unwrap();
    let mut buf = Vec::new();
    read_response(&mut s, &mut buf, false).expect("response")
}

fn get_h(port: u16, path: &str, headers: &str) -> Resp {
    ask(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{headers}Connection: close\r\n\r\n"),
    )
}

#[test]
fn underscores_in_headers_as_nginx() {
    let loc = "location / { return 200 \"[$http_x_u]\"; }";
    for (extra, want) in [("", "[]"), ("underscores_in_headers on;", "[1]")] {
        let (p, n) = both(extra, loc);
        let got = get_h(p.port, "/", "X_U: 1\r\n");
        assert_eq!(got.text(), want, "porter, {extra:?}");
        if let Some(n) = n {
            assert_eq!(
                get_h(n.port, "/", "X_U: 1\r\n").text(),
                want,
                "nginx, {extra:?}"
            );
        }
    }
}

#[test]
fn ignore_invalid_headers_as_nginx() {
    // The origin says which of the odd names reached it.
    let origin = Origin::start(|r| {
        let seen: Vec<&str> = ["x.dot", "x_u"]
            .into_iter()
            .filter(|h| r.header(h).is_some())
            .collect();
        Reply::ok(format!("{seen:?}").as_bytes())
    });
    let loc = format!(
        "location / {{ proxy_pass http://127.0.0.1:{}; }}",
        origin.port
    );
    for (extra, want) in [
        ("", "[]"),
        ("ignore_invalid_headers off;", "[\"x.dot\", \"x_u\"]"),
        ("underscores_in_headers on;", "[\"x_u\"]"),
    ] {
        let (p, n) = both(extra, &loc);
        let hdrs = "X.Dot: 1\r\nX_U: 2\r\n";
        assert_eq!(get_h(p.port, "/", hdrs).text(), want, "porter, {extra:?}");
        if let Some(n) = n {
            assert_eq!(get_h(n.port, "/", hdrs).text(), want, "nginx, {extra:?}");
        }
    }
}

#[test]
fn max_headers_limits_the_count() {
    // NGINX 1.29's own test: with `max_headers 5`, five lines pass and a
    // sixth is a 400.
    let p = Server::start(&one_server_conf(
        "",
        "max_headers 5;\nlocation / { return 204; }",
    ));
    let five = "Foo: bar\r\nFoo: bar\r\nFoo: bar\r\n";
    assert_eq!(get_h(p.port, "/", five).status, 204);
    let six = "Foo: bar\r\nFoo: bar\r\nFoo: bar\r\nFoo: bar\r\n";
    assert_eq!(get_h(p.port, "/", six).status, 400);
}

#[test]
fn merge_slashes_off_keeps_the_uri() {
    let loc = "location / { return 200 \"$uri\"; }";
    for (extra, want) in [("", "/a/b/"), ("merge_slashes off;", "/a//b/")] {
        let (p, n) = both(extra, loc);
        assert_eq!(
            get_h(p.port, "/a//b/", "").text(),
            want,
            "porter, {extra:?}"
        );
        if let Some(n) = n {
            assert_eq!(get_h(n.port, "/a//b/", "").text(), want, "nginx, {extra:?}");
        }
    }
}

#[test]
fn keepalive_time_closes_after_the_next_request() {
    let (p, n) = both("keepalive_time 1s;", "location / { return 200 ok; }");
    let ports: Vec<u16> = std::iter::once(p.port)
        .chain(n.as_ref().map(|n| n.port))
        .collect();
    for port in ports {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut buf = Vec::new();
        let req = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
        s.write_all(req).unwrap();
        let r = read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!(r.header("connection"), Some("keep-alive"), "port {port}");
        std::thread::sleep(Duration::from_millis(1300));
        s.write_all(req).unwrap();
        let r = read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.header("connection"), Some("close"), "port {port}");
    }
}

#[test]
fn access_log_if_skips_lines() {
    let p = Server::start(&one_server_conf(
        "",
        "access_log {PREFIX}/logs/cond.log combined if=$arg_log;\nlocation / { return 200 ok; }",
    ));
    for q in ["/?log=1&n=a", "/?log=0&n=b", "/?n=c", "/?log=yes&n=d"] {
        assert_eq!(get_h(p.port, q, "").status, 200);
    }
    let text = p.wait_log("logs/cond.log", "n=d", Duration::from_secs(5));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].contains("n=a") && lines[1].contains("n=d"),
        "{text}"
    );
}

#[test]
fn error_log_in_a_location_gets_its_requests_lines() {
    let p = Server::start(&one_server_conf(
        "",
        "root {PREFIX}/html;\nlocation /own/ { error_log {PREFIX}/logs/own.log info; }\nlocation / { }",
    ));
    assert_eq!(get_h(p.port, "/own/missing.txt", "").status, 404);
    assert_eq!(get_h(p.port, "/other/missing.txt", "").status, 404);
    let own = p.wait_log("logs/own.log", "missing.txt", Duration::from_secs(5));
    assert!(
        own.contains("/own/missing.txt") && own.contains("open()"),
        "{own}"
    );
    assert!(!own.contains("/other/"), "{own}");
    let main = p.wait_log(
        "logs/error.log",
        "/other/missing.txt",
        Duration::from_secs(5),
    );
    assert!(main.contains("/other/missing.txt"), "{main}");
    assert!(!main.contains("/own/missing.txt"), "{main}");
}

#[test]
fn server_tokens_build_is_on_without_a_build_name() {
    let (p, n) = both("server_tokens build;", "location / { return 404; }");
    let r = get_h(p.port, "/", "");
    let version = concat!("porter/", env!("CARGO_PKG_VERSION"));
    assert_eq!(r.header("server"), Some(version));
    assert!(r.text().contains(version), "{}", r.text());
    if let Some(n) = n {
        let r = get_h(n.port, "/", "");
        assert!(r.header("server").unwrap().starts_with("nginx/"));
        assert!(r.text().contains("<center>nginx/"), "{}", r.text());
    }
}
