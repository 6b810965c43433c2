//! Hostile HTTP/3 clients (issue 29, item 4), each against the real
//! binary while another client (`Watcher`, quinn + h3) keeps asking for a
//! file: a HEADERS frame that never ends, reserved frames on the control
//! stream, QPACK's dynamic table used without leave and its encoder
//! stream flooded, a field section over `large_client_header_buffers`,
//! stream floods past `http3_max_concurrent_streams`, streams opened and
//! reset at once (the HTTP/3 twin of HTTP/2's rapid reset), request heads
//! never finished (slowloris) and idle connections, Initial packets from
//! an address that never answers (spoofed: the amplification limit and
//! `quic_retry`), and datagrams for connection IDs nobody issued. Each
//! asserts what the attacker gets, that porter's resident memory stays
//! bounded, and that the other client was answered all along.

use crate::common;

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::h3client::H3;
use crate::common::h3raw::{self, app_code, frame, frame_head, get, get_fields, Raw, HEADERS};
use crate::common::tls::{Alg, Ca};
use crate::common::{rss_kib, Server, TempDir};

/// H3_EXCESSIVE_LOAD, QPACK_DECOMPRESSION_FAILED (RFC 9114 §8.1, RFC 9204 §6).
const EXCESSIVE_LOAD: u64 = 0x107;
const QPACK_DECOMPRESSION_FAILED: u64 = 0x200;

/// One worker (its memory is the process's), QUIC and TLS on one port,
/// `extra` in the server.
fn start(ca: &Ca, extra: &str) -> Server {
    let dir = TempDir::new("h3hostile");
    ca.leaf(&["localhost"], Alg::Ecdsa)
        .write(dir.path(), "cert");
    dir.write("html/small.txt", "hello over quic\n");
    dir.write("html/big.bin", common::origin::pattern(4 << 20, 5));
    let conf = format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\nevents {{ worker_connections 1024; }}\n\
         http {{\n  access_log off;\n\
           server {{\n    listen 127.0.0.1:{{PORT}} ssl;\n    listen 127.0.0.1:{{PORT}} quic reuseport;\n\
             server_name localhost;\n\
             ssl_certificate {{PREFIX}}/cert.crt; ssl_certificate_key {{PREFIX}}/cert.key;\n\
             root {{PREFIX}}/html;\n    location = /metrics {{ porter_metrics; }}\n{extra}\n  }}\n}}\n"
    );
    Server::start_in(dir, &conf, &[])
}

/// Another client asking for a small file every 50 ms on its own thread
/// until stopped: how many answers, the failures, the slowest.
struct Watcher {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<(usize, Vec<String>, Duration)>,
}

impl Watcher {
    fn start(s: &Server, ca: &Ca) -> Watcher {
        let mut c = H3::connect(s.port, ca, "localhost").unwrap();
        assert_eq!(c.get("/small.txt").status, 200);
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let (mut ok, mut errors, mut slowest) = (0, Vec::new(), Duration::ZERO);
            while !flag.load(Ordering::Relaxed) {
                let t = Instant::now();
                match c.request("GET", "/small.txt", &[], b"") {
                    Ok(r) if r.status == 200 && r.body == b"hello over quic\n" => ok += 1,
                    Ok(r) => errors.push(format!("status {}", r.status)),
                    Err(e) => errors.push(e),
                }
                slowest = slowest.max(t.elapsed());
                std::thread::sleep(Duration::from_millis(50));
            }
            (ok, errors, slowest)
        });
        Watcher { stop, thread }
    }

    /// Stops, and asserts the other client was answered all along.
    fn check(self) {
        // Some answers after the attack too.
        std::thread::sleep(Duration::from_millis(300));
        self.stop.store(true, Ordering::Relaxed);
        let (ok, errors, slowest) = self.thread.join().unwrap();
        assert!(errors.is_empty(), "the other client failed: {errors:?}");
        assert!(ok >= 3, "the other client was answered {ok} times");
        assert!(
            slowest < Duration::from_secs(2),
            "the other client waited {slowest:?}"
        );
    }
}

/// Writes up to `total` bytes of `frame_start` then zeros on `send`, until
/// the server stops the stream or `wait` passes: the bytes written, and
/// how the write ended.
async fn pour(
    send: &mut quinn::SendStream,
    frame_start: &[u8],
    total: usize,
    wait: Duration,
) -> (usize, Result<(), quinn::WriteError>) {
    let mut written = 0;
    let work = async {
        send.write_all(frame_start).await?;
        let chunk = vec![0u8; 64 << 10];
        while written < total {
            send.write_all(&chunk).await?;
            written += chunk.len();
        }
        Ok(())
    };
    let r = match tokio::time::timeout(wait, work).await {
        Ok(r) => r,
        Err(_) => Ok(()),
    };
    (written, r)
}

