//! How a handler reaches the disk for the location in effect: its I/O
//! route (`aio`, `aio_fast_path`), its path rules (`disable_symlinks`) and
//! its `open_file_cache` — three separate values — and the one place a
//! failed disk call becomes a status and a log line.

use std::io;

use super::outcome::{Env, Outcome};
use crate::config::{AioConf, SymlinkCheck};
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

/// `disable_symlinks` for `path`: with it on, the path resolves beneath
/// `$document_root` (checked too), or beneath the `from=` part (not
/// checked) when that is a leading part of the path — NGINX's
/// `ngx_http_set_disable_symlinks`: `from=` equal to the whole path
/// checks nothing; one that is no leading part checks everything.
pub fn path_rules(ctx: &RequestCtx, path: &str) -> PathRules {
    let ds = &ctx.loc.s.disable_symlinks;
    if ds.mode == SymlinkCheck::Off {
        return PathRules::default();
    }
    let mut rules = PathRules {
        no_symlinks: true,
        if_not_owner: ds.mode == SymlinkCheck::IfNotOwner,
        root: ctx.document_root.clone(),
        from: false,
    };
    let Some(from) = ds.from.as_ref().map(|t| t.render(ctx)) else {
        return rules;
    };
    if from.is_empty() || !path.starts_with(from.as_str()) {
        return rules;
    }
    if from.len() == path.len() {
        return PathRules::default();
    }
    let part = if path.as_bytes()[from.len()] == b'/' {
        Some(from.as_str())
    } else {
        from.strip_suffix('/')
    };
    if let Some(part) = part {
        rules.root = Some(part.to_string());
        rules.from = true;
    }
    rules
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
