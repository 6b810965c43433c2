//! `proxy_cache`: the cache between the client and [`proxy::fetch_with`],
//! with NGINX's flow (ngx_http_upstream_cache, ngx_http_file_cache):
//!
//! 1. the zone is `proxy_cache` rendered (`cache_$disk`), the key
//!    `proxy_cache_key` rendered; a `proxy_cache_purge` request purges the
//!    key; a method outside `proxy_cache_methods` goes upstream untouched;
//! 2. `proxy_cache_bypass` → upstream (BYPASS), the answer may be stored;
//! 3. a lookup (a stored variant whose `Vary` values differ sends the
//!    lookup to the variant's own key); a fresh entry is a HIT, sent from
//!    its file (a file body starting at `body_offset`: small bodies are
//!    read, large ones go out with `sendfile`, through the fast path when
//!    the pages are cached, and the range and not-modified filters run on
//!    it as on a static file);
//! 4. otherwise the fill of the key is claimed (`proxy_cache_lock`: one
//!    request goes upstream, the others wait, or serve the stale entry with
//!    `proxy_cache_use_stale updating`); an expired entry is revalidated
//!    with its validators (`proxy_cache_revalidate`), refreshed in the
//!    background (`proxy_cache_background_update`), or served stale when
//!    the upstream fails (`proxy_cache_use_stale`);
//! 5. a cacheable response is streamed to the client and, through
//!    [`CacheFill`], into a [`CacheWriter`]: one chunk's write in flight at
//!    a time (backpressure on the upstream, bounded memory), the entry
//!    visible only once complete. A failed write (ENOSPC) is logged once by
//!    the writer and drops the entry; the client's response goes on. A
//!    client that leaves mid-body leaves the fill to a task of its own.
//!    With `proxy_buffering off` nothing is stored, as in NGINX.
//!
//! Every file-system call goes through the disk layer on the location's
//! I/O route ([`Io`], resolved once by `disk_io::route`).

use std::rc::Rc;
use std::sync::Arc;

use tokio::task::JoinHandle;

use super::disk_io::{self, failed};
use super::proxy::{self, FetchOptions, UpstreamError};
use super::{Env, Outcome};
use crate::cache::policy::{self, Validity};
use crate::cache::{
    CacheLog, CacheStatus, CacheWriter, CacheZone, Entry, EntryMeta, Fill, FillGuard, Lookup,
};
use crate::config::model::{
    stale_status_bit, STALE_ERROR, STALE_INVALID_HEADER, STALE_TIMEOUT, STALE_UPDATING,
};
use crate::config::template::Template;
use crate::disk::{Disk, Io};
use crate::http::conditional::{self, Precondition};
use crate::http::context::RequestCtx;
use crate::http::response::{Body, BodyStream, ChunkFuture, Response, StreamBody};
use crate::log::Level;
use crate::upstream::{ProxyPass, UpstreamResponse};

/// Body bytes copied per read when an entry is re-stored after a 304.
const COPY_CHUNK: usize = 64 * 1024;

/// What one request's cache work needs.
#[derive(Clone)]
struct CacheReq {
    zone: Arc<CacheZone>,
    /// The worker's disk layer and cache set, for a background update's
    /// handler environment.
    disk: Rc<Disk>,
    caches: Arc<crate::cache::CacheSet>,
    io: Io,
    log: CacheLog,
}

fn log(ctx: &RequestCtx, env: &Env<'_>, level: Level, msg: std::fmt::Arguments<'_>) {
    env.log
        .log_conn(level, Some(ctx.conn.id), msg, &ctx.log_context());
}

fn set_status(ctx: &mut RequestCtx, st: CacheStatus) {
    if let Some(u) = ctx.upstream.as_mut() {
        u.cache_status = Some(st);
    }
}

/// A request header's value for `Vary`: every line, joined with `, `.
fn request_header(ctx: &RequestCtx, name: &str) -> Option<String> {
    let mut out: Option<String> = None;
    for (n, v) in &ctx.head.headers {
        if n.eq_ignore_ascii_case(name) {
            match &mut out {
                Some(o) => {
                    o.push_str(", ");
                    o.push_str(v);
                }
                None => out = Some(v.clone()),
            }
        }
    }
    out
}

