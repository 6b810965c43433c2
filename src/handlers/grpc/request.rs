//! What goes to a gRPC upstream: the request's HEADERS (NGINX's
//! `ngx_http_grpc_create_request`: the client's method and URI as sent,
//! `:authority` from `grpc_set_header Host` or the `grpc_pass` host, the
//! client's fields less the connection-specific ones, `te: trailers` when
//! the client sent it, then `grpc_set_header` lines; an empty value sends
//! nothing) and the body relay.
//!
//! **Flow control end to end.** An HTTP/2 client's DATA frames are
//! relayed as they come ([`ClientBody::take_h2`]) by a task of their own
//! ([`Pump`]), so a bidirectional call streams both ways at once: each
//! frame waits for room in the upstream's windows and only then is it
//! given back to the client's window, so a slow upstream holds the client
//! back and porter holds at most a frame. The task ends with the
//! exchange (dropped with the response body). An HTTP/1.x client's body
//! is read whole first (bounded by `client_max_body_size`).
//!
//! [`ClientBody::take_h2`]: crate::http::body::ClientBody::take_h2

use std::future::{poll_fn, Future};
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use h2::{RecvStream, SendStream};
use http::header::{HeaderName, HeaderValue};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::handlers::outcome::Env;
use crate::handlers::proxy::UpstreamError;
use crate::http::body::ClientBody;
use crate::http::context::RequestCtx;
use crate::http::http2::send::Out;
use crate::log::RequestLog;

/// The client's fields that never go upstream (connection-specific in
/// HTTP/2, or governed here: NGINX's grpc defaults empty them).
const NOT_PASSED: &[&str] = &[
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "expect",
    "te",
    "content-length",
    "http2-settings",
];

/// The largest DATA frame sent upstream (HTTP/2's default frame size).
const FRAME: usize = 16 * 1024;

/// The request's body, as it can be sent.
pub(super) enum BodySource {
    /// Read whole (an HTTP/1.x client).
    Bytes(Bytes),
    /// An HTTP/2 client's frames, relayed as they come.
    Frames(RecvStream),
}

/// The request's head, built once for every try.
pub(super) struct UpRequest {
    method: http::Method,
    uri: http::Uri,
    headers: http::HeaderMap,
    /// The request has a body (so a try that took it used it up).
    pub had_body: bool,
}

impl UpRequest {
    /// The request for one try.
    pub fn request(&self) -> http::Request<()> {
        let mut r = http::Request::new(());
        *r.method_mut() = self.method.clone();
        *r.uri_mut() = self.uri.clone();
        *r.headers_mut() = self.headers.clone();
        r
    }
}

/// The request's head: `tls` is `grpcs://`.
pub(super) fn head(ctx: &RequestCtx, tls: bool, body: Option<&BodySource>) -> UpRequest {
    let s = &ctx.loc.s;
    let set = &s.grpc.set_header;
    let governed = |n: &str| set.iter().any(|(name, _)| name.eq_ignore_ascii_case(n));
    let mut headers = http::HeaderMap::new();
    for (n, v) in ctx.head.headers() {
        let lower = n.to_ascii_lowercase();
        if NOT_PASSED.contains(&lower.as_str()) || governed(&lower) {
            continue;
        }
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(lower.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            headers.append(n, v);
        }
    }
    let trailers = ctx.head.header("te").is_some_and(|v| {
        v.split(',')
            .any(|t| t.trim().eq_ignore_ascii_case("trailers"))
    });
    if trailers && !governed("te") {
        headers.insert(http::header::TE, HeaderValue::from_static("trailers"));
    }
    let length = match body {
        Some(BodySource::Bytes(b)) => Some(b.len() as u64),
        Some(BodySource::Frames(_)) => ctx.head.content_length,
        None => None,
    };
    if let (Some(n), false) = (length, governed("content-length")) {
        headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(n));
    }
    let mut authority = ctx
        .upstream
        .as_ref()
        .map_or_else(String::new, |u| u.proxy_host.clone());
    for (n, t) in set.iter() {
        let v = t.render(ctx);
        if n.eq_ignore_ascii_case("host") {
            authority = v;
            continue;
        }
        if v.is_empty() {
            continue;
        }
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(n.to_ascii_lowercase().as_bytes()),
            HeaderValue::from_str(&v),
        ) {
            headers.append(n, v);
        }
    }
    let scheme = if tls { "https" } else { "http" };
    let target = ctx.head.target();
    let uri = http::Uri::try_from(format!("{scheme}://{authority}{target}"))
        .or_else(|_| http::Uri::try_from(format!("{scheme}://localhost{target}")))
        .unwrap_or_else(|_| http::Uri::from_static("http://localhost/"));
    let method =
        http::Method::from_bytes(ctx.head.method().as_bytes()).unwrap_or(http::Method::POST);
    UpRequest {
        method,
        uri,
        headers,
        had_body: body.is_some(),
    }
}

