//! TLS 1.3 early data (0-RTT) over TCP with `ssl_early_data on`, sent by a
//! real client (OpenSSL's `s_client -sess_in … -early_data`) to porter and
//! to Debian's nginx on the same server block: the GET in early data is
//! answered before the handshake finishes with `$ssl_early_data` `1`, as
//! nginx answers it; a POST in early data gets porter's 425 (nginx serves
//! it and leaves the check to the config); without `ssl_early_data` the
//! session allows no early data. HTTP/2 in early data is sent by a
//! rustls client that never sends its Finished, so the server is still in
//! early data when it answers (s_client's Finished races the answer).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection};

use crate::common::tls::{self as t, Alg, Ca, ClientOpts};
use crate::common::{Nginx, Server, TempDir};

/// The server block for porter and nginx (`{PORT}`, certificates in `dir`).
fn server_block(dir: &Path, early: &str) -> String {
    let d = dir.display();
    format!(
        "server {{ listen 127.0.0.1:{{PORT}} ssl http2; server_name localhost;\n\
           ssl_protocols TLSv1.3; {early}\n\
           ssl_certificate {d}/cert.crt; ssl_certificate_key {d}/cert.key;\n\
           location / {{ return 200 \"early=$ssl_early_data proto=$ssl_protocol\\n\"; }} }}\n"
    )
}

/// Runs `openssl s_client` to `port`: with `sess_out` it saves the
/// session after a first request; with `early` it resumes `sess` and sends
/// `early` as early data. Its output.
fn s_client(port: u16, sess: &Path, early: Option<&str>, dir: &Path) -> String {
    let mut cmd = Command::new("openssl");
    cmd.args(["s_client", "-connect", &format!("127.0.0.1:{port}")])
        .args(["-servername", "localhost", "-tls1_3", "-ign_eof"]);
    let input = match early {
        Some(req) => {
            let f = dir.join("early.txt");
            std::fs::write(&f, req).unwrap();
            cmd.arg("-sess_in").arg(sess).arg("-early_data").arg(f);
            String::new()
        }
        None => {
            cmd.arg("-sess_out").arg(sess);
            "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".to_string()
        }
    };
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("openssl");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        let _ = stdin.write_all(input.as_bytes());
        // Left open a moment: s_client reads the answer until the server
        // closes (`Connection: close`).
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let out = child.wait_with_output().unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

const GET: &str = "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
const POST: &str =
    "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/// Saves a session from `port`, then sends `req` in early data with it.
fn resume_with(port: u16, req: &str, tmp: &TempDir, tag: &str) -> String {
    let sess = tmp.path().join(format!("{tag}.sess"));
    let first = s_client(port, &sess, None, tmp.path());
    assert!(first.contains("early= proto=TLSv1.3"), "{first}");
    s_client(port, &sess, Some(req), tmp.path())
}

fn porter(certs: &TempDir, early: &str) -> Server {
    let conf = format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\nevents {{ worker_connections 64; }}\n\
         http {{\n  access_log off;\n{}}}\n",
        server_block(certs.path(), early)
    );
    Server::start_in(TempDir::new("early-p"), &conf, &[])
}

#[test]
fn a_get_in_early_data_is_served_before_the_handshake_ends_as_nginx_serves_it() {
    let ca = Ca::new();
    let certs = TempDir::new("early-c");
    ca.leaf(&["localhost"], Alg::Ecdsa)
        .write(certs.path(), "cert");
    let s = porter(&certs, "ssl_early_data on;");
    let tmp = TempDir::new("early-s");

    let got = resume_with(s.port, GET, &tmp, "p");
    assert!(got.contains("Early data was accepted"), "{got}");
    assert!(
        got.contains("early=1 proto=TLSv1.3"),
        "{got}\n{}",
        s.read("logs/error.log")
    );
    let post = resume_with(s.port, POST, &tmp, "p2");
    assert!(post.contains("HTTP/1.1 425 "), "{post}");
    let log = s.wait_log(
        "logs/error.log",
        "request in TLS early data",
        Duration::from_secs(5),
    );
    assert!(
        log.contains("client sent \"POST\" request in TLS early data"),
        "{log}"
    );

    if let Some(n) = Nginx::start(&server_block(certs.path(), "ssl_early_data on;")) {
        let theirs = resume_with(n.port, GET, &tmp, "n");
        assert!(theirs.contains("early=1 proto=TLSv1.3"), "nginx: {theirs}");
        let body = |t: &str| {
            t.lines()
                .find(|l| l.starts_with("early="))
                .map(str::to_string)
        };
        assert_eq!(body(&got), body(&theirs));
    } else {
        eprintln!("nginx not installed: porter's answers checked alone");
    }
}