/// Whether any of `conds` renders to a value that is neither empty nor
/// `0` (`proxy_cache_bypass`, `proxy_no_cache`).
fn any_set(ctx: &RequestCtx, conds: &[Template]) -> bool {
    conds.iter().any(|t| {
        let v = t.render(ctx);
        !v.is_empty() && v != "0"
    })
}

/// The content handler with `proxy_cache ZONE` on.
pub async fn serve(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    pass: &Arc<ProxyPass>,
    zone: &Template,
) -> Outcome {
    let loc = Arc::clone(&ctx.loc);
    let s = &loc.s;
    let cache_opts = FetchOptions {
        cache: true,
        ..Default::default()
    };
    if let Err(e) = proxy::prepare(ctx, env, pass) {
        return match e {
            UpstreamError::Status(c) => Outcome::Status(c),
            UpstreamError::ClientGone => Outcome::Close,
        };
    }
    let name = zone.render(ctx);
    let Some(zone) = env.caches.get(&name).cloned() else {
        log(
            ctx,
            env,
            Level::Error,
            format_args!("cache \"{name}\" not found"),
        );
        return Outcome::Status(500);
    };
    let method = ctx.head.method.as_str();
    let purge = s
        .proxy_cache_purge
        .as_ref()
        .filter(|p| p.method == method)
        .cloned();
    let cacheable_method =
        matches!(method, "GET" | "HEAD") || (method == "POST" && s.proxy_cache_methods.post);
    if purge.is_none() && !cacheable_method {
        return proxy::serve_with(ctx, env, pass, &cache_opts).await;
    }
    let key = match &s.proxy_cache_key {
        Some(t) => t.render(ctx),
        None => {
            let host = ctx.upstream.as_ref().map_or("", |u| u.proxy_host.as_str());
            format!("http{host}{}", ctx.head.target)
        }
    };
    let io = match disk_io::route(ctx, env) {
        Ok(io) => io,
        Err(o) => return *o,
    };
    let c = CacheReq {
        zone,
        disk: env.disk.clone(),
        caches: env.caches.clone(),
        io,
        log: CacheLog {
            log: env.log.clone(),
            conn: Some(ctx.conn.id),
            ctx: ctx.log_context(),
        },
    };
    if let Some(p) = purge {
        if !p.allows(ctx.conn.peer.ip()) {
            return Outcome::Status(403);
        }
        return purge_key(ctx, env, &c, &key).await;
    }
    let store = !any_set(ctx, &s.proxy_no_cache);
    if any_set(ctx, &s.proxy_cache_bypass) {
        set_status(ctx, CacheStatus::Bypass);
        let guard = match c.zone.claim_fill(&key) {
            Fill::Owner(g) => Some(g),
            Fill::Wait(_) => None,
        };
        return go_upstream(ctx, env, pass, &c, &key, None, store.then_some(guard)).await;
    }

    let base = key;
    let (mut key, mut found) = match find(ctx, env, &c, &base).await {
        Ok(x) => x,
        Err(o) => return o,
    };
    let use_stale = s.proxy_cache_use_stale;
    let mut waited = false;
    loop {
        let stale = match found {
            Found::Hit(e) if e.fresh(crate::util::time::now().0) => {
                set_status(ctx, CacheStatus::Hit);
                return hit(ctx, pass, *e);
            }
            Found::Hit(e) => Some(e),
            Found::Miss(uses) if u64::from(uses) < s.proxy_cache_min_uses => {
                set_status(ctx, CacheStatus::Miss);
                return go_upstream(ctx, env, pass, &c, &key, None, None).await;
            }
            Found::Miss(_) => None,
        };
        let guard = match c.zone.claim_fill(&key) {
            Fill::Owner(g) => Some(g),
            Fill::Wait(w) => {
                if use_stale & STALE_UPDATING != 0 {
                    if let Some(e) = stale {
                        set_status(ctx, CacheStatus::Updating);
                        return hit(ctx, pass, *e);
                    }
                }
                if !s.proxy_cache_lock || waited {
                    None
                } else {
                    // NGINX 1.22: a request that waited `lock_timeout`
                    // goes upstream and does not store; once the fill is
                    // `lock_age` old (when that comes first) the waiter
                    // goes upstream and stores.
                    let age = s.proxy_cache_lock_age.saturating_sub(w.since().elapsed());
                    let timeout = s.proxy_cache_lock_timeout;
                    let (limit, take_over) = if age < timeout {
                        (age, true)
                    } else {
                        (timeout, false)
                    };
                    if w.wait(limit).await {
                        waited = true;
                        (key, found) = match find(ctx, env, &c, &base).await {
                            Ok(x) => x,
                            Err(o) => return o,
                        };
                        continue;
                    }
                    if !take_over {
                        set_status(ctx, CacheStatus::Miss);
                        return go_upstream(ctx, env, pass, &c, &key, None, None).await;
                    }
                    None
                }
            }
        };
        let Some(e) = stale else {
            set_status(ctx, CacheStatus::Miss);
            return go_upstream(ctx, env, pass, &c, &key, None, store.then_some(guard)).await;
        };
        if s.proxy_cache_background_update && use_stale & STALE_UPDATING != 0 && guard.is_some() {
            // The stale entry at once; the refresh runs as a task on this
            // worker's loop (NGINX's background subrequest).
            set_status(ctx, CacheStatus::Stale);
            background_update(ctx, env, pass, &c, &key, &e, store.then_some(guard));
            return hit(ctx, pass, *e);
        }
        set_status(ctx, CacheStatus::Expired);
        return go_upstream(ctx, env, pass, &c, &key, Some(e), store.then_some(guard)).await;
    }
}

