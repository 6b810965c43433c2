//! HTTP/2 to upstream peers (`grpc_pass`): the `h2` crate's client over an
//! [`UpStream`] (TCP, unix socket or TLS, connected as the proxy connects),
//! and a per-worker pool of idle HTTP/2 connections for `keepalive`.
//!
//! Framing, HPACK, stream states and flow control are `h2`'s, as for the
//! server side (`http::http2`); this file only gives it the socket as
//! `AsyncRead`/`AsyncWrite` ([`H2Io`]: the socket's non-blocking calls,
//! `WouldBlock` turned into a wait for readiness, so the connection task
//! is woken by epoll like any other) and runs the connection's task on the
//! worker's loop. As NGINX's gRPC proxy, one connection carries one
//! request at a time: a request takes a connection (from the pool or
//! new) and gives it back once its response ended cleanly, so
//! `keepalive N` bounds idle connections per group per worker exactly as
//! it does for `proxy_pass`.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::client::SendRequest;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::task::JoinHandle;

use super::{PeerAddr, UpStream};

/// Most bytes one read from the socket takes.
const READ_MAX: usize = 64 * 1024;

/// The upstream socket as `h2` wants it.
pub struct H2Io {
    stream: UpStream,
    /// Bytes read and not yet handed to `h2`, from `at`.
    buf: Vec<u8>,
    at: usize,
}

impl H2Io {
    /// `stream`, connected (and through its TLS handshake).
    pub fn new(stream: UpStream) -> H2Io {
        H2Io {
            stream,
            buf: Vec::new(),
            at: 0,
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
        if me.at == me.buf.len() {
            me.buf.clear();
            me.at = 0;
            let max = out.remaining().min(READ_MAX);
            match me.stream.poll_read(cx, &mut me.buf, max) {
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        let n = (me.buf.len() - me.at).min(out.remaining());
        out.put_slice(&me.buf[me.at..me.at + n]);
        me.at += n;
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for H2Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.stream.poll_write(cx, data)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.stream.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.stream.poll_flush(cx))?;
        self.stream.shutdown_write();
        Poll::Ready(Ok(()))
    }
}

/// The client settings of a new connection.
#[derive(Debug, Clone, Copy)]
pub struct H2Settings {
    /// The largest response header list taken (`grpc_buffer_size`).
    pub max_header_list: u32,
}

/// An HTTP/2 connection to a peer: the handle requests are sent on, and
/// the task that runs the connection (ended when the connection is
/// dropped).
pub struct H2Conn {
    /// Sends requests (one at a time, see the module header).
    pub send: SendRequest<Bytes>,
    /// The peer.
    pub addr: PeerAddr,
    /// It came out of the pool.
    pub reused: bool,
    /// Requests sent on it so far.
    pub requests: u64,
    task: JoinHandle<()>,
}

impl Drop for H2Conn {
    fn drop(&mut self) {
        // Without a handle `h2` ends the connection by itself (GOAWAY);
        // the task is only aborted when it still runs after that.
        let task = &self.task;
        if task.is_finished() {
            return;
        }
        let abort = task.abort_handle();
        crate::metrics::timed::spawn(async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            abort.abort();
        });
    }
}

/// Runs the HTTP/2 handshake on a connected socket and starts the
/// connection's task on the worker's loop.
pub async fn handshake(
    stream: UpStream,
    addr: PeerAddr,
    settings: H2Settings,
) -> Result<H2Conn, h2::Error> {
    let (send, conn) = h2::client::Builder::new()
        .enable_push(false)
        .max_header_list_size(settings.max_header_list)
        .handshake::<_, Bytes>(H2Io::new(stream))
        .await?;
    let task = crate::metrics::timed::spawn(async move {
        let _ = conn.await;
    });
    Ok(H2Conn {
        send,
        addr,
        reused: false,
        requests: 0,
        task,
    })
}

struct Idle {
    conn: H2Conn,
    since: Instant,
    serial: u64,
}

thread_local! {
    static POOLS: RefCell<HashMap<u64, VecDeque<Idle>>> = RefCell::new(HashMap::new());
    static SERIAL: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// An idle connection to `addr` from pool `key`, if a live one younger
/// than `timeout` is there (the most recently used first).
pub fn take(key: u64, addr: &PeerAddr, timeout: Duration) -> Option<H2Conn> {
    let (found, dropped) = POOLS.with(|p| {
        let mut pools = p.borrow_mut();
        let q = pools.get_mut(&key)?;
        let now = Instant::now();
        let (keep, old): (VecDeque<Idle>, VecDeque<Idle>) = std::mem::take(q)
            .into_iter()
            .partition(|i| now.duration_since(i.since) < timeout && !i.conn.task.is_finished());
        *q = keep;
        let found = q
            .iter()
            .rposition(|i| &i.conn.addr == addr)
            .and_then(|pos| q.remove(pos));
        Some((found, old))
    })?;
    // Dropped outside the borrow: a drop may spawn.
    drop(dropped);
    let mut conn = found?.conn;
    conn.reused = true;
    Some(conn)
}

/// Gives a connection whose exchange ended cleanly back to pool `key`,
/// which keeps at most `max` (the oldest goes first), for at most
/// `timeout` (`keepalive_timeout`: a timer on the worker's loop closes it
/// then, if no request took it). Must run on a worker's loop.
pub fn put(key: u64, max: usize, timeout: Duration, conn: H2Conn) {
    if max == 0 || conn.task.is_finished() {
        return;
    }
    let serial = SERIAL.with(|s| {
        s.set(s.get() + 1);
        s.get()
    });
    let out = POOLS.with(|p| {
        let mut pools = p.borrow_mut();
        let q = pools.entry(key).or_default();
        q.push_back(Idle {
            conn,
            since: Instant::now(),
            serial,
        });
        let mut out = Vec::new();
        while q.len() > max {
            out.extend(q.pop_front());
        }
        out
    });
    drop(out);
    crate::metrics::timed::spawn(async move {
        tokio::time::sleep(timeout).await;
        let gone = POOLS.with(|p| {
            let mut pools = p.borrow_mut();
            let q = pools.get_mut(&key)?;
            let pos = q.iter().position(|i| i.serial == serial)?;
            q.remove(pos)
        });
        drop(gone);
    });
}
