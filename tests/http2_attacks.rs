//! HTTP/2 hostile clients, as scripted raw frames over h2c: rapid reset
//! (CVE-2023-44487), CONTINUATION flood (CVE-2024-27316 class), HPACK
//! bomb, SETTINGS / PING / empty DATA floods, a zero-window stall, and
//! stream-ID exhaustion. Each attack must end bounded — GOAWAY
//! ENHANCE_YOUR_CALM (or another GOAWAY) and a closed connection, or
//! streams reset on time — while a normal client's latency holds (a
//! ratio against its latency before the attack, with wide margins) and
//! the server's memory stays small. The figures (probe latencies, RSS,
//! CPU) are printed; see them with `--nocapture`.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{Server, TempDir};

/// The tests share the machine's cores: one at a time, so timings hold.
static SERIAL: Mutex<()> = Mutex::new(());

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const CONTINUATION: u8 = 9;

const END_STREAM: u8 = 1;
const END_HEADERS: u8 = 4;

const ENHANCE_YOUR_CALM: u32 = 0xb;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    f.push(kind);
    f.push(flags);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// HPACK for `GET path` (indexed `:method GET`, `:scheme http`, literal
/// `:path` and `:authority` without indexing, no Huffman).
fn get_block(path: &str) -> Vec<u8> {
    let mut b = vec![0x82, 0x86, 0x04, path.len() as u8];
    b.extend_from_slice(path.as_bytes());
    b.extend_from_slice(&[0x01, 9]);
    b.extend_from_slice(b"localhost");
    b
}

/// SETTINGS with (id, value) pairs.
fn settings(pairs: &[(u16, u32)]) -> Vec<u8> {
    let mut p = Vec::new();
    for (id, v) in pairs {
        p.extend_from_slice(&id.to_be_bytes());
        p.extend_from_slice(&v.to_be_bytes());
    }
    frame(SETTINGS, 0, 0, &p)
}

/// One frame as received.
#[derive(Debug)]
struct Frame {
    kind: u8,
    stream: u32,
    payload: Vec<u8>,
}

/// What a connection received until it closed or `within` ran out.
#[derive(Debug, Default)]
struct Seen {
    frames: Vec<Frame>,
    /// The connection was closed by the server.
    closed: bool,
}

impl Seen {
    fn goaway(&self) -> Option<u32> {
        self.frames
            .iter()
            .find(|f| f.kind == GOAWAY)
            .map(|f| u32::from_be_bytes([f.payload[4], f.payload[5], f.payload[6], f.payload[7]]))
    }

    /// The server answered with GOAWAY(ENHANCE_YOUR_CALM) and closed.
    fn assert_calmed(&self, attack: &str) {
        assert_eq!(
            self.goaway(),
            Some(ENHANCE_YOUR_CALM),
            "{attack}: {:?}",
            self.goaway()
        );
        assert!(self.closed, "{attack}: the connection stayed open");
    }

    fn count(&self, kind: u8) -> usize {
        self.frames.iter().filter(|f| f.kind == kind).count()
    }

    /// HEADERS frames' first byte of HPACK (the indexed `:status`), per
    /// stream.
    fn statuses(&self) -> Vec<(u32, u8)> {
        self.frames
            .iter()
            .filter(|f| f.kind == HEADERS)
            .map(|f| (f.stream, f.payload.first().copied().unwrap_or(0)))
            .collect()
    }
}

/// Opens an h2c connection: preface and an empty SETTINGS (`extra`
/// settings pairs if given).
fn open(port: u16, extra: &[(u16, u32)]) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_nodelay(true).unwrap();
    let mut hello = PREFACE.to_vec();
    hello.extend(settings(extra));
    s.write_all(&hello).unwrap();
    s
}

