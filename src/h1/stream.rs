//! The two streams both sides of porter read piece by piece: a response
//! body ([`BodyStream`], from a file, an upstream or a filter) and the
//! upstream's side of a tunnel ([`TunnelPeer`]), so `http` sends and relays
//! them without knowing `upstream`.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::time::Duration;

/// A future a [`BodyStream`] returns.
pub type ChunkFuture<'a> = Pin<Box<dyn Future<Output = io::Result<bool>> + 'a>>;

/// A body whose bytes arrive while it is being sent: the connection loop
/// asks for one bounded piece at a time and writes it before asking for
/// the next, so a slow client slows the source (backpressure) instead of
/// filling memory.
pub trait BodyStream {
    /// Appends the next piece of the body to `out` (cleared by the
    /// caller); `Ok(false)` at the end of the body. An error means the body
    /// is truncated; the stream has logged why when
    /// [`is_logged`] says so. The future must be cancel-safe: dropping it
    /// before it completes loses no bytes (the connection loop polls it
    /// once to see whether a piece is already at hand).
    fn read_chunk<'a>(&'a mut self, out: &'a mut Vec<u8>) -> ChunkFuture<'a>;

    /// Makes the stream produce only `range` of the body (offsets from
    /// the body's first byte), before anything was read: `true` when it
    /// can (a sliced body, which then fetches only the slices that cover
    /// the range), `false` (the default) when the caller must cut it.
    fn narrow(&mut self, _range: std::ops::Range<u64>) -> bool {
        false
    }

    /// The trailer fields that came after the body (a gRPC upstream's
    /// `grpc-status`), asked once `read_chunk` said the body ended: an
    /// HTTP/2 stream ends with them in a HEADERS frame. None (the
    /// default) for a body without.
    fn trailers(&mut self) -> Option<http::HeaderMap> {
        None
    }
}

/// An error whose cause a body stream already wrote to the error log.
#[derive(Debug)]
struct Logged;

impl std::fmt::Display for Logged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("body truncated (logged)")
    }
}

impl std::error::Error for Logged {}

/// The error a body stream returns after logging why it stopped.
pub fn logged_error() -> io::Error {
    io::Error::other(Logged)
}

/// Whether `e` came from [`logged_error`].
pub fn is_logged(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|r| r.is::<Logged>())
}

/// A future a [`TunnelPeer`] returns.
pub type PeerFuture<'a, T> = Pin<Box<dyn Future<Output = io::Result<T>> + 'a>>;

/// The upstream's side of a tunnel.
pub trait TunnelPeer {
    /// Appends what is there to `buf` (at most `max` bytes) without
    /// waiting: `WouldBlock` when nothing is, `Ok(0)` when the peer closed.
    fn try_read(&self, buf: &mut Vec<u8>, max: usize) -> io::Result<usize>;
    /// Waits until a read may give something (the tunnel holds no buffer
    /// meanwhile).
    fn readable(&self) -> PeerFuture<'_, ()>;
    /// Writes all of `data`, each wait at most `timeout` (`ETIMEDOUT`).
    fn write<'a>(&'a self, data: &'a [u8], timeout: Duration) -> PeerFuture<'a, ()>;
    /// Ends the sending side (TLS `close_notify`, then the TCP half-close).
    fn shutdown_write(&self);
}
