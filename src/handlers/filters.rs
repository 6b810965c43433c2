//! NGINX's header filter chain, in its order, run on every response before
//! it is written: the not-modified filter (conditional requests, 200 only,
//! not on a proxied response the cache does not take, as NGINX), the
//! headers filter (`expires`, `add_header`), the charset filter
//! (`super::charset`), the gzip filter (`super::gzip`), the range filter
//! (200 responses whose handler allows ranges; a sliced body, which the
//! slice filter `super::slice` made before this chain runs, is narrowed,
//! not cut again), and the header writer's
//! rule that only 200, 206 and 304 carry the `Last-Modified` it
//! writes itself (a proxied one goes out with any status).
//!
//! A filter can turn the response into an error (412 from the not-modified
//! filter, 416 from the range filter), which the caller answers like any
//! other error status, `error_page` included. What a pass set stays with
//! the request through a 416 ([`Carried`]; NGINX keeps it in the request's
//! `headers_out`): the 416 page carries the 200's `add_header` lines plus
//! its own pass's `always` ones, so such a header appears twice, and an
//! error page served for the 416 also keeps the file's ETag and charset.

use std::rc::Rc;

use crate::config::model::{Expires, ExpiresRule};
use crate::http::conditional::{self, Precondition};
use crate::http::context::RequestCtx;
use crate::http::range::{self, RangeOutcome};
use crate::http::response::{Body, BodyStream, ChunkFuture, Response, StreamBody};

/// What earlier passes through the chain left on the request for the
/// response that replaces theirs.
#[derive(Debug, Default)]
pub struct Carried {
    /// Header lines, the replaced response's ETag first.
    headers: Vec<(String, String)>,
    /// The charset chosen.
    charset: Option<String>,
}

impl Carried {
    /// A header line that stays on every response that answers the
    /// request from now on (`WWW-Authenticate` of a 401).
    pub fn add_header(&mut self, name: &str, value: String) {
        self.headers.push((name.to_string(), value));
    }

    /// Adds header lines that stay with the request (after the ones
    /// already carried).
    pub fn add(&mut self, mut headers: Vec<(String, String)>) {
        self.headers.append(&mut headers);
    }

    /// Puts the carried header lines before `resp`'s own. A response NGINX
    /// builds itself (`special`) drops the carried ETag, as NGINX clears
    /// the ETag of its special responses; another keeps it, and its own
    /// ETag follows the carried lines (NGINX sends both, in the order of
    /// its header list: a carried `WWW-Authenticate` comes first too).
    pub fn apply(&mut self, resp: &mut Response, special: bool) {
        let mut own = std::mem::take(&mut resp.headers);
        resp.headers = std::mem::take(&mut self.headers);
        // An upstream's type carried over an `X-Accel-Redirect` types the
        // answer, as NGINX's handlers keep a type already set; NGINX's
        // own pages are text/html.
        // The last one stands, as NGINX's copies replace each other.
        let mut carried_type = None;
        resp.headers.retain(|(n, v)| {
            let typed = n == "Content-Type";
            if typed {
                carried_type = Some(v.clone());
            }
            !typed
        });
        if let (Some(ct), false, false) = (carried_type, special, resp.own_type) {
            resp.content_type = Some(ct.into());
        }
        if special {
            resp.headers.retain(|(n, _)| n != "ETag");
        } else if !resp.headers.is_empty() {
            if let Some(e) = resp.etag.take() {
                resp.headers.push(("ETag".into(), e));
            }
        }
        resp.headers.append(&mut own);
    }
}

/// The response's ETag: its own, or the last one among its header lines
/// (NGINX's `headers_out.etag` is the last one set).
fn etag(resp: &Response) -> Option<&str> {
    resp.etag.as_deref().or_else(|| {
        resp.headers
            .iter()
            .rev()
            .find(|(n, _)| n == "ETag")
            .map(|(_, v)| v.as_str())
    })
}

