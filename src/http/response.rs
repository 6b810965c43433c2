//! A response as handlers describe it, and its serialisation into a head in
//! NGINX's header order. Handlers never touch the socket: the connection
//! loop writes the head and then the body source.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

pub use crate::h1::header;
pub use crate::h1::stream::{is_logged, logged_error, BodyStream, ChunkFuture};

use super::range::Multipart;
use super::status;
use crate::disk::OpenFile;

/// Where the body comes from.
#[derive(Debug)]
pub enum Body {
    /// No body.
    Empty,
    /// Bytes in memory.
    Bytes(Vec<u8>),
    /// `len` bytes of `file` starting at `start`.
    File {
        /// The open file.
        file: Rc<OpenFile>,
        /// First byte.
        start: u64,
        /// Byte count.
        len: u64,
        /// The file's path, for the lines that name it (a cached
        /// response's is its cache file, not `$request_filename`).
        path: Rc<str>,
    },
    /// Bytes in memory, then `len` bytes of `file` from `start`: NGINX's
    /// chain of a memory buffer and a file buffer (the flv module's header
    /// before the file's tail, the mp4 module's rewritten `moov` before
    /// the `mdat` range).
    Spliced {
        /// The bytes sent first.
        lead: Rc<[u8]>,
        /// The open file.
        file: Rc<OpenFile>,
        /// First byte of the file's part.
        start: u64,
        /// Byte count of the file's part.
        len: u64,
        /// The file's path, for the lines that name it.
        path: Rc<str>,
    },
    /// A `multipart/byteranges` body over `file`.
    Multipart {
        /// The open file.
        file: Rc<OpenFile>,
        /// Part headers and ranges.
        parts: Multipart,
    },
    /// A body produced while it is sent (a proxied response), `len` bytes
    /// when known.
    Stream(StreamBody),
}

/// The streaming body of a response (a `RefCell` because the connection
/// loop writes a response it holds by shared reference).
pub struct StreamBody(pub RefCell<Box<dyn BodyStream>>);

impl StreamBody {
    /// Wraps `s`.
    pub fn new(s: Box<dyn BodyStream>) -> StreamBody {
        StreamBody(RefCell::new(s))
    }

    /// The stream itself, to wrap it (a cache fill, a filter) or to read it
    /// elsewhere before the response is sent.
    pub fn into_inner(self) -> Box<dyn BodyStream> {
        self.0.into_inner()
    }
}

impl std::fmt::Debug for StreamBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StreamBody")
    }
}

impl Body {
    /// The body's length in bytes.
    pub fn len(&self) -> u64 {
        match self {
            Body::Empty => 0,
            Body::Bytes(b) => b.len() as u64,
            Body::File { len, .. } => *len,
            Body::Spliced { lead, len, .. } => lead.len() as u64 + *len,
            Body::Multipart { parts, .. } => parts.content_length(),
            Body::Stream(_) => 0,
        }
    }

    /// True when the body has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// When the head of a streamed body is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadTiming {
    /// At once when the first piece is not at hand: the body may be a
    /// while coming, and the client sees the status meanwhile.
    AtOnce,
    /// With the body's first piece (NGINX's `postpone_output`, which a
    /// sliced body relies on: one that fails before then leaves nothing
    /// sent, and the connection closes).
    WithFirstPiece,
}