fn assert_bounded(s: &Server, before: u64, what: &str) {
    let after = rss_kib(s.child.id());
    eprintln!("{what}: resident {before} KiB before, {after} KiB after");
    assert!(
        after < before + 24 * 1024,
        "{what}: resident memory grew from {before} KiB to {after} KiB"
    );
}

#[test]
fn a_headers_frame_longer_than_the_header_limit_resets_the_stream() {
    let ca = Ca::new();
    let s = start(&ca, "large_client_header_buffers 4 8k;");
    let w = Watcher::start(&s, &ca);
    let raw = Raw::connect(s.port, &ca);
    let _control = raw.open_control();
    let before = rss_kib(s.child.id());
    // A HEADERS frame that says 1 GiB and brings 96 MiB of it.
    let conn = raw.conn.clone();
    let (written, r) = raw.rt.block_on(async move {
        let (mut send, _recv) = conn.open_bi().await.unwrap();
        let head = frame_head(HEADERS, 1 << 30);
        pour(&mut send, &head, 96 << 20, Duration::from_secs(20)).await
    });
    assert!(
        matches!(r, Err(quinn::WriteError::Stopped(c)) if c.into_inner() == EXCESSIVE_LOAD),
        "{r:?} after {written} bytes"
    );
    assert!(written < 1 << 20, "{written} bytes taken before the stop");
    assert_bounded(&s, before, "an endless HEADERS frame");
    // The connection itself goes on.
    let r = raw.exchange(&get("/small.txt"), true, Duration::from_secs(5));
    assert!(r.unwrap().ends_with(b"hello over quic\n"));
    w.check();
}

#[test]
fn a_field_section_over_large_client_header_buffers_is_answered_431() {
    let ca = Ca::new();
    let s = start(&ca, "large_client_header_buffers 2 1k;");
    let raw = Raw::connect(s.port, &ca);
    let _control = raw.open_control();
    let big = vec![b'a'; 3000];
    let fields = get_fields("/small.txt", &[("x-big", &big)]);
    let r = raw.exchange(&frame(HEADERS, &fields), true, Duration::from_secs(5));
    let bytes = r.unwrap();
    assert_eq!(h3raw::status(&bytes), Some(431), "{bytes:?}");
    // Within the limit it is served.
    let fields = get_fields("/small.txt", &[("x-big", &big[..500])]);
    let r = raw.exchange(&frame(HEADERS, &fields), true, Duration::from_secs(5));
    assert!(r.unwrap().ends_with(b"hello over quic\n"));
}

#[test]
fn a_reserved_frame_without_end_on_the_control_stream_closes_the_connection() {
    let ca = Ca::new();
    let s = start(&ca, "");
    let w = Watcher::start(&s, &ca);
    let raw = Raw::connect(s.port, &ca);
    let mut control = raw.open_control();
    let before = rss_kib(s.child.id());
    // A reserved frame type (0x1f * N + 0x21) of 1 GiB, 96 MiB of it sent.
    let (written, _) = raw.rt.block_on(pour(
        &mut control,
        &frame_head(0x21, 1 << 30),
        96 << 20,
        Duration::from_secs(20),
    ));
    let closed = raw.closed(Duration::from_secs(5));
    assert_eq!(
        closed.as_ref().and_then(app_code),
        Some(EXCESSIVE_LOAD),
        "{closed:?} after {written} bytes"
    );
    assert!(written < 1 << 20, "{written} bytes taken before the close");
    assert_bounded(&s, before, "an endless reserved frame");
    w.check();
}

