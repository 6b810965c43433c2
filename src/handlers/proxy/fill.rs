//! Storing a proxied response while it is sent: [`respond_and_store`]
//! wraps the upstream's body in a [`CacheFill`], a body stream that hands
//! each piece it passes on to a [`CacheWriter`] (one write in flight at a
//! time: a slow disk slows the upstream, never memory), the entry visible
//! only once complete; [`refresh`] stores an entry again after a 304 to a
//! revalidation. A failed write (ENOSPC) is logged once by the writer and
//! drops the entry; the client's response goes on. A client that leaves
//! mid-body leaves the fill to a task of its own.

use std::rc::Rc;
use std::sync::Arc;

use tokio::task::JoinHandle;

use super::knobs::Knobs;
use super::response::{hop_by_hop, into_response};
use crate::cache::policy::{self, StaleWindows};
use crate::cache::{CacheWriter, CacheZone, Entry, EntryMeta, FillGuard};
use crate::disk::{Disk, Io};
use crate::h1::fields::HeaderLines;
use crate::handlers::outcome::Outcome;
use crate::http::conditional::{self, Precondition};
use crate::http::context::RequestCtx;
use crate::http::response::{Body, BodyStream, ChunkFuture, Response, StreamBody};
use crate::log::RequestLog;
use crate::upstream::{ProxyPass, UpstreamResponse};

/// Body bytes copied per read when an entry is re-stored after a 304.
const COPY_CHUNK: usize = 64 * 1024;

/// What one request's cache work needs.
#[derive(Clone)]
pub struct CacheReq {
    /// The zone `proxy_cache` named.
    pub zone: Arc<CacheZone>,
    /// The worker's disk layer and cache set, for a background update's
    /// handler environment.
    pub disk: Rc<Disk>,
    /// The cache set of the worker's generation.
    pub caches: Arc<crate::cache::CacheSet>,
    /// The location's I/O route.
    pub io: Io,
    /// The request's error-log context.
    pub log: RequestLog,
}

fn unix_of(v: Option<&str>) -> Option<i64> {
    let t = httpdate::parse_http_date(v?.trim()).ok()?;
    t.duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs() as i64)
}

/// The upstream headers the cache policy reads: all but those
/// `proxy_ignore_headers` (`fastcgi_ignore_headers`...) names
/// (`Cache-Control`, `Expires`, `X-Accel-Expires`, `Set-Cookie`,
/// `Vary`...).
pub fn policy_headers<'h, H: HeaderLines + ?Sized>(
    ignore: &'h [String],
    headers: &'h H,
) -> PolicyHeaders<'h, H> {
    PolicyHeaders { ignore, headers }
}

/// The lines [`policy_headers`] leaves, read in place.
pub struct PolicyHeaders<'h, H: ?Sized> {
    ignore: &'h [String],
    headers: &'h H,
}

impl<H: HeaderLines + ?Sized> HeaderLines for PolicyHeaders<'_, H> {
    fn lines(&self) -> impl Iterator<Item = (&str, &str)> + Clone {
        let ignore = self.ignore;
        self.headers
            .lines()
            .filter(move |(n, _)| !ignore.iter().any(|i| n.eq_ignore_ascii_case(i)))
    }
}