/// Runs the chain on `resp`, after [`Carried::apply`]. `Err(code)` means
/// answer with `code` instead; `carried` then holds what stays with the
/// request (nothing after a 412: NGINX clears the response's headers
/// before sending that page).
pub fn run(
    ctx: &mut RequestCtx,
    env: &super::Env<'_>,
    resp: &mut Response,
    carried: &mut Carried,
) -> Result<(), u16> {
    if resp.status == 200 && !resp.no_not_modified {
        if let Err(code) = not_modified(ctx, resp) {
            *carried = Carried::default();
            return Err(code);
        }
    }
    ctx.status = resp.status;
    headers(ctx, resp);
    super::sub_filter::header_filter(ctx, resp);
    let charset = super::charset::header_filter(ctx, resp, carried.charset.take());
    super::ssi::header_filter(ctx, env, resp);
    super::gzip::header_filter(ctx, resp);
    if let Err(code) = ranges(ctx, resp) {
        // The error page is not a 200: a proxied Last-Modified line does
        // not stay with it (the header writer's rule below).
        if resp.last_modified_inline {
            resp.headers
                .retain(|(n, _)| !n.eq_ignore_ascii_case("last-modified"));
        }
        carried.headers = resp
            .etag
            .take()
            .map(|e| ("ETag".to_string(), e))
            .into_iter()
            .collect();
        carried.headers.append(&mut resp.headers);
        carried.charset = charset;
        return Err(code);
    }
    // The header writer's rules, which NGINX applies only to a status
    // without a status line of its own (an upstream's, as a FastCGI
    // `Status: 204 No Content`, keeps its Content-Type and length).
    let own_line = resp.reason.as_ref().is_none_or(|(_, t)| t.is_empty());
    if resp.status == 204 && own_line {
        resp.content_type = None;
        resp.content_length = None;
        resp.body = Body::Empty;
    }
    // NGINX's header filter drops only the Last-Modified it writes itself
    // (`headers_out.last_modified`); a proxied line stays in the header
    // list and goes out with any status (a 404 or a 301 keeps its origin's
    // Last-Modified).
    if !matches!(resp.status, 200 | 206 | 304) {
        resp.last_modified = None;
    }
    super::trailers::header_filter(ctx, resp);
    ctx.status = resp.status;
    Ok(())
}

/// The not-modified filter: 412 or 304 from the request's preconditions
/// against the response's validators.
fn not_modified(ctx: &RequestCtx, resp: &mut Response) -> Result<(), u16> {
    match conditional::evaluate(
        |n| ctx.header(n),
        etag(resp),
        resp.last_modified,
        ctx.loc.s.if_modified_since,
    ) {
        Precondition::Proceed => Ok(()),
        Precondition::Failed => Err(412),
        Precondition::NotModified => {
            resp.status = 304;
            resp.content_type = None;
            resp.content_length = None;
            resp.accept_ranges = false;
            resp.body = Body::Empty;
            Ok(())
        }
    }
}

/// For a body filter that changes the body's length (gzip, charset to or
/// from UTF-8, sub_filter): NGINX's chunked filter frames such a body as
/// chunks on HTTP/1.1 and closes the connection after it on HTTP/1.0.
pub fn frame_unknown_length(ctx: &RequestCtx, resp: &mut Response) {
    if ctx.head.version == crate::http::request::Version::Http11 {
        resp.chunked = true;
    } else {
        resp.close = true;
    }
}

/// Statuses `add_header` and `expires` apply to without `always`.
fn header_filter_applies(status: u16) -> bool {
    matches!(
        status,
        200 | 201 | 204 | 206 | 301 | 302 | 303 | 304 | 307 | 308
    )
}

/// The headers filter: `expires` and `add_header`. Their values may read
/// `$sent_http_*` (h5bp derives its security headers and `expires` from
/// `$sent_http_content_type` through maps), so when one does the
/// response's header lines are lent to the request first, as NGINX's
/// variables read `headers_out` whenever they are evaluated.
fn headers(ctx: &mut RequestCtx, resp: &mut Response) {
    let loc = std::sync::Arc::clone(&ctx.loc);
    let s = &loc.s;
    if s.add_headers.is_empty() && s.expires.is_none() {
        return;
    }
    if matches!(s.expires, Some(Expires::Var(_))) || s.add_headers.iter().any(|h| h.reads_response)
    {
        ctx.sent_headers = resp.sent_headers();
    }
    let applies = header_filter_applies(resp.status);
    if applies {
        match &s.expires {
            Some(Expires::Fixed(rule)) => expires_headers(*rule, resp),
            Some(Expires::Var(t)) => {
                // A value that does not parse sets nothing (NGINX).
                if let Ok(rule) = ExpiresRule::parse(false, &t.render(&*ctx)) {
                    expires_headers(rule, resp);
                }
            }
            None => {}
        }
    }
    for h in s.add_headers.iter() {
        if applies || h.always {
            let v = h.value.render(&*ctx);
            // NGINX's `Last-Modified`/`ETag` setters: an empty value
            // removes the response's own, another replaces it.
            drop_validator(resp, &h.name);
            if !v.is_empty() {
                resp.headers.push((h.name.clone(), v));
            }
        }
    }
}

