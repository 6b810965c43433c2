//! Proxy directives of issue 13 item 4, each run in porter and in Debian's
//! nginx against the same in-test origin, which echoes what it received:
//! `proxy_method`, `proxy_set_body`, `proxy_pass_request_body|headers`,
//! `proxy_cookie_domain`/`proxy_cookie_path`, `proxy_ignore_headers`,
//! `proxy_cache_convert_head`.

use std::io::Write;
use std::net::TcpStream;

use crate::common::origin::*;
use crate::common::*;

/// porter and nginx (when installed) on the same block, with their ports.
fn both(http_extra: &str, server_body: &str) -> (Server, Option<Nginx>, Vec<u16>) {
    let p = Server::start(&one_server_conf(http_extra, server_body));
    let n = Nginx::start(&format!(
        "{http_extra}\nserver {{\n listen 127.0.0.1:{{PORT}};\n server_name localhost;\n{server_body}\n}}\n"
    ));
    let mut ports = vec![p.port];
    match &n {
        Some(n) => ports.push(n.port),
        None => eprintln!("nginx not installed: porter alone"),
    }
    (p, n, ports)
}

fn ask(port: u16, raw: &str) -> Resp {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(raw.as_bytes()).unwrap();
    let mut buf = Vec::new();
    read_response(&mut s, &mut buf, raw.starts_with("HEAD ")).expect("response")
}

/// An origin answering with what it got: method, body, some headers.
fn echo() -> Origin {
    Origin::start(|r| {
        let text = format!(
            "{} cl={} xf={} body={}",
            r.method,
            r.header("content-length").unwrap_or("-"),
            r.header("x-f").unwrap_or("-"),
            String::from_utf8_lossy(&r.body)
        );
        Reply::ok(text.as_bytes())
    })
}

