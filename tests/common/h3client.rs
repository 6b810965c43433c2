//! A small HTTP/3 client for the tests: quinn + h3 (the crates porter
//! serves with, as the client side), TLS 1.3 trusting the test's CA.
//! Each connection runs on its own current-thread tokio runtime; requests
//! are blocking calls, or many at once with [`H3::get_many`].

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes};

use super::tls::Ca;

/// A response: status, fields, body.
#[derive(Debug)]
pub struct H3Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl H3Resp {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// An HTTP/3 client connection's request sender.
pub type Sender = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// One HTTP/3 connection.
pub struct H3 {
    rt: tokio::runtime::Runtime,
    send: Sender,
    conn: quinn::Connection,
    _endpoint: quinn::Endpoint,
}

/// The client TLS: TLS 1.3, ALPN `h3`, `ca` trusted.
pub fn tls(ca: &Ca) -> Arc<quinn::crypto::rustls::QuicClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut c = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    c.alpn_protocols = vec![b"h3".to_vec()];
    Arc::new(quinn::crypto::rustls::QuicClientConfig::try_from(c).unwrap())
}

/// The client TLS of [`tls`] presenting `cert` (mutual TLS).
pub fn tls_with_cert(
    ca: &Ca,
    cert: &super::tls::Leaf,
) -> Arc<quinn::crypto::rustls::QuicClientConfig> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der()).unwrap();
    let chain = vec![rustls::pki_types::CertificateDer::from(cert.der.clone())];
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(cert.key_pem.as_bytes()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut c = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .unwrap();
    c.alpn_protocols = vec![b"h3".to_vec()];
    Arc::new(quinn::crypto::rustls::QuicClientConfig::try_from(c).unwrap())
}

impl H3 {
    /// Connects to 127.0.0.1:`port` as `sni`.
    pub fn connect(port: u16, ca: &Ca, sni: &str) -> Result<H3, String> {
        H3::connect_with(port, tls(ca), sni)
    }

    /// Connects to 127.0.0.1:`port` as `sni` with the client TLS `tls`.
    pub fn connect_with(
        port: u16,
        tls: Arc<quinn::crypto::rustls::QuicClientConfig>,
        sni: &str,
    ) -> Result<H3, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (send, conn, endpoint) = rt.block_on(async move {
            let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap())
                .map_err(|e| e.to_string())?;
            let mut cfg = quinn::ClientConfig::new(tls);
            let mut t = quinn::TransportConfig::default();
            t.max_idle_timeout(Some(Duration::from_secs(20).try_into().unwrap()));
            cfg.transport_config(Arc::new(t));
            ep.set_default_client_config(cfg);
            let to: SocketAddr = ([127, 0, 0, 1], port).into();
            let connecting = ep.connect(to, sni).map_err(|e| e.to_string())?;
            let conn = tokio::time::timeout(Duration::from_secs(10), connecting)
                .await
                .map_err(|_| "handshake timed out".to_string())?
                .map_err(|e| e.to_string())?;
            let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(async move {
                let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
            });
            Ok::<_, String>((send, conn, ep))
        })?;
        Ok(H3 {
            rt,
            send,
            conn,
            _endpoint: endpoint,
        })
    }

    /// `method path` with `headers`, `body` sent after them.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<H3Resp, String> {
        let req = build(method, path, headers);
        let send = self.send.clone();
        let body = Bytes::copy_from_slice(body);
        self.rt.block_on(exchange(send, req, body))
    }

    /// `GET path`.
    pub fn get(&mut self, path: &str) -> H3Resp {
        self.request("GET", path, &[], b"").unwrap()
    }

    /// Many GETs at once on this connection (each its own stream).
    pub fn get_many(&mut self, paths: &[String]) -> Vec<Result<H3Resp, String>> {
        let send = self.send.clone();
        self.rt.block_on(async move {
            let tasks: Vec<_> = paths
                .iter()
                .map(|p| {
                    let req = build("GET", p, &[]);
                    tokio::spawn(exchange(send.clone(), req, Bytes::new()))
                })
                .collect();
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.unwrap());
            }
            out
        })
    }

    /// Moves the client to a new UDP socket (a new source port), as a NAT
    /// rebinding or a migration does.
    pub fn rebind(&mut self) {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let _guard = self.rt.enter();
        self._endpoint.rebind(s).unwrap();
    }

    /// How the connection was closed, waiting up to `wait` (the client's
    /// tasks run only while it waits).
    pub fn wait_closed(&self, wait: Duration) -> Option<quinn::ConnectionError> {
        let conn = self.conn.clone();
        self.rt
            .block_on(async move { tokio::time::timeout(wait, conn.closed()).await.ok() })
    }

    /// The QUIC connection's statistics and state.
    pub fn quic(&self) -> &quinn::Connection {
        &self.conn
    }
}

/// A request without its body.
pub fn build(method: &str, path: &str, headers: &[(&str, &str)]) -> http::Request<()> {
    let mut b = http::Request::builder()
        .method(method)
        .uri(format!("https://localhost{path}"));
    for (n, v) in headers {
        b = b.header(*n, *v);
    }
    b.body(()).unwrap()
}

/// Sends `req` and `body` on a new stream of `send`; the whole response.
pub async fn exchange(
    mut send: Sender,
    req: http::Request<()>,
    body: Bytes,
) -> Result<H3Resp, String> {
    let work = async move {
        let mut stream = send.send_request(req).await.map_err(|e| e.to_string())?;
        if !body.is_empty() {
            stream.send_data(body).await.map_err(|e| e.to_string())?;
        }
        stream.finish().await.map_err(|e| e.to_string())?;
        let resp = stream.recv_response().await.map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        while let Some(mut chunk) = stream.recv_data().await.map_err(|e| e.to_string())? {
            while chunk.has_remaining() {
                let c = chunk.chunk();
                out.extend_from_slice(c);
                let n = c.len();
                chunk.advance(n);
            }
        }
        Ok(H3Resp {
            status: resp.status().as_u16(),
            headers: resp
                .headers()
                .iter()
                .map(|(n, v)| {
                    (
                        n.as_str().to_string(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect(),
            body: out,
        })
    };
    match tokio::time::timeout(Duration::from_secs(30), work).await {
        Ok(r) => r,
        Err(_) => Err("request timed out".into()),
    }
}
