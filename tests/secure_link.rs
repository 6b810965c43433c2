//! `secure_link`, `secure_link_md5`, `secure_link_secret`: `$secure_link`
//! and `$secure_link_expires` as NGINX's secure link module sets them, on
//! the real binary beside Debian's nginx (the comparison is skipped, saying
//! so, without `/usr/sbin/nginx`): NGINX's documented recipe (an MD5 in
//! base64url of the expiry, the URI and a secret), expired and forged
//! links, and the older `/prefix/HEX/link` form.

use crate::common::*;
use md5::{Digest, Md5};

fn ask(port: u16, target: &str) -> Resp {
    raw(
        port,
        format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

/// The MD5 of `s` in base64url without padding, as the docs' openssl
/// pipeline makes it.
fn b64url_md5(s: &str) -> String {
    porter::access::basic::encode(&Md5::digest(s.as_bytes()))
        .trim_end_matches('=')
        .replace('+', "-")
        .replace('/', "_")
}

fn hex_md5(s: &str) -> String {
    Md5::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

const HTTP: &str = "server {\n  listen 127.0.0.1:{PORT};\n\
  location /s/ {\n    secure_link $arg_md5,$arg_expires;\n    secure_link_md5 \"$secure_link_expires$uri secret\";\n\
    if ($secure_link = \"\") { return 403; }\n    if ($secure_link = \"0\") { return 410; }\n\
    return 200 \"[$secure_link] [$secure_link_expires]\";\n  }\n\
  location /n/ {\n    secure_link $arg_md5;\n    secure_link_md5 \"$uri secret\";\n\
    return 200 \"[$secure_link] [$secure_link_expires]\";\n  }\n\
  location /p/ {\n    secure_link_secret word;\n    return 200 \"[$secure_link]\";\n  }\n\
  location /none/ { return 200 \"[$secure_link] [$secure_link_expires]\"; }\n}";

fn seen(r: Resp) -> String {
    if r.status == 200 {
        r.text()
    } else {
        r.status.to_string()
    }
}

#[test]
fn links_are_checked_as_nginx_checks_them() {
    let future = "2147483000";
    let good = b64url_md5(&format!("{future}/s/a.txt secret"));
    let past = "1000";
    let old = b64url_md5(&format!("{past}/s/a.txt secret"));
    let plain = b64url_md5("/n/a.txt secret");
    let hex = hex_md5("a/b.txt?x=1word");
    let targets = vec![
        (
            format!("/s/a.txt?md5={good}&expires={future}"),
            format!("[1] [{future}]"),
        ),
        (
            format!("/s/a.txt?md5={good}==&expires={future}"),
            format!("[1] [{future}]"),
        ),
        (
            format!("/s/b.txt?md5={good}&expires={future}"),
            "403".to_string(),
        ),
        (
            format!("/s/a.txt?md5={old}&expires={past}"),
            "410".to_string(),
        ),
        (format!("/s/a.txt?md5={good}&expires=0"), "403".to_string()),
        (format!("/s/a.txt?md5={good}&expires=x1"), "403".to_string()),
        ("/s/a.txt?md5=&expires=".to_string(), "403".to_string()),
        (format!("/n/a.txt?md5={plain}"), "[1] []".to_string()),
        (format!("/n/a.txt?md5={good}"), "[] []".to_string()),
        (format!("/p/{hex}/a/b.txt?x=1"), "[a/b.txt?x=1]".to_string()),
        (format!("/p/{hex}/a/b.txt"), "[]".to_string()),
        ("/p/short/a/b.txt".to_string(), "[]".to_string()),
        ("/none/x".to_string(), "[] []".to_string()),
    ];
    let srv = Server::start(&one_worker_conf(HTTP));
    for (t, want) in &targets {
        assert_eq!(seen(ask(srv.port, t)), *want, "{t}");
    }
    let Some(ngx) = Nginx::start(HTTP) else {
        eprintln!("skipping the comparison: {NGINX} is not installed");
        return;
    };
    for (t, _) in &targets {
        assert_eq!(seen(ask(srv.port, t)), seen(ask(ngx.port, t)), "{t}");
    }
}

#[test]
fn the_two_forms_do_not_mix_in_one_level() {
    let dir = TempDir::new("secure-link-bad");
    let conf = dir.write(
        "bad.conf",
        "events {}\nhttp {\nserver {\nlocation / {\nsecure_link $arg_h;\nsecure_link_secret w;\n}\n}\n}\n",
    );
    let out = run(&["-t", "-c", conf.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "\"secure_link_secret\" cannot be mixed with \"secure_link\" and \"secure_link_md5\""
        ) && err.contains(&format!("{}:6", conf.display())),
        "{err}"
    );
}
