//! Escaping in `rewrite` targets, as NGINX's script engine: a redirect's
//! target is unescaped (an escape of a printable character above `%` is
//! decoded, others stay escaped; the first `?` ends it), and when the
//! request's URI came escaped a regex capture is escaped again in the
//! arguments of the new URI. nginx answers the same requests the same.

use crate::common::*;

const SERVER: &str = r#"
    location /t1 { rewrite ^ $arg_r? redirect; }
    location /capture { rewrite ^(.*) $1?c=d; return 200 "uri:$uri args:$args"; }
    location /capturedup { rewrite ^(.*) $1?c=$1; return 200 "uri:$uri args:$args"; }
"#;

/// The `Location` or the body of each request.
fn answers(port: u16) -> Vec<String> {
    [
        "/t1?r=http%3A%2F%2Fexample.com%2F%3Ffrom",
        "/t1?r=http%3A%2F%2Fexample.com%0D%0Asplit",
        "/t1?r=http%3A%2F%2Fexample.com%2F%3Ffrom%3Dblah",
        "/capture/%25?a=b",
        "/capturedup/%25?a=b",
    ]
    .iter()
    .map(|path| {
        let r = get(port, path);
        match r.header("location") {
            Some(l) => format!("{path}: {} {l}", r.status),
            None => format!("{path}: {} {}", r.status, r.text()),
        }
    })
    .collect()
}

#[test]
fn redirect_targets_and_captures_are_escaped_as_nginx() {
    let (p, n) = both("", SERVER);
    let porter = answers(p.port);
    assert_eq!(
        porter,
        [
            "/t1?r=http%3A%2F%2Fexample.com%2F%3Ffrom: 302 http://example.com/?from",
            "/t1?r=http%3A%2F%2Fexample.com%0D%0Asplit: 302 http://example.com%0D%0Asplit",
            "/t1?r=http%3A%2F%2Fexample.com%2F%3Ffrom%3Dblah: 302 http://example.com/?from%3Dblah",
            "/capture/%25?a=b: 200 uri:/capture/% args:c=d&a=b",
            "/capturedup/%25?a=b: 200 uri:/capturedup/% args:c=/capturedup/%25&a=b",
        ]
    );
    if let Some(n) = n {
        assert_eq!(porter, answers(n.port));
    }
}
