//! An HTTP/2 (or HTTP/3) request's HEADERS turned into the [`RequestHead`] the
//! HTTP/1.1 parser produces, so that the same request context, location
//! lookup, handlers and logs serve it: `$request` reads
//! `GET /path HTTP/2.0` and `$server_protocol` `HTTP/2.0`, as in NGINX.
//! `:authority` stands for a missing Host header (NGINX builds one from
//! it); cookie crumbs (RFC 9113 8.2.3) are joined into one `Cookie`
//! header with `; `. The `h2` crate has already refused malformed
//! pseudo-headers and connection-specific fields.
//!
//! An extended CONNECT whose `:protocol` is `websocket` (RFC 8441, the
//! setting is sent when `http2 on`) reads as the HTTP/1.1 handshake it
//! stands for: `GET` with `Upgrade: websocket`, `Connection: upgrade` and
//! a fresh `Sec-WebSocket-Key` (HTTP/2 has none; the upstream's
//! `Sec-WebSocket-Accept` answers it and is dropped), so `proxy_pass` with
//! the usual `proxy_set_header Upgrade $http_upgrade` asks the upstream
//! for the upgrade and its `101` opens a tunnel on the stream
//! (`http2/tunnel.rs`).

use http::request::Parts;

use crate::http::head::Span;
use crate::http::request::{host_span, HeadError, RequestHead, Version};

/// The head of the request whose HEADERS gave `parts`.
pub fn head_of(parts: &Parts, version: &str) -> Result<RequestHead, HeadError> {
    let websocket = is_websocket_connect(parts);
    let method = if websocket {
        "GET"
    } else {
        parts.method.as_str()
    };
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let authority = parts.uri.authority().map_or("", |a| a.as_str());
    let fields: usize = parts
        .headers
        .iter()
        .map(|(n, v)| n.as_str().len() + v.len())
        .sum();
    let extra = if websocket { WEBSOCKET_FIELDS } else { 0 };
    let room =
        method.len() + target.len() + version.len() + 2 + fields + 2 * authority.len() + 8 + extra;
    let mut head = RequestHead::with_capacity(room);
    let line = head.push_all(&[method, " ", target, " ", version]);
    head.set_line(
        line,
        method.len(),
        method.len() + 1..method.len() + 1 + target.len(),
    );
    head.reserve_headers(parts.headers.len() + 4);
    let mut cookie: Option<String> = None;
    let mut size = 0;
    let mut host_header: Option<Span> = None;
    for (name, value) in &parts.headers {
        if name == http::header::COOKIE {
            let v = String::from_utf8_lossy(value.as_bytes());
            let v = v.trim();
            size += name.as_str().len() + v.len() + 4;
            match &mut cookie {
                Some(c) => {
                    c.push_str("; ");
                    c.push_str(v);
                }
                None => cookie = Some(v.to_string()),
            }
            continue;
        }
        let at = head.push_header(name.as_str(), value.as_bytes());
        size += name.as_str().len() + head.piece(at).len() + 4;
        if name == http::header::HOST && host_header.is_none() {
            host_header = Some(at);
        }
    }
    if let Some(c) = cookie {
        head.push_header_str("cookie", &c);
    }
    if websocket {
        add_websocket_fields(&mut head, parts);
    }
    let host = match (host_header, parts.uri.authority()) {
        (Some(h), _) => Some(host_span(&mut head, h)?),
        (None, Some(a)) => {
            let at = head.push_header_str("host", a.as_str());
            head.last_header_first();
            Some(host_span(&mut head, at)?)
        }
        (None, None) => None,
    };
    head.set_host(host);
    if !target.starts_with('/') {
        return Err(HeadError::Invalid("invalid request target"));
    }
    head.content_length = match head.headers().find(|(n, _)| *n == "content-length") {
        Some((_, v)) => Some(
            v.parse::<u64>()
                .map_err(|_| HeadError::Invalid("invalid Content-Length header"))?,
        ),
        None => None,
    };
    head.head_len = head.line().len() + size;
    head.version = Version::Http11;
    head.keep_alive = true;
    Ok(head)
}

