//! The header lines of proxied and cached answers: a proxied error (404,
//! 301) and a 203 keep the upstream's `Last-Modified` and reason phrase,
//! byte for byte as Debian's nginx passes them. porter before an in-test
//! origin (`tests/common/cache.rs`).

use crate::common::cache::*;
use crate::common::origin::*;
use crate::common::*;

#[test]
fn proxied_error_keeps_its_last_modified_and_reason() {
    const LM: &str = "Tue, 01 Jan 2030 00:00:00 GMT";
    let origin = Origin::start(|req| {
        match req.target.as_str() {
        "/gone" => Reply::ok(b"no").status(404).header("Last-Modified", LM),
        "/moved" => Reply::ok(b"")
            .status(301)
            .header("Location", "/x")
            .header("Last-Modified", LM),
        _ => Reply::ok(b"").framing(Framing::Raw(
            format!("HTTP/1.1 203 Non-Authoritative Information\r\nLast-Modified: {LM}\r\nContent-Length: 2\r\n\r\nok")
                .into_bytes(),
        )),
    }
    });
    let srv = Server::start(&cache_conf(origin.port));
    for path in ["/gone", "/moved", "/info"] {
        let r = get(srv.port, path);
        assert_eq!(
            r.header("Last-Modified"),
            Some(LM),
            "{path}: {:?}",
            r.headers
        );
    }
    let r = get(srv.port, "/info");
    assert_eq!(r.status_line, "HTTP/1.1 203 Non-Authoritative Information");
    // porter's own 203 has a reason phrase too (NGINX sends "203 ").
    assert_eq!(
        get(srv.port, "/two").status_line,
        "HTTP/1.1 203 Non-Authoritative Information"
    );
}

/// Debian's nginx as the reference for the Last-Modified and status-line
/// bytes of a proxied 404 and 203.
#[test]
fn nginx_passes_last_modified_and_reason_as_porter_does() {
    const LM: &str = "Tue, 01 Jan 2030 00:00:00 GMT";
    let origin = Origin::start(|req| {
        match req.target.as_str() {
        "/gone" => Reply::ok(b"no").status(404).header("Last-Modified", LM),
        _ => Reply::ok(b"").framing(Framing::Raw(
            format!("HTTP/1.1 203 Non-Authoritative Information\r\nLast-Modified: {LM}\r\nContent-Length: 2\r\n\r\nok")
                .into_bytes(),
        )),
    }
    });
    let Some(nginx) = Nginx::start(&format!(
        "server {{ listen 127.0.0.1:{{PORT}}; location / {{ proxy_pass http://127.0.0.1:{}; }} }}",
        origin.port
    )) else {
        eprintln!("skipped: nginx is not installed");
        return;
    };
    let srv = Server::start(&cache_conf(origin.port));
    for path in ["/gone", "/info"] {
        let n = get(nginx.port, path);
        let p = get(srv.port, path);
        assert_eq!(n.header("Last-Modified"), Some(LM), "nginx {path}");
        assert_eq!(
            p.header("Last-Modified"),
            n.header("Last-Modified"),
            "{path}"
        );
        assert_eq!(p.status_line, n.status_line, "{path}");
    }
}
