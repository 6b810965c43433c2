//! A file as content handlers answer with it, below them (the static
//! handler, `gzip_static`, `try_files`): the URI mapped to a path by
//! `root` or `alias` ([`locate`], [`map_path`]), opened by the location's
//! rules through `open_file_cache` ([`open`]), and its 200 — type from the
//! URI, length, validators, and the body that carries the file's path
//! ([`file_response`]).

use std::io;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use super::disk_io;
use super::outcome::{Env, Outcome};
use crate::config::{alias_tail, DocRoot};
use crate::disk::{FileKind, Io, OpenFile};
use crate::http::conditional;
use crate::http::context::RequestCtx;
use crate::http::response::{Body, Response};

fn concat(a: &str, b: &str) -> String {
    let mut s = String::with_capacity(a.len() + b.len());
    s.push_str(a);
    s.push_str(b);
    s
}

/// The file-system path for the current URI, and the document root.
pub(super) fn map_path(ctx: &RequestCtx, uri: &str) -> (String, String) {
    let loc = &ctx.loc;
    match &loc.s.root {
        DocRoot::Root(t) => {
            let mut root = t.render(ctx);
            root.truncate(root.trim_end_matches('/').len());
            (concat(&root, uri), root)
        }
        DocRoot::Alias(t, cut) => {
            let alias = t.render(ctx);
            let rest = alias_tail(*cut, uri, ctx.add_uri_to_alias);
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
pub(super) fn leaves_root(ctx: &RequestCtx, path: &str) -> bool {
    // Most paths have no `..`: the root's are not counted then.
    let up = dot_dots(path);
    let (DocRoot::Root(t) | DocRoot::Alias(t, _)) = &ctx.loc.s.root;
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
        ctx.log(env.log).error(format_args!(
            "\"{path}\" is outside of the root or alias directory"
        ));
    }
    Outcome::Status(404)
}

/// The disk route and the file-system path of the URI, with
/// `$document_root` and `$request_filename` set to match (the file and the
/// index handlers both start here); else the answer: the route's failure,
/// or the 404 for a path that [`leaves_root`].
pub(super) fn locate(ctx: &mut RequestCtx, env: &Env<'_>) -> Result<(Io, String), Box<Outcome>> {
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

/// The 200 answer for an open regular file.
pub fn file_response(ctx: &RequestCtx, file: OpenFile, uri: &str) -> Outcome {
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
        path: body_path(ctx.request_filename.as_deref().unwrap_or("")),
    };
    Outcome::Send(resp)
}

thread_local! {
    /// The empty path, shared: a static file's body is made before
    /// `$request_filename` is stored, and an `Rc<str>` of nothing is
    /// still an allocation (issue 31).
    static NO_PATH: Rc<str> = Rc::from("");
}

/// The path a file body carries, `path` as an `Rc`.
fn body_path(path: &str) -> Rc<str> {
    if path.is_empty() {
        NO_PATH.with(Rc::clone)
    } else {
        path.into()
    }
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
pub async fn open(ctx: &RequestCtx, env: &Env<'_>, io: &Io, path: &str) -> io::Result<OpenFile> {
    let rules = disk_io::path_rules(ctx, path);
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
