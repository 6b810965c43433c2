//! A caseless regex (`~*` locations, `valid_referers ~…`, which NGINX
//! compiles caseless) keeps the pattern's own inline flags: `(?-i)` turns
//! case-sensitivity back on for what follows, as PCRE does. nginx answers
//! the same requests the same.

use crate::common::*;

const BODY: &str = "server { listen 127.0.0.1:{PORT};
    location /ref { valid_referers ~example.org ~(?-i)example.net;
                    if ($invalid_referer) { return 403; } return 204; }
    location ~* ^/CI/(?-i)Exact$ { return 200 \"ci\\n\"; }
    location / { return 404; } }";

fn statuses(port: u16) -> Vec<u16> {
    let referer = |r: &str| get_with(port, "/ref", &format!("Referer: http://www.{r}/\r\n")).status;
    vec![
        referer("example.org"),
        referer("eXample.org"),
        referer("example.net"),
        referer("eXample.net"),
        get(port, "/ci/Exact").status,
        get(port, "/CI/exact").status,
    ]
}

#[test]
fn inline_flags_override_caseless() {
    let s = Server::start(&format!(
        "daemon off; worker_processes 1; pid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/error.log info; events {{}}\n\
         http {{ access_log off; {BODY} }}\n"
    ));
    let porter = statuses(s.port);
    assert_eq!(porter, vec![204, 204, 204, 403, 200, 404]);
    if let Some(n) = Nginx::start(BODY) {
        assert_eq!(statuses(n.port), porter, "nginx");
    }
}
