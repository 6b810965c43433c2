//! `proxy_cache` and `fastcgi_cache`: the cache between the client and
//! [`super::fetch_with`], with NGINX's flow (ngx_http_upstream_cache,
//! ngx_http_file_cache). The directives named below are the proxy's; a
//! FastCGI location reads its `fastcgi_cache*` twins, the same
//! [`CacheSettings`] group chosen by [`Knobs`] from the protocol:
//!
//! 1. the zone is `proxy_cache` rendered (`cache_$disk`), the key
//!    `proxy_cache_key` rendered; a `proxy_cache_purge` request purges the
//!    key; a method outside `proxy_cache_methods` is not the cache's (the
//!    dispatcher sends it upstream);
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
//! 5. a cacheable response is streamed to the client and stored on the way
//!    (`fill.rs`). With `proxy_buffering off` nothing is stored, as in
//!    NGINX.
//!
//! Every file-system call goes through the disk layer on the location's
//! I/O route ([`crate::disk::Io`], resolved once by `disk_io::route`).

use std::rc::Rc;
use std::sync::Arc;

use super::fetch::fetch_with;
use super::fill::{
    drain, policy_headers, range_in_reach, ranges_as_cacheable, refresh, respond_and_store,
    CacheReq,
};
use super::knobs::Knobs;
use super::request::{FetchOptions, UpstreamError};
use super::response::{head_response, intercepted, into_response};
use super::target::prepare;
use crate::cache::policy::{self, NotCached, Validity};
use crate::cache::verify::{self, BodyCheck};
use crate::cache::{CacheStatus, CacheZone, Entry, Fill, FillGuard, FillWaiter, Lookup};
use crate::config::cache_conf::CacheSettings;
use crate::config::model::{
    stale_status_bit, STALE_ERROR, STALE_INVALID_HEADER, STALE_TIMEOUT, STALE_UPDATING,
};
use crate::handlers::disk_io::{self, failed};
use crate::handlers::outcome::{Env, Outcome};
use crate::http::context::{Method, RequestCtx};
use crate::http::response::{logged_error, Body, BodyStream, ChunkFuture, Response, StreamBody};
use crate::upstream::ProxyPass;
use crate::util::time::now;
use crate::vars::template::Template;

fn set_status(ctx: &mut RequestCtx, st: CacheStatus) {
    if let Some(u) = ctx.upstream.as_mut() {
        u.cache_status = Some(st);
    }
}

/// Whether any of `conds` renders to a value that is neither empty nor
/// `0` (`proxy_cache_bypass`, `proxy_no_cache`).
fn any_set(ctx: &RequestCtx, conds: &[Template]) -> bool {
    conds.iter().any(|t| {
        let v = t.render(ctx);
        !v.is_empty() && v != "0"
    })
}

/// The content handler with `proxy_cache ZONE` on; `None` when the
/// request is not the cache's (a method outside `proxy_cache_methods`, or
/// a zone out of service): the caller sends it upstream.
pub async fn serve(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    pass: &Arc<ProxyPass>,
    zone: &Template,
) -> Option<Outcome> {
    let loc = Arc::clone(&ctx.loc);
    let k = Knobs::of(&loc.s, pass.proto);
    let cs = k.cache;
    // `proxy_cache $var` that renders empty: upstream without the cache,
    // as NGINX (which still sends the cache's request headers).
    let name = zone.render(ctx);
    if name.is_empty() {
        return None;
    }
    if let Err(e) = prepare(ctx, env, pass) {
        return Some(match e {
            UpstreamError::Status(c) => Outcome::Status(c),
            UpstreamError::ClientGone => Outcome::Close,
        });
    }
    let Some(zone) = find_zone(ctx, env, &name) else {
        return Some(Outcome::Status(500));
    };
    if !zone.in_service() {
        // Its directory is gone or read-only: upstream, uncached.
        return None;
    }
    let method = ctx.head.method();
    let purge = cs.purge.as_ref().filter(|p| p.method == method).cloned();
    let cacheable_method = match Method::from_token(method) {
        Method::Get | Method::Head => true,
        Method::Post => cs.methods.post,
        _ => false,
    };
    if purge.is_none() && !cacheable_method {
        return None;
    }
    let key = match (&cs.key, k.proto) {
        (Some(t), _) => t.render(ctx),
        (None, crate::upstream::Protocol::Http) => {
            let host = ctx.upstream.as_ref().map_or("", |u| u.proxy_host.as_str());
            format!("http{host}{}", ctx.head.target())
        }
        // NGINX warns at load and keys every request with "".
        (None, _) => String::new(),
    };
    let io = match disk_io::route(ctx, env) {
        Ok(io) => io,
        Err(o) => return Some(*o),
    };
    let c = CacheReq {
        zone,
        disk: env.disk.clone(),
        caches: env.caches.clone(),
        io,
        log: ctx.log(env.log),
    };
    Some(match purge {
        Some(p) if !p.allows(ctx.conn.peer.ip()) => Outcome::Status(403),
        Some(_) => purge_key(ctx, env, &c, &key).await,
        None => {
            let o = serve_key(ctx, env, pass, &c, key).await;
            // The status the request ended with (an EXPIRED that fell
            // back to its stale entry is a STALE), once.
            if let Some(st) = ctx.upstream.as_ref().and_then(|u| u.cache_status) {
                c.zone.count(st);
            }
            o
        }
    })
}

