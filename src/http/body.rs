//! The request body as the connection hands it to a handler: the bytes
//! already buffered after the head, then the socket, decoded from
//! Content-Length or chunked framing. A handler that forwards the body
//! (the proxy) reads it in bounded pieces; whatever it leaves unread, the
//! connection loop discards afterwards so the next request parses, as it
//! always did for handlers that ignore bodies. A body no handler read is
//! discarded after the response went out, as NGINX's
//! `ngx_http_discard_request_body` does: [`ClientBody::detach`] keeps its
//! state while the response is written and [`ClientBody::attach`] takes it
//! up again for [`ClientBody::discard_within`].
//!
//! On an HTTP/2 stream ([`ClientBody::h2`]) the body is the stream's DATA
//! frames: each piece read gives its bytes back to the client's window
//! (`release_capacity`), so a handler that reads slowly holds the client
//! back (flow control is the backpressure), and one that never reads
//! lets at most `http2_body_preread_size` arrive. On an HTTP/3 stream
//! ([`ClientBody::h3`]) it is the stream's DATA frames, QUIC's stream
//! window (`http3_stream_buffer_size`) the backpressure.

use std::io;
use std::time::{Duration, Instant};

use super::chunked::ChunkedDecoder;
use super::stream::ClientStream;

/// `client_body_timeout` default: the longest wait for the next byte.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(60);
/// Most bytes one read takes from the socket.
const READ_CHUNK: usize = 64 * 1024;

#[derive(Debug)]
enum State {
    /// No body, or all of it was read.
    Done,
    /// Content-Length bytes still to come.
    Length(u64),
    /// Chunked framing.
    Chunked(ChunkedDecoder),
    /// An HTTP/2 body: DATA frames until END_STREAM (h2 checks them
    /// against a Content-Length).
    Frames,
}

/// Where the body's bytes come from.
enum Source<'a> {
    /// The HTTP/1.x connection's socket.
    Socket(&'a ClientStream),
    /// An HTTP/2 stream.
    H2(h2::RecvStream),
    /// An HTTP/3 stream (boxed: h3's stream state is large, and most
    /// bodies are HTTP/1.x's).
    H3(Box<super::http3::RecvBody>),
    /// An HTTP/2 stream taken by its handler ([`ClientBody::take_h2`]).
    Taken,
    /// Bytes already read whole (a body kept for `mirror` subrequests).
    Memory,
}

/// A request body being read from the client connection.
pub struct ClientBody<'a> {
    source: Source<'a>,
    /// Bytes read from the socket and not yet consumed (after the body:
    /// the next pipelined request).
    pub buf: Vec<u8>,
    state: State,
    /// Decoded body bytes handed out so far.
    pub read: u64,
    chunked: bool,
    /// The longest wait for the next byte (`client_body_timeout`).
    timeout: Duration,
}

/// The state of a body left unread, kept while the response is written
/// (it owns no borrow of the socket).
pub struct Leftover {
    buf: Vec<u8>,
    state: State,
    chunked: bool,
}

/// Why discarding a body stopped before its end.
#[derive(Debug, PartialEq, Eq)]
pub enum DiscardError {
    /// The client was silent for a whole `lingering_timeout`, or
    /// `lingering_time` ran out (NGINX closes then; a reset if
    /// `reset_timedout_connection` is on).
    TimedOut,
    /// The client closed, the read failed, or the framing was bad.
    Failed,
}

/// The body an HTTP/1.1 request head announced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// No body (no Content-Length, or 0).
    None,
    /// `Content-Length: n`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

impl BodyKind {
    /// The kind a parsed head announces.
    pub fn of(chunked: bool, content_length: Option<u64>) -> BodyKind {
        match (chunked, content_length) {
            (true, _) => BodyKind::Chunked,
            (false, Some(n)) if n > 0 => BodyKind::Length(n),
            (false, _) => BodyKind::None,
        }
    }
}

