//! The `proxy_pass` content handler, in two steps so a cache can sit
//! between them:
//!
//! 1. [`fetch`]: pick a peer (`upstream` balancing), connect (or reuse an
//!    idle keep-alive connection), send the request head built from
//!    `proxy_set_header` and the client's headers, stream the client's
//!    body, read and parse the response head. Failures follow
//!    `proxy_next_upstream` to the next peer while nothing has been sent to
//!    the client, each logged with NGINX's text; the last one becomes 502
//!    or 504.
//! 2. [`into_response`]: turn the [`UpstreamResponse`] into the client
//!    [`Response`]: headers minus the hidden ones, Content-Length passed
//!    through or (length unknown) chunked to HTTP/1.1 clients, and the body
//!    as a [`Body::Stream`] the connection loop pulls piece by piece. With
//!    `proxy_cache`, [`super::proxy_cache`] sits between the two steps and
//!    wraps that stream to store what it sends.
//!
//! What NGINX does that porter does not (yet): buffering of large request
//! bodies to a temp file (a body over 64 KiB streams, so once it went to a
//! failing peer the request is not retried), regex `proxy_redirect`,
//! `proxy_cookie_*`.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::LocSettings;
use crate::handlers::{Env, Outcome};
use crate::http::body::ClientBody;
use crate::http::context::{Method, RequestCtx};
use crate::http::request::Version;
use crate::http::response::{Body, Response, StreamBody};
use crate::log::Level;
use crate::upstream::wire::{self, Framing, HeadError};
use crate::upstream::{
    self, balance::PeerSet, pool, BodyLog, NextUpstream, PeerRef, PoolReturn, ProxyPass,
    ProxyTarget, RedirectRule, TryRecord, UpstreamBody, UpstreamConn, UpstreamGroup,
    UpstreamResponse, UpstreamVars,
};

/// A request body up to this long is read whole before the upstream is
/// asked (like NGINX's `client_body_buffer_size`, in memory): it can then
/// be sent again to the next peer, or on a fresh connection when a pooled
/// one turns out dead. Longer bodies stream.
const SMALL_BODY: u64 = 64 * 1024;

/// Why [`fetch`] produced no response (already logged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamError {
    /// Answer with this status (502, 504, 413, 500).
    Status(u16),
    /// The client went away or sent a broken body: close without answering.
    ClientGone,
}

/// Response headers NGINX's proxy never passes: it sends its own Date and
/// Server, and the hop-by-hop headers belong to the upstream connection.
const HIDDEN: &[&str] = &[
    "date",
    "server",
    "x-pad",
    "x-accel-expires",
    "x-accel-redirect",
    "x-accel-limit-rate",
    "x-accel-buffering",
    "x-accel-charset",
];
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "upgrade",
    "te",
    "trailer",
    "proxy-connection",
];
/// Request headers `proxy_set_header` governs even when not set (NGINX's
/// `ngx_http_proxy_headers`): a client's own are never passed on.
const SET_BY_PROXY: &[&str] = &[
    "host",
    "connection",
    "content-length",
    "transfer-encoding",
    "te",
    "keep-alive",
    "expect",
    "upgrade",
];

/// The content handler: through the cache when `proxy_cache` is on.
pub async fn serve(ctx: &mut RequestCtx, env: &Env<'_>, pass: &Arc<ProxyPass>) -> Outcome {
    if let Some(zone) = ctx.loc.s.proxy_cache.clone() {
        return super::proxy_cache::serve(ctx, env, pass, &zone).await;
    }
    serve_with(ctx, env, pass, &FetchOptions::default()).await
}

/// Proxies without the cache (a request the cache does not take).
pub async fn serve_with(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    pass: &Arc<ProxyPass>,
    opts: &FetchOptions,
) -> Outcome {
    match fetch_with(ctx, env, pass, opts).await {
        Ok(up) => match intercepted(ctx, up.status()) {
            Some(o) => o,
            None => Outcome::Send(into_response(ctx, pass, up)),
        },
        Err(UpstreamError::Status(code)) => Outcome::Status(code),
        Err(UpstreamError::ClientGone) => Outcome::Close,
    }
}

