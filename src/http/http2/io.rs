//! The client connection as the `h2` crate wants it: `AsyncRead` and
//! `AsyncWrite` over a [`ClientStream`] (plain TCP or TLS), with the
//! bytes the HTTP/1.1 loop already read (the h2c preface) served first.
//! The stream's calls never wait: `WouldBlock` turns into a wait for the
//! socket's readiness (`poll_read_ready`/`poll_write_ready`), so the
//! connection task is woken by epoll as any other.
//!
//! Every byte read also passes through the [`FrameMeter`], which reads
//! frame headers as they go by and counts the frames that cost the server
//! work without asking for anything (the floods of `mod.rs`); once it
//! found a flood nothing more is read.
//!
//! `h2` reads and handles frames for as long as the socket has some, so a
//! client that keeps sending (a flood) would hold the loop: after
//! [`READS_PER_TURN`] reads in a row the read answers "not yet" and wakes
//! itself, letting the worker's other tasks (and this connection's own
//! timers and alarms) run first, as tokio's cooperative budget does for
//! its own sockets.
//!
//! **Writes are flushed once per turn of the connection task (TLS).**
//! `h2` flushes its writer after every DATA frame of 256 bytes or more
//! (it chains the payload instead of copying it, and must write it out
//! before it takes the next frame), and at the end of each of its polls.
//! Sent as they come, that is a TLS record and a `sendmsg` per frame: per
//! response for small files. Instead the plaintext gathers in `wbuf`, and
//! a flush asked for during the turn in which the bytes were written is
//! put off until the task's next turn (it wakes itself), by which time
//! the other streams that were ready have queued their frames too — as
//! NGINX writes a connection's output once per pass of its event loop.
//! The turn is [`Turn`], advanced by the connection's loop each time it
//! is polled; the buffer is also sent as soon as it holds
//! [`TLS_COALESCE`] bytes, and at shutdown.

use std::cell::Cell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::flood::FrameMeter;
use crate::http::stream::ClientStream;

/// Reads in a row before the connection task yields.
const READS_PER_TURN: u32 = 16;
/// Plaintext gathered before it goes to rustls (TLS only).
const TLS_COALESCE: usize = 64 * 1024;

/// The connection task's turn, shared by its loop (which advances it each
/// time it is polled) and its [`H2Io`] (which puts a flush off until the
/// next turn). Zero, until the loop starts, flushes at once (the
/// handshake).
#[derive(Clone, Default)]
pub struct Turn(Rc<Cell<u64>>);

impl Turn {
    /// A new turn of the connection task.
    pub fn advance(&self) {
        self.0.set(self.0.get().wrapping_add(1).max(1));
    }
}

/// A client connection for `h2`.
pub struct H2Io {
    /// Shared with the connection task, which closes it (a lingering
    /// close) once `h2` is done with it.
    stream: Rc<ClientStream>,
    /// Bytes read before HTTP/2 began (the h2c preface), served first.
    early: Vec<u8>,
    /// Where reading stands in `early`.
    early_at: usize,
    /// Bytes read and not yet handed to `h2`, from `buf_at`.
    buf: Vec<u8>,
    buf_at: usize,
    meter: Rc<FrameMeter>,
    /// Reads since the connection last waited or yielded.
    reads: u32,
    /// TLS: plaintext written by `h2` and not yet handed to rustls, from
    /// `wbuf_at`.
    wbuf: Vec<u8>,
    wbuf_at: usize,
    turn: Turn,
    /// The turn in which a flush of `wbuf` was put off.
    deferred: Option<u64>,
}

impl H2Io {
    /// `stream`, with `early` (already read) served before it.
    pub fn new(
        stream: Rc<ClientStream>,
        early: Vec<u8>,
        meter: Rc<FrameMeter>,
        turn: Turn,
    ) -> H2Io {
        H2Io {
            stream,
            early,
            early_at: 0,
            buf: Vec::new(),
            buf_at: 0,
            meter,
            reads: 0,
            wbuf: Vec::new(),
            wbuf_at: 0,
            turn,
            deferred: None,
        }
    }

