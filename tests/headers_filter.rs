//! The headers filter (`add_header`, `expires`) and the variables it reads,
//! as h5bp/server-configs-nginx and Debian's stock configs use them, on the
//! real binary beside Debian's nginx (skipped, saying so, without
//! `/usr/sbin/nginx`): `$sent_http_content_type` through a `map` with no
//! access log configured, `expires $var`, `expires modified`, `expires
//! @TIME`, a `map` whose `''` key matches an empty value, and `charset`
//! with a `charset_types` list that leaves out text/html; `server_tokens
//! build`; `add_header Last-Modified`/`ETag` removing (`""`) or replacing
//! the file's validators.

use crate::common::beside::{self, Both};
use crate::common::{both, one_worker_conf, raw, Nginx, Resp, Server, TempDir};

fn get(port: u16, path: &str, extra: &str) -> Resp {
    raw(
        port,
        format!("GET {path} HTTP/1.1\r\nHost: x\r\n{extra}Connection: close\r\n\r\n").as_bytes(),
    )
}

/// The header lines a client sees, but those that carry the time of the
/// answer or the server's name.
fn seen(r: &Resp) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = r
        .headers
        .iter()
        .filter(|(n, _)| !matches!(n.to_ascii_lowercase().as_str(), "date" | "server"))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
        .collect();
    v.sort();
    v
}

/// h5bp's security-header and cache-expiration maps, as its
/// `h5bp/security/*.conf` and `h5bp/web_performance/cache_expiration.conf`
/// write them, with no access log.
fn h5bp(root: &std::path::Path) -> String {
    format!(
        "types {{ text/html html; text/css css; application/javascript js; image/png png; }}\n\
         map $sent_http_content_type $x_frame_options {{ ~*text/html DENY; }}\n\
         map $sent_http_content_type $referrer_policy {{ ~*text/(css|html|javascript)|application/javascript strict-origin-when-cross-origin; }}\n\
         map $sent_http_content_type $expires {{\n\
           default 1y;\n  \"\" off;\n  ~*text/css 1y;\n  ~*text/html epoch;\n  ~*image/png 1M;\n}}\n\
         server {{\n  listen 127.0.0.1:{{PORT}};\n  root {root};\n\
           add_header X-Frame-Options $x_frame_options always;\n\
           add_header Referrer-Policy $referrer_policy always;\n\
           add_header X-Type \"[$sent_http_content_type]\";\n\
           expires $expires;\n\
           location /m/ {{ expires modified +1h; add_header X-M $sent_http_last_modified; }}\n\
           location /d/ {{ expires @3h15m; }}\n\
           location /n/ {{ expires -1; }}\n\
           location /z/ {{ expires 0; }}\n\
         }}",
        root = root.display()
    )
}

fn h5bp_root() -> TempDir {
    let root = TempDir::new("h5bp");
    for f in [
        "index.html",
        "a.css",
        "a.js",
        "a.png",
        "m/x.html",
        "d/x.html",
        "n/x.html",
        "z/x.html",
    ] {
        root.write(f, b"<p>hello</p>\n");
    }
    root
}

#[test]
fn headers_derived_from_the_content_type_are_sent_without_an_access_log() {
    let root = h5bp_root();
    let body = h5bp(root.path());
    let srv = Server::start(&one_worker_conf(&body));
    let html = get(srv.port, "/index.html", "");
    assert_eq!(html.header("x-frame-options"), Some("DENY"));
    assert_eq!(
        html.header("referrer-policy"),
        Some("strict-origin-when-cross-origin")
    );
    assert_eq!(html.header("cache-control"), Some("no-cache"));
    assert_eq!(html.header("x-type"), Some("[text/html]"));
    let css = get(srv.port, "/a.css", "");
    assert_eq!(css.header("x-frame-options"), None);
    assert_eq!(css.header("cache-control"), Some("max-age=31536000"));
    let png = get(srv.port, "/a.png", "");
    assert_eq!(png.header("cache-control"), Some("max-age=2592000"));
    assert_eq!(png.header("referrer-policy"), None);
    // A 404 is text/html too, but `expires` leaves error statuses alone.
    let miss = get(srv.port, "/nothing.html", "");
    assert_eq!(miss.status, 404);
    assert_eq!(miss.header("x-frame-options"), Some("DENY"));
    assert_eq!(miss.header("cache-control"), None);
}

#[test]
fn expires_forms_answer_as_nginx_answers() {
    let root = h5bp_root();
    let body = h5bp(root.path());
    let srv = Server::start(&one_worker_conf(&body));
    let m = get(srv.port, "/m/x.html", "");
    assert_eq!(
        m.header("cache-control").map(|v| v.starts_with("max-age=")),
        Some(true)
    );
    assert!(m.header("x-m").is_some_and(|v| v.ends_with(" GMT")));
    assert_eq!(
        get(srv.port, "/n/x.html", "").header("cache-control"),
        Some("no-cache")
    );
    assert_eq!(
        get(srv.port, "/z/x.html", "").header("cache-control"),
        Some("max-age=0")
    );
    let Some(ngx) = Nginx::start(&body) else {
        eprintln!("skipping the comparison: /usr/sbin/nginx is not installed");
        return;
    };
    for path in [
        "/index.html",
        "/a.css",
        "/a.js",
        "/a.png",
        "/nothing.html",
        "/m/x.html",
        "/d/x.html",
        "/n/x.html",
        "/z/x.html",
    ] {
        // Both answer within the same second almost always; retry once
        // when the clock ticked between the two answers.
        let mut same = false;
        for _ in 0..5 {
            let (p, n) = (get(srv.port, path, ""), get(ngx.port, path, ""));
            assert_eq!(p.status, n.status, "{path}");
            if seen(&p) == seen(&n) && p.header("date") == n.header("date") {
                same = true;
                break;
            }
            // Within one second but for `Expires`: the second may turn
            // between porter's headers filter and its `Date`; try again.
            if p.header("date") == n.header("date") {
                let but_expires = |r: &Resp| {
                    let mut v = seen(r);
                    v.retain(|(k, _)| k != "expires");
                    v
                };
                assert_eq!(but_expires(&p), but_expires(&n), "{path}");
            }
        }
        assert!(same, "{path}: answers differ");
    }
}

