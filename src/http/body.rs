//! The request body as the connection hands it to a handler: the bytes
//! already buffered after the head, then the socket, decoded from
//! Content-Length or chunked framing. A handler that forwards the body
//! (the proxy) reads it in bounded pieces; whatever it leaves unread, the
//! connection loop discards afterwards so the next request parses, as it
//! always did for handlers that ignore bodies.

use std::io;
use std::time::Duration;

use super::chunked::ChunkedDecoder;
use super::stream::ClientStream;

/// `client_body_timeout` default: the longest wait for the next byte.
const BODY_TIMEOUT: Duration = Duration::from_secs(60);
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
}

/// A request body being read from the client connection.
pub struct ClientBody<'a> {
    stream: &'a ClientStream,
    /// Bytes read from the socket and not yet consumed (after the body:
    /// the next pipelined request).
    pub buf: Vec<u8>,
    state: State,
    /// Decoded body bytes handed out so far.
    pub read: u64,
    chunked: bool,
}

impl<'a> ClientBody<'a> {
    /// The body of a request whose head announced `kind`: `None` for no
    /// body, `Some(Some(n))` for Content-Length, `Some(None)` for chunked.
    /// `buf` holds what followed the head.
    pub fn new(
        stream: &'a ClientStream,
        buf: Vec<u8>,
        kind: Option<Option<u64>>,
    ) -> ClientBody<'a> {
        let state = match kind {
            None | Some(Some(0)) => State::Done,
            Some(Some(n)) => State::Length(n),
            Some(None) => State::Chunked(ChunkedDecoder::new()),
        };
        ClientBody {
            stream,
            buf,
            state,
            read: 0,
            chunked: kind == Some(None),
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
        loop {
            let before = out.len();
            let done = match &mut self.state {
                State::Done => return Ok(false),
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
            };
            if done {
                self.state = State::Done;
            }
            self.read += (out.len() - before) as u64;
            if out.len() > before {
                return Ok(true);
            }
            if done {
                return Ok(false);
            }
            self.fill().await?;
        }
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
        self.buf.reserve(16 * 1024);
        loop {
            match self.stream.try_read_buf(&mut self.buf) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    match tokio::time::timeout(BODY_TIMEOUT, self.stream.readable()).await {
                        Err(_) => return Err(io::Error::from(io::ErrorKind::TimedOut)),
                        Ok(r) => r?,
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Sends `100 Continue` (the handler is about to read the body).
    pub async fn send_continue(&self, send_timeout: Duration) -> io::Result<()> {
        self.stream
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n", false, send_timeout)
            .await
    }
}
