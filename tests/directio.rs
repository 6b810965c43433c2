//! `directio N`: a file of at least N bytes is read around the page cache
//! (`O_DIRECT`, `directio_alignment`), the unaligned start and end through
//! it, as NGINX reads them. Checked on the served file itself with
//! `cachestat` (the test owns the files), and the bytes, ranges and HEAD
//! answers compared with nginx's on the same files.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::common::{
    config_error, get, get_with, one_worker_conf, raw, Nginx, Resp, Server, TempDir,
};
use porter::disk::fastpath::cached_pages;

/// The locations both servers get: `aio off` with `sendfile on` (which
/// `directio` turns off for large files), a pool, and no `directio`.
const LOCATIONS: &str = "
    location /d/ { directio 512; sendfile on; }
    location /t/ { directio 512; aio threads; }
    location /big/ { directio 64k; sendfile on; }
    location /plain/ { sendfile on; }";

fn http_body(root: &Path) -> String {
    format!(
        "  server {{\n    listen 127.0.0.1:{{PORT}};\n    root {};\n{LOCATIONS}\n  }}",
        root.display()
    )
}

fn body(len: usize, seed: usize) -> Vec<u8> {
    (0..len).map(|i| ((i * 7 + seed) % 251) as u8).collect()
}

/// Writes `rel` under `dir`, on the disk and out of the page cache.
fn write_cold(dir: &TempDir, rel: &str, data: &[u8]) -> PathBuf {
    let p = dir.write(rel, data);
    let f = File::open(&p).unwrap();
    f.sync_all().unwrap();
    rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).unwrap();
    assert_eq!(resident(&p), 0, "{rel} left in the page cache");
    p
}

/// Pages of `path` in the page cache.
fn resident(path: &Path) -> u64 {
    let f = File::open(path).unwrap();
    let len = f.metadata().unwrap().len();
    cached_pages(&f, 0, len)
        .expect("cachestat of our own file")
        .0
}

#[test]
fn a_large_file_is_read_around_the_page_cache() {
    let dir = TempDir::new("directio");
    let len = (2 << 20) + 777;
    let data = body(len, 1);
    let srv = Server::start(&one_worker_conf(&http_body(dir.path())));
    let ngx = Nginx::start(&http_body(dir.path()));
    let mut servers = vec![("porter", srv.port)];
    if let Some(n) = &ngx {
        servers.push(("nginx", n.port));
    }
    for (name, port) in servers {
        for loc in ["big", "t", "plain"] {
            let rel = format!("{loc}/{name}.bin");
            let p = write_cold(&dir, &rel, &data);
            let r = get(port, &format!("/{rel}"));
            assert_eq!(r.status, 200, "{name} /{rel}");
            assert!(r.body == data, "{name} /{rel}: wrong bytes");
            let pages = resident(&p);
            if loc == "plain" {
                // the check sees what a buffered read leaves
                assert!(pages > 500, "{name} /{rel}: only {pages} pages cached");
            } else if name == "porter" {
                // only the block holding the file's last 777 bytes
                assert!(pages <= 1, "{name} /{rel}: {pages} pages cached");
            } else {
                // nginx reads its last output buffer (32k) buffered
                assert!(pages <= 10, "{name} /{rel}: {pages} pages cached");
            }
        }
    }
}

#[test]
fn a_range_and_a_smaller_file_stay_as_they_were() {
    let dir = TempDir::new("directio-range");
    let len = 1 << 20;
    let data = body(len, 2);
    let srv = Server::start(&one_worker_conf(&http_body(dir.path())));
    // A range starting off a boundary: only its first and last blocks are
    // read through the page cache.
    let p = write_cold(&dir, "big/r.bin", &data);
    let r = get_with(srv.port, "/big/r.bin", "Range: bytes=1000-900000\r\n");
    assert_eq!(r.status, 206);
    assert!(r.body == data[1000..=900_000]);
    let pages = resident(&p);
    assert!(pages <= 2, "{pages} pages cached for the range");
    // Below the threshold the page cache is used as before.
    let p = write_cold(&dir, "big/small.bin", &data[..60_000]);
    let r = get(srv.port, "/big/small.bin");
    assert!(r.body == data[..60_000]);
    assert!(
        resident(&p) >= 14,
        "a small file went around the page cache"
    );
}

/// Status, length, range and body of porter's and nginx's answers agree,
/// and a 200's body is the file.
fn same(what: &str, ours: &Resp, theirs: &Resp, file: &[u8]) {
    assert_eq!(ours.status, theirs.status, "{what}: status");
    for h in ["content-length", "content-range"] {
        assert_eq!(ours.header(h), theirs.header(h), "{what}: {h}");
    }
    if ours.status == 200 && !what.starts_with("HEAD") {
        assert!(ours.body == file, "{what}: body is not the file");
    }
    // multipart bodies with the boundary taken out
    let plain = |r: &Resp| {
        let ct = r.header("content-type").unwrap_or("");
        match ct.split_once("boundary=") {
            Some((_, b)) => r.text().replace(b, "B").into_bytes(),
            None => r.body.clone(),
        }
    };
    if ours.status == 206 {
        assert!(plain(ours) == plain(theirs), "{what}: bodies differ");
    }
}

#[test]
fn bytes_around_the_alignment_match_nginx() {
    let dir = TempDir::new("directio-sizes");
    let body_text = http_body(dir.path());
    let srv = Server::start(&one_worker_conf(&body_text));
    let Some(ngx) = Nginx::start(&body_text) else {
        panic!("/usr/sbin/nginx is needed to compare");
    };
    let sizes = [
        1usize, 511, 512, 513, 1023, 1025, 4095, 4096, 4097, 65_535, 65_536, 65_537, 200_003,
    ];
    let ranges = [
        "bytes=0-0",
        "bytes=1-511",
        "bytes=511-512",
        "bytes=500-70000",
        "bytes=513-",
        "bytes=-1",
        "bytes=-513",
        "bytes=4095-4096",
        "bytes=0-0,512-1023,-3",
    ];
    for (i, size) in sizes.into_iter().enumerate() {
        let data = body(size, i);
        for loc in ["d", "t"] {
            let path = format!("/{loc}/f{size}");
            write_cold(&dir, &path[1..], &data);
            let (a, b) = (get(srv.port, &path), get(ngx.port, &path));
            same(&format!("GET {path}"), &a, &b, &data);
            for range in ranges {
                let h = format!("Range: {range}\r\n");
                let (a, b) = (get_with(srv.port, &path, &h), get_with(ngx.port, &path, &h));
                same(&format!("GET {path} {range}"), &a, &b, &data);
            }
            let head =
                format!("HEAD {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
            let (a, b) = (
                raw(srv.port, head.as_bytes()),
                raw(ngx.port, head.as_bytes()),
            );
            same(&format!("HEAD {path}"), &a, &b, &data);
            assert!(a.body.is_empty());
        }
    }
}

#[test]
fn directio_lines_are_checked_as_nginx_checks_them() {
    let conf = |line: &str| {
        one_worker_conf(&format!(
            "  server {{ listen 127.0.0.1:1; location / {{ {line} }} }}"
        ))
    };
    let err = config_error(&conf("directio big;"));
    assert!(
        err.contains("\"directio\" directive invalid value"),
        "{err}"
    );
    let err = config_error(&conf("directio_alignment 1000;"));
    assert!(err.contains("must be a power of two"), "{err}");
    let err = config_error(&conf("directio off; directio 4m;"));
    assert!(err.contains("\"directio\" directive is duplicate"), "{err}");
}
