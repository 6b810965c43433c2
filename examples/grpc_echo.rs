//! A minimal gRPC unary echo upstream for `bench/grpc`: HTTP/2 with prior
//! knowledge (h2c) on `127.0.0.1:PORT`, each call's request frames sent
//! back as its response with `grpc-status: 0` in the trailers. Written
//! with the `h2` crate porter uses so that the upstream is not what a
//! req/s figure measures (Python's grpcio serves a few thousand calls a
//! second). `cargo run --release --example grpc_echo -- PORT`.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response};
use tokio::net::TcpListener;

async fn call(req: http::Request<h2::RecvStream>, mut respond: h2::server::SendResponse<Bytes>) {
    let mut body = req.into_body();
    let mut got = Vec::new();
    while let Some(Ok(d)) = body.data().await {
        let _ = body.flow_control().release_capacity(d.len());
        got.extend_from_slice(&d);
    }
    let head = Response::builder()
        .header("content-type", "application/grpc")
        .body(())
        .expect("a valid head");
    let Ok(mut send) = respond.send_response(head, false) else {
        return;
    };
    let _ = send.send_data(Bytes::from(got), false);
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    let _ = send.send_trailers(trailers);
}

fn main() {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("usage: grpc_echo PORT");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async move {
        let listener = TcpListener::bind(("127.0.0.1", port)).await.expect("bind");
        println!("ready");
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                continue;
            };
            let _ = sock.set_nodelay(true);
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(sock).await else {
                    return;
                };
                while let Some(Ok((req, respond))) = conn.accept().await {
                    tokio::spawn(call(req, respond));
                }
            });
        }
    });
}