/// Room for the fields a WebSocket extended CONNECT adds.
const WEBSOCKET_FIELDS: usize = 96;

/// Whether `parts` is an extended CONNECT for WebSocket (RFC 8441 4).
fn is_websocket_connect(parts: &Parts) -> bool {
    parts.method == http::Method::CONNECT
        && parts
            .extensions
            .get::<h2::ext::Protocol>()
            .is_some_and(|p| p.as_str().eq_ignore_ascii_case("websocket"))
}

/// The fields of the HTTP/1.1 handshake an extended CONNECT stands for.
fn add_websocket_fields(head: &mut RequestHead, parts: &Parts) {
    head.push_header_str("upgrade", "websocket");
    head.push_header_str("connection", "upgrade");
    if !parts.headers.contains_key("sec-websocket-key") {
        head.push_header_str("sec-websocket-key", &websocket_key());
    }
    head.extended_connect = true;
}

/// A `Sec-WebSocket-Key`: 16 random bytes in base64 (RFC 6455 4.1).
fn websocket_key() -> String {
    let mut nonce = [0u8; 16];
    // A failed draw leaves zeros: the key only proves the upstream speaks
    // WebSocket, it protects nothing here.
    let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut nonce);
    crate::access::basic::encode(&nonce)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(req: http::Request<()>) -> Parts {
        req.into_parts().0
    }

    #[test]
    fn authority_makes_the_host_and_the_line_says_http2() {
        let p = parts(
            http::Request::get("https://Example.COM:8443/a/b?x=1")
                .body(())
                .unwrap(),
        );
        let h = head_of(&p, "HTTP/2.0").unwrap();
        assert_eq!(h.line(), "GET /a/b?x=1 HTTP/2.0");
        assert_eq!(h.method(), "GET");
        assert_eq!(h.target(), "/a/b?x=1");
        assert_eq!(h.host(), Some("example.com:8443"));
        assert_eq!(h.headers().next(), Some(("host", "Example.COM:8443")));
    }

    #[test]
    fn cookie_crumbs_are_joined() {
        let p = parts(
            http::Request::get("https://a/")
                .header("cookie", "a=1")
                .header("cookie", "b=2")
                .body(())
                .unwrap(),
        );
        let h = head_of(&p, "HTTP/2.0").unwrap();
        let c: Vec<_> = h.headers().filter(|(n, _)| *n == "cookie").collect();
        assert_eq!(c, [("cookie", "a=1; b=2")]);
    }

    #[test]
    fn a_websocket_connect_reads_as_an_upgrade() {
        let mut p = parts(
            http::Request::connect("https://a.example/chat?x=1")
                .header("sec-websocket-version", "13")
                .body(())
                .unwrap(),
        );
        p.extensions.insert(h2::ext::Protocol::from("websocket"));
        let h = head_of(&p, "HTTP/2.0").unwrap();
        assert_eq!(h.line(), "GET /chat?x=1 HTTP/2.0");
        assert!(h.extended_connect);
        assert_eq!(h.header("upgrade"), Some("websocket"));
        assert_eq!(h.header("connection"), Some("upgrade"));
        assert_eq!(h.header("sec-websocket-key").map(str::len), Some(24));
        p.extensions.insert(h2::ext::Protocol::from("other"));
        assert_eq!(head_of(&p, "HTTP/2.0").unwrap().method(), "CONNECT");
    }

    #[test]
    fn a_bad_content_length_or_host_is_refused() {
        let p = parts(
            http::Request::post("https://a/")
                .header("content-length", "x")
                .body(())
                .unwrap(),
        );
        assert!(head_of(&p, "HTTP/2.0").is_err());
        let p = parts(
            http::Request::get("/")
                .header("host", "a/b")
                .body(())
                .unwrap(),
        );
        assert!(head_of(&p, "HTTP/2.0").is_err());
    }
}
