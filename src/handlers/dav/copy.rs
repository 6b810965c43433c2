//! COPY and MOVE (NGINX's `ngx_http_dav_copy_move_handler`): the
//! `Destination` header (a path, or a URL of this scheme and host, the
//! port free), read as NGINX's `ngx_http_parse_unsafe_uri` reads it (no
//! `..` segment); both URIs collections (ending in `/`) or neither;
//! within the location's prefix under `alias`; `Depth` (COPY: 0 or
//! infinity, MOVE: infinity); `Overwrite` (`T` by default, `F` keeps an
//! existing target: 412). A collection is copied as a tree (a MOVE is a
//! rename when it can be); a file is copied with its mode and time, or
//! moved into place.

use std::path::Path;

use super::{depth, err, has_body, place, report, Depth};
use crate::disk::{dav_error, DavDone};
use crate::handlers::outcome::{Env, Outcome};
use crate::http::context::RequestCtx;

/// What the request asks, once its headers are checked.
struct Ask {
    /// The destination's decoded path.
    duri: String,
    overwrite: bool,
}

/// COPY, or MOVE when `is_move`.
pub(super) async fn copy_move(ctx: &mut RequestCtx, env: &Env<'_>, is_move: bool) -> Outcome {
    if has_body(ctx) {
        err(ctx, env, "COPY and MOVE with body are unsupported");
        return Outcome::Status(415);
    }
    let ask = match ask(ctx, env, is_move) {
        Ok(a) => a,
        Err(code) => return Outcome::Status(code),
    };
    let (io, rules, src) = match place(ctx, env, &ctx.uri.clone()) {
        Ok(p) => p,
        Err(o) => return *o,
    };
    let (_, _, dst) = match place(ctx, env, &ask.duri) {
        Ok(p) => p,
        Err(_) => return Outcome::Status(403),
    };
    let src = merge_slashes(&src);
    let mut dst = merge_slashes(&dst);
    let slash = dst.len() > 1 && dst.ends_with('/');
    if slash {
        dst.pop();
    }
    let dest = ctx.header("destination").unwrap_or("").to_string();
    let method = ctx.head.method().to_string();
    if let Err(why) = validate_paths(&src, &dst, slash) {
        let uri = &ctx.uri;
        let line = match why {
            Same => format!(
                "both URI \"{uri}\" and \"Destination\" URI \"{dest}\" point to the same location"
            ),
            Inside => format!("\"{uri}\" could not be {method}ed to collection \"{dest}\""),
        };
        err(ctx, env, &line);
        return Outcome::Status(403);
    }
    let job = Job {
        io,
        rules,
        src,
        dst,
        slash,
        overwrite: ask.overwrite,
        is_move,
    };
    let dst_dir = match target(ctx, env, &job, &dest, &method).await {
        Ok(Some(dir)) => dir,
        // The target does not exist: nothing to overwrite.
        Ok(None) => {
            let job = Job {
                overwrite: false,
                ..job
            };
            return transfer(ctx, env, job, false).await;
        }
        Err(o) => return o,
    };
    transfer(ctx, env, job, dst_dir).await
}

/// A COPY or MOVE whose paths are known.
struct Job {
    io: crate::disk::Io,
    rules: crate::disk::PathRules,
    src: String,
    /// Without its trailing slash.
    dst: String,
    /// The destination named a collection.
    slash: bool,
    overwrite: bool,
    is_move: bool,
}

/// The target's `lstat`: `Some(is a directory)` when it exists and may
/// be replaced, `None` when it does not exist, else the answer (409 for
/// a collection named without `/`, 412 under `Overwrite: F`).
async fn target(
    ctx: &RequestCtx,
    env: &Env<'_>,
    job: &Job,
    dest: &str,
    method: &str,
) -> Result<Option<bool>, Outcome> {
    let dst = &job.dst;
    match job.io.dav_lstat(Path::new(dst), &job.rules).await {
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(failed(ctx, env, &e, 404, dst)),
        Ok(d) if d.dir && !job.slash => {
            let uri = &ctx.uri;
            let line = format!("\"{uri}\" could not be {method}ed to collection \"{dest}\"");
            err(ctx, env, &line);
            Err(Outcome::Status(409))
        }
        Ok(_) if !job.overwrite => {
            err(
                ctx,
                env,
                &format!("\"{dst}\" could not be created (17: File exists)"),
            );
            Err(Outcome::Status(412))
        }
        Ok(d) => Ok(Some(d.dir)),
    }
}

/// The copy or move itself: a file (204), or a collection (201) after
/// the target it replaces is deleted.
async fn transfer(ctx: &RequestCtx, env: &Env<'_>, job: Job, dst_dir: bool) -> Outcome {
    let (io, rules) = (&job.io, &job.rules);
    let (src, dst) = (Path::new(&job.src), Path::new(&job.dst));
    let entry = match io.dav_lstat(src, rules).await {
        Ok(e) => e,
        Err(e) => return failed(ctx, env, &e, 404, &job.src),
    };
    if !entry.dir {
        let done = if job.is_move {
            let access = ctx.loc.s.dav.access;
            match io.dav_move_file(src, dst, access, rules).await {
                Ok(()) => DavDone::default(),
                Err(text) => DavDone {
                    lines: vec![crate::disk::DavLine { crit: true, text }],
                    failed: Some(500),
                },
            }
        } else {
            io.dav_copy_file(src, dst, entry, rules).await
        };
        return match report(ctx, env, done) {
            Some(code) => Outcome::Status(code),
            None => super::answer(ctx, 204, false),
        };
    }
    if !ctx.uri.ends_with('/') {
        err(ctx, env, &format!("\"{}\" is collection", ctx.uri));
        return Outcome::Status(400);
    }
    if job.overwrite {
        let done = io.dav_delete(dst, dst_dir, rules).await;
        if let Some(code) = report(ctx, env, done) {
            return Outcome::Status(code);
        }
    }
    let from = Path::new(job.src.trim_end_matches('/'));
    let done = io
        .dav_copy_tree(from, dst, entry.mode, job.is_move, rules)
        .await;
    match report(ctx, env, done) {
        Some(code) => Outcome::Status(code),
        None => super::answer(ctx, 201, false),
    }
}

