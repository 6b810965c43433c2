//! `error_page` for a redirect's status (NGINX's `return 302 "url"`,
//! `rewrite ... redirect` and the directory 301 end the request with their
//! status, so the location's `error_page` for it applies): the page is
//! served with the redirect's status and keeps its `Location`, unless the
//! page redirects again, whose `Location` replaces it. nginx answers the
//! same requests the same.

use crate::common::*;

const SERVER: &str = r#"
    location /error302redirect { error_page 302 http://example.com/; return 302 "first"; }
    location /error302return302text { error_page 302 /return302text; return 302 "first"; }
    location /return302text { return 302 "http://example.com/"; }
    location /error302rewrite { error_page 302 /rewrite; return 302 "first"; }
    location /rewrite { rewrite ^ http://example.com/; }
    location /error302return200text { error_page 302 /return200text; return 302 "text"; }
    location /return200text { return 200 "text"; }
    location /error302args { error_page 302 /return302args?$arg_a; return 302 "first"; }
    location /return302args { return 302 "http://example.com/$args"; }
"#;

/// Status, every `Location` and the body of each request.
fn answers(port: u16) -> Vec<String> {
    [
        "/error302redirect",
        "/error302return302text",
        "/error302rewrite",
        "/error302return200text",
        "/error302args?a=2",
    ]
    .iter()
    .map(|path| {
        let r = get(port, path);
        let locations: Vec<&str> = r
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("location"))
            .map(|(_, v)| v.as_str())
            .collect();
        let body = if r.status == 200 || path.ends_with("200text") {
            r.text()
        } else {
            String::new()
        };
        format!("{path}: {} {locations:?} {body}", r.status)
    })
    .collect()
}

#[test]
fn a_redirect_s_error_page_replaces_or_keeps_its_location() {
    let (p, n) = both("", SERVER);
    let porter = answers(p.port);
    assert_eq!(
        porter,
        [
            "/error302redirect: 302 [\"http://example.com/\"] ",
            "/error302return302text: 302 [\"http://example.com/\"] ",
            "/error302rewrite: 302 [\"http://example.com/\"] ",
            "/error302return200text: 302 [\"text\"] text",
            "/error302args?a=2: 302 [\"http://example.com/2\"] ",
        ]
    );
    if let Some(n) = n {
        assert_eq!(porter, answers(n.port));
    }
}
