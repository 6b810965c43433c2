//! Step one of a proxied request: [`fetch`] picks a peer (`upstream`
//! balancing), connects (or reuses an idle keep-alive connection), sends
//! the request and reads the response head. Failures follow
//! `proxy_next_upstream` to the next peer while nothing has been sent to
//! the client, each logged with NGINX's text; the last one becomes 502 or
//! 504.

use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::connect::{connect_options, connection, ConnectFail};
use super::exchange::{send_request_read_head, Got, HeadFail, Outgoing, Step};
use super::knobs::Knobs;
use super::request::{
    build_request, upgrade_asked, upstream_method, upstream_uri, FetchOptions, ReqBody,
    UpstreamError,
};
use super::target::{resolve_group, resolve_target};
use super::tls;
use super::tries::{note_try, try_peers, PeerTry, TryResult};
use crate::h1::fields::Fields;
use crate::handlers::outcome::Env;
use crate::http::body::ClientBody;
use crate::http::context::{Method, RequestCtx};
use crate::http::upstream_vars::TryRecord;
use crate::log::{Level, RequestLog};
use crate::upstream::balance::InFlight;
use crate::upstream::wire::{Framing, HeadError};
use crate::upstream::{
    NextUpstream, PeerAddr, PeerRef, PoolReturn, Protocol, ProxyPass, UpstreamBody, UpstreamGroup,
    UpstreamResponse,
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
    let pass_body = Knobs::of(&ctx.loc.s, pass.proto).pass_request_body;
    let target = resolve_target(ctx, env, pass)?;
    let group = resolve_group(ctx, env, target.group).await?;
    let http = pass.proto == Protocol::Http;
    let uri = match http {
        true => upstream_uri(ctx, pass, target.url_uri.as_deref(), target.dynamic),
        false => String::new(),
    };
    let method = upstream_method(ctx, opts);
    let client_body = env.body.filter(|b| pass_body && !b.borrow().is_done());
    let tls = match (target.tls, pass.proto) {
        // `uwsgi_pass suwsgi://`: the `uwsgi_ssl_*` settings.
        (true, Protocol::Uwsgi) => {
            let u = &ctx.loc.s.uwsgi;
            let spec = tls::app_spec(u, false);
            Some(tls::target_with(ctx, env.log, &spec, u.ssl_name.as_ref())?)
        }
        (true, _) => Some(tls::target(ctx, env.log)?),
        (false, _) => None,
    };
    let (head, body) = match pass.proto {
        Protocol::Http => build_request(ctx, env, client_body, &method, &uri, opts).await?,
        Protocol::FastCgi => super::fastcgi::build_request(ctx, env, client_body, opts).await?,
        Protocol::Uwsgi => super::uwsgi::build_request(ctx, env, client_body, opts).await?,
        Protocol::Scgi => super::scgi::build_request(ctx, env, client_body, opts).await?,
        Protocol::Grpc => unreachable!("{}", super::exchange::GRPC),
    };
    let out = Outgoing {
        proto: pass.proto,
        head,
        body,
        uri,
        head_req: Method::from_token(&method) == Method::Head,
        idempotent: Method::from_token(&method).idempotent(),
        tls,
        upgrade: http && upgrade_asked(ctx),
        relay_101: http && !ctx.conn.multiplexed(),
        proxy_header: ctx
            .loc
            .s
            .proxy_protocol
            .then(|| crate::http::proxy_protocol::v1_line(ctx.conn.peer, ctx.conn.local)),
    };
    let t = ProxyTry {
        out: &out,
        client_body,
    };
    try_peers(ctx, env, &group, &t).await
}

/// A proxied request (HTTP/1, FastCGI, uwsgi, SCGI) as the tries see it.
struct ProxyTry<'a, 'b> {
    out: &'a Outgoing,
    client_body: Option<&'a RefCell<ClientBody<'b>>>,
}

impl PeerTry for ProxyTry<'_, '_> {
    type Response = UpstreamResponse;

    fn proto(&self) -> Protocol {
        self.out.proto
    }

    async fn attempt(
        &self,
        ctx: &mut RequestCtx,
        env: &Env<'_>,
        group: &UpstreamGroup,
        peer: PeerRef,
    ) -> TryResult<UpstreamResponse> {
        attempt(ctx, env, group, peer, self.out).await
    }

    fn idempotent(&self) -> bool {
        self.out.idempotent
    }

    fn resendable(&self, _: &RequestCtx) -> bool {
        match (&self.out.body, self.client_body) {
            (ReqBody::Stream { .. }, Some(b)) => b.borrow().read == 0,
            _ => true,
        }
    }

    fn status(r: &UpstreamResponse) -> u16 {
        r.status()
    }

    fn headers(r: &UpstreamResponse) -> Fields {
        r.head.headers.clone()
    }

    fn hold(r: &mut UpstreamResponse, guard: InFlight) {
        r.body.in_flight = Some(guard);
    }

    fn no_peer_url(&self, group: &UpstreamGroup) -> String {
        format!("{}://{}{}", self.out.scheme(), group.name, self.out.uri)
    }
}

