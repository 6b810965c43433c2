//! What goes upstream: the request's URI (NGINX's `proxy_pass` rules),
//! method, head (`proxy_set_header` lines, then the client's headers the
//! proxy does not govern) and body (streamed, or read whole first when it
//! is small or must be re-framed), and how a failure on the client's side
//! is answered. The lowest layer of the proxy: it imports nothing of the
//! other files of `handlers/proxy/`.

use std::borrow::Cow;
use std::cell::RefCell;

use smallvec::SmallVec;

use crate::config::LocSettings;
use crate::disk::{Failure, Spool};
use crate::handlers::disk_io;
use crate::handlers::outcome::Env;
use crate::http::body::ClientBody;
use crate::http::context::{Method, RequestCtx};
use crate::log::Level;
use crate::upstream::{wire, ProxyPass};

/// A body in a temp file is written in pieces of about this size.
const SPOOL_PIECE: usize = 64 * 1024;

/// Why [`super::fetch`] produced no response (already logged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamError {
    /// Answer with this status (502, 504, 413, 500).
    Status(u16),
    /// The client went away or sent a broken body: close without answering.
    ClientGone,
}

/// How a request goes upstream when a cache is involved.
#[derive(Debug, Default, Clone)]
pub struct FetchOptions {
    /// `proxy_cache` is on in the location: NGINX's cache header rules
    /// apply (the client's `If-*`, `Range`, `Expect` and `Keep-Alive`
    /// are not passed unless `proxy_set_header` sets them).
    pub cache_headers: bool,
    /// Ask with GET for a HEAD request (`proxy_cache_convert_head`, so the
    /// body can be stored).
    pub head_as_get: bool,
    /// `If-None-Match` of a stale entry (`proxy_cache_revalidate`).
    pub if_none_match: Option<String>,
    /// `If-Modified-Since` of a stale entry (`proxy_cache_revalidate`).
    pub if_modified_since: Option<String>,
}

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

