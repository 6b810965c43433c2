//! An HTTP/2 client for the tests: the `h2` crate over plain TCP (h2c with
//! prior knowledge), on a current-thread tokio runtime, and the outside
//! clients (`curl --http2`, `nghttp`) run as commands.

use std::process::Command;

use bytes::Bytes;
use h2::client::SendRequest;
use tokio::net::TcpStream;

/// A runtime for one test.
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A response as the client got it.
pub struct H2Resp {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

impl H2Resp {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Opens an h2c connection to `port` with `builder`'s settings; the
/// connection is driven by a task on the current runtime.
pub async fn connect_with(port: u16, builder: h2::client::Builder) -> SendRequest<Bytes> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let _ = tcp.set_nodelay(true);
    let (send, conn) = builder.handshake(tcp).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send.ready().await.unwrap()
}

/// Opens an h2c connection to `port`.
pub async fn connect(port: u16) -> SendRequest<Bytes> {
    connect_with(port, h2::client::Builder::new()).await
}

/// Sends a request (`headers` as name/value pairs) and reads the whole
/// response; `Err` when the stream or connection failed.
pub async fn request(
    send: &SendRequest<Bytes>,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> Result<H2Resp, h2::Error> {
    let mut req = http::Request::builder()
        .method(method)
        .uri(format!("http://localhost{path}"));
    for (n, v) in headers {
        req = req.header(*n, *v);
    }
    let req = req.body(()).unwrap();
    let mut send = send.clone().ready().await?;
    let (resp, mut stream) = send.send_request(req, body.is_none())?;
    if let Some(b) = body {
        stream.send_data(Bytes::from(b), true)?;
    }
    let resp = resp.await?;
    let (parts, mut recv) = resp.into_parts();
    let mut out = Vec::new();
    while let Some(d) = recv.data().await {
        let d = d?;
        let _ = recv.flow_control().release_capacity(d.len());
        out.extend_from_slice(&d);
    }
    Ok(H2Resp {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body: out,
    })
}

/// GET `path`.
pub async fn get(send: &SendRequest<Bytes>, path: &str) -> H2Resp {
    request(send, "GET", path, &[], None).await.unwrap()
}

/// `curl` with `args`: (stdout, stderr, success).
pub fn curl(args: &[&str]) -> (Vec<u8>, String, bool) {
    let out = Command::new("curl")
        .args(["-s", "-S", "--max-time", "20"])
        .args(args)
        .output()
        .expect("curl");
    (
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.success(),
    )
}

/// `nghttp` with `args`: (stdout, success).
pub fn nghttp(args: &[&str]) -> (String, bool) {
    let out = Command::new("nghttp")
        .args(["-t", "20"])
        .args(args)
        .output()
        .expect("nghttp");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.success(),
    )
}