/// One try at `peer`.
async fn attempt(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    group: &UpstreamGroup,
    peer: PeerRef,
    out: &Outgoing,
) -> TryResult<UpstreamResponse> {
    let loc = Arc::clone(&ctx.loc);
    let k = Knobs::of(&loc.s, out.proto);
    let addr = &group.peer(peer).addr;
    let log = try_log(ctx, env, addr, out);
    let mut rec = TryRecord {
        addr: addr.to_string(),
        ..Default::default()
    };
    // Dropped half-way (the client left), the try still ends its time.
    let ending = rec.response.end_on_drop();
    let at = note_try(ctx, None, &rec);
    let sent = bytes_sent(ctx, out);
    // An idle connection may have been closed by the peer meanwhile: a
    // failure on it before any response byte is retried once on a new one
    // (not with a streamed body, which cannot be sent twice).
    let mut allow_pooled = group.keepalive > 0 && !matches!(out.body, ReqBody::Stream { .. });
    let result = loop {
        let opts = match connect_options(ctx, &k) {
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
            &k,
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
        rec.connect = Some(rec.response.elapsed());
        note_try(ctx, at, &rec);
        conn.requests += 1;
        let reused = conn.reused;
        match send_request_read_head(ctx, env, &k, conn, (out, &log)).await {
            Ok(got) => {
                rec.header = Some(rec.response.elapsed());
                rec.bytes_sent = sent;
                break head_arrived(group, &k, &log, got, out, &mut rec);
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
    // A response's time ends with its body (the body stream ends it).
    match &result {
        Ok(_) => ending.disarm(),
        Err(_) => rec.response.end(),
    }
    note_try(ctx, at, &rec);
    result
}

/// A try's response once its head arrived, or the head's failure (logged).
fn head_arrived(
    group: &UpstreamGroup,
    k: &Knobs<'_>,
    log: &RequestLog,
    got: Got,
    out: &Outgoing,
    rec: &mut TryRecord,
) -> Result<UpstreamResponse, Result<Failure, UpstreamError>> {
    rec.status = Some(got.head.status);
    let head_len = got.head.len as u64;
    match upstream_response(group, k, log, got, out) {
        Ok(mut r) => {
            rec.bytes_received.fetch_add(head_len, Ordering::Relaxed);
            r.body
                .set_counters(rec.bytes_received.clone(), rec.response_length.clone());
            r.body.set_span(rec.response.clone());
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
    ctx.log(env.log)
        .with_upstream(&format!("{}://{addr}{sep}{}", out.scheme(), out.uri))
}

/// `$upstream_bytes_sent` of a try: the head (with a body in memory), a
/// body in a temp file and a streamed body's length (a chunked one is not
/// counted).
fn bytes_sent(ctx: &RequestCtx, out: &Outgoing) -> u64 {
    out.head.len() as u64
        + match &out.body {
            ReqBody::Stream { chunked: false } => ctx.head.content_length.unwrap_or(0),
            ReqBody::Spooled(f) => f.len(),
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
    k: &Knobs<'_>,
    log: &RequestLog,
    got: Got,
    out: &Outgoing,
) -> Result<UpstreamResponse, HeadError> {
    let Got {
        conn,
        buf,
        head: rh,
        fcgi,
    } = got;
    if rh.status == 101 {
        // NGINX keeps no such connection (`u->keepalive = 0`). One the
        // client did not ask for goes on as a head alone (`switched`);
        // HTTP/2 has no 101 to send.
        if !out.upgrade && !out.relay_101 {
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
    let (framing, keeps) = match fcgi {
        Some(d) => fastcgi_framing(d, &buf, rh.status, out.head_req, log),
        None => {
            let f = Framing::of(&rh, out.head_req)?;
            // uwsgi and SCGI close after each request (NGINX never keeps
            // their connections).
            let keeps =
                out.proto == Protocol::Http && rh.keep_alive() && !matches!(f, Framing::Close);
            (f, keeps)
        }
    };
    let reusable = group.keepalive > 0 && keeps;
    let pool_return = reusable.then_some(PoolReturn {
        group: tls::pool_key(group.id, out.tls.is_some(), out.proto),
        max: group.keepalive,
        timeout: group.keepalive_timeout,
        requests: group.keepalive_requests,
        time: group.keepalive_time,
    });
    let addr = conn.addr.clone();
    let mut body = UpstreamBody::new(conn, buf, framing, k.read_timeout, pool_return);
    // NGINX paces the reads of its buffered pipe only: with buffering off
    // the body goes at the client's pace.
    body.set_rate(if k.buffering { k.limit_rate } else { 0 });
    body.set_log(log.clone());
    Ok(UpstreamResponse {
        head: rh,
        addr,
        body,
    })
}

/// A FastCGI response's framing and whether its connection may be kept
/// (`fastcgi_keep_conn`, read to `END_REQUEST`). A response without a
/// body (204, 304, or to a HEAD) ends with its head: what the
/// application sent past it is noted as NGINX notes it, and the
/// connection is not kept.
fn fastcgi_framing(
    mut d: Box<crate::upstream::fastcgi::BodyDecoder>,
    buf: &[u8],
    status: u16,
    head_req: bool,
    log: &RequestLog,
) -> (Framing, bool) {
    if !(head_req || status == 204 || status == 304) {
        let keeps = d.keep_conn();
        return (Framing::FastCgi(d), keeps);
    }
    if !head_req {
        let _ = d.decode(buf, &mut Vec::new());
        for n in d.take_notes() {
            if n == crate::upstream::fastcgi::Note::TooMuch {
                log.line(
                    Level::Warn,
                    format_args!("upstream sent more data than specified in \"Content-Length\" header while reading upstream"),
                );
            }
        }
    }
    (Framing::Empty, false)
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
            // A caught stderr line was logged as it came.
            if h != HeadError::CaughtStderr {
                log.error(format_args!(
                    "{h} while reading response header from upstream"
                ));
            }
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
