//! The addition filter, NGINX's `ngx_http_addition_filter_module`:
//! `add_before_body URI` and `add_after_body URI` put the body of a
//! subrequest to URI before and after a main request's 200 response of an
//! `addition_types` type (text/html by default). The header part is
//! NGINX's: `Content-Length` goes (chunked on HTTP/1.1, a close on 1.0),
//! ranges go (`Accept-Ranges` too), the ETag becomes weak. The body part,
//! [`AdditionStream`], sends the before-subrequest's body, then the
//! response's own pieces as they come, then — only once that body ended
//! whole — the after-subrequest's body: a body cut short (an upstream
//! that closed early) ends the response without it, as NGINX issues the
//! after-subrequest only on the last buffer. The subrequests are
//! `handlers::subrequest`'s (GET, the URI as written, no arguments), run
//! one at a time in order, so their bodies come out in place; a
//! subrequest's own response never gets additions (NGINX's `r != r->main`
//! check), so a location may add itself.
//!
//! In the filter chain the row stands after SSI and before gzip: the
//! response's own body has passed `sub_filter`, charset and SSI (which in
//! NGINX see only the main request's buffers) and gzip compresses the
//! whole, as NGINX's postponed subrequest output reaches its gzip filter.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use super::body_source::{frame_unknown_length, PieceSource};
use super::outcome::Env;
use super::subrequest::{Answer, Subrequest};
use crate::http::context::RequestCtx;
use crate::http::response::{Body, BodyStream, ChunkFuture, Response, StreamBody};

/// Runs the addition header part on `resp` and wraps its body.
pub fn header_filter(ctx: &mut RequestCtx, env: &Env<'_>, resp: &mut Response) {
    let a = &ctx.loc.s.addition;
    if resp.status != 200 || ctx.subrequest || (a.before.is_empty() && a.after.is_empty()) {
        return;
    }
    let Some(ct) = resp.content_type.as_deref() else {
        return;
    };
    let base = ct.split(';').next().unwrap_or("").trim();
    if !a
        .types
        .iter()
        .any(|t| t == "*" || t.eq_ignore_ascii_case(base))
    {
        return;
    }
    resp.content_length = None;
    resp.allow_ranges = false;
    resp.accept_ranges = false;
    resp.headers
        .retain(|(n, _)| !n.eq_ignore_ascii_case("accept-ranges"));
    weak_etag(resp);
    if ctx.is_head() {
        return;
    }
    frame_unknown_length(ctx, resp);
    let mut parts = VecDeque::new();
    if !a.before.is_empty() {
        parts.push_back(Part::Sub(a.before.clone()));
    }
    let body = std::mem::replace(&mut resp.body, Body::Empty);
    parts.push_back(Part::Main(PieceSource::of(body)));
    if !a.after.is_empty() {
        parts.push_back(Part::Sub(a.after.clone()));
    }
    let stream = AdditionStream {
        sub: Rc::new(Subrequest::of(ctx, env)),
        parts,
        active: None,
    };
    resp.body = Body::Stream(StreamBody::new(Box::new(stream)));
}

/// NGINX's `ngx_http_weak_etag`: a strong ETag (the response's or an
/// upstream's line) made weak, anything else not a quoted tag dropped.
fn weak_etag(resp: &mut Response) {
    let weaken = |e: &str| -> Option<String> {
        if e.starts_with("W/") {
            Some(e.to_string())
        } else if e.starts_with('"') {
            Some(format!("W/{e}"))
        } else {
            None
        }
    };
    resp.etag = resp.etag.as_deref().and_then(weaken);
    let mut kept = Vec::with_capacity(resp.headers.len());
    for (n, v) in resp.headers.drain(..) {
        if !n.eq_ignore_ascii_case("etag") {
            kept.push((n, v));
        } else if let Some(w) = weaken(&v) {
            kept.push((n, w));
        }
    }
    resp.headers = kept;
}

/// What the body is made of, in order.
enum Part {
    /// A subrequest to this URI, whose body goes out.
    Sub(String),
    /// The response's own body.
    Main(PieceSource),
}

/// The part being sent.
enum Active {
    /// A subrequest runs (kept here, so a dropped poll loses nothing).
    Pending(Pin<Box<dyn Future<Output = Answer>>>),
    /// A body being read.
    Reading(PieceSource),
}

/// A body with the subrequests' bodies before and after it.
struct AdditionStream {
    /// Makes the subrequests.
    sub: Rc<Subrequest>,
    parts: VecDeque<Part>,
    active: Option<Active>,
}

impl BodyStream for AdditionStream {
    fn read_chunk<'a>(&'a mut self, out: &'a mut Vec<u8>) -> ChunkFuture<'a> {
        // Every await keeps its state in `self`: cancel-safe.
        Box::pin(async move {
            loop {
                match &mut self.active {
                    Some(Active::Pending(answer)) => {
                        let answer = answer.as_mut().await;
                        self.active = answer
                            .response
                            .map(|r| Active::Reading(PieceSource::of(r.body)));
                    }
                    Some(Active::Reading(src)) => {
                        let (piece, last) = src.next().await?;
                        if last {
                            self.active = None;
                        }
                        if !piece.is_empty() {
                            out.extend_from_slice(&piece);
                            return Ok(true);
                        }
                    }
                    None => match self.parts.pop_front() {
                        None => return Ok(false),
                        Some(Part::Main(src)) => self.active = Some(Active::Reading(src)),
                        Some(Part::Sub(uri)) => {
                            let sub = Rc::clone(&self.sub);
                            let fut = async move { sub.run(uri, None).await };
                            self.active = Some(Active::Pending(Box::pin(fut)));
                        }
                    },
                }
            }
        })
    }
}
