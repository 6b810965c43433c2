//! Writing a response to the client socket: the head the connection loop
//! serialised, then the body its source calls for — bytes (one `writev`
//! with the head), a file range (`sendfile`, or read-and-write copies with
//! `sendfile off`), a `multipart/byteranges` body, or a stream written
//! piece by piece (chunked when the response says so); under `limit_rate`
//! every body write waits for its room ([`super::rate`]). Every wait for the
//! socket to drain is bounded by `send_timeout`. The connection loop
//! decides what to write; this file only how, and how a failed send is
//! reported in the error log ([`log_send_error`]).
//!
//! On a user-space TLS stream a file range is always read through the
//! disk layer (`OpenFile::read_at`: the fast path's `RWF_NOWAIT` read,
//! else the pool or io_uring) into a buffer that is encrypted on the
//! loop, as with `sendfile off`: plain pages are never `sendfile`d into
//! rustls's stream. A kTLS stream (no `tls_conn()`: the kernel encrypts)
//! takes the plain route, `sendfile` included. Each route's bytes are
//! counted (`disk::sent`, `porter_disk_send_bytes_total{route}`): the
//! disk layer counts its own, this file the read-and-write copies
//! (`route="read"`).

use std::io;

use super::chunked;
use super::context::RequestCtx;
use super::rate::Pacer;
use super::response::{self, Body, HeadTiming, Response, StreamBody};
use super::stream::ClientStream;
use crate::config::LocSettings;
use crate::disk::sent::{self, Route};
use crate::disk::{Disk, OpenFile};
use crate::log::{ErrorLog, Level};

/// Buffer for `sendfile off` copies, and the first size of a streamed
/// body's piece buffer.
const COPY_CHUNK: usize = 64 * 1024;

/// Whether a response's body follows its head: not for a HEAD request
/// (NGINX's `r->header_only`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sending {
    /// The head alone.
    HeadOnly,
    /// The head, then the body.
    HeadAndBody,
}

impl Sending {
    /// The head alone when `head` (the request's method is HEAD).
    pub fn head_only_if(head: bool) -> Sending {
        if head {
            Sending::HeadOnly
        } else {
            Sending::HeadAndBody
        }
    }
}

/// Whether more of the response follows a write: `MSG_MORE`, so the
/// kernel may hold a partial packet for what comes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follows {
    /// More follows (a body after its head, the rest of a file range).
    More,
    /// Nothing follows for now: the kernel sends what it holds.
    Nothing,
}

impl Follows {
    /// [`Follows::More`] when `more`.
    fn more_if(more: bool) -> Follows {
        if more {
            Follows::More
        } else {
            Follows::Nothing
        }
    }
}

/// How a streamed body goes on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// In chunks (`Transfer-Encoding: chunked`).
    Chunked,
    /// As it comes (a `Content-Length` body, or one the close ends).
    Plain,
}

/// Who ends a chunked streamed body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LastChunk {
    /// The stream's writer, with the last chunk.
    Here,
    /// The caller, with the trailers ([`super::trailers::send`]).
    WithTrailers,
}

/// Writes one response to a client socket, with the settings of the
/// location that produced it (`send_timeout`, `sendfile`,
/// `sendfile_max_chunk`) and the worker's disk layer for file bodies.
pub struct Writer<'a> {
    stream: &'a ClientStream,
    disk: &'a Disk,
    s: &'a LocSettings,
    /// `limit_rate`, when set: every body write takes its room first.
    pacer: Option<Pacer>,
    /// `limit_rate_after` as the request rendered it.
    after: u64,
}