/// Request headers NGINX's proxy clears when a cache is configured
/// (`ngx_http_proxy_cache_headers`).
pub(super) const CLEARED_FOR_CACHE: &[&str] = &[
    "if-modified-since",
    "if-unmodified-since",
    "if-none-match",
    "if-match",
    "range",
    "if-range",
];

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
/// redirect), as does one after `rewrite ... break`; a URL with variables
/// that has a URI part is sent as is.
pub fn upstream_uri(
    ctx: &RequestCtx,
    pass: &ProxyPass,
    url_uri: Option<&str>,
    dynamic: bool,
) -> String {
    let mut out = String::with_capacity(ctx.uri.len() + 16);
    match url_uri {
        Some(u) if dynamic => out.push_str(u),
        None if !ctx.internal && ctx.head.target().starts_with('/') => {
            out.push_str(ctx.head.target())
        }
        _ => {
            // After `rewrite ... break` the whole URI goes (NGINX's
            // `valid_location`), the URI part set aside.
            let rest = match url_uri.filter(|_| ctx.valid_location) {
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

/// Whether the client asked for an upgrade, so that a `101` from the
/// upstream becomes a tunnel: its request carries `Upgrade` (NGINX's
/// `r->headers_in.upgrade`, whatever `Connection` says) and came over
/// HTTP/1.x, or is an HTTP/2 extended CONNECT for WebSocket (RFC 8441,
/// `http2/request.rs`: its tunnel is the stream); another HTTP/2 stream
/// cannot switch protocols.
pub fn upgrade_asked(ctx: &RequestCtx) -> bool {
    (!ctx.conn.multiplexed() || ctx.head.extended_connect) && ctx.head.header("upgrade").is_some()
}

/// The method sent upstream: GET for a HEAD the cache asks as GET
/// (`proxy_cache_convert_head`), else `proxy_method`, else GET for a
/// request an `error_page` redirect turned into one, else the client's.
pub fn upstream_method(ctx: &RequestCtx, opts: &FetchOptions) -> String {
    if opts.head_as_get && ctx.is_head() {
        return "GET".to_string();
    }
    // `proxy_method` comes next, as NGINX's create_request takes it before
    // the request's own (possibly redirected) method.
    if let Some(m) = &ctx.loc.s.proxy_method {
        let m = m.render(ctx);
        if !m.is_empty() {
            return m;
        }
    }
    let redirected_to_get =
        ctx.method == Method::Get && Method::from_token(ctx.head.method()) != Method::Get;
    if redirected_to_get {
        "GET".to_string()
    } else {
        ctx.head.method().to_string()
    }
}

/// How the request body travels upstream.
pub enum ReqBody {
    /// No body.
    None,
    /// Read from the client while sending; `chunked` re-frames it.
    Stream { chunked: bool },
    /// Read whole first, into memory (a body up to
    /// `client_body_buffer_size`).
    Buffered(Vec<u8>),
    /// Read whole first, into a temp file (`client_body_temp_path`): sent
    /// from it to each peer tried.
    Spooled(Spool),
}

/// The request head (with a body read whole appended) and how the body
/// travels: streamed as it arrives, except a small one or a chunked one to
/// an HTTP/1.0 upstream, which is read whole first (so it can be sent
/// again, and an HTTP/1.0 upstream gets its length).
// The connection loop waits while the handler runs: no one else borrows
// the request body meanwhile.
#[allow(clippy::await_holding_refcell_ref)]
pub async fn build_request(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    client_body: Option<&RefCell<ClientBody<'_>>>,
    method: &str,
    uri: &str,
    opts: &FetchOptions,
) -> Result<(Vec<u8>, ReqBody), UpstreamError> {
    let loc = std::sync::Arc::clone(&ctx.loc);
    let s = &loc.s;
    let set_body = s.proxy_set_body.as_ref().map(|t| t.render(ctx));
    let buffering = s.proxy_request_buffering;
    let mut body =
        request_body(ctx, env, client_body, set_body, !s.proxy_http11, buffering).await?;
    let headers = request_headers(ctx, s, &body, opts);
    let mut head = wire::request_head(method, uri, s.proxy_http11, &headers);
    if let ReqBody::Buffered(b) = &mut body {
        head.append(b);
    }
    Ok((head, body))
}

/// How the client's body goes upstream: `set_body` in its place
/// (`proxy_set_body`), else read whole first (`buffering`: the
/// protocol's `*_request_buffering`, on by default as in NGINX; a small
/// body, or a chunked one when `whole_chunked`: an HTTP/1.0 upstream, or
/// FastCGI, uwsgi and SCGI, which need a length), else streamed as it
/// arrives.
// The connection loop waits while the handler runs: no one else borrows
// the request body meanwhile.
#[allow(clippy::await_holding_refcell_ref)]
pub async fn request_body(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    client_body: Option<&RefCell<ClientBody<'_>>>,
    set_body: Option<String>,
    whole_chunked: bool,
    buffering: bool,
) -> Result<ReqBody, UpstreamError> {
    let send_timeout = ctx.loc.s.send_timeout;
    // NGINX reads (or tests) the body of every proxied request: an
    // `Expect: 100-continue` gets its `100 Continue` even with no body
    // (`Content-Length: 0`), sent then before the response.
    ctx.test_expect();
    Ok(match client_body {
        // `proxy_set_body`: that text instead of the client's body, which
        // stays unread (discarded after the response).
        _ if set_body.is_some() => {
            if ctx.send_continue {
                // The client's body is not wanted: no `100 Continue`.
                ctx.send_continue = false;
            }
            ReqBody::Buffered(set_body.unwrap_or_default().into_bytes())
        }
        None => ReqBody::None,
        Some(b) => {
            if ctx.send_continue {
                ctx.send_continue = false;
                if b.borrow().send_continue(send_timeout).await.is_err() {
                    return Err(UpstreamError::ClientGone);
                }
            }
            let chunked = b.borrow().is_chunked();
            // With buffering off NGINX sends the head at once, with what
            // of the body came with it (the preread), unless the whole
            // body is there already: then it is read whole, as buffered
            // (`request_body_no_buffering = 0`), so `$request_body` has it.
            let now = (ctx.loc.s.client_body_buffer_size as usize).max(64 * 1024);
            b.borrow_mut().fill_now(now);
            let whole_now = b.borrow().whole_buffered();
            if buffering || (chunked && whole_chunked) || whole_now {
                read_whole_body(ctx, env, b, buffering).await?
            } else {
                ReqBody::Stream { chunked }
            }
        }
    })
}

/// A line of the request head sent upstream: borrowed from the
/// configuration or the client's head where it can be, so that passing a
/// client's headers on copies them once, into the head's bytes.
type HeadLine<'a> = (Cow<'a, str>, Cow<'a, str>);

/// The request head sent upstream: `proxy_set_header` lines (then NGINX's
/// default Host and Connection), the body's framing, then the client's
/// headers not governed by the proxy.
fn request_headers<'a>(
    ctx: &'a RequestCtx,
    s: &'a LocSettings,
    body: &ReqBody,
    opts: &'a FetchOptions,
) -> SmallVec<[HeadLine<'a>; 16]> {
    let mut out = SmallVec::new();
    let set = &s.proxy_set_header;
    let named = |n: &str| set.iter().any(|(k, _)| k.eq_ignore_ascii_case(n));
    for (n, t) in set.iter() {
        let v = t.render(ctx);
        if !v.is_empty() {
            out.push((n.into(), v.into()));
        }
    }
    if !named("host") {
        let host = ctx.upstream.as_ref().map_or("", |u| u.proxy_host.as_str());
        out.push(("Host".into(), host.into()));
    }
    if !named("connection") {
        out.push(("Connection".into(), "close".into()));
    }
    // RFC 8470 5.1: a request forwarded from early data says so, once.
    let early = ctx.early_data && !named("early-data");
    if early {
        out.push(("Early-Data".into(), "1".into()));
    }
    if opts.cache_headers {
        if let (Some(v), false) = (&opts.if_modified_since, named("if-modified-since")) {
            out.push(("If-Modified-Since".into(), v.into()));
        }
        if let (Some(v), false) = (&opts.if_none_match, named("if-none-match")) {
            out.push(("If-None-Match".into(), v.into()));
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
            ctx.head.content_length.unwrap_or(0).to_string().into(),
        )),
        ReqBody::Buffered(b) => out.push(("Content-Length".into(), b.len().to_string().into())),
        ReqBody::Spooled(f) => out.push(("Content-Length".into(), f.len().to_string().into())),
    }
    if s.proxy_pass_request_headers {
        let listed = |list: &[&str], n: &str| list.iter().any(|h| h.eq_ignore_ascii_case(n));
        for (n, v) in ctx.head.headers() {
            if listed(SET_BY_PROXY, n)
                || named(n)
                || (early && n.eq_ignore_ascii_case("early-data"))
                || (opts.cache_headers && listed(CLEARED_FOR_CACHE, n))
            {
                continue;
            }
            out.push((n.into(), v.into()));
        }
    }
    out
}

/// Reads the whole request body (bounded by `client_max_body_size`, as a
/// chunked one is only then): in memory up to `client_body_buffer_size`
/// (`$request_body` then has it), else on into a temp file, written on a
/// pool thread piece by piece, so memory stays bounded and no event loop
/// waits on the disk. `client_body_in_file_only on|clean` puts every body
/// in a file that keeps its name (not with buffering off, as NGINX).
// The connection loop waits while the handler runs: no one else borrows
// the request body meanwhile.
#[allow(clippy::await_holding_refcell_ref)]
async fn read_whole_body(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    b: &RefCell<ClientBody<'_>>,
    buffering: bool,
) -> Result<ReqBody, UpstreamError> {
    let max = ctx.loc.s.client_max_body_size;
    let in_memory = ctx.loc.s.client_body_buffer_size as usize;
    let file_only = ctx.loc.s.client_body_in_file_only.filter(|_| buffering);
    let mut mem = Vec::new();
    let mut spool: Option<Spool> = None;
    if let Some(clean) = file_only {
        spool = Some(open_spool(ctx, env, Some(clean)).await?);
    }
    let mut b = b.borrow_mut();
    loop {
        match b.read(&mut mem).await {
            Ok(true) => {
                if max != 0 && b.read > max {
                    too_large(ctx, env, b.read);
                    return Err(UpstreamError::Status(413));
                }
            }
            Ok(false) => break,
            Err(e) => return Err(client_body_error(ctx, env, &e)),
        }
        let limit = if spool.is_some() {
            SPOOL_PIECE
        } else {
            in_memory
        };
        if mem.len() > limit {
            let f = match &mut spool {
                Some(f) => f,
                None => spool.insert(open_spool(ctx, env, None).await?),
            };
            let piece = std::mem::take(&mut mem);
            f.append(piece)
                .await
                .map_err(|e| spool_failed(ctx, env, f, &e, "write"))?;
        }
    }
    match spool {
        None => {
            // `$request_body`: NGINX has it when the body sits in memory.
            ctx.request_body = Some(mem.clone());
            Ok(ReqBody::Buffered(mem))
        }
        Some(mut f) => {
            if !mem.is_empty() {
                f.append(mem)
                    .await
                    .map_err(|e| spool_failed(ctx, env, &f, &e, "write"))?;
            }
            ctx.request_body_file_len = Some(f.len());
            ctx.request_body_file = Some(f.path().to_string_lossy().into_owned());
            Ok(ReqBody::Spooled(f))
        }
    }
}

/// A new temp file for the body in `client_body_temp_path`, named as
/// NGINX names one (ten digits, its levels taken from the end), logged
/// as NGINX logs it. `kept` (`client_body_in_file_only`): the file keeps
/// its name, removed when the request ends if `Some(true)` (`clean`).
async fn open_spool(
    ctx: &RequestCtx,
    env: &Env<'_>,
    kept: Option<bool>,
) -> Result<Spool, UpstreamError> {
    let io = match disk_io::route(ctx, env) {
        Ok(io) => env.disk.offloaded(io),
        Err(_) => return Err(UpstreamError::Status(500)),
    };
    let default = crate::cache::TempPath {
        path: "client_body_temp".into(),
        levels: Default::default(),
    };
    let temp = ctx.loc.s.client_body_temp_path.as_ref().unwrap_or(&default);
    loop {
        let name = format!("{:010}", next_temp_number());
        let path = temp.levels.dir_of(&temp.path, &name).join(&name);
        let made = match kept {
            None => Spool::create(&io, &path).await,
            Some(clean) => Spool::create_kept(&io, &path, clean).await,
        };
        match made {
            Ok(f) => {
                // NGINX's `request_body_file_log_level`: notice for a
                // body in a file by configuration.
                let level = if kept.is_some() {
                    Level::Notice
                } else {
                    Level::Warn
                };
                ctx.log(env.log).line(
                    level,
                    format_args!(
                        "a client request body is buffered to a temporary file {}",
                        path.display()
                    ),
                );
                return Ok(f);
            }
            // Another worker's body has the name: the next number.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                let f = Failure::of(&e, "open", &path.to_string_lossy());
                let level = if f.crit { Level::Crit } else { Level::Error };
                ctx.log(env.log).line(level, format_args!("{}", f.line));
                return Err(UpstreamError::Status(f.status));
            }
        }
    }
}

/// NGINX's `ngx_next_temp_number`: a process-wide counter from a random
/// start, so two workers rarely try one name (`O_EXCL` settles it).
pub fn next_temp_number() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    static START: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let start = *START.get_or_init(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        (u64::from(std::process::id()) * 7919 + t.subsec_nanos() as u64) % 1_000_000_000
    });
    (start + NEXT.fetch_add(1, Ordering::Relaxed)) % 10_000_000_000
}

