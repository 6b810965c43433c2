//! How a handler reaches the disk for the location in effect: its I/O
//! route (`aio`, `aio_fast_path`), its path rules (`disable_symlinks`) and
//! its `open_file_cache` — three separate values — and the one place a
//! failed disk call becomes a status and a log line.

use std::io;

use super::outcome::{Env, Outcome};
use crate::config::AioConf;
use crate::disk::{Failure, Io, OpenFileCacheSettings, PathRules};
use crate::http::context::RequestCtx;
use crate::http::response::Response;
use crate::log::Level;

/// The location's I/O route: `aio threads=NAME` (a variable name rendered
/// now) resolved to its pool, `aio on` to the worker's ring (or the
/// `default` pool without one), or inline for `aio off`. Handlers resolve it
/// once, when they start, and carry it. An unknown pool name is the
/// request's 500 (with NGINX's `thread pool "NAME" not found`).
pub fn route(ctx: &RequestCtx, env: &Env<'_>) -> Result<Io, Box<Outcome>> {
    let s = &ctx.loc.s;
    let routed = match &s.aio {
        AioConf::Off => env.disk.route(None, s.aio_fast_path),
        AioConf::Threads(t) => env.disk.route(Some(&t.render(ctx)), s.aio_fast_path),
        AioConf::On => env.disk.route_uring(s.aio_fast_path),
    };
    routed.map_err(|e| Box::new(failed(ctx, env, &io::Error::other(e), "open", "")))
}

/// `disable_symlinks`: with it on, paths resolve beneath `$document_root`.
pub fn path_rules(ctx: &RequestCtx) -> PathRules {
    let no_symlinks = ctx.loc.s.disable_symlinks;
    PathRules {
        no_symlinks,
        root: if no_symlinks {
            ctx.document_root.clone()
        } else {
            None
        },
    }
}

/// `open_file_cache` and its companion directives, when on.
pub fn open_file_cache(ctx: &RequestCtx) -> Option<OpenFileCacheSettings> {
    let s = &ctx.loc.s;
    s.open_file_cache.map(|c| OpenFileCacheSettings {
        max: c.max,
        inactive: c.inactive,
        valid: s.open_file_cache_valid,
        min_uses: s.open_file_cache_min_uses,
        errors: s.open_file_cache_errors,
    })
}

/// A failed disk call `op` on `path`, as the request's answer: a full or
/// stopping pool → 503 with `Retry-After` (the queue drains in moments),
/// anything else → 500; one line logged ([`Failure::of`]: `crit` for the
/// file's failure, `error` for the pool's).
pub fn failed(ctx: &RequestCtx, env: &Env<'_>, e: &io::Error, op: &str, path: &str) -> Outcome {
    let f = Failure::of(e, op, path);
    let level = if f.crit { Level::Crit } else { Level::Error };
    ctx.log(env.log).line(level, format_args!("{}", f.line));
    if f.status == 503 {
        let mut r = Response::special(503, ctx.loc.s.server_tokens);
        r.headers.push(("Retry-After".into(), "1".into()));
        Outcome::Special(r)
    } else {
        Outcome::Status(f.status)
    }
}
