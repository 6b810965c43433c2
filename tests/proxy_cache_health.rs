//! A cache directory that disappears or turns read-only takes only its
//! zone out of service, with one log line; the zone's requests go to the
//! origin uncached while the other zone keeps caching; when the directory
//! can be written again the zone comes back (src/cache/health.rs).

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::origin::*;
use crate::common::*;

/// Two zones, `z1` in `{PREFIX}/d1` for `/one/` and `z2` in `{PREFIX}/d2`
/// for `/two/`, over `origin`.
fn conf(origin: u16) -> String {
    let loc = |path: &str, zone: &str| {
        format!(
            "    location /{path}/ {{\n      proxy_pass http://127.0.0.1:{origin};\n      \
             proxy_cache {zone};\n      proxy_cache_valid 200 10m;\n      \
             add_header X-Cache $upstream_cache_status always;\n    }}\n"
        )
    };
    format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\nevents {{}}\n\
         http {{\n  access_log off;\n  \
           proxy_cache_path {{PREFIX}}/d1 levels=1:2 keys_zone=z1:1m use_temp_path=off;\n  \
           proxy_cache_path {{PREFIX}}/d2 levels=1:2 keys_zone=z2:1m use_temp_path=off;\n  \
           server {{\n    listen 127.0.0.1:{{PORT}};\n{}{}  }}\n}}\n",
        loc("one", "z1"),
        loc("two", "z2")
    )
}

fn start() -> (Origin, Server) {
    let origin = Origin::start(|r| Reply::ok(format!("body of {}", r.target).as_bytes()));
    let srv = Server::start(&conf(origin.port));
    (origin, srv)
}

/// GETs `path`; asserts a 200 with the origin's body; returns `X-Cache`.
fn get(srv: &Server, path: &str) -> String {
    let r = get_close(srv.port, path);
    assert_eq!(r.status, 200, "{path}: {r:?}");
    assert_eq!(r.body, format!("body of {path}").as_bytes(), "{path}");
    r.header("X-Cache").unwrap_or("").to_string()
}

fn get_close(port: u16, path: &str) -> Resp {
    raw(
        port,
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

fn count(log: &str, needle: &str) -> usize {
    log.matches(needle).count()
}

const OUT_Z1: &str = "cache \"z1\" is out of service";
const OUT_Z2: &str = "cache \"z2\" is out of service";
const BACK_Z1: &str = "cache \"z1\" is back in service";
const BACK_Z2: &str = "cache \"z2\" is back in service";
const WAIT: Duration = Duration::from_secs(5);

fn warm(srv: &Server) {
    assert_eq!(get(srv, "/one/a"), "MISS");
    assert_eq!(get(srv, "/one/a"), "HIT");
    assert_eq!(get(srv, "/two/a"), "MISS");
    assert_eq!(get(srv, "/two/a"), "HIT");
}

#[test]
fn a_removed_cache_directory_takes_its_zone_out_and_back() {
    let (origin, srv) = start();
    warm(&srv);
    let d1 = srv.prefix.path().join("d1");
    let meta = std::fs::metadata(&d1).unwrap();
    std::fs::remove_dir_all(&d1).unwrap();

    let log = srv.wait_log("logs/error.log", OUT_Z1, WAIT);
    assert!(log.contains(OUT_Z1), "{log}");
    let before = origin.count();
    for _ in 0..3 {
        // Served from the origin, not cached.
        assert_eq!(get(&srv, "/one/b"), "");
    }
    assert_eq!(origin.count(), before + 3);
    // The other zone keeps caching.
    assert_eq!(get(&srv, "/two/a"), "HIT");
    assert_eq!(get(&srv, "/two/b"), "MISS");
    assert_eq!(get(&srv, "/two/b"), "HIT");
    let log = srv.read("logs/error.log");
    assert_eq!(count(&log, OUT_Z1), 1, "{log}");
    assert!(!log.contains(OUT_Z2), "{log}");
    assert!(!log.contains(BACK_Z1), "{log}");

    // The directory comes back (a disk mounted again), owned as before.
    std::fs::create_dir(&d1).unwrap();
    std::os::unix::fs::chown(&d1, Some(meta.uid()), Some(meta.gid())).unwrap();
    let log = srv.wait_log("logs/error.log", BACK_Z1, WAIT);
    assert!(log.contains(BACK_Z1), "{log}");
    assert_eq!(get(&srv, "/one/c"), "MISS");
    assert_eq!(get(&srv, "/one/c"), "HIT");
    assert_eq!(count(&srv.read("logs/error.log"), OUT_Z1), 1);
}

/// A read-only bind mount of a directory over itself, undone on drop.
struct ReadOnly<'a>(&'a Path);

impl<'a> ReadOnly<'a> {
    fn mount(dir: &'a Path) -> Option<ReadOnly<'a>> {
        let ok = |args: &[&str]| {
            Command::new("mount")
                .args(args)
                .arg(dir)
                .arg(dir)
                .status()
                .is_ok_and(|s| s.success())
        };
        if !ok(&["--bind"]) {
            return None;
        }
        let guard = ReadOnly(dir);
        ok(&["-o", "remount,bind,ro"]).then_some(guard)
    }
}

impl Drop for ReadOnly<'_> {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0).status();
    }
}

#[test]
fn a_read_only_cache_directory_takes_its_zone_out_and_back() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: a read-only bind mount needs root");
        return;
    }
    let (origin, srv) = start();
    warm(&srv);
    let d2 = srv.prefix.path().join("d2");
    let Some(ro) = ReadOnly::mount(&d2) else {
        eprintln!("skipped: mount --bind / remount,ro failed here");
        return;
    };
    // The first fill fails on the read-only file system; the zone goes.
    assert_eq!(get(&srv, "/two/b"), "MISS");
    let log = srv.wait_log("logs/error.log", OUT_Z2, WAIT);
    assert!(log.contains(OUT_Z2), "{log}");
    assert!(log.contains("Read-only file system"), "{log}");
    let before = origin.count();
    assert_eq!(get(&srv, "/two/b"), "");
    assert_eq!(get(&srv, "/two/a"), "");
    assert_eq!(origin.count(), before + 2);
    // The other zone keeps caching.
    assert_eq!(get(&srv, "/one/a"), "HIT");
    assert_eq!(get(&srv, "/one/d"), "MISS");
    assert_eq!(get(&srv, "/one/d"), "HIT");

    drop(ro);
    let log = srv.wait_log("logs/error.log", BACK_Z2, WAIT);
    assert!(log.contains(BACK_Z2), "{log}");
    assert_eq!(get(&srv, "/two/e"), "MISS");
    assert_eq!(get(&srv, "/two/e"), "HIT");
    let log = srv.read("logs/error.log");
    assert_eq!(count(&log, OUT_Z2), 1, "{log}");
    assert!(!log.contains(OUT_Z1), "{log}");
}
