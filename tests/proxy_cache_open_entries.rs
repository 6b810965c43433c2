//! The entries a worker keeps open between hits (`open_entries`, porter's
//! `open_file_cache` for cache files): a purge, a refill after expiry and
//! a revalidation each retire the kept descriptor before anything is
//! served from it, and kept entries take a share of the descriptor limit,
//! not a fixed number. porter before an in-test origin
//! (`tests/common/cache.rs`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::cache::*;
use crate::common::origin::*;
use crate::common::*;

/// A worker keeps hit entries open between hits (`open_entries`); a purge,
/// a refill after expiry and a revalidation must each retire the kept
/// descriptor before anything is served from it. One worker, so every
/// request meets the same kept entry; `/k`'s body changes with every
/// fetch, so a stale descriptor would show.
#[test]
fn kept_open_entries_never_outlive_their_file() {
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    let origin = Origin::start(move |r| {
        if r.target == "/r" {
            if r.header("If-None-Match") == Some("\"e\"") {
                return Reply::ok(b"").status(304).header("ETag", "\"e\"");
            }
            return Reply::ok(b"r body").header("ETag", "\"e\"");
        }
        let v = n2.fetch_add(1, Ordering::SeqCst) + 1;
        Reply::ok(format!("body v{v}").as_bytes())
    });
    let srv = Server::start(
        &conf_with(
            origin.port,
            "",
            "",
            "proxy_cache_valid 1s; proxy_cache_revalidate on;\n      \
             proxy_cache_purge PURGE from 127.0.0.1;",
            "",
        )
        .replace("worker_processes 2;", "worker_processes 1;"),
    );
    let get = |path: &str| {
        let r = req(srv.port, "GET", path, "");
        (cache_status(&r).to_string(), r.text())
    };
    let pair = |s: &str, b: &str| (s.to_string(), b.to_string());
    assert_eq!(get("/k"), pair("MISS", "body v1"));
    assert_eq!(get("/r"), pair("MISS", "r body"));
    wait_for("hits", Duration::from_secs(10), || {
        get("/k").0 == "HIT" && get("/r").0 == "HIT"
    });
    assert_eq!(get("/k"), pair("HIT", "body v1"));
    // a purge: the kept descriptor of v1 must not answer
    assert_eq!(req(srv.port, "PURGE", "/k", "").status, 200);
    assert_eq!(get("/k"), pair("MISS", "body v2"));
    wait_for("a hit on v2", Duration::from_secs(10), || {
        get("/k").0 == "HIT"
    });
    // The HIT serves the newest body the origin gave (a request that
    // came before the refill's rename may have fetched one more).
    let newest = |n: &AtomicUsize| format!("body v{}", n.load(Ordering::SeqCst));
    let (status, body) = get("/k");
    assert!(status == "HIT" || status == "EXPIRED", "{status}");
    assert_eq!(body, newest(&n), "a kept older entry answered");
    std::thread::sleep(Duration::from_millis(2200));
    // a refill after expiry: new content in a new file
    let before = n.load(Ordering::SeqCst);
    assert_eq!(get("/k"), pair("EXPIRED", &format!("body v{}", before + 1)));
    wait_for("a hit on the refill", Duration::from_secs(10), || {
        get("/k").0 == "HIT"
    });
    let (status, body) = get("/k");
    assert!(status == "HIT" || status == "EXPIRED", "{status}");
    if status == "HIT" {
        assert_eq!(body, newest(&n), "a kept older entry answered");
    }
    // a revalidation writes a new file with the new validity: the kept
    // one, whose header says expired, must not answer (it would say
    // EXPIRED and go upstream again)
    assert_eq!(get("/r"), pair("REVALIDATED", "r body"));
    wait_for("a hit after revalidation", Duration::from_secs(10), || {
        get("/r").0 == "HIT"
    });
    let fetched = origin.count();
    for _ in 0..5 {
        assert_eq!(get("/r"), pair("HIT", "r body"));
    }
    assert_eq!(origin.count(), fetched);
}

/// Kept-open entries take a share of the descriptor limit, not a fixed
/// 1,024 per worker: with `worker_rlimit_nofile 256` and two workers,
/// HITs on 600 keys leave the process far below the limit and every
/// request is answered (before: 400+ kept descriptors, then `accept()`
/// and `open()` failed with EMFILE).
#[test]
fn kept_open_entries_leave_descriptors_for_connections() {
    let origin = Origin::start(|r| Reply::ok(format!("body of {}", r.target).as_bytes()));
    let srv = Server::start(
        &conf(origin.port, "", "", "proxy_cache_valid 1h;")
            .replace("daemon off;\n", "daemon off;\nworker_rlimit_nofile 256;\n"),
    );
    for round in 0..3 {
        for k in 0..600 {
            let r = req(srv.port, "GET", &format!("/k{k}"), "");
            assert_eq!(r.status, 200, "round {round}, key {k}");
        }
    }
    let fds = std::fs::read_dir(format!("/proc/{}/fd", srv.child.id()))
        .unwrap()
        .count();
    assert!(fds < 128, "{fds} descriptors open with a limit of 256");
    let log = srv.read("logs/error.log");
    assert!(!log.contains("Too many open files"), "{log}");
}
