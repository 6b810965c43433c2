//! SIGTERM beside SIGQUIT, as NGINX's master obeys them: a SIGTERM while
//! a graceful stop waits for requests in flight makes the stop fast, and
//! one that comes with a SIGQUIT wins over it (NGINX looks at
//! `ngx_terminate` before `ngx_quit`). nginx-tests' http_resolver_cleanup.t
//! sends its SIGTERM right before Test::Nginx's SIGQUIT, with a request
//! still waiting on the resolver; a lost SIGTERM left porter waiting for
//! it, and Test::Nginx's own SIGTERM after 90 s went unheard.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::*;

const SIGQUIT: i32 = 3;
const SIGTERM: i32 = 15;

/// A server whose one location proxies to a listener that never answers,
/// the upstream's end of the connection, and a client whose request waits
/// on it.
fn server_with_a_stuck_request() -> (Server, TcpStream, TcpStream) {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let up = silent.local_addr().unwrap().port();
    let s = Server::start(&http_conf(&format!(
        "    location / {{ proxy_pass http://127.0.0.1:{up}; proxy_read_timeout 60s; }}\n"
    )));
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    // The request reaches the upstream: it is in flight.
    let (held, _) = silent.accept().unwrap();
    (s, held, c)
}

#[test]
fn sigterm_during_a_graceful_stop_makes_it_fast() {
    let (mut s, _silent, mut c) = server_with_a_stuck_request();
    s.signal(SIGQUIT);
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    s.signal(SIGTERM);
    s.wait_exit(Duration::from_secs(10))
        .expect("exit on SIGTERM during a graceful stop");
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    let mut rest = Vec::new();
    let _ = c.read_to_end(&mut rest);
}

#[test]
fn sigterm_sent_with_sigquit_wins() {
    let (mut s, _silent, _c) = server_with_a_stuck_request();
    let t = Instant::now();
    s.signal(SIGTERM);
    s.signal(SIGQUIT);
    s.wait_exit(Duration::from_secs(10))
        .expect("exit on SIGTERM with SIGQUIT");
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
}
