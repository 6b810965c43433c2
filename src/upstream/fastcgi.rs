//! FastCGI 1.0 records as NGINX's `fastcgi` module speaks them, without
//! I/O: the request (`BEGIN_REQUEST`, `PARAMS`, `STDIN`, always request id
//! 1, as NGINX), the response's records (`STDOUT`, `STDERR`,
//! `END_REQUEST`), the CGI header at the start of `STDOUT` (`Status:`,
//! `Location:` without a status is a 302) and the body after it
//! ([`BodyDecoder`], the [`Framing`](super::wire::Framing) of a FastCGI
//! response). The proxy's core (`handlers/proxy`) does the sockets, the
//! tries and the logs; this file only turns bytes into pieces and back.
//!
//! Written by hand: the crates on crates.io for FastCGI are servers or
//! clients with their own I/O and pooling, none keeps NGINX's semantics
//! (its error texts, `Content-Length` against `STDOUT`, stderr lines with
//! the trailing dots and newlines cut, `fastcgi_keep_conn`).

use super::wire::{self, HeadError, ResponseHead};
use crate::h1::fields::Fields;

/// `FCGI_VERSION_1`.
const VERSION: u8 = 1;
/// `FCGI_BEGIN_REQUEST`.
const BEGIN_REQUEST: u8 = 1;
/// `FCGI_END_REQUEST`.
const END_REQUEST: u8 = 3;
/// `FCGI_PARAMS`.
const PARAMS: u8 = 4;
/// `FCGI_STDIN`.
const STDIN: u8 = 5;
/// `FCGI_STDOUT`.
const STDOUT: u8 = 6;
/// `FCGI_STDERR`.
const STDERR: u8 = 7;
/// `FCGI_RESPONDER`.
const RESPONDER: u8 = 1;
/// `FCGI_KEEP_CONN`: the application keeps the connection after the
/// request (`fastcgi_keep_conn on`).
const KEEP_CONN: u8 = 1;
/// The largest record content; a multiple of 8, so such a record needs
/// no padding.
const MAX_CONTENT: usize = 65528;

/// Appends one record of `kind` holding `content` (at most 65535 bytes),
/// padded to a multiple of 8 as NGINX pads.
fn record(out: &mut Vec<u8>, kind: u8, content: &[u8]) {
    let len = content.len();
    debug_assert!(len <= 65535);
    let padding = (8 - len % 8) % 8;
    out.extend_from_slice(&[
        VERSION,
        kind,
        0,
        1,
        (len >> 8) as u8,
        len as u8,
        padding as u8,
        0,
    ]);
    out.extend_from_slice(content);
    out.resize(out.len() + padding, 0);
}

/// `BEGIN_REQUEST` for the responder role.
pub fn begin_request(out: &mut Vec<u8>, keep_conn: bool) {
    let flags = if keep_conn { KEEP_CONN } else { 0 };
    record(out, BEGIN_REQUEST, &[0, RESPONDER, flags, 0, 0, 0, 0, 0]);
}

/// A name-value pair's length: one byte below 128, else four with the
/// top bit set.
fn pair_length(out: &mut Vec<u8>, n: usize) {
    if n < 128 {
        out.push(n as u8);
    } else {
        out.extend_from_slice(&((n as u32) | 0x8000_0000).to_be_bytes());
    }
}

/// The `PARAMS` stream: the pairs in records of at most [`MAX_CONTENT`]
/// bytes, then the empty record that ends it.
pub fn params<'a>(out: &mut Vec<u8>, pairs: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) {
    let mut stream = Vec::with_capacity(1024);
    for (n, v) in pairs {
        pair_length(&mut stream, n.len());
        pair_length(&mut stream, v.len());
        stream.extend_from_slice(n);
        stream.extend_from_slice(v);
    }
    for piece in stream.chunks(MAX_CONTENT) {
        record(out, PARAMS, piece);
    }
    record(out, PARAMS, b"");
}

