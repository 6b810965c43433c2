//! Answers where porter differed from NGINX (issue 13 item 5), each asked
//! of porter and of Debian's nginx on the same server block, proxying to
//! the same in-test origin where a proxy is involved. Each test fails on
//! the code before its fix. nginx is optional: without it only porter's
//! answer is checked against what NGINX gives (written in the test).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::origin::*;
use common::*;

/// porter and (when installed) nginx on the same settings; `{ORIGIN}` is
/// replaced by `origin`.
struct Both {
    porter: Server,
    nginx: Option<Nginx>,
    _docroot: TempDir,
}

impl Both {
    /// `{DOCROOT}` is a directory both serve, holding `f.txt`.
    fn start(http_extra: &str, server_body: &str, origin: u16) -> Both {
        let docroot = TempDir::new("docroot");
        docroot.write("f.txt", "file");
        let o = origin.to_string();
        let d = docroot.path().display().to_string();
        let (h, s) = (
            http_extra.replace("{ORIGIN}", &o).replace("{DOCROOT}", &d),
            server_body.replace("{ORIGIN}", &o).replace("{DOCROOT}", &d),
        );
        let porter = Server::start(&one_server_conf(&h, &s));
        let nginx = Nginx::start(&format!(
            "{h}\nserver {{\n listen 127.0.0.1:{{PORT}};\n server_name localhost;\n{s}\n}}\n"
        ));
        if nginx.is_none() {
            eprintln!("nginx not installed: checking porter alone");
        }
        Both {
            porter,
            nginx,
            _docroot: docroot,
        }
    }

    /// The ports to ask, each with a name for messages.
    fn ports(&self) -> Vec<(&'static str, u16)> {
        let mut v = vec![("porter", self.porter.port)];
        if let Some(n) = &self.nginx {
            v.push(("nginx", n.port));
        }
        v
    }
}

fn ask(port: u16, raw: &str) -> Resp {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(raw.as_bytes()).unwrap();
    let mut buf = Vec::new();
    read_response(&mut s, &mut buf, raw.starts_with("HEAD ")).expect("response")
}

fn get_h(port: u16, path: &str, headers: &str) -> Resp {
    ask(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{headers}Connection: close\r\n\r\n"),
    )
}

fn count(r: &Resp, name: &str) -> usize {
    r.headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .count()
}

