//! `flv`: NGINX's `ngx_http_flv_module` as a location's handler. A file is
//! sent whole, or with `?start=N` (a byte offset inside the file, below its
//! size) as the 13-byte FLV header followed by the file from byte N: a
//! [`Body::Spliced`], so the tail goes out through the disk layer's send
//! path (`sendfile` or copies, the fast path or the pool) like any file.
//! Ranges apply to that whole body (the range filter cuts both parts). A
//! URI ending in `/` or a path that is not a regular file is declined, and
//! the static handler answers it, as NGINX's content phase goes on to the
//! index and static modules.

use std::rc::Rc;

use super::file::{content_type, locate, open};
use super::outcome::{Content, Env, Outcome};
use super::static_file::open_failed;
use crate::disk::{FileKind, OpenFile};
use crate::http::conditional;
use crate::http::context::{Method, RequestCtx};
use crate::http::response::{Body, Response};

/// NGINX's `ngx_flv_header`: signature, version 1, audio and video, the
/// 9-byte header's length, then the first `PreviousTagSize0`.
pub const FLV_HEADER: &[u8; 13] = b"FLV\x01\x05\x00\x00\x00\x09\x00\x00\x00\x00";

/// The value of the request argument `name` (NGINX's `ngx_http_arg`: the
/// first one, the name matched without regard to case).
pub fn arg<'a>(ctx: &'a RequestCtx, name: &str) -> Option<&'a str> {
    ctx.args.as_deref()?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        k.eq_ignore_ascii_case(name).then_some(v)
    })
}

/// NGINX's `ngx_atoof`: decimal digits only, else `None`.
fn atoof(v: &str) -> Option<u64> {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

/// What `flv` and `mp4` do before their own work, as NGINX's two modules
/// do: GET and HEAD only (405), a URI ending in `/` or a path that is not
/// a regular file declined to the static handler, the file opened through
/// the disk layer (its errors answered as the static handler's), `Expect`
/// answered and `$request_filename` set.
pub(super) async fn open_media(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
) -> Result<(OpenFile, String), Content> {
    if !matches!(ctx.method, Method::Get | Method::Head) {
        return Err(Content::Answered(Outcome::Status(405)));
    }
    if ctx.uri.ends_with('/') {
        return Err(Content::Declined);
    }
    let (io, path) = locate(ctx, env).map_err(|o| Content::Answered(*o))?;
    let file = match open(ctx, env, &io, &path).await {
        Ok(f) => f,
        Err(e) => return Err(Content::Answered(open_failed(ctx, env, &path, &e))),
    };
    if file.meta.kind != FileKind::Regular {
        return Err(Content::Declined);
    }
    ctx.test_expect();
    ctx.request_filename = Some(path.clone());
    Ok((file, path))
}

/// The `flv` handler.
pub async fn serve(ctx: &mut RequestCtx, env: &Env<'_>) -> Content {
    let (file, path) = match open_media(ctx, env).await {
        Ok(found) => found,
        Err(c) => return c,
    };
    let meta = file.meta;
    // An offset that does not parse or lies past the end sends the file.
    let start = arg(ctx, "start")
        .and_then(atoof)
        .filter(|&n| n < meta.size)
        .unwrap_or(0);
    let s = &ctx.loc.s;
    let mut resp = Response::new(200);
    resp.content_type = Some(content_type(&s.types, &s.default_type, &ctx.uri));
    resp.last_modified = Some(meta.mtime);
    resp.allow_ranges = true;
    let (file, path) = (Rc::new(file), Rc::<str>::from(path));
    let len = meta.size - start;
    resp.body = if start == 0 {
        Body::File {
            file,
            start: 0,
            len,
            path,
        }
    } else {
        Body::Spliced {
            lead: Rc::from(&FLV_HEADER[..]),
            file,
            start,
            len,
            path,
        }
    };
    // NGINX's ETag is of the length sent (`content_length_n` is set first).
    let sent = resp.body.len();
    resp.content_length = Some(sent);
    resp.etag = s.etag.then(|| conditional::etag(meta.mtime, sent));
    Content::Answered(Outcome::Send(resp))
}
