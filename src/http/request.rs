//! Request heads: httparse does the tokenising; this module adds what an
//! HTTP server must enforce on top, at least as strictly as NGINX 1.22
//! (checked against Debian's nginx, see `docs/design.md`, "HTTP parsing"):
//! length limits detected even before the head is complete (414 for a long
//! request line, 400 "Request Header Or Cookie Too Large" for a long header
//! line or head), NUL bytes, obs-fold, lowercase methods, HTTP/2+ in the
//! request line (505), missing or duplicate Host, duplicate or invalid
//! Content-Length, Content-Length together with Transfer-Encoding,
//! Transfer-Encoding other than `chunked` (501).

use std::fmt;

/// Protocol version of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// HTTP/1.0.
    Http10,
    /// HTTP/1.1 (and 1.x with x > 1, as NGINX accepts).
    Http11,
}

/// A parsed request head.
#[derive(Debug, Clone)]
pub struct RequestHead {
    /// Method as sent.
    pub method: String,
    /// Request target as sent.
    pub target: String,
    /// Version.
    pub version: Version,
    /// Headers in order; values are trimmed, non-UTF-8 bytes replaced.
    pub headers: Vec<(String, String)>,
    /// Host (from an absolute-form target, else the Host header), lowercased,
    /// trailing dot removed, port kept.
    pub host: Option<String>,
    /// Content-Length.
    pub content_length: Option<u64>,
    /// `Transfer-Encoding: chunked`.
    pub chunked: bool,
    /// Whether the client allows keep-alive.
    pub keep_alive: bool,
    /// Bytes of the head, leading empty lines and final CRLF included.
    pub head_len: usize,
}

/// Limits on the head (`large_client_header_buffers`).
#[derive(Debug, Clone)]
pub struct HeadLimits {
    /// Longest request line (414 beyond).
    pub max_request_line: usize,
    /// Longest header line (400 beyond).
    pub max_header_line: usize,
    /// Longest head (400 beyond).
    pub max_head: usize,
    /// Most header lines.
    pub max_headers: usize,
}

impl Default for HeadLimits {
    fn default() -> HeadLimits {
        HeadLimits {
            max_request_line: 8192,
            max_header_line: 8192,
            max_head: 32768,
            max_headers: 100,
        }
    }
}

/// Why a head was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadError {
    /// 400 with a reason for the error log.
    Invalid(&'static str),
    /// 414.
    UriTooLong,
    /// 400 "Request Header Or Cookie Too Large" (NGINX's internal 494).
    HeaderTooLarge,
    /// 505.
    VersionNotSupported,
    /// 501 (unknown Transfer-Encoding).
    NotImplemented,
}

impl HeadError {
    /// The status sent for this error.
    pub fn status(&self) -> u16 {
        match self {
            HeadError::Invalid(_) | HeadError::HeaderTooLarge => 400,
            HeadError::UriTooLong => 414,
            HeadError::VersionNotSupported => 505,
            HeadError::NotImplemented => 501,
        }
    }
}

impl fmt::Display for HeadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeadError::Invalid(why) => write!(f, "client sent invalid request: {why}"),
            HeadError::UriTooLong => f.write_str("client sent too long URI"),
            HeadError::HeaderTooLarge => f.write_str("client sent too long header line"),
            HeadError::VersionNotSupported => f.write_str("client sent unsupported HTTP version"),
            HeadError::NotImplemented => f.write_str("client sent unknown \"Transfer-Encoding\""),
        }
    }
}