/// Request body bytes as `STDIN` records (nothing for an empty piece).
pub fn stdin(out: &mut Vec<u8>, data: &[u8]) {
    for piece in data.chunks(MAX_CONTENT) {
        record(out, STDIN, piece);
    }
}

/// The empty `STDIN` record that ends the request body.
pub fn stdin_end(out: &mut Vec<u8>) {
    record(out, STDIN, b"");
}

/// A record the application should not have sent; the text is NGINX's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordError {
    /// A version other than 1.
    Version(u8),
    /// A type other than STDOUT, STDERR, END_REQUEST.
    Type(u8),
    /// A request id other than 1 (high byte).
    IdHigh(u8),
    /// A request id other than 1 (low byte).
    IdLow(u8),
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::Version(v) => {
                write!(f, "upstream sent unsupported FastCGI protocol version: {v}")
            }
            RecordError::Type(t) => write!(f, "upstream sent invalid FastCGI record type: {t}"),
            RecordError::IdHigh(b) => {
                write!(
                    f,
                    "upstream sent unexpected FastCGI request id high byte: {b}"
                )
            }
            RecordError::IdLow(b) => {
                write!(
                    f,
                    "upstream sent unexpected FastCGI request id low byte: {b}"
                )
            }
        }
    }
}

/// One step of a response's record stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// A header or padding was read.
    Nothing,
    /// Bytes of `STDOUT`.
    Stdout(&'a [u8]),
    /// Bytes of `STDERR`.
    Stderr(&'a [u8]),
    /// The empty `STDOUT` record: the application's output ended.
    StdoutEnd,
    /// `END_REQUEST`, read with its padding.
    EndRequest,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Header,
    Data {
        kind: u8,
        left: usize,
        padding: usize,
    },
    Skip {
        left: usize,
        end: bool,
    },
}

/// The reader of a response's records, fed bytes as they arrive.
#[derive(Debug, Clone)]
pub struct RecordReader {
    state: State,
}

impl Default for RecordReader {
    fn default() -> Self {
        RecordReader {
            state: State::Header,
        }
    }
}

impl RecordReader {
    /// A record's 8-byte header: checked, and the state it leads to.
    fn header(&mut self, h: &[u8]) -> Result<Piece<'static>, RecordError> {
        if h[0] != VERSION {
            return Err(RecordError::Version(h[0]));
        }
        if !matches!(h[1], STDOUT | STDERR | END_REQUEST) {
            return Err(RecordError::Type(h[1]));
        }
        if h[2] != 0 {
            return Err(RecordError::IdHigh(h[2]));
        }
        if h[3] != 1 {
            return Err(RecordError::IdLow(h[3]));
        }
        let (len, padding) = ((h[4] as usize) << 8 | h[5] as usize, h[6] as usize);
        let (state, piece) = match (h[1], len) {
            (END_REQUEST, _) => (
                State::Skip {
                    left: len + padding,
                    end: true,
                },
                Piece::Nothing,
            ),
            (STDOUT, 0) => (
                State::Skip {
                    left: padding,
                    end: false,
                },
                Piece::StdoutEnd,
            ),
            (kind, left) => (
                State::Data {
                    kind,
                    left,
                    padding,
                },
                Piece::Nothing,
            ),
        };
        self.state = state;
        Ok(piece)
    }

    /// The next piece of `input`, with the bytes it took; `Ok(None)` when
    /// more bytes are needed (nothing taken).
    pub fn next<'a>(&mut self, input: &'a [u8]) -> Result<Option<(usize, Piece<'a>)>, RecordError> {
        match self.state {
            State::Header => match input.get(..8) {
                Some(h) => self.header(h).map(|p| Some((8, p))),
                None => Ok(None),
            },
            State::Data {
                kind,
                left,
                padding,
            } => {
                if left == 0 {
                    self.state = State::Skip {
                        left: padding,
                        end: false,
                    };
                    return Ok(Some((0, Piece::Nothing)));
                }
                if input.is_empty() {
                    return Ok(None);
                }
                let take = left.min(input.len());
                self.state = State::Data {
                    kind,
                    left: left - take,
                    padding,
                };
                let data = &input[..take];
                let piece = match kind {
                    STDOUT => Piece::Stdout(data),
                    _ => Piece::Stderr(data),
                };
                Ok(Some((take, piece)))
            }
            State::Skip { left: 0, end } => {
                self.state = State::Header;
                Ok(Some((
                    0,
                    if end {
                        Piece::EndRequest
                    } else {
                        Piece::Nothing
                    },
                )))
            }
            State::Skip { left, end } => {
                if input.is_empty() {
                    return Ok(None);
                }
                let take = left.min(input.len());
                self.state = State::Skip {
                    left: left - take,
                    end,
                };
                Ok(Some((take, Piece::Nothing)))
            }
        }
    }
}

