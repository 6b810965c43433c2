//! HTTP/1.x as a client speaks it, without I/O: the request head porter
//! sends upstream, the response head it parses (httparse), and the
//! decoding of the response body's framing (Content-Length, chunked, or
//! until close). Kept apart from the sockets so each piece is tested on
//! bytes, malformed ones included.

use crate::h1::chunked::{ChunkError, ChunkedDecoder};
use crate::h1::fields::{Fields, HeaderLines};

/// A parsed upstream response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    /// `1` for HTTP/1.1, `0` for HTTP/1.0.
    pub minor: u8,
    /// Status code.
    pub status: u16,
    /// Reason phrase and header lines in order, parsed once and shared
    /// with whatever reads them later.
    pub headers: Fields,
    /// Bytes the head took.
    pub len: usize,
}

impl ResponseHead {
    /// The first value of `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name)
    }

    /// The reason phrase.
    pub fn reason(&self) -> &str {
        self.headers.reason()
    }

    /// Whether a header `name` lists `token` (comma-separated,
    /// case-insensitive), as `Connection: close`.
    pub fn has_token(&self, name: &str, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .flat_map(|(_, v)| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }

    /// The connection may carry another request after this response.
    pub fn keep_alive(&self) -> bool {
        if self.minor == 1 {
            !self.has_token("connection", "close")
        } else {
            self.has_token("connection", "keep-alive")
        }
    }
}

/// Why a response head was refused; each maps to NGINX's log text and 502.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadError {
    /// The head does not fit `proxy_buffer_size`.
    TooBig,
    /// No valid status line.
    NoValidHeader,
    /// A malformed header line (NGINX's quote of it).
    InvalidHeader(String),
    /// A Content-Length that is not a number.
    InvalidLength(String),
    /// A second `Content-Length` or `Transfer-Encoding` line: the line and
    /// the first one, each as `Name: value`.
    Duplicate(String, String),
    /// Both `Content-Length` and `Transfer-Encoding`.
    LengthAndEncoding,
    /// A `Transfer-Encoding` other than exactly `chunked`.
    UnknownEncoding(String),
    /// `101 Switching Protocols` to a request that asked for no upgrade
    /// (RFC 9110 15.2.2: a server must not switch unasked).
    UnaskedUpgrade,
    /// A fault of an application-server protocol (FastCGI), in NGINX's
    /// words.
    Protocol(String),
    /// `fastcgi_catch_stderr` matched (the stderr line is logged already).
    CaughtStderr,
}

impl std::fmt::Display for HeadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeadError::TooBig => f.write_str("upstream sent too big header"),
            HeadError::NoValidHeader => f.write_str("upstream sent no valid HTTP/1.0 header"),
            HeadError::InvalidHeader(h) => write!(f, "upstream sent invalid header: \"{h}\""),
            HeadError::InvalidLength(v) => write!(
                f,
                "upstream sent invalid \"Content-Length\" header: \"Content-Length: {v}\""
            ),
            HeadError::Duplicate(line, prev) => write!(
                f,
                "upstream sent duplicate header line: \"{line}\", previous value: \"{prev}\""
            ),
            HeadError::LengthAndEncoding => f.write_str(
                "upstream sent \"Content-Length\" and \"Transfer-Encoding\" headers at the same time",
            ),
            HeadError::UnknownEncoding(v) => {
                write!(f, "upstream sent unknown \"Transfer-Encoding\": \"{v}\"")
            }
            HeadError::UnaskedUpgrade => f.write_str(
                "upstream sent \"101 Switching Protocols\" to a request without \"Upgrade\"",
            ),
            HeadError::Protocol(s) => f.write_str(s),
            HeadError::CaughtStderr => f.write_str("fastcgi_catch_stderr matched"),
        }
    }
}

/// Most header lines a response head may have.
const MAX_HEADERS: usize = 100;