/// Parses a head from the start of `buf`: `Ok(None)` means more bytes are
/// needed.
pub fn parse_head(buf: &[u8], limits: &HeadLimits) -> Result<Option<RequestHead>, HeadError> {
    // NGINX skips empty lines before the request line.
    let skip = buf
        .iter()
        .take_while(|&&b| b == b'\r' || b == b'\n')
        .count();
    let data = &buf[skip..];
    if data.is_empty() {
        return Ok(None);
    }
    let line_end = memchr::memchr(b'\n', data);
    let req_line_len = line_end.unwrap_or(data.len());
    if req_line_len > limits.max_request_line {
        return Err(HeadError::UriTooLong);
    }
    let Some(line_end) = line_end else {
        return Ok(None);
    };
    check_version(&data[..line_end])?;
    // Header lines: length limits apply before the head is complete.
    let mut pos = line_end + 1;
    let mut complete = None;
    loop {
        match memchr::memchr(b'\n', &data[pos..]) {
            Some(i) => {
                let line = &data[pos..pos + i];
                if line.len() > limits.max_header_line {
                    return Err(HeadError::HeaderTooLarge);
                }
                pos += i + 1;
                if line.is_empty() || line == b"\r" {
                    complete = Some(pos);
                    break;
                }
            }
            None => {
                if data.len() - pos > limits.max_header_line {
                    return Err(HeadError::HeaderTooLarge);
                }
                break;
            }
        }
        if pos > limits.max_head {
            return Err(HeadError::HeaderTooLarge);
        }
    }
    let Some(end) = complete else {
        if data.len() > limits.max_head {
            return Err(HeadError::HeaderTooLarge);
        }
        return Ok(None);
    };
    if end > limits.max_head + line_end + 1 {
        return Err(HeadError::HeaderTooLarge);
    }
    let head = &data[..end];
    if memchr::memchr(0, head).is_some() {
        return Err(HeadError::Invalid("NUL byte in request head"));
    }
    let mut hdrs = vec![httparse::EMPTY_HEADER; limits.max_headers];
    let mut req = httparse::Request::new(&mut hdrs);
    match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err(HeadError::Invalid("malformed request head")),
        Err(httparse::Error::TooManyHeaders) => return Err(HeadError::HeaderTooLarge),
        Err(httparse::Error::Version) => return Err(HeadError::Invalid("invalid HTTP version")),
        Err(httparse::Error::Token) => return Err(HeadError::Invalid("invalid method")),
        Err(httparse::Error::HeaderName) => return Err(HeadError::Invalid("invalid header name")),
        Err(httparse::Error::HeaderValue) => {
            return Err(HeadError::Invalid("invalid header value"))
        }
        Err(_) => return Err(HeadError::Invalid("malformed request line")),
    }
    let method = req.method.unwrap_or_default();
    if method.is_empty()
        || !method
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b == b'_' || b == b'-')
    {
        return Err(HeadError::Invalid("invalid method"));
    }
    let target = req.path.unwrap_or_default();
    let absolute_host = absolute_form_host(target)?;
    if !target.starts_with('/') && absolute_host.is_none() {
        return Err(HeadError::Invalid("invalid request target"));
    }
    let version = if req.version == Some(0) {
        Version::Http10
    } else {
        Version::Http11
    };

    let mut headers = Vec::with_capacity(req.headers.len());
    let mut host: Option<String> = None;
    let mut content_length: Option<u64> = None;
    let mut transfer_encoding: Option<String> = None;
    let mut conn_close = false;
    let mut conn_keep_alive = false;
    for h in req.headers.iter() {
        let value = String::from_utf8_lossy(h.value).trim().to_string();
        let name = h.name;
        if name.eq_ignore_ascii_case("host") {
            if host.is_some() {
                return Err(HeadError::Invalid("duplicate Host header"));
            }
            host = Some(validate_host(&value)?);
        } else if name.eq_ignore_ascii_case("content-length") {
            if content_length.is_some() {
                return Err(HeadError::Invalid("duplicate Content-Length header"));
            }
            if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
                return Err(HeadError::Invalid("invalid Content-Length header"));
            }
            content_length = Some(
                value
                    .parse()
                    .map_err(|_| HeadError::Invalid("invalid Content-Length header"))?,
            );
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            if transfer_encoding.is_some() {
                return Err(HeadError::Invalid("duplicate Transfer-Encoding header"));
            }
            transfer_encoding = Some(value.clone());
        } else if name.eq_ignore_ascii_case("connection") {
            for tok in value.split(',') {
                let tok = tok.trim();
                if tok.eq_ignore_ascii_case("close") {
                    conn_close = true;
                } else if tok.eq_ignore_ascii_case("keep-alive") {
                    conn_keep_alive = true;
                }
            }
        }
        headers.push((name.to_string(), value));
    }
    if let Some(h) = absolute_host {
        host = Some(validate_host(&h)?);
    }
    if version == Version::Http11 && host.is_none() {
        return Err(HeadError::Invalid(
            "client sent HTTP/1.1 request without \"Host\" header",
        ));
    }
    let mut chunked = false;
    if let Some(te) = transfer_encoding {
        if version == Version::Http10 {
            return Err(HeadError::Invalid(
                "client sent HTTP/1.0 request with \"Transfer-Encoding\" header",
            ));
        }
        if content_length.is_some() {
            return Err(HeadError::Invalid(
                "client sent \"Content-Length\" and \"Transfer-Encoding\" headers at the same time",
            ));
        }
        if !te.eq_ignore_ascii_case("chunked") {
            return Err(HeadError::NotImplemented);
        }
        chunked = true;
    }
    let keep_alive = match version {
        Version::Http11 => !conn_close,
        Version::Http10 => conn_keep_alive && !conn_close,
    };
    Ok(Some(RequestHead {
        method: method.to_string(),
        target: target.to_string(),
        version,
        headers,
        host,
        content_length,
        chunked,
        keep_alive,
        head_len: skip + end,
    }))
}

