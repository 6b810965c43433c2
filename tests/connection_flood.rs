//! A slow-header attacker that reopens what the server closes, against
//! `worker_connections`, over real sockets (issue 12; also silent
//! connections reclaimed at the limit and refusals logged once a second;
//! `bench/slow_clients.py --reconnect` is the full-size, timed run and
//! docs/reliability.md has its figures). The attacker's weapon is timing:
//! a connection it opens stays silent until its next tick, then starts a
//! head that never ends; every silent connection the worker still holds at
//! the tick becomes one that nothing can reclaim until
//! `client_header_timeout`. porter drains reusable connections as NGINX
//! does — from the moment no more than a sixteenth of the connections are
//! free, in batches — so the worker keeps that sixteenth for other
//! clients; reclaiming one connection per admitted one kept the worker full
//! of silent connections, and after the tick a normal client was refused
//! (22 % of its requests served in the full-size run, nginx 100 %). The
//! test counts connections, not time: the header timeout is far longer
//! than the test.
//!
//! The second attack sends each head with the connect, so the bytes are in
//! the socket before the worker accepts; the test holds the server stopped
//! (`SIGSTOP`) while it connects and writes, which makes that certain. As
//! NGINX, a new connection counts as reusable until it has been read, and
//! near the limit the next accept drains it first.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::*;

const LIMIT: usize = 64;
const ATTACKERS: usize = 80;

fn open(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_nonblocking(true).unwrap();
    s
}

/// Whether the server closed `s` (EOF or an error on a read).
fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 512];
    match s.read(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != ErrorKind::WouldBlock,
    }
}

/// Reopens every connection of `v` the server closed; returns how many.
fn reopen_closed(port: u16, v: &mut [TcpStream]) -> usize {
    let mut n = 0;
    for s in v.iter_mut() {
        if closed(s) {
            *s = open(port);
            n += 1;
        }
    }
    n
}

/// One worker with `worker_connections` [`LIMIT`] and a header timeout far
/// longer than the test, serving `/a.txt`.
fn start_small(root: &TempDir) -> Server {
    root.write("a.txt", "hello\n");
    let conf = http_conf(&format!(
        "    root {};\n    client_header_timeout 60s;\n    location / {{ }}",
        root.path().display()
    ))
    .replace("worker_processes 2", "worker_processes 1")
    .replace(
        "worker_connections 256",
        &format!("worker_connections {LIMIT}"),
    )
    .replace("access_log {PREFIX}/logs/access.log", "access_log off");
    let srv = Server::start(&conf);
    assert_eq!(get(srv.port, "/a.txt").status, 200);
    srv
}

/// Five normal requests, each on a new connection: all must be served.
fn normal_client_is_served(port: u16, holding: usize) {
    for i in 0..5 {
        let r = try_raw(
            port,
            b"GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(
            r.map(|r| r.status),
            Some(200),
            "request {i} refused with {holding} trickling connections held"
        );
    }
}

#[test]
fn silent_connections_reopened_at_the_limit_leave_room_after_their_heads_start() {
    let root = TempDir::new("flood");
    let srv = start_small(&root);
    // More silent connections than the worker allows, then each one the
    // server closed opened again (silent too), twice.
    let mut atk: Vec<TcpStream> = (0..ATTACKERS).map(|_| open(srv.port)).collect();
    let mut reopened = 0;
    for _ in 0..2 {
        std::thread::sleep(Duration::from_millis(300));
        reopened += reopen_closed(srv.port, &mut atk);
    }
    assert!(
        reopened >= ATTACKERS - LIMIT,
        "the worker closed only {reopened} of {ATTACKERS} connections"
    );
    std::thread::sleep(Duration::from_millis(300));
    // The tick: every connection still open starts a head that never ends.
    for s in atk.iter_mut() {
        let _ = s.write(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n");
    }
    std::thread::sleep(Duration::from_millis(1000));
    room_is_left(srv.port, &mut atk);
    srv.wait_log(
        "logs/error.log",
        &format!("{LIMIT} worker_connections are not enough, reusing connections"),
        Duration::from_secs(2),
    );
}

#[test]
fn heads_that_arrive_with_the_connect_at_the_limit_leave_room() {
    const SIGSTOP: i32 = 19;
    const SIGCONT: i32 = 18;
    let root = TempDir::new("flood-heads");
    let srv = start_small(&root);
    // While the server is stopped, more connections than it allows, each
    // with the start of a head that never ends already sent: the worker
    // meets every one with bytes waiting.
    srv.signal(SIGSTOP);
    let atk: Vec<Option<TcpStream>> = (0..ATTACKERS)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", srv.port)).ok()?;
            s.write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n").ok()?;
            s.set_nonblocking(true).ok()?;
            Some(s)
        })
        .collect();
    srv.signal(SIGCONT);
    let mut atk: Vec<TcpStream> = atk.into_iter().flatten().collect();
    assert_eq!(atk.len(), ATTACKERS, "the backlog took every connection");
    std::thread::sleep(Duration::from_millis(1000));
    room_is_left(srv.port, &mut atk);
}

/// The attackers the worker still holds (`atk`) leave it room: no more
/// than `worker_connections` less a sixteenth, and a normal client is
/// served.
fn room_is_left(port: u16, atk: &mut [TcpStream]) {
    let holding = atk
        .iter_mut()
        .map(|s| usize::from(!closed(s)))
        .sum::<usize>();
    normal_client_is_served(port, holding);
    assert!(
        holding <= LIMIT - LIMIT / 16,
        "{holding} trickling connections held of {LIMIT}"
    );
}

/// A worker at `worker_connections` 8 with one worker process.
fn small_worker_conf(server_body: &str) -> String {
    http_conf(server_body)
        .replace("worker_processes 2", "worker_processes 1")
        .replace("worker_connections 256", "worker_connections 8")
}

fn open_conns(port: u16, n: usize, send: &[u8]) -> Vec<TcpStream> {
    let v: Vec<TcpStream> = (0..n)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.write_all(send).unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    v
}

#[test]
fn silent_connections_at_the_limit_are_reclaimed_for_a_request() {
    let srv = Server::start(&small_worker_conf("    location / { return 200 ok; }"));
    // The worker is up and accepting.
    assert_eq!(get(srv.port, "/").status, 200);
    // Eight connections that never send a byte fill the worker.
    let _silent = open_conns(srv.port, 8, b"");
    for i in 0..5 {
        let r = try_raw(
            srv.port,
            b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(r.map(|r| r.status), Some(200), "request {i} kept out");
    }
    srv.wait_log(
        "logs/error.log",
        "8 worker_connections are not enough, reusing connections",
        Duration::from_secs(2),
    );
}

#[test]
fn refused_connections_are_logged_at_most_once_a_second() {
    let srv = Server::start(&small_worker_conf(
        "    client_header_timeout 30s;\n    location / { return 200 ok; }",
    ));
    assert_eq!(get(srv.port, "/").status, 200);
    // Eight connections inside their heads: nothing to reclaim.
    let _busy = open_conns(srv.port, 8, b"GET / HTTP/1.1\r\n");
    let t0 = Instant::now();
    for _ in 0..40 {
        let r = try_raw(
            srv.port,
            b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        assert!(r.is_none(), "a connection over the limit was served");
    }
    let secs = t0.elapsed().as_secs() as usize + 1;
    std::thread::sleep(Duration::from_millis(200));
    let log = srv.read("logs/error.log");
    let lines = log.matches("8 worker_connections are not enough").count();
    assert!(
        (1..=secs + 1).contains(&lines),
        "{lines} log lines for 40 refused connections in {secs} s"
    );
}
