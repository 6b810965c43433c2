//! `proxy_cache` over real sockets: porter between a test client and an
//! in-test origin (threads speaking HTTP/1.1 on loopback) that counts what
//! it is asked. Every answer's `$upstream_cache_status` comes back in an
//! `X-Cache` header (`add_header … always`), so each test reads the
//! status NGINX would give.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::metrics::Metrics;
use common::origin::*;
use common::*;

/// A config with one zone `one` in `{PREFIX}/cache` (extra zone
/// parameters in `zone_extra`), `http_extra` at http level and a
/// `location /` proxying to the origin with `loc_extra`.
fn conf(origin: u16, zone_extra: &str, http_extra: &str, loc_extra: &str) -> String {
    conf_with(origin, zone_extra, http_extra, loc_extra, "")
}

/// [`conf`] with more locations in the server (`ORIGIN`: the origin's
/// port).
fn conf_with(
    origin: u16,
    zone_extra: &str,
    http_extra: &str,
    loc_extra: &str,
    server_extra: &str,
) -> String {
    let server_extra = server_extra.replace("ORIGIN", &origin.to_string());
    format!(
        "daemon off;\nworker_processes 2;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\n\
         events {{ worker_connections 512; }}\n\
         http {{\n  log_format cache '$request_uri $upstream_cache_status';\n  \
           access_log {{PREFIX}}/logs/access.log cache;\n  \
           proxy_cache_path {{PREFIX}}/cache levels=1:2 keys_zone=one:1m{zone_extra};\n{http_extra}\n  \
           server {{\n    listen 127.0.0.1:{{PORT}};\n    server_name localhost;\n    \
             location / {{\n      proxy_pass http://127.0.0.1:{origin};\n      proxy_cache one;\n      \
               add_header X-Cache $upstream_cache_status always;\n{loc_extra}\n    }}\n{server_extra}\n  }}\n}}\n"
    )
}

fn req(port: u16, method: &str, path: &str, headers: &str) -> Resp {
    raw(
        port,
        format!(
            "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{headers}\r\n"
        )
        .as_bytes(),
    )
}

fn cache_status(r: &Resp) -> &str {
    r.header("X-Cache").unwrap_or("")
}

/// MD5 of the key, as NGINX names entries.
fn md5_hex(key: &str) -> String {
    let out = std::process::Command::new("md5sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(key.as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    String::from_utf8_lossy(&out.stdout)[..32].to_string()
}

/// `DIR/c/29/b7f5…` for `levels=1:2`.
fn entry_path(dir: &Path, key: &str) -> PathBuf {
    let h = md5_hex(key);
    dir.join(&h[31..]).join(&h[29..31]).join(&h)
}

/// Every regular file under `dir`.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn miss_then_hit_from_the_entry_file() {
    let body = pattern(100_000, 1);
    let b2 = body.clone();
    let origin = Origin::start(move |r| match r.target.as_str() {
        "/small" => Reply::ok(b"small body").header("ETag", "\"s1\""),
        _ => Reply::ok(&b2)
            .header("Last-Modified", "Mon, 02 Jan 2023 00:00:00 GMT")
            .header("X-Origin", "yes"),
    });
    let srv = Server::start(&conf(origin.port, "", "", "proxy_cache_valid 200 10m;"));
    let a = req(srv.port, "GET", "/big?x=1", "");
    assert_eq!(a.status, 200);
    assert_eq!(cache_status(&a), "MISS");
    assert_eq!(a.body, body);
    // Visible once complete.
    let path = entry_path(
        &srv.prefix.path().join("cache"),
        "http127.0.0.1:PORT/big?x=1"
            .replace("PORT", &origin.port.to_string())
            .as_str(),
    );
    wait_for("the entry file", Duration::from_secs(10), || path.exists());
    for _ in 0..3 {
        let b = req(srv.port, "GET", "/big?x=1", "");
        assert_eq!(b.status, 200);
        assert_eq!(cache_status(&b), "HIT");
        assert_eq!(b.body, body, "byte-exact from the entry");
        assert_eq!(b.header("X-Origin"), Some("yes"));
        assert_eq!(
            b.header("Last-Modified"),
            Some("Mon, 02 Jan 2023 00:00:00 GMT")
        );
        // No Accept-Ranges from the upstream: none here (NGINX 1.22).
        assert_eq!(b.header("Accept-Ranges"), None);
        assert!(b.header("Server").unwrap().starts_with("porter"));
        assert_eq!(b.header("Content-Length"), Some("100000"));
    }
    // ... and a Range is answered with the whole body, as NGINX does.
    let r = req(srv.port, "GET", "/big?x=1", "Range: bytes=0-9\r\n");
    assert_eq!(
        (r.status, r.body.len(), cache_status(&r)),
        (200, 100_000, "HIT")
    );
    assert_eq!(origin.count(), 1, "one upstream request for five answers");
    // A small body (read, not sent from the file) and its ETag.
    assert_eq!(cache_status(&req(srv.port, "GET", "/small", "")), "MISS");
    let s = req(srv.port, "GET", "/small", "");
    assert_eq!((cache_status(&s), s.text().as_str()), ("HIT", "small body"));
    assert_eq!(s.header("ETag"), Some("\"s1\""));
    assert_eq!(origin.count(), 2);
    // $upstream_cache_status in log_format.
    let log = srv.wait_log("logs/access.log", "/small HIT", Duration::from_secs(5));
    assert!(log.contains("/big?x=1 MISS\n"), "{log}");
    assert!(log.contains("/big?x=1 HIT\n"), "{log}");
    assert!(log.contains("/small HIT\n"), "{log}");
}