fn failed(ctx: &RequestCtx, env: &Env<'_>, e: &std::io::Error, nf: u16, path: &str) -> Outcome {
    let (code, line) = dav_error(e, nf, "lstat", Path::new(path));
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

/// The headers' checks, in NGINX's order; `Err` is the status.
fn ask(ctx: &RequestCtx, env: &Env<'_>, is_move: bool) -> Result<Ask, u16> {
    let Some(dest) = ctx.header("destination") else {
        err(ctx, env, "client sent no \"Destination\" header");
        return Err(400);
    };
    let invalid = || {
        err(
            ctx,
            env,
            &format!("client sent invalid \"Destination\" header: \"{dest}\""),
        );
        400u16
    };
    let path = match dest.starts_with('/') {
        true => dest,
        false => destination_path(ctx, env, dest).ok_or_else(invalid)?,
    };
    let (duri, _args) = crate::http::uri::parse_unsafe_uri(path).ok_or_else(invalid)?;
    if ctx.uri.ends_with('/') != dest.ends_with('/') {
        let uri = &ctx.uri;
        err(ctx, env, &format!("both URI \"{uri}\" and \"Destination\" URI \"{dest}\" should be either collections or non-collections"));
        return Err(409);
    }
    if let crate::config::DocRoot::Alias(_, Some(cut)) = &ctx.loc.s.root {
        let prefix = ctx.uri.get(..*cut).unwrap_or(&ctx.uri);
        if ctx.valid_location && !duri.starts_with(prefix) {
            err(ctx, env, &format!("\"Destination\" URI \"{dest}\" must be within location prefix when using \"alias\""));
            return Err(400);
        }
    }
    match depth(ctx, env, Depth::Infinity) {
        Depth::Infinity => {}
        Depth::Zero if !is_move => {}
        _ => {
            let want = if is_move { "infinity" } else { "0 or infinity" };
            err(ctx, env, &format!("\"Depth\" header must be {want}"));
            return Err(400);
        }
    }
    let overwrite = match ctx.header("overwrite") {
        None => true,
        Some("T" | "t") => true,
        Some("F" | "f") => false,
        Some(v) => {
            err(
                ctx,
                env,
                &format!("client sent invalid \"Overwrite\" header: \"{v}\""),
            );
            return Err(400);
        }
    };
    Ok(Ask { duri, overwrite })
}

/// The path of a `Destination` URL: this connection's scheme, the
/// request's host (any port), then a `/`; `None` when it is not one. A
/// different host is NGINX's "handled by different repository" (logged
/// here; the caller answers 400).
fn destination_path<'d>(ctx: &RequestCtx, env: &Env<'_>, dest: &'d str) -> Option<&'d str> {
    let host = ctx.head.host().map(crate::http::context::strip_port)?;
    if host.is_empty() {
        return None;
    }
    let scheme = if ctx.conn.tls.is_some() {
        "https://"
    } else {
        "http://"
    };
    let rest = dest.strip_prefix(scheme)?;
    let same = rest.len() >= host.len()
        && rest.as_bytes()[..host.len()].eq_ignore_ascii_case(host.as_bytes())
        && matches!(rest.as_bytes().get(host.len()), None | Some(b':' | b'/'));
    if !same {
        err(ctx, env, &format!("\"Destination\" URI \"{dest}\" is handled by different repository than the source URI"));
        return None;
    }
    rest[host.len()..]
        .find('/')
        .map(|i| &rest[host.len() + i..])
}

/// NGINX's `ngx_http_dav_merge_slashes`.
fn merge_slashes(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    for c in p.chars() {
        if !(c == '/' && out.ends_with('/')) {
            out.push(c);
        }
    }
    out
}

/// Why two paths cannot be copied: the same one, or one inside the other.
enum Clash {
    Same,
    Inside,
}
use Clash::{Inside, Same};

/// NGINX's `ngx_http_dav_validate_paths`.
fn validate_paths(src: &str, dst: &str, slash: bool) -> Result<(), Clash> {
    let src = src.strip_suffix('/').unwrap_or(src);
    if src == dst {
        return Err(Same);
    }
    let (s, d) = (src.as_bytes(), dst.as_bytes());
    let n = s.len().min(d.len());
    let nested = if s.len() < d.len() {
        d[n] == b'/'
    } else {
        s.get(n) == Some(&b'/')
    };
    if slash && s[..n] == d[..n] && nested {
        return Err(Inside);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_inside_each_other_are_refused_for_collections() {
        assert!(matches!(validate_paths("/r/a/", "/r/a", true), Err(Same)));
        assert!(matches!(
            validate_paths("/r/a/", "/r/a/b", true),
            Err(Inside)
        ));
        assert!(matches!(
            validate_paths("/r/a/b/", "/r/a", true),
            Err(Inside)
        ));
        assert!(validate_paths("/r/a/", "/r/ab", true).is_ok());
        assert!(validate_paths("/r/a", "/r/a.txt", false).is_ok());
    }

    #[test]
    fn slashes_merge() {
        assert_eq!(merge_slashes("/r//a///b"), "/r/a/b");
    }
}
