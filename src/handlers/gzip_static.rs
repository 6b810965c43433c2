//! `gzip_static`: NGINX's gzip_static module, a content step before the
//! static handler. For a GET or HEAD of a file URI it sends `PATH.gz`,
//! when that exists and the client takes it (`always`: every client), as
//! the file with `Content-Encoding: gzip`, whole (NGINX allows no ranges
//! on it); otherwise it declines ([`Content::Declined`], NGINX's
//! `NGX_DECLINED`) and the static handler serves the file itself. With
//! `on`, a `.gz` found marks the request (`ctx.gzip_vary`, NGINX's
//! `r->gzip_vary`) so the gzip filter adds `Vary: Accept-Encoding` to
//! whatever answers it, when `gzip_vary` is on.

use std::io;

use super::file::{self, locate};
use super::gzip::gzip_ok;
use super::outcome::{Content, Env, Outcome};
use crate::config::GzipStatic;
use crate::disk::{FileKind, OpenFile};
use crate::http::context::{Method, RequestCtx};
use crate::log::Level;

/// The content step: the `.gz` of the URI's file, or declined.
pub async fn serve(ctx: &mut RequestCtx, env: &Env<'_>) -> Content {
    let s = &ctx.loc.s;
    if s.gzip_static == GzipStatic::Off
        || !matches!(ctx.method, Method::Get | Method::Head)
        || ctx.uri.ends_with('/')
    {
        return Content::Declined;
    }
    let ok = match s.gzip_static {
        GzipStatic::On => gzip_ok(ctx, None),
        _ => true,
    };
    if !s.gzip_vary && !ok {
        return Content::Declined;
    }
    let on = s.gzip_static == GzipStatic::On;
    let (io, path) = match locate(ctx, env) {
        Ok(found) => found,
        Err(o) => return Content::Answered(*o),
    };
    let gz = format!("{path}.gz");
    let file = match file::open(ctx, env, &io, &gz).await {
        Ok(f) => f,
        Err(e) => {
            open_failed(ctx, env, &gz, &e);
            return Content::Declined;
        }
    };
    if on {
        ctx.gzip_vary = true;
        if !ok {
            return Content::Declined;
        }
    }
    match file.meta.kind {
        FileKind::Directory => return Content::Declined,
        FileKind::Other => {
            ctx.log(env.log)
                .line(Level::Crit, format_args!("\"{gz}\" is not a regular file"));
            return Content::Answered(Outcome::Status(404));
        }
        FileKind::Regular => {}
    }
    ctx.test_expect();
    ctx.request_filename = Some(gz);
    Content::Answered(response(ctx, file))
}

/// The log line for a `.gz` that could not be opened (none when it is
/// simply not there), as `ngx_http_gzip_static_handler` writes it.
fn open_failed(ctx: &RequestCtx, env: &Env<'_>, gz: &str, e: &io::Error) {
    let level = match e.raw_os_error() {
        Some(libc::ENOENT | libc::ENOTDIR | libc::ENAMETOOLONG) => return,
        Some(libc::EACCES | libc::EMLINK | libc::ELOOP) => Level::Error,
        _ => Level::Crit,
    };
    ctx.log(env.log).line(
        level,
        format_args!("open() \"{gz}\" failed {}", crate::util::errno_text(e)),
    );
}

/// The 200 for a `.gz` file, whole.
fn response(ctx: &RequestCtx, file: OpenFile) -> Outcome {
    let uri = ctx.uri.clone();
    let Outcome::Send(mut resp) = file::file_response(ctx, file, &uri) else {
        return Outcome::Status(500);
    };
    resp.allow_ranges = false;
    resp.headers
        .push(("Content-Encoding".into(), "gzip".into()));
    Outcome::Send(resp)
}