/// Refreshes `key` in a task of its own, as a GET without a body carrying
/// the request's headers, storing the answer (then dropping the lock).
fn background_update(
    ctx: &RequestCtx,
    env: &Env<'_>,
    pass: &Arc<ProxyPass>,
    c: &CacheReq,
    key: &str,
    e: &Entry,
    fill: Option<Option<FillGuard>>,
) {
    let mut bg = RequestCtx {
        conn: ctx.conn.clone(),
        conn_requests: ctx.conn_requests,
        head: ctx.head.clone(),
        method: ctx.method,
        uri: ctx.uri.clone(),
        args: ctx.args.clone(),
        server: Arc::clone(&ctx.server),
        loc: Arc::clone(&ctx.loc),
        internal: ctx.internal,
        error_page: ctx.error_page,
        expect_tested: true,
        send_continue: false,
        start: std::time::Instant::now(),
        status: 0,
        body_bytes_sent: 0,
        bytes_sent: 0,
        sent_headers: Vec::new(),
        document_root: None,
        request_filename: None,
        upstream: ctx.upstream.clone(),
    };
    bg.head.content_length = None;
    let entry = Box::new(Entry {
        file: e.file.clone(),
        header: e.header.clone(),
        path: e.path.clone(),
        updating: true,
    });
    let (pass, c, key, log) = (
        Arc::clone(pass),
        c.clone(),
        key.to_string(),
        env.log.clone(),
    );
    tokio::task::spawn_local(async move {
        let env = Env {
            disk: &c.disk,
            log: &log,
            caches: &c.caches,
            body: None,
        };
        let out = go_upstream(&mut bg, &env, &pass, &c, &key, Some(entry), fill).await;
        if let Outcome::Send(r) = out {
            if let Body::Stream(sb) = r.body {
                drain(sb.into_inner()).await;
            }
        }
    });
}

/// Reads a body stream to its end (a fill no client reads).
async fn drain(mut body: Box<dyn BodyStream>) {
    let mut piece = Vec::with_capacity(COPY_CHUNK);
    loop {
        piece.clear();
        match body.read_chunk(&mut piece).await {
            Ok(true) => {}
            Ok(false) | Err(_) => break,
        }
    }
}

