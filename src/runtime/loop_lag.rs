//! Event-loop *lag*: how long work that became ready waited for its loop.
//!
//! `porter_loop_busy_seconds` times a loop from wake-up to its next wait;
//! under a load that keeps the loop saturated (bench S1: the loops copy
//! 3 GB/s of a hot file) it never waits, and the figure becomes the length
//! of the saturated period rather than of any delay. `metrics::timed`
//! times one poll of one task, `loop_watch` tells whether a busy loop slept
//! in the kernel; neither says how long a request that just became ready
//! (its bytes arrived, its disk read completed) waited before the loop got
//! to it: the time for the loop to poll the tasks ahead of it, its I/O
//! driver, and any preemption of the thread meanwhile. That wait is what a
//! hot request's latency is made of, and what "the loop is never held" is
//! about.
//!
//! So each worker runs a probe task ([`probe`]) that sleeps until a
//! deadline every [`PERIOD`] and, when polled, records how late it is
//! (`porter_loop_lag_seconds`, `porter_loop_lag_max_seconds`): the same
//! path as a connection's timer or socket readiness (driver, run queue,
//! poll). tokio's timer wheel has 1 ms ticks, so each sample includes up to
//! 1 ms of rounding; a stall of length S is seen as at least S − PERIOD.
//! Node.js reports the same figure (`monitorEventLoopDelay`). The cost is
//! one timer per worker every 10 ms.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::metrics::WorkerMetrics;

/// Time between two samples of a loop's lag.
pub const PERIOD: Duration = Duration::from_millis(10);

/// Runs for as long as the worker's loop: samples its lag into `figures`.
pub async fn probe(figures: Arc<WorkerMetrics>) {
    let mut due = Instant::now() + PERIOD;
    loop {
        tokio::time::sleep_until(due.into()).await;
        let now = Instant::now();
        figures.loop_lag.observe(now.saturating_duration_since(due));
        due = now + PERIOD;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probe samples a free loop every PERIOD, and a task that holds
    /// the loop for 60 ms shows as a lag of at least 60 ms − PERIOD.
    #[test]
    fn a_held_loop_shows_as_lag() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        let figures = Arc::new(WorkerMetrics::default());
        let f = figures.clone();
        local.block_on(&rt, async move {
            let p = tokio::task::spawn_local(probe(f.clone()));
            tokio::time::sleep(Duration::from_millis(55)).await;
            // Samples are taken while the loop is free (their size
            // depends on the machine's load, so it is not checked).
            let samples = *f.loop_lag.snapshot().0.last().unwrap();
            assert!(samples >= 2, "{samples} samples in 55 ms");
            std::thread::sleep(Duration::from_millis(60));
            tokio::time::sleep(Duration::from_millis(25)).await;
            p.abort();
        });
        let max = figures.loop_lag.snapshot().2;
        assert!(max >= 0.050, "lag max {max}");
    }
}
