//! Ranges and conditional requests on cached answers: byte ranges,
//! suffix and multipart ranges, unsatisfiable ones, `If-None-Match`,
//! `If-Range` on a HIT; and a response kept out of the cache (by
//! `proxy_no_cache`, `proxy_cache_min_uses` or its headers) answered in
//! one range only when NGINX would. porter before an in-test origin
//! (`tests/common/cache.rs`).

use std::time::Duration;

use crate::common::cache::*;
use crate::common::origin::*;
use crate::common::*;

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
