//! Request header lines as porter reads them: `ignore_invalid_headers`,
//! `underscores_in_headers`, `max_headers`. Where Debian's nginx (1.22) has
//! the directive, the same server block runs in both and the answers are
//! compared; `max_headers` (NGINX 1.29) is checked against its documented
//! behaviour.

use std::io::Write;
use std::net::TcpStream;

use crate::common::origin::*;
use crate::common::*;

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