/// `proxy_intercept_errors`: an upstream status with an `error_page`
/// becomes that page.
pub fn intercepted(ctx: &RequestCtx, status: u16) -> Option<Outcome> {
    let s = &ctx.loc.s;
    (s.proxy_intercept_errors
        && status >= 300
        && s.error_pages.iter().any(|p| p.codes.contains(&status)))
    .then_some(Outcome::Status(status))
}

/// How a request goes upstream when a cache is involved.
#[derive(Debug, Default, Clone)]
pub struct FetchOptions {
    /// `proxy_cache` is on in the location: NGINX's cache header rules
    /// apply (the client's `If-*`, `Range`, `Expect` and `Keep-Alive`
    /// are not passed unless `proxy_set_header` sets them).
    pub cache: bool,
    /// Ask with GET for a HEAD request (`proxy_cache_convert_head`, so the
    /// body can be stored).
    pub head_as_get: bool,
    /// `If-None-Match` of a stale entry (`proxy_cache_revalidate`).
    pub if_none_match: Option<String>,
    /// `If-Modified-Since` of a stale entry (`proxy_cache_revalidate`).
    pub if_modified_since: Option<String>,
}

/// Request headers NGINX's proxy clears when a cache is configured
/// (`ngx_http_proxy_cache_headers`).
const CLEARED_FOR_CACHE: &[&str] = &[
    "if-modified-since",
    "if-unmodified-since",
    "if-none-match",
    "if-match",
    "range",
    "if-range",
];

/// Sets up `$proxy_host` and the rest of the request's upstream variables
/// (the default cache key needs them before anything is sent).
pub fn prepare(ctx: &mut RequestCtx, env: &Env<'_>, pass: &ProxyPass) -> Result<(), UpstreamError> {
    resolve_target(ctx, env, pass).map(|_| ())
}

/// NGINX's `ngx_escape_uri` (URI table): space, `#`, `%`, `?`, controls
/// and non-ASCII bytes become `%XX`.
pub fn escape_uri(s: &str, out: &mut String) {
    use std::fmt::Write as _;
    for &b in s.as_bytes() {
        if b <= 0x20 || b >= 0x7f || matches!(b, b'#' | b'%' | b'?') {
            let _ = write!(out, "%{b:02X}");
        } else {
            out.push(b as char);
        }
    }
}

/// The URI sent upstream, by NGINX's rules: a literal `proxy_pass` with a
/// URI part replaces the location's prefix with it; one without passes the
/// client's URI as it was sent (the normalised URI after an internal
/// redirect); a URL with variables that has a URI part is sent as is.
pub fn upstream_uri(
    ctx: &RequestCtx,
    pass: &ProxyPass,
    url_uri: Option<&str>,
    dynamic: bool,
) -> String {
    let mut out = String::with_capacity(ctx.uri.len() + 16);
    match url_uri {
        Some(u) if dynamic => out.push_str(u),
        None if !ctx.internal && ctx.head.target.starts_with('/') => out.push_str(&ctx.head.target),
        _ => {
            let rest = match url_uri {
                Some(u) => {
                    out.push_str(u);
                    ctx.uri
                        .strip_prefix(pass.location.as_str())
                        .unwrap_or(&ctx.uri)
                }
                None => &ctx.uri,
            };
            escape_uri(rest, &mut out);
            if let Some(a) = &ctx.args {
                out.push('?');
                out.push_str(a);
            }
        }
    }
    out
}

/// How the request body travels upstream.
enum ReqBody {
    /// No body.
    None,
    /// Read from the client while sending; `chunked` re-frames it.
    Stream { chunked: bool },
    /// Read whole first (a chunked body to an HTTP/1.0 upstream).
    Buffered(Vec<u8>),
}