/// Writes `attack` (produced piece by piece) on a thread of its own while
/// this one reads frames, until the server closes or `within` runs out.
fn run_attack(
    s: TcpStream,
    within: Duration,
    attack: impl FnMut() -> Option<Vec<u8>> + Send + 'static,
) -> Seen {
    let mut w = s.try_clone().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let mut attack = attack;
    let writer = std::thread::spawn(move || {
        while !stop2.load(Ordering::Relaxed) {
            let Some(piece) = attack() else { break };
            if w.write_all(&piece).is_err() {
                break;
            }
        }
    });
    let seen = read_frames(s, within);
    stop.store(true, Ordering::Relaxed);
    let _ = writer.join();
    seen
}

fn read_frames(mut s: TcpStream, within: Duration) -> Seen {
    let deadline = Instant::now() + within;
    let mut seen = Seen::default();
    let mut buf = Vec::new();
    let mut tmp = vec![0u8; 64 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return seen;
        }
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut tmp) {
            Ok(0) | Err(_) if Instant::now() < deadline => {
                seen.closed = true;
                return seen;
            }
            Ok(0) | Err(_) => return seen,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
        while buf.len() >= 9 {
            let len = u32::from_be_bytes([0, buf[0], buf[1], buf[2]]) as usize;
            if buf.len() < 9 + len {
                break;
            }
            seen.frames.push(Frame {
                kind: buf[3],
                stream: u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]) & 0x7fff_ffff,
                payload: buf[9..9 + len].to_vec(),
            });
            buf.drain(..9 + len);
        }
    }
}

/// The server's resident memory (kB) and CPU time (ticks).
fn usage(s: &Server) -> (u64, u64) {
    let pid = s.child.id();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let f: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let cpu = f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    (rss, cpu)
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// A normal HTTP/1.1 client's latencies for `/index.html`, one request
/// every 20 ms while `running` holds.
fn probe(port: u16, running: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<Duration>> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        while running.load(Ordering::Relaxed) || v.len() < 5 {
            let t = Instant::now();
            let r = common::get(port, "/index.html");
            assert_eq!(r.status, 200);
            v.push(t.elapsed());
            std::thread::sleep(Duration::from_millis(20));
        }
        v
    })
}

/// The server, a baseline of the probe, and a fence for the figures.
struct Bench {
    s: Server,
    baseline: Duration,
    before: (u64, u64),
}

