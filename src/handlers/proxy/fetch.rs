//! Step one of a proxied request: [`fetch`] picks a peer (`upstream`
//! balancing), connects (or reuses an idle keep-alive connection), sends
//! the request and reads the response head. Failures follow
//! `proxy_next_upstream` to the next peer while nothing has been sent to
//! the client, each logged with NGINX's text; the last one becomes 502 or
//! 504.

use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::connect::{connect_options, connection, ConnectFail};
use super::request::{
    build_request, client_body_error, too_large, upgrade_asked, upstream_method, upstream_uri,
    FetchOptions, ReqBody, UpstreamError,
};
use super::target::{resolve_group, resolve_target};
use super::tls::{self, TlsTarget};
use crate::config::LocSettings;
use crate::h1::chunked;
use crate::handlers::outcome::Env;
use crate::http::body::ClientBody;
use crate::http::context::RequestCtx;
use crate::http::upstream_vars::TryRecord;
use crate::log::RequestLog;
use crate::upstream::wire::{self, Framing, HeadError};
use crate::upstream::{
    self, NextUpstream, PeerAddr, PeerRef, PoolReturn, ProxyPass, UpstreamBody, UpstreamConn,
    UpstreamGroup, UpstreamResponse,
};

/// A failed try: the status it gives, its `proxy_next_upstream`
/// condition, and who is at fault.
pub(crate) struct Failure {
    pub(crate) status: u16,
    pub(crate) cond: u16,
    /// The peer is at fault (counts towards `max_fails`).
    pub(crate) peer_failed: bool,
    /// The request (or part of it) reached the peer.
    pub(crate) sent: bool,
}

/// The request as it goes to every peer tried.
struct Outgoing {
    head: Vec<u8>,
    body: ReqBody,
    uri: String,
    /// A HEAD: the response has no body whatever its framing says.
    head_req: bool,
    /// May be sent again after it reached a peer.
    idempotent: bool,
    /// `proxy_pass https://`: how to speak TLS to the peer.
    tls: Option<TlsTarget>,
    /// The client asked for an upgrade: a `101` becomes a tunnel.
    upgrade: bool,
    /// `proxy_protocol on`: the PROXY header a new connection starts with.
    proxy_header: Option<String>,
}

/// Step one: the upstream's response head, with its body still to read.
pub async fn fetch(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    pass: &ProxyPass,
) -> Result<UpstreamResponse, UpstreamError> {
    fetch_with(ctx, env, pass, &FetchOptions::default()).await
}

/// [`fetch`] as a cache asks it.
// The connection loop waits while the handler runs: no one else borrows
// the request body meanwhile.
#[allow(clippy::await_holding_refcell_ref)]
pub async fn fetch_with(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    pass: &ProxyPass,
    opts: &FetchOptions,
) -> Result<UpstreamResponse, UpstreamError> {
    let pass_body = ctx.loc.s.proxy_pass_request_body;
    let target = resolve_target(ctx, env, pass)?;
    let group = resolve_group(ctx, env, target.group).await?;
    let uri = upstream_uri(ctx, pass, target.url_uri.as_deref(), target.dynamic);
    let method = upstream_method(ctx, opts);
    let client_body = env.body.filter(|b| pass_body && !b.borrow().is_done());
    let tls = match target.tls {
        true => Some(tls::target(ctx, env.log)?),
        false => None,
    };
    let (head, body) = build_request(ctx, env, client_body, &method, &uri, opts).await?;
    let out = Outgoing {
        head,
        body,
        uri,
        head_req: method == "HEAD",
        idempotent: !matches!(method.as_str(), "POST" | "LOCK" | "PATCH"),
        tls,
        upgrade: upgrade_asked(ctx),
        proxy_header: ctx
            .loc
            .s
            .proxy_protocol
            .then(|| crate::http::proxy_protocol::v1_line(ctx.conn.peer, ctx.conn.local)),
    };
    try_peers(ctx, env, &group, &out, client_body).await
}

