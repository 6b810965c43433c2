//! One try at a peer: an HTTP/2 connection (an idle one from the
//! worker's pool, else connected as the proxy connects — `grpc_bind`,
//! `grpc_socket_keepalive`, the TLS handshake of `grpcs://` — and the
//! HTTP/2 handshake, all within `grpc_connect_timeout`), the request's
//! HEADERS, the body relay started, and the response head awaited within
//! `grpc_read_timeout`. Failures are logged with NGINX's text and become
//! a [`Failure`] for `grpc_next_upstream`.

use std::sync::Arc;
use std::time::Instant;

use h2::RecvStream;

use super::request::{Pump, RelayEnd, RelayLimits};
use super::response::{self, Exchange};
use super::Outgoing;
use crate::config::LocSettings;
use crate::handlers::outcome::Env;
use crate::handlers::proxy::{
    connect_failed, connect_options, fail, handshake, note_try, Failure, Knobs, UpstreamError,
};
use crate::http::context::RequestCtx;
use crate::http::response::Response;
use crate::http::upstream_vars::TryRecord;
use crate::log::RequestLog;
use crate::upstream::http2::{self, H2Conn, H2Settings};
use crate::upstream::{
    self, NextUpstream, PeerAddr, PeerRef, Protocol, Socket, UpStream, UpstreamGroup,
};

/// A try's outcome: `Err(Ok(_))` is the peer's failure (logged),
/// `Err(Err(_))` one that ends the request.
type TryResult = crate::handlers::proxy::TryResult<Response>;

const SENDING: &str = "sending request to upstream";
const READING: &str = "reading response header from upstream";

/// The pool HTTP/2 connections of a group go to (TLS and plain apart).
fn pool_key(group: &UpstreamGroup, tls: bool) -> u64 {
    group.id << 1 | u64::from(tls)
}

/// One try at `peer`.
pub(super) async fn run(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    group: &UpstreamGroup,
    peer: PeerRef,
    out: &Outgoing,
) -> TryResult {
    let loc = Arc::clone(&ctx.loc);
    let s = &loc.s;
    let k = Knobs::of(s, Protocol::Grpc);
    let addr = group.peer(peer).addr.clone();
    let sep = if addr.is_unix() { ":" } else { "" };
    let log = ctx
        .log(env.log)
        .with_upstream(&format!("grpc://{addr}{sep}"));
    let mut rec = TryRecord {
        addr: addr.to_string(),
        ..Default::default()
    };
    // Dropped half-way (the client left), the try still ends its time.
    let ending = rec.response.end_on_drop();
    let at = note_try(ctx, None, &rec);
    // An idle connection the peer closed meanwhile fails at once: the
    // request goes again on a new one, if its body can.
    let mut allow_pooled = group.keepalive > 0;
    let result = loop {
        let conn = match connection(ctx, &k, group, &addr, allow_pooled, out).await {
            Ok(c) => c,
            Err(Fail::Connect(e)) => break Err(Ok(connect_failed(&log, &addr, &e, &mut rec))),
            Err(Fail::Handshake(e)) => {
                let t = out.tls.as_ref().expect("a handshake needs TLS");
                log.error(format_args!("{}", e.message(t)));
                break Err(Ok(fail(e.timed_out(), false, &mut rec)));
            }
            Err(Fail::Local(v)) => {
                log.error(format_args!("invalid local address \"{v}\""));
                break Err(Err(UpstreamError::Status(500)));
            }
        };
        rec.connect = Some(rec.response.elapsed());
        note_try(ctx, at, &rec);
        let reused = conn.reused;
        match exchange((s, &k), conn, out, &log).await {
            Ok(x) => {
                rec.header = Some(rec.response.elapsed());
                rec.status = Some(x.head.status.as_u16());
                rec.bytes_sent = 0;
                let pool = (group.keepalive > 0).then(|| {
                    let key = pool_key(group, out.tls.is_some());
                    (key, group.keepalive, group.keepalive_timeout)
                });
                break Ok(response::build(ctx, x, pool, &rec, log.clone()));
            }
            Err(HeadFail::TooLarge) => break Err(Err(UpstreamError::Status(413))),
            Err(HeadFail::Early(_)) if reused && out.replayable() => {
                allow_pooled = false;
                continue;
            }
            Err(e) => break Err(Ok(head_failed(&log, e, &mut rec))),
        }
    };
    // A response's time ends with its body (the body stream ends it).
    match &result {
        Ok(_) => ending.disarm(),
        Err(_) => rec.response.end(),
    }
    note_try(ctx, at, &rec);
    result
}

/// Why no connection was made.
enum Fail {
    Connect(std::io::Error),
    Handshake(crate::handlers::proxy::HandshakeFail),
    /// `grpc_bind` rendered no address.
    Local(String),
}