/// A response description.
#[derive(Debug)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: Option<Arc<str>>,
    /// `Content-Length` (None: no header, e.g. 304).
    pub content_length: Option<u64>,
    /// `Last-Modified` (seconds since the epoch).
    pub last_modified: Option<i64>,
    /// `Location`.
    pub location: Option<String>,
    /// `ETag`.
    pub etag: Option<String>,
    /// Other headers, in order (`Expires`, `add_header`, `Content-Range`…).
    pub headers: Vec<(String, String)>,
    /// The body may be served in ranges (a file); the range filter decides.
    pub allow_ranges: bool,
    /// Whether to send `Accept-Ranges: bytes` (set by the range filter).
    pub accept_ranges: bool,
    /// The body.
    pub body: Body,
    /// Close the connection after this response.
    pub close: bool,
    /// Send the body with chunked transfer coding (a streamed body of
    /// unknown length to an HTTP/1.1 client).
    pub chunked: bool,
    /// `headers` carry the upstream's own `Server` / `Date` lines
    /// (`proxy_pass_header`): porter's are left out, as NGINX leaves out
    /// its own.
    pub own_server: bool,
    /// See `own_server`.
    pub own_date: bool,
    /// `last_modified` came as a header line (a proxied response) and
    /// goes out there, among `headers`, not in its own slot (NGINX's
    /// `headers_out.last_modified` element).
    pub last_modified_inline: bool,
    /// The upstream's reason phrase and the status it came with: sent
    /// instead of the built-in one while the status is unchanged (NGINX
    /// passes a proxied status line as received; a filter that turns the
    /// response into a 304 or 206 also drops it).
    pub reason: Option<(u16, String)>,
    /// The not-modified filter leaves it alone: a proxied response the
    /// cache does not take (NGINX's `r->disable_not_modified`).
    pub no_not_modified: bool,
    /// When the head of a streamed body leaves ([`HeadTiming`]).
    pub head_timing: HeadTiming,
    /// `add_trailer` applies: the chunked body ends with trailer fields
    /// the connection renders after the body, not with the plain last
    /// chunk (NGINX's `expect_trailers`).
    pub trailers: bool,
    /// A `101 Switching Protocols` the client asked for: after the head,
    /// the connection becomes a tunnel to the upstream ([`super::tunnel`]).
    /// Boxed: rare, and a response is built per request.
    pub upgrade: Option<Box<super::tunnel::Upgrade>>,
    /// The pace of the body in bytes a second, in place of the location's
    /// `limit_rate` (an upstream's `X-Accel-Limit-Rate`).
    pub limit_rate: Option<u64>,
    /// The handler set the type itself, as NGINX's proxy replaces
    /// `headers_out.content_type`: a type carried over an
    /// `X-Accel-Redirect` gives way (static files and `return` keep the
    /// carried one, as NGINX's `ngx_http_set_content_type` does).
    pub own_type: bool,
    /// The charset the charset filter labels (and recodes) the response
    /// with whatever its type (an upstream's `X-Accel-Charset`).
    pub override_charset: Option<String>,
    /// NGINX's own page for an error status ([`Response::special`]): a
    /// subrequest answering with one sent nothing of its own, so an SSI
    /// `include ... stub=` takes its place.
    pub special: bool,
}

impl Response {
    /// An empty response with `status`.
    pub fn new(status: u16) -> Response {
        Response {
            status,
            content_type: None,
            content_length: Some(0),
            last_modified: None,
            location: None,
            etag: None,
            headers: Vec::new(),
            allow_ranges: false,
            accept_ranges: false,
            body: Body::Empty,
            close: false,
            chunked: false,
            own_server: true,
            own_date: true,
            last_modified_inline: false,
            reason: None,
            no_not_modified: false,
            head_timing: HeadTiming::AtOnce,
            trailers: false,
            upgrade: None,
            limit_rate: None,
            own_type: false,
            override_charset: None,
            special: false,
        }
    }

    /// A response with an in-memory body.
    pub fn bytes(status: u16, content_type: &str, body: Vec<u8>) -> Response {
        let mut r = Response::new(status);
        r.content_type = Some(Arc::from(content_type));
        r.content_length = Some(body.len() as u64);
        r.body = Body::Bytes(body);
        r
    }