/// Tries the group's peers in balancing order until one answers or
/// `proxy_next_upstream` says stop.
// The connection loop waits while the handler runs: no one else borrows
// the request body meanwhile.
#[allow(clippy::await_holding_refcell_ref)]
async fn try_peers(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    group: &UpstreamGroup,
    out: &Outgoing,
    client_body: Option<&RefCell<ClientBody<'_>>>,
) -> Result<UpstreamResponse, UpstreamError> {
    let loc = Arc::clone(&ctx.loc);
    let s = &loc.s;
    let key = match (&group.hash, group.method) {
        (Some(h), _) => Some(h.key.render(ctx)),
        (None, crate::upstream::balance::Method::IpHash) => Some(ctx.conn.peer.ip().to_string()),
        _ => None,
    };
    let mut sel = group.selection(key);
    let max_tries = match s.proxy_next_upstream_tries {
        0 => group.peer_count(),
        n => (n as usize).min(group.peer_count()),
    };
    let started = Instant::now();
    let mut tries = 0;
    loop {
        let Some(peer) = group.select(&mut sel) else {
            return Err(no_live_upstreams(ctx, env, group, &out.uri));
        };
        tries += 1;
        let outcome = attempt(ctx, env, group, peer, out).await;
        let body_spent = match (&out.body, client_body) {
            (ReqBody::Stream { .. }, Some(b)) => b.borrow().read > 0,
            _ => false,
        };
        // A request that never reached the peer (connect failed) may go
        // to the next one whatever its method, as in NGINX.
        let may_retry = |cond: u16, sent: bool| {
            s.proxy_next_upstream.has(cond)
                && tries < max_tries
                && (s.proxy_next_upstream_timeout.is_zero()
                    || started.elapsed() < s.proxy_next_upstream_timeout)
                && (out.idempotent
                    || !sent
                    || s.proxy_next_upstream.has(NextUpstream::NON_IDEMPOTENT))
                && !body_spent
        };
        match outcome {
            Ok(resp) => {
                let status = resp.status();
                // A status listed in proxy_next_upstream passes the request
                // on: a failure of the peer, except 403 and 404, which are
                // answers. Otherwise the response stands and the peer did
                // its job (NGINX frees it as a success).
                if NextUpstream::status_bit(status).is_some_and(|b| may_retry(b, true)) {
                    group.release(peer, !matches!(status, 403 | 404));
                    continue;
                }
                group.release(peer, false);
                if let Some(u) = ctx.upstream.as_mut() {
                    u.headers = resp.head.headers.clone();
                }
                return Ok(resp);
            }
            Err(Ok(f)) => {
                group.release(peer, f.peer_failed);
                if may_retry(f.cond, f.sent) {
                    continue;
                }
                return Err(UpstreamError::Status(f.status));
            }
            Err(Err(e)) => {
                group.release(peer, false);
                return Err(e);
            }
        }
    }
}

/// Every peer is down or tried: NGINX's line, 502.
fn no_live_upstreams(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    group: &UpstreamGroup,
    uri: &str,
) -> UpstreamError {
    ctx.log(env.log)
        .with_upstream(&format!("http://{}{uri}", group.name))
        .error(format_args!(
            "no live upstreams while connecting to upstream"
        ));
    if let Some(u) = ctx.upstream.as_mut() {
        u.tries.push(TryRecord {
            addr: group.name.clone(),
            status: Some(502),
            ..Default::default()
        });
    }
    UpstreamError::Status(502)
}

