//! A request head as porter keeps it: one string holding the pieces the
//! server reads again (the request line, each header's name and value, the
//! host as the server names it) and spans into it, as NGINX keeps a
//! request's strings in its one pool. A keep-alive request allocated about
//! a dozen small strings here before, each a malloc, a copy and a free,
//! and enough of them spilled glibc's tcache into the fastbins that larger
//! allocations ran `malloc_consolidate`. Now an HTTP/1.1 head allocates
//! nothing in the steady state: its text is a buffer from the worker's free
//! list (`buffers`), handed back when the request ends, and the header
//! spans sit inline (`smallvec`) up to [`INLINE_HEADERS`] lines.
//!
//! The HTTP/1.1 parser (`request.rs`) and HTTP/2 (`http2/request.rs`) build
//! a head the same way: `with_capacity`, `push` the pieces, then set the
//! spans; everything else only reads it through the accessors.

use std::ops::Range;

use smallvec::SmallVec;

use super::buffers;
use super::request::{method_token, Version};

/// Header lines whose spans a head holds without allocating: more than
/// real clients send but for the odd proxy chain or cookie-laden browser.
pub const INLINE_HEADERS: usize = 16;

/// Where one piece lies in the head's text (byte offsets). `u32` keeps
/// the header list small; a head's text stays below 4 GiB ([`MAX_TEXT`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Span {
    at: u32,
    end: u32,
}

impl Span {
    fn range(self) -> Range<usize> {
        self.at as usize..self.end as usize
    }

    /// The part of this span from `from` to `to` (offsets within it).
    pub(super) fn sub(self, from: usize, to: usize) -> Span {
        let len = self.end - self.at;
        let clamp = |n: usize| self.at + u32::try_from(n).unwrap_or(len).min(len);
        Span {
            at: clamp(from),
            end: clamp(to.max(from)),
        }
    }
}

/// The longest text a head holds: what a `u32` span reaches.
const MAX_TEXT: usize = u32::MAX as usize;

/// The longest head the parsers accept (`large_client_header_buffers`
/// keeps real ones far below it): each of its bytes takes at most three
/// in the text (U+FFFD for a byte that is not UTF-8), and the host may be
/// written once more, lowercased, so its text stays within [`MAX_TEXT`].
pub(super) const MAX_HEAD: usize = MAX_TEXT / 4;

/// A parsed request head.
#[derive(Debug)]
pub struct RequestHead {
    /// The pieces below point into this.
    text: String,
    /// `text` came from the worker's free list and goes back to it.
    pooled: bool,
    /// The request line as sent, without its line end.
    line: Span,
    /// The method, within `line`.
    method: Span,
    /// The request target as sent, within `line`.
    target: Span,
    /// Header names and values in the order received.
    headers: SmallVec<[(Span, Span); INLINE_HEADERS]>,
    /// The host that picks the server, if any.
    host: Option<Span>,
    /// Version.
    pub version: Version,
    /// Content-Length.
    pub content_length: Option<u64>,
    /// `Transfer-Encoding: chunked`.
    pub chunked: bool,
    /// Whether the client allows keep-alive.
    pub keep_alive: bool,
    /// Bytes of the head, leading empty lines and final CRLF included.
    pub head_len: usize,
    /// An HTTP/2 extended CONNECT for WebSocket (RFC 8441): it asks for
    /// an upgrade as an HTTP/1.1 request's `Upgrade` does.
    pub extended_connect: bool,
}

impl RequestHead {
    /// An empty head whose text can take `capacity` bytes without growing;
    /// HTTP/1.1, no body, not kept alive.
    pub(super) fn with_capacity(capacity: usize) -> RequestHead {
        RequestHead::with_text(String::with_capacity(capacity.min(MAX_TEXT)), false)
    }

