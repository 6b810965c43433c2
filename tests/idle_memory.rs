//! Memory per idle keep-alive connection, plain and TLS 1.3 (issue 14:
//! "memory per idle TLS connection"; bench/run's S5 measures it at 10 000
//! connections beside nginx). Each connection makes one request and stays
//! open; the growth of the server's RSS divided by the connections must
//! stay under a bound set from what an idle connection needs: its task
//! (no buffers: they go back to the worker's list while it waits), and
//! for TLS rustls's state (its 4 KiB read buffer, the record keys, the
//! connection). The handshake's state must not size an idle connection's
//! task: it is boxed and freed when the handshake ends. Inline, it made
//! every connection's task 5 KiB, plain HTTP included (here 5.5 KiB plain
//! and 12.2 KiB TLS per connection before, 2.4 and 9.2 after).

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::common::tls::{self as t, Alg, Ca, ClientOpts};
use crate::common::{rss_kib, Server, TempDir};

/// Connections held open per measurement.
const CONNS: usize = 1500;

/// Raises this process's open-files limit to its hard limit (the test
/// holds every connection open).
fn raise_nofile() {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        r.rlim_cur = r.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &r);
    }
}

/// One worker, a plain and a TLS listener serving the same 1 KiB file.
fn start() -> (Server, u16, Ca) {
    let ca = Ca::new();
    let dir = TempDir::new("idlemem");
    ca.leaf(&["localhost"], Alg::Ecdsa).write(dir.path(), "a");
    dir.write("www/1k.bin", vec![b'x'; 1024]);
    let tls_port = common::free_port();
    let conf = format!(
        "daemon off;\nworker_processes 1;\nworker_rlimit_nofile 8192;\n\
         pid {{PREFIX}}/porter.pid;\nerror_log {{PREFIX}}/logs/error.log warn;\n\
         events {{ worker_connections 4096; }}\n\
         http {{\n  access_log off;\n  keepalive_timeout 60;\n\
           server {{ listen 127.0.0.1:{{PORT}}; listen 127.0.0.1:{tls_port} ssl;\n\
             ssl_certificate {{PREFIX}}/a.crt; ssl_certificate_key {{PREFIX}}/a.key;\n\
             ssl_protocols TLSv1.3;\n\
             root {{PREFIX}}/www; }}\n}}\n"
    );
    (Server::start_in(dir, &conf, &[]), tls_port, ca)
}

const REQ: &str = "GET /1k.bin HTTP/1.1\r\nHost: localhost\r\n\r\n";

/// Reads one response to the 1 KiB file (head and 1024 bytes).
fn read_one(s: &mut impl Read) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = s.read(&mut buf).expect("read");
        assert!(n > 0, "closed before the response");
        got.extend_from_slice(&buf[..n]);
        if let Some(i) = common::find(&got, b"\r\n\r\n") {
            if got.len() >= i + 4 + 1024 {
                assert!(got.starts_with(b"HTTP/1.1 200"), "{:?}", &got[..i]);
                return;
            }
        }
    }
}

/// KiB of server RSS per connection after `open` made CONNS of them
/// (each after one request, idle), measured after a first round that
/// warms the allocator up.
fn kib_per_idle_conn<C>(pid: u32, open: impl Fn() -> C) -> f64 {
    let warm: Vec<C> = (0..200).map(|_| open()).collect();
    drop(warm);
    std::thread::sleep(Duration::from_millis(300));
    let before = rss_kib(pid);
    let conns: Vec<C> = (0..CONNS).map(|_| open()).collect();
    std::thread::sleep(Duration::from_millis(500));
    let after = rss_kib(pid);
    drop(conns);
    (after.saturating_sub(before)) as f64 / CONNS as f64
}

// Each measurement on a server of its own: memory freed by one round
// would be reused by the next and hide its growth.

#[test]
fn an_idle_plain_keep_alive_connection_stays_small() {
    raise_nofile();
    let (s, _, _) = start();
    let kib = kib_per_idle_conn(s.child.id(), || {
        let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(REQ.as_bytes()).unwrap();
        read_one(&mut c);
        c
    });
    eprintln!("idle plain connection: {kib:.2} KiB");
    // 2.13 KiB measured on 2026-11-28 (nginx 1.22: 1.2 in bench S5);
    // 2.45 before the connection's task became two phases (its accept
    // phase's arguments no longer held beside `run`, `http::connection::life`).
    // 2.75 KiB after the 2026-11-28 merges: the connection's task held
    // the stream module's session future inline beside HTTP's (a task is
    // as large as its largest branch); boxed, 2.21 KiB. 1.98 KiB once the
    // task held the session boxed and not the arguments it was made from
    // (`runtime::worker::counted`).
    assert!(kib < 2.25, "plain: {kib:.2} KiB per idle connection");
}

#[test]
fn an_idle_tls_connection_stays_small() {
    raise_nofile();
    let (s, tls_port, ca) = start();
    let cfg = t::client(&ca, ClientOpts::default());
    let kib = kib_per_idle_conn(s.child.id(), || {
        let mut c = t::Conn::open(tls_port, &cfg, "localhost").expect("handshake");
        c.tls.write_all(REQ.as_bytes()).unwrap();
        c.tls.flush().unwrap();
        read_one(&mut c.tls);
        c
    });
    eprintln!("idle TLS 1.3 connection: {kib:.2} KiB");
    // 10.18 KiB measured on 2026-11-27 (nginx 1.22 keeps 15.7 KiB). It
    // had grown to 10.63 when `$ssl_session_id` came: the ID was kept
    // twice on the heap (bytes in the TLS state, hex in `TlsInfo`); now
    // once, inline (`tls::session_id::SessionId`), and `NONE`/`SUCCESS`
    // of `$ssl_client_verify` are not allocated. An unboxed handshake
    // future would make it 14.1 KiB.
    // 9.87 KiB on 2026-11-28, with the two-phase task.
    // 10.54 KiB after the 2026-11-28 merges, 9.90 once the stream
    // session's future was boxed, 9.76 with the session boxed apart from
    // the task (see the plain test).
    assert!(kib < 10.1, "TLS: {kib:.2} KiB per idle connection");
}
