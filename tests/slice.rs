//! NGINX's slice module on the real binary: `slice` with `$slice_range`
//! through `proxy_cache` (the CDN config of
//! `tests/configs/own-slice-cache`), an in-test origin that serves ranges,
//! and the same requests to Debian's nginx where it is installed.
//!
//! Run: `cargo test --release --test area_filters slice::`.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use crate::common::origin::{pattern, Origin, Reply};
use crate::common::{one_worker_conf, Nginx, Server};

/// The slice size the tests configure.
const SLICE: usize = 64 * 1024;
/// The object's length: three whole slices and a bit.
const LEN: usize = 3 * SLICE + 1234;
const ETAG: &str = "\"v1\"";
const LAST_MODIFIED: &str = "Sun, 13 Sep 2020 12:26:40 GMT";

fn object() -> Vec<u8> {
    pattern(LEN, 3)
}

/// An origin serving [`object`] in ranges with an ETag; `etag_of(start)`
/// may give a later slice another.
fn origin_with(etag_of: fn(u64) -> &'static str) -> Origin {
    let body = object();
    Origin::start(move |r| {
        let start = r
            .header("range")
            .and_then(|v| v.strip_prefix("bytes="))
            .and_then(|v| v.split('-').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut reply = Reply::range_of(&body, r.header("range"));
        reply.headers.retain(|(n, _)| n != "Content-Type");
        reply
            .header("Content-Type", "video/mp4")
            .header("ETag", etag_of(start))
            .header("Last-Modified", LAST_MODIFIED)
    })
}

fn origin() -> Origin {
    origin_with(|_| ETAG)
}

/// The `http { }` body: the CDN location of the corpus config, with
/// `slice SIZE` (`0`: off).
fn http_body(origin: u16, slice: &str) -> String {
    format!(
        "proxy_cache_path {{PREFIX}}/cache levels=1:2 keys_zone=slices:10m;\n\
         server {{\n  listen 127.0.0.1:{{PORT}};\n  server_name localhost;\n\
           location / {{\n    slice {slice};\n    proxy_cache slices;\n\
             proxy_cache_key $uri$is_args$args$slice_range;\n\
             proxy_set_header Range $slice_range;\n\
             proxy_cache_valid 200 206 1h;\n\
             proxy_pass http://127.0.0.1:{origin};\n\
             add_header X-Cache-Status $upstream_cache_status;\n  }}\n\
           location /plain/ {{\n    proxy_pass http://127.0.0.1:{origin};\n\
             add_header X-Slice-Range \"[$slice_range]\";\n  }}\n}}"
    )
}

fn start(origin: u16, slice: &str) -> Server {
    Server::start(&one_worker_conf(&http_body(origin, slice)))
}

/// A response read to the connection's end: status, header lines, body.
struct Got {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Got {
    fn header(&self, n: &str) -> Option<&str> {
        common::header_in(&self.headers, n)
    }
    fn length(&self) -> Option<usize> {
        self.header("content-length").and_then(|v| v.parse().ok())
    }
}

/// Sends `METHOD path` with `extra` header lines and `Connection: close`,
/// reading until the server closes (so a body cut short shows).
fn send(port: u16, method: &str, path: &str, extra: &[(&str, &str)]) -> Got {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for (n, v) in extra {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut all = Vec::new();
    let _ = s.read_to_end(&mut all);
    let Some(end) = common::find(&all, b"\r\n\r\n") else {
        return Got {
            status: 0,
            headers: Vec::new(),
            body: all,
        };
    };
    let head = String::from_utf8_lossy(&all[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.to_string(), v.trim().to_string()))
        .collect();
    Got {
        status,
        headers,
        body: all[end + 4..].to_vec(),
    }
}

fn get(port: u16, path: &str, extra: &[(&str, &str)]) -> Got {
    send(port, "GET", path, extra)
}

/// The `Range` values the origin was sent, in order.
fn ranges_seen(o: &Origin) -> Vec<String> {
    o.requests()
        .iter()
        .map(|r| r.header("range").unwrap_or("-").to_string())
        .collect()
}

/// `bytes=S-E` of slice `n`.
fn slice_range(n: usize) -> String {
    format!("bytes={}-{}", n * SLICE, (n + 1) * SLICE - 1)
}

fn files_under(dir: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .map(|e| {
            let p = e.path();
            if p.is_dir() {
                files_under(&p)
            } else {
                1
            }
        })
        .sum()
}

#[test]
fn whole_object_in_slices_then_from_the_cache() {
    let o = origin();
    let srv = start(o.port, "64k");
    let r = get(srv.port, "/v.mp4", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.length(), Some(LEN));
    assert!(r.body == object(), "body differs ({} bytes)", r.body.len());
    assert_eq!(r.header("content-range"), None);
    assert_eq!(r.header("accept-ranges"), Some("bytes"));
    assert_eq!(r.header("etag"), Some(ETAG));
    assert_eq!(r.header("last-modified"), Some(LAST_MODIFIED));
    assert_eq!(r.header("x-cache-status"), Some("MISS"));
    assert_eq!(ranges_seen(&o), (0..4).map(slice_range).collect::<Vec<_>>());
    // One entry per slice.
    let cache = srv.prefix.path().join("cache");
    let mut n = 0;
    for _ in 0..100 {
        n = files_under(&cache);
        if n == 4 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(n, 4, "cache entries");
    // Again: every slice from the cache, the origin not asked.
    let r = get(srv.port, "/v.mp4", &[]);
    assert_eq!(r.status, 200);
    assert!(r.body == object());
    assert_eq!(r.header("x-cache-status"), Some("HIT"));
    assert_eq!(o.count(), 4);
    // A range of cached slices too.
    let r = get(srv.port, "/v.mp4", &[("Range", "bytes=60000-140000")]);
    assert_eq!(r.status, 206);
    assert!(r.body == object()[60000..=140000]);
    assert_eq!(o.count(), 4);
}

#[test]
fn ranges_are_cut_from_the_slices_that_cover_them() {
    let o = origin();
    let srv = start(o.port, "64k");
    let obj = object();
    let cases: &[(&str, usize, usize)] = &[
        ("bytes=100-199", 100, 199),
        ("bytes=65500-70000", 65500, 70000),
        ("bytes=140000-", 140000, LEN - 1),
        ("bytes=-500", LEN - 500, LEN - 1),
        ("bytes=0-0", 0, 0),
    ];
    for &(range, a, b) in cases {
        let r = get(srv.port, "/v.mp4", &[("Range", range)]);
        assert_eq!(r.status, 206, "{range}");
        assert_eq!(
            r.header("content-range"),
            Some(format!("bytes {a}-{b}/{LEN}").as_str()),
            "{range}"
        );
        assert_eq!(r.length(), Some(b - a + 1), "{range}");
        assert!(r.body == obj[a..=b], "{range}: body differs");
    }
    // The first slice fetched holds the range's first byte; a suffix
    // range starts at the first slice (NGINX's rule), then jumps to the
    // last one.
    assert_eq!(
        ranges_seen(&o),
        vec![
            slice_range(0),
            slice_range(1),
            slice_range(2),
            slice_range(3),
            // The suffix: slice 0 (cached), then slice 3 (cached).
        ]
    );
    // A fresh object (other args, other keys): a range in slice 2 asks
    // for slice 2 only.
    let before = o.count();
    let r = get(srv.port, "/v.mp4?x=1", &[("Range", "bytes=140000-140009")]);
    assert_eq!(r.status, 206);
    assert!(r.body == obj[140000..=140009]);
    assert_eq!(ranges_seen(&o)[before..], [slice_range(2)]);
}

#[test]
fn if_range_matches_or_gets_the_whole_object() {
    let o = origin();
    let srv = start(o.port, "64k");
    let obj = object();
    let r = get(
        srv.port,
        "/v.mp4",
        &[("Range", "bytes=70000-70099"), ("If-Range", ETAG)],
    );
    assert_eq!(r.status, 206);
    assert!(r.body == obj[70000..70100]);
    // If-Range makes the first slice the first one (NGINX's rule).
    assert_eq!(ranges_seen(&o), vec![slice_range(0), slice_range(1)]);
    let r = get(
        srv.port,
        "/v.mp4",
        &[("Range", "bytes=70000-70099"), ("If-Range", "\"other\"")],
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.length(), Some(LEN));
    assert!(r.body == obj);
    let r = get(
        srv.port,
        "/v.mp4",
        &[("Range", "bytes=5-9"), ("If-Range", LAST_MODIFIED)],
    );
    assert_eq!(r.status, 206);
    assert!(r.body == obj[5..10]);
}

#[test]
fn an_etag_that_changes_between_slices_aborts_the_response() {
    let o = origin_with(|start| if start == 0 { ETAG } else { "\"v2\"" });
    let srv = start(o.port, "64k");
    let r = get(srv.port, "/v.mp4", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.length(), Some(LEN));
    assert_eq!(r.body.len(), SLICE, "the body stops after the first slice");
    srv.wait_log(
        "logs/error.log",
        "etag mismatch in slice response",
        Duration::from_secs(5),
    );
    assert_eq!(ranges_seen(&o), vec![slice_range(0), slice_range(1)]);
}

#[test]
fn an_origin_without_ranges_is_passed_through() {
    let body = object();
    let o = Origin::start(move |_| Reply::ok(&body).header("ETag", ETAG));
    let srv = start(o.port, "64k");
    let r = get(srv.port, "/v.mp4", &[]);
    assert_eq!(r.status, 200);
    assert!(r.body == object());
    assert_eq!(o.count(), 1);
    assert_eq!(ranges_seen(&o), vec![slice_range(0)]);
    // A Range gets it whole too (no `Accept-Ranges` from the origin).
    let r = get(srv.port, "/w.mp4", &[("Range", "bytes=10-19")]);
    assert_eq!(r.status, 200);
    assert!(r.body == object());
    assert_eq!(o.count(), 2);
}

#[test]
fn head_gets_the_whole_length_and_no_body() {
    let o = origin();
    let srv = start(o.port, "64k");
    let r = send(srv.port, "HEAD", "/v.mp4", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.length(), Some(LEN));
    assert!(r.body.is_empty());
    assert_eq!(r.header("accept-ranges"), Some("bytes"));
    assert_eq!(ranges_seen(&o), vec![slice_range(0)]);
}

#[test]
fn slice_zero_is_off_and_slice_range_is_empty() {
    let o = origin();
    let srv = start(o.port, "0");
    let r = get(srv.port, "/v.mp4", &[]);
    assert_eq!(r.status, 200);
    assert!(r.body == object());
    // `proxy_set_header Range ""` sends no Range.
    assert_eq!(ranges_seen(&o), vec!["-".to_string()]);
    let r = get(srv.port, "/plain/x", &[]);
    assert_eq!(r.header("x-slice-range"), Some("[]"));
}

/// The same requests to porter and nginx (each with its own cache, one
/// origin): statuses, the headers that matter and bodies agree.
#[test]
fn porter_and_nginx_agree() {
    let o = origin();
    let body = http_body(o.port, "64k");
    let srv = Server::start(&one_worker_conf(&body));
    let Some(ngx) = Nginx::start(&body) else {
        eprintln!("skipping the comparison: /usr/sbin/nginx is not installed");
        return;
    };
    let cases: &[(&str, &[(&str, &str)])] = &[
        ("GET", &[]),
        ("GET", &[("Range", "bytes=0-99")]),
        ("GET", &[("Range", "bytes=65500-140000")]),
        ("GET", &[("Range", "bytes=140000-")]),
        ("GET", &[("Range", "bytes=-70000")]),
        ("GET", &[("Range", "bytes=1-2,5-6")]),
        ("GET", &[("Range", "bytes=900000-")]),
        ("GET", &[("Range", "bytes=70000-70099"), ("If-Range", ETAG)]),
        (
            "GET",
            &[("Range", "bytes=70000-70099"), ("If-Range", "\"x\"")],
        ),
        ("GET", &[("If-None-Match", ETAG)]),
        ("GET", &[]),
        ("HEAD", &[]),
    ];
    for (i, &(method, extra)) in cases.iter().enumerate() {
        for path in ["/v.mp4", "/u.mp4?x=1"] {
            let p = send(srv.port, method, path, extra);
            let n = send(ngx.port, method, path, extra);
            let what = format!("case {i}: {method} {path} {extra:?}");
            assert_eq!(p.status, n.status, "{what}");
            for h in [
                "content-length",
                "content-range",
                "accept-ranges",
                "etag",
                "last-modified",
                "content-type",
                "x-cache-status",
            ] {
                assert_eq!(p.header(h), n.header(h), "{what}: {h}");
            }
            assert!(p.body == n.body, "{what}: bodies differ");
        }
    }
}
