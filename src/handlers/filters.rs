//! The filters of NGINX's core that the chain ([`super::chain`]) runs
//! around the modules' ones: the not-modified filter ([`not_modified`]:
//! conditional requests, 200 only, not on a proxied response the cache
//! does not take, as NGINX), the headers filter ([`headers`]: `expires`,
//! `add_header`), the range filter ([`ranges`]: 200 responses whose
//! handler allows ranges; a sliced body, which the slice filter
//! `super::slice` made first, is narrowed, not cut again), and the header
//! writer's rules ([`writer_rules`]: only 200, 206 and 304 carry the
//! `Last-Modified` it writes itself; a proxied one goes out with any
//! status).
//!
//! The not-modified filter can turn the response into a 412 and the range
//! filter into a 416, which the chain's caller answers like any other error
//! status, `error_page` included.

use std::rc::Rc;

use crate::config::model::{Expires, ExpiresRule};
use crate::http::conditional::{self, Precondition};
use crate::http::context::RequestCtx;
use crate::http::range::{self, RangeOutcome};
use crate::http::response::{Body, BodyStream, ChunkFuture, Response, StreamBody};

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

/// The not-modified filter: 412 or 304 from the request's preconditions
/// against the response's validators.
pub(super) fn not_modified(ctx: &RequestCtx, resp: &mut Response) -> Result<(), u16> {
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

/// The header writer's rules, which NGINX applies only to a status
/// without a status line of its own (an upstream's, as a FastCGI
/// `Status: 204 No Content`, keeps its Content-Type and length): a 204
/// has no body; only 200, 206 and 304 keep the `Last-Modified` the
/// writer writes itself. NGINX's header filter drops only that one
/// (`headers_out.last_modified`); a proxied line stays in the header list
/// and goes out with any status (a 404 or a 301 keeps its origin's
/// Last-Modified).
pub(super) fn writer_rules(resp: &mut Response) {
    let own_line = resp.reason.as_ref().is_none_or(|(_, t)| t.is_empty());
    if resp.status == 204 && own_line {
        resp.content_type = None;
        resp.content_length = None;
        resp.body = Body::Empty;
    }
    if !matches!(resp.status, 200 | 206 | 304) {
        resp.last_modified = None;
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
pub(super) fn headers(ctx: &mut RequestCtx, resp: &mut Response) {
    let loc = std::sync::Arc::clone(&ctx.loc);
    let s = &loc.s;
    if s.add_headers.is_empty() && s.expires.is_none() {
        return;
    }
    if matches!(s.expires, Some(Expires::Var(_) | Expires::ModifiedVar(_)))
        || s.add_headers.iter().any(|h| h.reads_response)
    {
        ctx.sent_headers = resp.sent_headers();
    }
    let applies = header_filter_applies(resp.status);
    if applies {
        match &s.expires {
            Some(Expires::Fixed(rule)) => expires_headers(*rule, resp),
            Some(e @ (Expires::Var(t) | Expires::ModifiedVar(t))) => {
                // A value that does not parse sets nothing (NGINX).
                let modified = matches!(e, Expires::ModifiedVar(_));
                if let Ok(rule) = ExpiresRule::parse(modified, &t.render(&*ctx)) {
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
                // The date a set `Last-Modified` names is the response's
                // (If-Range compares it), written as set (NGINX's
                // `ngx_http_set_last_modified`).
                if h.name.eq_ignore_ascii_case("last-modified") {
                    resp.last_modified = conditional::parse_http_date(&v);
                    resp.last_modified_inline = true;
                }
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
pub(super) fn ranges(ctx: &RequestCtx, resp: &mut Response) -> Result<(), u16> {
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
        Body::Stream(_) | Body::Spliced { .. } => None,
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
            None if matches!(resp.body, Body::Spliced { .. }) => spliced_ranges(resp, &ranges, len),
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

/// 206 for one range of a body in memory then a file (flv, mp4), cut from
/// both parts; several ranges get the whole 200 (the mp4 module asks for
/// `single_range`; NGINX's range filter fails an flv one with "range in
/// overlapped buffers" unless every range lies in the 13-byte header).
fn spliced_ranges(resp: &mut Response, ranges: &[std::ops::Range<u64>], len: u64) {
    let Body::Spliced {
        lead,
        file,
        start,
        path,
        ..
    } = std::mem::replace(&mut resp.body, Body::Empty)
    else {
        unreachable!("called for a spliced body");
    };
    let ll = lead.len() as u64;
    if let [r] = ranges {
        resp.status = 206;
        resp.headers.push((
            "Content-Range".into(),
            format!("bytes {}-{}/{len}", r.start, r.end - 1),
        ));
        resp.content_length = Some(r.end - r.start);
        let from_lead = r.start.min(ll) as usize..r.end.min(ll) as usize;
        let in_file = r.start.max(ll) - ll..r.end.max(ll) - ll;
        resp.body = if in_file.is_empty() {
            Body::Bytes(lead[from_lead].to_vec())
        } else if from_lead.is_empty() {
            Body::File {
                file,
                start: start + in_file.start,
                len: in_file.end - in_file.start,
                path,
            }
        } else {
            Body::Spliced {
                lead: lead[from_lead].into(),
                file,
                start,
                len: in_file.end,
                path,
            }
        };
    } else {
        resp.body = Body::Spliced {
            lead,
            file,
            start,
            len: len - ll,
            path,
        };
        resp.accept_ranges = true;
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