    /// An empty head whose text is a buffer from the worker's free list
    /// (grown to `capacity` if need be), handed back when the head is
    /// dropped: what the HTTP/1.1 parser makes, one per request.
    pub(super) fn pooled(capacity: usize) -> RequestHead {
        // The list's buffers are empty, hence valid UTF-8.
        let mut text = String::from_utf8(buffers::take()).unwrap_or_default();
        text.reserve(capacity.min(MAX_TEXT));
        RequestHead::with_text(text, true)
    }

    fn with_text(text: String, pooled: bool) -> RequestHead {
        RequestHead {
            text,
            pooled,
            line: Span::default(),
            method: Span::default(),
            target: Span::default(),
            headers: SmallVec::new(),
            host: None,
            version: Version::Http11,
            content_length: None,
            chunked: false,
            keep_alive: false,
            head_len: 0,
            extended_connect: false,
        }
    }

    /// Appends `s` to the text and returns its span (an empty one past
    /// [`MAX_TEXT`], which a head within [`MAX_HEAD`] never reaches).
    pub(super) fn push(&mut self, s: &str) -> Span {
        self.push_all(&[s])
    }

    /// The span of the text from `at` to its end.
    fn since(&self, at: usize) -> Span {
        Span {
            at: at as u32,
            end: self.text.len() as u32,
        }
    }

    /// Appends `parts` one after the other and returns the span of them
    /// all.
    pub(super) fn push_all(&mut self, parts: &[&str]) -> Span {
        let at = self.text.len();
        if at + parts.iter().map(|p| p.len()).sum::<usize>() > MAX_TEXT {
            return Span::default();
        }
        for p in parts {
            self.text.push_str(p);
        }
        self.since(at)
    }

    /// Sets the request line: `line`, whose method is its first
    /// `method_len` bytes and whose target is `target` (offsets in it).
    pub(super) fn set_line(&mut self, line: Span, method_len: usize, target: Range<usize>) {
        self.line = line;
        self.method = line.sub(0, method_len);
        self.target = line.sub(target.start, target.end);
    }

    /// Appends `bytes` as text, as `String::from_utf8_lossy` reads them
    /// (a sequence that is not UTF-8 becomes U+FFFD); returns its span.
    pub(super) fn push_lossy(&mut self, bytes: &[u8]) -> Span {
        let at = self.text.len();
        if at + 3 * bytes.len() > MAX_TEXT {
            return Span::default();
        }
        // Nearly every value is valid: one check and one copy, not the
        // chunk walk (issue 31).
        if let Ok(s) = std::str::from_utf8(bytes) {
            self.text.push_str(s);
            return self.since(at);
        }
        for chunk in bytes.utf8_chunks() {
            self.text.push_str(chunk.valid());
            if !chunk.invalid().is_empty() {
                self.text.push(char::REPLACEMENT_CHARACTER);
            }
        }
        self.since(at)
    }

    /// `span` without the whitespace `str::trim` removes.
    fn trimmed(&self, span: Span) -> Span {
        let s = self.piece(span);
        let start = s.len() - s.trim_start().len();
        span.sub(start, s.trim_end().len())
    }

    /// Appends a header line: its name as sent, its value as
    /// [`push_lossy`](Self::push_lossy) reads it, trimmed as by
    /// `str::trim`; returns the value's span.
    pub(super) fn push_header(&mut self, name: &str, value: &[u8]) -> Span {
        let name = self.push(name);
        let value = self.push_lossy(value);
        let value = self.trimmed(value);
        self.headers.push((name, value));
        value
    }

    /// Appends a header line whose value is kept as it is (HTTP/2's
    /// joined cookies and `:authority`); returns the value's span.
    pub(super) fn push_header_str(&mut self, name: &str, value: &str) -> Span {
        let name = self.push(name);
        let value = self.push(value);
        self.headers.push((name, value));
        value
    }