/// The request head sent upstream: `proxy_set_header` lines (then NGINX's
/// default Host and Connection), the body's framing, then the client's
/// headers not governed by the proxy.
fn request_headers(
    ctx: &RequestCtx,
    s: &LocSettings,
    body: &ReqBody,
    opts: &FetchOptions,
) -> Vec<(String, String)> {
    let mut out = Vec::with_capacity(ctx.head.headers.len() + 4);
    let set = &s.proxy_set_header;
    let named = |n: &str| set.iter().any(|(k, _)| k.eq_ignore_ascii_case(n));
    for (n, t) in set.iter() {
        let v = t.render(ctx);
        if !v.is_empty() {
            out.push((n.clone(), v));
        }
    }
    if !named("host") {
        let host = ctx.upstream.as_ref().map_or("", |u| u.proxy_host.as_str());
        out.push(("Host".into(), host.to_string()));
    }
    if !named("connection") {
        out.push(("Connection".into(), "close".into()));
    }
    if opts.cache {
        if let (Some(v), false) = (&opts.if_modified_since, named("if-modified-since")) {
            out.push(("If-Modified-Since".into(), v.clone()));
        }
        if let (Some(v), false) = (&opts.if_none_match, named("if-none-match")) {
            out.push(("If-None-Match".into(), v.clone()));
        }
    }
    match body {
        ReqBody::None => {
            if ctx.head.content_length == Some(0) && s.proxy_pass_request_body {
                out.push(("Content-Length".into(), "0".into()));
            }
        }
        ReqBody::Stream { chunked: true } => {
            out.push(("Transfer-Encoding".into(), "chunked".into()))
        }
        ReqBody::Stream { chunked: false } => out.push((
            "Content-Length".into(),
            ctx.head.content_length.unwrap_or(0).to_string(),
        )),
        ReqBody::Buffered(b) => out.push(("Content-Length".into(), b.len().to_string())),
    }
    if s.proxy_pass_request_headers {
        for (n, v) in &ctx.head.headers {
            let lower = n.to_ascii_lowercase();
            if SET_BY_PROXY.contains(&lower.as_str())
                || named(&lower)
                || (opts.cache && CLEARED_FOR_CACHE.contains(&lower.as_str()))
            {
                continue;
            }
            out.push((n.clone(), v.clone()));
        }
    }
    out
}

/// A failed try: what to log, the status it gives, and its
/// `proxy_next_upstream` condition.
struct Failure {
    status: u16,
    cond: u16,
    /// The peer is at fault (counts towards `max_fails`).
    peer_failed: bool,
    /// The request (or part of it) reached the peer.
    sent: bool,
}

/// Where the target of this request resolved.
struct Target {
    group: Arc<UpstreamGroup>,
    url_uri: Option<String>,
    dynamic: bool,
}

fn log_ctx(ctx: &RequestCtx, upstream: &str) -> String {
    let mut s = format!(
        ", client: {}, server: {}, request: \"{}\", upstream: \"{upstream}\"",
        ctx.conn.peer.ip(),
        ctx.server.primary_name,
        ctx.request_line()
    );
    if let Some(h) = &ctx.head.host {
        s.push_str(&format!(", host: \"{h}\""));
    }
    s
}

fn cache_status(ctx: &RequestCtx) -> Option<crate::cache::CacheStatus> {
    ctx.upstream.as_ref().and_then(|u| u.cache_status)
}

