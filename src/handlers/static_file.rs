//! Files from `root` / `alias`: NGINX's static, index and try_files
//! modules. A file's response carries its validators and allows ranges;
//! conditional requests and ranges are the filter chain's work
//! ([`super::chain`]), so they apply to error pages sent with 200 too.
//! `gzip_static` (`gzip_static.rs`) runs before this handler and declines
//! when it has no `.gz` to send.
//!
//! Every file-system call goes through [`crate::disk::Disk`].

use std::io;
use std::path::Path;
use std::sync::Arc;

use super::disk_io::{self, failed};
use super::file::{file_response, leaves_root, locate, map_path, open};
use super::outcome::{redirect, split_args, Env, Outcome};
use crate::config::{DocRoot, TryFallback, TryFile, TryFiles};
use crate::disk::{Failure, FileKind, Io};
use crate::http::context::{Method, RequestCtx};
use crate::log::Level;
use crate::util::errno_text;
use crate::vars::template::Template;

fn is_not_found(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT) | Some(libc::ENOTDIR) | Some(libc::ENAMETOOLONG)
    )
}

/// Maps a failed open to NGINX's status and log line.
pub(super) fn open_failed(ctx: &RequestCtx, env: &Env<'_>, path: &str, e: &io::Error) -> Outcome {
    if Failure::is_pool(e) {
        return failed(ctx, env, e, "open", path);
    }
    let code = e.raw_os_error().unwrap_or(0);
    if is_not_found(e) {
        if ctx.loc.s.log_not_found {
            ctx.log(env.log)
                .error(format_args!("open() \"{path}\" failed {}", errno_text(e)));
        }
        Outcome::Status(404)
    } else if code == libc::EACCES || code == libc::ELOOP || code == libc::EXDEV {
        ctx.log(env.log)
            .error(format_args!("open() \"{path}\" failed {}", errno_text(e)));
        Outcome::Status(403)
    } else {
        failed(ctx, env, e, "open", path)
    }
}

/// The content handler for `root`/`alias` locations.
pub async fn serve(ctx: &mut RequestCtx, env: &Env<'_>) -> Outcome {
    // The static module answers GET, HEAD and (with 405) POST only.
    if !matches!(ctx.method, Method::Get | Method::Head | Method::Post) {
        return Outcome::Status(405);
    }
    if ctx.uri.ends_with('/') {
        return index(ctx, env).await;
    }
    let (io, path) = match locate(ctx, env) {
        Ok(found) => found,
        Err(o) => return *o,
    };
    // `$request_filename` is the path from here on; until it is stored
    // below, the variable maps the URI to the same path.
    ctx.request_filename = None;
    let out = serve_path(ctx, env, &io, &path).await;
    if ctx.request_filename.is_none() {
        ctx.request_filename = Some(path);
    }
    out
}

/// [`serve`] for the file-system `path` of the URI.
async fn serve_path(ctx: &mut RequestCtx, env: &Env<'_>, io: &Io, path: &str) -> Outcome {
    let file = match open(ctx, env, io, path).await {
        Ok(f) => f,
        Err(e) => return open_failed(ctx, env, path, &e),
    };
    match file.meta.kind {
        FileKind::Directory => {
            let mut target = format!("{}/", escape_uri(&ctx.uri));
            if let Some(a) = &ctx.args {
                target.push('?');
                target.push_str(a);
            }
            return Outcome::Special(redirect(ctx, 301, &target));
        }
        FileKind::Other => {
            ctx.log(env.log).line(
                Level::Crit,
                format_args!("\"{path}\" is not a regular file"),
            );
            return Outcome::Status(404);
        }
        FileKind::Regular => {}
    }
    if ctx.method == Method::Post {
        return Outcome::Status(405);
    }
    ctx.test_expect();
    file_response(ctx, file, &ctx.uri)
}

fn escape_uri(uri: &str) -> String {
    crate::http::uri::escape_for_location(uri)
}

