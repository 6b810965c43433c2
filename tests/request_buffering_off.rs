//! `proxy_request_buffering off` as NGINX's unbuffered body, beside
//! Debian's nginx: the request head goes upstream at once, with what of
//! the body came with it (the preread), the rest as it arrives; a chunked
//! body goes as one chunk per read, its last chunk with its last data;
//! and a body all there with the head is read whole, as buffered
//! (`$request_body` has it), where a streamed one leaves `$request_body`
//! empty.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use crate::common::*;

fn site(upstream: u16) -> String {
    format!(
        "server {{\n    listen 127.0.0.1:{{PORT}};\n    server_name localhost;\n    \
         proxy_request_buffering off;\n    proxy_http_version 1.1;\n    \
         location /up {{ proxy_pass http://127.0.0.1:{upstream}; }}\n    \
         location / {{ add_header X-Body \"$request_body\"; \
         proxy_pass http://127.0.0.1:{{PORT}}/ok; }}\n    \
         location = /ok {{ return 200 \"ok\\n\"; }}\n}}\n"
    )
}

/// Reads from `s` until `want` bytes came after the head (or 3 s).
fn read_until(s: &mut TcpStream, buf: &mut Vec<u8>, want: &[u8]) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut piece = [0u8; 4096];
    while find(buf, want).is_none() {
        match s.read(&mut piece) {
            Ok(n) if n > 0 => buf.extend_from_slice(&piece[..n]),
            _ => return false,
        }
    }
    true
}

/// The body part of what the upstream read so far.
fn after_head(buf: &[u8]) -> &[u8] {
    find(buf, b"\r\n\r\n").map_or(&[][..], |i| &buf[i + 4..])
}

/// Sends `head_and_preread`, checks the upstream sees it before the rest,
/// sends `rest`, checks the upstream's whole body, answers.
fn exchange(port: u16, up: &TcpListener, first: &[u8], want1: &[u8], rest: &[u8], want2: &[u8]) {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(first).unwrap();
    let (mut u, _) = up.accept().unwrap();
    let mut got = Vec::new();
    assert!(
        read_until(&mut u, &mut got, b"\r\n\r\n"),
        "no head upstream"
    );
    if !want1.is_empty() {
        assert!(
            read_until(&mut u, &mut got, want1),
            "{:?}",
            String::from_utf8_lossy(&got)
        );
    }
    assert_eq!(after_head(&got), want1, "the preread, before the rest");
    c.write_all(rest).unwrap();
    let mut whole = want1.to_vec();
    whole.extend_from_slice(want2);
    assert!(
        read_until(&mut u, &mut got, &whole),
        "{:?}",
        String::from_utf8_lossy(&got)
    );
    assert_eq!(after_head(&got), &whole[..]);
    u.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 3\r\n\r\nOK\n")
        .unwrap();
    drop(u);
    let r = read_response(&mut c, &mut Vec::new(), false).expect("response");
    assert_eq!(r.status, 200);
}

fn servers(up: u16) -> Vec<(&'static str, u16, Box<dyn std::any::Any>)> {
    let p = Server::start(&one_worker_conf(&site(up)));
    let mut out: Vec<(&'static str, u16, Box<dyn std::any::Any>)> =
        vec![("porter", p.port, Box::new(p))];
    if let Some(n) = Nginx::start(&site(up)) {
        out.push(("nginx", n.port, Box::new(n)));
    }
    out
}

#[test]
fn head_goes_at_once_with_the_preread_and_the_rest_follows() {
    let up = TcpListener::bind("127.0.0.1:0").unwrap();
    let upp = up.local_addr().unwrap().port();
    for (who, port, _s) in servers(upp) {
        eprintln!("{who}");
        let head = "POST /up HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
                    Content-Length: 10\r\n\r\n";
        // Nothing of the body yet: the head goes anyway.
        exchange(
            port,
            &up,
            head.as_bytes(),
            b"",
            b"0123456789",
            b"0123456789",
        );
        let first = format!("{head}01234");
        exchange(port, &up, first.as_bytes(), b"01234", b"56789", b"56789");
    }
}

#[test]
fn chunked_body_goes_one_chunk_per_read_and_ends_with_its_last_data() {
    let up = TcpListener::bind("127.0.0.1:0").unwrap();
    let upp = up.local_addr().unwrap().port();
    for (who, port, _s) in servers(upp) {
        eprintln!("{who}");
        let head = "POST /up HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
                    Transfer-Encoding: chunked\r\n\r\n";
        let first = format!("{head}5\r\n01234\r\n4\r\nmany\r\n");
        exchange(
            port,
            &up,
            first.as_bytes(),
            b"9\r\n01234many\r\n",
            b"5\r\n56789\r\n0\r\n\r\n",
            b"5\r\n56789\r\n0\r\n\r\n",
        );
    }
}

#[test]
fn body_there_whole_is_request_body_and_a_streamed_one_is_not() {
    let up = TcpListener::bind("127.0.0.1:0").unwrap();
    let upp = up.local_addr().unwrap().port();
    let head = "POST / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n";
    for (who, port, _s) in servers(upp) {
        // All there with the head: read whole, as buffered.
        for body in [
            "Content-Length: 10\r\n\r\n0123456789",
            "Transfer-Encoding: chunked\r\n\r\na\r\n0123456789\r\n0\r\n\r\n",
        ] {
            let r = raw(port, format!("{head}{body}").as_bytes());
            assert_eq!(r.header("X-Body"), Some("0123456789"), "{who}: {body}");
        }
        // The rest comes later: streamed, and NGINX keeps no copy.
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.write_all(format!("{head}Content-Length: 10\r\n\r\n01234").as_bytes())
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        c.write_all(b"56789").unwrap();
        let r = read_response(&mut c, &mut Vec::new(), false).expect("response");
        assert_eq!(r.status, 200, "{who}");
        assert_eq!(r.header("X-Body"), None, "{who}");
    }
}
