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
//! is wrapped in [`Timed`], whose `poll` reads the clock before and after
//! (two `clock_gettime` calls through the vDSO, about 40 ns, per poll) and
//! feeds the worker's `loop_poll` histogram (`porter_loop_poll_seconds`,
//! `porter_loop_poll_max_seconds`). A poll's wall time includes preemption
//! by other threads of the machine while it ran: that too kept the loop's
//! other work waiting.
//!
//! Hand-written: tokio's own per-poll hooks (`on_before_task_poll`) need
//! the `tokio_unstable` build flag.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use super::WorkerMetrics;

thread_local! {
    /// The figures of the worker this thread runs, set at its start.
    static FIGURES: RefCell<Option<Arc<WorkerMetrics>>> = const { RefCell::new(None) };
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
        let t = Instant::now();
        let out = this.inner.as_mut().poll(cx);
        figures.loop_poll.observe(t.elapsed());
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