/// A failed write or read of the body's temp file: 500 (503 for a full
/// pool), with NGINX's line.
pub fn spool_failed(
    ctx: &RequestCtx,
    env: &Env<'_>,
    f: &Spool,
    e: &std::io::Error,
    op: &str,
) -> UpstreamError {
    let fail = Failure::of(e, op, &f.path().to_string_lossy());
    let level = if fail.crit { Level::Crit } else { Level::Error };
    ctx.log(env.log).line(level, format_args!("{}", fail.line));
    UpstreamError::Status(fail.status)
}

pub fn too_large(ctx: &RequestCtx, env: &Env<'_>, n: u64) {
    ctx.log(env.log).error(format_args!(
        "client intended to send too large chunked body: {n} bytes"
    ));
}

pub fn client_body_error(ctx: &RequestCtx, env: &Env<'_>, e: &std::io::Error) -> UpstreamError {
    let what = match e.kind() {
        std::io::ErrorKind::TimedOut => {
            "client timed out (110: Connection timed out) while reading client request body"
        }
        std::io::ErrorKind::InvalidData => "client sent invalid chunked body",
        _ => "client prematurely closed connection",
    };
    ctx.log(env.log).line(Level::Info, format_args!("{what}"));
    if e.kind() == std::io::ErrorKind::InvalidData {
        UpstreamError::Status(400)
    } else {
        UpstreamError::ClientGone
    }
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
