//! The longest single piece of work on an event loop: every task a
//! worker runs is timed poll by poll.
//!
//! `porter_loop_busy_seconds` times a loop from wake-up to its next wait
//! for events; under a saturating load the loop never waits, so that
//! stretch is the whole busy period, however short each piece of work in
//! it was. `loop_watch` tells whether a busy loop slept in the kernel. What
//! neither shows is how long one task held the loop while others, ready,
//! waited: that is one `poll` of one task, which this module times.
//! [`spawn`] replaces `tokio::task::spawn_local` in the worker: the future
//! is wrapped in [`Timed`], whose `poll` reads the clock after it and
//! feeds the worker's `loop_poll` histogram (`porter_loop_poll_seconds`,
//! `porter_loop_poll_max_seconds`). A poll's wall time includes preemption
//! by other threads of the machine while it ran: that too kept the loop's
//! other work waiting.
//!
//! One clock reading per poll, as NGINX's `ngx_time_update` caches the
//! time per turn of its loop: the reading that ends a poll is kept
//! ([`LAST`]) and starts the next poll of the same wake-up; the worker
//! sets it when the loop wakes ([`woke`]) and clears it when the loop
//! parks ([`parked`]), so a wait for events is never counted in a poll. A
//! poll thus also carries the runtime's own work since the poll before it
//! (picking the task, a non-blocking look at the events every few dozen
//! polls): microseconds, against the milliseconds this figure is there to
//! catch. [`now`] lends the same reading to the request path (the start
//! of a request, for `$request_time` and TTFB).
//!
//! Hand-written: tokio's own per-poll hooks (`on_before_task_poll`) need
//! the `tokio_unstable` build flag.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use super::WorkerMetrics;

thread_local! {
    /// The figures of the worker this thread runs, set at its start.
    static FIGURES: RefCell<Option<Arc<WorkerMetrics>>> = const { RefCell::new(None) };
    /// The latest clock reading of this loop since it woke (the wake-up,
    /// or the end of the latest timed poll); `None` while it is parked.
    static LAST: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// The loop woke at `t` (the runtime's unpark hook).
pub fn woke(t: Instant) {
    LAST.with(|l| l.set(Some(t)));
}

/// The loop is about to wait for events (the runtime's park hook).
pub fn parked() {
    LAST.with(|l| l.set(None));
}

/// The time now, within the current turn of the loop: the latest
/// reading since it woke (at most one poll old), else the clock.
pub fn now() -> Instant {
    LAST.with(|l| l.get()).unwrap_or_else(Instant::now)
}

/// Tasks spawned on this thread from now on feed `figures`.
pub fn set_worker(figures: Arc<WorkerMetrics>) {
    FIGURES.with(|f| *f.borrow_mut() = Some(figures));
}

/// `tokio::task::spawn_local`, with every poll of the task timed.
pub fn spawn<F>(future: F) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let figures = FIGURES.with(|f| f.borrow().clone());
    tokio::task::spawn_local(Timed {
        inner: Box::pin(future),
        figures,
    })
}

/// A future whose polls are timed into its worker's `loop_poll`.
pub struct Timed<F> {
    inner: Pin<Box<F>>,
    /// `None` off a worker thread (unit tests): not timed.
    figures: Option<Arc<WorkerMetrics>>,
}

impl<F: Future> Future for Timed<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let Some(figures) = &this.figures else {
            return this.inner.as_mut().poll(cx);
        };
        let start = now();
        let out = this.inner.as_mut().poll(cx);
        let end = Instant::now();
        LAST.with(|l| l.set(Some(end)));
        figures
            .loop_poll
            .observe(end.saturating_duration_since(start));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn every_poll_is_timed_and_the_longest_kept() {
        let figures = Arc::new(WorkerMetrics::default());
        set_worker(figures.clone());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async {
            spawn(async {
                // One poll that holds the loop 30 ms, then one that yields.
                std::thread::sleep(Duration::from_millis(30));
                tokio::task::yield_now().await;
            })
            .await
            .unwrap();
        });
        let (buckets, _, max) = figures.loop_poll.snapshot();
        assert!(max >= 0.030, "longest poll {max} s");
        assert_eq!(buckets.last(), Some(&2), "two polls counted");
    }
}
