//! A `proxy_pass` URL with variables whose host and port are those another
//! `proxy_pass` wrote (`proxy_pass http://localhost:8080` makes the
//! implicit upstream `localhost:8080`) goes to that implicit upstream, as
//! NGINX finds a rendered host in its upstream list before it would ask a
//! resolver; any other name still needs `resolver`. Debian's nginx
//! answers the same requests side by side.

use crate::common::origin::*;
use crate::common::*;

fn statuses(port: u16, o: u16, other: u16) -> Vec<u16> {
    [
        "/fixed/x".to_string(),
        format!("/var/x?b=localhost:{o}"),
        format!("/var/x?b=LOCALHOST:{o}"),
        format!("/var/x?b=localhost:{other}"),
    ]
    .iter()
    .map(|p| get(port, p).status)
    .collect()
}

#[test]
fn a_rendered_host_names_the_implicit_upstream_of_another_proxy_pass() {
    let origin = Origin::start(|_| Reply::ok(b"origin"));
    let o = origin.port;
    let other = free_port();
    let http = format!(
        "server {{\n listen 127.0.0.1:{{PORT}};\n server_name localhost;\n\
         location /fixed/ {{ proxy_pass http://localhost:{o}; }}\n\
         location /var/ {{ proxy_pass http://$arg_b; }}\n}}\n"
    );
    let porter = Server::start(&one_worker_conf(&http));
    let got = statuses(porter.port, o, other);
    assert_eq!(got, vec![200, 200, 200, 502]);
    let Some(nginx) = Nginx::start(&http) else {
        eprintln!("nginx not installed: porter alone");
        return;
    };
    assert_eq!(statuses(nginx.port, o, other), got);
}