/// What a lookup found, `Vary` applied.
enum Found {
    Hit(Box<Entry>),
    Miss(u32),
}

/// Looks `key` up; a stored variant whose `Vary` values differ from the
/// request's sends the lookup to the variant's own key (NGINX's secondary
/// key). Returns the key that answers (and is to be filled).
async fn find(
    ctx: &RequestCtx,
    env: &Env<'_>,
    c: &CacheReq,
    key: &str,
) -> Result<(String, Found), Outcome> {
    let req = |n: &str| request_header(ctx, n);
    match lookup(ctx, env, c, key).await? {
        Found::Hit(e) if !policy::variant_matches(&e.header.meta.vary, req) => {
            let names: Vec<String> = e.header.meta.vary.iter().map(|(n, _)| n.clone()).collect();
            let vk = policy::variant_key(key, &policy::vary_values(&names, req));
            match lookup(ctx, env, c, &vk).await? {
                Found::Hit(e2) if !policy::variant_matches(&e2.header.meta.vary, req) => {
                    Ok((vk, Found::Miss(u32::MAX)))
                }
                f => Ok((vk, f)),
            }
        }
        f => Ok((key.to_string(), f)),
    }
}

async fn lookup(
    ctx: &RequestCtx,
    env: &Env<'_>,
    c: &CacheReq,
    key: &str,
) -> Result<Found, Outcome> {
    match c.zone.lookup(&c.io, key, &c.log).await {
        Ok(Lookup::Hit(e)) => Ok(Found::Hit(e)),
        Ok(Lookup::Miss { uses }) => Ok(Found::Miss(uses)),
        Err(e) => {
            let path = c
                .zone
                .entry_path(&crate::cache::KeyHash::of(key.as_bytes()));
            Err(failed(ctx, env, &e, "open", &path.to_string_lossy()))
        }
    }
}

/// The answer from a stored entry: its status and headers, its body as
/// a file range after the header.
fn hit(ctx: &RequestCtx, pass: &ProxyPass, e: Entry) -> Outcome {
    let h = &e.header;
    let mut r = proxy::head_response(ctx, pass, h.meta.status, &h.meta.headers);
    // As NGINX (ngx_http_upstream_copy_allow_ranges): a cached response
    // is served in ranges when the upstream said `Accept-Ranges`; the
    // range filter then sends its own `Accept-Ranges: bytes`.
    let n = r.headers.len();
    r.headers
        .retain(|(n, _)| !n.eq_ignore_ascii_case("accept-ranges"));
    r.allow_ranges = r.headers.len() != n;
    r.content_length = Some(h.body_len);
    r.body = if h.body_len == 0 {
        Body::Empty
    } else {
        Body::File {
            start: h.body_offset,
            len: h.body_len,
            file: Rc::new(e.file),
        }
    };
    Outcome::Send(r)
}

