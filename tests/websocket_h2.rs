//! WebSocket over HTTP/2 (RFC 8441 extended CONNECT), against the real
//! binary on loopback: an `h2` client opens a `:protocol websocket`
//! stream to an h2c `http2 on` server whose location is the standard
//! WebSocket `proxy_pass`; porter asks the upstream (Python's
//! `websockets` echo server, Debian's `python3-websockets`, as in
//! tests/websocket.rs; skipped without it unless
//! `PORTER_REQUIRE_WEBSOCKETS=1`) for an HTTP/1.1 upgrade and carries the
//! tunnel in the stream's DATA frames. NGINX has no WebSocket over HTTP/2,
//! so nothing here runs beside it (docs/differences.md).

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::common::h2client::{self as c, rt};
use crate::common::{one_server_conf, support, Server};
use bytes::Bytes;
use h2::client::SendRequest;
use h2::{RecvStream, SendStream};

const PYTHON: &str = "/usr/bin/python3";

/// Whether Python's `websockets` is there; `false` means skip.
fn have_websockets() -> bool {
    let ok = Command::new(PYTHON)
        .args(["-c", "import websockets"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("PORTER_REQUIRE_WEBSOCKETS").is_none(),
            "python3-websockets is required (PORTER_REQUIRE_WEBSOCKETS)"
        );
        eprintln!("skipped: no python3-websockets (apt-get install python3-websockets)");
    }
    ok
}

/// The echo server (`ws_echo.py`), stopped by PID on drop.
struct Echo {
    child: Child,
    port: u16,
}