impl<'a> Writer<'a> {
    /// A writer to `stream` under the location settings `s`.
    pub fn new(stream: &'a ClientStream, disk: &'a Disk, s: &'a LocSettings) -> Writer<'a> {
        let pacer = Pacer::new(s.limit_rate, s.limit_rate_after);
        Writer {
            stream,
            disk,
            s,
            pacer,
            after: s.limit_rate_after,
        }
    }

    /// The pace of the request in `ctx` in place of the location's fixed
    /// one: `set $limit_rate`, else `limit_rate $var` rendered now (a value
    /// that is not a size is 0, no limit, as NGINX's
    /// `ngx_http_complex_value_size`), and `limit_rate_after` likewise;
    /// then `accel` (`X-Accel-Limit-Rate`) over them.
    pub fn with_request_pace(mut self, ctx: &RequestCtx, accel: Option<u64>) -> Writer<'a> {
        let s = self.s;
        let vars = s.limit_rate_var.is_some() || s.limit_rate_after_var.is_some();
        if ctx.limit_rate.is_some() || vars {
            let size = |t: &Option<crate::vars::template::Template>, fixed: u64| match t {
                Some(t) => crate::config::value::parse_size(&t.render(ctx)).unwrap_or(0),
                None => fixed,
            };
            let rate = match ctx.limit_rate {
                Some(r) => r,
                None => size(&s.limit_rate_var, s.limit_rate),
            };
            self.after = size(&s.limit_rate_after_var, s.limit_rate_after);
            self.pacer = Pacer::new(rate, self.after);
        }
        self.with_limit_rate(accel)
    }

