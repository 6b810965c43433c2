//! `gzip` and `gzip_static` on the real binary: bodies decoded and
//! compared with the files, and the headers compared with Debian's nginx
//! serving the same files with the same `http { }` body (skipped, saying
//! so, without `/usr/sbin/nginx`): `Content-Encoding`, `Vary`, the weak
//! ETag, no `Content-Length`, chunked; no gzip on HEAD, 304, or for a
//! client that does not ask; a large file and a proxied body streamed.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, UNIX_EPOCH};

#[allow(unused_imports)]
use crate::common::origin::Framing;
use crate::common::origin::{Origin, Reply};
use crate::common::{one_worker_conf, raw, Nginx, Resp, Server, TempDir};

/// The fixed mtime of every file, so both servers give the same ETag.
const MTIME: u64 = 1_600_000_000;

fn gunzip(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(b)
        .read_to_end(&mut out)
        .expect("a valid gzip stream");
    out
}

/// Text that compresses (an HTML-ish page of `len` bytes).
fn text(len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    let mut i = 0u64;
    while v.len() < len {
        v.extend_from_slice(
            format!("<p>line {i} of the page, {}</p>\n", i * 7919 % 1013).as_bytes(),
        );
        i += 1;
    }
    v.truncate(len);
    v
}

fn put(dir: &TempDir, rel: &str, data: &[u8]) {
    let p = dir.write(rel, data);
    let f = std::fs::File::options().write(true).open(&p).unwrap();
    f.set_modified(UNIX_EPOCH + Duration::from_secs(MTIME))
        .unwrap();
}

fn porter(http_body: &str) -> Server {
    Server::start(&one_worker_conf(http_body))
}

const TYPES: &str = "types { text/html html; text/plain txt; text/css css; image/png png; }";

fn server_body(root: &std::path::Path, extra: &str) -> String {
    format!(
        "{TYPES}\n  server {{\n    listen 127.0.0.1:{{PORT}};\n    root {};\n{extra}\n  }}",
        root.display()
    )
}

fn req(port: u16, head: &str) -> Resp {
    raw(port, format!("{head}\r\n").as_bytes())
}

fn get_gz(port: u16, path: &str, extra: &str) -> Resp {
    req(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAccept-Encoding: gzip, deflate\r\n{extra}"),
    )
}

/// Header names in order, without the ones that differ by product
/// (`Server`, `Date`).
fn names(r: &Resp) -> Vec<String> {
    r.headers
        .iter()
        .map(|(n, _)| n.to_ascii_lowercase())
        .filter(|n| n != "server" && n != "date")
        .collect()
}

/// The headers gzip decides on, as (name, value).
fn gzip_headers(r: &Resp) -> Vec<(String, Option<String>)> {
    [
        "content-encoding",
        "vary",
        "etag",
        "content-length",
        "transfer-encoding",
        "accept-ranges",
        "content-type",
        "last-modified",
    ]
    .iter()
    .map(|n| (n.to_string(), r.header(n).map(str::to_string)))
    .collect()
}

fn same_as_nginx(what: &str, p: &Resp, n: &Resp) {
    assert_eq!(p.status, n.status, "{what}: status");
    assert_eq!(gzip_headers(p), gzip_headers(n), "{what}: headers");
    assert_eq!(names(p), names(n), "{what}: header order");
}

fn docroot() -> (TempDir, Vec<u8>, Vec<u8>) {
    let root = TempDir::new("gzip-root");
    let page = text(10_000);
    let big = text(3 * 1024 * 1024 + 17);
    put(&root, "page.html", &page);
    put(&root, "big.txt", &big);
    put(&root, "tiny.html", b"<p>hi</p>");
    put(&root, "image.png", &page);
    (root, page, big)
}