#[test]
fn head_is_fetched_as_get_and_cached() {
    let origin = Origin::start(|_| Reply::ok(b"the body"));
    let srv = Server::start(&conf(origin.port, "", "", "proxy_cache_valid 10m;"));
    let h = req(srv.port, "HEAD", "/h", "");
    assert_eq!((h.status, cache_status(&h)), (200, "MISS"));
    assert_eq!(h.header("Content-Length"), Some("8"));
    assert_eq!(
        origin.requests()[0].method,
        "GET",
        "NGINX's proxy_cache_convert_head"
    );
    let path = entry_path(
        &srv.prefix.path().join("cache"),
        &format!("http127.0.0.1:{}/h", origin.port),
    );
    wait_for("the entry file", Duration::from_secs(10), || path.exists());
    let g = req(srv.port, "GET", "/h", "");
    assert_eq!((cache_status(&g), g.text().as_str()), ("HIT", "the body"));
    let h = req(srv.port, "HEAD", "/h", "");
    assert_eq!((cache_status(&h), h.body.len()), ("HIT", 0));
    assert_eq!(origin.count(), 1);
}

#[test]
fn expiry_and_revalidation() {
    let origin = Origin::start(|r| {
        if r.target.starts_with("/reval") && r.header("If-None-Match") == Some("\"v1\"") {
            return Reply::ok(b"").status(304).header("ETag", "\"v1\"");
        }
        match r.target.as_str() {
            "/maxage" => Reply::ok(b"m").header("Cache-Control", "max-age=1"),
            "/reval" => Reply::ok(b"revalidated body")
                .header("ETag", "\"v1\"")
                .header("Last-Modified", "Mon, 02 Jan 2023 00:00:00 GMT"),
            _ => Reply::ok(b"v"),
        }
    });
    let srv = Server::start(&conf(origin.port, "", "", "proxy_cache_valid 1s;"));
    let srv2 = Server::start(&conf(
        origin.port,
        "",
        "",
        "proxy_cache_valid 1s; proxy_cache_revalidate on;",
    ));
    for (port, path) in [
        (srv.port, "/valid"),
        (srv.port, "/maxage"),
        (srv2.port, "/reval"),
    ] {
        assert_eq!(cache_status(&req(port, "GET", path, "")), "MISS", "{path}");
        wait_for("a hit", Duration::from_secs(10), || {
            cache_status(&req(port, "GET", path, "")) == "HIT"
        });
    }
    std::thread::sleep(Duration::from_millis(2200));
    let e = req(srv.port, "GET", "/valid", "");
    assert_eq!((cache_status(&e), e.text().as_str()), ("EXPIRED", "v"));
    assert_eq!(
        cache_status(&req(srv.port, "GET", "/maxage", "")),
        "EXPIRED"
    );
    let before = origin.count();
    let r = req(srv2.port, "GET", "/reval", "");
    assert_eq!(r.status, 200);
    assert_eq!(cache_status(&r), "REVALIDATED");
    assert_eq!(r.text(), "revalidated body");
    let last = origin.requests().pop().unwrap();
    assert_eq!(origin.count(), before + 1);
    assert_eq!(last.header("If-None-Match"), Some("\"v1\""));
    assert_eq!(
        last.header("If-Modified-Since"),
        Some("Mon, 02 Jan 2023 00:00:00 GMT")
    );
    // The entry's validity was refreshed: a hit again, no new request.
    wait_for("a hit after revalidation", Duration::from_secs(10), || {
        cache_status(&req(srv2.port, "GET", "/reval", "")) == "HIT"
    });
    assert_eq!(origin.count(), before + 1);
}

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

#[test]
fn vary_keeps_variants_apart() {
    let origin = Origin::start(|r| {
        let enc = r.header("Accept-Encoding").unwrap_or("none").to_string();
        Reply::ok(format!("enc={enc}").as_bytes()).header("Vary", "Accept-Encoding")
    });
    let srv = Server::start(&conf(origin.port, "", "", "proxy_cache_valid 10m;"));
    let get = |enc: &str| {
        req(
            srv.port,
            "GET",
            "/v",
            &format!("Accept-Encoding: {enc}\r\n"),
        )
    };
    assert_eq!(cache_status(&get("gzip")), "MISS");
    wait_for("a gzip hit", Duration::from_secs(10), || {
        cache_status(&get("gzip")) == "HIT"
    });
    let b = get("br");
    assert_eq!((cache_status(&b), b.text().as_str()), ("MISS", "enc=br"));
    wait_for("a br hit", Duration::from_secs(10), || {
        let r = get("br");
        cache_status(&r) == "HIT" && r.text() == "enc=br"
    });
    let g = get("gzip");
    assert_eq!((cache_status(&g), g.text().as_str()), ("HIT", "enc=gzip"));
    assert_eq!(origin.count(), 2);
}

#[test]
fn uncacheable_responses_are_not_stored() {
    let origin = Origin::start(|r| match r.target.as_str() {
        "/nostore" => Reply::ok(b"x").header("Cache-Control", "no-store"),
        "/private" => Reply::ok(b"x").header("Cache-Control", "private, max-age=60"),
        "/cookie" => Reply::ok(b"x").header("Set-Cookie", "a=b"),
        "/varystar" => Reply::ok(b"x").header("Vary", "*"),
        "/accel0" => Reply::ok(b"x").header("X-Accel-Expires", "0"),
        "/404" => Reply::ok(b"x").status(404),
        _ => Reply::ok(b"x"),
    });
    let srv = Server::start(&conf(origin.port, "", "", "proxy_cache_valid 200 10m;"));
    for p in [
        "/nostore",
        "/private",
        "/cookie",
        "/varystar",
        "/accel0",
        "/404",
    ] {
        for _ in 0..3 {
            let r = req(srv.port, "GET", p, "");
            assert_eq!(cache_status(&r), "MISS", "{p}");
        }
    }
    assert_eq!(origin.count(), 18);
    assert!(files_under(&srv.prefix.path().join("cache")).is_empty());
    // X-Accel-Expires is not passed to the client.
    assert_eq!(
        req(srv.port, "GET", "/accel0", "").header("X-Accel-Expires"),
        None
    );
}

