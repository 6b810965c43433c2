//! Request heads: httparse does the tokenising; this module adds what an
//! HTTP server must enforce on top, at least as strictly as NGINX 1.22
//! (checked against Debian's nginx; where porter is stricter, see
//! `docs/differences.md`): length limits detected even before the head is
//! complete (414 for a long request line, 400 "Request Header Or Cookie Too
//! Large" for a long header line or head), HTTP/0.9 request lines, NUL
//! bytes, obs-fold, lowercase methods, NGINX's version rules (HTTP/1.x for
//! any minor up to 999 is served as 1.1, HTTP/2+ is 505), missing, empty,
//! invalid or duplicate Host, duplicate or invalid Content-Length,
//! Content-Length together with Transfer-Encoding, Transfer-Encoding other
//! than `chunked` (501).
//!
//! A refused head names the Host it carried before the fault, if any: NGINX
//! picks the virtual server (whose settings shape the error response) as
//! soon as it has read a valid Host.

use std::fmt;
use std::ops::Range;

pub use super::head::{Headers, RequestHead};
use super::head::{Span, MAX_HEAD};

/// Protocol version of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// HTTP/1.0.
    Http10,
    /// HTTP/1.1 (and 1.x with x > 1, as NGINX and RFC 9110 2.5 accept).
    Http11,
}

/// Limits on the head (`large_client_header_buffers`, `max_headers`) and
/// how header names are judged (`ignore_invalid_headers`,
/// `underscores_in_headers`): the default server's, as in NGINX.
#[derive(Debug, Clone)]
pub struct HeadLimits {
    /// Longest request line (414 beyond).
    pub max_request_line: usize,
    /// Longest header line (400 beyond).
    pub max_header_line: usize,
    /// Longest head (400 beyond).
    pub max_head: usize,
    /// `max_headers`: most header lines kept (400 beyond).
    pub max_headers: usize,
    /// `ignore_invalid_headers`: drop a line whose name NGINX calls
    /// invalid (anything but letters, digits and `-`, and `_` without
    /// `underscores_in_headers`) instead of keeping it.
    pub ignore_invalid_headers: bool,
    /// `underscores_in_headers`: `_` is valid in a name.
    pub underscores_in_headers: bool,
}