/// Purges `key`: 200 with a short page when an entry was removed, 404
/// when there was none.
async fn purge_key(ctx: &RequestCtx, env: &Env<'_>, c: &CacheReq, key: &str) -> Outcome {
    let path = c
        .zone
        .entry_path(&crate::cache::KeyHash::of(key.as_bytes()));
    match c.zone.purge(&c.io, key).await {
        Ok(true) => {
            let body = format!(
                "<html>\r\n<head><title>Successful purge</title></head>\r\n<body>\r\n<center><h1>Successful purge</h1></center>\r\n<center>Key : {}</center>\r\n<center>Path: {}</center>\r\n</body>\r\n</html>\r\n",
                html_escape(key),
                path.display()
            );
            Outcome::Send(Response::bytes(200, "text/html", body.into_bytes()))
        }
        Ok(false) => Outcome::Status(404),
        Err(e) => failed(ctx, env, &e, "unlink", &path.to_string_lossy()),
    }
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The `proxy_cache_use_stale` condition a failed fetch meets.
fn failure_bits(code: u16) -> u16 {
    match code {
        504 => STALE_TIMEOUT,
        502 => STALE_ERROR | STALE_INVALID_HEADER,
        _ => STALE_ERROR,
    }
}

/// Asks the upstream (conditionally, when revalidating `stale`), then
/// answers: the stale entry (use_stale, 304), or the new response, stored
/// through a [`CacheFill`] when `fill` is given (`Some(guard)`: the lock
/// this request holds, released when the fill ends) and the response may
/// be cached.
async fn go_upstream(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    pass: &ProxyPass,
    c: &CacheReq,
    key: &str,
    stale: Option<Box<Entry>>,
    fill: Option<Option<FillGuard>>,
) -> Outcome {
    let loc = Arc::clone(&ctx.loc);
    let s = &loc.s;
    let mut opts = FetchOptions {
        cache: true,
        head_as_get: fill.is_some(),
        ..Default::default()
    };
    let revalidating = match &stale {
        Some(e) if s.proxy_cache_revalidate => {
            let m = &e.header.meta;
            opts.if_none_match = m.etag.clone();
            opts.if_modified_since = m.last_modified.map(crate::util::time::http_date);
            opts.if_none_match.is_some() || opts.if_modified_since.is_some()
        }
        _ => false,
    };
    let up = match proxy::fetch_with(ctx, env, pass, &opts).await {
        Ok(up) => up,
        Err(UpstreamError::Status(code)) => {
            if let Some(e) = stale.filter(|_| s.proxy_cache_use_stale & failure_bits(code) != 0) {
                set_status(ctx, CacheStatus::Stale);
                return hit(ctx, pass, *e);
            }
            return Outcome::Status(code);
        }
        Err(UpstreamError::ClientGone) => return Outcome::Close,
    };
    let status = up.status();
    if let Some(e) = stale {
        if revalidating && status == 304 {
            set_status(ctx, CacheStatus::Revalidated);
            if fill.is_some() {
                refresh(c, &e, up.headers(), &s.proxy_cache_valid).await;
            }
            return hit(ctx, pass, *e);
        }
        if stale_status_bit(status).is_some_and(|b| s.proxy_cache_use_stale & b != 0) {
            set_status(ctx, CacheStatus::Stale);
            return hit(ctx, pass, *e);
        }
    }
    if let Some(o) = proxy::intercepted(ctx, status) {
        return o;
    }
    let valid = policy::validity(
        status,
        up.headers(),
        &s.proxy_cache_valid,
        crate::util::time::now().0,
    );
    // NGINX caches only what it buffers.
    match (fill.filter(|_| s.proxy_buffering), valid) {
        (Some(guard), Validity::Until(t)) => {
            respond_and_store(ctx, pass, c, key, up, t, guard).await
        }
        _ => {
            let head_req = ctx.head.method == "HEAD";
            let mut r = proxy::into_response(ctx, pass, up);
            if head_req {
                r.body = Body::Empty;
            }
            Outcome::Send(r)
        }
    }
}

fn unix_of(v: Option<&str>) -> Option<i64> {
    let t = httpdate::parse_http_date(v?.trim()).ok()?;
    t.duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs() as i64)
}