/// Parses a response head from `buf`: `Ok(None)` when more bytes are
/// needed (and `buf` is still under `max`).
pub fn parse_response_head(buf: &[u8], max: usize) -> Result<Option<ResponseHead>, HeadError> {
    let mut storage = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut r = httparse::Response::new(&mut storage);
    match r.parse(buf) {
        Ok(httparse::Status::Complete(len)) => {
            if len > max {
                return Err(HeadError::TooBig);
            }
            Ok(Some(ResponseHead {
                minor: r.version.unwrap_or(0),
                status: r.code.unwrap_or(0),
                headers: Fields::parsed(r.reason.unwrap_or(""), r.headers),
                len,
            }))
        }
        Ok(httparse::Status::Partial) => {
            if buf.len() >= max {
                Err(HeadError::TooBig)
            } else {
                Ok(None)
            }
        }
        Err(httparse::Error::TooManyHeaders) => Err(HeadError::TooBig),
        Err(httparse::Error::Version | httparse::Error::Status) => Err(HeadError::NoValidHeader),
        Err(_) => Err(HeadError::InvalidHeader(invalid_header_text(buf))),
    }
}

fn is_token(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

/// NGINX's quote of a bad header line: the line up to the offending byte,
/// then that byte as `\xHH...` (`Bad\x20...` for `Bad Header`).
fn invalid_header_text(buf: &[u8]) -> String {
    let from = buf
        .iter()
        .position(|&c| c == b'\n')
        .map_or(buf.len(), |p| p + 1);
    invalid_line_text(buf, from)
}

/// NGINX's quote of the first bad header line of `buf` from `from`.
pub fn invalid_line_text(buf: &[u8], from: usize) -> String {
    let mut i = from;
    while i < buf.len() {
        let start = i;
        while i < buf.len() && is_token(buf[i]) {
            i += 1;
        }
        if i < buf.len() && buf[i] == b':' && i > start {
            i += 1;
            while i < buf.len() && !matches!(buf[i], b'\r' | b'\n' | 0) {
                i += 1;
            }
        }
        match (buf.get(i), buf.get(i + 1)) {
            (Some(b'\r'), Some(b'\n')) if i > start => i += 2,
            (Some(b'\n'), _) if i > start => i += 1,
            (Some(&c), _) => {
                return format!("{}\\x{c:02x}...", String::from_utf8_lossy(&buf[start..i]));
            }
            (None, _) => break,
        }
    }
    String::new()
}

/// How the response body is delimited.
#[derive(Debug, Clone)]
pub enum Framing {
    /// No body (HEAD, 1xx, 204, 304).
    Empty,
    /// `Content-Length` bytes left.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked(ChunkedDecoder),
    /// Until the upstream closes.
    Close,
    /// FastCGI records: `STDOUT` up to `END_REQUEST`.
    FastCgi(Box<super::fastcgi::BodyDecoder>),
}

/// Why a body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    /// A bad chunk.
    Chunked(ChunkError),
    /// A bad FastCGI record stream.
    FastCgi(super::fastcgi::BodyError),
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::Chunked(_) => f.write_str("upstream sent invalid chunked response"),
            BodyError::FastCgi(e) => e.fmt(f),
        }
    }
}

impl Framing {
    /// The framing of a response to a request with method `head_request`
    /// (true for HEAD): RFC 9112 section 6.3. Ambiguous framing is an
    /// invalid header, whatever the status, as in current NGINX
    /// (`ngx_http_upstream_process_content_length` and
    /// `..._transfer_encoding`): a second `Content-Length` or
    /// `Transfer-Encoding` line (even an equal one), both headers at once,
    /// a `Transfer-Encoding` other than `chunked`, a `Content-Length` that
    /// is not a number. Passing such a response on (or caching it) would
    /// let the origin and a client disagree on where it ends.
    pub fn of(head: &ResponseHead, head_request: bool) -> Result<Framing, HeadError> {
        let (length, chunked) = framing_headers(head)?;
        if head_request || head.status < 200 || head.status == 204 || head.status == 304 {
            return Ok(Framing::Empty);
        }
        Ok(match (chunked, length) {
            (true, _) => Framing::Chunked(ChunkedDecoder::new()),
            (false, Some(0)) => Framing::Empty,
            (false, Some(n)) => Framing::Length(n),
            (false, None) => Framing::Close,
        })
    }