/// NGINX's text of a stderr piece: trailing newlines, dots and spaces cut.
pub fn stderr_text(data: &[u8]) -> String {
    let mut end = data.len();
    while end > 1 && matches!(data[end - 1], b'\n' | b'\r' | b'.' | b' ') {
        end -= 1;
    }
    String::from_utf8_lossy(&data[..end]).into_owned()
}

/// What the head's reader found besides the head.
#[derive(Debug, Default)]
pub struct HeadReader {
    reader: RecordReader,
    /// `STDOUT` bytes not yet part of a complete CGI header.
    stdout: Vec<u8>,
    /// Raw bytes taken so far (`$upstream_bytes_received` of the head).
    taken: usize,
}

/// The CGI header of a response, and what follows it.
#[derive(Debug)]
pub struct Head {
    /// Status and header lines.
    pub head: ResponseHead,
    /// The decoder of the body, holding the `STDOUT` bytes that came with
    /// the header.
    pub body: BodyDecoder,
}

impl HeadReader {
    /// Reads records from the front of `buf` (drained as it goes) until
    /// the CGI header is complete; stderr texts are pushed on `stderr` as
    /// they come. `Ok(None)`: more bytes needed. `max` bounds the header
    /// (`fastcgi_buffer_size`).
    pub fn feed(
        &mut self,
        buf: &mut Vec<u8>,
        max: usize,
        stderr: &mut Vec<String>,
    ) -> Result<Option<Head>, HeadError> {
        let mut pos = 0;
        let result = loop {
            let (n, piece) = match self.reader.next(&buf[pos..]) {
                Ok(Some(p)) => p,
                Ok(None) => break Ok(None),
                Err(e) => break Err(HeadError::Protocol(e.to_string())),
            };
            pos += n;
            match piece {
                Piece::Nothing => {}
                Piece::Stderr(d) => stderr.push(stderr_text(d)),
                Piece::Stdout(d) => {
                    self.stdout.extend_from_slice(d);
                    match parse_cgi_head(&self.stdout, max) {
                        Ok(Some(mut head)) => {
                            let rest = self.stdout.split_off(head.len);
                            head.len = self.taken + pos;
                            let body = BodyDecoder::new(self.reader.clone(), rest);
                            break Ok(Some(Head { head, body }));
                        }
                        Ok(None) => {}
                        Err(e) => break Err(e),
                    }
                }
                Piece::StdoutEnd => {
                    break Err(HeadError::Protocol(
                        "upstream prematurely closed FastCGI stdout".into(),
                    ))
                }
                Piece::EndRequest => {
                    break Err(HeadError::Protocol(format!(
                        "upstream sent unexpected FastCGI record: {END_REQUEST}"
                    )))
                }
            }
        };
        self.taken += pos;
        buf.drain(..pos);
        result
    }
}

