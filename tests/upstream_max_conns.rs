//! `server ... max_conns=N` in `upstream { }`: a peer with N requests in
//! flight is skipped — a request counts until its response body has been
//! read, not only until its head — and a lone peer that is full is a 502,
//! as NGINX. nginx answers the same configuration the same.

use crate::common::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

/// A backend that answers each request at once with its head and, after
/// `BODY_DELAY`, a body naming its port.
fn slow_body_backend() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || answer(s, port));
        }
    });
    port
}

const BODY_DELAY: Duration = Duration::from_millis(700);

fn answer(mut s: TcpStream, port: u16) {
    let mut buf = Vec::new();
    while find(&buf, b"\r\n\r\n").is_none() {
        let mut b = [0u8; 1024];
        match s.read(&mut b) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&b[..n]),
        }
    }
    let body = format!("{port}\n");
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = s.write_all(head.as_bytes());
    std::thread::sleep(BODY_DELAY);
    let _ = s.write_all(body.as_bytes());
}

fn http_body(limited: u16, other: u16, lone: u16) -> String {
    format!(
        "upstream two {{ server 127.0.0.1:{limited} max_conns=1; server 127.0.0.1:{other}; }}
         upstream lone {{ server 127.0.0.1:{lone} max_conns=1; }}
         server {{ listen 127.0.0.1:{{PORT}};
           proxy_buffering off;
           location /two {{ proxy_pass http://two; }}
           location /lone {{ proxy_pass http://lone; }} }}"
    )
}

/// Starts `n` requests for `path` one after another, each once the head
/// of the one before arrived; then the status and body of each.
fn overlapping(port: u16, path: &str, n: usize) -> Vec<String> {
    let mut open = Vec::new();
    for _ in 0..n {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let req = format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n");
        s.write_all(req.as_bytes()).unwrap();
        let mut buf = Vec::new();
        let head = read_head(&mut s, &mut buf).map(|(line, _)| line);
        open.push((s, buf, head));
    }
    open.into_iter()
        .map(|(mut s, mut buf, head)| {
            s.read_to_end(&mut buf).unwrap_or(0);
            let status = head.unwrap_or_default();
            let status = status.split(' ').nth(1).unwrap_or("none").to_string();
            if status == "200" {
                format!("200 {}", String::from_utf8_lossy(&buf).trim())
            } else {
                status
            }
        })
        .collect()
}

fn answers(port: u16, ports: (u16, u16, u16)) -> Vec<Vec<String>> {
    let (limited, other, lone) = ports;
    let two = overlapping(port, "/two", 3);
    let lone_answers = overlapping(port, "/lone", 2);
    let name = |v: &Vec<String>| -> Vec<String> {
        v.iter()
            .map(|a| {
                a.replace(&limited.to_string(), "limited")
                    .replace(&other.to_string(), "other")
                    .replace(&lone.to_string(), "lone")
            })
            .collect()
    };
    vec![name(&two), name(&lone_answers)]
}

#[test]
fn a_full_peer_is_skipped_until_its_body_is_read() {
    let ports = (
        slow_body_backend(),
        slow_body_backend(),
        slow_body_backend(),
    );
    let body = http_body(ports.0, ports.1, ports.2);
    let s = Server::start(&one_worker_conf(&body));
    let porter = answers(s.port, ports);
    assert_eq!(
        porter,
        [
            vec!["200 limited", "200 other", "200 other"],
            vec!["200 lone", "502"],
        ]
    );
    let log = s.wait_log(
        "logs/error.log",
        "no live upstreams",
        Duration::from_secs(5),
    );
    assert!(log.contains("[error]"), "{log}");
    drop(s);
    match Nginx::start(&body) {
        Some(n) => assert_eq!(porter, answers(n.port, ports)),
        None => eprintln!("skipped the comparison: nginx is not installed"),
    }
}

#[test]
fn a_bad_max_conns_is_nginx_s_error() {
    let conf = one_worker_conf(
        "upstream u { server 127.0.0.1:1 max_conns=x; }
         server { listen 127.0.0.1:1; location / { proxy_pass http://u; } }",
    );
    let e = config_error(&conf);
    assert!(e.contains("invalid parameter \"max_conns=x\""), "{e}");
}