fn start(extra: &str) -> Bench {
    let dir = TempDir::new("h2atk");
    dir.write("html/index.html", "hello\n");
    dir.write("html/big.bin", vec![7u8; 4 << 20]);
    let conf = format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n  default_type application/octet-stream; access_log off;\n\
           server {{ listen 127.0.0.1:{{PORT}}; http2 on; root {{PREFIX}}/html; {extra}\n\
             location /post {{ return 200 \"ok\\n\"; }} }}\n}}\n"
    );
    let s = Server::start_in(dir, &conf, &[]);
    let mut v: Vec<Duration> = (0..20)
        .map(|_| {
            let t = Instant::now();
            assert_eq!(common::get(s.port, "/index.html").status, 200);
            t.elapsed()
        })
        .collect();
    let baseline = median(&mut v);
    let before = usage(&s);
    Bench {
        s,
        baseline,
        before,
    }
}

impl Bench {
    /// Runs `attack` connections one after another for `for_` while the
    /// probe runs; returns what the first connection saw.
    fn attack(&self, name: &str, for_: Duration, mut one: impl FnMut(u16) -> Seen) -> Seen {
        let running = Arc::new(AtomicBool::new(true));
        let p = probe(self.s.port, running.clone());
        let started = Instant::now();
        let first = one(self.s.port);
        let mut conns = 1;
        while started.elapsed() < for_ {
            one(self.s.port);
            conns += 1;
        }
        running.store(false, Ordering::Relaxed);
        let mut lat = p.join().unwrap();
        let after = usage(&self.s);
        let med = median(&mut lat);
        let max = *lat.iter().max().unwrap();
        eprintln!(
            "{name}: {conns} attack connections in {:?}; probe median {med:?} max {max:?} \
             (baseline {:?}); RSS {} -> {} kB; CPU {} ticks",
            started.elapsed(),
            self.baseline,
            self.before.0,
            after.0,
            after.1 - self.before.1
        );
        // The normal client's latency holds: its median within 20x its
        // baseline (plus scheduling noise on a shared machine).
        assert!(
            med <= self.baseline * 20 + Duration::from_millis(30),
            "{name}: probe median {med:?} vs baseline {:?}",
            self.baseline
        );
        assert!(max < Duration::from_secs(1), "{name}: a probe took {max:?}");
        // Memory stays bounded.
        assert!(
            after.0 < self.before.0 + 64 * 1024,
            "{name}: RSS grew from {} to {} kB",
            self.before.0,
            after.0
        );
        first
    }
}

#[test]
fn rapid_reset_gets_enhance_your_calm() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let b = start("");
    let seen = b.attack("rapid reset", Duration::from_secs(2), |port| {
        let s = open(port, &[]);
        let mut id = 1u32;
        run_attack(s, Duration::from_secs(5), move || {
            let mut p = Vec::new();
            for _ in 0..50 {
                p.extend(frame(
                    HEADERS,
                    END_STREAM | END_HEADERS,
                    id,
                    &get_block("/big.bin"),
                ));
                p.extend(frame(RST_STREAM, 0, id, &8u32.to_be_bytes()));
                id += 2;
            }
            (id < 200_000).then_some(p)
        })
    });
    seen.assert_calmed("rapid_reset_gets_enhance_your_calm");
}

#[test]
fn rapid_reset_of_accepted_streams_gets_enhance_your_calm() {
    // The resets come after the server started each stream (a separate
    // write, after a pause), so they are counted by porter, not by h2's
    // pending-accept limit.
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let b = start("http2_max_concurrent_streams 16;");
    let seen = b.attack("rapid reset (accepted)", Duration::from_secs(1), |port| {
        let s = open(port, &[(4, 0)]);
        let mut id = 1u32;
        let mut round = 0;
        run_attack(s, Duration::from_secs(5), move || {
            round += 1;
            let mut p = Vec::new();
            if round % 2 == 1 {
                for k in 0..8 {
                    p.extend(frame(
                        HEADERS,
                        END_STREAM | END_HEADERS,
                        id + 2 * k,
                        &get_block("/big.bin"),
                    ));
                }
            } else {
                std::thread::sleep(Duration::from_millis(2));
                for k in 0..8 {
                    p.extend(frame(RST_STREAM, 0, id + 2 * k, &8u32.to_be_bytes()));
                }
                id += 16;
            }
            (id < 20_000).then_some(p)
        })
    });
    seen.assert_calmed("rapid_reset_of_accepted_streams_gets_enhance_your_calm");
    let log = b.s.wait_log(
        "logs/error.log",
        "client reset too many streams",
        Duration::from_secs(5),
    );
    assert!(log.contains("client reset too many streams"), "{log}");
}

#[test]
fn continuation_flood_gets_enhance_your_calm() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let b = start("");
    let seen = b.attack("CONTINUATION flood", Duration::from_secs(2), |port| {
        let s = open(port, &[]);
        let mut first = true;
        run_attack(s, Duration::from_secs(5), move || {
            if first {
                first = false;
                return Some(frame(HEADERS, 0, 1, &get_block("/")));
            }
            // Each CONTINUATION adds a header field (literal, new name).
            let mut p = Vec::new();
            for i in 0..100 {
                let field = format!("x-{i:05}");
                let mut block = vec![0x00, field.len() as u8];
                block.extend_from_slice(field.as_bytes());
                block.push(100);
                block.extend_from_slice(&[b'v'; 100]);
                p.extend(frame(CONTINUATION, 0, 1, &block));
            }
            Some(p)
        })
    });
    seen.assert_calmed("continuation_flood_gets_enhance_your_calm");
}

#[test]
fn hpack_bomb_is_refused_without_decoding_it_whole() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let b = start("");
    let seen = b.attack("HPACK bomb", Duration::from_secs(2), |port| {
        let s = open(port, &[]);
        let mut id = 1u32;
        run_attack(s, Duration::from_secs(3), move || {
            // A 4000-byte value into the dynamic table (literal with
            // incremental indexing, new name), then 4000 one-byte
            // references to it: 16 MB decoded from 8 KB sent.
            let mut block = get_block("/index.html");
            block.extend_from_slice(&[0x40, 1, b'x', 0x7f]);
            let mut len = Vec::new();
            let mut n = 4000 - 127;
            while n >= 128 {
                len.push((n % 128) as u8 | 0x80);
                n /= 128;
            }
            len.push(n as u8);
            block.extend_from_slice(&len);
            block.extend_from_slice(&[b'a'; 4000]);
            block.extend(std::iter::repeat_n(0xbe, 4000));
            let mut p = Vec::new();
            // In 16 KB frames: HEADERS then CONTINUATION.
            let mut chunks = block.chunks(16_000).peekable();
            let mut kind = HEADERS;
            while let Some(c) = chunks.next() {
                let flags = if chunks.peek().is_none() {
                    END_HEADERS | END_STREAM
                } else {
                    0
                };
                p.extend(frame(kind, flags, id, c));
                kind = CONTINUATION;
            }
            id += 2;
            (id < 400).then_some(p)
        })
    });
    // No stream was answered 200 (`:status 200` is HPACK index 8, 0x88).
    assert!(
        !seen.statuses().iter().any(|(_, s)| *s == 0x88),
        "{:?}",
        seen.statuses()
    );
    assert!(seen.goaway().is_some() || seen.count(RST_STREAM) > 0 || !seen.statuses().is_empty());
}