/// The zone `proxy_cache` renders to; an unknown one is logged with
/// NGINX's line (the request's 500).
fn find_zone(ctx: &RequestCtx, env: &Env<'_>, name: &str) -> Option<Arc<CacheZone>> {
    let found = env.caches.get(name).cloned();
    if found.is_none() {
        ctx.log(env.log)
            .error(format_args!("cache \"{name}\" not found"));
    }
    found
}

/// What a waiter for another request's fill does next.
enum AfterWait {
    /// The stale entry (`proxy_cache_use_stale updating`).
    Stale,
    /// The fill ended: look the key up again.
    LookAgain,
    /// Waited `proxy_cache_lock_timeout`: upstream without storing.
    UpstreamNoStore,
    /// Upstream, storing (no lock, or the fill is `proxy_cache_lock_age`
    /// old).
    Upstream,
}

/// Whether `stale` is served while it is refreshed: `proxy_cache_use_stale
/// updating`, or within the entry's `stale-while-revalidate` window.
fn stale_while_updating(cs: &CacheSettings, stale: &Entry) -> bool {
    cs.use_stale & STALE_UPDATING != 0 || stale.stale_updating(crate::util::time::now().0)
}

/// A request that found the key's fill claimed by another: NGINX 1.22's
/// rules for `proxy_cache_use_stale updating` (or the entry's
/// `stale-while-revalidate`) and `proxy_cache_lock`.
async fn wait_for_fill(
    cs: &CacheSettings,
    w: FillWaiter,
    stale: Option<&Entry>,
    waited: bool,
) -> AfterWait {
    if stale.is_some_and(|e| stale_while_updating(cs, e)) {
        return AfterWait::Stale;
    }
    if !cs.lock || waited {
        return AfterWait::Upstream;
    }
    // A request that waited `lock_timeout` goes upstream and does not
    // store; once the fill is `lock_age` old (when that comes first) the
    // waiter goes upstream and stores.
    let age = cs.lock_age.saturating_sub(w.since().elapsed());
    let timeout = cs.lock_timeout;
    let (limit, take_over) = if age < timeout {
        (age, true)
    } else {
        (timeout, false)
    };
    if w.wait(limit).await {
        AfterWait::LookAgain
    } else if take_over {
        AfterWait::Upstream
    } else {
        AfterWait::UpstreamNoStore
    }
}