fn resolve_target(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    pass: &ProxyPass,
) -> Result<Target, UpstreamError> {
    match &pass.target {
        ProxyTarget::Group(g) => {
            ctx.upstream = Some(Box::new(UpstreamVars {
                proxy_host: pass.proxy_host.clone(),
                proxy_port: pass.proxy_port.to_string(),
                cache_status: cache_status(ctx),
                ..Default::default()
            }));
            Ok(Target {
                group: Arc::clone(g),
                url_uri: pass.uri.clone(),
                dynamic: false,
            })
        }
        ProxyTarget::Dynamic(t) => {
            let url = t.render(ctx);
            let split = match upstream::split_url(&url) {
                Ok(s) => s,
                Err(e) => {
                    env.log.log_conn(
                        Level::Error,
                        Some(ctx.conn.id),
                        format_args!("{e}"),
                        &ctx.log_context(),
                    );
                    return Err(UpstreamError::Status(500));
                }
            };
            let proxy_host = match split.port {
                Some(p) if p != 80 => format!("{}:{p}", split.host),
                _ => split.host.clone(),
            };
            ctx.upstream = Some(Box::new(UpstreamVars {
                proxy_host: proxy_host.clone(),
                proxy_port: split.port.unwrap_or(80).to_string(),
                cache_status: cache_status(ctx),
                ..Default::default()
            }));
            let group = match pass.groups.iter().find(|g| g.name == split.host) {
                Some(g) => Arc::clone(g),
                None => {
                    let bare = split.host.trim_start_matches('[').trim_end_matches(']');
                    let Ok(ip) = bare.parse::<std::net::IpAddr>() else {
                        env.log.log_conn(
                            Level::Error,
                            Some(ctx.conn.id),
                            format_args!("no resolver defined to resolve {}", split.host),
                            &ctx.log_context(),
                        );
                        return Err(UpstreamError::Status(502));
                    };
                    // An address known only now: a one-request group.
                    Arc::new(UpstreamGroup {
                        id: upstream::balance::next_id(),
                        name: proxy_host.clone(),
                        primary: PeerSet::new(vec![upstream::PeerSpec {
                            server: proxy_host,
                            addr: std::net::SocketAddr::new(ip, split.port.unwrap_or(80)),
                            weight: 1,
                            max_fails: 1,
                            fail_timeout: Duration::from_secs(10),
                            down: false,
                        }]),
                        backup: PeerSet::new(Vec::new()),
                        hash: None,
                        keepalive: 0,
                        keepalive_timeout: Duration::from_secs(60),
                        keepalive_requests: 1000,
                    })
                }
            };
            Ok(Target {
                group,
                url_uri: split.uri,
                dynamic: true,
            })
        }
    }
}