    /// The pace `resp` asks for in place of the location's `limit_rate`
    /// (`X-Accel-Limit-Rate`; 0: none), `limit_rate_after` kept.
    fn with_limit_rate(mut self, rate: Option<u64>) -> Writer<'a> {
        if let Some(r) = rate {
            self.pacer = Pacer::new(r, self.after);
        }
        self
    }

    /// Writes `head` and the body of `resp` (none for
    /// [`Sending::HeadOnly`]); returns body bytes sent.
    pub async fn send(&self, resp: &Response, sending: Sending, head: &[u8]) -> io::Result<u64> {
        if sending == Sending::HeadOnly {
            self.write_all(head, Follows::Nothing).await?;
            return Ok(0);
        }
        match &resp.body {
            Body::Empty => {
                self.write_all(head, Follows::Nothing).await?;
                Ok(0)
            }
            Body::Bytes(b) => {
                // Head and body in one `writev`, without copying the body.
                self.write_lead_and(head, b).await?;
                Ok(b.len() as u64)
            }
            Body::File {
                file, start, len, ..
            } => {
                self.write_all(head, Follows::More).await?;
                self.count(head.len());
                self.send_file_range(file, *start, *len).await?;
                Ok(*len)
            }
            Body::Spliced {
                lead,
                file,
                start,
                len,
                ..
            } => {
                self.write_lead_and(head, lead).await?;
                self.send_file_range(file, *start, *len).await?;
                Ok(lead.len() as u64 + *len)
            }
            Body::Multipart { file, parts } => {
                self.write_all(head, Follows::More).await?;
                self.count(head.len());
                let mut total = 0;
                for (hdr, range) in &parts.parts {
                    self.write_all(hdr.as_bytes(), Follows::More).await?;
                    self.send_file_range(file, range.start, range.end - range.start)
                        .await?;
                    total += hdr.len() as u64 + (range.end - range.start);
                }
                self.write_all(parts.trailer.as_bytes(), Follows::Nothing)
                    .await?;
                Ok(total + parts.trailer.len() as u64)
            }
            Body::Stream(body) => {
                let framing = if resp.chunked {
                    Framing::Chunked
                } else {
                    Framing::Plain
                };
                let last = if resp.trailers {
                    LastChunk::WithTrailers
                } else {
                    LastChunk::Here
                };
                self.send_stream(head, body, (framing, last), resp.head_timing)
                    .await
            }
        }
    }

    /// Sends `head` and a streamed body piece by piece, each written before
    /// the next is asked for (so a slow client holds back the source), with
    /// in chunks when [`Framing::Chunked`]. A first piece already at hand
    /// goes out with the head in one write (a small proxied response is one
    /// packet); otherwise the head goes at once, as the body may be a while
    /// coming, unless [`HeadTiming::WithFirstPiece`]. The last
    /// chunk is left to the caller for [`LastChunk::WithTrailers`].
    /// Returns body bytes sent.
    #[allow(clippy::await_holding_refcell_ref)]
    async fn send_stream(
        &self,
        head: &[u8],
        body: &StreamBody,
        (framing, last): (Framing, LastChunk),
        head_timing: HeadTiming,
    ) -> io::Result<u64> {
        // One writer per response: the borrow lasts the send and nothing else
        // touches the stream.
        let mut source = body.0.borrow_mut();
        let mut piece = Vec::with_capacity(COPY_CHUNK);
        let mut total = 0u64;
        // One poll without a waker: ready only if the piece needs no waiting
        // (body streams are cancel-safe, so a pending poll is simply dropped).
        let first = source
            .read_chunk(&mut piece)
            .as_mut()
            .poll(&mut std::task::Context::from_waker(std::task::Waker::noop()));
        let mut at_hand = match first {
            std::task::Poll::Ready(Ok(more)) => Some(more),
            // A source that failed at once (an upstream that closed after
            // its header) still had its head sent, as NGINX sends the
            // header before it reads the body; then the connection closes.
            std::task::Poll::Ready(Err(e)) => {
                if head_timing == HeadTiming::AtOnce {
                    let _ = self.write_all(head, Follows::Nothing).await;
                }
                return Err(e);
            }
            std::task::Poll::Pending => None,
        };
        let mut head = head;
        if at_hand.is_none() && head_timing == HeadTiming::AtOnce {
            self.write_all(head, Follows::Nothing).await?;
            head = &[];
        }
        loop {
            let more = match at_hand.take() {
                Some(m) => m,
                None => {
                    piece.clear();
                    source.read_chunk(&mut piece).await?
                }
            };
            if !more {
                break;
            }
            if piece.is_empty() {
                continue;
            }
            total += piece.len() as u64;
            let mut lead = head.to_vec();
            head = &[];
            if framing == Framing::Chunked {
                chunked::push_size_line(&mut lead, piece.len());
                piece.extend_from_slice(chunked::CHUNK_END);
            }
            self.write_lead_and(&lead, &piece).await?;
        }
        let mut tail = head.to_vec();
        let last_here = last == LastChunk::Here;
        if framing == Framing::Chunked && last_here {
            tail.extend_from_slice(chunked::LAST_CHUNK);
        }
        if last_here || !tail.is_empty() {
            self.write_all(&tail, Follows::Nothing).await?;
        }
        Ok(total)
    }

    /// Sends `len` bytes of `file` from `start`: `sendfile` when enabled,
    /// else read-and-write copies. After each `sendfile_max_chunk` bytes the
    /// task yields, so one large response cannot monopolise the worker.
    async fn send_file_range(&self, file: &OpenFile, start: u64, len: u64) -> io::Result<()> {
        let s = self.s;
        let max_chunk = if s.sendfile_max_chunk == 0 {
            u64::MAX
        } else {
            s.sendfile_max_chunk
        };
        let mut offset = start;
        let end = start + len;
        file.send_until(end);
        let mut since_yield: u64 = 0;
        // A `directio` file is copied through a buffer, as NGINX does.
        if s.sendfile && self.stream.tls_conn().is_none() && file.direct_alignment().is_none() {
            while offset < end {
                let mut want = (end - offset).min(max_chunk - since_yield) as usize;
                if let Some(p) = &self.pacer {
                    want = self.paced(p, want).await?;
                }
                match self
                    .disk
                    .sendfile(self.stream.tcp(), file, &mut offset, want)
                    .await
                {
                    Ok(0) => return Err(truncated()),
                    Ok(n) => {
                        if let Some(p) = &self.pacer {
                            p.sent(n as u64);
                        }
                        since_yield += n as u64;
                        if since_yield >= max_chunk {
                            since_yield = 0;
                            tokio::task::yield_now().await;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        since_yield = 0;
                        self.wait_writable().await?
                    }
                    Err(e) => return Err(e),
                }
            }
        } else {
            let mut chunk = vec![0u8; COPY_CHUNK.min(len as usize)];
            while offset < end {
                let mut want = ((end - offset) as usize).min(chunk.len());
                if let Some(a) = file
                    .direct_alignment()
                    .filter(|a| !offset.is_multiple_of(*a))
                {
                    // up to the boundary: the next reads are aligned
                    want = want.min((a - offset % a) as usize);
                }
                if let Some(p) = &self.pacer {
                    want = self.paced(p, want).await?;
                }
                let n = file.read_at(&mut chunk[..want], offset).await?;
                if let Some(p) = &self.pacer {
                    p.sent(n as u64);
                }
                if n == 0 {
                    return Err(truncated());
                }
                let follows = Follows::more_if(offset + (n as u64) < end);
                self.write_all(&chunk[..n], follows).await?;
                sent::count(Route::Read, n);
                offset += n as u64;
                since_yield += n as u64;
                if since_yield >= max_chunk {
                    since_yield = 0;
                    tokio::task::yield_now().await;
                }
            }
        }
        Ok(())
    }

    /// Writes `head` then `body` with vectored writes.
    async fn write_two(&self, head: &[u8], body: &[u8]) -> io::Result<()> {
        self.stream.write_two(head, body, self.s.send_timeout).await
    }

    /// The room `limit_rate` gives for up to `want` bytes, waiting for
    /// it; a client that closes meanwhile ends the wait with an error, as
    /// NGINX's `ngx_http_test_reading` notices while a write is delayed.
    async fn paced(&self, p: &Pacer, want: usize) -> io::Result<usize> {
        tokio::select! {
            n = p.take(want) => Ok(n),
            e = self.client_closed() => Err(e),
        }
    }

    /// Resolves when the client's end is closed (a peek reads nothing);
    /// never while it has sent bytes not yet read (a pipelined request,
    /// a TLS record), which the connection reads later.
    async fn client_closed(&self) -> io::Error {
        let mut one = [0u8; 1];
        match self.stream.tcp().peek(&mut one).await {
            Ok(0) => io::Error::from(io::ErrorKind::ConnectionReset),
            Ok(_) => std::future::pending().await,
            Err(e) => e,
        }
    }

    /// Counts `n` bytes written outside the paced writes (a head).
    fn count(&self, n: usize) {
        if let Some(p) = &self.pacer {
            p.sent(n as u64);
        }
    }

    /// Writes `lead` (a head, a chunk size line) and `body`: in one
    /// `writev`, or under `limit_rate` in the pieces its pace allows.
    async fn write_lead_and(&self, lead: &[u8], body: &[u8]) -> io::Result<()> {
        let Some(p) = &self.pacer else {
            return self.write_two(lead, body).await;
        };
        let mut rest = body;
        let mut lead = lead;
        loop {
            let n = self.paced(p, lead.len() + rest.len()).await?;
            let from_lead = n.min(lead.len());
            let from_body = (n - from_lead).min(rest.len());
            self.write_two(&lead[..from_lead], &rest[..from_body])
                .await?;
            p.sent((from_lead + from_body) as u64);
            lead = &lead[from_lead..];
            rest = &rest[from_body..];
            if lead.is_empty() && rest.is_empty() {
                return Ok(());
            }
        }
    }

    /// Writes all of `buf`, with `MSG_MORE` when [`Follows::More`].
    pub async fn write_all(&self, buf: &[u8], follows: Follows) -> io::Result<()> {
        let more = follows == Follows::More;
        self.stream.write_all(buf, more, self.s.send_timeout).await
    }

    /// Waits for the socket to take more, at most `send_timeout`
    /// (`ETIMEDOUT` then).
    async fn wait_writable(&self) -> io::Result<()> {
        self.stream.wait_writable(self.s.send_timeout).await
    }
}