#[test]
fn an_empty_map_key_matches_an_empty_value_as_in_nginx() {
    let body = "map $http_upgrade $connection_upgrade { default upgrade; '' close; }\n\
                map $http_x_v $v { ~^(?<word>[a-z]+)-(\\d+)$ \"$word:$2\"; default none; }\n\
                server {\n  listen 127.0.0.1:{PORT};\n\
                  location / { return 200 \"[$connection_upgrade] [$v]\\n\"; }\n}";
    let srv = Server::start(&one_worker_conf(body));
    let cases = [
        ("", "[close] [none]\n"),
        ("Upgrade: websocket\r\n", "[upgrade] [none]\n"),
        ("X-V: abc-12\r\n", "[close] [abc:12]\n"),
        ("X-V: \r\n", "[close] [none]\n"),
    ];
    for (extra, want) in cases {
        assert_eq!(get(srv.port, "/", extra).text(), want, "{extra:?}");
    }
    let Some(ngx) = Nginx::start(body) else {
        eprintln!("skipping the comparison: /usr/sbin/nginx is not installed");
        return;
    };
    for (extra, _) in cases {
        assert_eq!(
            get(srv.port, "/", extra).text(),
            get(ngx.port, "/", extra).text(),
            "{extra:?}"
        );
    }
}

#[test]
fn text_html_is_always_among_the_charset_types() {
    let root = TempDir::new("charset-types");
    root.write("a.html", b"<p>x</p>\n");
    root.write("a.css", b"p{}\n");
    root.write("a.txt", b"x\n");
    let body = format!(
        "types {{ text/html html; text/css css; text/plain txt; }}\n\
         server {{\n  listen 127.0.0.1:{{PORT}};\n  root {};\n\
           charset utf-8;\n  charset_types text/css;\n}}",
        root.path().display()
    );
    let srv = Server::start(&one_worker_conf(&body));
    let ct = |p: &str| {
        get(srv.port, p, "")
            .header("content-type")
            .map(str::to_string)
    };
    assert_eq!(ct("/a.html").as_deref(), Some("text/html; charset=utf-8"));
    assert_eq!(ct("/a.css").as_deref(), Some("text/css; charset=utf-8"));
    assert_eq!(ct("/a.txt").as_deref(), Some("text/plain"));
    let Some(ngx) = Nginx::start(&body) else {
        eprintln!("skipping the comparison: /usr/sbin/nginx is not installed");
        return;
    };
    for p in ["/a.html", "/a.css", "/a.txt"] {
        let n = get(ngx.port, p, "");
        assert_eq!(ct(p).as_deref(), n.header("content-type"), "{p}");
    }
}

#[test]
fn server_tokens_build_is_on_without_a_build_name() {
    let (p, n) = both("server_tokens build;", "location / { return 404; }");
    let r = get(p.port, "/", "");
    let version = concat!("porter/", env!("CARGO_PKG_VERSION"));
    assert_eq!(r.header("server"), Some(version));
    assert!(r.text().contains(version), "{}", r.text());
    if let Some(n) = n {
        let r = get(n.port, "/", "");
        assert!(r.header("server").unwrap().starts_with("nginx/"));
        assert!(r.text().contains("<center>nginx/"), "{}", r.text());
    }
}

#[test]
fn add_header_last_modified_and_etag_remove_or_replace() {
    let b = Both::start(
        "",
        "root {DOCROOT};\n\
         location /rm/ { alias {DOCROOT}/; add_header Last-Modified \"\"; add_header ETag \"\"; }\n\
         location /rep/ { alias {DOCROOT}/; add_header Last-Modified \"Mon, 01 Jan 2001 00:00:00 GMT\"; add_header ETag '\"mine\"'; }",
        0,
    );
    for (who, port) in b.ports() {
        let r = beside::get_h(port, "/rm/f.txt", "");
        assert_eq!(r.status, 200, "{who}");
        assert_eq!(
            beside::header_count(&r, "last-modified"),
            0,
            "{who}: {:?}",
            r.headers
        );
        assert_eq!(
            beside::header_count(&r, "etag"),
            0,
            "{who}: {:?}",
            r.headers
        );
        let r = beside::get_h(port, "/rep/f.txt", "");
        assert_eq!(
            beside::header_count(&r, "last-modified"),
            1,
            "{who}: {:?}",
            r.headers
        );
        assert_eq!(
            r.header("last-modified"),
            Some("Mon, 01 Jan 2001 00:00:00 GMT")
        );
        assert_eq!(
            beside::header_count(&r, "etag"),
            1,
            "{who}: {:?}",
            r.headers
        );
        assert_eq!(r.header("etag"), Some("\"mine\""));
    }
}