#[test]
fn proxy_method_and_set_body() {
    let o = echo();
    let body = format!(
        "location /m/ {{ proxy_pass http://127.0.0.1:{p}; proxy_method POST; }}\n\
         location /b/ {{ proxy_pass http://127.0.0.1:{p}; proxy_set_body \"x=$arg_x\"; }}",
        p = o.port
    );
    let (_p, _n, ports) = both("", &body);
    for port in ports {
        let r = ask(
            port,
            "GET /m/ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(r.text(), "POST cl=- xf=- body=", "port {port}");
        let r = ask(
            port,
            "POST /b/?x=7 HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
        );
        assert_eq!(r.text(), "POST cl=3 xf=- body=x=7", "port {port}");
    }
}

/// With the body off, NGINX still passes the client's `Content-Length`
/// (its docs pair the directive with `proxy_set_header Content-Length
/// ""`); porter never sends a length without its body. With that line both
/// send the same request.
#[test]
fn proxy_pass_request_body_and_headers_off() {
    let o = echo();
    let body = format!(
        "location /nb/ {{ proxy_pass http://127.0.0.1:{p}; proxy_pass_request_body off; \
         proxy_set_header Content-Length \"\"; }}\n\
         location /nh/ {{ proxy_pass http://127.0.0.1:{p}; proxy_pass_request_headers off; }}",
        p = o.port
    );
    let (_p, _n, ports) = both("", &body);
    let mut answers = Vec::new();
    for port in ports {
        let r = ask(
            port,
            "POST /nb/ HTTP/1.1\r\nHost: localhost\r\nX-F: 1\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
        );
        let nb = r.text();
        let r = ask(
            port,
            "GET /nh/ HTTP/1.1\r\nHost: localhost\r\nX-F: 1\r\nConnection: close\r\n\r\n",
        );
        answers.push((nb, r.text()));
    }
    assert_eq!(answers[0].1, "GET cl=- xf=- body=");
    assert!(answers[0].0.starts_with("POST ") && answers[0].0.ends_with("xf=1 body="));
    if answers.len() == 2 {
        assert_eq!(answers[0], answers[1], "porter vs nginx");
    }
}

#[test]
fn proxy_cookie_domain_and_path_rewrite_set_cookie() {
    let o = Origin::start(|_| {
        Reply::ok(b"c")
            .header(
                "Set-Cookie",
                "a=1; Domain=.Backend.local; Path=/app/x; HttpOnly",
            )
            .header("Set-Cookie", "b=2; path=/other; domain=elsewhere.org")
    });
    let body = format!(
        "location / {{ proxy_pass http://127.0.0.1:{}; proxy_cookie_domain backend.local example.com; \
         proxy_cookie_path /app/ /; }}",
        o.port
    );
    let (_p, _n, ports) = both("", &body);
    let mut seen = Vec::new();
    for port in ports {
        let r = ask(
            port,
            "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        );
        let cookies: Vec<String> = r
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("set-cookie"))
            .map(|(_, v)| v.clone())
            .collect();
        seen.push(cookies);
    }
    assert_eq!(
        seen[0],
        [
            "a=1; Domain=.example.com; Path=/x; HttpOnly",
            "b=2; path=/other; domain=elsewhere.org"
        ]
    );
    if seen.len() == 2 {
        assert_eq!(seen[0], seen[1], "porter vs nginx");
    }
}

#[test]
fn proxy_ignore_headers_lets_the_cache_store() {
    let o = Origin::start(|_| {
        Reply::ok(b"c")
            .header("Cache-Control", "no-store")
            .header("Set-Cookie", "s=1")
    });
    let http = "proxy_cache_path {PREFIX}/cache keys_zone=z:1m;";
    let body = format!(
        "location /plain/ {{ proxy_pass http://127.0.0.1:{p}; proxy_cache z; proxy_cache_valid 1m; \
         add_header X-Cache $upstream_cache_status; }}\n\
         location /ign/ {{ proxy_pass http://127.0.0.1:{p}; proxy_cache z; proxy_cache_valid 1m; \
         proxy_ignore_headers Cache-Control Set-Cookie; add_header X-Cache $upstream_cache_status; }}",
        p = o.port
    );
    let (_p, _n, ports) = both(http, &body);
    for port in ports {
        let get = |path: &str| {
            ask(
                port,
                &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
            )
        };
        assert_eq!(
            get("/plain/").header("x-cache"),
            Some("MISS"),
            "port {port}"
        );
        assert_eq!(
            get("/plain/").header("x-cache"),
            Some("MISS"),
            "port {port}"
        );
        assert_eq!(get("/ign/").header("x-cache"), Some("MISS"), "port {port}");
        assert_eq!(get("/ign/").header("x-cache"), Some("HIT"), "port {port}");
    }
}

#[test]
fn proxy_cache_convert_head() {
    let o = echo();
    let http = "proxy_cache_path {PREFIX}/cache keys_zone=z:1m;";
    let body = format!(
        "location /on/ {{ proxy_pass http://127.0.0.1:{p}; proxy_cache z; }}\n\
         location /off/ {{ proxy_pass http://127.0.0.1:{p}; proxy_cache z; proxy_cache_convert_head off; \
         proxy_cache_key $request_method$request_uri; }}",
        p = o.port
    );
    let (_p, _n, ports) = both(http, &body);
    for port in ports {
        for (path, method) in [("/on/", "GET"), ("/off/", "HEAD")] {
            let before = o.count();
            let r = ask(
                port,
                &format!("HEAD {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
            );
            assert_eq!(r.status, 200, "port {port} {path}");
            let reqs = o.requests();
            assert_eq!(reqs.len(), before + 1);
            assert_eq!(reqs[before].method, method, "port {port} {path}");
        }
    }
}

#[test]
fn upstream_byte_variables_count_each_try() {
    let o = Origin::start(|_| Reply::ok(b"hello").framing(Framing::Chunked));
    let dead = free_port();
    let conf = one_server_conf(
        &format!(
            "log_format up '$upstream_addr|$upstream_status|$upstream_response_length|\
             $upstream_bytes_received|$upstream_bytes_sent';\n\
             upstream two {{ server 127.0.0.1:{dead}; server 127.0.0.1:{}; }}",
            o.port
        ),
        "access_log {PREFIX}/logs/up.log up;\nlocation / { proxy_pass http://two; }",
    );
    let p = Server::start(&conf);
    let r = ask(
        p.port,
        "GET /x HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.text(), "hello");
    let log = p.wait_log("logs/up.log", "\n", std::time::Duration::from_secs(5));
    let line = log.lines().next().unwrap_or_default().to_string();
    let f: Vec<&str> = line.split('|').collect();
    assert_eq!(f.len(), 5, "{line}");
    assert_eq!(
        f[0],
        format!("127.0.0.1:{dead}, 127.0.0.1:{}", o.port),
        "{line}"
    );
    assert_eq!(f[1], "502, 200", "{line}");
    // The failed try moved no bytes; the second's body is 5 bytes, read
    // as chunks (so more bytes came in than the body holds).
    assert_eq!(f[2], "0, 5", "{line}");
    let rx: Vec<&str> = f[3].split(", ").collect();
    assert_eq!(rx[0], "0", "{line}");
    let got: u64 = rx[1].parse().unwrap();
    assert!(got > 5 + 30, "{line}");
    let tx: Vec<&str> = f[4].split(", ").collect();
    assert_eq!(tx[0], "0", "{line}");
    assert!(tx[1].parse::<u64>().unwrap() > 20, "{line}");
}

#[test]
fn request_body_variable_when_read_into_memory() {
    let o = echo();
    let conf = one_server_conf(
        "log_format rb '[$request_body]';",
        &format!(
            "access_log {{PREFIX}}/logs/rb.log rb;\nlocation / {{ proxy_pass http://127.0.0.1:{}; }}",
            o.port
        ),
    );
    let p = Server::start(&conf);
    let r = ask(
        p.port,
        "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 7\r\nConnection: close\r\n\r\nname=ok",
    );
    assert_eq!(r.text(), "POST cl=7 xf=- body=name=ok");
    let r = ask(
        p.port,
        "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    let log = p.wait_log("logs/rb.log", "[-]", std::time::Duration::from_secs(5));
    let lines: Vec<&str> = log.lines().collect();
    // Empty is `-` in a log line, as NGINX writes it.
    assert_eq!(lines, ["[name=ok]", "[-]"], "{log}");
}