/// One try at `peer`: `Err(Ok(_))` is the peer's failure (logged),
/// `Err(Err(_))` one that ends the request.
async fn attempt(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    group: &UpstreamGroup,
    peer: PeerRef,
    out: &Outgoing,
) -> Result<UpstreamResponse, Result<Failure, UpstreamError>> {
    let loc = Arc::clone(&ctx.loc);
    let s = &loc.s;
    let addr = &group.peer(peer).addr;
    let t0 = Instant::now();
    let log = try_log(ctx, env, addr, out);
    let mut rec = TryRecord {
        addr: addr.to_string(),
        ..Default::default()
    };
    let sent = bytes_sent(ctx, out);
    // An idle connection may have been closed by the peer meanwhile: a
    // failure on it before any response byte is retried once on a new one
    // (not with a streamed body, which cannot be sent twice).
    let mut allow_pooled = group.keepalive > 0 && !matches!(out.body, ReqBody::Stream { .. });
    let result = loop {
        let opts = match connect_options(ctx, s) {
            Ok(o) => o,
            Err(v) => {
                log.error(format_args!("invalid local address \"{v}\""));
                break Err(Err(UpstreamError::Status(500)));
            }
        };
        let mut conn = match connection(
            group,
            addr,
            allow_pooled,
            s,
            (out.tls.as_ref(), out.proxy_header.as_deref()),
            &opts,
        )
        .await
        {
            Ok(c) => c,
            Err(ConnectFail::Connect(e)) => {
                break Err(Ok(connect_failed(&log, addr, &e, &mut rec)))
            }
            Err(ConnectFail::Handshake(e)) => {
                let t = out.tls.as_ref().expect("a handshake needs TLS");
                log.error(format_args!("{}", e.message(t)));
                break Err(Ok(fail(e.timed_out(), false, &mut rec)));
            }
        };
        rec.connect = Some(t0.elapsed());
        conn.requests += 1;
        let reused = conn.reused;
        match send_request_read_head(ctx, env, s, conn, out).await {
            Ok(got) => {
                rec.header = Some(t0.elapsed());
                rec.bytes_sent = sent;
                break head_arrived(group, s, &log, got, out, &mut rec);
            }
            Err(Step::Early(_)) if reused => {
                // The pooled connection was dead: try a new one.
                allow_pooled = false;
                continue;
            }
            Err(Step::Early(e)) | Err(Step::Head(e)) => {
                break Err(Ok(head_failed(&log, e, &mut rec)))
            }
            Err(Step::Client(e)) => break Err(Err(e)),
        }
    };
    rec.response = t0.elapsed();
    if let Some(u) = ctx.upstream.as_mut() {
        u.tries.push(rec);
    }
    result
}

/// A try's response once its head arrived, or the head's failure (logged).
fn head_arrived(
    group: &UpstreamGroup,
    s: &LocSettings,
    log: &RequestLog,
    got: (UpstreamConn, Vec<u8>, wire::ResponseHead),
    out: &Outgoing,
    rec: &mut TryRecord,
) -> Result<UpstreamResponse, Result<Failure, UpstreamError>> {
    rec.status = Some(got.2.status);
    let head_len = got.2.len as u64;
    match upstream_response(group, s, log, got, out) {
        Ok(mut r) => {
            rec.bytes_received.fetch_add(head_len, Ordering::Relaxed);
            r.body
                .set_counters(rec.bytes_received.clone(), rec.response_length.clone());
            Ok(r)
        }
        Err(e) => {
            log.error(format_args!(
                "{e} while reading response header from upstream"
            ));
            Err(Ok(invalid_header(rec)))
        }
    }
}

/// The error-log context of one try at `addr` (NGINX's `upstream:` part).
fn try_log(ctx: &RequestCtx, env: &Env<'_>, addr: &PeerAddr, out: &Outgoing) -> RequestLog {
    // NGINX separates a unix socket's path from the URI with `:`.
    let sep = if addr.is_unix() { ":" } else { "" };
    ctx.log(env.log).with_upstream(&format!(
        "{}://{addr}{sep}{}",
        if out.tls.is_some() { "https" } else { "http" },
        out.uri
    ))
}

/// `$upstream_bytes_sent` of a try: the head (with a body read whole) and
/// a streamed body's length (a chunked one is not counted).
fn bytes_sent(ctx: &RequestCtx, out: &Outgoing) -> u64 {
    out.head.len() as u64
        + match out.body {
            ReqBody::Stream { chunked: false } => ctx.head.content_length.unwrap_or(0),
            _ => 0,
        }
}

