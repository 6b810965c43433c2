//! The bulk lane's gate: how many bulk tasks (reads of whole chunks from
//! the disk) a pool lets run at once, so that the disk's own queue stays
//! short.
//!
//! The short lane keeps a hot file's lost page out of the pool's queue,
//! but its read still joins the device's queue (the kernel's and the
//! disk's, or a blkio throttle's FIFO) behind every bulk read already
//! issued: with 48 bulk threads each reading 512 KiB from a 40 MB/s disk
//! that is 0.6 s. A pool's `threads` is a guess at what the disk serves
//! well; the gate measures it instead, as TCP's congestion control does a
//! path: each bulk task's time is its wait in the device's queue plus its
//! own transfer, and the number allowed to run is cut by a quarter when a
//! task took longer than [`TARGET`] (at most once per `TARGET`, so one
//! burst of late completions cuts once) and raised by one after a window
//! of `allowed` tasks that finished within it while the gate was full.
//! So a fast disk opens the gate up to the lane's threads and a saturated
//! slow one keeps about `TARGET` of reads queued — never fewer than
//! [`MIN_ALLOWED`], which keep it busy. The pool's `max_queue` and
//! overflow are unchanged: tasks held back wait in the pool's bulk queue,
//! where the short lane passes them.

use std::time::{Duration, Instant};

/// A bulk task taking longer than this means the disk's queue is too deep.
pub const TARGET: Duration = Duration::from_millis(25);

/// Bulk tasks always allowed: one transferring while the next is queued.
pub const MIN_ALLOWED: usize = 2;

/// Where the gate starts: opened from here as the disk proves fast.
const START: usize = 8;

/// The gate of one pool's bulk lane.
#[derive(Debug)]
pub struct BulkGate {
    allowed: usize,
    max: usize,
    /// Tasks within the target since the last change (the window).
    credit: usize,
    last_cut: Option<Instant>,
}

impl BulkGate {
    /// A gate for a lane of at most `max` threads.
    pub fn new(max: usize) -> BulkGate {
        BulkGate {
            allowed: START.clamp(MIN_ALLOWED.min(max), max.max(1)),
            max: max.max(1),
            credit: 0,
            last_cut: None,
        }
    }

    /// How many bulk tasks may run now.
    pub fn allowed(&self) -> usize {
        self.allowed
    }

    /// A bulk task ended after `took`; `running` bulk tasks ran with it
    /// (itself included).
    pub fn completed(&mut self, took: Duration, running: usize, now: Instant) {
        if took > TARGET {
            self.credit = 0;
            if self
                .last_cut
                .is_some_and(|t| now.duration_since(t) < TARGET)
            {
                return;
            }
            self.last_cut = Some(now);
            let floor = MIN_ALLOWED.min(self.max);
            self.allowed = (self.allowed - (self.allowed / 4).max(1)).max(floor);
            return;
        }
        // Only a full gate says whether more would still be fast.
        if running < self.allowed {
            return;
        }
        self.credit += 1;
        if self.credit >= self.allowed {
            self.credit = 0;
            self.allowed = (self.allowed + 1).min(self.max);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAST: Duration = Duration::from_millis(2);
    const SLOW: Duration = Duration::from_millis(400);

    #[test]
    fn a_fast_disk_opens_the_gate_to_every_thread_of_the_lane() {
        let mut g = BulkGate::new(48);
        assert_eq!(g.allowed(), 8);
        let now = Instant::now();
        for _ in 0..2000 {
            let full = g.allowed();
            g.completed(FAST, full, now);
        }
        assert_eq!(g.allowed(), 48);
    }

    #[test]
    fn a_gate_that_is_not_full_does_not_grow() {
        let mut g = BulkGate::new(48);
        let now = Instant::now();
        for _ in 0..1000 {
            g.completed(FAST, 3, now);
        }
        assert_eq!(g.allowed(), 8);
    }

    #[test]
    fn slow_tasks_close_the_gate_to_the_minimum_once_per_target() {
        let mut g = BulkGate::new(48);
        let t0 = Instant::now();
        // a burst of late completions at one moment cuts once
        for _ in 0..20 {
            g.completed(SLOW, 8, t0);
        }
        assert_eq!(g.allowed(), 6);
        let mut t = t0;
        for _ in 0..20 {
            t += TARGET;
            g.completed(SLOW, g.allowed(), t);
        }
        assert_eq!(g.allowed(), MIN_ALLOWED);
        // and a recovered disk opens it again
        for _ in 0..200 {
            let full = g.allowed();
            g.completed(FAST, full, t);
        }
        assert!(g.allowed() > 10, "{}", g.allowed());
    }

    #[test]
    fn small_pools_keep_their_threads() {
        assert_eq!(BulkGate::new(1).allowed(), 1);
        assert_eq!(BulkGate::new(3).allowed(), 3);
        let mut g = BulkGate::new(1);
        g.completed(SLOW, 1, Instant::now());
        assert_eq!(g.allowed(), 1);
    }
}