impl Default for HeadLimits {
    fn default() -> HeadLimits {
        HeadLimits {
            max_request_line: 8192,
            max_header_line: 8192,
            max_head: 32768,
            max_headers: 1000,
            ignore_invalid_headers: true,
            underscores_in_headers: false,
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

/// A refused head: the error, and the Host (or absolute-form host) that
/// came before it, which selects the server answering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadHead {
    /// What was wrong.
    pub error: HeadError,
    /// The valid host named before the fault (port kept).
    pub host: Option<String>,
}

impl BadHead {
    /// The status sent for this error.
    pub fn status(&self) -> u16 {
        self.error.status()
    }
}

impl From<HeadError> for BadHead {
    fn from(error: HeadError) -> BadHead {
        BadHead { error, host: None }
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

/// Header lines the tokeniser takes on the stack; a head with more takes
/// them from the heap.
const STACK_HEADERS: usize = 32;

/// Parses a head from the start of `buf`: `Ok(None)` means more bytes are
/// needed.
pub fn parse_head(buf: &[u8], limits: &HeadLimits) -> Result<Option<RequestHead>, BadHead> {
    // NGINX skips empty lines before the request line.
    let skip = buf
        .iter()
        .take_while(|&&b| b == b'\r' || b == b'\n')
        .count();
    let data = &buf[skip..];
    if data.is_empty() {
        return Ok(None);
    }
    // NGINX's parser refuses a method byte that is not `A`-`Z`, `_` or
    // `-` as it reads it, without waiting for the line's end: a client
    // speaking another protocol (an uwsgi or binary packet) gets its 400
    // at once.
    let method_len = memchr::memchr(b' ', data).unwrap_or(data.len());
    if !data[..method_len].iter().all(|&b| is_method_byte(b)) {
        return Err(HeadError::Invalid("invalid method").into());
    }
    let line_end = memchr::memchr(b'\n', data);
    let req_line_len = line_end.unwrap_or(data.len());
    if req_line_len > limits.max_request_line {
        return Err(HeadError::UriTooLong.into());
    }
    let Some(line_end) = line_end else {
        return Ok(None);
    };
    let request_line = data[..line_end]
        .strip_suffix(b"\r")
        .unwrap_or(&data[..line_end]);
    let (version, version_at) = request_version(request_line)?;
    let Some((end, lines)) = head_end(data, line_end, limits)? else {
        return Ok(None);
    };
    let mut head = &data[..end];
    if memchr::memchr(0, head).is_some() {
        return Err(HeadError::Invalid("NUL byte in request head").into());
    }
    let dropped = invalid_lines(head, line_end + 1, limits);
    let patched;
    if &request_line[version_at..] != version.token() || !dropped.is_empty() {
        patched = patch_head(head, request_line, version_at, version, &dropped);
        head = &patched;
    }
    let lines = lines - dropped.len();
    if lines > limits.max_headers {
        return Err(HeadError::Invalid("client sent too many header lines").into());
    }
    if end > MAX_HEAD {
        return Err(HeadError::HeaderTooLarge.into());
    }
    // The tokeniser's slots: on the stack for the usual few lines.
    let mut stack = [httparse::EMPTY_HEADER; STACK_HEADERS];
    let mut heap = Vec::new();
    let slots = if lines <= STACK_HEADERS {
        &mut stack[..lines]
    } else {
        heap.resize(lines, httparse::EMPTY_HEADER);
        &mut heap[..]
    };
    let mut req = httparse::Request::new(slots);
    tokenise(&mut req, head)?;
    let mut out = read_request(&req, head, request_line, version)?;
    out.head_len = skip + end;
    Ok(Some(out))
}

/// The head of a tokenised request (`head`, as httparse read it; its
/// request line as sent is `request_line`): the method, the target and its
/// host, then the header lines, checked by NGINX's rules.
fn read_request(
    req: &httparse::Request<'_, '_>,
    head: &[u8],
    request_line: &[u8],
    version: Version,
) -> Result<RequestHead, BadHead> {
    let method = req.method.unwrap_or_default();
    if !is_method(method) {
        return Err(HeadError::Invalid("invalid method").into());
    }
    let target = req.path.unwrap_or_default();
    // One text for every piece: the header lines take less room in it
    // than on the wire (no `: ` and no line ends), and room is left for a
    // host to lowercase.
    let mut out = RequestHead::pooled(head.len() + 32);
    out.reserve_headers(req.headers.len());
    // httparse's target lies in `head`, whose request line starts as the
    // one sent.
    let target_at = (target.as_ptr() as usize).wrapping_sub(head.as_ptr() as usize);
    let line = out.push_lossy(request_line);
    out.set_line(line, method.len(), target_at..target_at + target.len());
    let absolute_host = match absolute_form_host(target)? {
        Some(r) => Some(host_span(
            &mut out,
            line.sub(target_at + r.start, target_at + r.end),
        )?),
        None => None,
    };
    if !target.starts_with('/') && absolute_host.is_none() {
        return Err(HeadError::Invalid("invalid request target").into());
    }
    let fields = HeaderFields::read(req.headers, &mut out, absolute_host)?;
    if version == Version::Http11 && fields.host.is_none() && absolute_host.is_none() {
        return Err(
            HeadError::Invalid("client sent HTTP/1.1 request without \"Host\" header").into(),
        );
    }
    out.chunked = fields.chunked(&out, version, absolute_host)?;
    out.keep_alive = match version {
        Version::Http11 => !fields.conn_close,
        Version::Http10 => fields.conn_keep_alive && !fields.conn_close,
    };
    out.version = version;
    out.content_length = fields.content_length;
    out.set_host(absolute_host.or(fields.host));
    Ok(out)
}

/// httparse knows only HTTP/1.0 and 1.1: `head` again with the version
/// served in its request line and without the header lines NGINX ignores
/// (`dropped`: byte ranges).
fn patch_head(
    head: &[u8],
    request_line: &[u8],
    version_at: usize,
    version: Version,
    dropped: &[(usize, usize)],
) -> Vec<u8> {
    let mut p = Vec::with_capacity(head.len());
    p.extend_from_slice(&request_line[..version_at]);
    p.extend_from_slice(version.token());
    let mut at = request_line.len();
    for &(from, to) in dropped {
        p.extend_from_slice(&head[at..from]);
        at = to;
    }
    p.extend_from_slice(&head[at..]);
    p
}

/// Where the head whose request line ends at `line_end` ends, and how
/// many header lines it has; `None` while it is incomplete. The length
/// limits apply before the head is complete.
fn head_end(
    data: &[u8],
    line_end: usize,
    limits: &HeadLimits,
) -> Result<Option<(usize, usize)>, HeadError> {
    let mut pos = line_end + 1;
    let mut complete = None;
    let mut lines = 0;
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
                lines += 1;
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
    Ok(Some((end, lines)))
}

/// The header lines of `head` (starting at `from`) that NGINX ignores,
/// as byte ranges: with `ignore_invalid_headers`, a name holding anything
/// but letters, digits and `-` (and `_` with `underscores_in_headers`),
/// unless it holds a control character or space, which stays an error.
fn invalid_lines(head: &[u8], from: usize, limits: &HeadLimits) -> Vec<(usize, usize)> {
    let mut dropped = Vec::new();
    if !limits.ignore_invalid_headers {
        return dropped;
    }
    let mut pos = from;
    while let Some(i) = memchr::memchr(b'\n', &head[pos..]) {
        let line = &head[pos..pos + i];
        let name = &line[..memchr::memchr(b':', line).unwrap_or(line.len())];
        let valid = |b: u8| {
            b.is_ascii_alphanumeric() || b == b'-' || (b == b'_' && limits.underscores_in_headers)
        };
        let malformed = |b: u8| b <= 0x20 || b == 0x7f;
        if line.contains(&b':')
            && !name.is_empty()
            && !name.iter().all(|&b| valid(b))
            && !name.iter().any(|&b| malformed(b))
        {
            dropped.push((pos, pos + i + 1));
        }
        pos += i + 1;
    }
    dropped
}

/// Tokenises a complete head with httparse, naming what was malformed.
fn tokenise<'b>(req: &mut httparse::Request<'_, 'b>, head: &'b [u8]) -> Result<(), HeadError> {
    match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => Ok(()),
        Ok(httparse::Status::Partial) => Err(HeadError::Invalid("malformed request head")),
        Err(httparse::Error::Version) => Err(HeadError::Invalid("invalid HTTP version")),
        Err(httparse::Error::Token) => Err(HeadError::Invalid("invalid method")),
        Err(httparse::Error::HeaderName) => Err(HeadError::Invalid("invalid header name")),
        Err(httparse::Error::HeaderValue) => Err(HeadError::Invalid("invalid header value")),
        Err(_) => Err(HeadError::Invalid("malformed request line")),
    }
}

/// What the header lines say, as far as the server acts on it.
struct HeaderFields {
    /// The Host header, validated (in the head's text).
    host: Option<Span>,
    content_length: Option<u64>,
    transfer_encoding: Option<Span>,
    /// `Connection: close`.
    conn_close: bool,
    /// `Connection: keep-alive`.
    conn_keep_alive: bool,
}

/// A refusal of `out`'s head naming the host known so far: the request
/// line's (`absolute_host`), else the first Host header's (`host`).
fn refusal(
    error: HeadError,
    out: &RequestHead,
    absolute_host: Option<Span>,
    host: Option<Span>,
) -> BadHead {
    BadHead {
        error,
        host: absolute_host.or(host).map(|h| out.piece(h).to_string()),
    }
}

impl HeaderFields {
    /// Reads the header lines into `out`, refusing duplicate or invalid
    /// Host, Content-Length and Transfer-Encoding. A refusal names the host
    /// that picks the server once known: the request line's
    /// (`absolute_host`), else the first Host header's.
    fn read(
        lines: &[httparse::Header<'_>],
        out: &mut RequestHead,
        absolute_host: Option<Span>,
    ) -> Result<HeaderFields, BadHead> {
        let mut f = HeaderFields {
            host: None,
            content_length: None,
            transfer_encoding: None,
            conn_close: false,
            conn_keep_alive: false,
        };
        let fail = |error, out: &RequestHead, host| refusal(error, out, absolute_host, host);
        for h in lines {
            let name = h.name;
            let at = out.push_header(name, h.value);
            let value = out.piece(at);
            if name.eq_ignore_ascii_case("host") {
                if f.host.is_some() {
                    let dup = HeadError::Invalid("duplicate Host header");
                    return Err(fail(dup, out, f.host));
                }
                f.host = Some(host_span(out, at).map_err(|e| fail(e, out, f.host))?);
            } else if name.eq_ignore_ascii_case("content-length") {
                let invalid = HeadError::Invalid("invalid Content-Length header");
                if f.content_length.is_some() {
                    let dup = HeadError::Invalid("duplicate Content-Length header");
                    return Err(fail(dup, out, f.host));
                }
                if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(fail(invalid, out, f.host));
                }
                f.content_length = Some(value.parse().map_err(|_| fail(invalid, out, f.host))?);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                if f.transfer_encoding.is_some() {
                    let dup = HeadError::Invalid("duplicate Transfer-Encoding header");
                    return Err(fail(dup, out, f.host));
                }
                f.transfer_encoding = Some(at);
            } else if name.eq_ignore_ascii_case("connection") {
                for tok in value.split(',') {
                    let tok = tok.trim();
                    if tok.eq_ignore_ascii_case("close") {
                        f.conn_close = true;
                    } else if tok.eq_ignore_ascii_case("keep-alive") {
                        f.conn_keep_alive = true;
                    }
                }
            }
        }
        // NGINX keeps one Authorization (`auth_basic`, `$remote_user`) and
        // refuses a second.
        let auth = |(n, _): &(&str, &str)| n.eq_ignore_ascii_case("authorization");
        if out.headers().filter(auth).nth(1).is_some() {
            let dup = HeadError::Invalid("duplicate Authorization header");
            return Err(fail(dup, out, f.host));
        }
        Ok(f)
    }

    /// Whether the body is chunked: a Transfer-Encoding must be `chunked`
    /// (501 otherwise), on HTTP/1.1, without Content-Length.
    fn chunked(
        &self,
        out: &RequestHead,
        version: Version,
        absolute_host: Option<Span>,
    ) -> Result<bool, BadHead> {
        let Some(te) = self.transfer_encoding else {
            return Ok(false);
        };
        let fail = |error| refusal(error, out, absolute_host, self.host);
        if version == Version::Http10 {
            return Err(fail(HeadError::Invalid(
                "client sent HTTP/1.0 request with \"Transfer-Encoding\" header",
            )));
        }
        if self.content_length.is_some() {
            return Err(fail(HeadError::Invalid(
                "client sent \"Content-Length\" and \"Transfer-Encoding\" headers at the same time",
            )));
        }
        if !out.piece(te).eq_ignore_ascii_case("chunked") {
            return Err(fail(HeadError::NotImplemented));
        }
        Ok(true)
    }
}

/// NGINX's method token: uppercase letters, `_` and `-`.
fn is_method(m: &str) -> bool {
    !m.is_empty() && m.bytes().all(is_method_byte)
}

/// A byte NGINX takes in a method.
fn is_method_byte(b: u8) -> bool {
    b.is_ascii_uppercase() || b == b'_' || b == b'-'
}

/// The request line at the start of `buf`, as far as it was received
/// (NGINX logs and reports a refused request with what it read of it).
pub fn raw_request_line(buf: &[u8]) -> String {
    let skip = buf
        .iter()
        .take_while(|&&b| b == b'\r' || b == b'\n')
        .count();
    let line = &buf[skip..];
    let line = &line[..memchr::memchr(b'\n', line).unwrap_or(line.len())];
    String::from_utf8_lossy(line.strip_suffix(b"\r").unwrap_or(line)).into_owned()
}

/// The method of a request line that may be malformed or incomplete, once
/// its token is complete (NGINX knows a HEAD request, and sends its error
/// page without a body, as soon as it has read the method).
pub fn method_token(line: &str) -> Option<&str> {
    let (m, _) = line.split_once(' ')?;
    is_method(m).then_some(m)
}

impl Version {
    /// The version as httparse accepts it.
    fn token(self) -> &'static [u8] {
        match self {
            Version::Http10 => b"HTTP/1.0",
            Version::Http11 => b"HTTP/1.1",
        }
    }
}

/// The version at the end of a complete request line, by NGINX's rules:
/// `HTTP/` (uppercase), a major version starting with 1-9 (above 1: 505),
/// `.`, a minor version up to 999 (1.0 is HTTP/1.0, any other 1.x is
/// served as HTTP/1.1). Also where the version token starts.
/// A line with no version is HTTP/0.9, which porter refuses (400) rather
/// than waiting for headers that will not come.
fn request_version(line: &[u8]) -> Result<(Version, usize), HeadError> {
    let bad = HeadError::Invalid("invalid HTTP version");
    let at = match line.iter().rposition(|&b| b == b' ') {
        Some(i) if line[..i].contains(&b' ') => i + 1,
        _ => return Err(HeadError::Invalid("HTTP/0.9 request")),
    };
    let Some(rest) = line[at..].strip_prefix(b"HTTP/") else {
        return Err(bad);
    };
    match rest.first() {
        Some(b'1') => {}
        Some(b'2'..=b'9') => return Err(HeadError::VersionNotSupported),
        _ => return Err(bad),
    }
    let minor = match &rest[1..] {
        [b'0'..=b'9', ..] => return Err(HeadError::VersionNotSupported),
        [b'.', minor @ ..] if !minor.is_empty() => minor,
        _ => return Err(bad),
    };
    // NGINX refuses a minor version only once it exceeds 99 before another
    // digit, so leading zeros are allowed.
    let mut n: u32 = 0;
    for &b in minor {
        if !b.is_ascii_digit() || n > 99 {
            return Err(bad);
        }
        n = n * 10 + u32::from(b - b'0');
    }
    let version = if n == 0 {
        Version::Http10
    } else {
        Version::Http11
    };
    Ok((version, at))
}

/// The host of an absolute-form target (`scheme://host:port/path`), by
/// NGINX's request-line grammar: a name of letters, digits, `.` and `-`,
/// or an IP literal in `[ ]`; then an optional `:digits`; then `/`, `?`
/// or the end. Anything else (`_`, `%`, `@`...) is a 400, as NGINX.
/// The host's place in `target`.
fn absolute_form_host(target: &str) -> Result<Option<Range<usize>>, HeadError> {
    if target.starts_with('/') {
        return Ok(None);
    }
    let Some(n) = super::uri::scheme_len(target) else {
        return Ok(None);
    };
    let rest = &target[n..];
    let bad = HeadError::Invalid("client sent invalid host in request line");
    let b = rest.as_bytes();
    let mut i = 0;
    if b.first() == Some(&b'[') {
        i = 1;
        loop {
            match b.get(i) {
                Some(b']') => break i += 1,
                Some(&c) if c.is_ascii_alphanumeric() || b":.-_~!$&'()*+,;=".contains(&c) => i += 1,
                _ => return Err(bad),
            }
        }
    } else {
        while b
            .get(i)
            .is_some_and(|&c| c.is_ascii_alphanumeric() || c == b'.' || c == b'-')
        {
            i += 1;
        }
    }
    if b.get(i) == Some(&b':') {
        i += 1;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
    }
    match b.get(i) {
        None | Some(b'/') | Some(b'?') => Ok(Some(n..n + i)),
        _ => Err(bad),
    }
}

/// NGINX's host validation: no NUL, `/`, space, control character or
/// `..`; the name (before `:port`) lowercased and one trailing dot dropped,
/// leaving a name that is not empty. The port part is kept as sent. The
/// host the value at `value` names, in `out`'s text: that value itself
/// when it is already so.
pub(super) fn host_span(out: &mut RequestHead, value: Span) -> Result<Span, HeadError> {
    let h = out.piece(value);
    let bad = HeadError::Invalid("client sent invalid host header");
    let mut prev = 0;
    let refused = h.bytes().any(|b| {
        let two_dots = b == b'.' && prev == b'.';
        prev = b;
        two_dots || b == b'/' || b <= b' ' || b == 0x7f
    });
    if refused {
        return Err(bad);
    }
    let name_len = host_name_len(h);
    let name = &h[..name_len];
    let kept = name.strip_suffix('.').unwrap_or(name).len();
    if kept == 0 {
        return Err(bad);
    }
    if kept == name_len && !name.bytes().any(|b| b.is_ascii_uppercase()) {
        return Ok(value);
    }
    Ok(out.push_lowered(value.sub(0, kept), value.sub(name_len, h.len())))
}

/// The length of the name in a Host value: up to the first `:`, or through
/// the `]` of an IPv6 literal (NGINX's rule).
pub fn host_name_len(h: &str) -> usize {
    let mut literal = false;
    for (i, b) in h.bytes().enumerate() {
        match b {
            b'[' if i == 0 => literal = true,
            b']' if literal => return i + 1,
            b':' if !literal => return i,
            _ => {}
        }
    }
    h.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &[u8]) -> Result<Option<RequestHead>, BadHead> {
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
        assert_eq!(r.method(), "GET");
        assert_eq!(r.target(), "/a?b");
        assert_eq!(r.line(), "GET /a?b HTTP/1.1");
        assert_eq!(r.host(), Some("example.com"));
        assert!(r.keep_alive);
        assert_eq!(r.head_len, 47);
        assert_eq!(r.headers().nth(1), Some(("X", "1")));
    }