#[test]
fn trace_is_405() {
    let b = Both::start("", "location / { return 200 ok; }", 0);
    for (who, port) in b.ports() {
        let r = ask(
            port,
            "TRACE / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(r.status, 405, "{who}");
    }
}

#[test]
fn absolute_form_host_is_checked_like_host() {
    let b = Both::start("", "location / { return 200 ok; }", 0);
    let targets = [
        ("http://localhost/", 200),
        ("http://LOCALHOST:80/", 200),
        ("http://a..b/", 400),
        ("http://a/b\\c/", 200),
        ("http://[::1/", 400),
        ("http://a%41/", 400),
        ("http://a\"b/", 400),
        ("http://a@b/", 400),
        ("http://./", 400),
        ("http://../", 400),
        ("http://a:b/", 400),
        ("http://a:/", 200),
        ("http://a:99999/", 200),
        ("http://-a/", 200),
        ("http://a_b/", 400),
        ("http://a b/", 400),
        ("http://[::1]/", 200),
        ("http://[::1]:8/", 200),
        ("http://a./", 200),
        ("http://a:1:2/", 400),
        ("http://a%/", 400),
        ("http://a?b", 200),
        ("http://a", 200),
        ("http:///x", 400),
        ("http://a$b/", 400),
        ("http://a~b/", 400),
        ("http://a!b/", 400),
        ("http://a'b/", 400),
        ("http://a,b/", 400),
        ("http://a;b/", 400),
        ("http://a=b/", 400),
        ("http://a(b)/", 400),
        ("http://a*b/", 400),
        ("http://a+b/", 400),
        ("http://a&b/", 400),
        ("http://a|b/", 400),
        ("http://a{b/", 400),
        ("http://a#b/", 400),
        ("http://[a]/", 200),
        ("http://[]/", 200),
        ("https://a/", 200),
        ("ftp://a/", 200),
        ("HTTP://a/", 200),
    ];
    let mut bad = Vec::new();
    for (t, want) in targets {
        for (who, port) in b.ports() {
            let r = ask(
                port,
                &format!("GET {t} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
            );
            if r.status != want {
                bad.push(format!("{who}: {t} gave {} not {want}", r.status));
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn proxied_responses_get_no_304_or_412_from_the_proxy() {
    let origin = Origin::start(|_| {
        Reply::ok(b"fresh")
            .header("ETag", "\"v1\"")
            .header("Last-Modified", "Sun, 13 Sep 2020 12:26:40 GMT")
    });
    let b = Both::start(
        "",
        "location / { proxy_pass http://127.0.0.1:{ORIGIN}; }",
        origin.port,
    );
    for (who, port) in b.ports() {
        for h in [
            "If-None-Match: \"v1\"\r\n",
            "If-Modified-Since: Sun, 13 Sep 2020 12:26:40 GMT\r\n",
            "If-Match: \"other\"\r\n",
            "If-Unmodified-Since: Sat, 12 Sep 2020 12:26:40 GMT\r\n",
        ] {
            let r = get_h(port, "/", h);
            assert_eq!((r.status, r.text().as_str()), (200, "fresh"), "{who}: {h}");
        }
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
        let r = get_h(port, "/rm/f.txt", "");
        assert_eq!(r.status, 200, "{who}");
        assert_eq!(count(&r, "last-modified"), 0, "{who}: {:?}", r.headers);
        assert_eq!(count(&r, "etag"), 0, "{who}: {:?}", r.headers);
        let r = get_h(port, "/rep/f.txt", "");
        assert_eq!(count(&r, "last-modified"), 1, "{who}: {:?}", r.headers);
        assert_eq!(
            r.header("last-modified"),
            Some("Mon, 01 Jan 2001 00:00:00 GMT")
        );
        assert_eq!(count(&r, "etag"), 1, "{who}: {:?}", r.headers);
        assert_eq!(r.header("etag"), Some("\"mine\""));
    }
}

/// The raw bytes of an answer, read until the peer closes.
fn raw_answer(port: u16, req: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut v = Vec::new();
    let _ = s.read_to_end(&mut v);
    String::from_utf8_lossy(&v).into_owned()
}

#[test]
fn expect_100_continue_with_empty_body() {
    let origin = Origin::start(|_| Reply::ok(b"up"));
    let b = Both::start(
        "",
        "location /p/ { proxy_pass http://127.0.0.1:{ORIGIN}; }\nlocation / { root {DOCROOT}; }",
        origin.port,
    );
    for (who, port) in b.ports() {
        for path in ["/p/x", "/f.txt"] {
            let a = raw_answer(
                port,
                &format!("POST {path} HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
            );
            if path == "/p/x" {
                assert!(
                    a.starts_with("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200"),
                    "{who}: {a}"
                );
            } else {
                // A POST to a file: refused before the body is asked for.
                assert!(a.starts_with("HTTP/1.1 405 "), "{who}: {a}");
            }
        }
    }
}

#[test]
fn proxy_cache_variable_rendering_empty_proxies_without_caching() {
    let origin = Origin::start(|_| Reply::ok(b"up").header("Cache-Control", "max-age=60"));
    let b = Both::start(
        "proxy_cache_path {PREFIX}/cache keys_zone=z:1m;",
        "location / { proxy_pass http://127.0.0.1:{ORIGIN}; proxy_cache $arg_zone; \
         add_header X-Cache $upstream_cache_status; }",
        origin.port,
    );
    for (who, port) in b.ports() {
        let before = origin.count();
        for _ in 0..2 {
            let r = get_h(port, "/a", "");
            assert_eq!((r.status, r.text().as_str()), (200, "up"), "{who}");
            assert_eq!(r.header("x-cache"), None, "{who}");
        }
        assert_eq!(origin.count() - before, 2, "{who}: not cached");
        // Named: cached.
        let r = get_h(port, "/b?zone=z", "");
        assert_eq!(r.header("x-cache"), Some("MISS"), "{who}");
        let r = get_h(port, "/b?zone=z", "");
        assert_eq!(r.header("x-cache"), Some("HIT"), "{who}");
    }
}

#[test]
fn proxied_location_with_slash_redirects_the_bare_name() {
    let origin = Origin::start(|r| Reply::ok(r.target.as_bytes()));
    let b = Both::start(
        "",
        "location /x/ { proxy_pass http://127.0.0.1:{ORIGIN}; }\nlocation / { return 200 other; }",
        origin.port,
    );
    for (who, port) in b.ports() {
        let r = get_h(port, "/x", "");
        assert_eq!(r.status, 301, "{who}");
        let loc = r.header("location").unwrap_or_default();
        assert_eq!(loc, format!("http://localhost:{port}/x/"), "{who}");
        let r = get_h(port, "/x?a=1", "");
        assert_eq!(
            r.header("location").unwrap_or_default(),
            format!("http://localhost:{port}/x/?a=1"),
            "{who}"
        );
        assert_eq!(get_h(port, "/x/y", "").text(), "/x/y", "{who}");
    }
}

#[test]
fn intercepted_401_keeps_www_authenticate() {
    let origin = Origin::start(|_| {
        Reply::ok(b"no")
            .status(401)
            .header("WWW-Authenticate", "Basic realm=\"r\"")
    });
    let b = Both::start(
        "",
        "location / { proxy_pass http://127.0.0.1:{ORIGIN}; proxy_intercept_errors on; error_page 401 /e401; }\n\
         location = /e401 { return 401 \"denied\"; }",
        origin.port,
    );
    for (who, port) in b.ports() {
        let r = get_h(port, "/", "");
        assert_eq!(r.status, 401, "{who}");
        assert_eq!(
            r.header("www-authenticate"),
            Some("Basic realm=\"r\""),
            "{who}"
        );
        assert_eq!(r.text(), "denied", "{who}");
    }
}

#[test]
fn next_upstream_out_of_servers_returns_the_last_answer() {
    let a = Origin::start(|_| Reply::ok(b"a404").status(404));
    let c = Origin::start(|_| Reply::ok(b"c404").status(404));
    let b = Both::start(
        &format!(
            "upstream two {{ server 127.0.0.1:{}; server 127.0.0.1:{}; }}",
            a.port, c.port
        ),
        "location / { proxy_pass http://two; proxy_next_upstream http_404; }",
        0,
    );
    for (who, port) in b.ports() {
        let r = get_h(port, "/", "");
        assert_eq!(r.status, 404, "{who}");
        assert!(
            r.text() == "a404" || r.text() == "c404",
            "{who}: {}",
            r.text()
        );
    }
}

#[test]
fn next_upstream_variants_return_the_upstream_answer() {
    let a = Origin::start(|_| Reply::ok(b"a503").status(503));
    let c = Origin::start(|_| Reply::ok(b"c503").status(503));
    let one = Origin::start(|_| Reply::ok(b"one404").status(404));
    let b = Both::start(
        &format!(
            "upstream two {{ server 127.0.0.1:{} max_fails=0; server 127.0.0.1:{} max_fails=0; }}\n\
             upstream solo {{ server 127.0.0.1:{}; }}",
            a.port, c.port, one.port
        ),
        &format!(
            "location /two/ {{ proxy_pass http://two; proxy_next_upstream http_503; }}
             location /tries/ {{ proxy_pass http://two; proxy_next_upstream http_503; proxy_next_upstream_tries 1; }}
             location /solo/ {{ proxy_pass http://solo; proxy_next_upstream http_404; }}
             location /addr/ {{ proxy_pass http://127.0.0.1:{}; proxy_next_upstream http_404; }}",
            one.port
        ),
        0,
    );
    for (who, port) in b.ports() {
        for i in 0..3 {
            for (path, status, bodies) in [
                ("/two/", 503, ["a503", "c503"]),
                ("/tries/", 503, ["a503", "c503"]),
                ("/solo/", 404, ["one404", "one404"]),
                ("/addr/", 404, ["one404", "one404"]),
            ] {
                let r = get_h(port, path, "");
                assert_eq!(r.status, status, "{who} {path} #{i}");
                assert!(
                    bodies.contains(&r.text().as_str()),
                    "{who} {path}: {}",
                    r.text()
                );
            }
        }
    }
}

#[test]
fn cached_201_is_not_revalidated() {
    let origin = Origin::start(|_| {
        Reply::ok(b"made")
            .status(201)
            .header("ETag", "\"e1\"")
            .header("Last-Modified", "Sun, 13 Sep 2020 12:26:40 GMT")
    });
    let b = Both::start(
        "proxy_cache_path {PREFIX}/cache keys_zone=z:1m;",
        "location / { proxy_pass http://127.0.0.1:{ORIGIN}; proxy_cache z; \
         proxy_cache_valid 201 1s; proxy_cache_revalidate on; }",
        origin.port,
    );
    for (who, port) in b.ports() {
        let path = format!("/{who}");
        assert_eq!(get_h(port, &path, "").status, 201, "{who}");
        std::thread::sleep(Duration::from_millis(2100));
        assert_eq!(get_h(port, &path, "").status, 201, "{who}");
        let reqs: Vec<Req> = origin
            .requests()
            .into_iter()
            .filter(|r| r.target == path)
            .collect();
        assert_eq!(reqs.len(), 2, "{who}");
        assert_eq!(reqs[1].header("if-none-match"), None, "{who}");
        assert_eq!(reqs[1].header("if-modified-since"), None, "{who}");
    }
}
