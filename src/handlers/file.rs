//! A file as content handlers answer with it, below them (the static
//! handler, `gzip_static`, `try_files`): opened by the location's rules
//! through `open_file_cache`, and its 200 — type from the URI, length,
//! validators, and the body that carries the file's path.

use std::io;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use super::disk_io;
use super::outcome::{Env, Outcome};
use crate::disk::{FileKind, Io, OpenFile};
use crate::http::conditional;
use crate::http::context::RequestCtx;
use crate::http::response::{Body, Response};

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
        path: ctx.request_filename.as_deref().unwrap_or("").into(),
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
pub async fn open(ctx: &RequestCtx, env: &Env<'_>, io: &Io, path: &str) -> io::Result<OpenFile> {
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
