//! `proxy_cache_use_stale` and `proxy_cache_background_update`: an
//! expired entry served STALE on an upstream error (also after a reload
//! onto a dead origin), UPDATING while another request refreshes it, and
//! STALE at once while a background request does. porter before an
//! in-test origin (`tests/common/cache.rs`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::cache::*;
use crate::common::origin::*;
use crate::common::*;

#[test]
fn stale_on_error_and_while_updating() {
    let fail = Arc::new(AtomicUsize::new(0));
    let f2 = fail.clone();
    let origin = Origin::start(move |r| match f2.load(Ordering::SeqCst) {
        1 => Reply::ok(b"boom").status(500),
        2 => Reply::ok(b"new").delay(Duration::from_millis(1500)),
        _ => Reply::ok(format!("old {}", r.target).as_bytes()),
    });
    let srv = Server::start(&conf(
        origin.port,
        "",
        "",
        "proxy_cache_valid 1s; proxy_cache_use_stale error timeout http_500 updating;",
    ));
    for p in ["/a", "/b"] {
        assert_eq!(cache_status(&req(srv.port, "GET", p, "")), "MISS");
    }
    wait_for("hits", Duration::from_secs(10), || {
        cache_status(&req(srv.port, "GET", "/a", "")) == "HIT"
            && cache_status(&req(srv.port, "GET", "/b", "")) == "HIT"
    });
    std::thread::sleep(Duration::from_millis(2200));
    fail.store(1, Ordering::SeqCst);
    let s = req(srv.port, "GET", "/a", "");
    assert_eq!(
        (s.status, cache_status(&s), s.text().as_str()),
        (200, "STALE", "old /a")
    );
    // Updating: one request refreshes slowly, another gets the stale one.
    fail.store(2, Ordering::SeqCst);
    let port = srv.port;
    let n = origin.count();
    let refresher = std::thread::spawn(move || req(port, "GET", "/b", ""));
    wait_for("the refresh upstream", Duration::from_secs(10), || {
        origin.count() > n
    });
    let u = req(srv.port, "GET", "/b", "");
    assert_eq!(
        (cache_status(&u), u.text().as_str()),
        ("UPDATING", "old /b")
    );
    let r = refresher.join().unwrap();
    assert_eq!((cache_status(&r), r.text().as_str()), ("EXPIRED", "new"));
    // Origin down: `error`.
    drop(origin);
    stale_on_error_after_a_reload_onto_a_dead_origin();
}

/// A hit, then a reload onto a dead origin: the entry comes back STALE
/// (`proxy_cache_use_stale error`).
fn stale_on_error_after_a_reload_onto_a_dead_origin() {
    let dead = free_port();
    let origin = Origin::start(|_| Reply::ok(b"cached"));
    // The key must not name the origin's address, which changes.
    let text = conf(
        origin.port,
        "",
        "",
        "proxy_cache_valid 1s; proxy_cache_use_stale error; proxy_cache_key $request_uri;",
    );
    let srv2 = Server::start(&text);
    assert_eq!(cache_status(&req(srv2.port, "GET", "/d", "")), "MISS");
    wait_for("a hit", Duration::from_secs(10), || {
        cache_status(&req(srv2.port, "GET", "/d", "")) == "HIT"
    });
    std::thread::sleep(Duration::from_millis(2200));
    // Reload onto a dead origin, same cache.
    let text = text.replace(
        &format!("127.0.0.1:{};", origin.port),
        &format!("127.0.0.1:{dead};"),
    );
    std::fs::write(
        srv2.prefix.path().join("porter.conf"),
        config_text(&text, srv2.port, srv2.prefix.path()),
    )
    .unwrap();
    srv2.signal(1);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = req(srv2.port, "GET", "/d", "");
        if cache_status(&r) == "STALE" && r.text() == "cached" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no stale answer after the reload: {r:?}\n{}",
            srv2.read("logs/error.log")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn background_update_serves_stale_at_once() {
    let version = Arc::new(AtomicUsize::new(1));
    let v2 = version.clone();
    let origin = Origin::start(move |_| {
        let v = v2.load(Ordering::SeqCst);
        Reply::ok(format!("v{v}").as_bytes()).delay(if v > 1 {
            Duration::from_millis(800)
        } else {
            Duration::ZERO
        })
    });
    let srv = Server::start(&conf(
        origin.port,
        "",
        "",
        "proxy_cache_valid 1s; proxy_cache_use_stale updating; proxy_cache_background_update on;",
    ));
    assert_eq!(cache_status(&req(srv.port, "GET", "/bg", "")), "MISS");
    wait_for("a hit", Duration::from_secs(10), || {
        cache_status(&req(srv.port, "GET", "/bg", "")) == "HIT"
    });
    std::thread::sleep(Duration::from_millis(2200));
    version.store(2, Ordering::SeqCst);
    let t = Instant::now();
    let s = req(srv.port, "GET", "/bg", "");
    let took = t.elapsed();
    assert_eq!((cache_status(&s), s.text().as_str()), ("STALE", "v1"));
    assert!(
        took < Duration::from_millis(700),
        "stale at once, not after the refresh: {took:?}"
    );
    wait_for("the refreshed entry", Duration::from_secs(10), || {
        let r = req(srv.port, "GET", "/bg", "");
        cache_status(&r) == "HIT" && r.text() == "v2"
    });
}
