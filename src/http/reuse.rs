//! Reusable connections, as NGINX's `ngx_reusable_connection` and
//! `ngx_drain_connections`: a connection that holds nothing of value — idle
//! between keep-alive requests, or accepted and not yet sent a byte — is
//! listed here while it waits. When `worker_connections` is reached, the
//! worker reclaims the oldest listed ones instead of refusing the new
//! connection, so a flood of silent connections cannot keep a client with a
//! request out. A worker is one thread, so the list is thread-local.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use tokio::sync::Notify;

thread_local! {
    /// Waiting connections by the order they started waiting (oldest first).
    static LIST: RefCell<BTreeMap<u64, Rc<Notify>>> = const { RefCell::new(BTreeMap::new()) };
    static NEXT: Cell<u64> = const { Cell::new(0) };
}

/// A connection's place on the list while it waits; it leaves the list
/// when dropped.
pub struct Reusable {
    seq: u64,
    reclaim: Rc<Notify>,
}

impl Reusable {
    /// Lists the calling connection as reusable.
    pub fn enter() -> Reusable {
        let seq = NEXT.with(|n| {
            let s = n.get();
            n.set(s + 1);
            s
        });
        let reclaim = Rc::new(Notify::new());
        LIST.with(|l| l.borrow_mut().insert(seq, Rc::clone(&reclaim)));
        Reusable { seq, reclaim }
    }

    /// Resolves when the worker reclaims this connection (it then closes).
    pub async fn reclaimed(&self) {
        self.reclaim.notified().await
    }
}

impl Drop for Reusable {
    fn drop(&mut self) {
        LIST.with(|l| l.borrow_mut().remove(&self.seq));
    }
}

/// Asks the oldest waiting connection to close; false when none waits.
/// The connection closes on its next turn, so the caller may admit a new
/// one in its place at once.
pub fn reclaim_oldest() -> bool {
    let oldest = LIST.with(|l| l.borrow_mut().pop_first());
    match oldest {
        Some((_, n)) => {
            // A stored permit: the connection sees it even if it is not
            // polling its wait at this moment.
            n.notify_one();
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oldest_waiting_connection_is_reclaimed_first_and_once() {
        let a = Reusable::enter();
        let b = Reusable::enter();
        drop(Reusable::enter());
        assert!(reclaim_oldest());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            // `a` was told; `b` was not.
            tokio::time::timeout(std::time::Duration::from_secs(1), a.reclaimed())
                .await
                .unwrap();
            assert!(
                tokio::time::timeout(std::time::Duration::from_millis(50), b.reclaimed())
                    .await
                    .is_err()
            );
        });
        assert!(reclaim_oldest());
        assert!(!reclaim_oldest());
    }
}
