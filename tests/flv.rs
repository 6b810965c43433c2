//! `flv` (NGINX's ngx_http_flv_module) on the real binary beside Debian's
//! nginx (the comparison is skipped, saying so, without
//! `/usr/sbin/nginx`): the whole file, `?start=N` as the 13-byte FLV
//! header then the file from byte N (ETag and length of what is sent),
//! offsets that do not apply, ranges over the spliced body, HEAD, 405,
//! and a directory declined to the static handler.

use crate::common::*;

/// The nginx-suite's `t1.flv`: 100 records of 10 bytes.
fn flv_file() -> Vec<u8> {
    (0..100)
        .flat_map(|i| format!("X{i:03}XXXXXX").into_bytes())
        .collect()
}

fn http_body(root: &str) -> String {
    format!(
        "server {{\n  listen 127.0.0.1:{{PORT}};\n  root {root};\n  \
         location ~ \\.flv$ {{ flv; }}\n  location /dir {{ flv; }}\n}}"
    )
}

fn ask(port: u16, method: &str, target: &str, extra: &str) -> Resp {
    raw(
        port,
        format!("{method} {target} HTTP/1.1\r\nHost: x\r\n{extra}Connection: close\r\n\r\n")
            .as_bytes(),
    )
}

/// Status, the headers that do not carry the time or the server's name,
/// and the body.
fn seen(r: &Resp) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut h: Vec<(String, String)> = r
        .headers
        .iter()
        .filter(|(n, _)| !matches!(n.to_ascii_lowercase().as_str(), "date" | "server"))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
        .collect();
    h.sort();
    (r.status, h, r.body.clone())
}

const CASES: &[(&str, &str, &str)] = &[
    ("GET", "/t1.flv", ""),
    ("GET", "/t1.flv?start=100", ""),
    ("GET", "/t1.flv?a=1&start=990", ""),
    ("GET", "/t1.flv?START=10", ""),
    ("GET", "/t1.flv?start=1000", ""),
    ("GET", "/t1.flv?start=abc", ""),
    ("GET", "/t1.flv?start=", ""),
    ("HEAD", "/t1.flv?start=100", ""),
    ("GET", "/t1.flv?start=100", "Range: bytes=0-9\r\n"),
    ("GET", "/t1.flv?start=100", "Range: bytes=-10\r\n"),
    ("GET", "/t1.flv?start=100", "Range: bytes=0-99\r\n"),
    ("GET", "/t1.flv?start=100", "Range: bytes=13-22\r\n"),
    ("GET", "/t1.flv?start=100", "Range: bytes=5-20\r\n"),
    ("GET", "/t1.flv?start=100", "Range: bytes=2000-\r\n"),
    ("GET", "/t1.flv", "Range: bytes=0-9,20-29\r\n"),
    ("GET", "/none.flv", ""),
];

#[test]
fn start_sends_the_flv_header_then_the_file_from_the_offset() {
    let docroot = TempDir::new("flv");
    docroot.write("t1.flv", flv_file());
    docroot.write("dir/a.txt", "a");
    set_mode(docroot.path(), 0o755);
    let body = http_body(docroot.path().to_str().unwrap());
    let srv = Server::start(&one_worker_conf(&body));
    let r = ask(srv.port, "GET", "/t1.flv?start=100", "");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("913"));
    assert!(r
        .body
        .starts_with(b"FLV\x01\x05\x00\x00\x00\x09\x00\x00\x00\x00X010"));
    let r = ask(
        srv.port,
        "GET",
        "/t1.flv?start=100",
        "Range: bytes=0-99\r\n",
    );
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("bytes 0-99/913"));
    assert_eq!(&r.body[13..17], b"X010");
    assert_eq!(
        ask(srv.port, "POST", "/t1.flv", "Content-Length: 0\r\n").status,
        405
    );
    assert_eq!(ask(srv.port, "GET", "/dir", "").status, 301);
    let Some(ngx) = Nginx::start(&body) else {
        eprintln!("skipping the comparison: {NGINX} is not installed");
        return;
    };
    for (method, target, extra) in CASES {
        let (p, n) = (
            ask(srv.port, method, target, extra),
            ask(ngx.port, method, target, extra),
        );
        if p.status >= 400 {
            // Error pages name the server.
            assert_eq!(p.status, n.status, "{method} {target} {extra:?}");
            continue;
        }
        assert_eq!(seen(&p), seen(&n), "{method} {target} {extra:?}");
    }
}

#[test]
fn flv_is_a_location_directive_without_arguments() {
    let e = config_error(&one_worker_conf(
        "server { listen 127.0.0.1:1; location / { flv on; } }",
    ));
    assert!(
        e.contains("invalid number of arguments in \"flv\" directive"),
        "{e}"
    );
    let e = config_error(&one_worker_conf("flv;"));
    assert!(e.contains("\"flv\" directive is not allowed here"), "{e}");
}