/// The client's body: its frames to relay (HTTP/2), or read whole
/// (HTTP/1.x; 413 past `client_max_body_size`); None without one.
// The connection loop waits while the handler runs: no one else borrows
// the request body meanwhile.
#[allow(clippy::await_holding_refcell_ref)]
pub(super) async fn body(
    ctx: &RequestCtx,
    env: &Env<'_>,
) -> Result<Option<BodySource>, UpstreamError> {
    let Some(cell) = env.body else {
        return Ok(None);
    };
    let mut b = cell.borrow_mut();
    if b.is_done() {
        return Ok(None);
    }
    if let Some(recv) = b.take_h2() {
        return Ok(Some(BodySource::Frames(recv)));
    }
    let max = ctx.loc.s.client_max_body_size;
    let mut all = Vec::new();
    loop {
        match b.read(&mut all).await {
            Ok(true) => {}
            Ok(false) => break,
            Err(_) => return Err(UpstreamError::ClientGone),
        }
        if max != 0 && all.len() as u64 > max {
            ctx.log(env.log).error(format_args!(
                "client intended to send too large body: {} bytes",
                all.len()
            ));
            return Err(UpstreamError::Status(413));
        }
    }
    Ok(Some(BodySource::Bytes(Bytes::from(all))))
}

/// How a body relay ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RelayEnd {
    /// The whole body went upstream.
    Sent,
    /// The client sent more than `client_max_body_size` (logged): 413
    /// while no response head went out, else the stream is reset.
    TooLarge,
    /// The client reset its stream, or the upstream stopped taking it.
    Failed,
}

/// The task relaying a body upstream. Dropping it stops the relay (the
/// upstream's stream is reset) and the rest of the client's body is read
/// and dropped within `lingering_timeout`/`lingering_time`, as NGINX
/// discards a body: reset unread, the client's stream would end with
/// CANCEL, which a client reports as an error even when its response (an
/// `error_page`, a gRPC status) is complete.
pub(super) struct Pump {
    task: JoinHandle<RelayEnd>,
    /// How it ended, once it did (a finished task is polled only once).
    end: Option<RelayEnd>,
    stop: Rc<Notify>,
}

impl Drop for Pump {
    fn drop(&mut self) {
        self.stop.notify_one();
    }
}

/// The bounds of one relay.
pub(super) struct RelayLimits {
    /// `grpc_send_timeout`: the longest wait for the upstream's window.
    pub send_timeout: Duration,
    /// `client_max_body_size` (0: none).
    pub max: u64,
    /// `lingering_timeout`, `lingering_time`: discarding what is left.
    pub linger: (Duration, Duration),
}

impl Pump {
    /// Starts relaying `body` on the request's stream `send`.
    pub fn start(
        body: BodySource,
        send: SendStream<Bytes>,
        limits: RelayLimits,
        log: RequestLog,
    ) -> Pump {
        let stop = Rc::new(Notify::new());
        let task = crate::metrics::timed::spawn(relay(body, send, limits, log, Rc::clone(&stop)));
        Pump {
            task,
            end: None,
            stop,
        }
    }