    /// Decodes body bytes from `input` into `out`; returns the bytes
    /// consumed and whether the body is complete. Bytes past the end are
    /// left unconsumed.
    pub fn decode(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(usize, bool), BodyError> {
        match self {
            Framing::Empty => Ok((0, true)),
            Framing::Length(left) => {
                let take = (input.len() as u64).min(*left) as usize;
                out.extend_from_slice(&input[..take]);
                *left -= take as u64;
                Ok((take, *left == 0))
            }
            Framing::Chunked(dec) => dec.feed(input, Some(out)).map_err(BodyError::Chunked),
            Framing::FastCgi(dec) => dec.decode(input, out).map_err(BodyError::FastCgi),
            Framing::Close => {
                out.extend_from_slice(input);
                Ok((input.len(), false))
            }
        }
    }

    /// Whether the upstream closing now leaves a complete body.
    pub fn complete_at_eof(&self) -> bool {
        matches!(self, Framing::Close | Framing::Empty)
    }
}

/// The response's `Content-Length`, refused when ambiguous as
/// [`Framing::of`] refuses it.
pub fn content_length(head: &ResponseHead) -> Result<Option<u64>, HeadError> {
    framing_headers(head).map(|(n, _)| n)
}

/// The response's `Content-Length` and whether it is chunked, checking the
/// lines in order as NGINX's header handlers do (the first fault found is
/// the one logged).
fn framing_headers(head: &ResponseHead) -> Result<(Option<u64>, bool), HeadError> {
    let mut length: Option<(&str, &str, u64)> = None;
    let mut encoding: Option<(&str, &str)> = None;
    for (n, v) in head.headers.iter() {
        let v = v.trim();
        if n.eq_ignore_ascii_case("content-length") {
            if let Some((pn, pv, _)) = length {
                return Err(HeadError::Duplicate(
                    format!("{n}: {v}"),
                    format!("{pn}: {pv}"),
                ));
            }
            if encoding.is_some() {
                return Err(HeadError::LengthAndEncoding);
            }
            match v.parse::<u64>() {
                Ok(len) if v.bytes().all(|c| c.is_ascii_digit()) => length = Some((n, v, len)),
                _ => return Err(HeadError::InvalidLength(v.to_string())),
            }
        } else if n.eq_ignore_ascii_case("transfer-encoding") {
            if let Some((pn, pv)) = encoding {
                return Err(HeadError::Duplicate(
                    format!("{n}: {v}"),
                    format!("{pn}: {pv}"),
                ));
            }
            if length.is_some() {
                return Err(HeadError::LengthAndEncoding);
            }
            if !v.eq_ignore_ascii_case("chunked") {
                return Err(HeadError::UnknownEncoding(v.to_string()));
            }
            encoding = Some((n, v));
        }
    }
    Ok((length.map(|(_, _, n)| n), encoding.is_some()))
}

/// Serialises a request head: request line, then `headers` in order.
pub fn request_head<N: AsRef<str>, V: AsRef<str>>(
    method: &str,
    uri: &str,
    http11: bool,
    headers: &[(N, V)],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(uri.as_bytes());
    out.extend_from_slice(if http11 {
        b" HTTP/1.1\r\n"
    } else {
        b" HTTP/1.0\r\n"
    });
    for (n, v) in headers {
        crate::h1::header(&mut out, n.as_ref(), v.as_ref());
    }
    out.extend_from_slice(b"\r\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_head_and_framing() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello";
        let h = parse_response_head(raw, 4096).unwrap().unwrap();
        assert_eq!((h.minor, h.status, h.reason()), (1, 200, "OK"));
        assert_eq!(h.len, raw.len() - 5);
        assert_eq!(h.header("x-a"), Some("b"));
        assert!(h.keep_alive());
        let mut f = Framing::of(&h, false).unwrap();
        let mut out = Vec::new();
        assert_eq!(f.decode(b"hel", &mut out), Ok((3, false)));
        assert_eq!(f.decode(b"lo+extra", &mut out), Ok((2, true)));
        assert_eq!(out, b"hello");
        assert!(matches!(Framing::of(&h, true).unwrap(), Framing::Empty));
    }

    #[test]
    fn partial_too_big_and_invalid_heads() {
        assert_eq!(
            parse_response_head(b"HTTP/1.1 200 OK\r\nA: b", 4096),
            Ok(None)
        );
        assert_eq!(
            parse_response_head(&[b'x'; 10], 8),
            Err(HeadError::NoValidHeader)
        );
        let long = format!("HTTP/1.1 200 OK\r\nA: {}", "b".repeat(100));
        assert_eq!(
            parse_response_head(long.as_bytes(), 64),
            Err(HeadError::TooBig)
        );
        assert_eq!(
            parse_response_head(b"HTTP/1.1 200 OK\r\nBad Header\r\n\r\n", 4096),
            Err(HeadError::InvalidHeader("Bad\\x20...".into()))
        );
        assert_eq!(
            parse_response_head(b"SSH-2.0-OpenSSH\r\n\r\n", 4096),
            Err(HeadError::NoValidHeader)
        );
        assert_eq!(
            parse_response_head(b"HTTP/1.1 200 OK\r\nA: b\r\nX-A: b\rc\r\n\r\n", 4096),
            Err(HeadError::InvalidHeader("X-A: b\\x0d...".into()))
        );
        let h = parse_response_head(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", 4096)
            .unwrap()
            .unwrap();
        assert!(Framing::of(&h, false).is_err());
    }

    #[test]
    fn chunked_and_close_framing() {
        let h = parse_response_head(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
            4096,
        )
        .unwrap()
        .unwrap();
        assert!(!h.keep_alive());
        let mut f = Framing::of(&h, false).unwrap();
        let mut out = Vec::new();
        let body = b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\nNEXT";
        let mut used = 0;
        let mut done = false;
        for b in body.chunks(1) {
            if done {
                break;
            }
            let (n, d) = f.decode(b, &mut out).unwrap();
            used += n;
            done = d;
        }
        assert!(done);
        assert_eq!(used, body.len() - 4);
        assert_eq!(out, b"abcde");
        assert!(!f.complete_at_eof());
        let h = parse_response_head(b"HTTP/1.0 200 OK\r\n\r\n", 4096)
            .unwrap()
            .unwrap();
        assert!(!h.keep_alive());
        let f = Framing::of(&h, false).unwrap();
        assert!(matches!(f, Framing::Close));
        assert!(f.complete_at_eof());
    }

    fn framing_error(head: &str) -> Option<String> {
        let raw = format!("HTTP/1.1 200 OK\r\n{head}\r\n");
        let h = parse_response_head(raw.as_bytes(), 4096).unwrap().unwrap();
        Framing::of(&h, false).err().map(|e| e.to_string())
    }

    #[test]
    fn ambiguous_framing_is_refused_with_nginx_log_text() {
        assert_eq!(
            framing_error("Content-Length: 5\r\nContent-Length: 6\r\n").as_deref(),
            Some("upstream sent duplicate header line: \"Content-Length: 6\", previous value: \"Content-Length: 5\"")
        );
        assert!(framing_error("Content-Length: 5\r\ncontent-length: 5\r\n").is_some());
        assert_eq!(
            framing_error("Content-Length: 5\r\nTransfer-Encoding: xchunked\r\n").as_deref(),
            Some("upstream sent \"Content-Length\" and \"Transfer-Encoding\" headers at the same time")
        );
        assert!(framing_error("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n").is_some());
        assert_eq!(
            framing_error("Transfer-Encoding: gzip, chunked\r\n").as_deref(),
            Some("upstream sent unknown \"Transfer-Encoding\": \"gzip, chunked\"")
        );
        assert!(
            framing_error("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n").is_some()
        );
        assert_eq!(
            framing_error("Content-Length: -1\r\n").as_deref(),
            Some("upstream sent invalid \"Content-Length\" header: \"Content-Length: -1\"")
        );
        // Checked whatever the status (a 304 has no body, but its framing
        // headers are still read).
        let h = parse_response_head(
            b"HTTP/1.1 304 Not Modified\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            4096,
        )
        .unwrap()
        .unwrap();
        assert!(Framing::of(&h, false).is_err());
        assert_eq!(framing_error("Transfer-Encoding: Chunked\r\n"), None);
        assert_eq!(framing_error("Content-Length: 5\r\n"), None);
    }

    #[test]
    fn request_head_bytes() {
        let h = request_head("GET", "/a?b", false, &[("Host", "backend")]);
        assert_eq!(h, b"GET /a?b HTTP/1.0\r\nHost: backend\r\n\r\n");
    }
}
