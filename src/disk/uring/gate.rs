//! The bulk gate of a worker's ring (`aio on`): the same rule as a pool's
//! bulk lane ([`crate::disk::bulk_gate`]), for the ring's reads of cold
//! ranges. The kernel reads ring requests on ext4 without any thread, so
//! neither io-wq's bound nor `max_in_flight` limits what waits in the
//! disk's queue; a read of a cold range first takes a permit here, and
//! the number of permits follows how fast such reads complete. Reads of a
//! small hole in a hot file take none: they go straight to the ring.

use std::cell::{Cell, RefCell};
use std::time::Instant;

use tokio::sync::Notify;

use crate::disk::bulk_gate::BulkGate;

/// Cold reads of one ring.
pub(super) struct RingGate {
    gate: RefCell<BulkGate>,
    running: Cell<usize>,
    freed: Notify,
}

/// A cold read's place in the gate, returned when dropped (the read done,
/// or the request gone).
pub(in crate::disk) struct Permit<'a> {
    of: &'a RingGate,
    since: Instant,
}

impl RingGate {
    /// A gate opening to at most `max` cold reads at once.
    pub(super) fn new(max: usize) -> RingGate {
        RingGate {
            gate: RefCell::new(BulkGate::new(max)),
            running: Cell::new(0),
            freed: Notify::new(),
        }
    }

    /// Waits for a place (first come, first served: `Notify` wakes its
    /// waiters in order).
    pub(super) async fn enter(&self) -> Permit<'_> {
        loop {
            // Registered before the check, so a place freed in between
            // is not missed.
            let freed = self.freed.notified();
            if self.running.get() < self.gate.borrow().allowed() {
                self.running.set(self.running.get() + 1);
                return Permit {
                    of: self,
                    since: Instant::now(),
                };
            }
            freed.await;
        }
    }

    /// Cold reads running now.
    #[cfg(test)]
    fn running(&self) -> usize {
        self.running.get()
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let g = self.of;
        let now = Instant::now();
        g.gate
            .borrow_mut()
            .completed(now - self.since, g.running.get(), now);
        g.running.set(g.running.get() - 1);
        g.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn reads_beyond_the_gate_wait_for_a_place_in_order() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let g = RingGate::new(2);
            let a = g.enter().await;
            let b = g.enter().await;
            assert_eq!(g.running(), 2);
            let third = tokio::time::timeout(Duration::from_millis(50), g.enter()).await;
            assert!(third.is_err(), "a third read entered a gate of two");
            drop(a);
            let c = tokio::time::timeout(Duration::from_millis(50), g.enter())
                .await
                .expect("a freed place is taken");
            assert_eq!(g.running(), 2);
            drop((b, c));
            assert_eq!(g.running(), 0);
        });
    }
}