#[test]
fn qpack_encoder_floods_stall_and_dynamic_references_close_the_connection() {
    let ca = Ca::new();
    let s = start(&ca, "");
    let w = Watcher::start(&s, &ca);
    let raw = Raw::connect(s.port, &ca);
    let _control = raw.open_control();
    let before = rss_kib(s.child.id());
    // The encoder stream: a 1 GiB table, then inserts of 16 KiB values.
    let conn = raw.conn.clone();
    let written = raw.rt.block_on(async move {
        let mut enc = conn.open_uni().await.unwrap();
        let mut start = vec![0x02];
        h3raw::prefix_int(0x20, 5, 1 << 30, &mut start);
        let mut insert = Vec::new();
        h3raw::prefix_int(0x40, 5, 4, &mut insert);
        insert.extend_from_slice(b"x-qb");
        h3raw::prefix_int(0, 7, 16 << 10, &mut insert);
        insert.resize(insert.len() + (16 << 10), b'q');
        enc.write_all(&start).await.unwrap();
        let mut written = 0usize;
        let flood = async {
            while written < 64 << 20 {
                if enc.write_all(&insert).await.is_err() {
                    break;
                }
                written += insert.len();
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(3), flood).await;
        written
    });
    // The server advertised no table and reads no instruction: the
    // stream's flow-control window is all a client can make it hold.
    assert!(written < 1 << 20, "{written} bytes of encoder instructions");
    assert_bounded(&s, before, "an encoder stream flood");
    // A field section that refers to the table it was never allowed.
    let mut fields = get_fields("/", &[]);
    fields.push(0x80);
    let _ = raw.exchange(&frame(HEADERS, &fields), true, Duration::from_secs(3));
    let closed = raw.closed(Duration::from_secs(5));
    assert_eq!(
        closed.as_ref().and_then(app_code),
        Some(QPACK_DECOMPRESSION_FAILED),
        "{closed:?}\n{}",
        s.read("logs/error.log")
    );
    w.check();
}

#[test]
fn streams_past_the_limit_wait_for_credit() {
    let ca = Ca::new();
    let s = start(&ca, "http3_max_concurrent_streams 8;");
    let w = Watcher::start(&s, &ca);
    let raw = Raw::connect(s.port, &ca);
    let _control = raw.open_control();
    let conn = raw.conn.clone();
    let opened = raw.rt.block_on(async move {
        let mut held = Vec::new();
        let mut opened = 0;
        // Request streams with half a HEADERS frame each, held open.
        for _ in 0..1000 {
            let open = tokio::time::timeout(Duration::from_millis(500), conn.open_bi());
            let Ok(Ok((mut send, recv))) = open.await else {
                break;
            };
            send.write_all(&frame_head(HEADERS, 100)).await.unwrap();
            held.push((send, recv));
            opened += 1;
        }
        opened
    });
    assert_eq!(opened, 8, "request streams open at once");
    w.check();
}

#[test]
fn streams_opened_and_reset_at_once_leave_nothing_behind() {
    let ca = Ca::new();
    // keepalive_requests would send GOAWAY after 1000 streams.
    let s = start(
        &ca,
        "http3_max_concurrent_streams 100; keepalive_requests 100000;",
    );
    let w = Watcher::start(&s, &ca);
    let raw = Raw::connect(s.port, &ca);
    let _control = raw.open_control();
    let before = rss_kib(s.child.id());
    let conn = raw.conn.clone();
    let t = Instant::now();
    // Each asks for 4 MiB and cancels at once, the response never read.
    let n = raw.rt.block_on(async move {
        let mut n = 0;
        while n < 20_000 && t.elapsed() < Duration::from_secs(20) {
            let (mut send, mut recv) = conn.open_bi().await.unwrap();
            let _ = send.write_all(&get("/big.bin")).await;
            let _ = send.reset(quinn::VarInt::from_u32(0x10c));
            let _ = recv.stop(quinn::VarInt::from_u32(0x10c));
            n += 1;
        }
        n
    });
    assert!(n >= 2_000, "only {n} streams in {:?}", t.elapsed());
    assert_bounded(&s, before, "streams reset at once");
    // The connection is still served.
    let r = raw.exchange(&get("/small.txt"), true, Duration::from_secs(5));
    assert!(r.unwrap().ends_with(b"hello over quic\n"));
    w.check();
}

#[test]
fn request_heads_never_finished_time_out_and_idle_connections_close() {
    let ca = Ca::new();
    let s = start(
        &ca,
        "client_header_timeout 1s; keepalive_timeout 2s; http3_max_concurrent_streams 16;",
    );
    let w = Watcher::start(&s, &ca);
    let raw = Raw::connect(s.port, &ca);
    let _control = raw.open_control();
    let conn = raw.conn.clone();
    let t = Instant::now();
    // Every stream the limit allows, each with a third of its HEADERS.
    let ends = raw.rt.block_on(async move {
        let mut streams = Vec::new();
        for _ in 0..16 {
            let (mut send, recv) = conn.open_bi().await.unwrap();
            let f = get("/small.txt");
            send.write_all(&f[..f.len() / 3]).await.unwrap();
            streams.push((send, recv));
        }
        let mut ends = Vec::new();
        for (_send, mut recv) in streams {
            let end = tokio::time::timeout(Duration::from_secs(5), recv.read_to_end(1 << 20)).await;
            ends.push(end.map(|r| r.map(|b| b.len())));
        }
        ends
    });
    for e in &ends {
        assert!(matches!(e, Ok(Ok(0)) | Ok(Err(_))), "{ends:?}");
    }
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    s.wait_log(
        "logs/error.log",
        "client timed out (110: Connection timed out) while reading client request headers",
        Duration::from_secs(2),
    );
    // A connection that says nothing more goes at keepalive_timeout.
    let closed = raw.closed(Duration::from_secs(5));
    assert!(
        matches!(closed, Some(quinn::ConnectionError::TimedOut)),
        "{closed:?}"
    );
    w.check();
}

/// Client Initial packets for `port`, one per new connection, each with
/// its own random connection ID, made without any socket.
fn initials(port: u16, ca: &Ca, n: usize) -> Vec<Vec<u8>> {
    let mut ep = quinn_proto::Endpoint::new(
        Arc::new(quinn_proto::EndpointConfig::default()),
        None,
        false,
        None,
    );
    let cfg = quinn_proto::ClientConfig::new(common::h3client::tls(ca));
    let to = ([127, 0, 0, 1], port).into();
    let now = Instant::now();
    (0..n)
        .map(|_| {
            let (_, mut c) = ep.connect(now, cfg.clone(), to, "localhost").unwrap();
            let mut buf = Vec::new();
            let t = c.poll_transmit(now, 1, &mut buf).unwrap();
            buf.truncate(t.size);
            buf
        })
        .collect()
}

/// Sends `datagrams` to 127.0.0.1:`port` from a socket that never
/// answers, then gathers what comes back for `listen`: bytes sent, the
/// datagrams received.
fn spoof(port: u16, datagrams: &[Vec<u8>], listen: Duration) -> (usize, Vec<Vec<u8>>) {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.connect(("127.0.0.1", port)).unwrap();
    let mut sent = 0;
    for d in datagrams {
        sent += sock.send(d).unwrap();
    }
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    let end = Instant::now() + listen;
    while Instant::now() < end {
        if let Ok(n) = sock.recv(&mut buf) {
            got.push(buf[..n].to_vec());
        }
    }
    (sent, got)
}

#[test]
fn initials_from_an_address_that_never_answers_get_at_most_three_times_their_bytes() {
    let ca = Ca::new();
    let s = start(&ca, "ssl_handshake_timeout 3s;");
    let w = Watcher::start(&s, &ca);
    let before = rss_kib(s.child.id());
    let (sent, got) = spoof(s.port, &initials(s.port, &ca, 500), Duration::from_secs(4));
    let back: usize = got.iter().map(Vec::len).sum();
    assert!(back > 0, "the server answered nothing");
    assert!(back <= 3 * sent, "{back} bytes sent back for {sent}");
    assert_bounded(&s, before, "500 unvalidated handshakes");
    w.check();
}

#[test]
fn with_quic_retry_unvalidated_initials_get_only_a_retry_and_keep_no_state() {
    let ca = Ca::new();
    let s = start(&ca, "quic_retry on;");
    let w = Watcher::start(&s, &ca);
    let before = rss_kib(s.child.id());
    let (sent, got) = spoof(s.port, &initials(s.port, &ca, 2000), Duration::from_secs(2));
    // (Some are lost in the sockets' buffers: 2000 at once.)
    assert!(got.len() >= 20, "{} answers", got.len());
    // Long header, type Retry (RFC 9000 §17.2.5), smaller than what came.
    assert!(got.iter().all(|d| d[0] & 0xf0 == 0xf0), "not all Retry");
    let back: usize = got.iter().map(Vec::len).sum();
    assert!(back < sent, "{back} bytes sent back for {sent}");
    assert_bounded(&s, before, "2000 Initials under quic_retry");
    let mut c = H3::connect(s.port, &ca, "localhost").unwrap();
    let m = common::metrics::Metrics(c.get("/metrics").text());
    let n = |r: &str| m.get("porter_quic_connections_total", &[("result", r)]);
    // The watcher and this client: the only connections with state.
    assert_eq!(n("accepted"), Some(2.0), "{}", m.0);
    assert!(n("retried") >= Some(got.len() as f64 + 2.0), "{}", m.0);
    w.check();
}

#[test]
fn datagrams_for_connection_ids_nobody_issued_get_small_stateless_resets() {
    let ca = Ca::new();
    let s = start(&ca, "");
    let w = Watcher::start(&s, &ca);
    let before = rss_kib(s.child.id());
    // Short-header packets, 8-byte connection IDs starting with the
    // worker's byte, all unknown.
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let datagrams: Vec<Vec<u8>> = (0..20_000)
        .map(|_| {
            let mut d = vec![0x40, 0];
            for _ in 0..10 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                d.extend_from_slice(&rng.to_le_bytes());
            }
            d
        })
        .collect();
    let (sent, got) = spoof(s.port, &datagrams, Duration::from_secs(2));
    let back: usize = got.iter().map(Vec::len).sum();
    assert!(back < sent, "{back} bytes sent back for {sent}");
    assert!(
        got.iter().all(|d| d.len() < 82),
        "a reset as big as its trigger"
    );
    assert_bounded(&s, before, "20000 unknown connection IDs");
    w.check();
}