/// Parses a CGI header (`Name: value` lines, CRLF or LF, ending with an
/// empty line) at the start of `data`: the status from `Status:`, else
/// 302 with a `Location:`, else 200, as NGINX's
/// `ngx_http_fastcgi_process_header`.
pub fn parse_cgi_head(data: &[u8], max: usize) -> Result<Option<ResponseHead>, HeadError> {
    let mut storage = [httparse::EMPTY_HEADER; 100];
    let (len, lines) = match httparse::parse_headers(data, &mut storage) {
        Ok(httparse::Status::Complete((len, lines))) if len <= max => (len, lines),
        Ok(httparse::Status::Partial) if data.len() < max => return Ok(None),
        Ok(_) | Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooBig),
        Err(_) => return Err(HeadError::InvalidHeader(wire::invalid_line_text(data, 0))),
    };
    let find = |name: &str| {
        lines
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value))
    };
    let (status, reason) = match (find("status"), find("location")) {
        (Some(line), _) => {
            let code = line
                .get(..3)
                .filter(|c| c.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|c| c.parse::<u16>().ok())
                .ok_or_else(|| {
                    HeadError::Protocol(format!("upstream sent invalid status \"{line}\""))
                })?;
            // NGINX keeps the line as the status line when it has more
            // than the code.
            let reason = line.get(3..).map(str::trim).unwrap_or("").to_string();
            (code, reason)
        }
        (None, Some(_)) => (302, "Moved Temporarily".to_string()),
        (None, None) => (200, "OK".to_string()),
    };
    Ok(Some(ResponseHead {
        minor: 1,
        status,
        headers: Fields::parsed(&reason, lines),
        len,
    }))
}

/// Why a FastCGI response body ended badly; the text is NGINX's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    /// A bad record.
    Record(RecordError),
    /// The output ended before `Content-Length` bytes.
    Premature(&'static str),
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::Record(e) => e.fmt(f),
            BodyError::Premature(what) => write!(f, "upstream prematurely closed FastCGI {what}"),
        }
    }
}

/// The body of a FastCGI response: `STDOUT` after the CGI header, cut at
/// `Content-Length` when the header gave one (more is a warning, as
/// NGINX's), ending at `END_REQUEST` (or at the end of `STDOUT` when the
/// connection is not kept).
#[derive(Debug, Clone)]
pub struct BodyDecoder {
    reader: RecordReader,
    /// `STDOUT` bytes read with the header, not yet handed out.
    pending: Vec<u8>,
    /// Bytes `Content-Length` still allows (None: no length).
    rest: Option<u64>,
    /// The length the header gave.
    length: Option<u64>,
    /// `fastcgi_keep_conn`: read up to `END_REQUEST`.
    keep_conn: bool,
    /// The output went past `Content-Length`: what follows is dropped.
    overflowed: bool,
    /// Stderr texts and warnings to log, taken by the body's reader.
    notes: Vec<Note>,
}

/// A line the body's reader logs for the decoder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// `FastCGI sent in stderr: "..."` (error).
    Stderr(String),
    /// `upstream sent more data than specified in "Content-Length"
    /// header` (warn).
    TooMuch,
}

impl BodyDecoder {
    fn new(reader: RecordReader, pending: Vec<u8>) -> BodyDecoder {
        BodyDecoder {
            reader,
            pending,
            rest: None,
            length: None,
            keep_conn: false,
            overflowed: false,
            notes: Vec::new(),
        }
    }

    /// Sets how the body ends: the header's `Content-Length` (`Some(0)`
    /// for a 204 or 304, which have no body) and `fastcgi_keep_conn`.
    pub fn set_end(&mut self, length: Option<u64>, keep_conn: bool) {
        self.rest = length;
        self.length = length;
        self.keep_conn = keep_conn;
    }

    /// `fastcgi_keep_conn`: the connection outlives the request.
    pub fn keep_conn(&self) -> bool {
        self.keep_conn
    }

