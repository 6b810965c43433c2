//! Which server a `Host` picks, beside Debian's nginx (skipped, saying so,
//! without `/usr/sbin/nginx`): `*.example.com` names only the subdomains,
//! `.example.com` the domain too, an exact name wins over both.

use crate::common::{one_worker_conf, raw, Nginx, Server};

const BODY: &str = "server { listen 127.0.0.1:{PORT} default_server; server_name localhost;\n\
                      location / { return 200 \"default\"; } }\n\
                    server { listen 127.0.0.1:{PORT}; server_name *.wild.test;\n\
                      location / { return 200 \"star\"; } }\n\
                    server { listen 127.0.0.1:{PORT}; server_name .dot.test;\n\
                      location / { return 200 \"dot\"; } }\n\
                    server { listen 127.0.0.1:{PORT}; server_name exact.dot.test;\n\
                      location / { return 200 \"exact\"; } }";

fn pick(port: u16, host: &str) -> String {
    let req = format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    raw(port, req.as_bytes()).text()
}

#[test]
fn wildcard_names_pick_servers_as_nginx_picks_them() {
    let srv = Server::start(&one_worker_conf(BODY));
    let cases = [
        ("wild.test", "default"),
        ("a.wild.test", "star"),
        ("b.a.wild.test", "star"),
        ("dot.test", "dot"),
        ("a.dot.test", "dot"),
        ("exact.dot.test", "exact"),
        ("other.test", "default"),
    ];
    for (host, want) in cases {
        assert_eq!(pick(srv.port, host), want, "{host}");
    }
    let Some(ngx) = Nginx::start(BODY) else {
        eprintln!("skipping the comparison: /usr/sbin/nginx is not installed");
        return;
    };
    for (host, _) in cases {
        assert_eq!(pick(srv.port, host), pick(ngx.port, host), "{host}");
    }
}
