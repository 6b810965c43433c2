//! How porter connects to a proxied peer: `proxy_bind` (a fixed local
//! address, one from a variable, an empty value binding nothing, a value
//! that is no address answering 500 with NGINX's log line) and
//! `proxy_socket_keepalive` (`SO_KEEPALIVE` on the upstream socket, seen
//! in the kernel's socket table as a keepalive timer).

use std::process::Command;
use std::time::Duration;

use crate::common::{free_port, get, one_worker_conf, Server};

fn conf(origin: u16) -> String {
    one_worker_conf(&format!(
        "upstream keep {{ server 127.0.0.1:{origin}; keepalive 4; }}\n\
         server {{ listen 127.0.0.1:{origin}; location / {{ return 200 \"$remote_addr\"; }} }}\n\
         server {{\n  listen 127.0.0.1:{{PORT}};\n\
           location /fixed {{ proxy_pass http://127.0.0.1:{origin}; proxy_bind 127.0.0.2; }}\n\
           location /var {{ proxy_pass http://127.0.0.1:{origin}; proxy_bind $arg_b; }}\n\
           location /ka {{ proxy_pass http://keep; proxy_http_version 1.1;\n\
             proxy_set_header Connection \"\"; proxy_socket_keepalive on; }}\n\
         }}"
    ))
}

#[test]
fn proxy_bind_sets_the_local_address_of_upstream_connections() {
    let origin = free_port();
    let srv = Server::start(&conf(origin));
    assert_eq!(get(srv.port, "/fixed").text(), "127.0.0.2");
    assert_eq!(get(srv.port, "/var?b=127.0.0.3").text(), "127.0.0.3");
    assert_eq!(get(srv.port, "/var?b=").text(), "127.0.0.1");
    assert_eq!(get(srv.port, "/var?b=nonsense").status, 500);
    let log = srv.wait_log(
        "logs/error.log",
        "invalid local address \"nonsense\"",
        Duration::from_secs(5),
    );
    assert!(log.contains("invalid local address \"nonsense\""), "{log}");
}

#[test]
fn proxy_socket_keepalive_arms_the_kernels_keepalive_timer() {
    let origin = free_port();
    let srv = Server::start(&conf(origin));
    assert_eq!(get(srv.port, "/ka").status, 200);
    // The pooled upstream connection, from porter to the origin's port.
    let out = Command::new("ss")
        .args(["-tnoH", "state", "established"])
        .arg(format!("dport = :{origin}"))
        .output()
        .expect("ss (iproute2)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("timer:(keepalive"), "{text}");
}