/// Sends `up` to the client and stores it under `key`, valid until
/// `valid_until`.
async fn respond_and_store(
    ctx: &RequestCtx,
    pass: &ProxyPass,
    c: &CacheReq,
    key: &str,
    up: UpstreamResponse,
    valid_until: i64,
    guard: Option<FillGuard>,
) -> Outcome {
    let s = &ctx.loc.s;
    let now = crate::util::time::now().0;
    let headers: Vec<(String, String)> = up
        .headers()
        .iter()
        .filter(|(n, _)| !proxy::hop_by_hop(n))
        .cloned()
        .collect();
    let names = policy::vary_names(up.headers());
    let meta = EntryMeta {
        key: key.to_string(),
        status: up.status(),
        valid_until,
        date: unix_of(up.header("date")).unwrap_or(now),
        last_modified: unix_of(up.last_modified()),
        stored: now,
        etag: up.etag().map(str::to_string),
        vary: policy::vary_values(&names, |n| request_header(ctx, n)),
        headers,
    };
    let expect = up.content_length();
    let head_req = ctx.head.method == "HEAD";
    let mut r = proxy::into_response(ctx, pass, up);
    // NGINX does not copy a cacheable response's `Accept-Ranges`: it
    // serves the response in (one) range itself, and its range filter
    // sends its own `Accept-Ranges`, last.
    let n = r.headers.len();
    r.headers
        .retain(|(n, _)| !n.eq_ignore_ascii_case("accept-ranges"));
    r.allow_ranges = r.status == 200 && r.headers.len() != n;
    let writer = c
        .zone
        .begin(&c.io, s.proxy_temp_path.as_ref(), meta, c.log.clone())
        .await
        .ok();
    let Some(writer) = writer else {
        // Logged by `begin`: answer without storing.
        if head_req {
            r.body = Body::Empty;
        }
        return Outcome::Send(r);
    };
    // A client that gets no body (HEAD, or a 304/412 the not-modified
    // filter will make of this 200) does not read the stream: the body
    // is read into the entry by a task of its own, as NGINX goes on
    // reading a cacheable response whatever the client asked.
    let no_body = head_req
        || r.status == 200
            && conditional::evaluate(
                &ctx.head.headers,
                r.etag.as_deref(),
                r.last_modified,
                s.if_modified_since,
            ) != Precondition::Proceed;
    match std::mem::replace(&mut r.body, Body::Empty) {
        Body::Stream(sb) => {
            let fill = CacheFill::new(sb.into_inner(), writer, guard, expect);
            if no_body {
                r.accept_ranges = r.allow_ranges && head_req;
                tokio::task::spawn_local(drain(Box::new(fill)));
            } else {
                r.body = Body::Stream(StreamBody::new(Box::new(fill)));
            }
        }
        _ => {
            // No body (a redirect, an empty 200): the entry is its header.
            let _ = writer.finish().await;
            drop(guard);
        }
    }
    Outcome::Send(r)
}

/// After a 304 to a revalidation: the entry is stored again with its new
/// validity (header rewritten, body copied through the location's disk
/// I/O). A failure leaves the old entry; it is logged by the writer.
async fn refresh(
    c: &CacheReq,
    e: &Entry,
    headers: &[(String, String)],
    rules: &[policy::CacheValid],
) {
    let now = crate::util::time::now().0;
    let Validity::Until(t) = policy::validity(e.header.meta.status, headers, rules, now) else {
        return;
    };
    let mut meta = e.header.meta.clone();
    meta.valid_until = t;
    meta.stored = now;
    let Ok(mut w) = c.zone.begin(&c.io, None, meta, c.log.clone()).await else {
        return;
    };
    let mut at = e.header.body_offset;
    let end = at + e.header.body_len;
    let mut buf = vec![0u8; COPY_CHUNK];
    while at < end {
        let want = ((end - at) as usize).min(COPY_CHUNK);
        match e.file.read_at(&mut buf[..want], at).await {
            Ok(n) if n > 0 => {
                if w.write(Arc::from(&buf[..n])).await.is_err() {
                    w.abort().await;
                    return;
                }
                at += n as u64;
            }
            _ => {
                w.abort().await;
                return;
            }
        }
    }
    let _ = w.finish().await;
}

type Written = (CacheWriter, std::io::Result<()>);

/// A body stream that stores what it passes on: each piece read from
/// `inner` is handed to a write task on the worker's loop while it is
/// sent to the client; the next piece is read only once that write is
/// done, so at most one piece is held and a slow disk slows the upstream
/// (never memory). The piece that completes the announced length is
/// handed on only once the entry is in place, so a client that has the
/// whole response finds it cached. Cancel-safe: the write in flight and
/// a piece held back live in `self`, so a dropped `read_chunk` future
/// loses nothing.
struct CacheFill {
    inner: Box<dyn BodyStream>,
    /// The writer, when no write is in flight (`None` once given up).
    writer: Option<CacheWriter>,
    pending: Option<JoinHandle<Written>>,
    /// The last write and the rename into place.
    finishing: Option<JoinHandle<()>>,
    /// The last piece, held back until `finishing` is done.
    held: Option<Vec<u8>>,
    /// The fill lock, released when the entry is complete or given up.
    guard: Option<FillGuard>,
    /// The announced length: a body of another length is not stored.
    expect: Option<u64>,
    seen: u64,
    ended: bool,
    /// Moved to a task of its own: the client is gone.
    detached: bool,
}

