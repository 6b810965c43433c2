//! The upstream's `Cache-Control: stale-while-revalidate=N` and
//! `stale-if-error=N` (NGINX 1.11.10+), kept in the entry as NGINX's
//! `updating_sec` and `error_sec`: within them an expired entry is
//! served STALE while a background request refreshes it, UPDATING while
//! another request does, and STALE when the upstream fails (not on its
//! 5xx answer, as NGINX 1.19.3+) — without `proxy_cache_use_stale`. Each
//! test asks porter and, when installed, nginx on the same settings.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use crate::common::cache::{cache_status, req, wait_for};
use crate::common::origin::*;
use crate::common::*;

const HTTP: &str = "proxy_cache_path {PREFIX}/cache levels=1:2 keys_zone=one:1m;";

/// `location PATH` caching in zone `one` from the origin, with `extra`.
fn location(path: &str, origin: u16, extra: &str) -> String {
    format!(
        "location {path} {{\n proxy_pass http://127.0.0.1:{origin};\n proxy_cache one;\n {extra}\n \
         add_header X-Cache $upstream_cache_status always;\n}}\n"
    )
}

fn ports(p: &Server, n: &Option<Nginx>) -> Vec<(&'static str, u16)> {
    let mut v = vec![("porter", p.port)];
    v.extend(n.as_ref().map(|n| ("nginx", n.port)));
    v
}

/// (status, cache status, body) of `GET path`.
fn ask(port: u16, path: &str) -> (u16, String, String) {
    let r = req(port, "GET", path, "");
    (r.status, cache_status(&r).to_string(), r.text())
}

fn answer(status: u16, cache: &str, body: &str) -> (u16, String, String) {
    (status, cache.to_string(), body.to_string())
}

#[test]
fn stale_while_revalidate_serves_the_old_entry_while_it_is_refreshed() {
    // `gen` names the origin's current body; `/slow/` refreshes slowly.
    let gen = Arc::new(AtomicUsize::new(0));
    let g = gen.clone();
    let origin = Origin::start(move |r| {
        let delay = if r.target.starts_with("/slow/") && g.load(SeqCst) > 0 {
            Duration::from_millis(1500)
        } else {
            Duration::ZERO
        };
        Reply::ok(format!("v{}", g.load(SeqCst)).as_bytes())
            .header("Cache-Control", "max-age=1, stale-while-revalidate=30")
            .delay(delay)
    });
    let server = location("/bg/", origin.port, "proxy_cache_background_update on;")
        + &location("/slow/", origin.port, "");
    let (p, n) = both(HTTP, &server);
    for (name, port) in ports(&p, &n) {
        for path in ["/bg/a", "/slow/a"] {
            assert_eq!(ask(port, path), answer(200, "MISS", "v0"), "{name} {path}");
        }
    }
    std::thread::sleep(Duration::from_millis(2200));
    gen.store(1, SeqCst);
    for (name, port) in ports(&p, &n) {
        // Background update: the stale entry at once, then the new one.
        assert_eq!(ask(port, "/bg/a"), answer(200, "STALE", "v0"), "{name}");
        wait_for("the background update", Duration::from_secs(5), || {
            ask(port, "/bg/a") == answer(200, "HIT", "v1")
        });
        // Without it: one request refreshes (EXPIRED), another meanwhile
        // gets the stale entry (UPDATING), as `use_stale updating` would.
        let first = std::thread::spawn(move || ask(port, "/slow/a"));
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(
            ask(port, "/slow/a"),
            answer(200, "UPDATING", "v0"),
            "{name}"
        );
        assert_eq!(
            first.join().unwrap(),
            answer(200, "EXPIRED", "v1"),
            "{name}"
        );
    }
}

#[test]
fn stale_if_error_serves_the_old_entry_when_the_upstream_fails_not_on_its_5xx() {
    // 0: cacheable answer; 1: the origin closes without answering; 2: 500.
    let mode = Arc::new(AtomicUsize::new(0));
    let m = mode.clone();
    let origin = Origin::start(move |_| match m.load(SeqCst) {
        0 => Reply::ok(b"old").header("Cache-Control", "max-age=1, stale-if-error=30"),
        1 => Reply::ok(b"").framing(Framing::Raw(Vec::new())),
        _ => Reply::ok(b"boom").status(500),
    });
    let (p, n) = both(HTTP, &location("/", origin.port, ""));
    for (name, port) in ports(&p, &n) {
        assert_eq!(ask(port, "/e"), answer(200, "MISS", "old"), "{name}");
    }
    std::thread::sleep(Duration::from_millis(2200));
    mode.store(1, SeqCst);
    for (name, port) in ports(&p, &n) {
        assert_eq!(ask(port, "/e"), answer(200, "STALE", "old"), "{name}");
    }
    mode.store(2, SeqCst);
    for (name, port) in ports(&p, &n) {
        let (status, cache, _) = ask(port, "/e");
        assert_eq!((status, cache.as_str()), (500, "EXPIRED"), "{name}");
    }
}

#[test]
fn a_malformed_window_keeps_the_response_out_of_the_cache() {
    let origin = Origin::start(|_| {
        Reply::ok(b"x").header("Cache-Control", "max-age=60, stale-while-revalidate=1x")
    });
    let (p, n) = both(HTTP, &location("/", origin.port, ""));
    for (name, port) in ports(&p, &n) {
        assert_eq!(ask(port, "/m"), answer(200, "MISS", "x"), "{name}");
        assert_eq!(ask(port, "/m"), answer(200, "MISS", "x"), "{name}");
    }
}
