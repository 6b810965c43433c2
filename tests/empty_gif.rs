//! `empty_gif`: the 43-byte GIF NGINX's module answers, on the real binary
//! beside Debian's nginx (the comparison is skipped, saying so, without
//! `/usr/sbin/nginx`): the bytes, `image/gif`, NGINX's fixed
//! `Last-Modified` and the 304 it gives, no ranges, and 405 for a POST.

use crate::common::*;

const HTTP: &str =
    "server {\n  listen 127.0.0.1:{PORT};\n  location = /pixel.gif { empty_gif; }\n}";

fn ask(port: u16, method: &str, extra: &str) -> Resp {
    raw(
        port,
        format!(
            "{method} /pixel.gif HTTP/1.1\r\nHost: x\r\n{extra}Content-Length: 0\r\nConnection: close\r\n\r\n"
        )
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

#[test]
fn the_gif_is_nginx_s() {
    let srv = Server::start(&one_worker_conf(HTTP));
    let r = ask(srv.port, "GET", "");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("image/gif"));
    assert_eq!(
        r.header("last-modified"),
        Some("Mon, 28 Sep 1970 06:00:00 GMT")
    );
    assert_eq!(r.body.len(), 43);
    assert!(r.body.starts_with(b"GIF89a") && r.body.ends_with(b";"));
    let cases = [
        ("GET", ""),
        ("HEAD", ""),
        ("GET", "Range: bytes=0-9\r\n"),
        (
            "GET",
            "If-Modified-Since: Mon, 28 Sep 1970 06:00:00 GMT\r\n",
        ),
        ("POST", ""),
    ];
    assert_eq!(ask(srv.port, "GET", cases[2].1).status, 200);
    assert_eq!(ask(srv.port, "GET", cases[3].1).status, 304);
    assert_eq!(ask(srv.port, "POST", "").status, 405);
    let Some(ngx) = Nginx::start(HTTP) else {
        eprintln!("skipping the comparison: {NGINX} is not installed");
        return;
    };
    for (method, extra) in cases {
        let (p, n) = (ask(srv.port, method, extra), ask(ngx.port, method, extra));
        if p.status == 405 {
            // The error page's body names the server.
            assert_eq!(n.status, 405);
            continue;
        }
        assert_eq!(seen(&p), seen(&n), "{method} {extra:?}");
    }
}