    /// Appends the text of `name` lowercased (ASCII letters only), then
    /// that of `port` as it is; returns the span of both.
    pub(super) fn push_lowered(&mut self, name: Span, port: Span) -> Span {
        let at = self.text.len();
        if at + (name.end - name.at) as usize + (port.end - port.at) as usize > MAX_TEXT {
            return Span::default();
        }
        self.text.extend_from_within(name.range());
        self.text[at..].make_ascii_lowercase();
        self.text.extend_from_within(port.range());
        self.since(at)
    }

    /// Moves the last header line to the front (HTTP/2's `:authority`
    /// standing for a Host header comes first, as NGINX adds it).
    pub(super) fn last_header_first(&mut self) {
        if let Some(last) = self.headers.pop() {
            self.headers.insert(0, last);
        }
    }

    /// Sets the host that picks the server.
    pub(super) fn set_host(&mut self, host: Option<Span>) {
        self.host = host;
    }

    /// Reserves room for `n` header lines.
    pub(super) fn reserve_headers(&mut self, n: usize) {
        self.headers.reserve_exact(n);
    }

    /// The text of `span` (one of this head's).
    pub(super) fn piece(&self, span: Span) -> &str {
        self.text.get(span.range()).unwrap_or("")
    }

    /// The request line as sent, without its line end (`$request`).
    pub fn line(&self) -> &str {
        self.piece(self.line)
    }

    /// The method as sent (`$request_method`).
    pub fn method(&self) -> &str {
        self.piece(self.method)
    }

    /// The request target as sent (`$request_uri`).
    pub fn target(&self) -> &str {
        self.piece(self.target)
    }

    /// Host (from an absolute-form target, else the Host header),
    /// lowercased, trailing dot removed, port kept.
    pub fn host(&self) -> Option<&str> {
        self.host.map(|h| self.piece(h))
    }

    /// The header lines in order, as (name, value): names as sent,
    /// values trimmed, non-UTF-8 bytes replaced.
    pub fn headers(&self) -> Headers<'_> {
        Headers {
            head: self,
            spans: self.headers.iter(),
        }
    }

    /// The value of the first header line named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        // Called a few times a request (conditional headers, `Range`,
        // `Expect`): a line of another length is passed over without
        // slicing its text (issue 31: a tenth of a static request's
        // instructions went to this scan).
        let text = self.text.as_bytes();
        self.headers
            .iter()
            .find(|(n, _)| {
                (n.end - n.at) as usize == name.len()
                    && text
                        .get(n.range())
                        .is_some_and(|b| b.eq_ignore_ascii_case(name.as_bytes()))
            })
            .map(|&(_, v)| self.piece(v))
    }

    /// Every header line named `name` (case-insensitive), joined with
    /// `, ` as a proxy cache compares them for `Vary`.
    pub fn header_joined(&self, name: &str) -> Option<String> {
        let mut out: Option<String> = None;
        for (_, v) in self.headers().filter(|(n, _)| n.eq_ignore_ascii_case(name)) {
            match &mut out {
                Some(o) => {
                    o.push_str(", ");
                    o.push_str(v);
                }
                None => out = Some(v.to_string()),
            }
        }
        out
    }

    /// A head refused before it was parsed: nothing known but the request
    /// line as received, its method if that much is valid, and the host,
    /// if one came before the fault.
    pub fn unparsed(line: &str, host: Option<&str>) -> RequestHead {
        let mut head = RequestHead::with_capacity(line.len() + host.map_or(0, str::len));
        let span = head.push(line);
        let method = method_token(line).map_or(0, str::len);
        head.set_line(span, method, 0..0);
        if let Some(h) = host {
            let h = head.push(h);
            head.set_host(Some(h));
        }
        head
    }
}

impl Clone for RequestHead {
    /// A copy with a text of its own, not from the free list.
    fn clone(&self) -> RequestHead {
        RequestHead {
            text: self.text.clone(),
            pooled: false,
            line: self.line,
            method: self.method,
            target: self.target,
            headers: self.headers.clone(),
            host: self.host,
            version: self.version,
            content_length: self.content_length,
            chunked: self.chunked,
            keep_alive: self.keep_alive,
            head_len: self.head_len,
            extended_connect: self.extended_connect,
        }
    }
}

