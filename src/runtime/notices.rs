//! The start-up notice of the disk routes: once, at `notice`, which route
//! the static-file locations use and why, grouped (one line per distinct
//! route, naming a few of its locations), and what is missing for full
//! speed with the one-line fix.

use std::collections::BTreeMap;

use crate::config::locations::LocationTree;
use crate::config::{AioConf, Config, Handler, LocationConf};
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

/// Logs one line per distinct disk route of the static locations.
pub fn disk_routes(cfg: &Config, log: &ErrorLog) {
    let mut by_route: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for server in &cfg.servers {
        let mut locs = vec![&*server.base];
        walk(&server.locations, &mut locs);
        for l in locs {
            if matches!(l.handler, Handler::Static) {
                let name = match l.path.as_str() {
                    "" => "server".to_string(),
                    p => format!("\"{p}\""),
                };
                by_route.entry(route(l)).or_default().push(name);
            }
        }
    }
    for (route, mut paths) in by_route {
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
        log.log(
            Level::Notice,
            format_args!(
                "disk route of {n} {noun} ({}{more}): {route}",
                shown.join(", ")
            ),
        );
    }
}
