//! `proxy_cache_lock`, `proxy_cache_lock_timeout` and
//! `proxy_cache_lock_age`: concurrent misses of one key share one fill,
//! and a request that waited too long goes upstream itself. porter before
//! an in-test origin that counts what it is asked (`tests/common/cache.rs`).

use std::time::{Duration, Instant};

use crate::common::cache::*;
use crate::common::origin::*;
use crate::common::*;

#[test]
fn lock_sends_one_request_upstream() {
    let origin =
        Origin::start(|_| Reply::ok(&pattern(50_000, 2)).delay(Duration::from_millis(700)));
    let srv = Server::start(&conf(
        origin.port,
        "",
        "",
        "proxy_cache_valid 10m; proxy_cache_lock on; proxy_cache_lock_timeout 30s; proxy_cache_lock_age 30s;",
    ));
    let port = srv.port;
    let threads: Vec<_> = (0..8)
        .map(|_| std::thread::spawn(move || req(port, "GET", "/slow", "")))
        .collect();
    let mut statuses: Vec<String> = threads
        .into_iter()
        .map(|t| {
            let r = t.join().unwrap();
            assert_eq!(r.body, pattern(50_000, 2));
            cache_status(&r).to_string()
        })
        .collect();
    statuses.sort();
    assert_eq!(
        origin.count(),
        1,
        "one fetch for eight requests: {statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| *s == "MISS").count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| *s == "HIT").count(),
        7,
        "{statuses:?}"
    );
}

#[test]
fn lock_timeout_goes_upstream_without_storing() {
    let origin = Origin::start(|_| Reply::ok(b"slow").delay(Duration::from_millis(1500)));
    let srv = Server::start(&conf(
        origin.port,
        "",
        "",
        "proxy_cache_valid 10m; proxy_cache_lock on; proxy_cache_lock_timeout 200ms;",
    ));
    let port = srv.port;
    let first = std::thread::spawn(move || req(port, "GET", "/t", ""));
    wait_for(
        "the first request upstream",
        Duration::from_secs(10),
        || origin.count() == 1,
    );
    let second = req(port, "GET", "/t", "");
    assert_eq!(
        (cache_status(&second), second.text().as_str()),
        ("MISS", "slow")
    );
    assert_eq!(origin.count(), 2);
    assert_eq!(cache_status(&first.join().unwrap()), "MISS");
}

/// `proxy_cache_lock_age`: once the fill is that old, a waiting request
/// goes upstream itself, long before `proxy_cache_lock_timeout`.
#[test]
fn lock_age_lets_one_more_request_through() {
    let origin = Origin::start(|_| Reply::ok(b"slow").delay(Duration::from_millis(2500)));
    let srv = Server::start(&conf(
        origin.port,
        "",
        "",
        "proxy_cache_valid 10m; proxy_cache_lock on; proxy_cache_lock_timeout 20s; proxy_cache_lock_age 500ms;",
    ));
    let port = srv.port;
    let t0 = Instant::now();
    let first = std::thread::spawn(move || req(port, "GET", "/age", ""));
    wait_for("the first fill", Duration::from_secs(10), || {
        origin.count() == 1
    });
    let second = std::thread::spawn(move || req(port, "GET", "/age", ""));
    wait_for("a second request upstream", Duration::from_secs(10), || {
        origin.count() == 2
    });
    let took = t0.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "through after lock_age, not lock_timeout (20 s): {took:?}"
    );
    assert_eq!(first.join().unwrap().text(), "slow");
    assert_eq!(second.join().unwrap().text(), "slow");
}
