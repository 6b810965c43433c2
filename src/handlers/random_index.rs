//! `random_index`: NGINX's `ngx_http_random_index_module`, the content
//! step before the index module for a URI ending in `/` (GET, HEAD or
//! POST): the directory is read through the disk layer
//! ([`crate::disk::Io::list_dir`], one task on the location's pool, as
//! `autoindex` reads it — never on the loop), and one of its regular
//! files (through symlinks; names starting with `.` left out) is picked
//! at random and served by an internal redirect to the URI plus its
//! name, the request's arguments kept. A directory with no regular file
//! declines to the index module; one that cannot be opened answers 404,
//! 403 or 500 with NGINX's `opendir()` line.

use std::hash::{BuildHasher, Hasher};
use std::path::Path;

use super::autoindex::open_dir_failed;
use super::outcome::{Env, Outcome};
use crate::disk::{EntryKind, Io};
use crate::http::context::RequestCtx;
use crate::log::Level;
use crate::util::errno_text;

/// The internal redirect to a random file of `dir` (the URI's mapped
/// path, ending in `/`), or `None` to go on to the index module.
pub async fn pick(ctx: &mut RequestCtx, env: &Env<'_>, io: &Io, dir: &str) -> Option<Outcome> {
    let path = if dir.len() > 1 {
        dir.trim_end_matches('/')
    } else {
        dir
    };
    let listing = match io.list_dir(Path::new(path)).await {
        Ok(l) => l,
        Err(e) => return Some(open_dir_failed(ctx, env, path, &e)),
    };
    if let Some((p, e)) = listing.refused.first() {
        ctx.log(env.log).line(
            Level::Crit,
            format_args!("stat() \"{}\" failed {}", p.display(), errno_text(e)),
        );
        return Some(Outcome::Status(500));
    }
    // A name that is not UTF-8 cannot be a URI here; NGINX would try it.
    let names: Vec<&str> = listing
        .entries
        .iter()
        .filter(|e| e.kind == EntryKind::File)
        .filter_map(|e| std::str::from_utf8(&e.name).ok())
        .collect();
    if names.is_empty() {
        return None;
    }
    // NGINX's `random() * n / 0x80000000`: a 31-bit random number.
    let r = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
        & 0x7fff_ffff;
    let n = ((r * names.len() as u64) >> 31) as usize;
    let uri = format!("{}{}", ctx.uri, names[n]);
    Some(Outcome::Internal(uri, ctx.args.clone()))
}
