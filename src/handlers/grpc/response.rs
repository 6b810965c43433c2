//! The client's response for a gRPC upstream's: its status and fields
//! less the hidden (`Date`, `Server`, `X-Accel-*`, `grpc_hide_header`,
//! less `grpc_pass_header`) and connection-specific ones, and its body
//! as a [`GrpcBody`] the connection pulls a frame at a time, ending with
//! the upstream's trailers. A response that is only a HEADERS frame (a
//! gRPC "Trailers-Only" error: `grpc-status` among its fields) has no
//! body and goes out the same way.
//!
//! **Backpressure.** The upstream's frames are given back to its window
//! only as the client's stream takes them (`http2::send` waits for the
//! client's window before asking for the next piece), so a client that
//! does not read stops the upstream after one window (64 KiB) and porter
//! holds at most a frame of it.

use std::future::poll_fn;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use h2::RecvStream;

use super::request::{Pump, RelayEnd};
use crate::handlers::proxy::{hop_by_hop, HIDDEN};
use crate::http::context::RequestCtx;
use crate::http::request::Version;
use crate::http::response::{logged_error, Body, BodyStream, ChunkFuture, Response, StreamBody};
use crate::http::upstream_vars::TryRecord;
use crate::log::RequestLog;
use crate::upstream::http2::{self, H2Conn};
use crate::util::span::SharedSpan;

/// An exchange whose response head arrived.
pub(super) struct Exchange {
    pub head: http::response::Parts,
    pub recv: RecvStream,
    pub conn: H2Conn,
    pub pump: Option<Pump>,
    pub read_timeout: Duration,
}

/// The client's response; `pool` is where the connection goes back to
/// (key, size, `keepalive_timeout`) once the exchange ended cleanly.
pub(super) fn build(
    ctx: &RequestCtx,
    x: Exchange,
    pool: Option<(u64, usize, Duration)>,
    rec: &TryRecord,
    log: RequestLog,
) -> Response {
    let s = &ctx.loc.s;
    let mut r = Response::new(x.head.status.as_u16());
    r.content_length = None;
    let hidden = |n: &str| {
        (HIDDEN.contains(&n) && !s.grpc.pass_header.iter().any(|p| p == n))
            || s.grpc.hide_header.iter().any(|p| p == n)
    };
    for (n, v) in x.head.headers.iter() {
        let n = n.as_str();
        if hop_by_hop(n) || hidden(n) {
            continue;
        }
        let v = String::from_utf8_lossy(v.as_bytes()).into_owned();
        match n {
            "content-type" if r.content_type.is_none() => r.content_type = Some(v.as_str().into()),
            "server" => {
                r.own_server = false;
                r.headers.push((n.to_string(), v));
            }
            "date" => {
                r.own_date = false;
                r.headers.push((n.to_string(), v));
            }
            _ => r.headers.push((n.to_string(), v)),
        }
    }
    let mut body = GrpcBody {
        recv: x.recv,
        timeout: x.read_timeout,
        trailers: None,
        done: false,
        conn: Some(x.conn),
        pool,
        pump: x.pump,
        received: rec.bytes_received.clone(),
        length: rec.response_length.clone(),
        span: rec.response.clone(),
        log,
    };
    if body.recv.is_end_stream() {
        body.finish();
        // NGINX sends such a response with `content-length: 0`.
        r.content_length = Some(0);
        return r;
    }
    match (!ctx.conn.multiplexed(), ctx.head.version) {
        (false, _) => {}
        (true, Version::Http11) => r.chunked = true,
        (true, Version::Http10) => r.close = true,
    }
    r.body = Body::Stream(StreamBody::new(Box::new(body)));
    r
}

/// A gRPC upstream's response body, then its trailers.
struct GrpcBody {
    recv: RecvStream,
    /// `grpc_read_timeout`: the longest wait for the next frame.
    timeout: Duration,
    trailers: Option<http::HeaderMap>,
    done: bool,
    /// The connection, back to the pool once the exchange ended cleanly.
    conn: Option<H2Conn>,
    pool: Option<(u64, usize, Duration)>,
    /// The request body's relay, stopped when the response is dropped.
    pump: Option<Pump>,
    /// `$upstream_bytes_received`, `$upstream_response_length`.
    received: Arc<AtomicU64>,
    length: Arc<AtomicU64>,
    /// `$upstream_response_time`, ended with the body (or its failure).
    span: SharedSpan,
    log: RequestLog,
}

impl Drop for GrpcBody {
    fn drop(&mut self) {
        self.span.end();
    }
}

impl GrpcBody {
    fn error(&self, msg: std::fmt::Arguments<'_>) -> std::io::Error {
        self.span.end();
        self.log.error(msg);
        logged_error()
    }

    /// The response ended cleanly: the connection goes back to the pool
    /// (with the request's stream reset if the client still sends).
    fn finish(&mut self) {
        self.done = true;
        self.span.end();
        self.pump = None;
        if let (Some(conn), Some((key, max, timeout))) = (self.conn.take(), self.pool) {
            http2::put(key, max, timeout, conn);
        }
    }

    /// The relay stopped a body over `client_max_body_size` (logged).
    fn too_large(&mut self) -> bool {
        self.pump.as_mut().and_then(Pump::ended) == Some(RelayEnd::TooLarge)
    }

    async fn next(&mut self, out: &mut Vec<u8>) -> std::io::Result<bool> {
        loop {
            if self.done {
                return Ok(false);
            }
            // A body over `client_max_body_size` ends the exchange (the
            // client's stream is reset, as NGINX's).
            if self.too_large() {
                return Err(logged_error());
            }
            let recv = &mut self.recv;
            let next = tokio::time::timeout(self.timeout, poll_fn(|cx| recv.poll_data(cx))).await;
            match next {
                Err(_) => {
                    return Err(self.error(format_args!(
                        "upstream timed out (110: Connection timed out) while reading upstream"
                    )))
                }
                Ok(Some(Ok(d))) => {
                    let n = d.len();
                    let _ = self.recv.flow_control().release_capacity(n);
                    self.received.fetch_add(n as u64 + 9, Ordering::Relaxed);
                    self.length.fetch_add(n as u64, Ordering::Relaxed);
                    if n > 0 {
                        out.extend_from_slice(&d);
                        return Ok(true);
                    }
                }
                Ok(Some(Err(_))) if self.too_large() => return Err(logged_error()),
                Ok(Some(Err(e))) => {
                    return Err(self.error(format_args!(
                        "upstream sent frame error ({e}) while reading upstream"
                    )))
                }
                Ok(None) => {
                    let recv = &mut self.recv;
                    let t =
                        tokio::time::timeout(self.timeout, poll_fn(|cx| recv.poll_trailers(cx)))
                            .await;
                    match t {
                        Ok(Ok(t)) => self.trailers = t,
                        Ok(Err(e)) => {
                            return Err(self.error(format_args!(
                                "upstream sent frame error ({e}) while reading upstream"
                            )))
                        }
                        Err(_) => {
                            return Err(self.error(format_args!(
                            "upstream timed out (110: Connection timed out) while reading upstream"
                        )))
                        }
                    }
                    self.finish();
                    return Ok(false);
                }
            }
        }
    }
}

impl BodyStream for GrpcBody {
    fn read_chunk<'a>(&'a mut self, out: &'a mut Vec<u8>) -> ChunkFuture<'a> {
        Box::pin(self.next(out))
    }

    fn trailers(&mut self) -> Option<http::HeaderMap> {
        self.trailers.take()
    }
}