impl Drop for RequestHead {
    fn drop(&mut self) {
        if self.pooled {
            buffers::give(std::mem::take(&mut self.text).into_bytes());
        }
    }
}

/// The header lines of a [`RequestHead`], in order.
#[derive(Clone)]
pub struct Headers<'a> {
    head: &'a RequestHead,
    spans: std::slice::Iter<'a, (Span, Span)>,
}

impl<'a> Iterator for Headers<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<(&'a str, &'a str)> {
        let &(n, v) = self.spans.next()?;
        Some((self.head.piece(n), self.head.piece(v)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.spans.size_hint()
    }
}

impl ExactSizeIterator for Headers<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_read_back_from_one_text() {
        let mut h = RequestHead::with_capacity(8);
        let line = h.push("GET /a?b HTTP/1.1");
        h.set_line(line, 3, 4..8);
        let v = h.push_header("Host", b" Example.COM\t");
        h.push_header("X", b"1 \xff ");
        let host = h.push("example.com");
        h.set_host(Some(host));
        assert_eq!(h.line(), "GET /a?b HTTP/1.1");
        assert_eq!(h.method(), "GET");
        assert_eq!(h.target(), "/a?b");
        assert_eq!(h.host(), Some("example.com"));
        assert_eq!(h.piece(v), "Example.COM");
        let all: Vec<_> = h.headers().collect();
        assert_eq!(all, [("Host", "Example.COM"), ("X", "1 \u{fffd}")]);
        assert_eq!(h.headers().len(), 2);
        assert_eq!(h.header("x"), Some("1 \u{fffd}"));
        assert_eq!(h.header("y"), None);
        h.last_header_first();
        assert_eq!(h.headers().next(), Some(("X", "1 \u{fffd}")));
        let lowered = h.push_lowered(v.sub(0, 7), v.sub(11, 11));
        assert_eq!(h.piece(lowered), "example");
        let lowered = h.push_lowered(v.sub(0, 3), v.sub(7, 11));
        assert_eq!(h.piece(lowered), "exa.COM");
        let blank = h.push_header("Y", b" \t ");
        assert_eq!(h.piece(blank), "");
    }

    #[test]
    fn an_unparsed_head_keeps_a_valid_method_only() {
        let h = RequestHead::unparsed("HEAD /x HTTP/9", Some("a"));
        assert_eq!((h.method(), h.target(), h.host()), ("HEAD", "", Some("a")));
        assert_eq!(h.line(), "HEAD /x HTTP/9");
        let h = RequestHead::unparsed("head /x", None);
        assert_eq!((h.method(), h.host()), ("", None));
    }

    #[test]
    fn a_pooled_text_goes_back_to_the_free_list_and_a_copy_does_not() {
        let mut h = RequestHead::pooled(8);
        let line = h.push("GET / HTTP/1.1");
        h.set_line(line, 3, 4..5);
        let text = h.text.as_ptr();
        let copy = h.clone();
        assert_eq!(copy.line(), "GET / HTTP/1.1");
        drop(copy);
        drop(h);
        let next = buffers::take();
        assert!(next.is_empty());
        assert_eq!(next.as_ptr(), text);
        // The list is empty again (a new buffer), the copy's text freed.
        assert_eq!(buffers::take().capacity(), 1024);
    }

    #[test]
    fn spans_stay_inside_their_piece() {
        let s = Span { at: 2, end: 5 };
        assert_eq!(s.sub(1, 2), Span { at: 3, end: 4 });
        assert_eq!(s.sub(1, 9), Span { at: 3, end: 5 });
        assert_eq!(s.sub(4, 1), Span { at: 5, end: 5 });
    }
}
