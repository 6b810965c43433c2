//! `proxy_redirect ~regex replacement` (`~*` caseless): a match anywhere
//! in an upstream's `Location` replaces the whole value, its captures in
//! the replacement; and every `proxy_redirect` rule (text, `default`,
//! regex) also rewrites the URL of a `Refresh: N; url=URL` line, which is
//! not made absolute. Debian's nginx answers the same requests side by
//! side (nginx-tests' proxy_redirect.t is vendored too).

use crate::common::origin::*;
use crate::common::*;

/// `Location` and `Refresh` of each request's answer.
fn answers(port: u16) -> Vec<(Option<String>, Option<String>)> {
    [
        "/regex_w_captures/test.html",
        "/ReeegEX/test.html",
        "/nomatch/test.html",
        "/text/test.html",
        "/default/test.html",
    ]
    .iter()
    .map(|path| {
        let r = get(port, path);
        let f = |n: &str| r.header(n).map(String::from);
        (f("location"), f("refresh"))
    })
    .collect()
}

#[test]
fn regex_rules_replace_the_whole_location_and_refresh_urls() {
    // The origin redirects to itself: `http://127.0.0.1:PORT/URI`.
    let origin = Origin::start(|req: &Req| {
        let port = req.header("x-origin-port").unwrap_or("0").to_string();
        let url = format!("http://127.0.0.1:{port}{}", req.target);
        Reply::ok(b"")
            .status(302)
            .header("Location", &url)
            .header("Refresh", &format!("7; url={url}"))
    });
    let o = origin.port;
    let http = format!(
        "server {{\n listen 127.0.0.1:{{PORT}};\n server_name localhost;\n\
         location / {{\n proxy_pass http://127.0.0.1:{o};\n\
         proxy_set_header X-Origin-Port {o};\n\
         proxy_redirect http://127.0.0.1:{o}/text/ /replaced/;\n\
         proxy_redirect ~^(.+)/regex_w_([^/]+) $1/$2/test.html;\n\
         proxy_redirect ~*re+gexp? /replaced/test.html;\n }}\n\
         location /default/ {{\n proxy_pass http://127.0.0.1:{o}/upstream/;\n\
         proxy_set_header X-Origin-Port {o};\n }}\n}}\n"
    );
    let porter = Server::start(&one_worker_conf(&http));
    let got = answers(porter.port);
    let p = porter.port;
    let s = |v: &str| Some(v.to_string());
    assert_eq!(
        got[0],
        (
            s(&format!("http://127.0.0.1:{o}/captures/test.html")),
            s(&format!("7; url=http://127.0.0.1:{o}/captures/test.html"))
        ),
        "captures"
    );
    assert_eq!(
        got[1],
        (
            s(&format!("http://localhost:{p}/replaced/test.html")),
            s("7; url=/replaced/test.html")
        ),
        "caseless"
    );
    assert_eq!(
        got[2].0,
        s(&format!("http://127.0.0.1:{o}/nomatch/test.html"))
    );
    assert_eq!(
        got[3].1,
        s("7; url=/replaced/test.html"),
        "text rule on Refresh"
    );
    assert_eq!(
        got[4].1,
        s("7; url=/default/test.html"),
        "default on Refresh"
    );
    let Some(nginx) = Nginx::start(&http) else {
        eprintln!("nginx not installed: porter alone");
        return;
    };
    // A path made absolute names the server's own port.
    let ours = |v: Vec<(Option<String>, Option<String>)>, port: u16| {
        let mine = format!(":{port}/");
        v.into_iter()
            .map(|(l, r)| (l.map(|l| l.replace(&mine, ":SELF/")), r))
            .collect::<Vec<_>>()
    };
    assert_eq!(ours(got, p), ours(answers(nginx.port), nginx.port));
}

#[test]
fn a_bad_proxy_redirect_regex_names_the_line() {
    let conf = one_server_conf(
        "",
        "location / { proxy_pass http://127.0.0.1:9; proxy_redirect ~(unclosed /x; }",
    );
    let err = config_error(&conf.replace("{PORT}", "1"));
    assert!(err.contains("pcre2_compile() failed"), "{err}");
    assert!(err.contains("porter.conf:"), "{err}");
}