#[test]
fn static_files_are_gzipped_as_nginx_gzips_them() {
    let (root, page, big) = docroot();
    let body = server_body(
        root.path(),
        "    gzip on; gzip_types text/plain; gzip_vary on; gzip_min_length 100;",
    );
    let srv = porter(&body);
    let ngx = Nginx::start(&body);
    if ngx.is_none() {
        eprintln!("skipping the comparison with nginx: /usr/sbin/nginx is not installed");
    }
    let cases: &[(&str, &str)] = &[
        ("GET /page.html", "Accept-Encoding: gzip\r\n"),
        ("GET /big.txt", "Accept-Encoding: gzip, deflate\r\n"),
        ("GET /page.html", ""),
        ("GET /page.html", "Accept-Encoding: gzip;q=0\r\n"),
        ("GET /page.html", "Accept-Encoding: br\r\n"),
        ("HEAD /page.html", "Accept-Encoding: gzip\r\n"),
        ("GET /tiny.html", "Accept-Encoding: gzip\r\n"),
        ("GET /image.png", "Accept-Encoding: gzip\r\n"),
        (
            "GET /page.html",
            "Accept-Encoding: gzip\r\nRange: bytes=0-99\r\n",
        ),
        ("GET /nope.html", "Accept-Encoding: gzip\r\n"),
        (
            "GET /page.html",
            "Accept-Encoding: gzip\r\nIf-None-Match: W/\"5f5e1000-2710\"\r\n",
        ),
        (
            "GET /page.html",
            "Accept-Encoding: gzip\r\nVia: 1.1 proxy\r\n",
        ),
    ];
    for (line, extra) in cases {
        let head = format!("{line} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{extra}");
        let p = req(srv.port, &head);
        if let Some(n) = &ngx {
            let n = req(n.port, &head);
            same_as_nginx(&format!("{line} {extra:?}"), &p, &n);
            if n.header("content-encoding").is_some() && line.starts_with("GET") && n.status == 200
            {
                assert_eq!(gunzip(&p.body), gunzip(&n.body), "{line}: decoded bodies");
            }
        }
        if p.header("content-encoding").is_some() && line.starts_with("GET") && p.status == 200 {
            let want = if line.ends_with("big.txt") {
                &big
            } else {
                &page
            };
            assert_eq!(&gunzip(&p.body), want, "{line}: decoded body");
        }
    }
    // What the comparison stands on, stated for porter alone.
    let p = get_gz(srv.port, "/page.html", "");
    assert_eq!(p.header("content-encoding"), Some("gzip"));
    assert_eq!(p.header("vary"), Some("Accept-Encoding"));
    assert_eq!(p.header("etag"), Some("W/\"5f5e1000-2710\""));
    assert_eq!(p.header("content-length"), None);
    assert_eq!(p.header("transfer-encoding"), Some("chunked"));
    assert!(
        p.body.len() < page.len() / 3,
        "compressed: {}",
        p.body.len()
    );
    let p = get_gz(
        srv.port,
        "/page.html",
        "If-None-Match: W/\"5f5e1000-2710\"\r\n",
    );
    assert_eq!(p.status, 304);
    assert_eq!(p.header("content-encoding"), None);
    let p = get_gz(srv.port, "/page.html", "Via: 1.1 proxy\r\n");
    assert_eq!(p.header("content-encoding"), None, "gzip_proxied off");
}

#[test]
fn gzip_settings_decide_as_nginx_does() {
    let (root, page, _) = docroot();
    let body = server_body(
        root.path(),
        "    gzip on; gzip_comp_level 9; gzip_disable msie6 \"^Lynx\";\n\
         location /p/ { alias ROOT/; gzip_proxied expired no-cache auth; expires -1; }\n\
         location /v10/ { alias ROOT/; gzip_http_version 1.0; }\n\
         location /all/ { alias ROOT/; gzip_types *; gzip_min_length 0; }\n\
         location /off/ { alias ROOT/; gzip off; gzip_buffers 16 8k; }"
            .replace("ROOT", &root.path().display().to_string())
            .as_str(),
    );
    let srv = porter(&body);
    let ngx = Nginx::start(&body);
    let msie6 = "User-Agent: Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)\r\n";
    let cases: Vec<(String, bool)> = vec![
        (
            "GET /page.html HTTP/1.1\r\nAccept-Encoding: gzip\r\n".into(),
            true,
        ),
        (
            format!("GET /page.html HTTP/1.1\r\nAccept-Encoding: gzip\r\n{msie6}"),
            false,
        ),
        (
            "GET /page.html HTTP/1.1\r\nAccept-Encoding: gzip\r\nUser-Agent: lynx/2\r\n".into(),
            false,
        ),
        (
            "GET /page.html HTTP/1.0\r\nAccept-Encoding: gzip\r\n".into(),
            false,
        ),
        (
            "GET /v10/page.html HTTP/1.0\r\nAccept-Encoding: gzip\r\n".into(),
            true,
        ),
        (
            "GET /p/page.html HTTP/1.1\r\nAccept-Encoding: gzip\r\nVia: x\r\n".into(),
            true,
        ),
        (
            "GET /all/image.png HTTP/1.1\r\nAccept-Encoding: gzip\r\n".into(),
            true,
        ),
        (
            "GET /all/tiny.html HTTP/1.1\r\nAccept-Encoding: gzip\r\n".into(),
            true,
        ),
        (
            "GET /off/page.html HTTP/1.1\r\nAccept-Encoding: gzip\r\n".into(),
            false,
        ),
        (
            "GET /nope.html HTTP/1.1\r\nAccept-Encoding: gzip\r\n".into(),
            true,
        ),
    ];
    for (head, gz) in &cases {
        let head = format!("{head}Host: x\r\nConnection: close\r\n");
        let p = req(srv.port, &head);
        assert_eq!(p.header("content-encoding").is_some(), *gz, "{head}");
        if *gz && p.status == 200 {
            let b = gunzip(&p.body);
            assert!(
                b == page || b == b"<p>hi</p>" || b.len() == page.len(),
                "{head}"
            );
        }
        if let Some(n) = &ngx {
            let n = req(n.port, &head);
            same_as_nginx(&head, &p, &n);
        }
    }
}

