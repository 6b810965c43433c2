//! An HTTP/2 request's HEADERS turned into the [`RequestHead`] the
//! HTTP/1.1 parser produces, so that the same request context, location
//! lookup, handlers and logs serve it: `$request` reads
//! `GET /path HTTP/2.0` and `$server_protocol` `HTTP/2.0`, as in NGINX.
//! `:authority` stands for a missing Host header (NGINX builds one from
//! it); cookie crumbs (RFC 9113 8.2.3) are joined into one `Cookie`
//! header with `; `. The `h2` crate has already refused malformed
//! pseudo-headers and connection-specific fields.

use http::request::Parts;

use crate::http::request::{validate_host, HeadError, RequestHead, Version};

/// The head of the request whose HEADERS gave `parts`.
pub fn head_of(parts: &Parts) -> Result<RequestHead, HeadError> {
    let method = parts.method.as_str().to_string();
    let target = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let mut headers: Vec<(String, String)> = Vec::with_capacity(parts.headers.len() + 1);
    let mut cookie: Option<String> = None;
    let mut size = 0;
    for (name, value) in &parts.headers {
        let v = String::from_utf8_lossy(value.as_bytes()).trim().to_string();
        size += name.as_str().len() + v.len() + 4;
        if name == http::header::COOKIE {
            match &mut cookie {
                Some(c) => {
                    c.push_str("; ");
                    c.push_str(&v);
                }
                None => cookie = Some(v),
            }
            continue;
        }
        headers.push((name.as_str().to_string(), v));
    }
    if let Some(c) = cookie {
        headers.push(("cookie".into(), c));
    }
    let host_header = headers.iter().find(|(n, _)| n == "host").map(|(_, v)| v);
    let host = match (host_header, parts.uri.authority()) {
        (Some(h), _) => Some(validate_host(h)?),
        (None, Some(a)) => {
            let h = validate_host(a.as_str())?;
            headers.insert(0, ("host".into(), a.as_str().to_string()));
            Some(h)
        }
        (None, None) => None,
    };
    if !target.starts_with('/') {
        return Err(HeadError::Invalid("invalid request target"));
    }
    let content_length = match headers.iter().find(|(n, _)| n == "content-length") {
        Some((_, v)) => Some(
            v.parse::<u64>()
                .map_err(|_| HeadError::Invalid("invalid Content-Length header"))?,
        ),
        None => None,
    };
    let line = format!("{method} {target} HTTP/2.0");
    Ok(RequestHead {
        head_len: line.len() + size,
        line,
        method,
        target,
        version: Version::Http11,
        headers,
        host,
        content_length,
        chunked: false,
        keep_alive: true,
    })
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
        let h = head_of(&p).unwrap();
        assert_eq!(h.line, "GET /a/b?x=1 HTTP/2.0");
        assert_eq!(h.target, "/a/b?x=1");
        assert_eq!(h.host.as_deref(), Some("example.com:8443"));
        assert_eq!(h.headers[0], ("host".into(), "Example.COM:8443".into()));
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
        let h = head_of(&p).unwrap();
        let c: Vec<_> = h.headers.iter().filter(|(n, _)| n == "cookie").collect();
        assert_eq!(c, vec![&("cookie".to_string(), "a=1; b=2".to_string())]);
    }

    #[test]
    fn a_bad_content_length_or_host_is_refused() {
        let p = parts(
            http::Request::post("https://a/")
                .header("content-length", "x")
                .body(())
                .unwrap(),
        );
        assert!(head_of(&p).is_err());
        let p = parts(
            http::Request::get("/")
                .header("host", "a/b")
                .body(())
                .unwrap(),
        );
        assert!(head_of(&p).is_err());
    }
}
