//! An upstream body cut short (`Content-Length` not reached, or a chunked
//! body without its last chunk) reaches an HTTP/1.1 client chunked by a
//! body filter (`sub_filter_types *`, which takes a response without a
//! `Content-Type` too) with no final chunk, so the client sees the
//! response is unfinished; a complete one ends with its final chunk.
//! Debian's nginx answers the same requests side by side (nginx-tests'
//! proxy_unfinished.t is vendored too).

use std::io::{Read, Write};
use std::net::TcpStream;

use crate::common::origin::*;
use crate::common::*;

/// The raw bytes of the answer after the head.
fn body_of(port: u16, path: &str) -> (Option<String>, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut all = Vec::new();
    let _ = s.read_to_end(&mut all);
    let at = find(&all, b"\r\n\r\n").expect("a head") + 4;
    let head = String::from_utf8_lossy(&all[..at]).to_ascii_lowercase();
    let te = head
        .lines()
        .find_map(|l| l.strip_prefix("transfer-encoding: "))
        .map(str::to_string);
    (te, all[at..].to_vec())
}

#[test]
fn a_truncated_upstream_body_has_no_final_chunk() {
    let origin = Origin::start(|req: &Req| {
        let raw: &[u8] = match req.target.as_str() {
            "/length" => {
                b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\nunfinished\r\n"
            }
            _ => b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nConnection: close\r\n\r\nfinished\r\n",
        };
        Reply::ok(b"").framing(Framing::Raw(raw.to_vec()))
    });
    let http = format!(
        "server {{\n listen 127.0.0.1:{{PORT}};\n server_name localhost;\n\
         location / {{ sub_filter foo bar; sub_filter_types *; \
         proxy_pass http://127.0.0.1:{}; }}\n}}\n",
        origin.port
    );
    let porter = Server::start(&one_worker_conf(&http));
    let cut = body_of(porter.port, "/length");
    assert_eq!(cut.0.as_deref(), Some("chunked"));
    assert!(
        !cut.1.ends_with(b"0\r\n\r\n"),
        "{:?}",
        String::from_utf8_lossy(&cut.1)
    );
    let whole = body_of(porter.port, "/ok");
    assert!(whole.1.ends_with(b"\r\n0\r\n\r\n"), "{whole:?}");
    assert!(find(&whole.1, b"finished").is_some(), "{whole:?}");
    let Some(nginx) = Nginx::start(&http) else {
        eprintln!("nginx not installed: porter alone");
        return;
    };
    // Chunk sizes differ (nginx's sub_filter holds a line end back, and
    // cut bodies stop a byte apart); both are chunked, the cut one
    // without the final chunk.
    let n = body_of(nginx.port, "/length");
    assert_eq!(n.0, cut.0);
    assert!(!n.1.ends_with(b"0\r\n\r\n"));
    let n = body_of(nginx.port, "/ok");
    assert_eq!(n.0, whole.0);
    assert!(n.1.ends_with(b"\r\n0\r\n\r\n"));
}
