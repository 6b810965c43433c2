//! `limit_except METHOD ... { }`: a request whose method is not listed
//! runs under the block (its `deny`, its `proxy_pass`), the enclosing
//! location's `return` not run for it, as NGINX; an `if` written above a
//! location's `proxy_pass` proxies too; a block entered without
//! `proxy_pass` after one with it is NGINX's 500. nginx answers the same
//! configuration the same.

use crate::common::*;

const SERVER: &str = "
    location /lmt { limit_except GET { deny all; } return 200 \"lmt\\n\"; }
    location /post { limit_except POST { deny all; } return 200 \"post\\n\"; }
    location /p { limit_except POST { } proxy_pass http://127.0.0.1:{PORT}/back; }
    location /q { proxy_pass http://127.0.0.1:{PORT}/back;
                  limit_except POST { proxy_pass http://127.0.0.1:{BACK}; } }
    location /r { limit_except GET { proxy_pass http://127.0.0.1:{BACK}; }
                  location /r/in { return 200 \"inner\\n\"; } }
    location /if { if ($arg_x) { set $a 1; } proxy_pass http://127.0.0.1:{PORT}/back; }
    location /two { set $t 1; if ($t) { proxy_pass http://127.0.0.1:{BACK}; }
                    if ($t) { } }
    location /back { return 200 \"back $request_method $uri\\n\"; }
    location / { return 200 \"root $request_method $uri\\n\"; }";

/// The servers: `SERVER` and the upstream it names, on a port of its own.
fn http_body() -> String {
    let back = free_port();
    format!(
        "server {{ listen 127.0.0.1:{{PORT}}; server_name localhost; {SERVER} }}\n\
         server {{ listen 127.0.0.1:{back}; location / {{ return 200 \"up $request_method $uri\\n\"; }} }}"
    )
    .replace("{BACK}", &back.to_string())
}

/// Status and (for a 200) body of each request.
fn answers(port: u16) -> Vec<String> {
    let reqs = [
        ("GET", "/lmt"),
        ("HEAD", "/lmt"),
        ("POST", "/lmt"),
        ("PUT", "/lmt"),
        ("GET", "/post"),
        ("HEAD", "/post"),
        ("POST", "/post"),
        ("GET", "/p"),
        ("POST", "/p"),
        ("GET", "/q"),
        ("POST", "/q"),
        ("GET", "/r/x"),
        ("POST", "/r/x"),
        ("GET", "/r/in"),
        ("POST", "/r/in"),
        ("GET", "/if"),
        ("GET", "/if?x=1"),
        ("GET", "/two"),
    ];
    reqs.iter()
        .map(|(m, p)| {
            let req = format!("{m} {p} HTTP/1.0\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n");
            match try_raw(port, req.as_bytes()) {
                Some(r) if r.status == 200 => format!("{m} {p}: 200 {}", r.text()),
                Some(r) => format!("{m} {p}: {}", r.status),
                None => format!("{m} {p}: closed"),
            }
        })
        .collect()
}

#[test]
fn a_method_outside_the_list_runs_under_the_block() {
    let s = Server::start(&one_worker_conf(&http_body()));
    let porter = answers(s.port);
    let expect = [
        "GET /lmt: 200 lmt\n",
        "HEAD /lmt: 200 ",
        "POST /lmt: 403",
        "PUT /lmt: 403",
        "GET /post: 403",
        "HEAD /post: 403",
        "POST /post: 200 post\n",
        "GET /p: 200 back GET /back\n",
        "POST /p: 200 back POST /back\n",
        "GET /q: 200 up GET /q\n",
        "POST /q: 200 back POST /back\n",
        "GET /r/x: 404",
        "POST /r/x: 200 up POST /r/x\n",
        "GET /r/in: 200 inner\n",
        "POST /r/in: 200 inner\n",
        "GET /if: 200 back GET /back\n",
        "GET /if?x=1: 200 back GET /back\n",
        "GET /two: 500",
    ];
    assert_eq!(porter, expect);
    let log = s.wait_log(
        "logs/error.log",
        "no upstream configuration",
        std::time::Duration::from_secs(5),
    );
    assert!(log.contains("[alert]"), "{log}");
    match Nginx::start(&http_body()) {
        Some(n) => assert_eq!(porter, answers(n.port)),
        None => eprintln!("skipped the comparison: nginx is not installed"),
    }
}

#[test]
fn errors_are_nginx_s() {
    // config_error fills {PREFIX} only: a fixed port, never bound.
    let conf = |srv: &str| one_server_conf("", srv).replace("{PORT}", "1");
    let conf_loc = |loc: &str| conf(&format!("location / {{ {loc} }}"));
    let e = config_error(&conf_loc("limit_except TRACE { }"));
    assert!(e.contains("invalid method \"TRACE\""), "{e}");
    let e = config_error(&conf_loc("limit_except GET { } limit_except POST { }"));
    assert!(e.contains("\"limit_except\" directive is duplicate"), "{e}");
    let e = config_error(&conf_loc("limit_except GET { return 200; }"));
    assert!(
        e.contains("\"return\" directive is not allowed here"),
        "{e}"
    );
    let e = config_error(&conf("limit_except GET { }"));
    assert!(
        e.contains("\"limit_except\" directive is not allowed here"),
        "{e}"
    );
}
