//! `autoindex` on the real binary, byte for byte against Debian's nginx
//! listing the same directory (skipped, saying so, without
//! `/usr/sbin/nginx`): HTML with exact and scaled sizes, local time, long,
//! escaped and UTF-8 names, directories and symlinks; JSON, JSONP and XML;
//! HEAD, a missing directory, and an index file that takes precedence.

use std::time::{Duration, UNIX_EPOCH};

use crate::common::{one_worker_conf, raw, Nginx, Resp, Server, TempDir};

const MTIME: u64 = 1_600_000_000;

fn touch(p: &std::path::Path, secs: u64) {
    let f = std::fs::File::options().write(true).open(p).unwrap();
    f.set_modified(UNIX_EPOCH + Duration::from_secs(secs))
        .unwrap();
}

fn file(root: &TempDir, rel: &str, len: u64, secs: u64) {
    let p = root.write(rel, b"");
    let f = std::fs::File::options().write(true).open(&p).unwrap();
    f.set_len(len).unwrap();
    touch(&p, secs);
}

fn tree() -> TempDir {
    let root = TempDir::new("autoindex");
    let d = root.path().join("d");
    std::fs::create_dir_all(d.join("sub dir")).unwrap();
    std::fs::create_dir_all(d.join("empty")).unwrap();
    file(&root, "d/a.txt", 0, MTIME);
    file(&root, "d/nine.bin", 9999, MTIME + 61);
    file(&root, "d/ten.bin", 10_000, MTIME + 3600);
    file(&root, "d/big.bin", 10_752, MTIME - 86_400 * 400);
    file(&root, "d/two-megs.iso", 2 * 1024 * 1024 + 600_000, MTIME);
    file(&root, "d/huge.img", 3 * 1024 * 1024 * 1024 + 1, MTIME);
    file(&root, "d/.hidden", 5, MTIME);
    file(&root, "d/a&b <c> \"q\".txt", 12, MTIME);
    file(&root, "d/100% #1?.txt", 3, MTIME);
    file(&root, &format!("d/{}.txt", "long".repeat(15)), 7, MTIME);
    file(&root, &format!("d/{}", "x".repeat(50)), 7, MTIME);
    file(&root, &format!("d/{}", "y".repeat(49)), 7, MTIME);
    file(&root, "d/héllo wörld.txt", 8, MTIME);
    file(&root, &format!("d/{}.txt", "é".repeat(55)), 8, MTIME);
    file(&root, "d/index/index.html", 4, MTIME);
    std::os::unix::fs::symlink(d.join("sub dir"), d.join("link-to-dir")).unwrap();
    std::os::unix::fs::symlink(d.join("gone"), d.join("dangling")).unwrap();
    for sub in ["sub dir", "empty", "index", ""] {
        let f = std::fs::File::open(d.join(sub)).unwrap();
        f.set_modified(UNIX_EPOCH + Duration::from_secs(MTIME))
            .unwrap();
    }
    root
}

fn conf(root: &std::path::Path) -> String {
    format!(
        "types {{ text/html html; text/plain txt; }}\n\
         server {{\n  listen 127.0.0.1:{{PORT}};\n  root {root};\n  autoindex on;\n\
           location /scaled/ {{ alias {root}/d/; autoindex_exact_size off; }}\n\
           location /local/ {{ alias {root}/d/; autoindex_localtime on; autoindex_exact_size off; }}\n\
           location /utf/ {{ alias {root}/d/; charset utf-8; }}\n\
           location /json/ {{ alias {root}/d/; autoindex_format json; }}\n\
           location /jsonp/ {{ alias {root}/d/; autoindex_format jsonp; }}\n\
           location /xml/ {{ alias {root}/d/; autoindex_format xml; }}\n\
           location /off/ {{ alias {root}/d/; autoindex off; }}\n\
           location /gz/ {{ alias {root}/d/; gzip on; }}\n\
         }}",
        root = root.display()
    )
}

fn porter(http_body: &str) -> Server {
    Server::start(&one_worker_conf(http_body))
}

fn get(port: u16, line: &str) -> Resp {
    raw(
        port,
        format!("{line} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

fn head_of(r: &Resp) -> Vec<(String, String)> {
    r.headers
        .iter()
        .filter(|(n, _)| !n.eq_ignore_ascii_case("server") && !n.eq_ignore_ascii_case("date"))
        .cloned()
        .collect()
}

const CASES: &[&str] = &[
    "GET /d/",
    "GET /d/sub%20dir/",
    "GET /d/empty/",
    "GET /scaled/",
    "GET /local/",
    "GET /utf/",
    "GET /json/",
    "GET /jsonp/?callback=cb.x_1",
    "GET /jsonp/",
    "GET /jsonp/?callback=bad(",
    "GET /xml/",
    "HEAD /d/",
    "GET /d/index/",
    "GET /off/",
    "GET /nope/",
];

#[test]
fn listings_match_nginx_byte_for_byte() {
    let root = tree();
    let body = conf(root.path());
    let srv = porter(&body);
    let Some(ngx) = Nginx::start(&body) else {
        eprintln!("skipping: /usr/sbin/nginx is not installed");
        return;
    };
    for line in CASES {
        let p = get(srv.port, line);
        let n = get(ngx.port, line);
        assert_eq!(p.status, n.status, "{line}: status");
        assert_eq!(head_of(&p), head_of(&n), "{line}: headers");
        if p.status == 200 {
            assert_eq!(p.text(), n.text(), "{line}: body");
        }
    }
    // A listing gzipped: same headers, same page once decoded.
    let head =
        b"GET /gz/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAccept-Encoding: gzip\r\n\r\n";
    let (p, n) = (raw(srv.port, head), raw(ngx.port, head));
    assert_eq!(head_of(&p), head_of(&n), "gzip: headers");
    assert_eq!(p.header("content-encoding"), Some("gzip"));
    let gunzip = |b: &[u8]| {
        use std::io::Read;
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(b)
            .read_to_end(&mut out)
            .expect("a gzip stream");
        out
    };
    assert_eq!(gunzip(&p.body), gunzip(&n.body), "gzip: decoded listing");
}

#[test]
fn a_listing_shows_what_the_directory_holds() {
    let root = tree();
    let srv = porter(&conf(root.path()));
    let r = get(srv.port, "GET /d/");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/html"));
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    let t = r.text();
    assert!(
        t.starts_with("<html>\r\n<head><title>Index of /d/</title></head>\r\n"),
        "{t}"
    );
    assert!(t.contains("<a href=\"sub%20dir/\">sub dir/</a>"), "{t}");
    assert!(t.contains("<a href=\"a.txt\">a.txt</a>"), "{t}");
    assert!(!t.contains("hidden"), "{t}");
    // Directories first.
    assert!(t.find("sub%20dir/").unwrap() < t.find("a.txt").unwrap());
    let j = get(srv.port, "GET /json/");
    assert_eq!(j.header("content-type"), Some("application/json"));
    assert!(j.text().contains("{ \"name\":\"a.txt\", \"type\":\"file\", \"mtime\":\"Sun, 13 Sep 2020 12:26:40 GMT\", \"size\":0 }"), "{}", j.text());
    let off = get(srv.port, "GET /off/");
    assert_eq!(off.status, 403);
}
