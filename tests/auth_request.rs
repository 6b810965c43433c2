//! `auth_request` and `auth_request_set` (NGINX's auth request module) on
//! the real binary, beside Debian's nginx 1.22 on the same origin: the
//! subrequest's status decides (2xx on, 401 with its `WWW-Authenticate`
//! lines, 403, anything else a 500 with NGINX's line), `auth_request_set`
//! reads the subrequest's `$upstream_http_*`, the subrequest carries the
//! request's header lines and no body, `satisfy any|all` with
//! `allow`/`deny`, and a slow authorizer holds up no other request.
//!
//! Run: `cargo test --release --test area_vars auth_request::`.

use crate::common;

use std::time::{Duration, Instant};

use crate::common::origin::{Origin, Reply};
use crate::common::{one_worker_conf, raw, Nginx, Resp, Server, NGINX};

/// The authorizer (`/check`) answers by the client's `X-Token`; any
/// other path is the application, which echoes what it was sent.
fn origin() -> Origin {
    Origin::start(|r| {
        if r.target.starts_with("/check") {
            return match r.header("x-token").unwrap_or("") {
                "good" => Reply::ok(b"auth body, never shown").header("X-User", "alice"),
                "slow" => Reply::ok(b"").delay(Duration::from_millis(800)),
                "bad" => Reply::ok(b"no").status(403),
                "who" => Reply::ok(b"who are you")
                    .status(401)
                    .header("WWW-Authenticate", "Basic realm=\"a\"")
                    .header("WWW-Authenticate", "Bearer realm=\"b\"")
                    .header("X-User", "nobody"),
                "bare401" => Reply::ok(b"").status(401),
                "moved" => Reply::ok(b"").status(302).header("Location", "/x"),
                _ => Reply::ok(b"").status(500),
            };
        }
        let body = format!(
            "app {} {} user={} len={}\n",
            r.method,
            r.target,
            r.header("x-user").unwrap_or("-"),
            r.body.len()
        );
        Reply::ok(body.as_bytes())
    })
}

fn http(origin: u16) -> String {
    format!(
        "server {{\n  listen 127.0.0.1:{{PORT}};\n  server_name localhost;\n\
  location = /auth {{\n    internal;\n    proxy_pass http://127.0.0.1:{origin}/check;\n\
    proxy_pass_request_body off;\n    proxy_set_header Content-Length \"\";\n\
    proxy_set_header X-Original-URI $request_uri;\n  }}\n\
  location = /auth-down {{\n    internal;\n    proxy_pass http://127.0.0.1:1/;\n  }}\n\
  location = /auth-return {{\n    internal;\n    return 204;\n  }}\n\
  location /p/ {{\n    auth_request /auth;\n    auth_request_set $user $upstream_http_x_user;\n\
    auth_request_set $auth_status $upstream_status;\n\
    add_header X-Seen \"$user/$auth_status\" always;\n\
    proxy_set_header X-User $user;\n    proxy_pass http://127.0.0.1:{origin};\n  }}\n\
  location /r/ {{\n    auth_request /auth-return;\n    proxy_pass http://127.0.0.1:{origin};\n  }}\n\
  location /down/ {{\n    auth_request /auth-down;\n    proxy_pass http://127.0.0.1:{origin};\n  }}\n\
  location /any/ {{\n    satisfy any;\n    allow 127.0.0.1;\n    deny all;\n    auth_request /auth;\n\
    proxy_pass http://127.0.0.1:{origin};\n  }}\n\
  location /anyno/ {{\n    satisfy any;\n    deny all;\n    auth_request /auth;\n\
    proxy_pass http://127.0.0.1:{origin};\n  }}\n\
  location /all/ {{\n    deny all;\n    auth_request /auth;\n    proxy_pass http://127.0.0.1:{origin};\n  }}\n\
  location /ep/ {{\n    auth_request /auth;\n    auth_request_set $user $upstream_http_x_user;\n\
    error_page 401 403 = /login;\n    proxy_pass http://127.0.0.1:{origin};\n  }}\n\
  location = /login {{\n    return 200 \"login user=$user\\n\";\n  }}\n\
  location /off/ {{\n    auth_request /auth;\n    proxy_pass http://127.0.0.1:{origin};\n\
    location /off/open/ {{\n      auth_request off;\n      proxy_pass http://127.0.0.1:{origin};\n    }}\n  }}\n\
}}\n"
    )
}