/// Step one: the upstream's response head, with its body still to read.
// The connection loop waits while the handler runs: no one else borrows
// the request body meanwhile.
#[allow(clippy::await_holding_refcell_ref)]
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
    let loc = Arc::clone(&ctx.loc);
    let s = &loc.s;
    let target = resolve_target(ctx, env, pass)?;
    let group = target.group;
    let uri = upstream_uri(ctx, pass, target.url_uri.as_deref(), target.dynamic);
    let method =
        if ctx.method == Method::Get && ctx.head.method != "GET" && ctx.head.method != "HEAD" {
            // An error_page redirect turned the request into a GET.
            "GET".to_string()
        } else if opts.head_as_get && ctx.head.method == "HEAD" {
            "GET".to_string()
        } else {
            ctx.head.method.clone()
        };
    let head_req = method == "HEAD";

    // The body: streamed as it arrives, except a chunked one to an
    // HTTP/1.0 upstream, which needs its length first.
    let client_body = env
        .body
        .filter(|b| s.proxy_pass_request_body && !b.borrow().is_done());
    let mut body = match client_body {
        None => ReqBody::None,
        Some(b) => {
            ctx.test_expect();
            if ctx.send_continue {
                ctx.send_continue = false;
                if b.borrow().send_continue(s.send_timeout).await.is_err() {
                    return Err(UpstreamError::ClientGone);
                }
            }
            let chunked = b.borrow().is_chunked();
            let small = ctx.head.content_length.is_some_and(|n| n <= SMALL_BODY);
            if (chunked && !s.proxy_http11) || small {
                ReqBody::Buffered(read_whole_body(ctx, env, b).await?)
            } else {
                ReqBody::Stream { chunked }
            }
        }
    };
    let headers = request_headers(ctx, s, &body, opts);
    let mut head = wire::request_head(&method, &uri, s.proxy_http11, &headers);
    if let ReqBody::Buffered(b) = &mut body {
        head.append(b);
    }

    let key = group.hash.as_ref().map(|h| h.key.render(ctx));
    let mut sel = group.selection(key);
    let max_tries = match s.proxy_next_upstream_tries {
        0 => group.peer_count(),
        n => (n as usize).min(group.peer_count()),
    };
    let idempotent = !matches!(method.as_str(), "POST" | "LOCK" | "PATCH");
    let started = Instant::now();
    let mut tries = 0;
    loop {
        let Some(peer) = group.select(&mut sel) else {
            env.log.log_conn(
                Level::Error,
                Some(ctx.conn.id),
                format_args!("no live upstreams while connecting to upstream"),
                &log_ctx(ctx, &format!("http://{}{uri}", group.name)),
            );
            if let Some(u) = ctx.upstream.as_mut() {
                u.tries.push(TryRecord {
                    addr: group.name.clone(),
                    status: Some(502),
                    ..Default::default()
                });
            }
            return Err(UpstreamError::Status(502));
        };
        tries += 1;
        let outcome = attempt(ctx, env, s, &group, peer, &head, &body, &uri, head_req).await;
        let body_spent = match (&body, client_body) {
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
                && (idempotent || !sent || s.proxy_next_upstream.has(NextUpstream::NON_IDEMPOTENT))
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

/// Reads a whole chunked request body (bounded by `client_max_body_size`).
// The connection loop waits while the handler runs: no one else borrows
// the request body meanwhile.
#[allow(clippy::await_holding_refcell_ref)]
async fn read_whole_body(
    ctx: &RequestCtx,
    env: &Env<'_>,
    b: &RefCell<ClientBody<'_>>,
) -> Result<Vec<u8>, UpstreamError> {
    let max = ctx.loc.s.client_max_body_size;
    let mut all = Vec::new();
    // The connection loop waits for this handler: nothing else borrows the
    // body meanwhile.
    let mut b = b.borrow_mut();
    loop {
        match b.read(&mut all).await {
            Ok(true) => {
                if max != 0 && all.len() as u64 > max {
                    too_large(ctx, env, all.len() as u64);
                    return Err(UpstreamError::Status(413));
                }
            }
            Ok(false) => return Ok(all),
            Err(e) => return Err(client_body_error(ctx, env, &e)),
        }
    }
}

fn too_large(ctx: &RequestCtx, env: &Env<'_>, n: u64) {
    env.log.log_conn(
        Level::Error,
        Some(ctx.conn.id),
        format_args!("client intended to send too large chunked body: {n} bytes"),
        &ctx.log_context(),
    );
}

fn client_body_error(ctx: &RequestCtx, env: &Env<'_>, e: &std::io::Error) -> UpstreamError {
    let what = match e.kind() {
        std::io::ErrorKind::TimedOut => {
            "client timed out (110: Connection timed out) while reading client request body"
        }
        std::io::ErrorKind::InvalidData => "client sent invalid chunked body",
        _ => "client prematurely closed connection",
    };
    env.log.log_conn(
        Level::Info,
        Some(ctx.conn.id),
        format_args!("{what}"),
        &ctx.log_context(),
    );
    if e.kind() == std::io::ErrorKind::InvalidData {
        UpstreamError::Status(400)
    } else {
        UpstreamError::ClientGone
    }
}

/// One try at `peer`: `Err(Ok(_))` is the peer's failure (logged),
/// `Err(Err(_))` one that ends the request.
#[allow(clippy::too_many_arguments)]
async fn attempt(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    s: &LocSettings,
    group: &UpstreamGroup,
    peer: PeerRef,
    head: &[u8],
    body: &ReqBody,
    uri: &str,
    head_req: bool,
) -> Result<UpstreamResponse, Result<Failure, UpstreamError>> {
    let addr = group.peer(peer).addr;
    let t0 = Instant::now();
    let lctx = log_ctx(ctx, &format!("http://{addr}{uri}"));
    let mut rec = TryRecord {
        addr: addr.to_string(),
        ..Default::default()
    };
    let log = |msg: std::fmt::Arguments<'_>| {
        env.log
            .log_conn(Level::Error, Some(ctx.conn.id), msg, &lctx)
    };
    let streamed = matches!(body, ReqBody::Stream { .. });
    // An idle connection may have been closed by the peer meanwhile: a
    // failure on it before any response byte is retried once on a new one
    // (not with a streamed body, which cannot be sent twice).
    let mut allow_pooled = group.keepalive > 0 && !streamed;
    let result = loop {
        let pooled = if allow_pooled {
            pool::take(group.id, addr, group.keepalive_timeout)
        } else {
            None
        };
        let mut conn = match pooled {
            Some(c) => c,
            None => match upstream::connect(addr, s.proxy_connect_timeout).await {
                Ok(stream) => UpstreamConn {
                    stream: std::rc::Rc::new(stream),
                    addr,
                    requests: 0,
                    reused: false,
                },
                Err(e) => {
                    let timed_out = e.raw_os_error() == Some(libc::ETIMEDOUT);
                    if timed_out {
                        log(format_args!("upstream timed out (110: Connection timed out) while connecting to upstream"));
                    } else {
                        log(format_args!(
                            "connect() failed {} while connecting to upstream",
                            crate::util::errno_text(&e)
                        ));
                    }
                    break Err(Ok(fail(timed_out, false, &mut rec)));
                }
            },
        };
        rec.connect = Some(t0.elapsed());
        conn.requests += 1;
        let reused = conn.reused;
        match exchange(ctx, env, s, conn, head, body).await {
            Ok((conn, buf, rh)) => {
                rec.header = Some(t0.elapsed());
                rec.status = Some(rh.status);
                let framing = match Framing::of(&rh, head_req) {
                    Ok(f) => f,
                    Err(e) => {
                        log(format_args!(
                            "{e} while reading response header from upstream"
                        ));
                        rec.status = Some(502);
                        break Err(Ok(Failure {
                            status: 502,
                            cond: NextUpstream::INVALID_HEADER,
                            peer_failed: true,
                            sent: true,
                        }));
                    }
                };
                let reusable =
                    group.keepalive > 0 && rh.keep_alive() && !matches!(framing, Framing::Close);
                let pool_return = reusable.then_some(PoolReturn {
                    group: group.id,
                    max: group.keepalive,
                    timeout: group.keepalive_timeout,
                    requests: group.keepalive_requests,
                });
                let mut ub =
                    UpstreamBody::new(conn, buf, framing, s.proxy_read_timeout, pool_return);
                ub.set_log(BodyLog {
                    log: env.log.clone(),
                    conn: ctx.conn.id,
                    context: lctx.clone(),
                });
                break Ok(UpstreamResponse {
                    head: rh,
                    addr,
                    body: ub,
                });
            }
            Err(Step::Early(e)) if reused => {
                // The pooled connection was dead: try a new one.
                let _ = e;
                allow_pooled = false;
                continue;
            }
            Err(Step::Early(e)) | Err(Step::Head(e)) => {
                let f = match e {
                    HeadFail::Closed => {
                        log(format_args!("upstream prematurely closed connection while reading response header from upstream"));
                        fail(false, true, &mut rec)
                    }
                    HeadFail::Io(e, phase) => {
                        let timed_out = e.raw_os_error() == Some(libc::ETIMEDOUT);
                        if timed_out {
                            log(format_args!(
                                "upstream timed out (110: Connection timed out) while {phase}"
                            ));
                        } else {
                            let op = if phase.starts_with("sending") {
                                "send()"
                            } else {
                                "recv()"
                            };
                            log(format_args!(
                                "{op} failed {} while {phase}",
                                crate::util::errno_text(&e)
                            ));
                        }
                        fail(timed_out, true, &mut rec)
                    }
                    HeadFail::Invalid(h) => {
                        log(format_args!(
                            "{h} while reading response header from upstream"
                        ));
                        rec.status = Some(502);
                        Failure {
                            status: 502,
                            cond: NextUpstream::INVALID_HEADER,
                            peer_failed: true,
                            sent: true,
                        }
                    }
                };
                break Err(Ok(f));
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

fn method_is_head(ctx: &RequestCtx) -> bool {
    ctx.head.method == "HEAD"
}

fn fail(timed_out: bool, sent: bool, rec: &mut TryRecord) -> Failure {
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

/// Sends the request (head, body) on `conn` and reads the response head,
/// skipping `100 Continue` and other 1xx heads.
// The connection loop waits while the handler runs: no one else borrows
// the request body meanwhile.
#[allow(clippy::await_holding_refcell_ref)]
async fn exchange(
    ctx: &RequestCtx,
    env: &Env<'_>,
    s: &LocSettings,
    conn: UpstreamConn,
    head: &[u8],
    body: &ReqBody,
) -> Result<(UpstreamConn, Vec<u8>, wire::ResponseHead), Step> {
    const SENDING: &str = "sending request to upstream";
    const READING: &str = "reading response header from upstream";
    let st = &conn.stream;
    if let Err(e) = upstream::write_all(st, head, s.proxy_send_timeout).await {
        return Err(Step::Early(HeadFail::Io(e, SENDING)));
    }
    if let ReqBody::Stream { chunked } = body {
        let b = env.body.expect("a streamed body has a source");
        // The connection loop waits for this handler: nothing else borrows
        // the body meanwhile.
        let mut b = b.borrow_mut();
        let max = s.client_max_body_size;
        let mut piece = Vec::with_capacity(upstream::READ_CHUNK);
        loop {
            piece.clear();
            if *chunked {
                piece.extend_from_slice(b"0000000000000000\r\n");
            }
            let start = piece.len();
            match b.read(&mut piece).await {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => return Err(Step::Client(client_body_error(ctx, env, &e))),
            }
            if *chunked {
                if max != 0 && b.read > max {
                    too_large(ctx, env, b.read);
                    return Err(Step::Client(UpstreamError::Status(413)));
                }
                // The size line goes in front of the data, right-aligned
                // in the room left for it.
                let size = format!("{:x}\r\n", piece.len() - start);
                let from = start - size.len();
                piece[from..start].copy_from_slice(size.as_bytes());
                piece.extend_from_slice(b"\r\n");
                if let Err(e) = upstream::write_all(st, &piece[from..], s.proxy_send_timeout).await
                {
                    return Err(Step::Head(HeadFail::Io(e, SENDING)));
                }
            } else if let Err(e) = upstream::write_all(st, &piece, s.proxy_send_timeout).await {
                return Err(Step::Head(HeadFail::Io(e, SENDING)));
            }
        }
        if *chunked {
            if let Err(e) = upstream::write_all(st, b"0\r\n\r\n", s.proxy_send_timeout).await {
                return Err(Step::Head(HeadFail::Io(e, SENDING)));
            }
        }
    }
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
        match upstream::read_some(st, &mut buf, s.proxy_read_timeout).await {
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

/// Step two: the client response for an upstream response — its status
/// and headers (less the hidden and hop-by-hop ones) and its body as a
/// stream.
pub fn into_response(ctx: &RequestCtx, pass: &ProxyPass, up: UpstreamResponse) -> Response {
    let mut r = head_response(ctx, pass, up.status(), up.headers());
    let empty = up.body.is_complete();
    r.content_length = up.content_length();
    if empty {
        r.body = Body::Empty;
        if r.content_length.is_none()
            && !(up.status() == 204 || up.status() == 304 || method_is_head(ctx))
        {
            r.content_length = Some(0);
        }
    } else {
        if r.content_length.is_none() {
            if ctx.head.version == Version::Http11 {
                r.chunked = true;
            } else {
                r.close = true;
            }
        }
        r.body = Body::Stream(StreamBody::new(Box::new(up.body)));
    }
    r
}

/// The client response's status and headers for an upstream's (or a
/// cached entry's) `status` and `headers`: less the hidden and hop-by-hop
/// ones, `Location` rewritten, validators in their slots. No body.
pub fn head_response(
    ctx: &RequestCtx,
    pass: &ProxyPass,
    status: u16,
    headers: &[(String, String)],
) -> Response {
    let s = &ctx.loc.s;
    let mut r = Response::new(status);
    let hidden = |n: &str| {
        (HIDDEN.contains(&n) && !s.proxy_pass_header.iter().any(|p| p == n))
            || s.proxy_hide_header.iter().any(|p| p == n)
    };
    for (n, v) in headers {
        let lower = n.to_ascii_lowercase();
        if HOP_BY_HOP.contains(&lower.as_str()) || hidden(&lower) {
            continue;
        }
        match lower.as_str() {
            "server" => {
                r.own_server = false;
                r.headers.push((n.clone(), v.clone()));
            }
            "date" => {
                r.own_date = false;
                r.headers.push((n.clone(), v.clone()));
            }
            "content-type" if r.content_type.is_none() => r.content_type = Some(v.clone()),
            "etag" if r.etag.is_none() => r.etag = Some(v.clone()),
            "location" if r.location.is_none() => match rewrite_location(ctx, pass, v) {
                // Rewritten to a path: made absolute and sent in its own
                // slot, as NGINX's header filter does. Anything else
                // (a URL, or a Location no rule matched) stays in line.
                Some(v) if v.starts_with('/') => {
                    r.location = Some(crate::handlers::absolute_location(ctx, &v))
                }
                Some(v) => r.headers.push((n.clone(), v)),
                None => r.headers.push((n.clone(), v.clone())),
            },
            // In line, where the upstream put it (NGINX's header filter
            // writes a proxied Last-Modified among the other lines); the
            // parsed time is for the conditional filters.
            "last-modified" if r.last_modified.is_none() => {
                if let Ok(t) = httpdate::parse_http_date(v) {
                    r.last_modified = t
                        .duration_since(std::time::UNIX_EPOCH)
                        .ok()
                        .map(|d| d.as_secs() as i64);
                    r.last_modified_inline = true;
                }
                r.headers.push((n.clone(), v.clone()));
            }
            _ => r.headers.push((n.clone(), v.clone())),
        }
    }
    r
}

/// Whether an upstream header is hop-by-hop (never stored or passed).
pub fn hop_by_hop(name: &str) -> bool {
    HOP_BY_HOP.iter().any(|h| h.eq_ignore_ascii_case(name))
}

/// An upstream's `Location` after `proxy_redirect`: the first rule whose
/// prefix matches replaces it (`None`: no rule matched).
fn rewrite_location(ctx: &RequestCtx, pass: &ProxyPass, v: &str) -> Option<String> {
    for rule in ctx.loc.s.proxy_redirect.iter() {
        let (from, to) = match rule {
            RedirectRule::Default => match &pass.redirect_default {
                Some((f, t)) => (f.clone(), t.clone()),
                None => continue,
            },
            RedirectRule::Replace(f, t) => (f.render(ctx), t.render(ctx)),
        };
        if let Some(rest) = v.strip_prefix(from.as_str()) {
            return Some(format!("{to}{rest}"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_like_nginx() {
        let mut out = String::new();
        escape_uri("/a b/%?#é~", &mut out);
        assert_eq!(out, "/a%20b/%25%3F%23%C3%A9~");
    }
}
