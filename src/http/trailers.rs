//! The trailer fields `add_trailer` sends after a chunked body, rendered
//! once the body was sent (NGINX's trailers filter runs on the last
//! buffer, so `$request_time` and the like count the whole body). Which
//! responses end with trailers is the handlers' header filter's call
//! (`handlers::trailers`, which sets `Response::trailers`).

use std::io;

use super::context::RequestCtx;
use super::response::Response;
use super::writer::{Follows, Sending, Writer};
use crate::vars::template::{Var, VarSource};

/// Statuses a trailer applies to without `always` (NGINX's trailer
/// filter's list).
pub fn safe_status(status: u16) -> bool {
    matches!(status, 200 | 201 | 204 | 206 | 301 | 302 | 303 | 307 | 308)
}

/// The location's trailer lines that apply to `status`, rendered in
/// order; an empty value is left out. `$sent_trailer_NAME` reads the
/// lines rendered before it, as NGINX's trailers filter adds each to
/// `headers_out.trailers` in turn.
pub fn render(ctx: &RequestCtx, status: u16) -> Vec<(String, String)> {
    let safe = safe_status(status);
    let mut done = Vec::new();
    for t in ctx.loc.s.add_trailers.iter().filter(|t| safe || t.always) {
        let v = t.value.render(&WithTrailers { ctx, done: &done });
        if !v.is_empty() {
            done.push((t.name.clone(), v));
        }
    }
    done
}

/// The request's variables, with `$sent_trailer_NAME` read from the
/// trailer lines rendered so far.
struct WithTrailers<'a> {
    ctx: &'a RequestCtx,
    done: &'a [(String, String)],
}

impl VarSource for WithTrailers<'_> {
    fn append(&self, var: &Var, out: &mut String) {
        match var {
            Var::SentTrailer(name) => {
                if let Some((_, v)) = self.done.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
                    out.push_str(v)
                }
            }
            _ => self.ctx.append(var, out),
        }
    }

    fn slot(&self, index: usize) -> Option<String> {
        self.ctx.slot(index)
    }

    fn store_slot(&self, index: usize, value: &str) {
        self.ctx.store_slot(index, value)
    }

    fn capture(&self, n: u8, out: &mut String) {
        self.ctx.capture(n, out)
    }
}

/// Ends a response marked for trailers (`Response::trailers`): the last
/// chunk with the rendered fields, counted in `$bytes_sent`. Nothing for
/// another response or a HEAD.
pub(super) async fn send(
    ctx: &mut RequestCtx,
    w: &Writer<'_>,
    resp: &Response,
    sending: Sending,
) -> io::Result<()> {
    if !resp.trailers || sending == Sending::HeadOnly {
        return Ok(());
    }
    let last = super::chunked::last_chunk_with(&render(ctx, resp.status));
    w.write_all(&last, Follows::Nothing).await?;
    ctx.bytes_sent += last.len() as u64;
    Ok(())
}
