//! The trailer fields `add_trailer` sends after a chunked body, rendered
//! once the body was sent (NGINX's trailers filter runs on the last
//! buffer, so `$request_time` and the like count the whole body). Which
//! responses end with trailers is the handlers' header filter's call
//! (`handlers::trailers`, which sets `Response::trailers`).

use std::io;

use super::context::RequestCtx;
use super::response::Response;
use super::writer::{Follows, Sending, Writer};

/// Statuses a trailer applies to without `always` (NGINX's trailer
/// filter's list).
pub fn safe_status(status: u16) -> bool {
    matches!(status, 200 | 201 | 204 | 206 | 301 | 302 | 303 | 307 | 308)
}

/// The location's trailer lines that apply to `status`, rendered; an
/// empty value is left out.
pub fn render(ctx: &RequestCtx, status: u16) -> Vec<(String, String)> {
    let safe = safe_status(status);
    ctx.loc
        .s
        .add_trailers
        .iter()
        .filter(|t| safe || t.always)
        .map(|t| (t.name.clone(), t.value.render(ctx)))
        .filter(|(_, v)| !v.is_empty())
        .collect()
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
