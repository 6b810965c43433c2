//! `keepalive_time` inside `upstream { }`: a pooled connection to a peer
//! that has been open longer than it is closed after its response, so the
//! next request opens a new one; younger ones are reused. nginx is run on
//! the same configuration and must open as many connections.

use std::time::Duration;

use crate::common::origin::*;
use crate::common::*;

const UPSTREAM: &str = "upstream u { server 127.0.0.1:{ORIGIN}; keepalive 4; keepalive_time 1s; }
  server { listen 127.0.0.1:{PORT}; location / { proxy_pass http://u; proxy_http_version 1.1; proxy_set_header Connection \"\"; } }";

/// Three requests, the third after the first connection has aged past
/// `keepalive_time`: how many connections the origin saw.
fn connections_used(port: u16, origin: &Origin) -> usize {
    assert_eq!(get(port, "/a").status, 200);
    assert_eq!(get(port, "/b").status, 200);
    std::thread::sleep(Duration::from_millis(1300));
    // Reuses the old connection, which is then closed after the response.
    assert_eq!(get(port, "/c").status, 200);
    assert_eq!(get(port, "/d").status, 200);
    origin.conns()
}

#[test]
fn old_upstream_connections_are_not_reused() {
    let origin = Origin::start(|_| Reply::ok(b"hi\n"));
    let body = UPSTREAM.replace("{ORIGIN}", &origin.port.to_string());
    let s = Server::start(&format!(
        "daemon off; worker_processes 1; pid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/error.log info; events {{}}\n\
         http {{ access_log off; {body} }}\n"
    ));
    assert_eq!(connections_used(s.port, &origin), 2, "porter");

    let origin = Origin::start(|_| Reply::ok(b"hi\n"));
    let body = UPSTREAM.replace("{ORIGIN}", &origin.port.to_string());
    if let Some(n) = Nginx::start(&body) {
        assert_eq!(connections_used(n.port, &origin), 2, "nginx");
    }
}
