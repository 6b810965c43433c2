//! Files from `root` / `alias`: NGINX's static, index and try_files
//! modules. A file's response carries its validators and allows ranges;
//! conditional requests and ranges are the filter chain's work
//! ([`super::filters`]), so they apply to error pages sent with 200 too.
//!
//! Every file-system call goes through [`crate::disk::Disk`].

use std::io;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use super::disk_io::{self, failed};
use super::{redirect, Env, Outcome};
use crate::config::{DocRoot, LocationKind, TryFallback, TryFiles};
use crate::disk::{Failure, FileKind, Io, OpenFile};
use crate::http::conditional;
use crate::http::context::{Method, RequestCtx};
use crate::http::response::{Body, Response};
use crate::log::Level;
use crate::util::errno_text;
use crate::vars::template::Template;

fn concat(a: &str, b: &str) -> String {
    let mut s = String::with_capacity(a.len() + b.len());
    s.push_str(a);
    s.push_str(b);
    s
}

/// The file-system path for the current URI, and the document root.
fn map_path(ctx: &RequestCtx, uri: &str) -> (String, String) {
    let loc = &ctx.loc;
    match &loc.s.root {
        DocRoot::Root(t) => {
            let mut root = t.render(ctx);
            root.truncate(root.trim_end_matches('/').len());
            (concat(&root, uri), root)
        }
        DocRoot::Alias(t) => {
            let alias = t.render(ctx);
            // A regex location's alias is the whole path (with captures).
            let rest = if matches!(loc.kind, LocationKind::Exact | LocationKind::Regex) {
                ""
            } else {
                uri.strip_prefix(loc.path.as_str()).unwrap_or(uri)
            };
            (concat(&alias, rest), alias)
        }
    }
}

/// Whether `path` (the root or alias joined with the URI) leaves the
/// directory configured: it has more `..` segments than the `root` or
/// `alias` text itself. The URI is normalised, so only the join can make
/// one: `location /img { alias /srv/img/; }` and `/img../secret` give
/// `/srv/img/../secret` (NGINX's classic off-by-slash, which NGINX serves;
/// porter answers 404, as for a file that is not there). A capture that
/// brings `..` into an alias or root with variables is caught the same way.
fn leaves_root(ctx: &RequestCtx, path: &str) -> bool {
    // Most paths have no `..`: the root's are not counted then.
    let up = dot_dots(path);
    let (DocRoot::Root(t) | DocRoot::Alias(t)) = &ctx.loc.s.root;
    up > 0 && up > dot_dots(t.raw())
}

fn dot_dots(p: &str) -> usize {
    p.as_bytes()
        .split(|&b| b == b'/')
        .filter(|s| *s == b"..")
        .count()
}

/// The 404 for a path that [`leaves_root`], logged as a missing file is
/// (an error when `log_not_found` is on) with the reason.
fn outside_root(ctx: &RequestCtx, env: &Env<'_>, path: &str) -> Outcome {
    if ctx.loc.s.log_not_found {
        log(
            ctx,
            env,
            Level::Error,
            format_args!("\"{path}\" is outside of the root or alias directory"),
        );
    }
    Outcome::Status(404)
}

fn log(ctx: &RequestCtx, env: &Env<'_>, level: Level, msg: std::fmt::Arguments<'_>) {
    ctx.error_log(env.log)
        .log_conn(level, Some(ctx.conn.id), msg, &ctx.log_context());
}

fn is_not_found(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT) | Some(libc::ENOTDIR) | Some(libc::ENAMETOOLONG)
    )
}

/// Maps a failed open to NGINX's status and log line.
fn open_failed(ctx: &RequestCtx, env: &Env<'_>, path: &str, e: &io::Error) -> Outcome {
    if Failure::is_pool(e) {
        return failed(ctx, env, e, "open", path);
    }
    let code = e.raw_os_error().unwrap_or(0);
    if is_not_found(e) {
        if ctx.loc.s.log_not_found {
            log(
                ctx,
                env,
                Level::Error,
                format_args!("open() \"{path}\" failed {}", errno_text(e)),
            );
        }
        Outcome::Status(404)
    } else if code == libc::EACCES || code == libc::ELOOP || code == libc::EXDEV {
        log(
            ctx,
            env,
            Level::Error,
            format_args!("open() \"{path}\" failed {}", errno_text(e)),
        );
        Outcome::Status(403)
    } else {
        failed(ctx, env, e, "open", path)
    }
}

/// The disk route and the file-system path of the URI, with
/// `$document_root` and `$request_filename` set to match (the file and the
/// index handlers both start here); else the answer: the route's failure,
/// or the 404 for a path that [`leaves_root`].
fn locate(ctx: &mut RequestCtx, env: &Env<'_>) -> Result<(Io, String), Box<Outcome>> {
    let io = disk_io::route(ctx, env)?;
    let (path, root) = map_path(ctx, &ctx.uri);
    ctx.document_root = Some(root);
    if leaves_root(ctx, &path) {
        let o = outside_root(ctx, env, &path);
        ctx.request_filename = Some(path);
        return Err(Box::new(o));
    }
    Ok((io, path))
}