impl<'a> ClientBody<'a> {
    /// The body of a request whose head announced `kind`; `buf` holds
    /// what followed the head.
    pub fn new(stream: &'a ClientStream, buf: Vec<u8>, kind: BodyKind) -> ClientBody<'a> {
        let state = match kind {
            BodyKind::None | BodyKind::Length(0) => State::Done,
            BodyKind::Length(n) => State::Length(n),
            BodyKind::Chunked => State::Chunked(ChunkedDecoder::new()),
        };
        ClientBody {
            source: Source::Socket(stream),
            buf,
            state,
            read: 0,
            chunked: kind == BodyKind::Chunked,
            timeout: BODY_TIMEOUT,
        }
    }

    /// The HTTP/1.x connection the body comes from (`None` on HTTP/2
    /// and HTTP/3), lent for as long as the body's own borrow.
    pub fn socket(&self) -> Option<&'a ClientStream> {
        match self.source {
            Source::Socket(s) => Some(s),
            _ => None,
        }
    }

    /// The body of an HTTP/2 request: the DATA frames of `recv` (none
    /// when the HEADERS frame ended the stream). Without a Content-Length
    /// it counts as chunked: the proxy forwards it so.
    pub fn h2(recv: h2::RecvStream, content_length: Option<u64>) -> ClientBody<'a> {
        let ended = recv.is_end_stream();
        ClientBody {
            source: Source::H2(recv),
            buf: Vec::new(),
            state: if ended { State::Done } else { State::Frames },
            read: 0,
            chunked: !ended && content_length.is_none(),
            timeout: BODY_TIMEOUT,
        }
    }

    /// The body of an HTTP/3 request: the DATA frames of `recv`. Without
    /// a Content-Length it counts as chunked: the proxy forwards it so.
    pub fn h3(recv: super::http3::RecvBody, content_length: Option<u64>) -> ClientBody<'a> {
        let ended = recv.is_ended();
        ClientBody {
            source: Source::H3(Box::new(recv)),
            buf: Vec::new(),
            state: if ended { State::Done } else { State::Frames },
            read: 0,
            chunked: !ended && content_length.is_none(),
            timeout: BODY_TIMEOUT,
        }
    }

    /// The DATA frames of an HTTP/2 body not read yet, for a handler that
    /// relays them as frames with flow control end to end (gRPC: a
    /// stream that may last as long as the response); the body then
    /// counts as read. None on HTTP/1.x or when nothing is left.
    pub fn take_h2(&mut self) -> Option<h2::RecvStream> {
        if !matches!(self.state, State::Frames) {
            return None;
        }
        match std::mem::replace(&mut self.source, Source::Taken) {
            Source::H2(recv) => {
                self.state = State::Done;
                Some(recv)
            }
            other => {
                self.source = other;
                None
            }
        }
    }

    /// A body read whole before: `bytes`, given again from memory (a
    /// mirror subrequest's copy).
    pub fn memory(bytes: Vec<u8>) -> ClientBody<'a> {
        let len = bytes.len() as u64;
        ClientBody {
            source: Source::Memory,
            buf: bytes,
            state: if len == 0 {
                State::Done
            } else {
                State::Length(len)
            },
            read: 0,
            chunked: false,
            timeout: BODY_TIMEOUT,
        }
    }

    /// Gives `whole`, the body this one has just been read to its end
    /// for, again from the start, with Content-Length framing (NGINX's
    /// `preserve_body`: the request's handler reads what `mirror` read).
    /// What followed the body (a pipelined request) stays after it.
    pub fn preserve(&mut self, mut whole: Vec<u8>) {
        let len = whole.len() as u64;
        if matches!(self.source, Source::H2(_) | Source::H3(_)) {
            self.source = Source::Memory;
        }
        whole.append(&mut self.buf);
        self.buf = whole;
        self.state = if len == 0 {
            State::Done
        } else {
            State::Length(len)
        };
        self.read = 0;
        self.chunked = false;
    }

    /// Sets the longest wait for the next byte of the body
    /// (`client_body_timeout` of the location that reads it).
    pub fn set_timeout(&mut self, t: Duration) {
        self.timeout = t;
    }

    /// The unread rest of the body, to be discarded once the response is
    /// out: `Err(buf)` (the bytes after it) when the body is already done.
    pub fn detach(self) -> Result<Leftover, Vec<u8>> {
        match self.state {
            State::Done => Err(self.buf),
            state => Ok(Leftover {
                buf: self.buf,
                state,
                chunked: self.chunked,
            }),
        }
    }

    /// A body taken up again after [`detach`](Self::detach).
    pub fn attach(stream: &'a ClientStream, left: Leftover) -> ClientBody<'a> {
        ClientBody {
            source: Source::Socket(stream),
            buf: left.buf,
            state: left.state,
            read: 0,
            chunked: left.chunked,
            timeout: BODY_TIMEOUT,
        }
    }

    /// Reads and drops the rest of the body as NGINX does once the
    /// response has been sent: each wait for input at most `per_read`
    /// (`lingering_timeout`), all of it within `total` (`lingering_time`).
    pub async fn discard_within(
        &mut self,
        per_read: Duration,
        total: Duration,
    ) -> Result<(), DiscardError> {
        let deadline = Instant::now() + total;
        let mut sink = Vec::with_capacity(READ_CHUNK);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(DiscardError::TimedOut);
            }
            self.timeout = per_read.min(left);
            match self.read(&mut sink).await {
                Ok(true) => sink.clear(),
                Ok(false) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                    return Err(DiscardError::TimedOut)
                }
                Err(_) => return Err(DiscardError::Failed),
            }
        }
    }

    /// The request has a body the client framed with chunked encoding.
    pub fn is_chunked(&self) -> bool {
        self.chunked
    }

    /// Whether the whole body has been consumed.
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// Appends the next decoded piece of the body to `out` (at most about
    /// 64 KiB); `Ok(false)` once the body is complete and nothing was
    /// appended.
    pub async fn read(&mut self, out: &mut Vec<u8>) -> io::Result<bool> {
        if matches!(self.source, Source::H2(_)) {
            return self.read_frames(out).await;
        }
        if let Source::H3(recv) = &mut self.source {
            return read_h3(recv, &mut self.state, &mut self.read, self.timeout, out).await;
        }
        loop {
            if let Some(got) = self.take_buffered(out)? {
                return Ok(got);
            }
            self.fill().await?;
        }
    }

    /// [`read`](Self::read) from the bytes already buffered alone:
    /// `Ok(None)` when the next piece is still on the socket (always for
    /// an HTTP/2 or HTTP/3 stream). What NGINX calls the preread body,
    /// sent upstream with the request's head.
    pub fn read_buffered(&mut self, out: &mut Vec<u8>) -> io::Result<Option<bool>> {
        if matches!(self.source, Source::H2(_) | Source::H3(_) | Source::Taken) {
            return Ok(None);
        }
        self.take_buffered(out)
    }

    /// Drops what of the body is buffered already, without waiting (what
    /// NGINX's discard does before the response): `Err` when its chunked
    /// framing is bad.
    pub fn discard_buffered(&mut self) -> io::Result<()> {
        let mut sink = Vec::new();
        while let Some(true) = self.read_buffered(&mut sink)? {
            sink.clear();
        }
        Ok(())
    }

    /// Reads what the socket holds now, without waiting, until the body
    /// is whole or `max` bytes are buffered (NGINX's first read of a body
    /// takes what is there).
    pub fn fill_now(&mut self, max: usize) {
        let Source::Socket(stream) = self.source else {
            return;
        };
        while self.buf.len() < max && !self.whole_buffered() {
            self.buf.reserve(16 * 1024);
            match stream.try_read_buf(&mut self.buf) {
                Ok(n) if n > 0 => {}
                _ => break,
            }
        }
    }

    /// The rest of the body is buffered already (its Content-Length, or
    /// the chunked body's last chunk): reading it whole waits for nothing.
    pub fn whole_buffered(&self) -> bool {
        match (&self.source, &self.state) {
            (_, State::Done) => true,
            (Source::Socket(_) | Source::Memory, State::Length(n)) => self.buf.len() as u64 >= *n,
            (Source::Socket(_), State::Chunked(dec)) => {
                matches!(dec.clone().feed(&self.buf, None), Ok((_, true)))
            }
            _ => false,
        }
    }

    /// One step of [`read`](Self::read) on the buffered bytes: `None`
    /// when more must come from the socket.
    fn take_buffered(&mut self, out: &mut Vec<u8>) -> io::Result<Option<bool>> {
        let before = out.len();
        let done = match &mut self.state {
            State::Done => return Ok(Some(false)),
            State::Length(left) => {
                let take = (self.buf.len() as u64).min(*left).min(READ_CHUNK as u64) as usize;
                out.extend_from_slice(&self.buf[..take]);
                self.buf.drain(..take);
                *left -= take as u64;
                *left == 0
            }
            State::Chunked(dec) => {
                let n = self.buf.len().min(READ_CHUNK);
                let (used, done) = dec.feed(&self.buf[..n], Some(out)).map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        "client sent invalid chunked body",
                    )
                })?;
                self.buf.drain(..used);
                done
            }
            State::Frames => unreachable!("HTTP/2 bodies are read by read_frames"),
        };
        if done {
            self.state = State::Done;
        }
        self.read += (out.len() - before) as u64;
        if out.len() > before {
            return Ok(Some(true));
        }
        if done {
            return Ok(Some(false));
        }
        Ok(None)
    }

    /// The next non-empty DATA frame of an HTTP/2 body, appended to `out`;
    /// its bytes go back to the client's window at once (the next ones
    /// are asked for only when this piece has been handed on).
    async fn read_frames(&mut self, out: &mut Vec<u8>) -> io::Result<bool> {
        let Source::H2(recv) = &mut self.source else {
            return Ok(false);
        };
        while !matches!(self.state, State::Done) {
            let next = match tokio::time::timeout(self.timeout, recv.data()).await {
                Err(_) => return Err(io::Error::from(io::ErrorKind::TimedOut)),
                Ok(n) => n,
            };
            let Some(data) = next else {
                self.state = State::Done;
                break;
            };
            let data = data.map_err(|e| {
                io::Error::new(io::ErrorKind::InvalidData, format!("HTTP/2 body: {e}"))
            })?;
            let _ = recv.flow_control().release_capacity(data.len());
            if recv.is_end_stream() {
                self.state = State::Done;
            }
            if !data.is_empty() {
                out.extend_from_slice(&data);
                self.read += data.len() as u64;
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Reads and drops the rest of the body.
    pub async fn discard(&mut self) -> io::Result<()> {
        let mut sink = Vec::with_capacity(READ_CHUNK);
        while self.read(&mut sink).await? {
            sink.clear();
        }
        Ok(())
    }

    async fn fill(&mut self) -> io::Result<()> {
        let Source::Socket(stream) = self.source else {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        };
        self.buf.reserve(16 * 1024);
        loop {
            match stream.try_read_buf(&mut self.buf) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    match tokio::time::timeout(self.timeout, stream.readable()).await {
                        Err(_) => return Err(io::Error::from(io::ErrorKind::TimedOut)),
                        Ok(r) => r?,
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Sends `100 Continue` (the handler is about to read the body).
    /// Nothing on an HTTP/2 stream, as NGINX (`RequestCtx::test_expect`
    /// never asks for it there).
    pub async fn send_continue(&self, send_timeout: Duration) -> io::Result<()> {
        match self.source {
            Source::Socket(stream) => {
                stream
                    .write_all(b"HTTP/1.1 100 Continue\r\n\r\n", false, send_timeout)
                    .await
            }
            Source::H2(_) | Source::H3(_) | Source::Taken | Source::Memory => Ok(()),
        }
    }
}

/// The next piece of an HTTP/3 body, appended to `out` (its bytes leave
/// quinn's receive buffer, which opens the client's window).
async fn read_h3(
    recv: &mut super::http3::RecvBody,
    state: &mut State,
    read: &mut u64,
    timeout: Duration,
    out: &mut Vec<u8>,
) -> io::Result<bool> {
    if matches!(state, State::Done) {
        return Ok(false);
    }
    let next = match tokio::time::timeout(timeout, recv.data()).await {
        Err(_) => return Err(io::Error::from(io::ErrorKind::TimedOut)),
        Ok(n) => n?,
    };
    match next {
        Some(data) => {
            out.extend_from_slice(&data);
            *read += data.len() as u64;
            Ok(true)
        }
        None => {
            *state = State::Done;
            Ok(false)
        }
    }
}