/// For `add_header Last-Modified|ETag`: drops the response's own
/// validator of that name (its slot and any such header line).
fn drop_validator(resp: &mut Response, name: &str) {
    if name.eq_ignore_ascii_case("last-modified") {
        resp.last_modified = None;
    } else if name.eq_ignore_ascii_case("etag") {
        resp.etag = None;
    } else {
        return;
    }
    resp.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
}

/// NGINX's `ngx_http_set_expires`: sets `Expires` and `Cache-Control`,
/// replacing the response's own (a proxied one's) in place: the first
/// `Cache-Control` line takes the value, later ones go.
fn expires_headers(rule: ExpiresRule, resp: &mut Response) {
    let now = crate::util::time::now().0;
    let (expires, cc) = match rule {
        ExpiresRule::Off => return,
        ExpiresRule::Epoch => (
            "Thu, 01 Jan 1970 00:00:01 GMT".to_string(),
            "no-cache".to_string(),
        ),
        ExpiresRule::Max => (
            "Thu, 31 Dec 2037 23:55:55 GMT".to_string(),
            "max-age=315360000".to_string(),
        ),
        ExpiresRule::Access(0) => (crate::util::time::http_date(now), "max-age=0".into()),
        other => {
            let (at, max_age) = match (other, resp.last_modified) {
                (ExpiresRule::Daily(t), _) => {
                    let at = crate::util::time::next_time_of_day(now, t);
                    (at, at - now)
                }
                (ExpiresRule::Modified(t), Some(lm)) => (lm + t, lm + t - now),
                (ExpiresRule::Access(t) | ExpiresRule::Modified(t), _) => (now + t, t),
                _ => unreachable!("handled above"),
            };
            let cc = if max_age < 0 {
                "no-cache".to_string()
            } else {
                format!("max-age={max_age}")
            };
            (crate::util::time::http_date(at), cc)
        }
    };
    set_line(resp, "Expires", expires);
    set_line(resp, "Cache-Control", cc);
}

/// Gives the first header line named `name` the value `v` and drops the
/// others of that name, or adds the line.
fn set_line(resp: &mut Response, name: &str, v: String) {
    let mut v = Some(v);
    resp.headers.retain_mut(|(n, val)| {
        if !n.eq_ignore_ascii_case(name) {
            return true;
        }
        match v.take() {
            Some(new) => {
                *val = new;
                true
            }
            None => false,
        }
    });
    if let Some(v) = v {
        resp.headers.push((name.to_string(), v));
    }
}

/// The range filter, for a 200 whose whole body is a file range and
/// allows ranges: 206
/// (one part or `multipart/byteranges`), `Err(416)` with `Content-Range:
/// bytes */LEN` pushed, or the full body with `Accept-Ranges: bytes`.
fn ranges(ctx: &RequestCtx, resp: &mut Response) -> Result<(), u16> {
    let s = &ctx.loc.s;
    if resp.status != 200 || !resp.allow_ranges || s.max_ranges == Some(0) {
        return Ok(());
    }
    // The whole body: a file range, which may start inside its file (a
    // cached entry after its header), so ranges count from `base`; or a
    // stream of known length (a cacheable proxied response), served in
    // one range at most (NGINX's `single_range`).
    let Some(len) = resp.content_length else {
        return Ok(());
    };
    let file = match &resp.body {
        Body::File {
            file,
            start,
            len: blen,
            path,
        } if *blen == len => Some((Rc::clone(file), *start, Rc::clone(path))),
        Body::Stream(_) => None,
        _ => return Ok(()),
    };
    let wanted = match (ctx.header("range"), ctx.header("if-range")) {
        (Some(r), Some(ir)) => {
            conditional::if_range_matches(ir, etag(resp), resp.last_modified).then_some(r)
        }
        (r, _) => r,
    };
    let outcome = wanted.map_or(RangeOutcome::Full, |r| {
        range::parse_range(r, len, s.max_ranges)
    });
    match outcome {
        RangeOutcome::Full => resp.accept_ranges = true,
        RangeOutcome::Unsatisfiable => {
            resp.headers
                .push(("Content-Range".into(), format!("bytes */{len}")));
            return Err(416);
        }
        RangeOutcome::Partial(ranges) => match file {
            Some((file, base, path)) => file_ranges(resp, (file, path), base, &ranges, len),
            None => stream_range(resp, &ranges, len),
        },
    }
    Ok(())
}

