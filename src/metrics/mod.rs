//! Server-wide counters, shared by all workers (NGINX's `stub_status`
//! figures). Relaxed atomics: the figures are statistics, not
//! synchronisation.

use std::sync::atomic::{AtomicU64, Ordering};

/// Connections accepted.
pub static ACCEPTS: AtomicU64 = AtomicU64::new(0);
/// Connections handled (accepted and not dropped for `worker_connections`).
pub static HANDLED: AtomicU64 = AtomicU64::new(0);
/// Requests read.
pub static REQUESTS: AtomicU64 = AtomicU64::new(0);
/// Open client connections.
pub static ACTIVE: AtomicU64 = AtomicU64::new(0);
/// Connections reading a request head.
pub static READING: AtomicU64 = AtomicU64::new(0);
/// Connections processing or writing a response.
pub static WRITING: AtomicU64 = AtomicU64::new(0);

/// Adds one to a counter.
pub fn inc(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Subtracts one from a gauge.
pub fn dec(c: &AtomicU64) {
    c.fetch_sub(1, Ordering::Relaxed);
}

/// Reads a counter.
pub fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

/// Counts a gauge up for as long as the guard lives.
pub struct Gauge(&'static AtomicU64);

impl Gauge {
    /// Increments `c` until dropped.
    pub fn new(c: &'static AtomicU64) -> Gauge {
        inc(c);
        Gauge(c)
    }
}

impl Drop for Gauge {
    fn drop(&mut self) {
        dec(self.0);
    }
}
