//! An upgraded connection (`101 Switching Protocols` through
//! `proxy_pass`, WebSocket above all): after the head went out, the
//! client connection becomes a two-way byte tunnel to the upstream, as
//! NGINX's `ngx_http_upstream_upgrade` makes it. The handler describes the
//! upgrade ([`Upgrade`] on the response: the upstream's side as a
//! [`TunnelPeer`], so `http` imports nothing from `upstream`); the
//! connection loop runs [`run`] with the client's stream once the head is
//! written, and the connection ends with the tunnel.
//!
//! Both directions run at once, each a read then a write of one buffer
//! (`proxy_buffer_size`), so a slow reader slows its writer; a direction
//! waiting for bytes holds no buffer (it goes back to the worker's spares,
//! `buffers.rs`), so an open, quiet tunnel costs its sockets and its task. Bytes already
//! read on either side (the client's pipelined after the request head,
//! the upstream's after the response head) go first. When a side's read
//! ends, what it sent is flushed and the other side's write is shut down
//! (the half-close passes on); the tunnel ends when both have ended. The
//! tunnel is idle — and closes — when nothing was read from either side
//! for `proxy_read_timeout` (NGINX re-arms the upstream read timer on
//! every event of the tunnel); a write waits at most `proxy_send_timeout`
//! (upstream) or `send_timeout` (client).

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::buffers;
use super::context::RequestCtx;
use super::stream::ClientStream;
pub use crate::h1::stream::{PeerFuture, TunnelPeer};
use crate::log::{ErrorLog, Level, RequestLog};

/// The timeouts of a tunnel, from the location that proxied it.
#[derive(Debug, Clone, Copy)]
pub struct TunnelTimeouts {
    /// Nothing read from either side this long closes it
    /// (`proxy_read_timeout`).
    pub idle: Duration,
    /// A wait to write to the upstream (`proxy_send_timeout`).
    pub to_peer: Duration,
    /// A wait to write to the client (`send_timeout`).
    pub to_client: Duration,
}

/// What a handler hands the connection for an upgraded response.
pub struct Upgrade {
    /// The upstream's side.
    pub peer: Box<dyn TunnelPeer>,
    /// Bytes the upstream sent after its response head.
    pub early: Vec<u8>,
    /// Each direction's buffer (`proxy_buffer_size`).
    pub buffer: usize,
    /// Its timeouts.
    pub timeouts: TunnelTimeouts,
    /// Where to log, naming the upstream (else the request's log).
    pub log: Option<RequestLog>,
    /// `$upstream_bytes_received` of the try, added to.
    pub received: Option<Arc<AtomicU64>>,
}

impl std::fmt::Debug for Upgrade {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upgrade")
            .field("early", &self.early.len())
            .field("timeouts", &self.timeouts)
            .finish()
    }
}

/// How a tunnel ended, and what went through it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TunnelEnd {
    /// Bytes written to the client.
    pub to_client: u64,
    /// Bytes written to the upstream.
    pub to_peer: u64,
    /// Why it ended, when not by both sides closing.
    pub fault: Option<Fault>,
}

/// Why a tunnel ended early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Nothing read for `proxy_read_timeout`, or an upstream write timed
    /// out: NGINX's "upstream timed out".
    UpstreamTimedOut,
    /// A client write timed out (`send_timeout`).
    ClientTimedOut,
    /// A read or write failed on either side.
    Failed,
}

impl Fault {
    /// NGINX's error-log text for it (`None`: not logged).
    pub fn log_text(self) -> Option<&'static str> {
        match self {
            Fault::UpstreamTimedOut => Some(
                "upstream timed out (110: Connection timed out) while proxying upgraded connection",
            ),
            Fault::ClientTimedOut => Some(
                "client timed out (110: Connection timed out) while proxying upgraded connection",
            ),
            Fault::Failed => None,
        }
    }
}

/// The idle deadline both directions share: each read pushes it on.
pub(super) struct Idle {
    timeout: Duration,
    deadline: Cell<Instant>,
}

impl Idle {
    /// A deadline `timeout` from now.
    pub(super) fn new(timeout: Duration) -> Idle {
        Idle {
            timeout,
            deadline: Cell::new(Instant::now() + timeout),
        }
    }

    /// Pushes the deadline on: something was read.
    pub(super) fn touch(&self) {
        self.deadline.set(Instant::now() + self.timeout);
    }

    /// When the tunnel is idle unless something is read before.
    pub(super) fn deadline(&self) -> Instant {
        self.deadline.get()
    }
}

/// The counters the two directions add to.
struct Counts {
    to_client: Cell<u64>,
    to_peer: Cell<u64>,
    received: Option<Arc<AtomicU64>>,
}

/// Whether `e` is a write's timeout.
pub(super) fn timed_out(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ETIMEDOUT) || e.kind() == io::ErrorKind::TimedOut
}