#[test]
fn bypass_no_cache_and_min_uses() {
    let origin = Origin::start(|r| Reply::ok(r.target.as_bytes()));
    let srv = Server::start(&conf_with(
        origin.port,
        "",
        "",
        "proxy_cache_valid 10m; proxy_cache_bypass $arg_bypass $http_x_bypass; proxy_no_cache $arg_nocache;",
        "location /min { proxy_pass http://127.0.0.1:ORIGIN; proxy_cache one; proxy_cache_valid 10m;\n\
           proxy_cache_min_uses 3; add_header X-Cache $upstream_cache_status always; }",
    ));
    // proxy_no_cache: fetched, not stored.
    assert_eq!(
        cache_status(&req(srv.port, "GET", "/n?nocache=1", "")),
        "MISS"
    );
    assert_eq!(
        cache_status(&req(srv.port, "GET", "/n?nocache=1", "")),
        "MISS"
    );
    // "0" does not bypass; a value does, and the response is stored.
    assert_eq!(
        cache_status(&req(srv.port, "GET", "/b", "X-Bypass: 0\r\n")),
        "MISS"
    );
    wait_for("a hit", Duration::from_secs(10), || {
        cache_status(&req(srv.port, "GET", "/b", "")) == "HIT"
    });
    let n = origin.count();
    let b = req(srv.port, "GET", "/b", "X-Bypass: yes\r\n");
    assert_eq!(cache_status(&b), "BYPASS");
    assert_eq!(origin.count(), n + 1);
    // min_uses 3: two misses not stored, the third stores.
    for _ in 0..3 {
        assert_eq!(cache_status(&req(srv.port, "GET", "/min/x", "")), "MISS");
    }
    wait_for("a hit", Duration::from_secs(10), || {
        cache_status(&req(srv.port, "GET", "/min/x", "")) == "HIT"
    });
    assert_eq!(
        origin
            .requests()
            .iter()
            .filter(|r| r.target == "/min/x")
            .count(),
        3
    );
}

/// NGINX decides "cacheable" on the upstream's header lines, before
/// `proxy_no_cache`, `proxy_cache_min_uses` and the validity rules: a
/// response they keep out of the cache is still served in one range when
/// its origin allows ranges; one its headers make uncacheable is not.
#[test]
fn ranges_on_responses_kept_out_of_the_cache() {
    let body: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
    let b = body.clone();
    let origin = Origin::start(move |r| {
        let reply = Reply::ok(&b).header("Accept-Ranges", "bytes");
        if r.target.contains("cookie") {
            reply.header("Set-Cookie", "a=b")
        } else {
            reply
        }
    });
    let srv = Server::start(&conf_with(
        origin.port,
        "",
        "",
        "proxy_cache_valid 10m; proxy_no_cache $arg_nocache;",
        "location /min { proxy_pass http://127.0.0.1:ORIGIN; proxy_cache one; proxy_cache_valid 10m;\n\
           proxy_cache_min_uses 3; add_header X-Cache $upstream_cache_status always; }\n\
         location /norule { proxy_pass http://127.0.0.1:ORIGIN; proxy_cache one;\n\
           add_header X-Cache $upstream_cache_status always; }",
    ));
    for path in ["/n?nocache=1", "/min/x", "/norule"] {
        let r = req(srv.port, "GET", path, "Range: bytes=10-19\r\n");
        assert_eq!(r.status, 206, "{path}");
        assert_eq!(r.body, &body[10..20], "{path}");
        assert_eq!(
            r.header("content-range"),
            Some("bytes 10-19/1000"),
            "{path}"
        );
        assert_eq!(cache_status(&r), "MISS", "{path}");
    }
    let r = req(
        srv.port,
        "GET",
        "/cookie?nocache=1",
        "Range: bytes=10-19\r\n",
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.body, body);
    assert_eq!(r.header("accept-ranges"), Some("bytes"));
}

#[test]
fn purge_removes_the_entry() {
    let origin = Origin::start(|_| Reply::ok(b"p"));
    let srv = Server::start(&conf_with(
        origin.port,
        "",
        "",
        "proxy_cache_valid 10m; proxy_cache_purge PURGE from 127.0.0.1;",
        "location /closed/ { proxy_pass http://127.0.0.1:ORIGIN; proxy_cache one;\n\
           proxy_cache_purge PURGE from 10.0.0.0/8; }",
    ));
    assert_eq!(cache_status(&req(srv.port, "GET", "/p", "")), "MISS");
    wait_for("a hit", Duration::from_secs(10), || {
        cache_status(&req(srv.port, "GET", "/p", "")) == "HIT"
    });
    let p = req(srv.port, "PURGE", "/p", "");
    assert_eq!(p.status, 200);
    assert!(p.text().contains("Successful purge"), "{}", p.text());
    assert_eq!(req(srv.port, "PURGE", "/p", "").status, 404);
    assert_eq!(cache_status(&req(srv.port, "GET", "/p", "")), "MISS");
    assert_eq!(req(srv.port, "PURGE", "/closed/x", "").status, 403);
}

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