    #[test]
    fn a_bad_method_byte_is_refused_before_the_line_ends() {
        // An uwsgi packet (modifier1 0, then a little-endian size): no
        // line end to wait for.
        assert_eq!(status(b"\0\x20\0\0\x0b\0REQUEST"), 400);
        assert_eq!(status(b"\x16\x03\x01"), 400);
        assert_eq!(status(b"GEt"), 400);
        assert!(parse(b"GET").unwrap().is_none());
        assert!(parse(b"\r\nPOST /a").unwrap().is_none());
    }

    #[test]
    fn invalid_header_names_as_nginx() {
        let req = b"GET / HTTP/1.1\r\nHost: x\r\nX_U: 1\r\nX.D: 2\r\nX@Y: 3\r\nOk-1: 4\r\n\r\n";
        let names = |l: &HeadLimits| -> Vec<String> {
            let r = parse_head(req, l).unwrap().unwrap();
            assert_eq!(r.head_len, req.len());
            r.headers().map(|(n, _)| n.to_string()).collect()
        };
        let mut l = HeadLimits::default();
        assert_eq!(names(&l), ["Host", "Ok-1"]);
        l.underscores_in_headers = true;
        assert_eq!(names(&l), ["Host", "X_U", "Ok-1"]);
        // Kept, as NGINX with `ignore_invalid_headers off`; httparse
        // still refuses what is not an RFC 9110 token.
        l.ignore_invalid_headers = false;
        assert_eq!(parse_head(req, &l).unwrap_err().status(), 400);
        let ok = b"GET / HTTP/1.1\r\nHost: x\r\nX_U: 1\r\nX.D: 2\r\n\r\n";
        assert_eq!(parse_head(ok, &l).unwrap().unwrap().headers().len(), 3);
        // A space or control character in a name stays an error.
        let bad = b"GET / HTTP/1.1\r\nHost: x\r\nX Y: 1\r\n\r\n";
        assert_eq!(status(bad), 400);
    }