/// 206 for ranges of a file body whose first byte is at `base` in its
/// file: one part, or `multipart/byteranges`.
fn file_ranges(
    resp: &mut Response,
    (file, path): (Rc<crate::disk::OpenFile>, Rc<str>),
    base: u64,
    ranges: &[std::ops::Range<u64>],
    len: u64,
) {
    resp.status = 206;
    if let [r] = ranges {
        resp.headers.push((
            "Content-Range".into(),
            format!("bytes {}-{}/{len}", r.start, r.end - 1),
        ));
        resp.content_length = Some(r.end - r.start);
        resp.body = Body::File {
            file,
            start: base + r.start,
            len: r.end - r.start,
            path,
        };
    } else {
        let ct = resp.content_type.clone().unwrap_or_default();
        let mut parts = range::multipart(ranges, len, &ct, next_boundary());
        for (_, r) in &mut parts.parts {
            *r = base + r.start..base + r.end;
        }
        resp.content_type = Some(parts.content_type_header().into());
        resp.content_length = Some(parts.content_length());
        resp.body = Body::Multipart { file, parts };
    }
}

/// 206 for one range of a streamed body (NGINX's `single_range`); several
/// ranges get the whole 200. A sliced body cuts the range itself (from
/// the slices that hold it); another is read from its start.
fn stream_range(resp: &mut Response, ranges: &[std::ops::Range<u64>], len: u64) {
    let [r] = ranges else {
        resp.accept_ranges = true;
        return;
    };
    let Body::Stream(sb) = std::mem::replace(&mut resp.body, Body::Empty) else {
        unreachable!("only a stream has no file");
    };
    resp.status = 206;
    resp.headers.push((
        "Content-Range".into(),
        format!("bytes {}-{}/{len}", r.start, r.end - 1),
    ));
    resp.content_length = Some(r.end - r.start);
    let mut inner = sb.into_inner();
    if !inner.narrow(r.clone()) {
        inner = Box::new(RangeStream {
            inner,
            skip: r.start,
            left: r.end - r.start,
        });
    }
    resp.body = Body::Stream(StreamBody::new(inner));
}

/// One byte range of a streamed body: the bytes before it are read and
/// dropped, the stream ends after it (what is left unread stays with the
/// inner stream, which a cache fill completes on its own when dropped).
/// Cancel-safe as its inner stream is: nothing is awaited once a piece
/// has arrived.
struct RangeStream {
    inner: Box<dyn BodyStream>,
    skip: u64,
    left: u64,
}

impl BodyStream for RangeStream {
    fn read_chunk<'a>(&'a mut self, out: &'a mut Vec<u8>) -> ChunkFuture<'a> {
        Box::pin(async move {
            let mut piece = Vec::new();
            while self.left > 0 {
                piece.clear();
                if !self.inner.read_chunk(&mut piece).await? {
                    break;
                }
                let n = piece.len() as u64;
                if self.skip >= n {
                    self.skip -= n;
                    continue;
                }
                let from = self.skip as usize;
                self.skip = 0;
                let take = self.left.min(n - from as u64) as usize;
                out.extend_from_slice(&piece[from..from + take]);
                self.left -= take as u64;
                return Ok(true);
            }
            Ok(false)
        })
    }
}

thread_local! {
    static BOUNDARY: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// NGINX numbers multipart boundaries with a process-wide counter.
fn next_boundary() -> u64 {
    BOUNDARY.with(|b| {
        let n = b.get() + 1;
        b.set(n);
        n
    })
}