    /// NGINX's built-in page for `status` (empty body for statuses without
    /// one).
    pub fn special(status: u16, server_tokens: bool) -> Response {
        match status::error_page_body(status, server_tokens) {
            Some(page) => {
                // NGINX's internal 494 (head too large), 495/496 (client
                // certificate bad / missing) and 497 (plain HTTP to an
                // HTTPS port) go out as 400.
                let code = if matches!(status, 494..=497) {
                    400
                } else {
                    status
                };
                let mut r = Response::bytes(code, "text/html", page.into_bytes());
                r.close = status::forces_close(status);
                r.special = true;
                r
            }
            None => {
                let mut r = Response::new(status);
                r.close = status::forces_close(status);
                r.special = true;
                r
            }
        }
    }

    /// Value of an extra header (case-insensitive), for `$sent_http_*`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What the connection does once a response is out, as its head says
/// (`Connection: keep-alive` or `close`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persistence {
    /// The connection waits for the next request.
    KeepAlive,
    /// The connection closes.
    Close,
}

impl Persistence {
    /// [`Persistence::KeepAlive`] when `keep_alive`.
    pub fn keep_alive_if(keep_alive: bool) -> Persistence {
        if keep_alive {
            Persistence::KeepAlive
        } else {
            Persistence::Close
        }
    }
}

/// How the connection frames the response.
pub struct HeadOptions<'a> {
    /// Keep the connection open afterwards.
    pub keep_alive: bool,
    /// `Keep-Alive: timeout=N` (seconds), when configured.
    pub keep_alive_header: Option<u64>,
    /// `server_tokens`.
    pub server_tokens: bool,
    /// The `Date` value.
    pub date: &'a str,
}