/// A failed connect, logged as NGINX logs it: a unix socket's connect
/// fails at once, which NGINX words `connect() to unix:PATH failed`; a TCP
/// one fails later, found by `SO_ERROR` (`connect() failed`).
pub(crate) fn connect_failed(
    log: &RequestLog,
    addr: &PeerAddr,
    e: &std::io::Error,
    rec: &mut TryRecord,
) -> Failure {
    let timed_out = e.raw_os_error() == Some(libc::ETIMEDOUT);
    if timed_out {
        log.error(format_args!(
            "upstream timed out (110: Connection timed out) while connecting to upstream"
        ));
    } else {
        let to = match addr.is_unix() {
            true => format!(" to {addr}"),
            false => String::new(),
        };
        log.error(format_args!(
            "connect(){to} failed {} while connecting to upstream",
            crate::util::errno_text(e)
        ));
    }
    fail(timed_out, false, rec)
}

/// The response whose head was read: its body's framing, and whether the
/// connection may go back to the worker's keep-alive pool afterwards.
fn upstream_response(
    group: &UpstreamGroup,
    s: &LocSettings,
    log: &RequestLog,
    (conn, buf, rh): (UpstreamConn, Vec<u8>, wire::ResponseHead),
    out: &Outgoing,
) -> Result<UpstreamResponse, HeadError> {
    if rh.status == 101 {
        // NGINX keeps no such connection (`u->keepalive = 0`).
        if !out.upgrade {
            return Err(HeadError::UnaskedUpgrade);
        }
        let (addr, mut body) = (conn.addr.clone(), UpstreamBody::switched(conn, buf));
        body.set_log(log.clone());
        return Ok(UpstreamResponse {
            head: rh,
            addr,
            body,
        });
    }
    let framing = Framing::of(&rh, out.head_req)?;
    let reusable = group.keepalive > 0 && rh.keep_alive() && !matches!(framing, Framing::Close);
    let pool_return = reusable.then_some(PoolReturn {
        group: tls::pool_key(group.id, out.tls.is_some()),
        max: group.keepalive,
        timeout: group.keepalive_timeout,
        requests: group.keepalive_requests,
        time: group.keepalive_time,
    });
    let addr = conn.addr.clone();
    let mut body = UpstreamBody::new(conn, buf, framing, s.proxy_read_timeout, pool_return);
    body.set_log(log.clone());
    Ok(UpstreamResponse {
        head: rh,
        addr,
        body,
    })
}

/// A response head that cannot be used: 502, `invalid_header`.
fn invalid_header(rec: &mut TryRecord) -> Failure {
    rec.status = Some(502);
    Failure {
        status: 502,
        cond: NextUpstream::INVALID_HEADER,
        peer_failed: true,
        sent: true,
    }
}

/// A failure while sending the request or reading the head, logged as
/// NGINX logs it.
fn head_failed(log: &RequestLog, e: HeadFail, rec: &mut TryRecord) -> Failure {
    match e {
        HeadFail::Closed => {
            log.error(format_args!("upstream prematurely closed connection while reading response header from upstream"));
            fail(false, true, rec)
        }
        HeadFail::Io(e, phase) => {
            let timed_out = e.raw_os_error() == Some(libc::ETIMEDOUT);
            if timed_out {
                log.error(format_args!(
                    "upstream timed out (110: Connection timed out) while {phase}"
                ));
            } else {
                let op = if phase.starts_with("sending") {
                    "send()"
                } else {
                    "recv()"
                };
                log.error(format_args!(
                    "{op} failed {} while {phase}",
                    crate::util::errno_text(&e)
                ));
            }
            fail(timed_out, true, rec)
        }
        HeadFail::Invalid(h) => {
            log.error(format_args!(
                "{h} while reading response header from upstream"
            ));
            invalid_header(rec)
        }
    }
}

pub(crate) fn fail(timed_out: bool, sent: bool, rec: &mut TryRecord) -> Failure {
    let status = if timed_out { 504 } else { 502 };
    rec.status = Some(status);
    Failure {
        status,
        cond: if timed_out {
            NextUpstream::TIMEOUT
        } else {
            NextUpstream::ERROR
        },
        peer_failed: true,
        sent,
    }
}

