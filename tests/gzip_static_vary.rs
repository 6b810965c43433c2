//! `gzip_static on` with `gzip_vary on`: a `.gz` found marks the request
//! (NGINX's `r->gzip_vary`), so `Vary: Accept-Encoding` goes on whatever
//! answers it — the `.gz`, the plain file for a client that does not take
//! gzip, a 304, and a 404 when only the `.gz` exists — and on nothing
//! else. Compared with Debian's nginx on the same files.

use crate::common::{one_worker_conf, raw, Nginx, Resp, Server, TempDir};

fn req(port: u16, path: &str, extra: &str) -> Resp {
    let head = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{extra}\r\n");
    raw(port, head.as_bytes())
}

/// The status and the headers that matter here, in order.
fn shape(r: &Resp) -> (u16, Vec<(String, String)>) {
    let kept = ["vary", "content-encoding", "etag", "content-length"];
    let headers = r
        .headers
        .iter()
        .filter(|(n, _)| kept.contains(&n.to_ascii_lowercase().as_str()))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
        .collect();
    (r.status, headers)
}

#[test]
fn gzip_static_marks_every_answer_with_vary_as_nginx_does() {
    let root = TempDir::new("gzip-static-vary");
    root.write("both.html", "<p>plain page, long enough</p>\n");
    root.write("both.html.gz", b"\x1f\x8bnot really gzip");
    root.write("only.html.gz", b"\x1f\x8bonly the gz");
    root.write("plain.html", "<p>no gz beside me</p>\n");
    let body = format!(
        "types {{ text/html html; }}\n  server {{\n    listen 127.0.0.1:{{PORT}};\n    \
         root {};\n    gzip_static on; gzip_vary on; etag off;\n  }}",
        root.path().display()
    );
    let srv = Server::start(&one_worker_conf(&body));
    let cases = [
        ("/both.html", "Accept-Encoding: gzip\r\n", true),
        ("/both.html", "", true),
        ("/only.html", "", true),
        ("/plain.html", "Accept-Encoding: gzip\r\n", false),
        ("/missing.html", "", false),
    ];
    for (path, extra, vary) in cases {
        let p = req(srv.port, path, extra);
        let v = p.header("vary");
        assert_eq!(v.is_some(), vary, "{path} {extra:?}: {:?}", p.headers);
    }
    assert_eq!(req(srv.port, "/only.html", "").status, 404);
    let Some(ngx) = Nginx::start(&body) else {
        eprintln!("nginx not installed: compared with porter's own rules only");
        return;
    };
    let lm = req(srv.port, "/both.html", "");
    let since = lm.header("last-modified").unwrap().to_string();
    let conditional = format!("If-Modified-Since: {since}\r\n");
    for (path, extra) in cases
        .iter()
        .map(|(p, e, _)| (*p, e.to_string()))
        .chain([("/both.html", conditional)])
    {
        let p = req(srv.port, path, &extra);
        let n = req(ngx.port, path, &extra);
        assert_eq!(shape(&p), shape(&n), "{path} {extra:?}");
    }
}
