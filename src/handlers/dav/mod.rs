//! WebDAV, NGINX's `ngx_http_dav_module`: PUT, DELETE, MKCOL, COPY and
//! MOVE on the files a `root`/`alias` location maps, for the methods
//! `dav_methods` lists. A content step before the static handler, as
//! NGINX's DAV handler sits in the content phase: a method the location
//! does not list declines (the static handler then answers 405).
//!
//! | File | What |
//! |---|---|
//! | `mod.rs` | the step, PUT (the body into a temp file in `client_body_temp_path`, then renamed into place), DELETE, MKCOL, the `Depth` header, the answers |
//! | `copy.rs` | COPY and MOVE: `Destination` (same host and scheme, within an alias), `Overwrite`, `Depth`, the paths |
//!
//! Statuses, log lines and headers are NGINX's: 201 with `Location` and
//! `Content-Length: 0` for what PUT or MKCOL made, 204 for what PUT
//! replaced, DELETE, COPY or MOVE of a file; a failed call's status from
//! the error (`disk::dav_error`). Every file-system call goes through
//! the disk layer on the location's route made to offload
//! (`Disk::offloaded`), never on the event loop; `disable_symlinks` is
//! kept on every path (`disk/dav.rs`), and a path mapped outside the
//! root or alias is refused as for the static handler.

mod copy;

use std::cell::RefCell;
use std::path::Path;

use super::disk_io;
use super::file::{leaves_root, map_path};
use super::outcome::{absolute_location, Content, Env, Outcome};
use crate::config::dav_conf::{dav_bit, DAV_COPY, DAV_DELETE, DAV_MKCOL, DAV_MOVE, DAV_PUT};
use crate::disk::{dav_error, DavDone, Io, PathRules, Rename, StoreFile};
use crate::http::body::ClientBody;
use crate::http::context::RequestCtx;
use crate::http::response::Response;
use crate::log::Level;

/// How much of a PUT body is held before it is written out.
const PUT_PIECE: usize = 64 * 1024;

/// The DAV step: answers a method `dav_methods` lists, else declines.
pub async fn serve(ctx: &mut RequestCtx, env: &Env<'_>) -> Content {
    let methods = ctx.loc.s.dav.methods;
    let Some(bit) = dav_bit(ctx.head.method()).filter(|b| methods & b != 0) else {
        return Content::Declined;
    };
    Content::Answered(match bit {
        DAV_PUT => put(ctx, env).await,
        DAV_DELETE => delete(ctx, env).await,
        DAV_MKCOL => mkcol(ctx, env).await,
        DAV_COPY | DAV_MOVE => copy::copy_move(ctx, env, bit == DAV_MOVE).await,
        _ => return Content::Declined,
    })
}

/// The `Depth` header: NGINX's `ngx_http_dav_depth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Depth {
    Zero,
    One,
    Infinity,
    Invalid,
}

fn depth(ctx: &RequestCtx, env: &Env<'_>, default: Depth) -> Depth {
    let Some(v) = ctx.header("depth") else {
        return default;
    };
    match v {
        "0" => Depth::Zero,
        "1" => Depth::One,
        "infinity" => Depth::Infinity,
        _ => {
            err(
                ctx,
                env,
                &format!("client sent invalid \"Depth\" header: \"{v}\""),
            );
            Depth::Invalid
        }
    }
}

fn err(ctx: &RequestCtx, env: &Env<'_>, line: &str) {
    ctx.log(env.log).error(format_args!("{line}"));
}

/// Whether the request announces a body (DELETE, MKCOL, COPY and MOVE
/// take none: 415).
fn has_body(ctx: &RequestCtx) -> bool {
    ctx.head.chunked || ctx.head.content_length.is_some_and(|n| n > 0)
}

/// The route (offloaded: DAV calls write), the path rules and the mapped
/// path of `uri`; `Err` is the answer (a path outside the root: 404).
fn place(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    uri: &str,
) -> Result<(Io, PathRules, String), Box<Outcome>> {
    let io = disk_io::route(ctx, env)?;
    let (path, root) = map_path(ctx, uri);
    ctx.document_root = Some(root);
    if leaves_root(ctx, &path) {
        err(
            ctx,
            env,
            &format!("\"{path}\" is outside of the root or alias directory"),
        );
        return Err(Box::new(Outcome::Status(404)));
    }
    let rules = disk_io::path_rules(ctx, &path);
    Ok((env.disk.offloaded(io), rules, path))
}

/// Logs what a disk call logged; its status, if it failed.
fn report(ctx: &RequestCtx, env: &Env<'_>, done: DavDone) -> Option<u16> {
    for l in &done.lines {
        let level = if l.crit { Level::Crit } else { Level::Error };
        ctx.log(env.log).line(level, format_args!("{}", l.text));
    }
    done.failed
}

