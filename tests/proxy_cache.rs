//! `proxy_cache` over real sockets, the basics: porter between a test
//! client and an in-test origin (threads speaking HTTP/1.1 on loopback)
//! that counts what it is asked. A MISS then HITs from the entry file,
//! HEAD fetched as GET, validity (`proxy_cache_valid`, `Cache-Control`)
//! and revalidation, `Vary`, what is never stored, `proxy_cache_bypass`,
//! `proxy_no_cache`, `proxy_cache_min_uses`, a zone named by a variable,
//! and the same requests beside Debian's nginx. Every answer's
//! `$upstream_cache_status` comes back in an `X-Cache` header (`add_header
//! … always`), so each test reads the status NGINX would give; the
//! helpers are `tests/common/cache.rs`.
//!
//! The rest of the cache, by feature: `proxy_cache_lock.rs`,
//! `proxy_cache_stale.rs`, `proxy_cache_purge.rs`,
//! `proxy_cache_open_entries.rs`, `proxy_cache_ranges.rs`,
//! `proxy_cache_headers.rs`, `proxy_cache_fill.rs`, `proxy_cache_disks.rs`,
//! `proxy_cache_hit_head.rs`, `proxy_cache_integrity.rs`,
//! `proxy_cache_health.rs`, `proxy_cache_store.rs` (the store as a
//! library), `proxy_cache_zone_owner.rs`.

use std::time::Duration;

use crate::common::beside::{self, Both};
use crate::common::cache::*;
use crate::common::origin::*;
use crate::common::*;

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

#[test]
fn proxy_cache_variable_rendering_empty_proxies_without_caching() {
    let origin = Origin::start(|_| Reply::ok(b"up").header("Cache-Control", "max-age=60"));
    let b = Both::start(
        "proxy_cache_path {PREFIX}/cache keys_zone=z:1m;",
        "location / { proxy_pass http://127.0.0.1:{ORIGIN}; proxy_cache $arg_zone; \
         add_header X-Cache $upstream_cache_status; }",
        origin.port,
    );
    for (who, port) in b.ports() {
        let before = origin.count();
        for _ in 0..2 {
            let r = beside::get_h(port, "/a", "");
            assert_eq!((r.status, r.text().as_str()), (200, "up"), "{who}");
            assert_eq!(r.header("x-cache"), None, "{who}");
        }
        assert_eq!(origin.count() - before, 2, "{who}: not cached");
        // Named: cached.
        let r = beside::get_h(port, "/b?zone=z", "");
        assert_eq!(r.header("x-cache"), Some("MISS"), "{who}");
        let r = beside::get_h(port, "/b?zone=z", "");
        assert_eq!(r.header("x-cache"), Some("HIT"), "{who}");
    }
}

#[test]
fn cached_201_is_not_revalidated() {
    let origin = Origin::start(|_| {
        Reply::ok(b"made")
            .status(201)
            .header("ETag", "\"e1\"")
            .header("Last-Modified", "Sun, 13 Sep 2020 12:26:40 GMT")
    });
    let b = Both::start(
        "proxy_cache_path {PREFIX}/cache keys_zone=z:1m;",
        "location / { proxy_pass http://127.0.0.1:{ORIGIN}; proxy_cache z; \
         proxy_cache_valid 201 1s; proxy_cache_revalidate on; }",
        origin.port,
    );
    for (who, port) in b.ports() {
        let path = format!("/{who}");
        assert_eq!(beside::get_h(port, &path, "").status, 201, "{who}");
        std::thread::sleep(Duration::from_millis(2100));
        assert_eq!(beside::get_h(port, &path, "").status, 201, "{who}");
        let reqs: Vec<Req> = origin
            .requests()
            .into_iter()
            .filter(|r| r.target == path)
            .collect();
        assert_eq!(reqs.len(), 2, "{who}");
        assert_eq!(reqs[1].header("if-none-match"), None, "{who}");
        assert_eq!(reqs[1].header("if-modified-since"), None, "{who}");
    }
}
