//! Which route delivered a file body's bytes to the client:
//! `porter_disk_send_bytes_total{route}`. The residency checks decide per
//! call whether a range goes out with a zero-copy `sendfile` on the loop,
//! a copy, a pool thread or the ring, and a TLS connection decides whether
//! `sendfile` may be used at all (kTLS yes, rustls no): this counter is
//! how a test — or an operator — sees which one ran. One relaxed atomic
//! add per call that sent something; nothing allocated.

use std::sync::atomic::{AtomicU64, Ordering};

/// How file-body bytes reached the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `sendfile` by the event loop (zero-copy): `aio off`, or the fast
    /// path found the range readable in the page cache.
    Sendfile,
    /// The loop `send`s a buffer the disk layer filled: the copy fast
    /// path's `preadv2(RWF_NOWAIT)` copy, or a hole kept by `hot_hole`.
    Copy,
    /// `sendfile` by a pool thread on a duplicate of the socket.
    Pool,
    /// `aio on`: the ring's read (or the fast path's copy) and `send`.
    Uring,
    /// Read into the writer's buffer (`OpenFile::read_at`) and written
    /// through the connection's stream: `sendfile off`, and every file
    /// body on a user-space TLS connection (rustls encrypts it).
    Read,
}

impl Route {
    /// Every route, in metrics order.
    pub const ALL: [Route; 5] = [
        Route::Sendfile,
        Route::Copy,
        Route::Pool,
        Route::Uring,
        Route::Read,
    ];

    /// Its metrics label.
    pub fn name(self) -> &'static str {
        match self {
            Route::Sendfile => "sendfile",
            Route::Copy => "copy",
            Route::Pool => "pool",
            Route::Uring => "uring",
            Route::Read => "read",
        }
    }
}

static SENT: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];

/// Counts `n` body bytes the socket took through `route`.
pub fn count(route: Route, n: usize) {
    if n > 0 {
        SENT[route as usize].fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// Counts the bytes of `r` (a send's result) through `route`, and passes
/// it on.
pub(super) fn counted(route: Route, r: std::io::Result<usize>) -> std::io::Result<usize> {
    if let Ok(n) = r {
        count(route, n);
    }
    r
}

/// Bytes sent through `route` since start, by all workers.
pub fn bytes(route: Route) -> u64 {
    SENT[route as usize].load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_count_apart_and_errors_count_nothing() {
        let before: Vec<u64> = Route::ALL.iter().map(|&r| bytes(r)).collect();
        count(Route::Copy, 10);
        let _ = counted(Route::Copy, Ok(5));
        let _ = counted(Route::Copy, Err(std::io::ErrorKind::WouldBlock.into()));
        // Other tests may count concurrently: only a lower bound holds for
        // `copy`, and names must be distinct.
        assert!(bytes(Route::Copy) >= before[1] + 15);
        let names: std::collections::BTreeSet<_> = Route::ALL.iter().map(|r| r.name()).collect();
        assert_eq!(names.len(), Route::ALL.len());
        for (i, r) in Route::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i, "ALL is in index order");
        }
    }
}
