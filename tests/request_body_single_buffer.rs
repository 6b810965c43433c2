//! `client_body_in_single_buffer on` loads (porter keeps a body read into
//! memory in one buffer whatever the setting) and `$request_body` then
//! holds the whole body, as nginx's does with it on.

use crate::common::origin::*;
use crate::common::*;

fn post(port: u16, body: &str) -> Resp {
    raw(
        port,
        format!(
            "POST / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
}

#[test]
fn request_body_in_one_buffer() {
    let origin = Origin::start(|r| Reply::ok(&r.body));
    let body = format!(
        "server {{ listen 127.0.0.1:{{PORT}}; client_body_buffer_size 16k;
           location / {{ client_body_in_single_buffer on; add_header X-Body $request_body;
                         proxy_pass http://127.0.0.1:{}; }} }}",
        origin.port
    );
    let sent = "0123456789".repeat(300);
    let s = Server::start(&format!(
        "daemon off; worker_processes 1; pid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/error.log info; events {{}}\n\
         http {{ access_log off; {body} }}\n"
    ));
    let r = post(s.port, &sent);
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), sent);
    assert_eq!(r.header("X-Body"), Some(sent.as_str()));
    if let Some(n) = Nginx::start(&body) {
        let r = post(n.port, &sent);
        assert_eq!(r.header("X-Body"), Some(sent.as_str()), "nginx");
    }

    let dir = TempDir::new("single");
    let conf = dir.write(
        "t.conf",
        "events {} http { client_body_in_single_buffer maybe; }",
    );
    let out = run(&[
        "-t",
        "-p",
        dir.path().to_str().unwrap(),
        "-c",
        conf.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
}