#[test]
fn without_ssl_early_data_early_data_is_refused() {
    let ca = Ca::new();
    let certs = TempDir::new("early-c");
    ca.leaf(&["localhost"], Alg::Ecdsa)
        .write(certs.path(), "cert");
    let s = porter(&certs, "client_header_timeout 1s;");
    let tmp = TempDir::new("early-s");
    let got = resume_with(s.port, GET, &tmp, "p");
    // The session allows none (its ticket says 0), so none is sent.
    assert!(got.contains("Max Early Data: 0"), "{got}");
    assert!(got.contains("Early data was not sent"), "{got}");
    assert!(!got.contains("early=1"), "{got}");
}

/// An HTTP/2 connection's first bytes asking `method /` (stream 1, no
/// body): the preface, an empty SETTINGS and a HEADERS frame of static-table
/// indices and one literal (`:authority localhost`), as HPACK encodes them.
fn h2_request(method: &str) -> Vec<u8> {
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    // :method GET (2) or POST (3), :scheme https (7), :path / (4), then
    // :authority as a literal with indexing of name 1.
    let mut block = vec![if method == "GET" { 0x82 } else { 0x83 }, 0x87, 0x84];
    block.extend_from_slice(&[0x41, 9]);
    block.extend_from_slice(b"localhost");
    // END_STREAM | END_HEADERS on stream 1.
    out.extend_from_slice(&[0, 0, block.len() as u8, 1, 5, 0, 0, 0, 1]);
    out.extend_from_slice(&block);
    out
}

/// The `:status` a HEADERS block starts with: a static-table index, or a
/// literal of name 8 whose three digits are plain or Huffman-coded
/// (HPACK's codes for `0`-`9`: five bits for 0-2, six for 3-9).
fn h2_status(block: &[u8]) -> Option<u16> {
    const INDEXED: [u16; 7] = [200, 204, 206, 304, 400, 404, 500];
    let b = *block.first()?;
    if (0x88..=0x8e).contains(&b) {
        return Some(INDEXED[(b - 0x88) as usize]);
    }
    if b != 0x48 && b != 0x08 && b != 0x18 {
        return None;
    }
    let (huffman, len) = (block[1] & 0x80 != 0, (block[1] & 0x7f) as usize);
    let value = block.get(2..2 + len)?;
    if !huffman {
        return std::str::from_utf8(value).ok()?.parse().ok();
    }
    let bits: String = value.iter().map(|b| format!("{b:08b}")).collect();
    let (mut digits, mut at) = (String::new(), 0);
    while digits.len() < 3 {
        let five = u8::from_str_radix(bits.get(at..at + 5)?, 2).ok()?;
        if five <= 2 {
            digits.push((b'0' + five) as char);
            at += 5;
        } else {
            let six = u8::from_str_radix(bits.get(at..at + 6)?, 2).ok()?;
            digits.push((b'3' + six - 0x19) as char);
            at += 6;
        }
    }
    digits.parse().ok()
}

/// The `:status` and DATA of stream 1 in `frames` (whole frames only),
/// and whether it ended (END_STREAM).
fn stream1_data(frames: &[u8]) -> (Option<u16>, Vec<u8>, bool) {
    let (mut status, mut data, mut ended, mut at) = (None, Vec::new(), false, 0);
    while frames.len() >= at + 9 {
        let f = &frames[at..];
        let len = (f[0] as usize) << 16 | (f[1] as usize) << 8 | f[2] as usize;
        if f.len() < 9 + len {
            break;
        }
        let stream = u32::from_be_bytes([f[5], f[6], f[7], f[8]]) & 0x7fff_ffff;
        if stream == 1 && f[3] == 0 {
            data.extend_from_slice(&f[9..9 + len]);
        }
        if stream == 1 && f[3] == 1 {
            status = h2_status(&f[9..9 + len]);
        }
        if stream == 1 && f[4] & 1 != 0 {
            ended = true;
        }
        at += 9 + len;
    }
    (status, data, ended)
}