#[test]
fn ranges_and_conditionals_on_a_hit() {
    let body = pattern(200_000, 3);
    let b2 = body.clone();
    let origin = Origin::start(move |_| {
        Reply::ok(&b2)
            .header("Accept-Ranges", "bytes")
            .header("ETag", "\"e1\"")
            .header("Last-Modified", "Mon, 02 Jan 2023 00:00:00 GMT")
    });
    let srv = Server::start(&conf(origin.port, "", "", "proxy_cache_valid 10m;"));
    // The client's Range and validators are not passed upstream on a miss.
    let m = req(
        srv.port,
        "GET",
        "/r",
        "Range: bytes=0-9\r\nIf-None-Match: \"e1\"\r\n",
    );
    assert_eq!(cache_status(&m), "MISS");
    // The not-modified filter runs on a cacheable miss too; the body is
    // still read into the cache.
    assert_eq!(m.status, 304);
    let first = &origin.requests()[0];
    assert_eq!(first.header("Range"), None);
    assert_eq!(first.header("If-None-Match"), None);
    wait_for("a hit", Duration::from_secs(10), || {
        cache_status(&req(srv.port, "GET", "/r", "")) == "HIT"
    });
    let fetched = origin.count();
    let full = req(srv.port, "GET", "/r", "");
    assert_eq!(full.header("Accept-Ranges"), Some("bytes"));
    assert_eq!(
        full.headers.last().map(|(n, _)| n.as_str()),
        Some("Accept-Ranges"),
        "the range filter's own line, last as in NGINX"
    );
    let r = req(srv.port, "GET", "/r", "Range: bytes=100-199\r\n");
    assert_eq!(r.status, 206);
    assert_eq!(r.header("Content-Range"), Some("bytes 100-199/200000"));
    assert_eq!(r.body, &body[100..200]);
    let r = req(srv.port, "GET", "/r", "Range: bytes=-5\r\n");
    assert_eq!(r.body, &body[199_995..]);
    let r = req(srv.port, "GET", "/r", "Range: bytes=0-1,150000-150009\r\n");
    assert_eq!(r.status, 206);
    let ct = r.header("Content-Type").unwrap().to_string();
    assert!(ct.starts_with("multipart/byteranges; boundary="), "{ct}");
    let t = r.body.clone();
    assert!(find(&t, b"Content-Range: bytes 0-1/200000\r\n\r\n").is_some());
    let at = find(&t, b"Content-Range: bytes 150000-150009/200000\r\n\r\n").unwrap();
    let start = at + "Content-Range: bytes 150000-150009/200000\r\n\r\n".len();
    assert_eq!(&t[start..start + 10], &body[150_000..150_010]);
    let r = req(srv.port, "GET", "/r", "Range: bytes=300000-\r\n");
    assert_eq!(r.status, 416);
    assert_eq!(r.header("Content-Range"), Some("bytes */200000"));
    let r = req(srv.port, "GET", "/r", "If-None-Match: \"e1\"\r\n");
    assert_eq!((r.status, r.body.len()), (304, 0));
    assert_eq!(r.header("ETag"), Some("\"e1\""));
    let r = req(
        srv.port,
        "GET",
        "/r",
        "If-Modified-Since: Mon, 02 Jan 2023 00:00:00 GMT\r\n",
    );
    assert_eq!(r.status, 304);
    // If-Range with a stale validator: the whole body.
    let r = req(
        srv.port,
        "GET",
        "/r",
        "Range: bytes=0-9\r\nIf-Range: \"other\"\r\n",
    );
    assert_eq!((r.status, r.body.len()), (200, 200_000));
    let r = req(
        srv.port,
        "GET",
        "/r",
        "Range: bytes=0-9\r\nIf-Range: \"e1\"\r\n",
    );
    assert_eq!((r.status, r.body.as_slice()), (206, &body[..10]));
    assert_eq!(origin.count(), fetched, "every answer from the cache");
}

/// The issue's configuration: three zones, `split_clients` choosing one
/// per URI, each zone's I/O on its own pool.
#[test]
fn split_clients_spreads_entries_over_three_disks() {
    let origin = Origin::start(|r| Reply::ok(r.target.as_bytes()));
    let conf = format!(
        "daemon off;\nworker_processes 2;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\n\
         thread_pool pool_1 threads=16; thread_pool pool_2 threads=16; thread_pool pool_3 threads=16;\n\
         events {{ worker_connections 512; }}\n\
         http {{\n  access_log {{PREFIX}}/logs/access.log;\n  \
           upstream backend {{ server 127.0.0.1:{}; }}\n  \
           proxy_cache_path {{PREFIX}}/mnt/disk1 levels=1:2 keys_zone=cache_1:256m max_size=1024G use_temp_path=off;\n  \
           proxy_cache_path {{PREFIX}}/mnt/disk2 levels=1:2 keys_zone=cache_2:256m max_size=1024G use_temp_path=off;\n  \
           proxy_cache_path {{PREFIX}}/mnt/disk3 levels=1:2 keys_zone=cache_3:256m max_size=1024G use_temp_path=off;\n  \
           split_clients $request_uri $disk {{ 33.3% 1; 33.3% 2; * 3; }}\n  \
           proxy_cache_valid 10m;\n  \
           server {{ listen 127.0.0.1:{{PORT}};\n    \
             location / {{ proxy_pass http://backend; proxy_cache_key $request_uri;\n      \
               proxy_cache cache_$disk; aio threads=pool_$disk; sendfile on;\n      \
               add_header X-Disk $disk always; add_header X-Cache $upstream_cache_status always; }} }}\n}}\n",
        origin.port
    );
    let srv = Server::start(&conf);
    let mnt = srv.prefix.path().join("mnt");
    let mut per_disk = [0usize; 3];
    for i in 0..30 {
        let uri = format!("/obj/{i}");
        let r = req(srv.port, "GET", &uri, "");
        assert_eq!((r.status, cache_status(&r)), (200, "MISS"));
        let disk: usize = r.header("X-Disk").unwrap().parse().unwrap();
        per_disk[disk - 1] += 1;
        for d in 1..=3 {
            let p = entry_path(&mnt.join(format!("disk{d}")), &uri);
            if d == disk {
                let deadline = Instant::now() + Duration::from_secs(10);
                while !p.exists() {
                    assert!(
                        Instant::now() < deadline,
                        "{uri}: no {} in disk{d}: {:?}\n{}",
                        p.display(),
                        files_under(&mnt),
                        srv.read("logs/error.log")
                    );
                    std::thread::sleep(Duration::from_millis(20));
                }
            } else {
                assert!(!p.exists(), "{uri} also in disk{d}");
            }
        }
        let h = req(srv.port, "GET", &uri, "");
        assert_eq!((cache_status(&h), h.text()), ("HIT", uri.clone()));
    }
    assert!(
        per_disk.iter().all(|&n| n > 0),
        "every disk used: {per_disk:?}"
    );
    assert_eq!(origin.count(), 30);
}