/// A 201 (with `Location` naming the URI when `located`) or a 204,
/// header only, as NGINX sends them.
fn answer(ctx: &RequestCtx, status: u16, located: bool) -> Outcome {
    let mut r = Response::new(status);
    if status == 204 {
        r.content_length = None;
    }
    if located {
        let mut uri = String::new();
        crate::handlers::proxy::escape_uri(&ctx.uri, &mut uri);
        r.location = Some(absolute_location(ctx, &uri));
    }
    Outcome::Send(r)
}

/// PUT: the body read into a temp file, then moved into place.
async fn put(ctx: &mut RequestCtx, env: &Env<'_>) -> Outcome {
    if ctx.uri.ends_with('/') {
        err(ctx, env, "cannot PUT to a collection");
        return Outcome::Status(409);
    }
    if ctx.header("content-range").is_some() {
        err(ctx, env, "PUT with range is unsupported");
        return Outcome::Status(501);
    }
    let (io, rules, path) = match place(ctx, env, &ctx.uri.clone()) {
        Ok(p) => p,
        Err(o) => return *o,
    };
    ctx.request_filename = Some(path.clone());
    let file = match read_body(ctx, env, &io).await {
        Ok(f) => f,
        Err(o) => return o,
    };
    let status = match io.stat(Path::new(&path), &rules).await {
        Err(_) => 201,
        Ok(m) if m.kind == crate::disk::FileKind::Directory => {
            err(
                ctx,
                env,
                &format!("\"{path}\" could not be created (21: Is a directory)"),
            );
            file.abort().await;
            return Outcome::Status(409);
        }
        Ok(_) => 204,
    };
    let dav = &ctx.loc.s.dav;
    let mtime = ctx
        .header("date")
        .and_then(|v| httpdate::parse_http_date(v.trim()).ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs() as i64);
    let how = Rename {
        access: dav.access,
        path_access: dav.access,
        mtime,
        create_path: dav.create_full_put_path,
        delete_src: true,
    };
    if let Err(e) = io.dav_beneath(Path::new(&path), &rules).await {
        let (code, line) = dav_error(&e, 404, "rename", Path::new(&path));
        report(
            ctx,
            env,
            DavDone {
                lines: vec![line],
                failed: None,
            },
        );
        file.abort().await;
        return Outcome::Status(code);
    }
    if let Err(line) = file.commit_with(Path::new(&path), how).await {
        ctx.log(env.log).line(Level::Crit, format_args!("{line}"));
        return Outcome::Status(500);
    }
    answer(ctx, status, status == 201)
}

/// The request body into a new temp file in `client_body_temp_path`
/// (an empty body too, as NGINX's `request_body_in_file_only`),
/// bounded by `client_max_body_size`.
// The connection loop waits while the handler runs: no one else borrows
// the request body meanwhile.
#[allow(clippy::await_holding_refcell_ref)]
async fn read_body(ctx: &mut RequestCtx, env: &Env<'_>, io: &Io) -> Result<StoreFile, Outcome> {
    ctx.test_expect();
    let body: Option<&RefCell<ClientBody<'_>>> = env.body;
    if let (true, Some(b)) = (ctx.send_continue, body) {
        ctx.send_continue = false;
        if b.borrow()
            .send_continue(ctx.loc.s.send_timeout)
            .await
            .is_err()
        {
            return Err(Outcome::Close);
        }
    }
    let mut file = temp_file(ctx, env, io).await?;
    let Some(b) = body else {
        return Ok(file);
    };
    let max = ctx.loc.s.client_max_body_size;
    let mut b = b.borrow_mut();
    let mut mem = Vec::new();
    loop {
        let more = match b.read(&mut mem).await {
            Ok(more) => more,
            Err(e) => return Err(body_error(ctx, env, &e)),
        };
        if max != 0 && b.read > max {
            let n = b.read;
            err(
                ctx,
                env,
                &format!("client intended to send too large chunked body: {n} bytes"),
            );
            return Err(Outcome::Status(413));
        }
        if mem.len() >= PUT_PIECE || (!more && !mem.is_empty()) {
            let piece = std::mem::take(&mut mem);
            if let Err(e) = file.append(piece).await {
                let p = file.temp_path().to_string_lossy().into_owned();
                return Err(disk_io::failed(ctx, env, &e, "write", &p));
            }
        }
        if !more {
            return Ok(file);
        }
    }
}

/// A new temp file named as NGINX names one (the next number on a clash).
async fn temp_file(ctx: &RequestCtx, env: &Env<'_>, io: &Io) -> Result<StoreFile, Outcome> {
    let default = crate::cache::TempPath {
        path: "client_body_temp".into(),
        levels: Default::default(),
    };
    let temp = ctx.loc.s.client_body_temp_path.as_ref().unwrap_or(&default);
    loop {
        let name = format!("{:010}", crate::handlers::proxy::next_temp_number());
        let path = temp.levels.dir_of(&temp.path, &name).join(&name);
        match StoreFile::create(io, &path).await {
            Ok(f) => return Ok(f),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(disk_io::failed(
                    ctx,
                    env,
                    &e,
                    "open",
                    &path.to_string_lossy(),
                ))
            }
        }
    }
}

