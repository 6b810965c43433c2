//! NGINX's slice module (`ngx_http_slice_filter_module`): with `slice
//! SIZE` and `$slice_range` in the request sent upstream (`proxy_set_header
//! Range $slice_range`, and in `proxy_cache_key`), a response is put
//! together from slice-sized ranges of the upstream's body, each fetched —
//! and cached under its own key — by the location's content handler.
//!
//! - The main request's handler fetches the slice that holds the first
//!   byte the client asked for (`$slice_range` is fixed when the request
//!   first reads it: `context::RequestCtx::slice`).
//! - [`header_filter`], first of the header filters: its 206 becomes a
//!   200 of the whole length (`Content-Range`'s total), without
//!   `Content-Range` and `Accept-Ranges`, that the range filter may serve
//!   in one range (If-Range against this first slice's validators). A
//!   status other than 206 passes as it is. A malformed `Content-Range`
//!   is an error: the connection closes without an answer, as NGINX's.
//! - The body is a [`SliceStream`]: the first slice's body, then each next
//!   slice fetched by a subrequest (the location's handler on a copy of
//!   the request whose `$slice_range` names that slice) only once the one
//!   before it is read, so one slice at a time is in flight and the body
//!   streams (backpressure from the client reaches the upstream). The
//!   range filter narrows it ([`BodyStream::narrow`]) rather than cutting
//!   it: slices before the range are never fetched.
//! - A subrequest's answer must be a 206 of exactly its slice with the
//!   first slice's `ETag`; otherwise NGINX's error line ("etag mismatch
//!   in slice response", "unexpected status code N in slice response",
//!   ...) is logged and the body ends short (the connection closes).

use std::future::Future;
use std::io;
use std::ops::Range;
use std::pin::Pin;
use std::rc::Rc;

use super::body_source::PieceSource;
use super::outcome::{Env, Outcome};
use super::subrequest::Subrequest;
use crate::http::context::RequestCtx;
use crate::http::response::{
    logged_error, Body, BodyStream, ChunkFuture, HeadTiming, Response, StreamBody,
};
use crate::log::ErrorLog;

/// NGINX's `postpone_output` default: the bytes a write waits for.
const POSTPONE_OUTPUT: usize = 1460;

/// The slice filter refused a response (its reason logged): the
/// connection closes without an answer.
#[derive(Debug)]
pub struct Aborted;

/// The slice filter on the main request's response (a no-op unless the
/// request read `$slice_range`).
pub fn header_filter(ctx: &RequestCtx, env: &Env<'_>, resp: &mut Response) -> Result<(), Aborted> {
    let Some(start) = ctx.slice.get() else {
        return Ok(());
    };
    if resp.status != 206 {
        ctx.slice.set(None);
        return Ok(());
    }
    let size = ctx.loc.s.slice;
    let mut etag = None;
    let cr = check(ctx, env.log, resp, start, size, &mut etag).map_err(|()| Aborted)?;
    resp.status = 200;
    resp.reason = None;
    resp.content_length = Some(cr.total);
    resp.chunked = false;
    resp.headers.retain(|(n, _)| {
        !n.eq_ignore_ascii_case("content-range") && !n.eq_ignore_ascii_case("accept-ranges")
    });
    resp.accept_ranges = false;
    resp.allow_ranges = true;
    resp.head_timing = HeadTiming::WithFirstPiece;
    // A HEAD's body is empty and never read (no slice follows), but the
    // range filter sees a stream as for a GET.
    let body = std::mem::replace(&mut resp.body, Body::Empty);
    let first = Slice {
        src: PieceSource::of(body),
        at: cr.start,
        end: cr.end,
        etag,
    };
    let stream = SliceStream {
        next: first.end,
        pos: cr.start,
        end: cr.total,
        etag: first.etag.clone(),
        cur: Some(first),
        pending: None,
        sub: Rc::new(Subrequest::of(ctx, env)),
        held: Vec::new(),
    };
    resp.body = Body::Stream(StreamBody::new(Box::new(stream)));
    Ok(())
}

/// A slice response's `Content-Range`: `start..end` of `total`.
struct ContentRange {
    start: u64,
    end: u64,
    total: u64,
}

/// NGINX's checks of a slice response (status 206 already): the ETag is
/// the one seen so far (then kept), the `Content-Range` is exactly the
/// slice from `start`.
fn check(
    ctx: &RequestCtx,
    log: &ErrorLog,
    resp: &Response,
    start: u64,
    size: u64,
    etag: &mut Option<String>,
) -> Result<ContentRange, ()> {
    let fail = |msg: std::fmt::Arguments<'_>| ctx.log(log).error(msg);
    let own = resp.etag.as_deref().or_else(|| resp.header("etag"));
    if let Some(seen) = etag.as_deref() {
        if own != Some(seen) {
            fail(format_args!("etag mismatch in slice response"));
            return Err(());
        }
    }
    if let Some(e) = own {
        *etag = Some(e.to_string());
    }
    let Some((s, e, total)) = resp.header("content-range").and_then(parse_content_range) else {
        fail(format_args!("invalid range in slice response"));
        return Err(());
    };
    let Some(total) = total else {
        fail(format_args!("no complete length in slice response"));
        return Err(());
    };
    let end = start.saturating_add(size).min(total);
    if s != start || e != end {
        fail(format_args!(
            "unexpected range in slice response: {s}-{e}, expected: {start}-{end}"
        ));
        return Err(());
    }
    Ok(ContentRange {
        start: s,
        end: e,
        total,
    })
}

