//! The addition filter (`add_before_body`, `add_after_body`,
//! `addition_types`) on the real binary beside Debian's nginx (porter
//! alone, saying so, without `/usr/sbin/nginx`): subrequests' bodies
//! around `return` text, a static file of a listed type, a proxied body
//! sent in pieces and one cut short (no after-body then), a location
//! adding itself, a status other than 200, a type not listed, HEAD and
//! HTTP/1.0 (the framing: chunked, or a close).

use crate::common::beside::{ask, Both};
use crate::common::origin::{Framing, Origin, Reply};

const SERVER: &str = "\
    location /ba.html { add_before_body /before; add_after_body /after; return 200 \"body\"; }\n\
    location /plain { add_after_body /after; return 200 \"plain\"; }\n\
    location = /f.txt { root {DOCROOT}; addition_types text/plain; add_after_body /after; }\n\
    location /self.html { add_after_body /self.html; return 200 \"self\"; }\n\
    location /202.html { add_after_body /after; return 202 \"b\"; }\n\
    location /p/ { proxy_pass http://127.0.0.1:{ORIGIN}/; add_before_body /before; add_after_body /after; }\n\
    location /before { return 200 \"before:\"; }\n\
    location /after { return 200 \":after\"; }\n";

/// Everything the server sent, to its close (a body cut short cannot be
/// parsed).
fn all_of(port: u16, raw: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    s.write_all(raw.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Status, framing headers and body (HEAD's without).
fn seen(port: u16, raw: &str) -> String {
    if raw.contains("short") {
        return all_of(port, raw);
    }
    let r = ask(port, raw);
    let mut s = format!("{}", r.status);
    for h in [
        "content-length",
        "transfer-encoding",
        "accept-ranges",
        "etag",
    ] {
        if let Some(v) = r.header(h) {
            s.push_str(&format!(" {h}={v}"));
        }
    }
    s.push_str(&format!(" body={}", String::from_utf8_lossy(&r.body)));
    s
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
}

#[test]
fn bodies_are_added_around_the_response_as_nginx_adds_them() {
    let origin = Origin::start(|req| {
        let body = b"<p>proxied body in pieces</p>".to_vec();
        let r = Reply::ok(&body).header("Content-Type", "text/html");
        let mut r = r.paced(5, std::time::Duration::from_millis(2));
        r.headers
            .retain(|(n, v)| n != "Content-Type" || v != "text/plain");
        if req.target.contains("short") {
            r = r.framing(Framing::Truncate(7));
        }
        r
    });
    let both = Both::start("", SERVER, origin.port);
    let cases = [
        get("/ba.html"),
        get("/plain"),
        get("/f.txt"),
        get("/self.html"),
        get("/202.html"),
        get("/p/page"),
        get("/p/short"),
        "HEAD /ba.html HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".to_string(),
        "GET /ba.html HTTP/1.0\r\nHost: localhost\r\n\r\n".to_string(),
    ];
    let mut answers = Vec::new();
    for (name, port) in both.ports() {
        let got: Vec<String> = cases.iter().map(|c| seen(port, c)).collect();
        answers.push((name, got));
    }
    let porter = &answers[0].1;
    assert_eq!(
        porter[0],
        "200 transfer-encoding=chunked body=before:body:after"
    );
    assert_eq!(
        porter[1], "200 content-length=5 body=plain",
        "text/plain: not listed"
    );
    assert!(porter[2].contains("etag=W/\""), "{}", porter[2]);
    assert!(porter[2].ends_with("body=file:after"), "{}", porter[2]);
    assert_eq!(porter[3], "200 transfer-encoding=chunked body=selfself");
    assert!(
        porter[5].ends_with("body=before:<p>proxied body in pieces</p>:after"),
        "{}",
        porter[5]
    );
    assert!(
        !porter[6].contains(":after"),
        "a body cut short: {}",
        porter[6]
    );
    if let Some((_, nginx)) = answers.get(1) {
        for (i, c) in cases.iter().enumerate() {
            if i == 6 {
                continue; // cut short: how much of it arrives is timing
            }
            assert_eq!(porter[i], nginx[i], "{c}");
        }
    }
}
