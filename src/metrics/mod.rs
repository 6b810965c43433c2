//! Server-wide counters, shared by all workers (NGINX's `stub_status`
//! figures). Relaxed atomics: the figures are statistics, not
//! synchronisation.

pub mod timed;

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

/// Responses by status class: `[1xx, 2xx, 3xx, 4xx, 5xx]` (a request
/// ends in `RequestCtx::write_access_log`, which counts it whether or not a
/// log is written; `444` counts as 4xx, as its log line says).
pub static STATUS_CLASSES: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];

/// Counts one response of `status` in its class (outside 100–599: none).
pub fn count_status(status: u16) {
    if let Some(c) = STATUS_CLASSES.get((status / 100).wrapping_sub(1) as usize) {
        inc(c);
    }
}

/// TLS handshakes on `listen … ssl` addresses (`http::tls_accept`).
pub mod tls {
    use std::sync::atomic::AtomicU64;

    /// Handshakes completed.
    pub static HANDSHAKES: AtomicU64 = AtomicU64::new(0);
    /// Of those, sessions resumed (ticket or session cache).
    pub static RESUMED: AtomicU64 = AtomicU64::new(0);
    /// Handshakes that failed (each one NGINX's `info` line "… while SSL
    /// handshaking": a timeout, a close, a protocol error, a refused kTLS).
    pub static FAILED: AtomicU64 = AtomicU64::new(0);
}

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

/// Histogram bucket upper bounds, in seconds: from 50 µs (an event-loop
/// iteration that did real work) to 10 s (a loop stuck on a dead disk).
pub const BUCKETS: [f64; 17] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0,
];

/// A fixed-bucket histogram of durations, lock-free.
#[derive(Debug, Default)]
pub struct Histogram {
    counts: [AtomicU64; 18],
    sum_ns: AtomicU64,
    max_ns: AtomicU64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, d: std::time::Duration) {
        let s = d.as_secs_f64();
        let i = BUCKETS
            .iter()
            .position(|&b| s <= b)
            .unwrap_or(BUCKETS.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        let ns = d.as_nanos().min(u64::MAX as u128) as u64;
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
        self.max_ns.fetch_max(ns, Ordering::Relaxed);
    }

    /// Cumulative counts per bucket (the last is +Inf), sum in seconds and
    /// the largest observation in seconds.
    pub fn snapshot(&self) -> (Vec<u64>, f64, f64) {
        let mut acc = 0;
        let cum = self
            .counts
            .iter()
            .map(|c| {
                acc += c.load(Ordering::Relaxed);
                acc
            })
            .collect();
        (
            cum,
            self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9,
            self.max_ns.load(Ordering::Relaxed) as f64 / 1e9,
        )
    }
}

/// Per-worker figures: how long each event-loop iteration ran before it
/// could wait for events again ("event loop blocked"), and time to first
/// byte of each response.
#[derive(Debug, Default)]
pub struct WorkerMetrics {
    /// Busy time per loop iteration (unpark to park).
    pub loop_busy: Histogram,
    /// Wall time of each poll of each task (`metrics::timed`): how long
    /// one piece of work held the loop.
    pub loop_poll: Histogram,
    /// How late the worker's lag probe was polled after its deadline
    /// (`runtime::loop_lag`): how long ready work waited for the loop.
    pub loop_lag: Histogram,
    /// From a complete request head to the response head ready to send.
    pub ttfb: Histogram,
    /// Longest blocked episode seen by the loop watch, in nanoseconds.
    blocked_max_ns: AtomicU64,
    /// Sum of the blocked episodes, in nanoseconds.
    blocked_ns: AtomicU64,
}

impl WorkerMetrics {
    /// Counts one episode in which the loop, busy, slept in the kernel
    /// (`runtime::loop_watch`).
    pub fn loop_blocked(&self, d: std::time::Duration) {
        let ns = d.as_nanos() as u64;
        self.blocked_ns.fetch_add(ns, Ordering::Relaxed);
        self.blocked_max_ns.fetch_max(ns, Ordering::Relaxed);
    }

    /// The longest blocked episode and the sum of all of them.
    pub fn loop_blocked_figures(&self) -> (std::time::Duration, std::time::Duration) {
        let ns = |a: &AtomicU64| std::time::Duration::from_nanos(a.load(Ordering::Relaxed));
        (ns(&self.blocked_max_ns), ns(&self.blocked_ns))
    }
}

static WORKERS: std::sync::Mutex<Vec<std::sync::Arc<WorkerMetrics>>> =
    std::sync::Mutex::new(Vec::new());

/// The figures of worker `index`; a reload's new worker with the same index
/// carries on the same counters, as Prometheus counters must.
pub fn worker(index: usize) -> std::sync::Arc<WorkerMetrics> {
    let mut w = WORKERS.lock().unwrap();
    while w.len() <= index {
        w.push(Default::default());
    }
    w[index].clone()
}

/// Every worker's figures, by index.
pub fn workers() -> Vec<std::sync::Arc<WorkerMetrics>> {
    WORKERS.lock().unwrap().clone()
}