/// The cache's answer for `key`: bypass, HIT, or the fill (with the lock,
/// stale entries and revalidation).
async fn serve_key(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    pass: &Arc<ProxyPass>,
    c: &CacheReq,
    base: String,
) -> Outcome {
    let loc = Arc::clone(&ctx.loc);
    let cs = Knobs::of(&loc.s, pass.proto).cache;
    let store = !any_set(ctx, &cs.no_cache);
    if any_set(ctx, &cs.bypass) {
        set_status(ctx, CacheStatus::Bypass);
        let guard = match c.zone.claim_fill(&base) {
            Fill::Owner(g) => Some(g),
            Fill::Wait(_) => None,
        };
        let fill = Store::of(store, guard);
        return go_upstream(ctx, env, pass, c, &base, None, fill).await;
    }
    let (mut key, mut found) = match find(ctx, env, c, &base).await {
        Ok(x) => x,
        Err(o) => return o,
    };
    let mut waited = false;
    loop {
        let stale = match found {
            Found::Hit(e) if e.fresh(crate::util::time::now().0) => {
                set_status(ctx, CacheStatus::Hit);
                return hit(ctx, pass, c, *e);
            }
            Found::Hit(e) => Some(e),
            Found::Miss(uses) if u64::from(uses) < cs.min_uses => {
                set_status(ctx, CacheStatus::Miss);
                return go_upstream(ctx, env, pass, c, &key, None, Store::Scarce).await;
            }
            Found::Miss(_) => None,
            // Answered as the upstream's error was: through `error_page`.
            Found::Error(status) => {
                set_status(ctx, CacheStatus::Hit);
                return Outcome::Status(status);
            }
        };
        let guard = match c.zone.claim_fill(&key) {
            Fill::Owner(g) => Some(g),
            Fill::Wait(w) => match wait_for_fill(cs, w, stale.as_deref(), waited).await {
                AfterWait::Stale => {
                    set_status(ctx, CacheStatus::Updating);
                    return hit(ctx, pass, c, *stale.expect("a stale entry"));
                }
                AfterWait::LookAgain => {
                    waited = true;
                    (key, found) = match find(ctx, env, c, &base).await {
                        Ok(x) => x,
                        Err(o) => return o,
                    };
                    continue;
                }
                AfterWait::UpstreamNoStore => {
                    set_status(ctx, CacheStatus::Miss);
                    return go_upstream(ctx, env, pass, c, &key, None, Store::Skip).await;
                }
                AfterWait::Upstream => None,
            },
        };
        let claim = Claim { guard, store };
        return fill_or_stale(ctx, env, pass, c, &key, stale, claim).await;
    }
}

/// The fill lock as claimed: the guard when this request holds it, and
/// whether its answer may be stored (`proxy_no_cache` unset).
struct Claim {
    guard: Option<FillGuard>,
    store: bool,
}

impl Claim {
    /// What [`go_upstream`] is given.
    fn fill(self) -> Store {
        Store::of(self.store, self.guard)
    }
}

/// What a request does with the answer it fetches.
enum Store {
    /// Nothing: the answer is not stored.
    Skip,
    /// Stored, this request holding the key's fill lock
    /// (`proxy_cache_lock`), released when the fill ends.
    Locked(FillGuard),
    /// Stored without the lock (another request holds it, past
    /// `proxy_cache_lock_age` or `_timeout`).
    Unlocked,
    /// Not stored, and known before asking (fewer lookups than
    /// `proxy_cache_min_uses`, a range past `proxy_cache_max_range_offset`):
    /// the request goes as without a cache, its `Range` and conditionals
    /// passed (NGINX's `u->cacheable = 0` before the request).
    Scarce,
}

impl Store {
    /// Stores when `store` (`proxy_no_cache` unset), with the lock when
    /// `guard` holds it.
    fn of(store: bool, guard: Option<FillGuard>) -> Store {
        match (store, guard) {
            (false, _) => Store::Skip,
            (true, Some(g)) => Store::Locked(g),
            (true, None) => Store::Unlocked,
        }
    }

    /// Whether the answer is stored.
    fn stores(&self) -> bool {
        !matches!(self, Store::Skip | Store::Scarce)
    }
}

/// The request holds (or gave up waiting for) the key's fill: a miss goes
/// upstream; an expired entry is refreshed in the background, or
/// revalidated / fetched again.
async fn fill_or_stale(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    pass: &Arc<ProxyPass>,
    c: &CacheReq,
    key: &str,
    stale: Option<Box<Entry>>,
    claim: Claim,
) -> Outcome {
    let loc = Arc::clone(&ctx.loc);
    let cs = Knobs::of(&loc.s, pass.proto).cache;
    let Some(e) = stale else {
        set_status(ctx, CacheStatus::Miss);
        return go_upstream(ctx, env, pass, c, key, None, claim.fill()).await;
    };
    if cs.background_update && stale_while_updating(cs, &e) && claim.guard.is_some() {
        // The stale entry at once; the refresh runs as a task on this
        // worker's loop (NGINX's background subrequest).
        set_status(ctx, CacheStatus::Stale);
        background_update(ctx, env, pass, c, key, &e, claim.fill());
        return hit(ctx, pass, c, *e);
    }
    set_status(ctx, CacheStatus::Expired);
    go_upstream(ctx, env, pass, c, key, Some(e), claim.fill()).await
}