/// An origin serving `/k/N` as 120 KB of pattern `N`: even keys at once
/// (complete before a kill), odd ones crawling.
fn half_crawling_origin() -> Origin {
    Origin::start(|r| {
        let i: usize = r.target.trim_start_matches("/k/").parse().unwrap_or(0);
        let body = pattern(120_000, i);
        if i.is_multiple_of(2) {
            Reply::ok(&body)
        } else {
            Reply::ok(&body).paced(8192, Duration::from_millis(40))
        }
    })
}

/// kill -9 during many fills from a slow origin, then a restart on the
/// same cache: every key served is byte-exact (or fetched again), and no
/// temp file outlives the loader.
#[test]
fn crash_during_fills_leaves_no_corrupt_entry() {
    const N: usize = 24;
    let origin = half_crawling_origin();
    let text = conf(
        origin.port,
        " use_temp_path=off",
        "",
        "proxy_cache_valid 10m;",
    );
    let prefix = TempDir::new("pcache-crash");
    let mut srv = Server::start_in(prefix, &text, &[]);
    let port = srv.port;
    let clients: Vec<_> = (0..N)
        .map(|i| {
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
                let _ = s.write_all(
                    format!("GET /k/{i} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                        .as_bytes(),
                );
                read_all(&mut s)
            })
        })
        .collect();
    wait_for("every fill under way", Duration::from_secs(20), || {
        origin.count() >= N
    });
    std::thread::sleep(Duration::from_millis(400));
    let temps = files_under(&srv.prefix.path().join("cache"))
        .iter()
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .count();
    srv.child.kill().unwrap();
    srv.child.wait().unwrap();
    for c in clients {
        let _ = c.join();
    }
    assert!(temps > 0, "the kill came during fills");
    // Restart on the same prefix (and cache).
    let prefix = TempDir(srv.prefix.0.clone());
    std::mem::forget(std::mem::replace(&mut srv.prefix, TempDir(PathBuf::new())));
    drop(srv);
    let srv = Server::start_in(prefix, &text, &[]);
    let before = origin.count();
    let mut hits = 0;
    for i in 0..N {
        let r = req(srv.port, "GET", &format!("/k/{i}"), "");
        assert_eq!(r.status, 200, "/k/{i}");
        assert_eq!(
            r.body,
            pattern(120_000, i),
            "/k/{i} byte-exact ({})",
            cache_status(&r)
        );
        if cache_status(&r) == "HIT" {
            hits += 1;
        }
    }
    assert!(hits > 0, "some entries survived the crash");
    assert_eq!(
        origin.count() - before,
        N - hits,
        "the others fetched again"
    );
    wait_for(
        "the loader to remove temp files",
        Duration::from_secs(20),
        || {
            files_under(&srv.prefix.path().join("cache"))
                .iter()
                .all(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        },
    );
}

/// A cache on a tiny tmpfs: a body larger than it still reaches the
/// client whole, nothing is stored, one line is logged.
#[test]
fn enospc_while_filling_still_answers_in_full() {
    let prefix = TempDir::new("pcache-enospc");
    let mnt = prefix.path().join("small");
    let Some(_tmpfs) = Tmpfs::mount(&mnt, "256k") else {
        eprintln!("skipping: cannot mount a tmpfs (needs root)");
        return;
    };
    let body = pattern(1_000_000, 9);
    let b2 = body.clone();
    let origin = Origin::start(move |_| Reply::ok(&b2));
    let text = conf(origin.port, "", "", "proxy_cache_valid 10m;")
        .replace("{PREFIX}/cache levels", "{PREFIX}/small levels")
        .replace("keys_zone=one:1m", "keys_zone=one:1m use_temp_path=off");
    let srv = Server::start_in(prefix, &text, &[]);
    for _ in 0..2 {
        let r = req(srv.port, "GET", "/big", "");
        assert_eq!(r.status, 200);
        assert_eq!(r.body.len(), body.len());
        assert!(r.body == body, "the full, correct body");
        assert_eq!(cache_status(&r), "MISS");
    }
    assert_eq!(origin.count(), 2, "nothing cached");
    wait_for("two log lines", Duration::from_secs(10), || {
        srv.read("logs/error.log")
            .matches("No space left on device")
            .count()
            >= 2
    });
    std::thread::sleep(Duration::from_millis(300));
    let log = srv.read("logs/error.log");
    assert_eq!(
        log.matches("No space left on device").count(),
        2,
        "one line per fill: {log}"
    );
    wait_for("the temp files removed", Duration::from_secs(10), || {
        files_under(&mnt).is_empty()
    });
}

/// Sum of the `/metrics` samples named `name` whose labels include
/// `labels` (0 when there are none).
fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    Metrics(text.to_string()).get(name, labels).unwrap_or(0.0)
}