/// An exhausted stream, left in a [`CacheFill`] whose upstream was
/// moved to a task of its own.
struct Ended;

impl BodyStream for Ended {
    fn read_chunk<'a>(&'a mut self, _out: &'a mut Vec<u8>) -> ChunkFuture<'a> {
        Box::pin(async { Ok(false) })
    }
}

impl CacheFill {
    fn new(
        inner: Box<dyn BodyStream>,
        writer: CacheWriter,
        guard: Option<FillGuard>,
        expect: Option<u64>,
    ) -> CacheFill {
        CacheFill {
            inner,
            writer: Some(writer),
            pending: None,
            finishing: None,
            held: None,
            guard,
            expect,
            seen: 0,
            ended: false,
            detached: false,
        }
    }

    fn give_up(&mut self) {
        if let Some(w) = self.writer.take() {
            tokio::task::spawn_local(async move { w.abort().await });
        }
        self.guard = None;
    }

    /// Completes the entry with `last` (if any) as its final piece, in a
    /// task holding the lock until the entry is in place.
    fn finish(&mut self, last: Option<Arc<[u8]>>) -> Option<&mut JoinHandle<()>> {
        let mut w = self.writer.take()?;
        let guard = self.guard.take();
        let h = tokio::task::spawn_local(async move {
            let wrote = match last {
                Some(data) => w.write(data).await,
                None => Ok(()),
            };
            match wrote {
                Ok(()) => {
                    let _ = w.finish().await;
                }
                Err(_) => w.abort().await,
            }
            drop(guard);
        });
        Some(self.finishing.insert(h))
    }
}

impl BodyStream for CacheFill {
    fn read_chunk<'a>(&'a mut self, out: &'a mut Vec<u8>) -> ChunkFuture<'a> {
        Box::pin(async move {
            if let Some(h) = self.pending.as_mut() {
                let done = h.await;
                self.pending = None;
                match done {
                    Ok((w, Ok(()))) => self.writer = Some(w),
                    // Logged by the writer: drop the entry, go on sending.
                    Ok((w, Err(_))) => {
                        self.writer = Some(w);
                        self.give_up();
                    }
                    Err(_) => self.guard = None,
                }
            }
            if let Some(h) = self.finishing.as_mut() {
                let _ = h.await;
                self.finishing = None;
            }
            if let Some(piece) = self.held.take() {
                out.extend_from_slice(&piece);
                return Ok(true);
            }
            if self.ended {
                return Ok(false);
            }
            let r = self.inner.read_chunk(out).await;
            match &r {
                Ok(true) => {
                    self.seen += out.len() as u64;
                    if !out.is_empty() && self.writer.is_some() {
                        let data: Arc<[u8]> = Arc::from(&out[..]);
                        if self.expect == Some(self.seen) {
                            // Held in `self` first: a dropped future
                            // resumes waiting, then hands the piece on.
                            self.held = Some(out.clone());
                            if let Some(h) = self.finish(Some(data)) {
                                let _ = h.await;
                            }
                            self.finishing = None;
                            self.held = None;
                        } else if let Some(mut w) = self.writer.take() {
                            self.pending = Some(tokio::task::spawn_local(async move {
                                let r = w.write(data).await;
                                (w, r)
                            }));
                        }
                    }
                }
                Ok(false) => {
                    self.ended = true;
                    if self.expect.is_none_or(|n| n == self.seen) {
                        if let Some(h) = self.finish(None) {
                            let _ = h.await;
                        }
                        self.finishing = None;
                    }
                    self.give_up();
                }
                Err(_) => self.give_up(),
            }
            r
        })
    }
}