/// Refreshes `key` in a task of its own, as a GET without a body carrying
/// the request's headers, storing the answer (then dropping the lock).
/// The request is over once the task is (`RequestCtx::background`): its
/// connection closes, or reads its next request, after the update, as
/// NGINX finalizes a request only when its background subrequest ends.
fn background_update(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    pass: &Arc<ProxyPass>,
    c: &CacheReq,
    key: &str,
    e: &Entry,
    fill: Store,
) {
    let mut bg = RequestCtx::new(&ctx.conn, ctx.conn_requests, ctx.head.clone(), &ctx.server);
    bg.method = ctx.method;
    bg.uri = ctx.uri.clone();
    bg.args = ctx.args.clone();
    bg.loc = Arc::clone(&ctx.loc);
    bg.internal = ctx.internal;
    bg.error_page = ctx.error_page;
    bg.expect_tested = true;
    bg.upstream = ctx.upstream.clone();
    // NGINX's clone subrequest keeps the regex captures (`proxy_pass
    // http://up/$1`) and the variables set so far.
    bg.captures = ctx.captures.clone();
    bg.slots = ctx.slots.clone();
    bg.head.content_length = None;
    let entry = Box::new(Entry {
        file: e.file.clone(),
        header: Arc::clone(&e.header),
        path: Rc::clone(&e.path),
        updating: true,
    });
    let (pass, c, key, log) = (
        Arc::clone(pass),
        c.clone(),
        key.to_string(),
        env.log.clone(),
    );
    let task = crate::metrics::timed::spawn(async move {
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
    ctx.background.push(task);
}

/// What a lookup found, `Vary` applied.
enum Found {
    Hit(Box<Entry>),
    Miss(u32),
    /// An intercepted error remembered for the key (NGINX's node `error`).
    Error(u16),
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
    if let Some(status) = c.zone.cached_error(key) {
        return Ok((key.to_string(), Found::Error(status)));
    }
    let req = |n: &str| ctx.head.header_joined(n);
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
/// a file range after the header — or, for a whole body checked while it
/// is sent (`cache::verify`: over 1 MiB, and not checked on this very file
/// less than a minute ago), read and checked piece by piece.
fn hit(ctx: &RequestCtx, pass: &ProxyPass, c: &CacheReq, e: Entry) -> Outcome {
    let h = &e.header;
    let mut r = head_response(ctx, pass, h.meta.status, &h.meta.headers);
    // As NGINX (ngx_http_upstream_copy_allow_ranges): a cached response
    // is served in ranges when the upstream said `Accept-Ranges`; the
    // range filter then sends its own `Accept-Ranges: bytes`.
    let n = r.headers.len();
    r.headers
        .retain(|(n, _)| !n.eq_ignore_ascii_case("accept-ranges"));
    r.allow_ranges = r.headers.len() != n || super::response::forces_ranges(ctx, pass);
    r.content_length = Some(h.body_len);
    // A range of a large body is sent unchecked (see `cache::verify`).
    let whole = !(r.allow_ranges && ctx.header("range").is_some());
    r.body = if h.body_len == 0 {
        Body::Empty
    } else if whole && !ctx.is_head() && verify::check_on_send(h, &e.file.meta) {
        let check = BodyCheck::new(Arc::clone(&c.zone), c.io.clone(), &e, c.log.clone());
        Body::Stream(StreamBody::new(Box::new(CheckedBody(check))))
    } else {
        Body::File {
            start: h.body_offset,
            len: h.body_len,
            file: Rc::new(e.file),
            path: Rc::clone(&e.path),
        }
    };
    Outcome::Send(r)
}

/// A large entry's body as the connection loop reads it: a damaged body
/// ends the stream with an error already logged (the connection closes
/// short of its `Content-Length`).
struct CheckedBody(BodyCheck);

impl BodyStream for CheckedBody {
    fn read_chunk<'a>(&'a mut self, out: &'a mut Vec<u8>) -> ChunkFuture<'a> {
        Box::pin(async move {
            self.0.next(out).await.map_err(|e| {
                if verify::is_damaged(&e) {
                    logged_error()
                } else {
                    e
                }
            })
        })
    }
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

/// What to ask the upstream for a cache request (`fill`: whether the
/// answer may be stored), and whether it revalidates `stale` (an entry
/// with a validator, under `proxy_cache_revalidate`).
fn fetch_options(k: &Knobs, fill: &Store, stale: Option<&Entry>) -> (FetchOptions, bool) {
    let mut opts = FetchOptions {
        cache_headers: !matches!(fill, Store::Scarce),
        head_as_get: fill.stores() && k.convert_head,
        ..Default::default()
    };
    let revalidating = match stale {
        Some(e) if k.cache.revalidate => {
            let m = &e.header.meta;
            opts.if_none_match = m.etag.clone();
            opts.if_modified_since = m.last_modified.map(crate::util::time::http_date);
            opts.if_none_match.is_some() || opts.if_modified_since.is_some()
        }
        _ => false,
    };
    (opts, revalidating)
}

/// Asks the upstream (conditionally, when revalidating `stale`), then
/// answers: the stale entry (use_stale, 304), or the new response, stored
/// through a [`CacheFill`] when `fill` stores and the response may be
/// cached.
async fn go_upstream(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    pass: &ProxyPass,
    c: &CacheReq,
    key: &str,
    stale: Option<Box<Entry>>,
    fill: Store,
) -> Outcome {
    let loc = Arc::clone(&ctx.loc);
    let k = Knobs::of(&loc.s, pass.proto);
    let cs = k.cache;
    let fill = match range_in_reach(ctx.header("range"), cs.max_range_offset) {
        true => fill,
        false => Store::Scarce,
    };
    let (opts, revalidating) = fetch_options(&k, &fill, stale.as_deref());
    // As the request began (NGINX's `c->stale_error`, set on open).
    let stale_error = stale.as_ref().is_some_and(|e| e.stale_error(now().0));
    let up = match fetch_with(ctx, env, pass, &opts).await {
        Ok(up) => up,
        Err(UpstreamError::Status(code)) => {
            let use_stale = cs.use_stale & failure_bits(code) != 0 || stale_error;
            if let Some(e) = stale.filter(|_| use_stale) {
                set_status(ctx, CacheStatus::Stale);
                return hit(ctx, pass, c, *e);
            }
            return Outcome::Status(code);
        }
        Err(UpstreamError::ClientGone) => return Outcome::Close,
    };
    let status = up.status();
    if let Some(e) = stale {
        if revalidating && status == 304 {
            set_status(ctx, CacheStatus::Revalidated);
            if fill.stores() {
                let headers = policy_headers(k.ignore_headers, up.headers());
                let stored = policy_headers(k.ignore_headers, &e.header.meta.headers);
                refresh(c, &e, (&headers, &stored), &cs.valid).await;
            }
            return hit(ctx, pass, c, *e);
        }
        if stale_status_bit(status).is_some_and(|b| cs.use_stale & b != 0) {
            set_status(ctx, CacheStatus::Stale);
            return hit(ctx, pass, c, *e);
        }
    }
    let ignore = Arc::clone(k.ignore_headers);
    if let Some(o) = super::accel::redirect(ctx, env, &ignore, up.headers()) {
        return o;
    }
    let headers = policy_headers(&ignore, up.headers());
    let (valid, windows) = policy::validity_and_windows(status, &headers, &cs.valid);
    if let Some(o) = intercepted(ctx, pass, status, up.headers()) {
        // A cacheable error is remembered in the keys zone (no file) and
        // answers later lookups, as NGINX's `c->error`.
        if let (true, Validity::Until(t)) = (fill.stores(), &valid) {
            c.zone.remember_error(key, status, *t);
        }
        return o;
    }
    // NGINX caches only what it buffers; a HEAD asked as HEAD
    // (`proxy_cache_convert_head off`, and always for FastCGI) has no
    // body to store. A 101 is a tunnel, never stored (NGINX frees the
    // cache entry).
    let buffering = super::accel::buffering(k.buffering, &ignore, up.headers());
    let storable = buffering && (k.convert_head || !ctx.is_head()) && status != 101;
    let guard = match (fill, storable) {
        (Store::Locked(g), true) => Some(g),
        (Store::Unlocked, true) => None,
        _ => return not_stored(ctx, pass, up, storable, valid),
    };
    match valid {
        Validity::Until(t) => respond_and_store(ctx, pass, c, key, up, (t, windows), guard).await,
        valid => not_stored(ctx, pass, up, storable, valid),
    }
}

/// The client's answer for an upstream response the cache does not store.
fn not_stored(
    ctx: &RequestCtx,
    pass: &ProxyPass,
    up: crate::upstream::UpstreamResponse,
    storable: bool,
    valid: Validity,
) -> Outcome {
    let head_req = ctx.is_head();
    let mut r = into_response(ctx, pass, up);
    // Not stored, but cacheable by its header lines (NGINX's
    // `u->cacheable` when the header is copied): ranges as if stored.
    if storable && matches!(valid, Validity::Until(_) | Validity::No(NotCached::NoRule)) {
        ranges_as_cacheable(&mut r);
    }
    // Not cached: no 304/412 from the proxy, as NGINX.
    r.no_not_modified = true;
    if head_req {
        r.body = Body::Empty;
    }
    Outcome::Send(r)
}