/// Three zones on three "disks", each with its own thread pool, chosen
/// by `split_clients`, before `origin`.
fn three_disk_conf(origin: u16) -> String {
    format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\n\
         thread_pool pool_1 threads=4; thread_pool pool_2 threads=4; thread_pool pool_3 threads=4;\n\
         events {{ worker_connections 512; }}\n\
         http {{\n  access_log {{PREFIX}}/logs/access.log;\n  \
           proxy_cache_path {{PREFIX}}/mnt/disk1 levels=1:2 keys_zone=cache_1:16m use_temp_path=off;\n  \
           proxy_cache_path {{PREFIX}}/mnt/disk2 levels=1:2 keys_zone=cache_2:16m use_temp_path=off;\n  \
           proxy_cache_path {{PREFIX}}/mnt/disk3 levels=1:2 keys_zone=cache_3:16m use_temp_path=off;\n  \
           split_clients $request_uri $disk {{ 33.3% 1; 33.3% 2; * 3; }}\n  \
           proxy_cache_valid 10m;\n  \
           server {{ listen 127.0.0.1:{{PORT}};\n    \
             location = /metrics {{ porter_metrics; }}\n    \
             location / {{ proxy_pass http://127.0.0.1:{}; proxy_cache_key $request_uri;\n      \
               proxy_cache cache_$disk; aio threads=pool_$disk; sendfile on;\n      \
               add_header X-Disk $disk always; add_header X-Cache $upstream_cache_status always; }} }}\n}}\n",
        origin
    )
}

/// Nothing blocks: under a load of concurrent fills and hits over the
/// issue's three zones, every zone's file work runs on that zone's pool
/// (`aio threads=pool_$disk`), and the event loop's iterations stay
/// short (the blocked-loop histogram of `/metrics`).
#[test]
fn cache_io_runs_on_each_zones_pool_and_never_blocks_the_loop() {
    let origin = Origin::start(|r| {
        let i: usize = r.target.rsplit('/').next().unwrap().parse().unwrap_or(0);
        Reply::ok(&pattern(300_000, i)).paced(64 * 1024, Duration::from_millis(2))
    });
    let conf = three_disk_conf(origin.port);
    let srv = Server::start(&conf);
    let port = srv.port;
    let before = get(port, "/metrics").text();
    // Six clients, each filling ten keys then reading them back.
    let threads: Vec<_> = (0..6)
        .map(|t| {
            std::thread::spawn(move || {
                let mut per_disk = [0usize; 3];
                for k in 0..10 {
                    let i = t * 10 + k;
                    let r = req(port, "GET", &format!("/o/{i}"), "");
                    assert_eq!(r.body, pattern(300_000, i), "/o/{i}");
                    let d: usize = r.header("X-Disk").unwrap().parse().unwrap();
                    per_disk[d - 1] += 1;
                }
                for k in 0..10 {
                    let i = t * 10 + k;
                    let r = req(port, "GET", &format!("/o/{i}"), "");
                    assert_eq!((cache_status(&r), r.body.len()), ("HIT", 300_000), "/o/{i}");
                }
                per_disk
            })
        })
        .collect();
    let mut per_disk = [0usize; 3];
    for t in threads {
        for (d, n) in t.join().unwrap().iter().enumerate() {
            per_disk[d] += n;
        }
    }
    let after = get(port, "/metrics").text();
    for (d, &n) in per_disk.iter().enumerate() {
        let pool = format!("pool_{}", d + 1);
        let pool = [("pool", pool.as_str())];
        let tasks = metric(&after, "porter_pool_tasks_total", &pool)
            - metric(&before, "porter_pool_tasks_total", &pool);
        // A fill is at least create, header write, body writes, final
        // header write and rename: each on the zone's own pool.
        assert!(
            tasks >= (5 * n) as f64,
            "pool_{} ran {tasks} tasks for {n} fills",
            d + 1
        );
    }
    assert!(per_disk.iter().all(|&n| n > 0), "{per_disk:?}");
    // The loop's iterations: a blocked one would take a disk's time.
    let count = metric(&after, "porter_loop_busy_seconds_count", &[])
        - metric(&before, "porter_loop_busy_seconds_count", &[]);
    let long = count
        - (metric(
            &after,
            "porter_loop_busy_seconds_bucket",
            &[("le", "0.025")],
        ) - metric(
            &before,
            "porter_loop_busy_seconds_bucket",
            &[("le", "0.025")],
        ));
    assert!(count > 100.0, "{count} loop iterations");
    assert!(
        long <= count * 0.01,
        "{long} of {count} loop iterations took over 25 ms"
    );
}