    /// Moves what `out` takes from `early` (or the read buffer) into it,
    /// past the frame meter.
    fn hand_out(&mut self, out: &mut ReadBuf<'_>, from_early: bool) {
        if from_early {
            let n = (self.early.len() - self.early_at).min(out.remaining());
            let piece = &self.early[self.early_at..self.early_at + n];
            self.meter.saw(piece);
            out.put_slice(piece);
            self.early_at += n;
        } else {
            let piece = &self.buf[self.buf_at..];
            let n = piece.len().min(out.remaining());
            self.meter.saw(&piece[..n]);
            out.put_slice(&piece[..n]);
            self.buf_at += n;
            if self.buf_at == self.buf.len() {
                self.buf.clear();
                self.buf_at = 0;
            }
        }
    }
}

impl AsyncRead for H2Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if me.meter.flooded() {
            // The connection is being closed: read nothing more.
            return Poll::Pending;
        }
        me.reads += 1;
        if me.reads > READS_PER_TURN {
            me.reads = 0;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if me.early_at < me.early.len() {
            me.hand_out(out, true);
            if me.early_at == me.early.len() {
                me.early = Vec::new();
                me.early_at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        if me.buf_at < me.buf.len() {
            me.hand_out(out, false);
            return Poll::Ready(Ok(()));
        }
        loop {
            me.buf.reserve(out.remaining().min(64 * 1024));
            match me.stream.try_read_buf(&mut me.buf) {
                Ok(0) => return Poll::Ready(Ok(())),
                Ok(_) => {
                    me.hand_out(out, false);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if let Some(t) = me.stream.tls_conn() {
                        if t.has_plaintext() {
                            continue;
                        }
                    }
                    me.reads = 0;
                    ready!(me.stream.tcp().poll_read_ready(cx))?;
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl H2Io {
    /// Hands the coalesced plaintext to rustls and sends every record,
    /// waiting for the socket as needed.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some(t) = self.stream.tls_conn() else {
            return Poll::Ready(Ok(()));
        };
        let tcp = self.stream.tcp();
        while self.wbuf_at < self.wbuf.len() {
            match t.try_write(tcp, &self.wbuf[self.wbuf_at..]) {
                Ok(n) => self.wbuf_at += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(tcp.poll_write_ready(cx))?
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        self.wbuf.clear();
        self.wbuf_at = 0;
        self.deferred = None;
        loop {
            match t.try_flush(tcp) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(tcp.poll_write_ready(cx))?
                }
                r => return Poll::Ready(r),
            }
        }
    }
}

impl AsyncWrite for H2Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[io::IoSlice::new(data)])
    }

    /// Plain: one `writev`. TLS: the bytes join the coalescing buffer
    /// (`h2` writes a frame's 9-byte header and its payload apart: as two
    /// TLS records and two `sendmsg` calls that costs a record and a
    /// syscall per frame), which goes to rustls in full-sized records when
    /// it is full or `h2` flushes.
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        if me.stream.tls_conn().is_some() {
            if me.wbuf.len() >= TLS_COALESCE {
                ready!(me.poll_drain(cx))?;
            }
            let room = TLS_COALESCE - me.wbuf.len();
            let mut n = 0;
            for b in bufs {
                let take = b.len().min(room - n);
                me.wbuf.extend_from_slice(&b[..take]);
                n += take;
                if n == room {
                    break;
                }
            }
            me.meter.wrote(n);
            return Poll::Ready(Ok(n));
        }
        loop {
            let tcp = me.stream.tcp();
            match tcp.try_write_vectored(bufs) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(tcp.poll_write_ready(cx))?
                }
                r => {
                    if let Ok(n) = r {
                        me.meter.wrote(n);
                    }
                    return Poll::Ready(r);
                }
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    /// TLS: put off until the task's next turn when the bytes were written
    /// in this one (see the module header).
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let turn = me.turn.0.get();
        let pending = me.wbuf.len() - me.wbuf_at;
        if turn != 0 && pending > 0 && pending < TLS_COALESCE {
            match me.deferred {
                None => {
                    me.deferred = Some(turn);
                    cx.waker().wake_by_ref();
                    return Poll::Ready(Ok(()));
                }
                Some(t) if t == turn => return Poll::Ready(Ok(())),
                Some(_) => {}
            }
        }
        me.poll_drain(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.as_mut().get_mut().poll_drain(cx))?;
        self.stream.shutdown_write();
        Poll::Ready(Ok(()))
    }
}