    #[test]
    fn max_headers_counts_kept_lines() {
        let l = HeadLimits {
            max_headers: 3,
            ..HeadLimits::default()
        };
        let three = b"GET / HTTP/1.1\r\nHost: x\r\nA: 1\r\nB_: 2\r\nC: 3\r\n\r\n";
        assert!(parse_head(three, &l).unwrap().is_some());
        let four = b"GET / HTTP/1.1\r\nHost: x\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
        assert_eq!(parse_head(four, &l).unwrap_err().status(), 400);
    }

    #[test]
    fn a_second_authorization_is_refused() {
        let two = b"GET / HTTP/1.1\r\nHost: x\r\nAuthorization: a\r\nauthorization: b\r\n\r\n";
        assert_eq!(status(two), 400);
        assert!(parse(b"GET / HTTP/1.1\r\nHost: x\r\nAuthorization: a\r\n\r\n").is_ok());
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
        assert_eq!(status(b"GET / HTTP/2\r\nHost: x\r\n\r\n"), 505);
        assert_eq!(status(b"GET / HTTP/10.0\r\nHost: x\r\n\r\n"), 505);
        let version = |v: &str| {
            let req = format!("GET / {v}\r\nHost: x\r\n\r\n");
            parse(req.as_bytes()).map(|h| h.unwrap().version)
        };
        assert_eq!(version("HTTP/1.0"), Ok(Version::Http10));
        assert_eq!(version("HTTP/1.00"), Ok(Version::Http10));
        // Later 1.x minors are served as 1.1, as nginx does.
        assert_eq!(version("HTTP/1.2"), Ok(Version::Http11));
        assert_eq!(version("HTTP/1.999"), Ok(Version::Http11));
        assert_eq!(version("HTTP/1.0999"), Ok(Version::Http11));
        for bad in [
            "HTTP/1.1000",
            "HTTP/01.1",
            "HTTP/0.9",
            "HTTP/1.",
            "HTTP/1",
            "HTTP/1.1x",
            "http/1.1",
            "HTTX/1.1",
        ] {
            assert_eq!(version(bad).unwrap_err().status(), 400, "{bad}");
        }
    }

