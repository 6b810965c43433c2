//! 0-RTT over QUIC (`ssl_early_data`): a real client (quinn + h3 with
//! rustls's session resumption and early data) connects once, takes the
//! session ticket, and sends its next requests in 0-RTT on a resumed
//! connection. With `ssl_early_data on` porter serves the safe ones
//! (proxied with `Early-Data: 1`, `$ssl_early_data` `1`) and answers the
//! others 425; requests after the handshake are ordinary. Off (the
//! default) the server's tickets allow no early data at all. The access
//! log shows `$ssl_cipher`, `$ssl_curve` and `$ssl_session_reused` of
//! the QUIC connections.
//!
//! The resumed connection goes through a relay that holds the server's
//! datagrams back for a while, so the client's Finished comes well after
//! its early requests were read, whatever the scheduling.

use std::collections::VecDeque;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::common::h3client::{build, exchange, H3Resp, Sender};
use crate::common::origin::{Origin, Reply};
use crate::common::tls::{Alg, Ca};
use crate::common::{Server, TempDir};
use bytes::Bytes;

/// How long the relay holds each datagram from the server.
const HOLD: Duration = Duration::from_millis(300);

/// A UDP relay on loopback: the client's datagrams go on to the server at
/// once, the server's come back after [`HOLD`].
struct Relay {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Relay {
    fn start(server: u16) -> Relay {
        let front = UdpSocket::bind("127.0.0.1:0").unwrap();
        let back = UdpSocket::bind("127.0.0.1:0").unwrap();
        back.connect(("127.0.0.1", server)).unwrap();
        front.set_nonblocking(true).unwrap();
        back.set_nonblocking(true).unwrap();
        let port = front.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let halt = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut buf = vec![0u8; 65536];
            let mut client: Option<SocketAddr> = None;
            let mut held: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
            while !halt.load(Ordering::Relaxed) {
                while let Ok((n, from)) = front.recv_from(&mut buf) {
                    client = Some(from);
                    let _ = back.send(&buf[..n]);
                }
                while let Ok(n) = back.recv(&mut buf) {
                    held.push_back((Instant::now() + HOLD, buf[..n].to_vec()));
                }
                while held.front().is_some_and(|(t, _)| *t <= Instant::now()) {
                    let (_, d) = held.pop_front().unwrap();
                    if let Some(c) = client {
                        let _ = front.send_to(&d, c);
                    }
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        });
        Relay {
            port,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Client TLS that resumes sessions and sends early data.
fn client_config(ca: &Ca) -> quinn::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut c = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    c.alpn_protocols = vec![b"h3".to_vec()];
    c.enable_early_data = true;
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(c).unwrap();
    quinn::ClientConfig::new(Arc::new(quic))
}

/// HTTP/3 over `conn` (its driver a task of the runtime).
async fn h3_over(conn: quinn::Connection) -> Sender {
    let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn))
        .await
        .unwrap();
    tokio::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    send
}

async fn ask(send: &Sender, method: &str, path: &str, body: &[u8]) -> H3Resp {
    let headers: Vec<(&str, String)> = if body.is_empty() {
        Vec::new()
    } else {
        vec![("content-length", body.len().to_string())]
    };
    let h: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let req = build(method, path, &h);
    exchange(send.clone(), req, Bytes::copy_from_slice(body))
        .await
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}

/// A server on `{PORT}` over TLS and QUIC with `extra` in it, proxying
/// `/api/` to an origin that echoes the method, the target and the
/// `Early-Data` field it got.
fn start(ca: &Ca, extra: &str) -> (Server, Origin) {
    let origin = Origin::start(|req| {
        let early = req.header("early-data").unwrap_or("-").to_string();
        Reply::ok(format!("{} {} early={early}", req.method, req.target).as_bytes())
    });
    let dir = TempDir::new("h3early");
    ca.leaf(&["localhost"], Alg::Ecdsa)
        .write(dir.path(), "cert");
    dir.write("html/small.txt", "hello over quic\n");
    let conf = format!(
        "daemon off;\nworker_processes 2;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\nevents {{ worker_connections 256; }}\n\
         http {{\n  default_type text/plain;\n\
           log_format tls '$request $status \"$ssl_early_data\" $ssl_session_reused $ssl_protocol $ssl_cipher $ssl_curve';\n\
           access_log {{PREFIX}}/logs/access.log tls;\n\
           server {{\n    listen 127.0.0.1:{{PORT}} ssl;\n    listen 127.0.0.1:{{PORT}} quic reuseport;\n\
             server_name localhost;\n\
             ssl_certificate {{PREFIX}}/cert.crt; ssl_certificate_key {{PREFIX}}/cert.key;\n\
             root {{PREFIX}}/html;\n{extra}\n\
             location /api/ {{ proxy_pass http://127.0.0.1:{}; }}\n  }}\n}}\n",
        origin.port
    );
    (Server::start_in(dir, &conf, &[]), origin)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A first, full handshake on `ep` to `port`: one GET, then the session
/// ticket is in the client's store.
async fn first_visit(ep: &quinn::Endpoint, port: u16) {
    let to: SocketAddr = ([127, 0, 0, 1], port).into();
    let conn = ep.connect(to, "localhost").unwrap().await.unwrap();
    let send = h3_over(conn.clone()).await;
    let r = ask(&send, "GET", "/small.txt", b"").await;
    assert_eq!(r.status, 200);
    // The tickets come just after the handshake; give them a moment.
    tokio::time::sleep(Duration::from_millis(100)).await;
    conn.close(0u32.into(), b"");
}

#[test]
fn early_data_on_serves_safe_requests_from_0rtt_and_answers_425_to_others() {
    let ca = Ca::new();
    let (s, origin) = start(&ca, "ssl_early_data on;");
    let relay = Relay::start(s.port);
    runtime().block_on(async {
        let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        ep.set_default_client_config(client_config(&ca));
        first_visit(&ep, s.port).await;

        let to: SocketAddr = ([127, 0, 0, 1], relay.port).into();
        let connecting = ep.connect(to, "localhost").unwrap();
        let Ok((conn, accepted)) = connecting.into_0rtt() else {
            panic!("the client holds no ticket that allows early data")
        };
        // Both go out in 0-RTT packets, before the handshake is done.
        let send = h3_over(conn.clone()).await;
        let (get, post) = tokio::join!(
            ask(&send, "GET", "/api/early?a=1", b""),
            ask(&send, "POST", "/api/early-post", b"body"),
        );
        assert!(accepted.await, "the server rejected 0-RTT");
        assert_eq!(get.status, 200, "{}", s.read("logs/error.log"));
        assert_eq!(get.text(), "GET /api/early?a=1 early=1");
        assert_eq!(post.status, 425);

        // After the handshake: ordinary requests, the POST served.
        let post = ask(&send, "POST", "/api/late-post", b"body").await;
        assert_eq!(post.status, 200);
        assert_eq!(post.text(), "POST /api/late-post early=-");
        let get = ask(&send, "GET", "/small.txt", b"").await;
        assert_eq!(get.text(), "hello over quic\n");
        conn.close(0u32.into(), b"");
    });
    // The POST in early data never reached the origin.
    let targets: Vec<String> = origin.requests().iter().map(|r| r.target.clone()).collect();
    assert_eq!(targets, ["/api/early?a=1", "/api/late-post"]);

    let log = s.wait_log(
        "logs/access.log",
        "GET /small.txt HTTP/3.0 200 \"-\" r",
        Duration::from_secs(5),
    );
    // rustls's client offers AES-256-GCM first; OpenSSL's name of the group.
    let suite = "TLSv1.3 TLS_AES_256_GCM_SHA384 X25519";
    for line in [
        format!("GET /small.txt HTTP/3.0 200 \"-\" . {suite}"),
        format!("GET /api/early?a=1 HTTP/3.0 200 \"1\" r {suite}"),
        format!("POST /api/early-post HTTP/3.0 425 \"1\" r {suite}"),
        format!("POST /api/late-post HTTP/3.0 200 \"-\" r {suite}"),
        format!("GET /small.txt HTTP/3.0 200 \"-\" r {suite}"),
    ] {
        assert!(log.contains(&line), "no line {line:?} in\n{log}");
    }
    let errors = s.read("logs/error.log");
    assert!(
        errors.contains(
            "client sent \"POST\" request in TLS early data while reading client request headers"
        ),
        "{errors}"
    );
}

#[test]
fn without_ssl_early_data_the_tickets_allow_no_0rtt() {
    let ca = Ca::new();
    let (s, _origin) = start(&ca, "");
    runtime().block_on(async {
        let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        ep.set_default_client_config(client_config(&ca));
        first_visit(&ep, s.port).await;
        let to: SocketAddr = ([127, 0, 0, 1], s.port).into();
        let connecting = ep.connect(to, "localhost").unwrap();
        let connecting = match connecting.into_0rtt() {
            Ok(_) => panic!("0-RTT offered with ssl_early_data off"),
            Err(c) => c,
        };
        // The session still resumes, in a full round trip.
        let conn = connecting.await.unwrap();
        let send = h3_over(conn.clone()).await;
        let r = ask(&send, "POST", "/api/p", b"x").await;
        assert_eq!(r.text(), "POST /api/p early=-");
        conn.close(0u32.into(), b"");
    });
    let log = s.wait_log("logs/access.log", "POST /api/p", Duration::from_secs(5));
    assert!(
        log.contains("POST /api/p HTTP/3.0 200 \"-\" r TLSv1.3"),
        "{log}"
    );
}