enum HeadFail {
    Closed,
    Io(std::io::Error, &'static str),
    Invalid(HeadError),
}

enum Step {
    /// Failed before any response byte arrived.
    Early(HeadFail),
    /// Failed after part of the head arrived.
    Head(HeadFail),
    /// The client's side failed.
    Client(UpstreamError),
}

const SENDING: &str = "sending request to upstream";
const READING: &str = "reading response header from upstream";

/// Sends the request (head, body) on `conn` and reads the response head,
/// skipping `100 Continue` and other 1xx heads.
async fn send_request_read_head(
    ctx: &RequestCtx,
    env: &Env<'_>,
    s: &LocSettings,
    conn: UpstreamConn,
    out: &Outgoing,
) -> Result<(UpstreamConn, Vec<u8>, wire::ResponseHead), Step> {
    if let Err(e) = upstream::write_all(&conn.stream, &out.head, s.proxy_send_timeout).await {
        return Err(Step::Early(HeadFail::Io(e, SENDING)));
    }
    if let ReqBody::Stream { chunked } = out.body {
        send_body(ctx, env, s, &conn, chunked).await?;
    }
    read_response_head(s, conn).await
}

/// Streams the client's body to the upstream, re-framed as chunks when
/// `chunked` (bounded by `client_max_body_size`).
// The connection loop waits while the handler runs: no one else borrows
// the request body meanwhile.
#[allow(clippy::await_holding_refcell_ref)]
async fn send_body(
    ctx: &RequestCtx,
    env: &Env<'_>,
    s: &LocSettings,
    conn: &UpstreamConn,
    chunked: bool,
) -> Result<(), Step> {
    let st = &conn.stream;
    let b = env.body.expect("a streamed body has a source");
    let mut b = b.borrow_mut();
    let max = s.client_max_body_size;
    let mut piece = Vec::with_capacity(upstream::READ_CHUNK);
    loop {
        piece.clear();
        let start = if chunked {
            chunked::begin_chunk(&mut piece)
        } else {
            0
        };
        match b.read(&mut piece).await {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => return Err(Step::Client(client_body_error(ctx, env, &e))),
        }
        let from = if chunked {
            if max != 0 && b.read > max {
                too_large(ctx, env, b.read);
                return Err(Step::Client(UpstreamError::Status(413)));
            }
            chunked::end_chunk(&mut piece, start)
        } else {
            0
        };
        if let Err(e) = upstream::write_all(st, &piece[from..], s.proxy_send_timeout).await {
            return Err(Step::Head(HeadFail::Io(e, SENDING)));
        }
    }
    if chunked {
        if let Err(e) = upstream::write_all(st, chunked::LAST_CHUNK, s.proxy_send_timeout).await {
            return Err(Step::Head(HeadFail::Io(e, SENDING)));
        }
    }
    Ok(())
}

/// Reads the response head (at most `proxy_buffer_size`), skipping 1xx
/// heads but `101`.
async fn read_response_head(
    s: &LocSettings,
    conn: UpstreamConn,
) -> Result<(UpstreamConn, Vec<u8>, wire::ResponseHead), Step> {
    let max = s.proxy_buffer_size as usize;
    let mut buf = Vec::with_capacity(max.min(upstream::READ_CHUNK));
    let mut got_any = false;
    loop {
        match wire::parse_response_head(&buf, max) {
            Ok(Some(h)) if (100..200).contains(&h.status) && h.status != 101 => {
                buf.drain(..h.len);
                continue;
            }
            Ok(Some(h)) => {
                buf.drain(..h.len);
                return Ok((conn, buf, h));
            }
            Ok(None) => {}
            Err(e) => return Err(Step::Head(HeadFail::Invalid(e))),
        }
        let wrap = |f: HeadFail| {
            if got_any {
                Step::Head(f)
            } else {
                Step::Early(f)
            }
        };
        match upstream::read_some(&conn.stream, &mut buf, s.proxy_read_timeout).await {
            Ok(0) => return Err(wrap(HeadFail::Closed)),
            Ok(_) => got_any = true,
            Err(e) => {
                // A reset on a reused connection counts as "before any
                // byte" too; a timeout does not (the peer is slow, not gone).
                if e.raw_os_error() == Some(libc::ETIMEDOUT) {
                    return Err(Step::Head(HeadFail::Io(e, READING)));
                }
                return Err(wrap(HeadFail::Io(e, READING)));
            }
        }
    }
}