    #[test]
    fn method_of_a_bad_request() {
        let line = raw_request_line(b"\r\nHEAD /x HTTP/9\r\nHost: a\r\n");
        assert_eq!(line, "HEAD /x HTTP/9");
        assert_eq!(method_token(&line), Some("HEAD"));
        assert_eq!(method_token("head /x HTTP/1.1"), None);
        assert_eq!(method_token("GET"), None);
        assert_eq!(raw_request_line(b"GET /aaa"), "GET /aaa");
    }

    #[test]
    fn http09_is_refused_without_waiting_for_headers() {
        assert_eq!(parse(b"GET /a.txt\r\n").unwrap_err().status(), 400);
        assert_eq!(parse(b"GET\r\n").unwrap_err().status(), 400);
    }

    #[test]
    fn hosts_as_nginx_validates_them() {
        let host = |h: &str| {
            let req = format!("GET / HTTP/1.1\r\nHost: {h}\r\n\r\n");
            parse(req.as_bytes()).map(|r| r.unwrap().host().unwrap().to_string())
        };
        assert_eq!(host("Example.COM.:8080"), Ok("example.com:8080".into()));
        assert_eq!(host(".example.com"), Ok(".example.com".into()));
        assert_eq!(host("a\\b"), Ok("a\\b".into()));
        assert_eq!(host("[::1]:80"), Ok("[::1]:80".into()));
        for bad in ["", ".", "a..b", "a b", "a\x01b", "a\x7fb", "a/b"] {
            assert_eq!(host(bad).unwrap_err().status(), 400, "{bad:?}");
        }
        assert_eq!(&"x:y:z"[..host_name_len("x:y:z")], "x");
        assert_eq!(&"[::1]:80"[..host_name_len("[::1]:80")], "[::1]");
    }