/// 505 for HTTP/2 and later in the request line, as NGINX answers; other
/// malformed versions are left to httparse (400).
fn check_version(line: &[u8]) -> Result<(), HeadError> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if let Some(i) = line.iter().rposition(|&b| b == b' ') {
        let v = &line[i + 1..];
        if let Some(rest) = v.strip_prefix(b"HTTP/") {
            let major: Vec<u8> = rest
                .iter()
                .copied()
                .take_while(u8::is_ascii_digit)
                .collect();
            if !major.is_empty() && rest.get(major.len()) == Some(&b'.') {
                let n: u64 = std::str::from_utf8(&major)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(u64::MAX);
                if n >= 2 {
                    return Err(HeadError::VersionNotSupported);
                }
            }
        }
    }
    Ok(())
}

/// The host of an absolute-form target (`http://host:port/path`).
fn absolute_form_host(target: &str) -> Result<Option<String>, HeadError> {
    let lower = target
        .get(..8)
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    let rest = if lower.starts_with("http://") {
        &target[7..]
    } else if lower.starts_with("https://") {
        &target[8..]
    } else {
        return Ok(None);
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    if end == 0 {
        return Err(HeadError::Invalid("invalid host in request line"));
    }
    Ok(Some(rest[..end].to_string()))
}

/// NGINX's host validation: lowercase, no `/`, `\`, NUL or `..`, a
/// trailing dot dropped.
fn validate_host(h: &str) -> Result<String, HeadError> {
    let bad = HeadError::Invalid("client sent invalid host header");
    if h.is_empty() {
        // An empty Host is allowed by NGINX on HTTP/1.0; treat like absent.
        return Ok(String::new());
    }
    if h.contains(['/', '\\', '\0']) || h.contains("..") || h.starts_with('.') {
        return Err(bad);
    }
    let mut s = h.to_ascii_lowercase();
    if let Some(stripped) = strip_trailing_dot(&s) {
        s = stripped;
    }
    Ok(s)
}

fn strip_trailing_dot(s: &str) -> Option<String> {
    let (host, port) = match s.rfind(':') {
        Some(i) if !s.starts_with('[') || s[..i].ends_with(']') => (&s[..i], &s[i..]),
        _ => (s, ""),
    };
    host.strip_suffix('.').map(|h| format!("{h}{port}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &[u8]) -> Result<Option<RequestHead>, HeadError> {
        parse_head(s, &HeadLimits::default())
    }

    fn status(s: &[u8]) -> u16 {
        parse(s).unwrap_err().status()
    }

    #[test]
    fn simple_and_pipelined() {
        let r = parse(b"GET /a?b HTTP/1.1\r\nHost: Example.COM.\r\nX: 1\r\n\r\nGET /next")
            .unwrap()
            .unwrap();
        assert_eq!(r.method, "GET");
        assert_eq!(r.target, "/a?b");
        assert_eq!(r.host.as_deref(), Some("example.com"));
        assert!(r.keep_alive);
        assert_eq!(r.head_len, 47);
        assert_eq!(r.headers[1], ("X".to_string(), "1".to_string()));
    }

    #[test]
    fn incomplete_needs_more() {
        assert!(parse(b"GET / HTTP/1.1\r\nHost: x\r\n").unwrap().is_none());
        assert!(parse(b"GE").unwrap().is_none());
        assert!(parse(b"\r\n").unwrap().is_none());
    }

    #[test]
    fn leading_empty_lines_and_bare_lf() {
        let r = parse(b"\r\n\r\nGET / HTTP/1.1\nHost: x\n\n")
            .unwrap()
            .unwrap();
        assert_eq!(r.head_len, 4 + 24);
    }

    #[test]
    fn keep_alive_rules() {
        assert!(
            !parse(b"GET / HTTP/1.0\r\n\r\n")
                .unwrap()
                .unwrap()
                .keep_alive
        );
        assert!(
            parse(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
                .unwrap()
                .unwrap()
                .keep_alive
        );
        assert!(
            !parse(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .unwrap()
                .unwrap()
                .keep_alive
        );
    }

    #[test]
    fn malformed_requests() {
        assert_eq!(status(b"get / HTTP/1.1\r\nHost: x\r\n\r\n"), 400);
        assert_eq!(status(b"GET / HTTP/1.1\r\n\r\n"), 400); // no Host
        assert_eq!(status(b"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n"), 400);
        assert_eq!(
            status(b"GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n"),
            400
        ); // obs-fold
        assert_eq!(status(b"GET / HTTP/1.1\r\nHost: x\r\nX: a\0b\r\n\r\n"), 400);
        assert_eq!(status(b"GET /a\0 HTTP/1.1\r\nHost: x\r\n\r\n"), 400);
        assert_eq!(status(b"GET a HTTP/1.1\r\nHost: x\r\n\r\n"), 400);
        assert_eq!(status(b"GET * HTTP/1.1\r\nHost: x\r\n\r\n"), 400);
        assert_eq!(status(b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"), 400);
        assert_eq!(status(b"GET / HTTP/1.1\r\nHost: ..\r\n\r\n"), 400);
        assert_eq!(
            status(b"GET / HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n"),
            400
        );
        assert_eq!(status(b"GET /\r\n\r\n"), 400); // HTTP/0.9 is not served
    }

    #[test]
    fn versions() {
        assert_eq!(status(b"GET / HTTP/2.0\r\nHost: x\r\n\r\n"), 505);
        assert_eq!(status(b"GET / HTTP/3.0\r\nHost: x\r\n\r\n"), 505);
        assert_eq!(
            parse(b"GET / HTTP/1.0\r\n\r\n").unwrap().unwrap().version,
            Version::Http10
        );
    }

    #[test]
    fn body_framing_conflicts() {
        assert_eq!(
            status(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            400
        );
        assert_eq!(
            status(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n"),
            400
        );
        assert_eq!(
            status(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n"),
            400
        );
        assert_eq!(
            status(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n"),
            400
        );
        assert_eq!(
            status(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n"),
            501
        );
        let r = parse(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(r.chunked);
        let r = parse(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(r.content_length, Some(12));
    }

    #[test]
    fn limits_apply_before_completion() {
        let mut long = b"GET /".to_vec();
        long.extend(std::iter::repeat_n(b'a', 9000));
        assert_eq!(parse(&long).unwrap_err(), HeadError::UriTooLong);
        let mut hdr = b"GET / HTTP/1.1\r\nHost: x\r\nX: ".to_vec();
        hdr.extend(std::iter::repeat_n(b'a', 9000));
        assert_eq!(parse(&hdr).unwrap_err(), HeadError::HeaderTooLarge);
        let mut many = b"GET / HTTP/1.1\r\nHost: x\r\n".to_vec();
        for i in 0..5000 {
            many.extend(format!("X{i}: yyyyyyy\r\n").bytes());
        }
        assert_eq!(parse(&many).unwrap_err(), HeadError::HeaderTooLarge);
    }

    #[test]
    fn absolute_form_sets_host() {
        let r = parse(b"GET http://Foo.example:81/a HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(r.host.as_deref(), Some("foo.example:81"));
    }
}