fn ask(port: u16, method: &str, target: &str, token: &str, body: &str) -> Resp {
    let req = format!(
        "{method} {target} HTTP/1.1\r\nHost: localhost\r\nX-Token: {token}\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    raw(port, req.as_bytes())
}

/// What a client sees of an answer: the status, the header lines that
/// matter here (in order) and the body.
fn seen(r: &Resp) -> String {
    let mut out = format!("{}\n", r.status);
    for (n, v) in &r.headers {
        let l = n.to_ascii_lowercase();
        if ["www-authenticate", "x-seen", "content-type", "x-user"].contains(&l.as_str()) {
            out.push_str(&format!("{l}: {v}\n"));
        }
    }
    if r.status == 200 {
        out.push_str(&r.text());
    }
    out
}

const CASES: &[(&str, &str, &str, &str)] = &[
    ("GET", "/p/a?x=1", "good", ""),
    ("POST", "/p/form", "good", "name=value"),
    ("GET", "/p/a", "bad", ""),
    ("GET", "/p/a", "who", ""),
    ("GET", "/p/a", "bare401", ""),
    ("GET", "/p/a", "moved", ""),
    ("GET", "/p/a", "boom", ""),
    ("HEAD", "/p/a", "good", ""),
    ("GET", "/r/x", "", ""),
    ("GET", "/down/x", "", ""),
    ("GET", "/any/x", "bad", ""),
    ("GET", "/anyno/x", "good", ""),
    ("GET", "/anyno/x", "who", ""),
    ("GET", "/anyno/x", "bad", ""),
    ("GET", "/all/x", "good", ""),
    ("GET", "/ep/x", "good", ""),
    ("GET", "/ep/x", "who", ""),
    ("GET", "/ep/x", "bad", ""),
    ("GET", "/off/open/x", "bad", ""),
    ("GET", "/off/x", "bad", ""),
    ("GET", "/auth", "good", ""),
];

/// Porter's answers to [`CASES`], and what the origin was asked.
fn run_cases(port: u16, o: &Origin) -> Vec<(String, Vec<String>)> {
    CASES
        .iter()
        .map(|(m, t, tok, body)| {
            let before = o.count();
            let r = ask(port, m, t, tok, body);
            // The subrequest's request as the authorizer got it.
            let asked = o.requests()[before..]
                .iter()
                .map(|q| {
                    let mut h: Vec<String> = q
                        .headers
                        .iter()
                        .filter(|(n, _)| {
                            !n.eq_ignore_ascii_case("connection") && !n.eq_ignore_ascii_case("host")
                        })
                        .map(|(n, v)| format!("{}: {v}", n.to_ascii_lowercase()))
                        .collect();
                    h.sort();
                    format!(
                        "{} body={:?} {h:?}",
                        q.line,
                        String::from_utf8_lossy(&q.body)
                    )
                })
                .collect();
            (seen(&r), asked)
        })
        .collect()
}

#[test]
fn the_subrequest_decides_as_nginx_s_does() {
    let o = origin();
    let conf = http(o.port);
    let srv = Server::start(&one_worker_conf(&conf));
    let ours = run_cases(srv.port, &o);
    let want = |i: usize| &ours[i].0;
    assert_eq!(
        *want(0),
        "200\ncontent-type: text/plain\nx-seen: alice/200\napp GET /p/a?x=1 user=alice len=0\n"
    );
    assert!(
        want(1).ends_with("app POST /p/form user=alice len=10\n"),
        "{}",
        want(1)
    );
    assert_eq!(*want(2), "403\ncontent-type: text/html\nx-seen: /403\n");
    assert_eq!(
        *want(3),
        "401\ncontent-type: text/html\nwww-authenticate: Basic realm=\"a\"\n\
         www-authenticate: Bearer realm=\"b\"\nx-seen: nobody/401\n"
    );
    assert_eq!(*want(5), "500\ncontent-type: text/html\nx-seen: /302\n");
    assert!(want(9).starts_with("500\n"), "{}", want(9));
    assert!(
        want(10).ends_with("app GET /any/x user=- len=0\n"),
        "{}",
        want(10)
    );
    assert!(want(16).ends_with("login user=nobody\n"), "{}", want(16));
    // The subrequest: a GET (whatever the method) with the client's
    // header lines and no body.
    for i in [1, 7] {
        let sub = &ours[i].1[0];
        assert!(
            sub.starts_with("GET /check HTTP/1.0 body=\"\"") && sub.contains("x-token: good"),
            "{sub}"
        );
    }
    assert!(ours[1].1[0].contains("x-original-uri: /p/form"));
    // `deny` under `satisfy all` refuses before any subrequest; an allowed
    // address under `satisfy any` needs none.
    assert!(ours[14].1.is_empty() && ours[10].1.len() == 1);
    let log = srv.wait_log("logs/error.log", "status: 502", Duration::from_secs(5));
    assert!(log.contains("auth request unexpected status: 500"), "{log}");
    assert!(log.contains("auth request unexpected status: 502"), "{log}");
    let Some(ngx) = Nginx::start(&conf) else {
        eprintln!("skipping the comparison: {NGINX} is not installed");
        return;
    };
    let theirs = run_cases(ngx.port, &o);
    for (i, c) in CASES.iter().enumerate() {
        assert_eq!(first_challenge(&ours[i]), theirs[i], "{c:?}");
    }
    // The same lines, the subrequest's named as NGINX names it.
    let tails = |log: &str| -> Vec<String> {
        log.lines()
            .filter(|l| {
                l.contains("[error]")
                    && (l.contains("/down/x") || l.contains("auth request unexpected"))
            })
            .map(|l| l.split_once('*').map_or("", |(_, t)| t))
            .map(|t| t.split_once(' ').map_or("", |(_, t)| t).to_string())
            .collect()
    };
    let mine = tails(&srv.read("logs/error.log"));
    assert_eq!(
        mine.iter().filter(|l| l.contains("/down/x")).collect::<Vec<_>>(),
        [
            "connect() failed (111: Connection refused) while connecting to upstream, \
             client: 127.0.0.1, server: localhost, request: \"GET /down/x HTTP/1.1\", \
             subrequest: \"/auth-down\", upstream: \"http://127.0.0.1:1/\", host: \"localhost\"",
            "auth request unexpected status: 502 while sending to client, client: 127.0.0.1, server: localhost, \
             request: \"GET /down/x HTTP/1.1\", host: \"localhost\"",
        ]
    );
    assert_eq!(mine, tails(&ngx.error_log()));
}

/// nginx 1.22 passes only the first of the subrequest's `WWW-Authenticate`
/// lines; NGINX since 1.23.0 (and porter) passes them all.
fn first_challenge(ours: &(String, Vec<String>)) -> (String, Vec<String>) {
    let mut seen_one = false;
    let text = ours
        .0
        .split_inclusive('\n')
        .filter(|l| {
            let again = seen_one && l.starts_with("www-authenticate:");
            seen_one |= l.starts_with("www-authenticate:");
            !again
        })
        .collect();
    (text, ours.1.clone())
}

#[test]
fn a_slow_authorizer_holds_up_no_other_request() {
    let o = origin();
    let srv = Server::start(&one_worker_conf(&http(o.port)));
    let port = srv.port;
    let started = Instant::now();
    let slow: Vec<_> = (0..4)
        .map(|_| std::thread::spawn(move || ask(port, "GET", "/p/s", "slow", "")))
        .collect();
    // While four subrequests wait on the authorizer, the one worker
    // answers others at once.
    std::thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    let quick = ask(port, "GET", "/r/x", "", "");
    assert_eq!(quick.status, 200);
    assert!(
        t.elapsed() < Duration::from_millis(400),
        "{:?}",
        t.elapsed()
    );
    for h in slow {
        let r = h.join().unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
    }
    // The four waited together, not one after another.
    assert!(
        started.elapsed() < Duration::from_millis(2500),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn auth_request_set_names_a_variable_and_the_uri_is_one_argument() {
    let err = common::config_error(&one_worker_conf(
        "server { location / { auth_request_set user $upstream_http_x; } }",
    ));
    assert!(err.contains("invalid variable name \"user\""), "{err}");
    let err = common::config_error(&one_worker_conf(
        "server { location / { auth_request /a /b; } }",
    ));
    assert!(
        err.contains("invalid number of arguments in \"auth_request\" directive"),
        "{err}"
    );
}