/// A body that could not be read: 400 for bad chunked framing, else the
/// client is gone (NGINX's 499, nothing sent).
fn body_error(ctx: &RequestCtx, env: &Env<'_>, e: &std::io::Error) -> Outcome {
    let (what, o) = match e.kind() {
        std::io::ErrorKind::TimedOut => (
            "client timed out (110: Connection timed out) while reading client request body",
            Outcome::Status(408),
        ),
        std::io::ErrorKind::InvalidData => {
            ("client sent invalid chunked body", Outcome::Status(400))
        }
        _ => ("client prematurely closed connection", Outcome::Close),
    };
    ctx.log(env.log).line(Level::Info, format_args!("{what}"));
    o
}

/// DELETE: a file, or a collection (URI ending in `/`) with all in it.
async fn delete(ctx: &mut RequestCtx, env: &Env<'_>) -> Outcome {
    if has_body(ctx) {
        err(ctx, env, "DELETE with body is unsupported");
        return Outcome::Status(415);
    }
    let min = ctx.loc.s.dav.min_delete_depth;
    if min > 0 {
        let (d, deep) = uri_depth(&ctx.uri, min);
        if !deep {
            err(ctx, env, &format!("insufficient URI depth:{d} to DELETE"));
            return Outcome::Status(409);
        }
    }
    let (io, rules, mut path) = match place(ctx, env, &ctx.uri.clone()) {
        Ok(p) => p,
        Err(o) => return *o,
    };
    let entry = match io.dav_lstat(Path::new(&path), &rules).await {
        Ok(e) => e,
        Err(e) => {
            let nf = if e.raw_os_error() == Some(libc::ENOTDIR) {
                409
            } else {
                404
            };
            let (code, line) = dav_error(&e, nf, "lstat", Path::new(&path));
            report(
                ctx,
                env,
                DavDone {
                    lines: vec![line],
                    failed: None,
                },
            );
            return Outcome::Status(code);
        }
    };
    if entry.dir {
        if !ctx.uri.ends_with('/') {
            err(
                ctx,
                env,
                &format!("DELETE \"{path}\" failed (21: Is a directory)"),
            );
            return Outcome::Status(409);
        }
        if depth(ctx, env, Depth::Infinity) != Depth::Infinity {
            err(ctx, env, "\"Depth\" header must be infinity");
            return Outcome::Status(400);
        }
        path.truncate(path.trim_end_matches('/').len());
    } else if !matches!(depth(ctx, env, Depth::Zero), Depth::Zero | Depth::Infinity) {
        err(ctx, env, "\"Depth\" header must be 0 or infinity");
        return Outcome::Status(400);
    }
    let done = io.dav_delete(Path::new(&path), entry.dir, &rules).await;
    match report(ctx, env, done) {
        Some(code) => Outcome::Status(code),
        None => answer(ctx, 204, false),
    }
}

/// NGINX's count of a DELETE's URI depth: the slashes up to the one that
/// reaches `min` with something after it; whether it was reached.
fn uri_depth(uri: &str, min: u64) -> (u64, bool) {
    let b = uri.as_bytes();
    let mut d = 0;
    for (i, &c) in b.iter().enumerate() {
        if c == b'/' {
            d += 1;
            if d >= min && i + 1 < b.len() {
                return (d, true);
            }
        }
    }
    (d, false)
}

/// MKCOL: a directory for a URI ending in `/`, with `dav_access` (`x`
/// where there is `r`).
async fn mkcol(ctx: &mut RequestCtx, env: &Env<'_>) -> Outcome {
    if has_body(ctx) {
        err(ctx, env, "MKCOL with body is unsupported");
        return Outcome::Status(415);
    }
    if !ctx.uri.ends_with('/') {
        err(ctx, env, "MKCOL can create a collection only");
        return Outcome::Status(409);
    }
    let (io, rules, mut path) = match place(ctx, env, &ctx.uri.clone()) {
        Ok(p) => p,
        Err(o) => return *o,
    };
    path.pop();
    let a = ctx.loc.s.dav.access;
    let mode = a | (a & 0o444) >> 2;
    match io.dav_mkdir(Path::new(&path), mode, &rules).await {
        Ok(()) => answer(ctx, 201, true),
        Err(e) => {
            let (code, line) = dav_error(&e, 409, "mkdir", Path::new(&path));
            report(
                ctx,
                env,
                DavDone {
                    lines: vec![line],
                    failed: None,
                },
            );
            Outcome::Status(code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_depth_counts_as_nginx() {
        assert_eq!(uri_depth("/min3/shallow", 3), (2, false));
        assert_eq!(uri_depth("/min3/a/b/deep", 3), (3, true));
        assert_eq!(uri_depth("/a/b/", 2), (2, true));
        assert_eq!(uri_depth("/a/", 2), (2, false));
    }
}