/// A client that leaves mid-body does not end the fill (NGINX's
/// `proxy_buffering on`): the entry completes and the next request hits.
/// With `proxy_buffering off` nothing is stored, as in NGINX.
#[test]
fn fill_outlives_a_client_that_leaves() {
    let origin = Origin::start(|r| {
        let i: usize = r.target.rsplit('/').next().unwrap().parse().unwrap_or(0);
        Reply::ok(&pattern(400_000, i)).paced(32 * 1024, Duration::from_millis(30))
    });
    let srv = Server::start(&conf_with(
        origin.port,
        "",
        "",
        // The lock makes the next request wait for the fill the left
        // client started.
        "proxy_cache_valid 10m; proxy_cache_lock on; proxy_cache_lock_timeout 30s; proxy_cache_lock_age 30s;",
        "location /nobuf/ { proxy_pass http://127.0.0.1:ORIGIN; proxy_cache one; proxy_cache_valid 10m;\n\
           proxy_buffering off; add_header X-Cache $upstream_cache_status always; }",
    ));
    for (path, kept) in [("/gone/1", true), ("/nobuf/2", false)] {
        let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
            .unwrap();
        let mut first = [0u8; 4096];
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        assert!(s.read(&mut first).unwrap() > 0);
        drop(s);
        let i: usize = path.rsplit('/').next().unwrap().parse().unwrap();
        if kept {
            wait_for(
                "the entry the left client started",
                Duration::from_secs(20),
                || {
                    let r = req(srv.port, "GET", path, "");
                    cache_status(&r) == "HIT" && r.body == pattern(400_000, i)
                },
            );
            assert_eq!(
                origin
                    .requests()
                    .iter()
                    .filter(|r| r.target == path)
                    .count(),
                1
            );
        } else {
            for _ in 0..2 {
                let r = req(srv.port, "GET", path, "");
                assert_eq!(cache_status(&r), "MISS", "{path}: not stored unbuffered");
                assert_eq!(r.body, pattern(400_000, i));
            }
        }
    }
    wait_for("no temp file left", Duration::from_secs(20), || {
        files_under(&srv.prefix.path().join("cache"))
            .iter()
            .all(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
    });
}

/// Debian's nginx as a caching proxy in front of `origin`, for the
/// differential test.
fn nginx_cache(origin: u16) -> Option<Nginx> {
    Nginx::start(&format!(
        "  proxy_cache_path {{PREFIX}}/cache levels=1:2 keys_zone=one:1m;\n  \
           server {{ listen 127.0.0.1:{{PORT}}; server_name localhost;\n    \
             location / {{ proxy_pass http://127.0.0.1:{origin}; proxy_cache one;\n      \
               proxy_cache_valid 10m; add_header X-Cache $upstream_cache_status always; }} }}"
    ))
}

/// What must match: status, cache status, the header names in order
/// (less Server and Date), the validators and ranges, and the body (a
/// multipart boundary written as `B`).
type Comparable = (u16, String, Vec<String>, Vec<(String, String)>, Vec<u8>);

fn comparable(r: &Resp) -> Comparable {
    let names = r
        .headers
        .iter()
        .map(|(n, _)| n.to_ascii_lowercase())
        .filter(|n| n != "server" && n != "date")
        .collect();
    let values = [
        "etag",
        "last-modified",
        "content-range",
        "accept-ranges",
        "content-length",
    ]
    .iter()
    .filter_map(|n| r.header(n).map(|v| (n.to_string(), v.to_string())))
    .filter(|_| r.status < 400)
    .collect();
    let mut body = if r.status < 400 {
        r.body.clone()
    } else {
        Vec::new()
    };
    if let Some(b) = r
        .header("Content-Type")
        .and_then(|ct| ct.split_once("boundary="))
        .map(|(_, b)| b.to_string())
    {
        body = String::from_utf8_lossy(&body).replace(&b, "B").into_bytes();
    }
    (r.status, cache_status(r).to_string(), names, values, body)
}

/// The same requests through porter and through Debian's nginx, each with
/// its own cache in front of one origin: same statuses, cache statuses,
/// header order, validators, ranges and bodies.
#[test]
fn behaves_as_nginx() {
    let origin = Origin::start(|r| {
        let mut rep = Reply::ok(&pattern(100_000, 4))
            .header("ETag", "\"d1\"")
            .header("Last-Modified", "Mon, 02 Jan 2023 00:00:00 GMT");
        if r.target.starts_with("/ar") {
            rep = rep.header("Accept-Ranges", "bytes");
        }
        if r.target.starts_with("/nc") {
            rep = rep.header("Cache-Control", "no-store");
        }
        rep
    });
    let Some(nginx) = nginx_cache(origin.port) else {
        eprintln!("skipping: /usr/sbin/nginx not installed");
        return;
    };
    let porter = Server::start(&conf(origin.port, "", "", "proxy_cache_valid 10m;"));
    let steps: &[(&str, &str, &str)] = &[
        ("GET", "/a", ""),
        ("GET", "/a", ""),
        ("GET", "/a", "Range: bytes=0-4\r\n"),
        ("GET", "/a", "If-None-Match: \"d1\"\r\n"),
        (
            "GET",
            "/a",
            "If-Modified-Since: Mon, 02 Jan 2023 00:00:00 GMT\r\n",
        ),
        ("GET", "/ar", ""),
        ("GET", "/ar", ""),
        ("GET", "/ar", "Range: bytes=10-19\r\n"),
        ("GET", "/ar", "Range: bytes=0-1,50000-50009\r\n"),
        ("GET", "/ar", "Range: bytes=200000-\r\n"),
        ("GET", "/ar", "Range: bytes=0-9\r\nIf-Range: \"d1\"\r\n"),
        ("GET", "/ar", "Range: bytes=0-9\r\nIf-Range: \"zz\"\r\n"),
        // Ranges on a miss: one range is served from the stream.
        ("GET", "/ar2", "Range: bytes=10-19\r\n"),
        ("GET", "/ar2", ""),
        ("GET", "/ar3", "Range: bytes=0-1,5-6\r\n"),
        ("GET", "/ar4", "Range: bytes=0-4\r\nIf-Range: \"zz\"\r\n"),
        ("GET", "/ar5", "Range: bytes=200000-\r\n"),
        ("HEAD", "/h", ""),
        ("GET", "/h", ""),
        ("HEAD", "/h", ""),
        ("GET", "/b", "If-None-Match: \"d1\"\r\n"),
        ("GET", "/nc", ""),
        ("GET", "/nc", ""),
    ];
    for (i, (method, path, headers)) in steps.iter().enumerate() {
        let n = req(nginx.port, method, path, headers);
        let p = req(porter.port, method, path, headers);
        let (pc, nc) = (comparable(&p), comparable(&n));
        assert_eq!(
            (&pc.0, &pc.1, &pc.2, &pc.3),
            (&nc.0, &nc.1, &nc.2, &nc.3),
            "step {i}: {method} {path} {headers:?}\nporter: {:?}\nnginx: {:?}",
            p.headers,
            n.headers
        );
        assert!(
            pc.4 == nc.4,
            "step {i}: {method} {path} {headers:?}: bodies differ"
        );
        // Both finish their fills before the next step.
        std::thread::sleep(Duration::from_millis(100));
    }
    let upstream: Vec<(String, String)> = origin
        .requests()
        .iter()
        .map(|r| (r.method.clone(), r.target.clone()))
        .collect();
    assert!(upstream.iter().all(|(m, _)| m == "GET"), "{upstream:?}");
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

fn cache_conf(origin: u16) -> String {
    format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n  proxy_cache_path {{PREFIX}}/cache levels=1:2 keys_zone=one:1m;\n  \
           server {{\n    listen 127.0.0.1:{{PORT}};\n    server_name localhost;\n    \
             location / {{\n      proxy_pass http://127.0.0.1:{origin};\n      proxy_cache one;\n      \
               proxy_cache_valid 200 404 10m;\n      \
               add_header X-Cache $upstream_cache_status always;\n    }}\n    \
             location = /two {{ return 203 two; }}\n  }}\n}}\n"
    )
}