    /// The header's `Content-Length`.
    pub fn length(&self) -> Option<u64> {
        self.length
    }

    /// The lines to log, in order.
    pub fn take_notes(&mut self) -> Vec<Note> {
        std::mem::take(&mut self.notes)
    }

    fn emit(&mut self, data: &[u8], out: &mut Vec<u8>) {
        if self.overflowed {
            return;
        }
        let take = match self.rest {
            Some(r) => (r.min(data.len() as u64)) as usize,
            None => data.len(),
        };
        out.extend_from_slice(&data[..take]);
        if let Some(r) = &mut self.rest {
            *r -= take as u64;
        }
        if take < data.len() {
            self.overflowed = true;
            self.notes.push(Note::TooMuch);
        }
    }

    /// Decodes records from `input` into `out`: the bytes taken and
    /// whether the body ended.
    pub fn decode(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(usize, bool), BodyError> {
        if !self.pending.is_empty() {
            let p = std::mem::take(&mut self.pending);
            self.emit(&p, out);
        }
        let mut pos = 0;
        loop {
            let (n, piece) = match self.reader.next(&input[pos..]) {
                Ok(Some(p)) => p,
                Ok(None) => return Ok((pos, false)),
                Err(e) => return Err(BodyError::Record(e)),
            };
            pos += n;
            match piece {
                Piece::Nothing => {}
                Piece::Stdout(d) => self.emit(d, out),
                Piece::Stderr(d) => self.notes.push(Note::Stderr(stderr_text(d))),
                Piece::StdoutEnd | Piece::EndRequest if self.rest.is_some_and(|r| r > 0) => {
                    let what = match piece {
                        Piece::StdoutEnd => "stdout",
                        _ => "request",
                    };
                    return Err(BodyError::Premature(what));
                }
                Piece::StdoutEnd if !self.keep_conn => return Ok((pos, true)),
                Piece::StdoutEnd => {}
                Piece::EndRequest => return Ok((pos, true)),
            }
        }
    }
}

impl Head {
    /// The body's end as the header and the request give it: no body for
    /// a 204 or 304 (what the application sends anyway is logged and
    /// dropped, as NGINX's), `Content-Length` otherwise.
    pub fn finish(mut self, keep_conn: bool) -> Result<(ResponseHead, BodyDecoder), HeadError> {
        let length = wire::content_length(&self.head)?;
        let length = match self.head.status {
            204 | 304 => Some(0),
            _ => length,
        };
        self.body.set_end(length, keep_conn);
        Ok((self.head, self.body))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(kind: u8, content: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        record(&mut v, kind, content);
        v
    }

    fn end_request() -> Vec<u8> {
        rec(END_REQUEST, &[0, 0, 0, 0, 0, 0, 0, 0])
    }

    #[test]
    fn request_records_are_padded_and_lengths_encoded() {
        let mut out = Vec::new();
        begin_request(&mut out, true);
        assert_eq!(out, [1, 1, 0, 1, 0, 8, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0]);
        out.clear();
        let long = [b'v'; 200];
        params(&mut out, [(&b"A"[..], &b"b"[..]), (&b"L"[..], &long[..])]);
        // A=b: 1+1+1+1 = 4 bytes; L: 1 + 4 + 1 + 200 = 206; total 210.
        assert_eq!(&out[..8], &[1, PARAMS, 0, 1, 0, 210, 6, 0]);
        assert_eq!(&out[8..12], b"\x01\x01Ab");
        assert_eq!(&out[12..18], b"\x01\x80\x00\x00\xc8L");
        assert_eq!(out.len(), 8 + 210 + 6 + 8);
        assert_eq!(&out[out.len() - 8..], &[1, PARAMS, 0, 1, 0, 0, 0, 0]);
        out.clear();
        stdin(&mut out, &vec![0u8; 70000]);
        assert_eq!(&out[4..6], &[0xff, 0xf8]);
        assert_eq!(out.len(), 8 + MAX_CONTENT + 8 + (70000 - MAX_CONTENT));
        stdin(&mut out, b"");
        stdin_end(&mut out);
        assert_eq!(&out[out.len() - 8..], &[1, STDIN, 0, 1, 0, 0, 0, 0]);
    }

    fn head_of(raw: &[u8]) -> (Result<Option<Head>, HeadError>, Vec<String>, Vec<u8>) {
        let mut r = HeadReader::default();
        let mut buf = Vec::new();
        let mut errs = Vec::new();
        // Byte by byte: every split of records and lines.
        for (i, b) in raw.iter().enumerate() {
            buf.push(*b);
            match r.feed(&mut buf, 4096, &mut errs) {
                Ok(None) => {}
                other => {
                    // What was not taken, and what was not fed yet.
                    buf.extend_from_slice(&raw[i + 1..]);
                    return (other, errs, buf);
                }
            }
        }
        (Ok(None), errs, buf)
    }

    #[test]
    fn head_split_anywhere_gives_status_headers_and_body() {
        let mut raw = rec(STDERR, b"PHP Notice: x.\n");
        raw.extend(rec(STDOUT, b"Status: 404 Not Found\r\nX-A: b\r\n"));
        raw.extend(rec(STDOUT, b"Content-type: text/html\r\n\r\nhello"));
        // Fed whole, the stderr record is one line, its tail cut.
        let mut whole = raw.clone();
        let mut errs = Vec::new();
        HeadReader::default()
            .feed(&mut whole, 4096, &mut errs)
            .unwrap()
            .unwrap();
        assert_eq!(errs, vec!["PHP Notice: x".to_string()]);
        // Fed a byte at a time, each piece read is logged, as NGINX logs
        // what its buffer holds.
        let (h, errs, buf) = head_of(&raw);
        let h = h.unwrap().unwrap();
        assert_eq!(errs.concat(), "PHP Notice: x.\n");
        assert_eq!((h.head.status, h.head.reason()), (404, "Not Found"));
        assert_eq!(h.head.header("x-a"), Some("b"));
        let (head, mut body) = h.finish(false).unwrap();
        assert_eq!(head.len, raw.len() - buf.len());
        let mut out = Vec::new();
        let mut more = buf;
        more.extend(rec(STDOUT, b" world"));
        more.extend(rec(STDOUT, b""));
        let (used, done) = body.decode(&more, &mut out).unwrap();
        assert!(done);
        assert_eq!(used, more.len());
        assert_eq!(out, b"hello world");
    }

    #[test]
    fn location_without_status_is_302_and_plain_is_200() {
        let h = parse_cgi_head(b"Location: /x\n\n", 4096).unwrap().unwrap();
        assert_eq!(h.status, 302);
        let h = parse_cgi_head(b"X: y\n\n", 4096).unwrap().unwrap();
        assert_eq!(h.status, 200);
        let h = parse_cgi_head(b"Status: 201\r\n\r\n", 4096)
            .unwrap()
            .unwrap();
        assert_eq!((h.status, h.reason()), (201, ""));
        assert_eq!(
            parse_cgi_head(b"Status: abc\r\n\r\n", 4096)
                .unwrap_err()
                .to_string(),
            "upstream sent invalid status \"abc\""
        );
        assert_eq!(parse_cgi_head(b"X: y\r\n", 4096).unwrap(), None);
        assert_eq!(
            parse_cgi_head(&[b'a'; 100], 50).unwrap_err(),
            HeadError::TooBig
        );
        assert_eq!(
            parse_cgi_head(b"Bad Header\r\n\r\n", 4096)
                .unwrap_err()
                .to_string(),
            "upstream sent invalid header: \"Bad\\x20...\""
        );
    }

    #[test]
    fn malformed_records_give_nginx_texts() {
        let cases: [(&[u8], &str); 4] = [
            (
                &[2, 6, 0, 1, 0, 0, 0, 0],
                "upstream sent unsupported FastCGI protocol version: 2",
            ),
            (
                &[1, 9, 0, 1, 0, 0, 0, 0],
                "upstream sent invalid FastCGI record type: 9",
            ),
            (
                &[1, 6, 1, 1, 0, 0, 0, 0],
                "upstream sent unexpected FastCGI request id high byte: 1",
            ),
            (
                &[1, 6, 0, 2, 0, 0, 0, 0],
                "upstream sent unexpected FastCGI request id low byte: 2",
            ),
        ];
        for (raw, text) in cases {
            let (h, _, _) = head_of(raw);
            assert_eq!(h.unwrap_err().to_string(), text);
        }
        let (h, _, _) = head_of(&rec(STDOUT, b""));
        assert_eq!(
            h.unwrap_err().to_string(),
            "upstream prematurely closed FastCGI stdout"
        );
        let (h, _, _) = head_of(&end_request());
        assert_eq!(
            h.unwrap_err().to_string(),
            "upstream sent unexpected FastCGI record: 3"
        );
    }

    fn decode_all(body: &mut BodyDecoder, raw: &[u8]) -> (Result<bool, BodyError>, Vec<u8>) {
        let mut out = Vec::new();
        let mut buf = Vec::new();
        for b in raw {
            buf.push(*b);
            match body.decode(&buf, &mut out) {
                Ok((n, done)) => {
                    buf.drain(..n);
                    if done {
                        return (Ok(true), out);
                    }
                }
                Err(e) => return (Err(e), out),
            }
        }
        (Ok(false), out)
    }

    #[test]
    fn content_length_cuts_and_short_output_fails() {
        let h = parse_cgi_head(b"Content-Length: 3\r\n\r\n", 4096)
            .unwrap()
            .unwrap();
        let head = Head {
            head: h,
            body: BodyDecoder::new(RecordReader::default(), Vec::new()),
        };
        let (_, mut body) = head.finish(true).unwrap();
        let mut raw = rec(STDOUT, b"abcdef");
        raw.extend(rec(STDERR, b"late\n"));
        raw.extend(rec(STDOUT, b""));
        raw.extend(end_request());
        let (r, out) = decode_all(&mut body, &raw);
        assert_eq!(r, Ok(true));
        assert_eq!(out, b"abc");
        let notes = body.take_notes();
        assert_eq!(notes[0], Note::TooMuch);
        let text: String = notes[1..]
            .iter()
            .map(|n| match n {
                Note::Stderr(t) => t.as_str(),
                Note::TooMuch => "!",
            })
            .collect();
        assert_eq!(text, "late\n");
        let mut body = BodyDecoder::new(RecordReader::default(), Vec::new());
        body.set_end(Some(10), false);
        let mut raw = rec(STDOUT, b"abc");
        raw.extend(rec(STDOUT, b""));
        let (r, _) = decode_all(&mut body, &raw);
        assert_eq!(
            r.unwrap_err().to_string(),
            "upstream prematurely closed FastCGI stdout"
        );
    }

    #[test]
    fn keep_conn_reads_to_end_request() {
        let mut body = BodyDecoder::new(RecordReader::default(), b"x".to_vec());
        body.set_end(None, true);
        let mut raw = rec(STDOUT, b"");
        raw.extend(end_request());
        let mut out = Vec::new();
        assert_eq!(body.decode(&raw[..8], &mut out), Ok((8, false)));
        assert_eq!(out, b"x");
        assert_eq!(body.decode(&raw[8..], &mut out), Ok((16, true)));
    }

    #[test]
    fn stderr_text_cuts_trailing_dots_and_newlines() {
        assert_eq!(stderr_text(b"oops...\r\n"), "oops");
        assert_eq!(stderr_text(b"a b \n"), "a b");
        assert_eq!(stderr_text(b"\n"), "\n");
    }
}