/// The entry's metadata for `up`, stored under `key` until
/// `valid_until` (and stale `windows` past it): its headers less the
/// hop-by-hop ones, and the request's values of the headers its `Vary`
/// names.
fn entry_meta(
    ctx: &RequestCtx,
    k: &Knobs,
    key: &str,
    up: &UpstreamResponse,
    (valid_until, windows): (i64, StaleWindows),
) -> EntryMeta {
    let now = crate::util::time::now().0;
    let headers: Vec<(String, String)> = up
        .headers()
        .iter()
        .filter(|(n, _)| !hop_by_hop(n))
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    let names = policy::vary_names(&policy_headers(k.ignore_headers, up.headers()));
    // NGINX keeps the validators (for `proxy_cache_revalidate`) of a 200
    // or 206 only: another status is fetched again whole when stale.
    let validators = matches!(up.status(), 200 | 206);
    EntryMeta {
        key: key.to_string(),
        status: up.status(),
        valid_until,
        date: unix_of(up.header("date")).unwrap_or(now),
        last_modified: unix_of(up.last_modified()).filter(|_| validators),
        stored: now,
        updating_secs: windows.updating,
        error_secs: windows.error,
        etag: up.etag().map(str::to_string).filter(|_| validators),
        vary: policy::vary_values(&names, |n| ctx.head.header_joined(n)),
        headers,
    }
}

/// NGINX does not copy a cacheable response's `Accept-Ranges`
/// (`ngx_http_upstream_copy_allow_ranges`): it serves the response in
/// (one) range itself, and its range filter sends its own
/// `Accept-Ranges`, last. "Cacheable" is decided on the upstream's header
/// lines, before `proxy_no_cache`, `proxy_cache_min_uses` and the validity
/// rules are applied, so a response those keep out of the cache is served
/// in a range too.
pub fn ranges_as_cacheable(r: &mut Response) {
    let n = r.headers.len();
    r.headers
        .retain(|(n, _)| !n.eq_ignore_ascii_case("accept-ranges"));
    r.allow_ranges = r.status == 200 && (r.headers.len() != n || r.allow_ranges);
}