/// The content handler for `root`/`alias` locations.
pub async fn serve(ctx: &mut RequestCtx, env: &Env<'_>) -> Outcome {
    if ctx.method == Method::Other {
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
    let mut vary = false;
    if let Some(o) = super::gzip::serve_static(ctx, env, io, path, &mut vary).await {
        return o;
    }
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
            log(
                ctx,
                env,
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
    let mut out = file_response(ctx, file, &ctx.uri);
    if vary {
        super::gzip::vary_plain(&mut out);
    }
    out
}

fn escape_uri(uri: &str) -> String {
    crate::http::uri::escape_for_location(uri)
}

/// The 200 answer for an open regular file.
pub(super) fn file_response(ctx: &RequestCtx, file: OpenFile, uri: &str) -> Outcome {
    let s = &ctx.loc.s;
    let meta = file.meta;
    let mut resp = Response::new(200);
    resp.content_type = Some(content_type(&s.types, &s.default_type, uri));
    resp.content_length = Some(meta.size);
    resp.last_modified = Some(meta.mtime);
    resp.etag = s.etag.then(|| conditional::etag(meta.mtime, meta.size));
    resp.allow_ranges = true;
    resp.body = Body::File {
        file: Rc::new(file),
        start: 0,
        len: meta.size,
    };
    Outcome::Send(resp)
}

/// `Content-Type` from the URI's extension (lowercased, after the last dot
/// of the last segment), else `default_type`.
pub fn content_type(types: &crate::config::Types, default: &Arc<str>, uri: &str) -> Arc<str> {
    let last = uri.rsplit('/').next().unwrap_or("");
    if let Some(dot) = last.rfind('.') {
        let ext = &last[dot + 1..];
        if !ext.is_empty() {
            let found = if ext.bytes().any(|b| b.is_ascii_uppercase()) {
                types.get(&ext.to_ascii_lowercase())
            } else {
                types.get(ext)
            };
            if let Some(t) = found {
                return t.clone();
            }
        }
    }
    Arc::clone(default)
}

/// Opens `path` by the location's rules, through `open_file_cache`; a
/// regular file of at least `directio` bytes is read around the page
/// cache from then on.
pub(super) async fn open(
    ctx: &RequestCtx,
    env: &Env<'_>,
    io: &Io,
    path: &str,
) -> io::Result<OpenFile> {
    let rules = disk_io::path_rules(ctx);
    let cache = disk_io::open_file_cache(ctx);
    let mut file = env
        .disk
        .open(io, Path::new(path), &rules, cache.as_ref())
        .await?;
    let s = &ctx.loc.s;
    if file.meta.kind == FileKind::Regular && s.directio.is_some_and(|n| file.meta.size >= n) {
        env.disk.set_direct(&mut file, s.directio_alignment);
    }
    Ok(file)
}

/// The index module: `uri` ends with `/`.
async fn index(ctx: &mut RequestCtx, env: &Env<'_>) -> Outcome {
    if ctx.method == Method::Post {
        return Outcome::Status(405);
    }
    let (io, dir) = match locate(ctx, env) {
        Ok(found) => found,
        Err(o) => return *o,
    };
    ctx.request_filename = Some(dir.clone());
    let uri = ctx.uri.clone();
    let names: Vec<Template> = ctx.loc.s.index.clone();
    let mut first_missing: Option<String> = None;
    for t in &names {
        let name = t.render(ctx);
        if name.starts_with('/') {
            let (u, a) = super::split_args(&name);
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
    match io.stat(Path::new(&dir), &disk_io::path_rules(ctx)).await {
        Ok(m) if m.kind == FileKind::Directory && ctx.loc.s.autoindex => {
            super::autoindex::serve(ctx, env, &io, &dir).await
        }
        Ok(m) if m.kind == FileKind::Directory => {
            log(
                ctx,
                env,
                Level::Error,
                format_args!("directory index of \"{dir}\" is forbidden"),
            );
            Outcome::Status(403)
        }
        Ok(_) => Outcome::Status(404),
        Err(e) if is_not_found(&e) => {
            if ctx.loc.s.log_not_found {
                let shown = first_missing.unwrap_or(dir);
                log(
                    ctx,
                    env,
                    Level::Error,
                    format_args!("\"{shown}\" is not found {}", errno_text(&e)),
                );
            }
            Outcome::Status(404)
        }
        Err(e) => open_failed(ctx, env, &dir, &e),
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
    let rules = disk_io::path_rules(ctx);
    for c in &tf.candidates {
        let value = c.name.render(ctx);
        let (path, _) = map_path(ctx, &value);
        if leaves_root(ctx, &path) {
            continue;
        }
        let found = match io.stat(Path::new(&path), &rules).await {
            Ok(m) => (m.kind == FileKind::Directory) == c.dir,
            Err(e) if Failure::is_pool(&e) => {
                return Some(failed(ctx, env, &e, "stat", &path));
            }
            Err(_) => false,
        };
        if found {
            ctx.uri = value;
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
            let (u, a) = super::split_args(&target);
            Some(Outcome::Internal(u, a))
        }
    }
}

/// Bodies up to this size are read after the filters, before the head is
/// written, and go out in one `writev` with it; a failed read can still
/// become a 5xx. Larger bodies are sent from the file by the connection.
const SMALL_BODY: u64 = 32 * 1024;

/// Reads a small file body into memory (through the fast path or the
/// pool, as the location's `aio` says). `Err` carries what to answer
/// instead when the read fails.
pub async fn read_small_body(
    ctx: &RequestCtx,
    env: &Env<'_>,
    resp: &mut Response,
) -> Result<(), Outcome> {
    let Body::File { file, start, len } = &resp.body else {
        return Ok(());
    };
    if *len > SMALL_BODY || ctx.is_head() {
        return Ok(());
    }
    let path = ctx.request_filename.as_deref().unwrap_or("");
    let mut buf = vec![0u8; *len as usize];
    let e = match file.read_at(&mut buf, *start).await {
        Ok(n) if n as u64 == *len => {
            resp.body = Body::Bytes(buf);
            return Ok(());
        }
        Ok(n) => {
            log(
                ctx,
                env,
                Level::Crit,
                format_args!("pread() read only {n} of {len} from \"{path}\""),
            );
            return Err(Outcome::Status(500));
        }
        Err(e) => e,
    };
    Err(failed(ctx, env, &e, "pread", path))
}
