//! A span of time started by one holder and ended once, by whichever of
//! its holders gets there first. `$upstream_response_time` is one: a try
//! starts it, and it ends with the response body's last byte (the body
//! stream), with the try's failure, or when the try is given up (the
//! client left, the request ended first), as NGINX sets `response_time`
//! in `ngx_http_upstream_next` and `ngx_http_upstream_finalize_request`.
//! Until it ends it reads as not ended (NGINX's `-`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug)]
struct Inner {
    start: Instant,
    /// Microseconds from `start` to the end, plus one (0: not ended).
    end: AtomicU64,
}

/// A shared span; clones share its start and its end.
#[derive(Debug, Clone)]
pub struct SharedSpan(Arc<Inner>);

impl Default for SharedSpan {
    /// A span starting now.
    fn default() -> Self {
        SharedSpan(Arc::new(Inner {
            start: Instant::now(),
            end: AtomicU64::new(0),
        }))
    }
}

impl SharedSpan {
    /// Time since the start.
    pub fn elapsed(&self) -> Duration {
        self.0.start.elapsed()
    }

    /// Ends the span now, unless it has ended already.
    pub fn end(&self) {
        let us = u64::try_from(self.elapsed().as_micros()).unwrap_or(u64::MAX - 1);
        let _ = self
            .0
            .end
            .compare_exchange(0, us + 1, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// Its length once ended.
    pub fn ended(&self) -> Option<Duration> {
        match self.0.end.load(Ordering::Relaxed) {
            0 => None,
            n => Some(Duration::from_micros(n - 1)),
        }
    }

    /// A guard that ends the span when dropped, unless
    /// [`disarmed`](EndOnDrop::disarm): a try's future dropped half-way
    /// still ends its time.
    pub fn end_on_drop(&self) -> EndOnDrop {
        EndOnDrop(Some(self.clone()))
    }
}

/// Ends a span when dropped (see [`SharedSpan::end_on_drop`]).
#[derive(Debug)]
pub struct EndOnDrop(Option<SharedSpan>);

impl EndOnDrop {
    /// Leaves the span to another holder (the response body).
    pub fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        if let Some(s) = &self.0 {
            s.end();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_end_counts_and_clones_share_it() {
        let s = SharedSpan::default();
        assert_eq!(s.ended(), None);
        let c = s.clone();
        std::thread::sleep(Duration::from_millis(5));
        c.end();
        let first = s.ended().expect("ended");
        assert!(first >= Duration::from_millis(5));
        std::thread::sleep(Duration::from_millis(5));
        s.end();
        assert_eq!(s.ended(), Some(first));
    }

    #[test]
    fn a_guard_ends_the_span_unless_disarmed() {
        let s = SharedSpan::default();
        s.end_on_drop().disarm();
        assert_eq!(s.ended(), None);
        drop(s.end_on_drop());
        assert!(s.ended().is_some());
    }
}