#[test]
fn gzip_static_serves_the_gz_file_as_nginx_does() {
    let (root, page, _) = docroot();
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(&page).unwrap();
    let gz = enc.finish().unwrap();
    put(&root, "page.html.gz", &gz);
    put(&root, "always/page.html.gz", &gz);
    let body = server_body(
        root.path(),
        "    gzip_static on; gzip_vary on;\n    location /always/ { gzip_static always; }",
    );
    let srv = porter(&body);
    let ngx = Nginx::start(&body);
    for (path, extra) in [
        ("/page.html", "Accept-Encoding: gzip\r\n"),
        ("/page.html", ""),
        (
            "/page.html",
            "Accept-Encoding: gzip\r\nRange: bytes=0-9\r\n",
        ),
        ("/always/page.html", ""),
        ("/tiny.html", "Accept-Encoding: gzip\r\n"),
    ] {
        let head = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{extra}");
        let p = req(srv.port, &head);
        if let Some(n) = &ngx {
            let n = req(n.port, &head);
            same_as_nginx(&head, &p, &n);
            assert_eq!(p.body, n.body, "{head}");
        }
    }
    let p = get_gz(srv.port, "/page.html", "");
    assert_eq!(p.header("content-encoding"), Some("gzip"));
    assert_eq!(
        p.header("content-length"),
        Some(gz.len().to_string().as_str())
    );
    assert_eq!(p.body, gz);
    assert_eq!(gunzip(&p.body), page);
    let p = req(
        srv.port,
        "GET /page.html HTTP/1.1\r\nHost: x\r\nConnection: close\r\n",
    );
    assert_eq!(p.header("content-encoding"), None);
    assert_eq!(p.header("vary"), Some("Accept-Encoding"));
    assert_eq!(p.body, page);
}

#[test]
fn proxied_responses_are_gzipped_and_streamed() {
    let page = text(200_000);
    let body_for_origin = page.clone();
    let origin = Origin::start(move |_| {
        let mut r = Reply::ok(&body_for_origin).paced(16 * 1024, Duration::from_millis(2));
        r.headers = vec![("Content-Type".into(), "text/html".into())];
        r
    });
    let body = format!(
        "server {{ listen 127.0.0.1:{{PORT}}; gzip on; gzip_vary on;\n\
           location / {{ proxy_pass http://127.0.0.1:{}; }} }}",
        origin.port
    );
    let srv = porter(&body);
    let ngx = Nginx::start(&body);
    let head = "GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAccept-Encoding: gzip\r\n";
    let p = req(srv.port, head);
    assert_eq!(p.header("content-encoding"), Some("gzip"));
    assert_eq!(p.header("content-length"), None);
    assert_eq!(gunzip(&p.body), page);
    if let Some(n) = &ngx {
        let n = req(n.port, head);
        assert_eq!(gzip_headers(&p), gzip_headers(&n));
    }
}

#[test]
fn a_large_gzipped_file_streams_from_the_first_bytes() {
    // 64 MiB of text: porter must start sending long before it could have
    // compressed it all, and the client reads it slowly at first.
    let root = TempDir::new("gzip-large");
    let big = text(64 * 1024 * 1024);
    put(&root, "big.txt", &big);
    let srv = porter(&server_body(
        root.path(),
        "    gzip on; gzip_types text/plain;",
    ));
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.write_all(
        b"GET /big.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAccept-Encoding: gzip\r\n\r\n",
    )
    .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let start = std::time::Instant::now();
    let mut first = [0u8; 1];
    s.read_exact(&mut first).unwrap();
    let ttfb = start.elapsed();
    let mut buf = first.to_vec();
    let resp = common::read_response(&mut s, &mut buf, false).unwrap();
    let total = start.elapsed();
    assert_eq!(resp.header("content-encoding"), Some("gzip"));
    assert_eq!(gunzip(&resp.body), big);
    assert!(
        ttfb * 5 < total,
        "first byte after {ttfb:?} of {total:?}: not streamed"
    );
}