/// One read of a direction into `buf` (`Ok(0)` at its end). The buffer
/// is taken from the worker's spares when the direction holds none, and
/// handed back whenever nothing is there to read: a tunnel that waits
/// (most WebSockets, most of the time) holds no buffer, as an idle
/// keep-alive connection holds none. The wait ends at the shared idle
/// deadline (`proxy_read_timeout`), unless a read of the other direction
/// pushed it on meanwhile.
pub(super) async fn read_next<F: Future<Output = io::Result<()>>>(
    buf: &mut Vec<u8>,
    size: usize,
    idle: &Idle,
    mut try_read: impl FnMut(&mut Vec<u8>) -> io::Result<usize>,
    readable: impl Fn() -> F,
) -> Result<usize, Fault> {
    loop {
        if buf.capacity() == 0 {
            *buf = buffers::take();
        }
        buf.reserve(size);
        match try_read(buf) {
            Ok(n) => {
                idle.touch();
                return Ok(n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => return Err(Fault::Failed),
        }
        buffers::give(std::mem::take(buf));
        loop {
            match tokio::time::timeout_at(idle.deadline.get(), readable()).await {
                Ok(Ok(())) => break,
                Ok(Err(_)) => return Err(Fault::Failed),
                Err(_) if idle.deadline.get() <= Instant::now() => {
                    return Err(Fault::UpstreamTimedOut)
                }
                Err(_) => {}
            }
        }
    }
}

/// Client to upstream: `buf` (bytes the client sent after its head)
/// first, then what it sends, until it ends; then the upstream's write is
/// shut down.
async fn client_to_peer(
    client: &ClientStream,
    peer: &dyn TunnelPeer,
    mut buf: Vec<u8>,
    size: usize,
    t: &TunnelTimeouts,
    idle: &Idle,
    counts: &Counts,
) -> Result<(), Fault> {
    loop {
        if !buf.is_empty() {
            match peer.write(&buf, t.to_peer).await {
                Ok(()) => {}
                Err(e) if timed_out(&e) => return Err(Fault::UpstreamTimedOut),
                Err(_) => return Err(Fault::Failed),
            }
            counts.to_peer.set(counts.to_peer.get() + buf.len() as u64);
            buf.clear();
        }
        let read = |b: &mut Vec<u8>| client.try_read_buf(b);
        if read_next(&mut buf, size, idle, read, || client.readable()).await? == 0 {
            peer.shutdown_write();
            return Ok(());
        }
    }
}

/// Upstream to client: `buf` (bytes the upstream sent after its head)
/// first, then what the upstream sends, until it ends; then the client's
/// write is shut down.
async fn peer_to_client(
    client: &ClientStream,
    peer: &dyn TunnelPeer,
    mut buf: Vec<u8>,
    size: usize,
    t: &TunnelTimeouts,
    idle: &Idle,
    counts: &Counts,
) -> Result<(), Fault> {
    loop {
        if !buf.is_empty() {
            match client.write_all(&buf, false, t.to_client).await {
                Ok(()) => {}
                Err(e) if timed_out(&e) => return Err(Fault::ClientTimedOut),
                Err(_) => return Err(Fault::Failed),
            }
            counts
                .to_client
                .set(counts.to_client.get() + buf.len() as u64);
            buf.clear();
        }
        let read = |b: &mut Vec<u8>| peer.try_read(b, size);
        let n = read_next(&mut buf, size, idle, read, || peer.readable()).await?;
        if let Some(rx) = &counts.received {
            rx.fetch_add(n as u64, Ordering::Relaxed);
        }
        if n == 0 {
            client.shutdown_write();
            return Ok(());
        }
    }
}

/// Runs the tunnel between `client` (with `pending`, the bytes it sent
/// after the request head) and the upgrade's peer until both sides have
/// closed, or the first fault.
pub async fn run(client: &ClientStream, pending: Vec<u8>, up: Upgrade) -> TunnelEnd {
    let size = up.buffer.max(1024);
    let idle = Idle::new(up.timeouts.idle);
    let counts = Counts {
        to_client: Cell::new(0),
        to_peer: Cell::new(0),
        received: up.received.clone(),
    };
    let peer = &*up.peer;
    let t = &up.timeouts;
    // The bytes read with the heads go first, from the heads' buffers;
    // those go back once written.
    let early = up.early;
    let outcome = tokio::try_join!(
        client_to_peer(client, peer, pending, size, t, &idle, &counts),
        peer_to_client(client, peer, early, size, t, &idle, &counts),
    );
    TunnelEnd {
        to_client: counts.to_client.get(),
        to_peer: counts.to_peer.get(),
        fault: outcome.err(),
    }
}

/// Runs the tunnel of an upgraded response whose head was sent, then logs
/// the request: NGINX's line when a timeout ended it, and the access log
/// with the bytes the client received through it (`$bytes_sent` and
/// `$body_bytes_sent` count them, as NGINX's `c->sent` does).
pub async fn serve(
    client: &ClientStream,
    pending: Vec<u8>,
    upgraded: Box<(Upgrade, RequestCtx)>,
    log: &ErrorLog,
) {
    let (up, mut ctx) = *upgraded;
    let try_log = up.log.clone();
    let end = run(client, pending, up).await;
    if let Some(text) = end.fault.and_then(Fault::log_text) {
        let log = try_log.unwrap_or_else(|| ctx.log(log));
        log.line(Level::Info, format_args!("{text}"));
    }
    ctx.bytes_sent += end.to_client;
    ctx.body_bytes_sent += end.to_client;
    ctx.limits.held.clear();
    ctx.write_access_log();
}