/// Reads plaintext from `conn` over `sock` until stream 1 ends. With
/// `finish` false it writes nothing more: after early data the client's
/// Finished stays queued, so the server answers while the handshake is
/// still going.
fn read_stream1(
    conn: &mut ClientConnection,
    sock: &mut TcpStream,
    finish: bool,
) -> (Option<u16>, Vec<u8>) {
    let mut plain = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        match conn.read_tls(sock) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => panic!("read: {e}"),
        }
        conn.process_new_packets().expect("TLS from the server");
        while finish && conn.wants_write() {
            conn.write_tls(sock).unwrap();
        }
        let mut chunk = [0u8; 16384];
        while let Ok(n) = conn.reader().read(&mut chunk) {
            if n == 0 {
                break;
            }
            plain.extend_from_slice(&chunk[..n]);
        }
        let (status, data, ended) = stream1_data(&plain);
        if ended {
            return (status, data);
        }
    }
    panic!("no end of stream 1: {:?}", String::from_utf8_lossy(&plain));
}

/// A client offering `h2` that keeps sessions and sends early data.
fn h2_client(ca: &Ca) -> Arc<ClientConfig> {
    let mut cfg = (*t::client(ca, ClientOpts::default())).clone();
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    cfg.enable_early_data = true;
    Arc::new(cfg)
}

/// Makes a session with `port` over HTTP/2 (a full handshake and a GET),
/// then resumes it sending `method /` as early data: the status and body
/// of the answer.
fn h2_in_early_data(port: u16, cfg: &Arc<ClientConfig>, method: &str) -> (Option<u16>, String) {
    let name = || ServerName::try_from("localhost").unwrap();
    let mut sock = TcpStream::connect(("127.0.0.1", port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut first = ClientConnection::new(cfg.clone(), name()).unwrap();
    first.writer().write_all(&h2_request("GET")).unwrap();
    while first.wants_write() {
        first.write_tls(&mut sock).unwrap();
    }
    // The session ticket comes after the handshake, before the response.
    let (status, full) = read_stream1(&mut first, &mut sock, true);
    assert_eq!(status, Some(200));
    assert_eq!(full, b"early= proto=TLSv1.3\n");
    drop(sock);

    let mut sock = TcpStream::connect(("127.0.0.1", port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut conn = ClientConnection::new(cfg.clone(), name()).unwrap();
    conn.early_data()
        .expect("the session allows early data")
        .write_all(&h2_request(method))
        .unwrap();
    while conn.wants_write() {
        conn.write_tls(&mut sock).unwrap();
    }
    let (status, body) = read_stream1(&mut conn, &mut sock, false);
    assert!(conn.is_early_data_accepted(), "early data refused");
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// HTTP/2 in early data (ALPN `h2` in the resumed session), the handshake
/// not finished: the GET is answered with `$ssl_early_data` `1` as nginx
/// answers it; a POST gets porter's 425 and its log line.
#[test]
fn http2_in_early_data_is_served_as_nginx_serves_it() {
    let ca = Ca::new();
    let certs = TempDir::new("early-c");
    ca.leaf(&["localhost"], Alg::Ecdsa)
        .write(certs.path(), "cert");
    let s = porter(&certs, "ssl_early_data on;");
    let cfg = h2_client(&ca);
    let got = h2_in_early_data(s.port, &cfg, "GET");
    assert_eq!(
        got,
        (Some(200), "early=1 proto=TLSv1.3\n".to_string()),
        "{}",
        s.read("logs/error.log")
    );
    let (post, _) = h2_in_early_data(s.port, &cfg, "POST");
    assert_eq!(post, Some(425));
    let log = s.wait_log(
        "logs/error.log",
        "request in TLS early data",
        Duration::from_secs(5),
    );
    assert!(
        log.contains("client sent \"POST\" request in TLS early data"),
        "{log}"
    );
    if let Some(n) = Nginx::start(&server_block(certs.path(), "ssl_early_data on;")) {
        let theirs = h2_in_early_data(n.port, &h2_client(&ca), "GET");
        assert_eq!(theirs, got, "nginx");
    } else {
        eprintln!("nginx not installed: porter's answers checked alone");
    }
}