    /// Waits for the relay's end.
    pub async fn end(&mut self) -> RelayEnd {
        if let Some(e) = self.end {
            return e;
        }
        let e = (&mut self.task).await.unwrap_or(RelayEnd::Failed);
        self.end = Some(e);
        e
    }

    /// The relay's end, if it ended.
    pub fn ended(&mut self) -> Option<RelayEnd> {
        if self.end.is_none() && self.task.is_finished() {
            let waker = std::task::Waker::noop();
            let mut cx = std::task::Context::from_waker(waker);
            if let std::task::Poll::Ready(r) = std::pin::Pin::new(&mut self.task).poll(&mut cx) {
                self.end = Some(r.unwrap_or(RelayEnd::Failed));
            }
        }
        self.end
    }
}

async fn relay(
    body: BodySource,
    send: SendStream<Bytes>,
    limits: RelayLimits,
    log: RequestLog,
    stop: Rc<Notify>,
) -> RelayEnd {
    let mut out = Out::new(send, FRAME, limits.send_timeout);
    let (mut frames, bytes) = match body {
        BodySource::Bytes(b) => (None, Some(b)),
        BodySource::Frames(recv) => (Some(recv), None),
    };
    let work = async {
        match (bytes, frames.as_mut()) {
            (Some(b), _) => out.owned(b, true).await.map_err(|e| (e, false)),
            (None, Some(recv)) => frames_upstream(recv, &mut out, limits.max, &log).await,
            (None, None) => Ok(()),
        }
    };
    let sent = tokio::select! {
        biased;
        r = work => r,
        _ = stop.notified() => Err((std::io::ErrorKind::Interrupted.into(), false)),
    };
    let end = match &sent {
        Ok(()) => return RelayEnd::Sent,
        Err((_, true)) => RelayEnd::TooLarge,
        Err((e, false)) => {
            if e.raw_os_error() == Some(libc::ETIMEDOUT) {
                log.error(format_args!(
                    "upstream timed out (110: Connection timed out) while sending request to upstream"
                ));
            }
            RelayEnd::Failed
        }
    };
    out.reset();
    drop(out);
    // Stopped because the exchange ended: what the client still sends is
    // read and dropped. A body too large, or one that failed, is not.
    let stopped = matches!(&sent, Err((e, false)) if e.kind() == std::io::ErrorKind::Interrupted);
    if let (Some(recv), true) = (frames, stopped) {
        let mut rest = ClientBody::h2(recv, None);
        let _ = rest.discard_within(limits.linger.0, limits.linger.1).await;
    }
    end
}

/// Relays an HTTP/2 client's frames: `Err((_, true))` past `max` (logged).
async fn frames_upstream(
    recv: &mut RecvStream,
    out: &mut Out,
    max: u64,
    log: &RequestLog,
) -> Result<(), (std::io::Error, bool)> {
    let mut total = 0u64;
    loop {
        match poll_fn(|cx| recv.poll_data(cx)).await {
            Some(Ok(d)) => {
                let n = d.len();
                total += n as u64;
                if max != 0 && total > max {
                    log.error(format_args!(
                        "client intended to send too large chunked body: {total} bytes while sending request to upstream"
                    ));
                    return Err((std::io::ErrorKind::InvalidData.into(), true));
                }
                out.owned(d, false).await.map_err(|e| (e, false))?;
                // Given back to the client only once the upstream took
                // it: flow control end to end.
                let _ = recv.flow_control().release_capacity(n);
            }
            // The client reset its stream: so does the upstream's.
            Some(Err(e)) => return Err((std::io::Error::other(e), false)),
            None => return out.owned(Bytes::new(), true).await.map_err(|e| (e, false)),
        }
    }
}
