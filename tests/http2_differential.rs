//! Differential test over HTTP/2: porter (`http2 on`) and Debian's nginx
//! 1.22 (`listen ... http2`, h2c with prior knowledge) serve the same
//! docroot with the same configuration, and the same corpus of requests
//! goes to both through the `h2` client: status, the headers that matter
//! and the body must agree, after normalising what legitimately differs
//! (`server`, `date`, the product/version in built-in pages, the port in
//! `location`, multipart boundaries).
//!
//! Skips itself (saying so) when `/usr/sbin/nginx` is not installed.

use crate::common;

use crate::common::h2client::{self as c, rt, H2Resp};
use crate::common::{Nginx, Server, TempDir};

/// Headers compared when either response has them.
const COMPARED: &[&str] = &[
    "content-type",
    "content-length",
    "last-modified",
    "etag",
    "location",
    "content-range",
    "accept-ranges",
    "x-extra",
    "cache-control",
    "expires",
];

/// Method, path, request headers.
type Case<'a> = (&'a str, &'a str, Vec<(&'a str, String)>);

fn server_body(root: &str) -> String {
    format!(
        "default_type application/octet-stream;\n\
         types {{ text/html html; text/plain txt; }}\n\
         server {{ listen 127.0.0.1:{{PORT}} HTTP2; server_name localhost;\n\
           root {root};\n\
           location /ret {{ return 200 \"returned $request_method $uri $server_protocol\\n\"; }}\n\
           location /redir {{ return 302 /elsewhere; }}\n\
           location /hdr/ {{ add_header X-Extra yes always; expires 1h; }}\n\
           error_page 418 /teapot.txt;\n\
           location /tea {{ return 418; }}\n\
         }}"
    )
}

fn normalise(r: &H2Resp) -> String {
    let mut out = format!("{}\n", r.status);
    for name in COMPARED {
        if let Some(v) = r.header(name) {
            let mut v = v.to_string();
            if *name == "location" {
                // The listening port differs: `scheme://host:PORT/...`.
                if let Some(i) = v
                    .find("://")
                    .and_then(|s| v[s + 3..].find(':').map(|j| s + 3 + j))
                {
                    let end = v[i..].find('/').map_or(v.len(), |j| i + j);
                    v.replace_range(i..end, ":<PORT>");
                }
            }
            if *name == "content-type" {
                if let Some(i) = v.find("boundary=") {
                    v.truncate(i + 9);
                }
            }
            out.push_str(&format!("{name}: {v}\n"));
        }
    }
    let mut body = String::from_utf8_lossy(&r.body).into_owned();
    for product in [
        "nginx/1.22.1",
        concat!("porter/", env!("CARGO_PKG_VERSION")),
    ] {
        body = body.replace(product, "<V>");
    }
    if r.header("content-type")
        .is_some_and(|t| t.starts_with("multipart/byteranges"))
    {
        // Boundaries differ: keep the part headers and bodies only.
        body = body
            .lines()
            .filter(|l| !l.starts_with("--"))
            .collect::<Vec<_>>()
            .join("\n");
        out = out
            .lines()
            .filter(|l| !l.starts_with("content-length"))
            .collect::<Vec<_>>()
            .join("\n");
        out.push('\n');
    }
    out.push_str(&body);
    out
}

/// The requests, with the ETag and Last-Modified of `a.txt` in `docroot`.
fn corpus(docroot: &TempDir) -> Vec<Case<'static>> {
    let etag = {
        let meta = std::fs::metadata(docroot.path().join("a.txt")).unwrap();
        let mtime = meta
            .modified()
            .unwrap()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        format!("\"{mtime:x}-{:x}\"", meta.len())
    };
    let lm = httpdate::fmt_http_date(
        std::fs::metadata(docroot.path().join("a.txt"))
            .unwrap()
            .modified()
            .unwrap(),
    );
    vec![
        ("GET", "/", vec![]),
        ("GET", "/index.html", vec![]),
        ("GET", "/a.txt", vec![]),
        ("HEAD", "/a.txt", vec![]),
        ("GET", "/missing", vec![]),
        ("GET", "/dir", vec![]),
        ("GET", "/dir/", vec![]),
        ("GET", "/a.txt", vec![("range", "bytes=5-14".into())]),
        ("GET", "/a.txt", vec![("range", "bytes=-10".into())]),
        ("GET", "/a.txt", vec![("range", "bytes=0-1,10-11".into())]),
        ("GET", "/a.txt", vec![("range", "bytes=99999-".into())]),
        ("GET", "/a.txt", vec![("if-none-match", etag.clone())]),
        ("GET", "/a.txt", vec![("if-modified-since", lm.clone())]),
        (
            "GET",
            "/a.txt",
            vec![("if-range", etag.clone()), ("range", "bytes=0-3".into())],
        ),
        (
            "GET",
            "/a.txt",
            vec![
                ("if-range", "\"other\"".into()),
                ("range", "bytes=0-3".into()),
            ],
        ),
        ("GET", "/ret/x?y=1", vec![]),
        ("POST", "/ret", vec![]),
        ("GET", "/redir", vec![]),
        ("GET", "/hdr/x.txt", vec![]),
        ("GET", "/hdr/none", vec![]),
        ("GET", "/tea", vec![]),
        ("POST", "/a.txt", vec![]),
        ("GET", "/%2e%2e/etc/passwd", vec![]),
        ("GET", "/a.txt/", vec![]),
    ]
}

#[test]
fn porter_and_nginx_answer_the_corpus_alike_over_h2() {
    let docroot = TempDir::new("h2diff");
    docroot.write("index.html", "<p>index</p>\n");
    docroot.write("a.txt", "0123456789abcdefghij\n".repeat(100));
    docroot.write("dir/index.html", "dir index\n");
    docroot.write("hdr/x.txt", "with headers\n");
    docroot.write("teapot.txt", "short and stout\n");
    // Same files, same mtimes for both servers.
    let root = docroot.path().display().to_string();
    let Some(nginx) = Nginx::start(&server_body(&root).replace("HTTP2", "http2")) else {
        eprintln!("skipping: {} is not installed", common::NGINX);
        return;
    };
    let porter_conf = format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\nevents {{ worker_connections 256; }}\n\
         http {{ access_log off;\n{}\n}}\n",
        server_body(&root).replace("HTTP2", "; http2 on")
    );
    let porter = Server::start(&porter_conf);
    let corpus = corpus(&docroot);
    let mut diffs = Vec::new();
    rt().block_on(async {
        let p = c::connect(porter.port).await;
        let n = c::connect(nginx.port).await;
        for (method, path, headers) in &corpus {
            let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let a = c::request(&p, method, path, &h, None).await.unwrap();
            let b = c::request(&n, method, path, &h, None).await.unwrap();
            let (a, b) = (normalise(&a), normalise(&b));
            if a != b {
                diffs.push(format!(
                    "{method} {path} {headers:?}\n--- porter\n{a}\n--- nginx\n{b}\n"
                ));
            }
        }
    });
    assert!(
        diffs.is_empty(),
        "{} of {} differ:\n{}",
        diffs.len(),
        corpus.len(),
        diffs.join("\n")
    );
}