/// A flood of `unit` frames: GOAWAY ENHANCE_YOUR_CALM (and, when
/// `ours`, porter's "http2 flood detected" rather than h2's own limit).
fn flood(name: &str, unit: Vec<u8>, opening: Vec<u8>, ours: bool) {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let b = start("");
    let seen = b.attack(name, Duration::from_secs(2), |port| {
        let s = open(port, &[]);
        let mut first = Some(opening.clone());
        let unit = unit.clone();
        run_attack(s, Duration::from_secs(5), move || {
            if let Some(o) = first.take() {
                return Some(o);
            }
            Some(unit.repeat(500))
        })
    });
    seen.assert_calmed(name);
    if ours {
        let log = b.s.wait_log(
            "logs/error.log",
            "http2 flood detected",
            Duration::from_secs(5),
        );
        assert!(log.contains("http2 flood detected"), "{log}");
    }
}

#[test]
fn settings_flood_gets_enhance_your_calm() {
    flood("SETTINGS flood", settings(&[(3, 100)]), Vec::new(), true);
}

#[test]
fn ping_flood_gets_enhance_your_calm() {
    flood("PING flood", frame(PING, 0, 0, &[1; 8]), Vec::new(), true);
}

#[test]
fn empty_data_frame_flood_gets_enhance_your_calm() {
    let mut post = vec![0x83, 0x86, 0x04, 5];
    post.extend_from_slice(b"/post");
    post.extend_from_slice(&[0x01, 9]);
    post.extend_from_slice(b"localhost");
    flood(
        "empty DATA flood",
        frame(DATA, 0, 1, &[]),
        frame(HEADERS, END_HEADERS, 1, &post),
        false,
    );
}

#[test]
fn zero_window_stall_ends_at_send_timeout() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let b = start("send_timeout 1s;");
    // SETTINGS_INITIAL_WINDOW_SIZE 0: no stream may send a byte of DATA.
    let seen = b.attack("zero window", Duration::from_secs(3), |port| {
        let s = open(port, &[(4, 0)]);
        let mut sent = false;
        run_attack(s, Duration::from_secs(3), move || {
            if sent {
                std::thread::sleep(Duration::from_millis(50));
                return Some(Vec::new());
            }
            sent = true;
            let mut p = Vec::new();
            for k in 0..100u32 {
                p.extend(frame(
                    HEADERS,
                    END_STREAM | END_HEADERS,
                    1 + 2 * k,
                    &get_block("/big.bin"),
                ));
            }
            Some(p)
        })
    });
    // The heads went out; the bodies could not; after send_timeout the
    // streams were reset, none left hanging.
    assert_eq!(seen.count(HEADERS), 100);
    assert_eq!(seen.count(DATA), 0);
    assert_eq!(seen.count(RST_STREAM), 100, "{:?}", seen.count(RST_STREAM));
    let log = b.s.wait_log(
        "logs/error.log",
        "client timed out (110: Connection timed out) while sending response to client",
        Duration::from_secs(2),
    );
    assert!(log.contains("while sending response to client"), "{log}");
}