impl Drop for CacheFill {
    fn drop(&mut self) {
        // Dropped before its end: the client went away. The upstream is
        // read into the entry by a task of its own, as NGINX (buffering)
        // goes on filling. Dropped in that task, the entry is given up (a
        // write in flight ends on its own, and its writer, dropped
        // unfinished, hands the temp file to the zone's manager).
        let filling = self.writer.is_some() || self.pending.is_some();
        if !self.detached && !self.ended && filling {
            let rest = CacheFill {
                inner: std::mem::replace(&mut self.inner, Box::new(Ended)),
                writer: self.writer.take(),
                pending: self.pending.take(),
                finishing: None,
                held: None,
                guard: self.guard.take(),
                expect: self.expect,
                seen: self.seen,
                ended: false,
                detached: true,
            };
            tokio::task::spawn_local(drain(Box::new(rest)));
            return;
        }
        self.give_up();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{CacheZone, ZoneSpec};
    use crate::log::ErrorLog;
    use std::task::{Context, Poll, Waker};

    /// Pieces that are each "not ready" on their first poll, like a
    /// socket read.
    struct Pieces {
        left: Vec<Vec<u8>>,
        ready: bool,
    }

    impl BodyStream for Pieces {
        fn read_chunk<'a>(&'a mut self, out: &'a mut Vec<u8>) -> ChunkFuture<'a> {
            Box::pin(std::future::poll_fn(move |cx| {
                if !self.ready {
                    self.ready = true;
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                self.ready = false;
                if self.left.is_empty() {
                    return Poll::Ready(Ok(false));
                }
                out.extend_from_slice(&self.left.remove(0));
                Poll::Ready(Ok(true))
            }))
        }
    }

    /// The connection loop's pattern, made harsh: every `read_chunk`
    /// future is first polled once without a waker and dropped, and
    /// `out` cleared, before one is awaited. Nothing may be lost: the
    /// client gets every byte once and the entry holds the whole body.
    #[test]
    fn cache_fill_is_cancel_safe_and_stores_the_whole_body() {
        let dir = std::env::temp_dir().join(format!("porter-fill-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let log = ErrorLog::new(Vec::new());
        let zone = CacheZone::new(ZoneSpec::new("t", &dir, 1 << 20), &log);
        zone.set_loaded();
        let pieces: Vec<Vec<u8>> = (0..20u8).map(|i| vec![i; 1000 + i as usize]).collect();
        let whole: Vec<u8> = pieces.concat();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        let (got, hit) = local.block_on(&rt, async {
            let meta = EntryMeta {
                key: "k".into(),
                status: 200,
                valid_until: i64::MAX / 2,
                ..Default::default()
            };
            let w = zone
                .begin(&Io::inline(), None, meta, CacheLog::plain(&log))
                .await
                .unwrap();
            let inner = Pieces {
                left: pieces.clone(),
                ready: false,
            };
            let expect = Some(whole.len() as u64);
            let mut fill = CacheFill::new(Box::new(inner), w, None, expect);
            let mut got = Vec::new();
            let mut piece = Vec::new();
            loop {
                piece.clear();
                let first = fill
                    .read_chunk(&mut piece)
                    .as_mut()
                    .poll(&mut Context::from_waker(Waker::noop()));
                let more = match first {
                    Poll::Ready(r) => r.unwrap(),
                    Poll::Pending => {
                        piece.clear();
                        fill.read_chunk(&mut piece).await.unwrap()
                    }
                };
                if !more {
                    break;
                }
                got.extend_from_slice(&piece);
            }
            let hit = zone
                .lookup(&Io::inline(), "k", &CacheLog::plain(&log))
                .await
                .unwrap();
            (got, hit)
        });
        assert_eq!(got, whole, "every byte once, in order");
        let Lookup::Hit(e) = hit else {
            panic!("the entry is stored")
        };
        assert_eq!(e.header.body_len, whole.len() as u64);
        let stored = std::fs::read(&e.path).unwrap();
        assert_eq!(&stored[e.header.body_offset as usize..], &whole[..]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