/// An idle pooled connection to `addr`, else a new one.
async fn connection(
    ctx: &RequestCtx,
    k: &Knobs<'_>,
    group: &UpstreamGroup,
    addr: &PeerAddr,
    allow_pooled: bool,
    out: &Outgoing,
) -> Result<H2Conn, Fail> {
    let key = pool_key(group, out.tls.is_some());
    if allow_pooled {
        if let Some(c) = http2::take(key, addr, group.keepalive_timeout) {
            return Ok(c);
        }
    }
    let started = Instant::now();
    let limit = k.connect_timeout;
    let opts = connect_options(ctx, k).map_err(Fail::Local)?;
    let sock = upstream::connect_with(addr, limit, &opts)
        .await
        .map_err(Fail::Connect)?;
    let stream = match (&out.tls, sock) {
        (None, sock) => UpStream::plain(sock),
        (Some(_), Socket::Unix(_)) => {
            return Err(Fail::Connect(std::io::Error::from_raw_os_error(
                libc::EPROTONOSUPPORT,
            )))
        }
        (Some(t), Socket::Tcp(tcp)) => handshake(tcp, t, limit.saturating_sub(started.elapsed()))
            .await
            .map_err(Fail::Handshake)?,
    };
    let settings = H2Settings {
        max_header_list: u32::try_from(k.buffer_size).unwrap_or(u32::MAX),
    };
    let left = limit.saturating_sub(started.elapsed());
    match tokio::time::timeout(left, http2::handshake(stream, addr.clone(), settings)).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(Fail::Connect(h2_io_error(e))),
        Err(_) => Err(Fail::Connect(std::io::Error::from_raw_os_error(
            libc::ETIMEDOUT,
        ))),
    }
}

fn h2_io_error(e: h2::Error) -> std::io::Error {
    e.into_io()
        .unwrap_or_else(|| std::io::Error::from_raw_os_error(libc::ECONNRESET))
}

/// A failure while sending the request or reading the head.
enum HeadFail {
    /// Before the peer took the request (a pooled connection it closed).
    Early(h2::Error),
    /// The peer closed the connection or refused the stream.
    H2(h2::Error),
    /// A wait ran out.
    TimedOut(&'static str),
    /// The client's body passed `client_max_body_size` (logged).
    TooLarge,
}

/// Sends the request on `conn`, starts the body relay and waits for the
/// response head.
async fn exchange(
    (s, k): (&LocSettings, &Knobs<'_>),
    mut conn: H2Conn,
    out: &Outgoing,
    log: &RequestLog,
) -> Result<Exchange, HeadFail> {
    let ready = tokio::time::timeout(k.send_timeout, conn.send.clone().ready()).await;
    let mut send = match ready {
        Err(_) => return Err(HeadFail::TimedOut(SENDING)),
        Ok(Err(e)) => return Err(HeadFail::Early(e)),
        Ok(Ok(r)) => r,
    };
    let body = out.take_body();
    let (response, stream) = send
        .send_request(out.head.request(), body.is_none())
        .map_err(HeadFail::Early)?;
    conn.requests += 1;
    let limits = RelayLimits {
        send_timeout: k.send_timeout,
        max: s.client_max_body_size,
        linger: (s.lingering_timeout, s.lingering_time),
    };
    let mut pump = body.map(|b| Pump::start(b, stream, limits, log.clone()));
    let head = tokio::time::timeout(k.read_timeout, async {
        let mut response = std::pin::pin!(response);
        if let Some(p) = pump.as_mut() {
            tokio::select! {
                r = &mut response => return Ok(r),
                end = p.end() => if end == RelayEnd::TooLarge {
                    return Err(HeadFail::TooLarge);
                },
            }
        }
        Ok(response.await)
    });
    let head = match head.await {
        Err(_) => return Err(HeadFail::TimedOut(READING)),
        Ok(Err(e)) => return Err(e),
        // The relay reset the stream itself (the body is too large).
        Ok(Ok(Err(_))) if pump.as_mut().and_then(Pump::ended) == Some(RelayEnd::TooLarge) => {
            return Err(HeadFail::TooLarge)
        }
        Ok(Ok(Err(e))) => return Err(HeadFail::H2(e)),
        Ok(Ok(Ok(r))) => r,
    };
    let (head, recv): (http::response::Parts, RecvStream) = head.into_parts();
    Ok(Exchange {
        head,
        recv,
        conn,
        pump,
        read_timeout: k.read_timeout,
    })
}

/// A failure after connecting, logged as NGINX logs it.
fn head_failed(log: &RequestLog, e: HeadFail, rec: &mut TryRecord) -> Failure {
    match e {
        HeadFail::TooLarge => unreachable!("a client's failure, not the peer's"),
        HeadFail::TimedOut(phase) => {
            log.error(format_args!(
                "upstream timed out (110: Connection timed out) while {phase}"
            ));
            fail(true, true, rec)
        }
        HeadFail::Early(e) | HeadFail::H2(e) if e.is_reset() => {
            let code = e.reason().map_or(0, u32::from);
            log.error(format_args!(
                "upstream rejected request with error {code} while {READING}"
            ));
            fail(false, true, rec)
        }
        HeadFail::Early(e) | HeadFail::H2(e) if e.is_go_away() || e.is_io() => {
            log.error(format_args!(
                "upstream prematurely closed connection while {READING}"
            ));
            fail(false, true, rec)
        }
        HeadFail::Early(e) | HeadFail::H2(e) => {
            log.error(format_args!(
                "upstream sent invalid http2 response ({e}) while {READING}"
            ));
            let mut f = fail(false, true, rec);
            f.cond = NextUpstream::INVALID_HEADER;
            f
        }
    }
}