#[test]
fn ambiguous_upstream_framing_is_a_502_and_never_cached() {
    let cases: [(&str, &[u8], &str); 3] = [
        (
            "/dup",
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
            "upstream sent duplicate header line: \"Content-Length: 6\", previous value: \"Content-Length: 5\" while reading response header from upstream",
        ),
        (
            "/xchunked",
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: xchunked\r\n\r\nhello",
            "upstream sent \"Content-Length\" and \"Transfer-Encoding\" headers at the same time while reading response header from upstream",
        ),
        (
            "/gzip",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            "upstream sent unknown \"Transfer-Encoding\": \"gzip, chunked\" while reading response header from upstream",
        ),
    ];
    let origin = Origin::start(move |req| {
        let raw = cases
            .iter()
            .find(|c| c.0 == req.target)
            .map_or(&b""[..], |c| c.1);
        Reply::ok(b"").framing(Framing::Raw(raw.to_vec()))
    });
    let srv = Server::start(&cache_conf(origin.port));
    for (path, _, log) in cases {
        for round in 0..2 {
            let r = get(srv.port, path);
            assert_eq!(r.status, 502, "{path} round {round}");
            assert_ne!(r.header("X-Cache"), Some("HIT"), "{path}");
        }
        srv.wait_log("logs/error.log", log, Duration::from_secs(3));
    }
    assert_eq!(origin.count(), 6, "every request went to the origin");
}

#[test]
fn vary_star_anywhere_is_never_cached() {
    let origin = Origin::start(|req| {
        let r = Reply::ok(b"v").header("Cache-Control", "max-age=600");
        match req.target.as_str() {
            "/list" => r.header("Vary", "Accept-Encoding, *"),
            "/second" => r.header("Vary", "Accept-Encoding").header("Vary", "*"),
            _ => r.header("Vary", "Accept-Encoding"),
        }
    });
    let srv = Server::start(&cache_conf(origin.port));
    for path in ["/list", "/second"] {
        for _ in 0..2 {
            let r = get(srv.port, path);
            assert_eq!(r.status, 200);
            assert_ne!(r.header("X-Cache"), Some("HIT"), "{path}");
        }
    }
    assert_eq!(origin.count(), 4);
    // The control: a plain Vary is cached.
    get(srv.port, "/plain");
    assert_eq!(get(srv.port, "/plain").header("X-Cache"), Some("HIT"));
}

#[test]
fn proxied_error_keeps_its_last_modified_and_reason() {
    const LM: &str = "Tue, 01 Jan 2030 00:00:00 GMT";
    let origin = Origin::start(|req| {
        match req.target.as_str() {
        "/gone" => Reply::ok(b"no").status(404).header("Last-Modified", LM),
        "/moved" => Reply::ok(b"")
            .status(301)
            .header("Location", "/x")
            .header("Last-Modified", LM),
        _ => Reply::ok(b"").framing(Framing::Raw(
            format!("HTTP/1.1 203 Non-Authoritative Information\r\nLast-Modified: {LM}\r\nContent-Length: 2\r\n\r\nok")
                .into_bytes(),
        )),
    }
    });
    let srv = Server::start(&cache_conf(origin.port));
    for path in ["/gone", "/moved", "/info"] {
        let r = get(srv.port, path);
        assert_eq!(
            r.header("Last-Modified"),
            Some(LM),
            "{path}: {:?}",
            r.headers
        );
    }
    let r = get(srv.port, "/info");
    assert_eq!(r.status_line, "HTTP/1.1 203 Non-Authoritative Information");
    // porter's own 203 has a reason phrase too (NGINX sends "203 ").
    assert_eq!(
        get(srv.port, "/two").status_line,
        "HTTP/1.1 203 Non-Authoritative Information"
    );
}

/// Debian's nginx as the reference for the Last-Modified and status-line
/// bytes of a proxied 404 and 203.
#[test]
fn nginx_passes_last_modified_and_reason_as_porter_does() {
    const LM: &str = "Tue, 01 Jan 2030 00:00:00 GMT";
    let origin = Origin::start(|req| {
        match req.target.as_str() {
        "/gone" => Reply::ok(b"no").status(404).header("Last-Modified", LM),
        _ => Reply::ok(b"").framing(Framing::Raw(
            format!("HTTP/1.1 203 Non-Authoritative Information\r\nLast-Modified: {LM}\r\nContent-Length: 2\r\n\r\nok")
                .into_bytes(),
        )),
    }
    });
    let Some(nginx) = Nginx::start(&format!(
        "server {{ listen 127.0.0.1:{{PORT}}; location / {{ proxy_pass http://127.0.0.1:{}; }} }}",
        origin.port
    )) else {
        eprintln!("skipped: nginx is not installed");
        return;
    };
    let srv = Server::start(&cache_conf(origin.port));
    for path in ["/gone", "/info"] {
        let n = get(nginx.port, path);
        let p = get(srv.port, path);
        assert_eq!(n.header("Last-Modified"), Some(LM), "nginx {path}");
        assert_eq!(
            p.header("Last-Modified"),
            n.header("Last-Modified"),
            "{path}"
        );
        assert_eq!(p.status_line, n.status_line, "{path}");
    }
}