#[test]
fn stream_ids_only_grow_and_keepalive_requests_ends_a_connection() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let b = start("keepalive_requests 50;");
    // The last stream ID, then a lower one: a protocol error.
    let mut s = open(b.s.port, &[]);
    let mut p = frame(
        HEADERS,
        END_STREAM | END_HEADERS,
        0x7fff_ffff,
        &get_block("/index.html"),
    );
    p.extend(frame(
        HEADERS,
        END_STREAM | END_HEADERS,
        5,
        &get_block("/index.html"),
    ));
    s.write_all(&p).unwrap();
    let seen = read_frames(s, Duration::from_secs(3));
    assert_eq!(seen.goaway(), Some(1), "PROTOCOL_ERROR expected: {seen:?}");
    assert!(seen.closed);
    // Streams beyond keepalive_requests: GOAWAY NO_ERROR after 50, and
    // the connection ends once they are answered (within h2's wait for a
    // PING acknowledgement this client never sends, and porter's 5 s
    // grace).
    let seen = b.attack("stream count", Duration::from_millis(500), |port| {
        let s = open(port, &[]);
        let mut id = 1u32;
        run_attack(s, Duration::from_secs(8), move || {
            let p = frame(
                HEADERS,
                END_STREAM | END_HEADERS,
                id,
                &get_block("/index.html"),
            );
            id += 2;
            std::thread::sleep(Duration::from_millis(1));
            (id < 400).then_some(p)
        })
    });
    assert_eq!(seen.goaway(), Some(0), "{:?}", seen.goaway());
    assert!(seen.closed);
    let answered = seen.statuses().len();
    assert!((50..=60).contains(&answered), "{answered} streams answered");
}

#[test]
fn streams_beyond_max_concurrent_streams_are_refused() {
    // Four streams stay open (the client's window is zero, so their 4 MiB
    // bodies cannot go out); the fifth and sixth get RST_STREAM
    // REFUSED_STREAM, and the connection stays up.
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let b = start("http2_max_concurrent_streams 4;");
    let mut s = open(b.s.port, &[(4, 0)]);
    // Acknowledge the server's SETTINGS, so that its limit applies.
    let mut p = frame(SETTINGS, 1, 0, &[]);
    for k in 0..6u32 {
        p.extend(frame(
            HEADERS,
            END_STREAM | END_HEADERS,
            1 + 2 * k,
            &get_block("/big.bin"),
        ));
    }
    s.write_all(&p).unwrap();
    let seen = read_frames(s, Duration::from_secs(2));
    const REFUSED_STREAM: u32 = 7;
    let mut resets: Vec<(u32, u32)> = seen
        .frames
        .iter()
        .filter(|f| f.kind == RST_STREAM)
        .map(|f| {
            (
                f.stream,
                u32::from_be_bytes(f.payload[..4].try_into().unwrap()),
            )
        })
        .collect();
    resets.sort();
    assert_eq!(
        resets,
        vec![(9, REFUSED_STREAM), (11, REFUSED_STREAM)],
        "{seen:?}"
    );
    let mut answered: Vec<u32> = seen.statuses().iter().map(|(id, _)| *id).collect();
    answered.sort();
    assert_eq!(answered, vec![1, 3, 5, 7]);
    assert!(!seen.closed);
    assert_eq!(seen.goaway(), None);
}