impl Echo {
    fn start() -> Echo {
        let port = common::free_port();
        let mut child = Command::new(PYTHON)
            .arg(support("ws_echo.py"))
            .arg(port.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready", "echo server did not start");
        Echo { child, port }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// porter with `http2 on` (h2c) and the standard WebSocket location to
/// `upstream`; the access log gives status and bytes.
fn porter(upstream: u16) -> Server {
    let body = format!(
        "    http2 on;\n    location / {{\n      proxy_pass http://127.0.0.1:{upstream};\n      \
         proxy_http_version 1.1;\n      proxy_set_header Upgrade $http_upgrade;\n      \
         proxy_set_header Connection $connection_upgrade;\n      proxy_read_timeout 10s;\n    }}"
    );
    let http = "  map $http_upgrade $connection_upgrade { default upgrade; '' close; }\n  \
                log_format ws '$request $status $bytes_sent $body_bytes_sent $http2';\n  \
                access_log {PREFIX}/logs/ws.log ws;";
    Server::start(&one_server_conf(http, &body))
}

/// A client frame (masked, as RFC 6455 requires of clients).
fn frame(opcode: u8, payload: &[u8]) -> Bytes {
    let mut f = vec![0x80 | opcode];
    let n = payload.len();
    if n < 126 {
        f.push(0x80 | n as u8);
    } else if n < 65536 {
        f.push(0x80 | 126);
        f.extend((n as u16).to_be_bytes());
    } else {
        f.push(0x80 | 127);
        f.extend((n as u64).to_be_bytes());
    }
    let mask = [0x37, 0xfa, 0x21, 0x3d];
    f.extend(mask);
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    Bytes::from(f)
}

/// One whole server frame at the start of `buf` (unmasked): its opcode,
/// payload and length.
fn parse(buf: &[u8]) -> Option<(u8, Vec<u8>, usize)> {
    if buf.len() < 2 {
        return None;
    }
    let (len, at) = match buf[1] & 0x7f {
        126 if buf.len() >= 4 => (u16::from_be_bytes([buf[2], buf[3]]) as usize, 4),
        127 if buf.len() >= 10 => (
            u64::from_be_bytes(buf[2..10].try_into().unwrap()) as usize,
            10,
        ),
        126 | 127 => return None,
        n => (n as usize, 2),
    };
    (buf.len() >= at + len).then(|| (buf[0] & 0x0f, buf[at..at + len].to_vec(), at + len))
}

/// The next server frame from the stream (`None`: the stream ended).
async fn next_frame(recv: &mut RecvStream, buf: &mut Vec<u8>) -> Option<(u8, Vec<u8>)> {
    loop {
        if let Some((op, payload, used)) = parse(buf) {
            buf.drain(..used);
            return Some((op, payload));
        }
        let data = tokio::time::timeout(Duration::from_secs(10), recv.data())
            .await
            .expect("no frame within 10 s")?
            .expect("stream failed");
        let _ = recv.flow_control().release_capacity(data.len());
        buf.extend_from_slice(&data);
    }
}

/// Opens a WebSocket stream to `path`: the response's status and headers,
/// and the stream's two halves.
async fn open(
    send: &SendRequest<Bytes>,
    path: &str,
) -> (http::response::Parts, SendStream<Bytes>, RecvStream) {
    let mut req = http::Request::builder()
        .method("CONNECT")
        .uri(format!("http://localhost{path}"))
        .header("sec-websocket-version", "13")
        .body(())
        .unwrap();
    req.extensions_mut()
        .insert(h2::ext::Protocol::from_static("websocket"));
    let (resp, stream) = send.clone().send_request(req, false).unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(10), resp)
        .await
        .expect("no response")
        .expect("stream failed");
    let (parts, recv) = resp.into_parts();
    (parts, stream, recv)
}

#[test]
fn text_and_binary_messages_echo_both_ways_and_the_close_ends_the_stream() {
    if !have_websockets() {
        return;
    }
    let echo = Echo::start();
    let p = porter(echo.port);
    rt().block_on(async {
        let send = c::connect(p.port).await;
        let (head, mut out, mut recv) = open(&send, "/chat").await;
        // Known once the server's SETTINGS were read.
        assert!(send.is_extended_connect_protocol_enabled());
        assert_eq!(head.status, 200);
        assert!(head.headers.get("sec-websocket-accept").is_none());
        assert!(head.headers.get("upgrade").is_none());
        let mut buf = Vec::new();
        out.send_data(frame(1, b"hello over h2"), false).unwrap();
        let got = next_frame(&mut recv, &mut buf).await.unwrap();
        assert_eq!(got, (1, b"hello over h2".to_vec()));
        // Larger than the stream's first window both ways.
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        out.send_data(frame(2, &big), false).unwrap();
        let got = next_frame(&mut recv, &mut buf).await.unwrap();
        assert_eq!(got.0, 2);
        assert!(got.1 == big, "binary echo differs");
        out.send_data(frame(8, &1000u16.to_be_bytes()), false)
            .unwrap();
        let got = next_frame(&mut recv, &mut buf).await.unwrap();
        assert_eq!(got, (8, 1000u16.to_be_bytes().to_vec()));
        // The echo server closes its connection: the stream ends.
        assert!(next_frame(&mut recv, &mut buf).await.is_none());
        out.send_data(Bytes::new(), true).unwrap();
        // The connection stays until porter has read the END_STREAM.
        tokio::time::sleep(Duration::from_millis(300)).await;
    });
    let log = p.wait_log("logs/ws.log", " 200 ", Duration::from_secs(10));
    let line = log.lines().next().unwrap_or_default();
    let f: Vec<&str> = line.split(' ').collect();
    assert_eq!(f[..4], ["GET", "/chat", "HTTP/2.0", "200"], "{log}");
    let body: u64 = f[5].parse().unwrap();
    assert!(body >= 200_000 + 13 + 4, "{log}");
    assert_eq!(f[6], "h2c", "{log}");
}

/// An origin that switches protocols and reports, through the channel,
/// what it read after the head once its client side ended.
fn reporting_origin() -> (u16, mpsc::Receiver<Vec<u8>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && c.read(&mut b).unwrap_or(0) == 1 {
            head.push(b[0]);
        }
        let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
        assert!(text.contains("upgrade: websocket"), "{text}");
        assert!(text.contains("sec-websocket-key: "), "{text}");
        c.write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: x\r\n\r\nhi")
            .unwrap();
        let mut rest = Vec::new();
        let _ = c.read_to_end(&mut rest);
        let _ = tx.send(rest);
    });
    (port, rx)
}

#[test]
fn a_reset_stream_closes_the_upstream_connection() {
    let (origin, rx) = reporting_origin();
    let p = porter(origin);
    rt().block_on(async {
        let send = c::connect(p.port).await;
        let (head, mut out, mut recv) = open(&send, "/raw").await;
        assert_eq!(head.status, 200);
        let hi = recv.data().await.unwrap().unwrap();
        assert_eq!(&hi[..], b"hi");
        out.send_data(Bytes::from_static(b"abc"), false).unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        out.send_reset(h2::Reason::CANCEL);
        tokio::time::sleep(Duration::from_millis(100)).await;
    });
    let rest = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the upstream connection stayed open after the reset");
    assert_eq!(rest, b"abc");
}
