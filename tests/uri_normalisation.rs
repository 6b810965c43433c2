//! URI normalisation (percent-decoding, dot segments, merged slashes,
//! arguments and fragments, absolute-form targets, the Host in redirects)
//! asked of porter and of Debian's nginx on the same docroot
//! (`tests/common/differential.rs`); `merge_slashes off`; the host of an
//! absolute-form target checked as a `Host` line is, beside nginx
//! (`tests/common/beside.rs`).

use std::path::Path;

use crate::common::beside::{self, Both};
use crate::common::differential::{self, req, req_ka, Cases, ReplaceHost};
use crate::common::{both, get};

#[test]
fn uri_normalisation_answers_as_nginx() {
    differential::compare("URI normalisation", uri_cases);
}

fn uri_cases(_root: &Path, c: &mut Cases) {
    // --- URI normalisation.
    for t in [
        "/txt/%61.txt",
        "/txt/%61%2Etxt",
        "/txt//a.txt",
        "//txt/a.txt",
        "/txt/./a.txt",
        "/nested/a/../../txt/a.txt",
        "/sub/..",
        "/sub/.",
        "/sub/%2e%2e/txt/a.txt",
        "/../etc/passwd",
        "/txt/../../etc/passwd",
        "/%2e%2e/etc/passwd",
        "/txt/%00.txt",
        "/txt/%zz",
        "/txt/%4",
        "/txt/a.txt?x=1&y",
        "/txt/a.txt#frag",
        "/txt/a.txt%3Fx=1",
        "/sub/%69ndex.html",
        "/space name.txt",
    ] {
        c.same(&format!("URI {t}"), vec![req("GET", t, "")]);
    }
    for t in ["/exact?x=1#frag", "/exact#frag?x=1", "/exact?x=a#b#c"] {
        c.same(&format!("URI {t}"), vec![req("GET", t, "")]);
    }
    c.same(
        "absolute-form target",
        vec![
            b"GET http://localhost/txt/a.txt HTTP/1.1\r\nHost: other\r\nConnection: close\r\n\r\n"
                .to_vec(),
        ],
    );
    c.same(
        "absolute-form directory redirect",
        vec![
            b"GET http://Example.COM/sub HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
                .to_vec(),
        ],
    );
    c.same(
        "redirect uses the Host header",
        vec![req_ka("GET", "/sub", "Host2: x\r\nConnection: close\r\n")
            .into_iter()
            .collect::<Vec<u8>>()
            .replace_host("www.example.org:8080")],
    );
}

#[test]
fn merge_slashes_off_keeps_the_uri() {
    let loc = "location / { return 200 \"$uri\"; }";
    for (extra, want) in [("", "/a/b/"), ("merge_slashes off;", "/a//b/")] {
        let (p, n) = both(extra, loc);
        assert_eq!(get(p.port, "/a//b/").text(), want, "porter, {extra:?}");
        if let Some(n) = n {
            assert_eq!(get(n.port, "/a//b/").text(), want, "nginx, {extra:?}");
        }
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
            let r = beside::ask(
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
