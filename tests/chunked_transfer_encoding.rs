//! `chunked_transfer_encoding off` (server-sent-events configs carry it):
//! a body of unknown length goes to an HTTP/1.1 client unframed and the
//! connection closes after it, as NGINX's chunked filter does; `on` (the
//! default) chunks it. Debian's nginx answers the same requests side by
//! side: status, framing headers and body.

use std::io::Write;
use std::net::TcpStream;

use crate::common::origin::*;
use crate::common::*;

/// The raw bytes of one HTTP/1.1 keep-alive GET, read until the server
/// closes or a second passes.
fn exchange(port: u16, path: &str) -> Vec<u8> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(1)))
        .unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = std::io::Read::read(&mut s, &mut buf) {
        out.extend_from_slice(&buf[..n]);
    }
    out
}

/// The status line, the framing fields and the body of `raw`.
fn framing(raw: &[u8]) -> (String, Vec<String>, Vec<u8>) {
    let end = find(raw, b"\r\n\r\n").expect("a head") + 4;
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    // The status code (the origin's reason phrase passes through).
    let status = lines.next().unwrap().chars().take(12).collect();
    let fields = lines
        .filter(|l| {
            let n = l.split(':').next().unwrap_or("").to_ascii_lowercase();
            matches!(
                n.as_str(),
                "transfer-encoding" | "content-length" | "connection"
            )
        })
        .map(String::from)
        .collect();
    (status, fields, raw[end..].to_vec())
}

fn http(origin: u16) -> String {
    format!(
        "server {{\n listen 127.0.0.1:{{PORT}};\n\
         location /events {{ proxy_pass http://127.0.0.1:{origin}; proxy_http_version 1.1;\n\
         proxy_set_header Connection ''; proxy_buffering off; chunked_transfer_encoding off; }}\n\
         location / {{ proxy_pass http://127.0.0.1:{origin}; }}\n}}\n"
    )
}

#[test]
fn off_sends_an_unknown_length_body_unframed_and_closes() {
    let origin = Origin::start(|_| {
        Reply::ok(b"data: one\n\ndata: two\n\n")
            .framing(Framing::Chunked)
            .header("Content-Type", "text/event-stream")
    });
    let http = http(origin.port);
    let porter = Server::start(&format!(
        "daemon off;\nworker_processes 1;\nerror_log {{PREFIX}}/logs/error.log info;\n\
         events {{ worker_connections 64; }}\nhttp {{\n access_log off;\n{http}}}\n"
    ));
    let off = framing(&exchange(porter.port, "/events"));
    assert_eq!(
        off,
        (
            "HTTP/1.1 200".to_string(),
            vec!["Connection: close".to_string()],
            b"data: one\n\ndata: two\n\n".to_vec()
        )
    );
    let on = framing(&exchange(porter.port, "/"));
    assert!(
        on.1.contains(&"Transfer-Encoding: chunked".to_string()),
        "{on:?}"
    );
    let Some(nginx) = Nginx::start(&http) else {
        eprintln!("nginx not installed: porter alone");
        return;
    };
    assert_eq!(framing(&exchange(nginx.port, "/events")), off);
    assert_eq!(framing(&exchange(nginx.port, "/")), on);
}
