//! The start-up notice of the disk routes: once, at `notice`, which route
//! the static-file locations use and why, grouped (one line per distinct
//! route, naming a few of its locations), and what is missing for full
//! speed with the one-line fix: among them the document roots whose files
//! the workers' user neither owns nor may write (`cachestat` refused).

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::privileges::{self, Credentials};
use crate::config::locations::LocationTree;
use crate::config::{AioConf, Config, DocRoot, Handler, LocationConf};
use crate::disk::{fastpath, uring};
use crate::log::{ErrorLog, Level};

/// Every location of `tree`, nested ones included.
fn walk<'a>(tree: &'a LocationTree, out: &mut Vec<&'a LocationConf>) {
    let all = tree
        .exact
        .values()
        .chain(&tree.prefixes)
        .chain(&tree.regexes);
    for l in all {
        out.push(l);
        walk(&l.nested, out);
    }
}

/// The route a static location's files take, in words.
fn route(l: &LocationConf) -> String {
    let f = fastpath::features();
    let fast = if !l.s.aio_fast_path {
        "no fast path (aio_fast_path off): every open and read waits for a pool thread".to_string()
    } else if !f.open_cached || !f.read_nowait {
        "fast path unavailable on this kernel: every open and read waits for a pool thread"
            .to_string()
    } else if l.s.sendfile && f.cachestat {
        "fast path: cached opens and pages on the event loop, sendfile checked with cachestat, \
         misses to the pool"
            .to_string()
    } else if l.s.sendfile {
        "fast path without cachestat: cached pages are copied (RWF_NOWAIT) instead of \
         sendfile, misses to the pool"
            .to_string()
    } else {
        "fast path: cached opens and reads on the event loop, misses to the pool".to_string()
    };
    match &l.s.aio {
        AioConf::Off => "aio off: the event loop opens, reads and sendfile()s itself and \
                         stalls on a cold disk"
            .to_string(),
        AioConf::Threads(pool) => {
            let name = if pool.raw().is_empty() {
                "default"
            } else {
                pool.raw()
            };
            format!("aio threads={name}, {fast}")
        }
        AioConf::On if uring::available() => format!("aio on: the worker's io_uring ring, {fast}"),
        AioConf::On => format!(
            "aio on without io_uring (pool \"default\" instead), {fast}; fix: allow \
             io_uring_setup (a seccomp profile or kernel.io_uring_disabled refuses it)"
        ),
    }
}

/// The static-file locations of every server, each with its name in
/// messages (`"/a/"`, or `server` for the server's own settings).
fn static_locations(cfg: &Config) -> Vec<(&LocationConf, String)> {
    let mut out = Vec::new();
    for server in &cfg.servers {
        let mut locs = vec![&*server.base];
        walk(&server.locations, &mut locs);
        for l in locs {
            if matches!(l.handler, Handler::Static) {
                let name = match l.path.as_str() {
                    "" => "server".to_string(),
                    p => format!("\"{p}\""),
                };
                out.push((l, name));
            }
        }
    }
    out
}

/// `N location(s) ("/a/", "/b/", server and 2 more)`, sorted, each once.
fn named(mut paths: Vec<String>) -> String {
    paths.sort();
    paths.dedup();
    let n = paths.len();
    let shown: Vec<&str> = paths.iter().take(3).map(String::as_str).collect();
    let more = if n > 3 {
        format!(" and {} more", n - 3)
    } else {
        String::new()
    };
    let noun = if n == 1 { "location" } else { "locations" };
    format!("{n} {noun} ({}{more})", shown.join(", "))
}

/// Logs one line per distinct disk route of the static locations.
pub fn disk_routes(cfg: &Config, log: &ErrorLog) {
    let mut by_route: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (l, name) in static_locations(cfg) {
        by_route.entry(route(l)).or_default().push(name);
    }
    for (route, paths) in by_route {
        log.log(
            Level::Notice,
            format_args!("disk route of {}: {route}", named(paths)),
        );
    }
}

/// Whether the fast path asks `cachestat` before an inline `sendfile`
/// for this location's files (see [`route`]).
fn asks_cachestat(l: &LocationConf) -> bool {
    let f = fastpath::features();
    let pool = match l.s.aio {
        AioConf::Threads(_) => true,
        AioConf::On => !uring::available(),
        AioConf::Off => false,
    };
    pool && l.s.aio_fast_path && l.s.sendfile && f.open_cached && f.read_nowait && f.cachestat
}

/// One notice per document root whose files `cachestat` refuses to the
/// workers' user (Linux 6.14+: files it neither owns nor may write):
/// what is lost (zero-copy `sendfile` of cached pages; they are copied)
/// and the fix that does not let the workers write the site. Asked on a
/// thread with the workers' credentials, of one file per root.
pub fn files_not_owned(cfg: &Config, creds: &Option<Credentials>, log: &ErrorLog) {
    let mut by_root: BTreeMap<PathBuf, Vec<String>> = BTreeMap::new();
    for (l, name) in static_locations(cfg) {
        let (DocRoot::Root(t) | DocRoot::Alias(t, _)) = &l.s.root;
        if asks_cachestat(l) && t.is_literal() {
            by_root
                .entry(PathBuf::from(t.raw()))
                .or_default()
                .push(name);
        }
    }
    if by_root.is_empty() {
        return;
    }
    let roots: Vec<PathBuf> = by_root.keys().cloned().collect();
    let c = creds.clone();
    let probe = std::thread::spawn(move || {
        if let Some(c) = &c {
            privileges::drop_thread(c).ok()?;
        }
        Some(
            roots
                .iter()
                .map(|r| fastpath::cachestat_refused_under(r))
                .collect::<Vec<_>>(),
        )
    });
    let Ok(Some(refused)) = probe.join() else {
        return;
    };
    let user = match creds {
        Some(c) => c.name.clone(),
        None => nix::unistd::User::from_uid(nix::unistd::geteuid())
            .ok()
            .flatten()
            .map_or_else(|| nix::unistd::geteuid().to_string(), |u| u.name),
    };
    for ((root, paths), refused) in by_root.into_iter().zip(refused) {
        if refused != Some(true) {
            continue;
        }
        let r = root.display();
        log.log(
            Level::Notice,
            format_args!(
                "files under \"{r}\" of {} are neither owned nor writable by the workers' \
                 user \"{user}\": cachestat() is refused (Linux 6.14+), so cached pages are \
                 copied (preadv2 RWF_NOWAIT and send) instead of sent by zero-copy sendfile(); \
                 fix: chown -R {user} {r} and keep it read-only for porter (systemd: \
                 ReadOnlyPaths={r}), as an owner, group write or CAP_FOWNER alone would let \
                 the workers write the site; or keep the copy",
                named(paths)
            ),
        );
    }
}
