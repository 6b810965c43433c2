//! `limit_rate` / `limit_rate_after`: the pace of one response, as NGINX's
//! write filter keeps it. By the time `t` whole seconds have passed since
//! the response started, at most `rate × (t + 1) + after` bytes may have
//! gone out (head included); a write that finds no room waits on a timer
//! on the loop (`-limit × 1000 / rate + 1` ms, NGINX's delay) — no thread,
//! no busy loop. So the first second carries `rate` bytes beyond
//! `limit_rate_after`, and each later second `rate` more.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// The pace of one response.
#[derive(Debug)]
pub struct Pacer {
    rate: u64,
    after: u64,
    start: Instant,
    sent: Cell<u64>,
}

impl Pacer {
    /// A pacer for `rate` bytes a second after the first `after` bytes;
    /// `None` when `rate` is 0 (no limit).
    pub fn new(rate: u64, after: u64) -> Option<Pacer> {
        (rate > 0).then(|| Pacer {
            rate,
            after,
            start: Instant::now(),
            sent: Cell::new(0),
        })
    }

    /// How many bytes may go now at `elapsed` (negative: how far over).
    fn room(&self, elapsed: Duration) -> i128 {
        let secs = i128::from(elapsed.as_secs() as u32);
        i128::from(self.rate) * (secs + 1) + i128::from(self.after) - i128::from(self.sent.get())
    }

    /// Up to `want` bytes that may be sent now (at least 1), after
    /// waiting on a timer while there is no room.
    pub async fn take(&self, want: usize) -> usize {
        loop {
            let room = self.room(self.start.elapsed());
            if room > 0 {
                return want.min(room.min(usize::MAX as i128) as usize).max(1);
            }
            let ms = (-room) * 1000 / i128::from(self.rate) + 1;
            tokio::time::sleep(Duration::from_millis(ms.min(60_000) as u64)).await;
        }
    }

    /// Counts `n` bytes sent.
    pub fn sent(&self, n: u64) {
        self.sent.set(self.sent.get() + n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_second_carries_rate_after_the_free_bytes() {
        let p = Pacer::new(1000, 500).unwrap();
        assert_eq!(p.room(Duration::ZERO), 1500);
        p.sent(1500);
        assert_eq!(p.room(Duration::from_millis(999)), 0);
        assert_eq!(p.room(Duration::from_millis(1000)), 1000);
        assert!(Pacer::new(0, 10).is_none());
    }
}