    #[test]
    fn errors_name_the_host_read_before_them() {
        let e =
            parse(b"GET / HTTP/1.1\r\nHost: A.example\r\nContent-Length: x\r\n\r\n").unwrap_err();
        assert_eq!(e.host.as_deref(), Some("a.example"));
        let e = parse(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n").unwrap_err();
        assert_eq!(e.host.as_deref(), Some("a"));
        let e = parse(b"GET http://h/ HTTP/1.1\r\nContent-Length: x\r\n\r\n").unwrap_err();
        assert_eq!(e.host.as_deref(), Some("h"));
        let e = parse(b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n").unwrap_err();
        assert_eq!(e.host, None);
        let e = parse(b"GET / HTTP/1.1\r\n\r\n").unwrap_err();
        assert_eq!(e.host, None);
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
        assert_eq!(parse(&long).unwrap_err().error, HeadError::UriTooLong);
        let mut hdr = b"GET / HTTP/1.1\r\nHost: x\r\nX: ".to_vec();
        hdr.extend(std::iter::repeat_n(b'a', 9000));
        assert_eq!(parse(&hdr).unwrap_err().error, HeadError::HeaderTooLarge);
        let mut many = b"GET / HTTP/1.1\r\nHost: x\r\n".to_vec();
        for i in 0..5000 {
            many.extend(format!("X{i}: yyyyyyy\r\n").bytes());
        }
        assert_eq!(parse(&many).unwrap_err().error, HeadError::HeaderTooLarge);
        // Many short lines are fine up to `max_headers` (1000 by default,
        // NGINX 1.29).
        let mut lots = b"GET / HTTP/1.1\r\nHost: x\r\n".to_vec();
        for i in 0..999 {
            lots.extend(format!("X{i}: y\r\n").bytes());
        }
        let mut one_more = lots.clone();
        lots.extend(b"\r\n");
        assert_eq!(parse(&lots).unwrap().unwrap().headers().len(), 1000);
        one_more.extend(b"Y: y\r\n\r\n");
        assert_eq!(parse(&one_more).unwrap_err().status(), 400);
    }

    #[test]
    fn values_read_as_lossy_utf8_then_trimmed() {
        let values: [&[u8]; 6] = [
            b"plain",
            b" \t spaced\t ",
            b"a\xffb\xe2\x82",
            b"\xc2\xa0nbsp\xc2\xa0",
            b"\xe2\x80\x83em\xff",
            b"caf\xc3\xa9",
        ];
        for v in values {
            let mut req = b"GET / HTTP/1.1\r\nHost: x\r\nX: ".to_vec();
            req.extend_from_slice(v);
            req.extend_from_slice(b"\r\n\r\n");
            let r = parse(&req).unwrap().unwrap();
            let expected = String::from_utf8_lossy(v);
            assert_eq!(r.header("x"), Some(expected.trim()), "{v:?}");
        }
    }

    #[test]
    fn absolute_form_sets_host() {
        let r = parse(b"GET http://Foo.example:81/a HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(r.host(), Some("foo.example:81"));
    }
}
