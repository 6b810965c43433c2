//! The charset filter on the real binary against Debian's nginx (skipped,
//! saying so, without `/usr/sbin/nginx`), with NGINX's own tables from
//! `conf/` (`include koi-utf`, `koi-win`, `win-utf`): a koi8-r file
//! recoded to UTF-8 and to windows-1251, a UTF-8 file to koi8-r, a
//! proxied response that names its charset (`override_charset`), and the
//! label alone on the `charset_types`; recoding before gzip.

use crate::common::origin::{Origin, Reply};
use crate::common::{one_worker_conf, raw, Nginx, Resp, Server, TempDir};

/// Every koi8-r letter, the euro sign, `ё`, and ASCII around them.
fn koi8_text() -> Vec<u8> {
    let mut v = b"<p>koi8-r: ".to_vec();
    v.extend(0xc0u8..=0xff);
    v.extend_from_slice(b" euro \x80 yo \xa3 end</p>\n");
    v.repeat(2000)
}

fn conf(root: &std::path::Path, origin: u16) -> String {
    let confdir = concat!(env!("CARGO_MANIFEST_DIR"), "/conf");
    format!(
        "include {confdir}/koi-utf;\ninclude {confdir}/koi-win;\ninclude {confdir}/win-utf;\n\
         types {{ text/html html; text/plain txt; application/octet-stream bin; }}\n\
         server {{\n  listen 127.0.0.1:{{PORT}};\n  root {root};\n\
           location /k/ {{ source_charset koi8-r; charset utf-8; }}\n\
           location /w/ {{ alias {root}/k/; source_charset koi8-r; charset windows-1251; }}\n\
           location /u/ {{ source_charset utf-8; charset koi8-r; }}\n\
           location /label/ {{ alias {root}/k/; charset koi8-r; }}\n\
           location /gz/ {{ alias {root}/k/; source_charset koi8-r; charset utf-8; gzip on; }}\n\
           location /p/ {{ proxy_pass http://127.0.0.1:{origin}; charset utf-8; override_charset on; }}\n\
           location /q/ {{ proxy_pass http://127.0.0.1:{origin}; charset utf-8; }}\n\
         }}",
        root = root.display()
    )
}

fn porter(http_body: &str) -> Server {
    Server::start(&one_worker_conf(http_body))
}

fn get(port: u16, path: &str) -> Resp {
    raw(
        port,
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

fn seen(r: &Resp) -> Vec<(&'static str, Option<String>)> {
    ["content-type", "content-length", "transfer-encoding"]
        .into_iter()
        .map(|n| (n, r.header(n).map(str::to_string)))
        .collect()
}

#[test]
fn koi8_r_is_recoded_as_nginx_recodes_it() {
    let root = TempDir::new("charset");
    let koi = koi8_text();
    root.write("k/page.html", &koi);
    root.write("k/plain.bin", &koi);
    let utf8_text = "<p>utf-8: абвгд ёЁ € and ☃ snow</p>\n".repeat(500);
    root.write("u/page.html", utf8_text.as_bytes());
    let koi_body = koi.clone();
    let origin = Origin::start(move |_| {
        let mut r = Reply::ok(&koi_body);
        r.headers = vec![("Content-Type".into(), "text/html; charset=koi8-r".into())];
        r
    });
    let body = conf(root.path(), origin.port);
    let srv = porter(&body);
    // What porter does, stated on its own.
    let r = get(srv.port, "/k/page.html");
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(r.header("content-length"), None);
    let text = String::from_utf8(r.body.clone()).expect("UTF-8");
    assert!(
        text.contains("юабцдефгхийклмнопярстужвьызшэщчъЮАБЦДЕФГХИЙКЛМНОПЯРСТУЖВЬЫЗШЭЩЧЪ"),
        "{}",
        &text[..200]
    );
    assert!(text.contains("euro € yo ё end"));
    let w = get(srv.port, "/w/page.html");
    assert_eq!(
        w.header("content-length"),
        Some(koi.len().to_string().as_str())
    );
    let Some(ngx) = Nginx::start(&body) else {
        eprintln!("skipping the comparison: /usr/sbin/nginx is not installed");
        return;
    };
    for path in [
        "/k/page.html",
        "/k/plain.bin",
        "/w/page.html",
        "/u/page.html",
        "/label/page.html",
        "/p/x",
        "/q/x",
    ] {
        let p = get(srv.port, path);
        let n = get(ngx.port, path);
        assert_eq!(p.status, n.status, "{path}");
        assert_eq!(seen(&p), seen(&n), "{path}: headers");
        assert!(p.body == n.body, "{path}: body differs");
    }
    // Recoded, then gzipped: the decoded bodies agree.
    let gz = |port| {
        raw(
            port,
            b"GET /gz/page.html HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAccept-Encoding: gzip\r\n\r\n",
        )
    };
    let (p, n) = (gz(srv.port), gz(ngx.port));
    assert_eq!(seen(&p), seen(&n), "gzip: headers");
    assert_eq!(p.header("content-encoding"), Some("gzip"));
    assert_eq!(gunzip(&p.body), gunzip(&n.body), "gzip: decoded bodies");
    assert_eq!(gunzip(&p.body), r.body, "gzip: the recoded page");
}

fn gunzip(b: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(b)
        .read_to_end(&mut out)
        .expect("a gzip stream");
    out
}
