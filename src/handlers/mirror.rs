//! NGINX's `ngx_http_mirror_module`: `mirror URI` sends a copy of the
//! request to URI as a background subrequest ([`super::subrequest`]),
//! after `try_files` (NGINX's precontent phase), whose response is
//! thrown away. The main request goes on at once; its response is sent
//! while the mirrors run, and the connection reads its next request (and
//! the access log line is written) once they end, as NGINX finalizes the
//! request only when its background subrequests are done.
//!
//! With `mirror_request_body on` (the default) the client's body is read
//! whole first (NGINX's `ngx_http_read_client_request_body` before the
//! subrequests start) and each mirror gets a copy; the main request's
//! handler then reads the same bytes again (`ClientBody::preserve`). The
//! body is held in memory (NGINX would spill one larger than
//! `client_body_buffer_size` to a temp file), bounded by
//! `client_max_body_size`.

use std::io;
use std::rc::Rc;

use super::subrequest::Subrequest;
use super::{Env, Outcome};
use crate::http::context::RequestCtx;
use crate::log::Level;

/// Starts the location's mirrors (it has some); `Some` when the request
/// stops here (its body could not be read).
// The connection loop waits while the handler runs: no one else borrows
// the request body meanwhile.
#[allow(clippy::await_holding_refcell_ref)]
pub async fn start(ctx: &mut RequestCtx, env: &Env<'_>) -> Option<Outcome> {
    let mut body = None;
    if ctx.loc.s.mirror_request_body {
        if let Some(b) = env.body {
            ctx.test_expect();
            if ctx.send_continue {
                ctx.send_continue = false;
                if b.borrow()
                    .send_continue(ctx.loc.s.send_timeout)
                    .await
                    .is_err()
                {
                    return Some(Outcome::Close);
                }
            }
            let whole = match read_whole(ctx, env).await {
                Ok(w) => w,
                Err(o) => return Some(o),
            };
            if !whole.is_empty() {
                ctx.head.content_length = Some(whole.len() as u64);
                ctx.head.chunked = false;
                ctx.request_body = Some(whole.clone());
                b.borrow_mut().preserve(whole.clone());
                body = Some(Rc::new(whole));
            } else {
                b.borrow_mut().preserve(whole);
            }
        }
    }
    // Made once the body is read: its head has the body's length.
    let sub = Subrequest::of(ctx, env).same_method();
    let sub = Rc::new(match body {
        Some(b) => sub.with_body(b),
        None => sub,
    });
    for uri in ctx.loc.s.mirrors.iter() {
        let (sub, uri, args) = (Rc::clone(&sub), uri.to_string(), ctx.args.clone());
        // The response is dropped: a mirror ends with its response head.
        let task = crate::metrics::timed::spawn(async move {
            drop(sub.run(uri, args).await);
        });
        ctx.background.push(task);
    }
    None
}

/// The whole request body, bounded by `client_max_body_size`.
#[allow(clippy::await_holding_refcell_ref)]
async fn read_whole(ctx: &RequestCtx, env: &Env<'_>) -> Result<Vec<u8>, Outcome> {
    let Some(b) = env.body else {
        return Ok(Vec::new());
    };
    let max = ctx.loc.s.client_max_body_size;
    let mut all = Vec::new();
    let mut b = b.borrow_mut();
    loop {
        match b.read(&mut all).await {
            Ok(true) => {
                if max != 0 && all.len() as u64 > max {
                    log(
                        ctx,
                        env,
                        Level::Error,
                        &format!(
                            "client intended to send too large chunked body: {} bytes",
                            all.len()
                        ),
                    );
                    return Err(Outcome::Status(413));
                }
            }
            Ok(false) => return Ok(all),
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                log(ctx, env, Level::Info, "client timed out (110: Connection timed out) while reading client request body");
                return Err(Outcome::Status(408));
            }
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                log(ctx, env, Level::Info, "client sent invalid chunked body");
                return Err(Outcome::Status(400));
            }
            Err(_) => {
                log(
                    ctx,
                    env,
                    Level::Info,
                    "client prematurely closed connection while reading client request body",
                );
                return Err(Outcome::Close);
            }
        }
    }
}

fn log(ctx: &RequestCtx, env: &Env<'_>, level: Level, what: &str) {
    ctx.log(env.log).line(level, format_args!("{what}"));
}
