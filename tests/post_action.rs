//! `post_action` (NGINX's `ngx_http_post_action`) on the real binary,
//! beside Debian's nginx 1.22 on the same origin: after the response is
//! sent the request runs again at the post action's URI (arguments
//! dropped) or in its named location, with its method; the client gets
//! the main response only, and the origin sees the post action's
//! request.
//!
//! Run: `cargo test --release --test area_vars post_action::`.

use std::time::Duration;

use crate::common::origin::{Origin, Reply};
use crate::common::{one_worker_conf, raw, Nginx, Server, NGINX};

fn origin() -> Origin {
    Origin::start(|r| {
        if r.target.starts_with("/after") {
            return Reply::ok(b"POST-ACTION BODY");
        }
        Reply::ok(format!("main {} {}\n", r.method, r.target).as_bytes())
    })
}

fn http(o: u16) -> String {
    format!(
        "server {{\n  listen 127.0.0.1:{{PORT}};\n  server_name localhost;\n\
  location / {{\n    post_action /pa;\n    proxy_pass http://127.0.0.1:{o};\n  }}\n\
  location /named/ {{\n    post_action @after;\n    proxy_pass http://127.0.0.1:{o};\n  }}\n\
  location /none/ {{\n    proxy_pass http://127.0.0.1:{o};\n  }}\n\
  location = /pa {{\n    proxy_pass http://127.0.0.1:{o}/after$uri?$args;\n  }}\n\
  location @after {{\n    proxy_pass http://127.0.0.1:{o}/after-named$uri?$args;\n  }}\n\
}}\n"
    )
}

const CASES: &[(&str, &str)] = &[
    ("GET", "/a?x=1"),
    ("POST", "/form?y=2"),
    ("GET", "/named/n?z=3"),
    ("GET", "/none/o"),
];

/// For each case, the client's answer and the request lines the origin
/// got for it, in order.
fn run_cases(port: u16, o: &Origin) -> Vec<(String, Vec<String>)> {
    CASES
        .iter()
        .map(|(m, t)| {
            let before = o.count();
            let req = format!(
                "{m} {t} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\
                 Connection: close\r\n\r\n"
            );
            let r = raw(port, req.as_bytes());
            std::thread::sleep(Duration::from_millis(100));
            let got = o.requests()[before..]
                .iter()
                .map(|q| q.line.clone())
                .collect();
            (format!("{} {}", r.status, r.text()), got)
        })
        .collect()
}

#[test]
fn post_action_runs_after_the_response_and_its_answer_is_dropped() {
    let o = origin();
    let conf = http(o.port);
    let srv = Server::start(&one_worker_conf(&conf));
    let ours = run_cases(srv.port, &o);
    assert_eq!(ours[0].0, "200 main GET /a?x=1\n");
    assert_eq!(
        ours[0].1,
        ["GET /a?x=1 HTTP/1.0", "GET /after/pa? HTTP/1.0"]
    );
    assert_eq!(ours[1].1[1], "POST /after/pa? HTTP/1.0");
    assert_eq!(ours[2].0, "200 main GET /named/n?z=3\n");
    assert_eq!(ours[2].1[1], "GET /after-named/named/n?z=3 HTTP/1.0");
    assert_eq!(ours[3].1.len(), 1);
    let Some(ngx) = Nginx::start(&conf) else {
        eprintln!("skipping the comparison: {NGINX} is not installed");
        return;
    };
    let theirs = run_cases(ngx.port, &o);
    for (i, c) in CASES.iter().enumerate() {
        assert_eq!(ours[i], theirs[i], "{c:?}");
    }
}

#[test]
fn post_action_is_a_known_directive_with_off() {
    let err = crate::common::config_error(&one_worker_conf(
        "server { location / { post_action /a; post_action off; } }",
    ));
    assert!(
        err.contains("\"post_action\" directive is duplicate"),
        "{err}"
    );
}