/// The index module: `uri` ends with `/`.
/// `random_index` comes first, as its content handler runs before the
/// index module's in NGINX.
async fn index(ctx: &mut RequestCtx, env: &Env<'_>) -> Outcome {
    let (io, dir) = match locate(ctx, env) {
        Ok(found) => found,
        Err(o) => return *o,
    };
    if ctx.loc.s.random_index {
        if let Some(o) = super::random_index::pick(ctx, env, &io, &dir).await {
            return o;
        }
    }
    if ctx.method == Method::Post {
        return Outcome::Status(405);
    }
    ctx.request_filename = Some(dir.clone());
    let uri = ctx.uri.clone();
    let names: Vec<Template> = ctx.loc.s.index.clone();
    let mut first_missing: Option<String> = None;
    for t in &names {
        let name = t.render(ctx);
        if name.starts_with('/') {
            let (u, a) = split_args(&name);
            return Outcome::Internal(u, a.or_else(|| ctx.args.clone()));
        }
        let path = format!("{dir}{name}");
        match open(ctx, env, &io, &path).await {
            Ok(_) => {
                let args = ctx.args.clone();
                return Outcome::Internal(format!("{uri}{name}"), args);
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                first_missing.get_or_insert(path);
            }
            Err(e) => return open_failed(ctx, env, &path, &e),
        }
    }
    match io
        .stat(Path::new(&dir), &disk_io::path_rules(ctx, &dir))
        .await
    {
        Ok(m) if m.kind == FileKind::Directory && ctx.loc.s.autoindex => {
            super::autoindex::serve(ctx, env, &io, &dir).await
        }
        Ok(m) if m.kind == FileKind::Directory => {
            ctx.log(env.log)
                .error(format_args!("directory index of \"{dir}\" is forbidden"));
            Outcome::Status(403)
        }
        Ok(_) => Outcome::Status(404),
        Err(e) if is_not_found(&e) => {
            if ctx.loc.s.log_not_found {
                let shown = first_missing.unwrap_or(dir);
                ctx.log(env.log)
                    .error(format_args!("\"{shown}\" is not found {}", errno_text(&e)));
            }
            Outcome::Status(404)
        }
        Err(e) => open_failed(ctx, env, &dir, &e),
    }
}

/// A `try_files` candidate's file-system path and the URI it makes, as
/// NGINX's try_files phase: with `root`, the root and the name; with an
/// alias from a regex location, the alias and the name; with an alias
/// from a prefix location, a name with variables that starts with what
/// the location matched loses it, the alias takes its place in the path
/// and the matched part in the URI.
fn candidate(ctx: &RequestCtx, c: &TryFile) -> (String, String) {
    let value = c.name.render(ctx);
    match &ctx.loc.s.root {
        DocRoot::Root(_) => (map_path(ctx, &value).0, value),
        DocRoot::Alias(t, None) => (t.render(ctx) + &value, value),
        DocRoot::Alias(t, Some(n)) => {
            let matched = ctx.uri.get(..*n).unwrap_or(&ctx.uri);
            let rest = match value.strip_prefix(matched) {
                Some(rest) if !c.name.is_literal() => rest,
                _ => &value,
            };
            (t.render(ctx) + rest, format!("{matched}{rest}"))
        }
    }
}

/// `try_files file ... uri|=code`: the first candidate that exists (a
/// directory for one written with a trailing `/`) becomes the URI, and
/// `None` lets the content handler serve it; else the fallback. A
/// directory found by `$uri/` keeps the URI without its slash, so the
/// handler redirects to the slashed form, as NGINX does.
pub async fn try_files(ctx: &mut RequestCtx, env: &Env<'_>, tf: &Arc<TryFiles>) -> Option<Outcome> {
    let io = match disk_io::route(ctx, env) {
        Ok(io) => io,
        Err(o) => return Some(*o),
    };
    for c in &tf.candidates {
        let (path, uri) = candidate(ctx, c);
        if leaves_root(ctx, &path) {
            continue;
        }
        let rules = disk_io::path_rules(ctx, &path);
        let found = match io.stat(Path::new(&path), &rules).await {
            Ok(m) => (m.kind == FileKind::Directory) == c.dir,
            Err(e) if Failure::is_pool(&e) => {
                return Some(failed(ctx, env, &e, "stat", &path));
            }
            Err(_) => false,
        };
        if found {
            // A regex location's alias takes the URI from here on (not
            // for a directory, whose URI stays: NGINX's try_files phase).
            if matches!(ctx.loc.s.root, DocRoot::Alias(_, None)) {
                if c.dir {
                    return None;
                }
                ctx.add_uri_to_alias = true;
            }
            ctx.uri = uri;
            return None;
        }
    }
    match &tf.fallback {
        TryFallback::Code(code) => Some(Outcome::Status(*code)),
        TryFallback::Uri(t) => {
            // The request's arguments pass only if the URI names them
            // (`/index.php?$args`), as in NGINX.
            let target = t.render(ctx);
            if target.starts_with('@') {
                return Some(Outcome::Named(target));
            }
            let (u, a) = split_args(&target);
            Some(Outcome::Internal(u, a))
        }
    }
}