fn truncated() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "file was truncated")
}

/// Logs why sending the response to `ctx` failed, as NGINX words it: a
/// disk error (`crit`) or a missing thread pool (`error`), a file that
/// shrank while it was sent (`crit`), or the client's socket (`info`). A
/// streamed body that already logged why it stopped is not logged again.
pub fn log_send_error(log: &ErrorLog, ctx: &RequestCtx, e: &io::Error) {
    let log = ctx.log_in(log);
    let file = ctx.request_filename.as_deref().unwrap_or("");
    match crate::disk::disk_error(e) {
        // The file's or the pool's failure: the disk layer's one wording.
        Some(_) => {
            let f = crate::disk::Failure::of(e, "sendfile", file);
            let level = if f.crit { Level::Crit } else { Level::Error };
            log.line(level, format_args!("{}", f.line));
        }
        // A proxied body the upstream cut short: already logged.
        None if response::is_logged(e) => {}
        None if e.kind() == io::ErrorKind::UnexpectedEof => log.line(
            Level::Crit,
            format_args!("file \"{file}\" was truncated while sending it"),
        ),
        // `send_timeout` ran out: NGINX's wording for it.
        None if e.raw_os_error() == Some(libc::ETIMEDOUT) => log.line(
            Level::Info,
            format_args!(
                "client timed out (110: Connection timed out) while sending response to client"
            ),
        ),
        None => log.line(
            Level::Info,
            format_args!(
                "writev() failed {} while sending response to client",
                crate::util::errno_text(e)
            ),
        ),
    }
}