/// Sends `up` to the client and stores it under `key`, valid until
/// `fresh.0`, with the stale windows `fresh.1`.
pub async fn respond_and_store(
    ctx: &RequestCtx,
    pass: &ProxyPass,
    c: &CacheReq,
    key: &str,
    up: UpstreamResponse,
    fresh: (i64, StaleWindows),
    guard: Option<FillGuard>,
) -> Outcome {
    let s = &ctx.loc.s;
    let k = Knobs::of(s, pass.proto);
    let meta = entry_meta(ctx, &k, key, &up, fresh);
    let expect = up.content_length();
    let head_req = ctx.is_head();
    let mut r = into_response(ctx, pass, up);
    ranges_as_cacheable(&mut r);
    let writer = c
        .zone
        .begin(&c.io, k.cache.temp_path.as_ref(), meta, c.log.clone())
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
                |n| ctx.header(n),
                r.etag.as_deref(),
                r.last_modified,
                s.if_modified_since,
            ) != Precondition::Proceed;
    match std::mem::replace(&mut r.body, Body::Empty) {
        Body::Stream(sb) => {
            let fill = CacheFill::new(sb.into_inner(), writer, guard, expect);
            if no_body {
                r.accept_ranges = r.allow_ranges && head_req;
                crate::metrics::timed::spawn(drain(Box::new(fill)));
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
///
/// The validity is NGINX's (`ngx_http_upstream_test_next`): the 304's own
/// `X-Accel-Expires`, `Cache-Control` or `Expires` with the 304's stale
/// windows; else the entry's stored header lines read again (their time,
/// their windows laid over the 304's); else `proxy_cache_valid` for the
/// entry's status. `lines` are the 304's and the stored ones, less
/// `proxy_ignore_headers`.
pub async fn refresh<A, B>(
    c: &CacheReq,
    e: &Entry,
    (headers, stored): (&A, &B),
    rules: &[policy::CacheValid],
) where
    A: HeaderLines + ?Sized,
    B: HeaderLines + ?Sized,
{
    let now = crate::util::time::now().0;
    let base = StaleWindows::default().with(headers).unwrap_or_default();
    let (t, windows) = match policy::header_validity(headers, now) {
        Some(t) => (t, base),
        None => {
            let t = policy::header_validity(stored, now)
                .or_else(|| policy::rule_validity(e.header.meta.status, rules, now));
            let Some(t) = t else {
                return;
            };
            (t, base.with(stored).unwrap_or(base))
        }
    };
    let mut meta = e.header.meta.clone();
    meta.valid_until = t;
    meta.stored = now;
    meta.updating_secs = windows.updating;
    meta.error_secs = windows.error;
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
    // The copy is checked as it is written: a damaged body is not stored
    // again under a new validity (the client's send finds it).
    if e.header.body_crc.is_some_and(|want| want != w.body_crc()) {
        w.abort().await;
        return;
    }
    let _ = w.finish().await;
}

/// Reads a body stream to its end (a fill no client reads).
pub async fn drain(mut body: Box<dyn BodyStream>) {
    let mut piece = Vec::with_capacity(COPY_CHUNK);
    loop {
        piece.clear();
        match body.read_chunk(&mut piece).await {
            Ok(true) => {}
            Ok(false) | Err(_) => break,
        }
    }
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

/// An exhausted stream, left in a tee ([`CacheFill`], the store's
/// `StoreBody`) whose upstream was moved to a task of its own.
pub(super) struct Ended;

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
            crate::metrics::timed::spawn(async move { w.abort().await });
        }
        self.guard = None;
    }

    /// Completes the entry with `last` (if any) as its final piece, in a
    /// task holding the lock until the entry is in place.
    fn finish(&mut self, last: Option<Arc<[u8]>>) -> Option<&mut JoinHandle<()>> {
        let mut w = self.writer.take()?;
        let guard = self.guard.take();
        let h = crate::metrics::timed::spawn(async move {
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
                            self.pending = Some(crate::metrics::timed::spawn(async move {
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
            crate::metrics::timed::spawn(drain(Box::new(rest)));
            return;
        }
        self.give_up();
    }
}

/// `*_cache_max_range_offset` (NGINX's
/// `ngx_http_upstream_cache_check_range`): a request for a range starting
/// at or past the offset (a suffix range counts as past it) is answered
/// without storing.
pub fn range_in_reach(range: Option<&str>, max: Option<u64>) -> bool {
    let (Some(max), Some(h)) = (max, range) else {
        return true;
    };
    if max == 0 {
        return false;
    }
    let Some(spec) = h
        .get(..6)
        .filter(|p| p.eq_ignore_ascii_case("bytes="))
        .and(h.get(6..))
    else {
        return true;
    };
    let spec = spec.trim_start_matches(' ');
    if spec.starts_with('-') {
        return false;
    }
    let digits = spec.len() - spec.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    spec[..digits].parse::<u64>().map_or(true, |o| o < max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{Lookup, ZoneSpec};
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
                .begin(&Io::inline(), None, meta, RequestLog::plain(&log))
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
                .lookup(&Io::inline(), "k", &RequestLog::plain(&log))
                .await
                .unwrap();
            (got, hit)
        });
        assert_eq!(got, whole, "every byte once, in order");
        let Lookup::Hit(e) = hit else {
            panic!("the entry is stored")
        };
        assert_eq!(e.header.body_len, whole.len() as u64);
        let stored = std::fs::read(&*e.path).unwrap();
        assert_eq!(&stored[e.header.body_offset as usize..], &whole[..]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn max_range_offset_follows_nginx_check_range() {
        let r = |h: Option<&str>, max: Option<u64>| super::range_in_reach(h, max);
        assert!(r(Some("bytes=100-"), None), "no limit");
        assert!(r(None, Some(0)), "no range");
        assert!(!r(Some("bytes=0-1"), Some(0)), "0: any range");
        assert!(r(Some("bytes=9-20"), Some(10)));
        assert!(!r(Some("bytes=10-20"), Some(10)), "at the offset");
        assert!(!r(Some("bytes= 11-"), Some(10)));
        assert!(!r(Some("bytes=-5"), Some(10)), "a suffix");
        assert!(r(Some("items=50-"), Some(10)), "not bytes");
        assert!(r(Some("BYTES=5-"), Some(10)));
    }
}