/// Appends `v` in decimal (no allocation, unlike `to_string`).
pub(crate) fn push_decimal(out: &mut Vec<u8>, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// Serialises the head of `r` into `out`, in NGINX's order: Server, Date,
/// Content-Type, Content-Length, Last-Modified, Location,
/// Transfer-Encoding, Connection,
/// Keep-Alive, ETag, the extra headers, Accept-Ranges.
pub fn write_head(r: &Response, o: &HeadOptions<'_>, out: &mut Vec<u8>) {
    match &r.reason {
        Some((code, text)) if *code == r.status && !text.is_empty() => {
            status::status_line_with(r.status, text, out)
        }
        _ => status::status_line(r.status, out),
    }
    if r.own_server {
        out.extend_from_slice(if o.server_tokens {
            concat!("Server: porter/", env!("CARGO_PKG_VERSION"), "\r\n").as_bytes()
        } else {
            b"Server: porter\r\n"
        });
    }
    if r.own_date {
        header(out, "Date", o.date);
    }
    if let Some(ct) = &r.content_type {
        header(out, "Content-Type", ct);
    }
    if let Some(len) = r.content_length {
        out.extend_from_slice(b"Content-Length: ");
        push_decimal(out, len);
        out.extend_from_slice(b"\r\n");
    }
    if let (Some(lm), false) = (r.last_modified, r.last_modified_inline) {
        crate::util::time::with_date_of(lm, |d| header(out, "Last-Modified", d));
    }
    if let Some(loc) = &r.location {
        header(out, "Location", loc);
    }
    // Only a streamed body is chunked: a filter that turned the response
    // into a 304 left none.
    if r.chunked && matches!(r.body, Body::Stream(_)) {
        out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
    }
    header(out, "Connection", connection_field(r.status, o.keep_alive));
    if o.keep_alive && r.status != 101 {
        if let Some(t) = o.keep_alive_header {
            header(out, "Keep-Alive", &format!("timeout={t}"));
        }
    }
    if let Some(e) = &r.etag {
        header(out, "ETag", e);
    }
    for (n, v) in &r.headers {
        header(out, n, v);
    }
    if r.accept_ranges {
        out.extend_from_slice(b"Accept-Ranges: bytes\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// The `Connection` field of an HTTP/1.x head: NGINX's header filter,
/// where a 101 says `upgrade` whatever the rest.
fn connection_field(status: u16, keep_alive: bool) -> &'static str {
    match (status, keep_alive) {
        (101, _) => "upgrade",
        (_, true) => "keep-alive",
        (_, false) => "close",
    }
}

impl Response {
    /// NGINX's chunked filter: with `chunked_transfer_encoding off` a body
    /// of unknown length ends with the connection (and no trailers).
    pub fn unchunk_unless(&mut self, chunked_transfer_encoding: bool) {
        if self.chunked && !chunked_transfer_encoding {
            (self.chunked, self.trailers, self.close) = (false, false, true);
        }
    }

    /// The header lines as sent, for `$sent_http_NAME`: the handler's
    /// own and the fields the head writes from their slots.
    pub fn sent_headers(&self) -> Vec<(String, String)> {
        let mut v = self.headers.clone();
        if let Some(ct) = &self.content_type {
            v.push(("Content-Type".into(), ct.to_string()));
        }
        if let Some(l) = self.content_length {
            v.push(("Content-Length".into(), l.to_string()));
        }
        if let Some(l) = &self.location {
            v.push(("Location".into(), l.clone()));
        }
        if let Some(e) = &self.etag {
            v.push(("ETag".into(), e.clone()));
        }
        if let (Some(lm), false) = (self.last_modified, self.last_modified_inline) {
            v.push(("Last-Modified".into(), crate::util::time::http_date(lm)));
        }
        if self.accept_ranges {
            v.push(("Accept-Ranges".into(), "bytes".into()));
        }
        v
    }

    /// [`sent_headers`](Self::sent_headers) and the fields an HTTP/1.x
    /// head adds (`keep_alive`: the connection stays open), as NGINX's
    /// `$sent_http_connection` and `$sent_http_transfer_encoding` read
    /// them.
    pub fn sent_headers_h1(&self, keep_alive: bool) -> Vec<(String, String)> {
        let mut v = self.sent_headers();
        if self.chunked && matches!(self.body, Body::Stream(_)) {
            v.push(("Transfer-Encoding".into(), "chunked".into()));
        }
        let connection = connection_field(self.status, keep_alive);
        v.push(("Connection".into(), connection.into()));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_order_follows_nginx() {
        let mut r = Response::bytes(200, "text/html", b"hi".to_vec());
        r.last_modified = Some(0);
        r.etag = Some("\"0-2\"".into());
        r.headers.push(("X-A".into(), "1".into()));
        r.accept_ranges = true;
        let mut out = Vec::new();
        write_head(
            &r,
            &HeadOptions {
                keep_alive: true,
                keep_alive_header: None,
                server_tokens: false,
                date: "Thu, 01 Jan 1970 00:00:00 GMT",
            },
            &mut out,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "HTTP/1.1 200 OK\r\nServer: porter\r\nDate: Thu, 01 Jan 1970 00:00:00 GMT\r\nContent-Type: text/html\r\nContent-Length: 2\r\nLast-Modified: Thu, 01 Jan 1970 00:00:00 GMT\r\nConnection: keep-alive\r\nETag: \"0-2\"\r\nX-A: 1\r\nAccept-Ranges: bytes\r\n\r\n"
        );
    }

    #[test]
    fn a_101_says_connection_upgrade_as_nginx() {
        let mut r = Response::new(101);
        r.content_length = None;
        r.reason = Some((101, "Switching Protocols".into()));
        r.headers.push(("Upgrade".into(), "websocket".into()));
        let mut out = Vec::new();
        write_head(
            &r,
            &HeadOptions {
                keep_alive: false,
                keep_alive_header: Some(5),
                server_tokens: false,
                date: "Thu, 01 Jan 1970 00:00:00 GMT",
            },
            &mut out,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "HTTP/1.1 101 Switching Protocols\r\nServer: porter\r\nDate: Thu, 01 Jan 1970 00:00:00 GMT\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n"
        );
    }
}