/// `bytes START-LAST/TOTAL` (`*` for an unknown total), spaces allowed
/// around the parts as NGINX's parser allows them: `(START, LAST + 1,
/// TOTAL)`.
fn parse_content_range(v: &str) -> Option<(u64, u64, Option<u64>)> {
    let rest = v.strip_prefix("bytes ")?;
    let (a, rest) = rest.split_once('-')?;
    let (b, total) = rest.split_once('/')?;
    let num = |s: &str| -> Option<u64> {
        let s = s.trim_matches(' ');
        if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    let a = num(a.trim_start_matches(' '))?;
    let b = num(b)?.checked_add(1)?;
    let total = match total.trim_matches(' ') {
        "*" => None,
        t => Some(num(t)?),
    };
    Some((a, b, total))
}

/// One slice's body as it is read.
struct Slice {
    src: PieceSource,
    /// The offset (in the whole body) of the next byte `src` gives.
    at: u64,
    /// One past the slice's last byte.
    end: u64,
    /// The ETag known after this slice.
    etag: Option<String>,
}

type SliceFuture = Pin<Box<dyn Future<Output = Result<Slice, ()>>>>;

/// Fetches the slice at `start` through the location's handler and
/// checks its answer.
fn fetch(sub: Rc<Subrequest>, start: u64, etag: Option<String>) -> SliceFuture {
    Box::pin(async move {
        let mut ctx = sub.clone_ctx();
        ctx.slice.set(Some(start));
        let env = sub.env();
        let resp = match super::handler(&mut ctx, &env).await {
            Outcome::Send(r) | Outcome::Special(r) => Ok(r),
            Outcome::Status(code) => Err(code),
            _ => Err(0),
        };
        let resp = match resp {
            Ok(r) if r.status == 206 => r,
            other => {
                let code = other.map_or_else(|c| c, |r| r.status);
                ctx.log(&sub.log).error(format_args!(
                    "unexpected status code {code} in slice response"
                ));
                return Err(());
            }
        };
        let mut etag = etag;
        let cr = check(&ctx, &sub.log, &resp, start, ctx.loc.s.slice, &mut etag)?;
        Ok(Slice {
            src: PieceSource::of(resp.body),
            at: cr.start,
            end: cr.end,
            etag,
        })
    })
}

/// The body of a sliced response: bytes `pos..end` of the whole, from the
/// slice being read and then the next ones, fetched one at a time.
/// Cancel-safe: a subrequest in flight is kept in `pending`, a slice's
/// source moves only once a piece has arrived.
struct SliceStream {
    /// The slice being read.
    cur: Option<Slice>,
    /// The next slice's fetch, in flight.
    pending: Option<SliceFuture>,
    /// Where the next slice starts.
    next: u64,
    /// The next byte to give.
    pos: u64,
    /// One past the last byte to give.
    end: u64,
    /// The first slices' ETag, which the next must carry.
    etag: Option<String>,
    sub: Rc<Subrequest>,
    /// Bytes read and not yet given (gathered up to `POSTPONE_OUTPUT`).
    held: Vec<u8>,
}

impl SliceStream {
    /// The slice to read from: the current one, or the next one fetched.
    async fn slice(&mut self) -> io::Result<&mut Slice> {
        if self.cur.is_none() {
            if self.next >= self.end {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "slices ended before the body",
                ));
            }
            let (sub, next, etag) = (Rc::clone(&self.sub), self.next, self.etag.clone());
            let f = self.pending.get_or_insert_with(|| fetch(sub, next, etag));
            let got = f.await;
            self.pending = None;
            let s = got.map_err(|()| logged_error())?;
            self.next = s.end;
            self.etag = s.etag.clone();
            self.cur = Some(s);
        }
        Ok(self.cur.as_mut().expect("set above"))
    }
}

impl BodyStream for SliceStream {
    fn read_chunk<'a>(&'a mut self, out: &'a mut Vec<u8>) -> ChunkFuture<'a> {
        Box::pin(async move {
            // Pieces are gathered up to NGINX's `postpone_output`: a next
            // slice that fails before then leaves nothing sent (the head
            // waits: `HeadTiming::WithFirstPiece`).
            // They wait in `held`, so a read dropped while the next slice
            // is fetched loses nothing.
            while self.pos < self.end && self.held.len() < POSTPONE_OUTPUT {
                let s = self.slice().await?;
                let (piece, last) = s.src.next().await?;
                let at = s.at;
                s.at += piece.len() as u64;
                if s.at > s.end || (last && s.at < s.end) {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "slice body of the wrong length",
                    ));
                }
                if last {
                    self.cur = None;
                }
                let n = piece.len() as u64;
                let from = self.pos.saturating_sub(at).min(n) as usize;
                let to = self.end.saturating_sub(at).min(n) as usize;
                if from < to {
                    self.held.extend_from_slice(&piece[from..to]);
                    self.pos = at + to as u64;
                }
            }
            if self.held.is_empty() {
                return Ok(false);
            }
            out.append(&mut self.held);
            Ok(true)
        })
    }

    fn narrow(&mut self, range: Range<u64>) -> bool {
        self.pos = range.start;
        self.end = range.end;
        if let Some(cur) = &self.cur {
            if range.start >= cur.end {
                // The first slice holds none of it: start at the one that
                // holds the range's first byte (the first slice's fill,
                // if any, completes on its own).
                let size = self.sub.loc.s.slice.max(1);
                self.next = self.next.max(size * (range.start / size));
                self.cur = None;
            }
        }
        true
    }
}
