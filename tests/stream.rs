//! The `stream { }` block (src/stream/): porter's TCP proxy over real
//! sockets — the relay both ways with `proxy_half_close`, the next peer
//! after a refused connect with `$upstream_addr` in the stream
//! `access_log`, `proxy_timeout` on an idle session, `deny` and `return`
//! with `$status` and `$protocol`, `ssl_preread`'s SNI, and the
//! configuration errors NGINX gives (`no port in upstream`, a stream-only
//! variable in `http`). The vendored nginx-tests `stream_*.t` files
//! (tests/nginx-suite/) check the rest against NGINX's own expectations.

use crate::common::*;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// A backend that reads each connection to its end, then answers
/// `echo:` and what it read, and closes.
fn echo_to_eof() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { return };
            std::thread::spawn(move || {
                let mut got = Vec::new();
                let _ = c.read_to_end(&mut got);
                let _ = c.write_all(b"echo:");
                let _ = c.write_all(&got);
            });
        }
    });
    port
}

/// A backend that accepts and never answers.
fn silent() -> (TcpListener, u16) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    (l, port)
}

fn stream_conf(body: &str) -> String {
    format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\nevents {{}}\n\
         stream {{\n{body}\n}}\n"
    )
}

/// Sends `data`, ends the client's side, reads to the end.
fn exchange(port: u16, data: &[u8]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(data).unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn half_close_lets_the_upstream_answer_after_the_client_ended() {
    let b = echo_to_eof();
    let conf = stream_conf(&format!(
        "server {{ listen 127.0.0.1:{{PORT}}; proxy_pass 127.0.0.1:{b}; proxy_half_close on; }}"
    ));
    let porter = Server::start(&conf);
    assert_eq!(exchange(porter.port, b"hello"), "echo:hello");
}

#[test]
fn without_half_close_the_client_s_end_ends_the_session() {
    let b = echo_to_eof();
    let conf = stream_conf(&format!(
        "server {{ listen 127.0.0.1:{{PORT}}; proxy_pass 127.0.0.1:{b}; }}"
    ));
    let porter = Server::start(&conf);
    assert_eq!(exchange(porter.port, b"hello"), "");
}

#[test]
fn a_refused_peer_is_skipped_and_both_tries_are_logged() {
    let b = echo_to_eof();
    let dead = free_port();
    let conf = stream_conf(&format!(
        "log_format up \"$upstream_addr $status $bytes_received $upstream_bytes_sent\";\n\
         upstream u {{ server 127.0.0.1:{dead} max_fails=0; server 127.0.0.1:{b} backup; }}\n\
         server {{ listen 127.0.0.1:{{PORT}}; proxy_pass u; proxy_half_close on;\n\
         access_log {{PREFIX}}/logs/up.log up; }}"
    ));
    let porter = Server::start(&conf);
    assert_eq!(exchange(porter.port, b"abc"), "echo:abc");
    // The start-up probe was a session too: the line with 3 bytes is ours.
    let want = format!("127.0.0.1:{dead}, 127.0.0.1:{b} 200 3 0, 3");
    let log = porter.wait_log("logs/up.log", &want, Duration::from_secs(5));
    assert!(log.lines().any(|l| l == want), "{log}");
}

#[test]
fn proxy_timeout_ends_an_idle_session() {
    let (_l, b) = silent();
    let conf = stream_conf(&format!(
        "server {{ listen 127.0.0.1:{{PORT}}; proxy_pass 127.0.0.1:{b}; proxy_timeout 1s; }}"
    ));
    let porter = Server::start(&conf);
    let mut s = TcpStream::connect(("127.0.0.1", porter.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let t = Instant::now();
    let mut buf = [0u8; 8];
    assert_eq!(s.read(&mut buf).unwrap_or(0), 0);
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "{took:?}"
    );
}

#[test]
fn return_deny_and_the_status_variable() {
    let p2 = free_port();
    let conf = stream_conf(&format!(
        "log_format st \"$server_port $status\";\n\
         access_log {{PREFIX}}/logs/st.log st;\n\
         server {{ listen 127.0.0.1:{{PORT}}; return \"$remote_addr:$protocol\"; }}\n\
         server {{ listen 127.0.0.1:{p2}; deny all; return no; }}"
    ));
    let porter = Server::start(&conf);
    assert_eq!(exchange(porter.port, b""), "127.0.0.1:TCP");
    assert_eq!(exchange(p2, b""), "");
    let log = porter.wait_log("logs/st.log", &format!("{p2} 403"), Duration::from_secs(5));
    assert!(log.contains(&format!("{} 200", porter.port)), "{log}");
}

/// A TLS 1.2 ClientHello record naming `sni`.
fn client_hello(sni: &str) -> Vec<u8> {
    let n = sni.len() as u16;
    let mut ext = vec![0, 0];
    ext.extend((n + 5).to_be_bytes());
    ext.extend((n + 3).to_be_bytes());
    ext.push(0);
    ext.extend(n.to_be_bytes());
    ext.extend(sni.as_bytes());
    let mut body = vec![3, 3];
    body.extend([7u8; 32]);
    body.extend([0, 0, 2, 0xc0, 0x2f, 1, 0]);
    body.extend((ext.len() as u16).to_be_bytes());
    body.extend(ext);
    let mut rec = vec![0x16, 3, 1];
    rec.extend((body.len() as u16 + 4).to_be_bytes());
    rec.extend([1, 0]);
    rec.extend((body.len() as u16).to_be_bytes());
    rec.extend(body);
    rec
}

#[test]
fn ssl_preread_reads_the_server_name_without_terminating_tls() {
    let conf = stream_conf(
        "server { listen 127.0.0.1:{PORT}; ssl_preread on;\n\
         return \"$ssl_preread_server_name $ssl_preread_protocol\"; }",
    );
    let porter = Server::start(&conf);
    assert_eq!(
        exchange(porter.port, &client_hello("sni.example")),
        "sni.example TLSv1.2"
    );
}

#[test]
fn stream_config_errors_name_file_and_line() {
    let dir = TempDir::new("stream-conf");
    let bad = [
        (
            "events {}\nstream {\nserver { listen 127.0.0.1:1; proxy_pass 127.0.0.1; }\n}\n",
            "no port in upstream \"127.0.0.1\"",
        ),
        (
            "events {}\nhttp { log_format x $protocol; }\n",
            "unknown \"protocol\" variable",
        ),
        (
            "events {}\nstream {\nserver { listen 127.0.0.1:1; }\n}\n",
            "no handler for server",
        ),
    ];
    for (text, want) in bad {
        let path = dir.write("bad.conf", text);
        let out = run(&["-t", "-c", path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(want) && err.contains("bad.conf:"),
            "{text}: {err}"
        );
    }
}
