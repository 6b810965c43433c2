//! Reusable connections, as NGINX's `ngx_reusable_connection` and
//! `ngx_drain_connections`: a connection that holds nothing of value — idle
//! between keep-alive requests, or accepted and not yet sent a byte — is
//! listed here while it waits. When `worker_connections` is reached, the
//! worker reclaims the oldest listed ones instead of refusing the new
//! connection, so a flood of silent connections cannot keep a client with a
//! request out. A worker is one thread, so the list is thread-local.
//!
//! As NGINX, the worker drains *before* it is full — from the moment no
//! more than a sixteenth of its connections are free — and a batch at a
//! time ([`drain`]): a persistent attacker that reopens every connection
//! the server closes (and stays silent for a while on each) is then kept
//! churning among the reusable connections, leaving free slots for other
//! clients, where reclaiming one connection per admitted one let the
//! reopened connections live long enough to start their heads and fill
//! the worker again (issue 12, `docs/reliability.md`).
//!
//! A new connection stays listed until it has been *read*, even when its
//! first bytes are already in the socket, and a listed connection asked to
//! close closes even if it has bytes to read — as NGINX, whose new
//! connection is read in a later loop iteration than its accept and whose
//! `ngx_http_wait_request_handler` checks `c->close` before its `recv`.
//! Near the limit ([`scarce`]) a new connection therefore waits for the
//! accept loop's next turn ([`accept_turn`]) before its first read: a
//! flood whose heads arrive with the connect is drained at the next accept
//! as a silent one is, where reading at once made every such connection
//! unreclaimable and filled the worker until `client_header_timeout`
//! fired. (An explicit turn, not a yield: the runtime wakes yielded tasks
//! last-in first-out, so a yield cannot order the two.)
//!
//! The list costs an idle wait no wakeup machinery of its own: each entry
//! holds the waiting task's waker, and asking a connection to close takes
//! its entry off the list (or, at a graceful shutdown, marks every idle
//! entry: [`close_idle`], NGINX's `ngx_close_idle_connections`) and wakes
//! it. A keep-alive connection enters and leaves the list once per
//! request, so this replaced a `Notify` per wait and the per-connection
//! graceful-shutdown `watch` wait, which took a lock at every poll of a
//! busy connection (bench/RESULTS.md, 1 KB over TLS). The list is a
//! queue in the order of entry (a new entry always has the highest
//! number), searched by halving, with the entries that left marked until
//! they reach an end: entering and leaving cost no allocation and a few
//! comparisons (issue 31: about 790 instructions a keep-alive request at
//! 50 connections, against 980 for the `BTreeMap` it replaced).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::poll_fn;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use tokio::sync::Notify;

/// A waiting connection's entry: the waker of its last poll, and whether
/// it is idle between keep-alive requests (a graceful shutdown closes it)
/// rather than new and not yet read.
struct Entry {
    waker: Option<Waker>,
    idle: bool,
}

/// The waiting connections by the order they started waiting (oldest
/// first): `(seq, entry)` in increasing `seq`, `None` for one that left
/// and is not yet at an end of the queue.
struct Waiting {
    slots: VecDeque<(u64, Option<Entry>)>,
    /// The entries that are `Some`.
    live: usize,
}

impl Waiting {
    const fn new() -> Waiting {
        Waiting {
            slots: VecDeque::new(),
            live: 0,
        }
    }

    /// Lists `seq`, higher than every number listed before.
    fn insert(&mut self, seq: u64, e: Entry) {
        self.slots.push_back((seq, Some(e)));
        self.live += 1;
    }

    fn get_mut(&mut self, seq: u64) -> Option<&mut Entry> {
        let i = self.slots.binary_search_by_key(&seq, |s| s.0).ok()?;
        self.slots[i].1.as_mut()
    }

    fn remove(&mut self, seq: u64) -> Option<Entry> {
        let i = self.slots.binary_search_by_key(&seq, |s| s.0).ok()?;
        let e = self.slots[i].1.take()?;
        self.live -= 1;
        self.tidy();
        Some(e)
    }

    fn pop_first(&mut self) -> Option<(u64, Entry)> {
        self.tidy();
        let (seq, e) = self.slots.pop_front()?;
        self.live -= 1;
        self.tidy();
        e.map(|e| (seq, e))
    }

    /// Drops the marks at both ends; and all of them when they outnumber
    /// the waiting (a long wait at the front keeps those behind it).
    fn tidy(&mut self) {
        while matches!(self.slots.front(), Some((_, None))) {
            self.slots.pop_front();
        }
        while matches!(self.slots.back(), Some((_, None))) {
            self.slots.pop_back();
        }
        if self.slots.len() > 2 * self.live + 64 {
            self.slots.retain(|s| s.1.is_some());
        }
    }

    fn len(&self) -> usize {
        self.live
    }

    fn values_mut(&mut self) -> impl Iterator<Item = &mut Entry> {
        self.slots.iter_mut().filter_map(|s| s.1.as_mut())
    }
}

thread_local! {
    /// Waiting connections by the order they started waiting (oldest first).
    static LIST: RefCell<Waiting> = const { RefCell::new(Waiting::new()) };
    static NEXT: Cell<u64> = const { Cell::new(0) };
    /// Reclaimed connections that have not yet left their wait (they
    /// close on their next turn): their slots count as free.
    static CLOSING: Cell<usize> = const { Cell::new(0) };
    /// Whether no more than a sixteenth of the worker's connections were
    /// free at its last accept (set by the accept loop).
    static SCARCE: Cell<bool> = const { Cell::new(false) };
    /// Told when an accept loop has taken a turn.
    static TURN: Rc<Notify> = Rc::new(Notify::new());
    /// A graceful shutdown began: idle connections close.
    static IDLE_CLOSED: Cell<bool> = const { Cell::new(false) };
}

/// A connection's place on the list while it waits; it leaves the list
/// when dropped.
pub struct Reusable {
    seq: u64,
}

impl Reusable {
    /// Lists the calling connection as reusable: new, before its first
    /// read.
    pub fn enter() -> Reusable {
        Reusable::list(false)
    }

    /// Lists the calling connection as reusable: idle between keep-alive
    /// requests (a graceful shutdown also closes it).
    pub fn enter_idle() -> Reusable {
        Reusable::list(true)
    }

    fn list(idle: bool) -> Reusable {
        let seq = NEXT.with(|n| {
            let s = n.get();
            n.set(s + 1);
            s
        });
        let entry = Entry { waker: None, idle };
        LIST.with(|l| l.borrow_mut().insert(seq, entry));
        Reusable { seq }
    }

    /// Near the limit ([`scarce`]), waits for the accept loop's next turn
    /// before a new connection's first read, so that turn's drain sees the
    /// connection still listed (see the module header); at once otherwise.
    pub async fn first_read_turn(&self) {
        if scarce() {
            TURN.with(Rc::clone).notified().await
        }
    }

    /// Resolves when the worker reclaims this connection, or when it is
    /// idle and a graceful shutdown began (it then closes).
    pub async fn reclaimed(&self) {
        poll_fn(|cx| self.poll_reclaimed(cx)).await
    }

    /// Ready once the connection is to close ([`Reusable::reclaimed`]);
    /// otherwise keeps `cx`'s waker to be woken then.
    pub fn poll_reclaimed(&self, cx: &mut Context<'_>) -> Poll<()> {
        LIST.with(|l| {
            let mut l = l.borrow_mut();
            let Some(e) = l.get_mut(self.seq) else {
                // Taken off the list: reclaimed.
                return Poll::Ready(());
            };
            if e.idle && IDLE_CLOSED.with(Cell::get) {
                return Poll::Ready(());
            }
            match &mut e.waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                w => *w = Some(cx.waker().clone()),
            }
            Poll::Pending
        })
    }
}

impl Drop for Reusable {
    fn drop(&mut self) {
        // Off the list already: it was reclaimed and is closing now.
        if LIST.with(|l| l.borrow_mut().remove(self.seq)).is_none() {
            CLOSING.with(|c| c.set(c.get().saturating_sub(1)));
        }
    }
}

/// A graceful shutdown began: every connection idle between keep-alive
/// requests closes now, and one that goes idle later closes at once (new
/// connections still get to send their first request, as NGINX).
pub fn close_idle() {
    IDLE_CLOSED.with(|c| c.set(true));
    let wakers: Vec<Waker> = LIST.with(|l| {
        l.borrow_mut()
            .values_mut()
            .filter(|e| e.idle)
            .filter_map(|e| e.waker.take())
            .collect()
    });
    // Woken outside the borrow: a waker may run code that lists again.
    wakers.into_iter().for_each(Waker::wake);
}

/// Asks the oldest waiting connection to close; false when none waits.
/// The connection closes on its next turn, so the caller may admit a new
/// one in its place at once.
pub fn reclaim_oldest() -> bool {
    let oldest = LIST.with(|l| l.borrow_mut().pop_first());
    match oldest {
        Some((_, e)) => {
            CLOSING.with(|c| c.set(c.get() + 1));
            // Off the list: the connection sees it at its next poll, even
            // if it is not polling its wait at this moment.
            if let Some(w) = e.waker {
                w.wake();
            }
            true
        }
        None => false,
    }
}

/// NGINX's `ngx_drain_connections`: asks the oldest waiting connections
/// to close, an eighth of those waiting but at least one and at most 32;
/// returns how many were asked.
pub fn drain() -> usize {
    let waiting = LIST.with(|l| l.borrow().len());
    let n = (waiting / 8).clamp(1, 32);
    (0..n).take_while(|_| reclaim_oldest()).count()
}

/// Records whether the worker drains at its next accept (no more than a
/// sixteenth of its connections free); the accept loop sets it.
pub fn set_scarce(scarce: bool) {
    SCARCE.with(|s| s.set(scarce));
}

/// Whether the worker drains at its next accept: a new connection then
/// waits for that accept before its first read (see the module header).
pub fn scarce() -> bool {
    SCARCE.with(|s| s.get())
}

/// An accept loop took its turn: it accepted a connection (and drained
/// for it) or refused one, or found none waiting. New connections waiting
/// for their first read may read now.
pub fn accept_turn() {
    TURN.with(|t| t.notify_waiters())
}

/// Connections asked to close that have not closed yet.
pub fn closing() -> usize {
    CLOSING.with(|c| c.get())
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

    #[test]
    fn a_graceful_shutdown_closes_idle_connections_not_new_ones() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let idle = Reusable::enter_idle();
        let fresh = Reusable::enter();
        rt.block_on(async {
            let short = std::time::Duration::from_millis(50);
            // Waiting (its waker kept) when the shutdown begins.
            let waiting = tokio::time::timeout(short, idle.reclaimed());
            assert!(waiting.await.is_err());
            close_idle();
            tokio::time::timeout(short, idle.reclaimed()).await.unwrap();
            assert!(tokio::time::timeout(short, fresh.reclaimed())
                .await
                .is_err());
            // Idle from now on: closes at once.
            let later = Reusable::enter_idle();
            tokio::time::timeout(short, later.reclaimed())
                .await
                .unwrap();
        });
    }

    #[test]
    fn drain_takes_an_eighth_of_the_waiting_between_1_and_32() {
        let before = closing();
        let mut v: Vec<Reusable> = (0..100).map(|_| Reusable::enter()).collect();
        assert_eq!(drain(), 12);
        assert_eq!(closing(), before + 12);
        v.extend((0..300).map(|_| Reusable::enter()));
        assert_eq!(drain(), 32);
        // The reclaimed ones leave their wait: no longer closing.
        drop(v);
        assert_eq!(closing(), before);
        let one = Reusable::enter();
        assert_eq!(drain(), 1);
        assert_eq!(drain(), 0);
        drop(one);
    }

    #[test]
    fn entries_that_left_out_of_order_are_not_kept() {
        // One long wait at the front and many short ones behind it: the
        // queue keeps the waiting and a bounded number of marks.
        let front = Reusable::enter();
        for _ in 0..1000 {
            let a = Reusable::enter_idle();
            let b = Reusable::enter_idle();
            drop(a);
            drop(b);
        }
        let (slots, live) = LIST.with(|l| {
            let l = l.borrow();
            (l.slots.len(), l.live)
        });
        assert!(slots <= 2 * live + 64, "{slots} slots for {live} waiting");
        let last = Reusable::enter();
        drop(front);
        // The oldest still waiting is reclaimed, not one that left.
        assert!(reclaim_oldest());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let short = std::time::Duration::from_millis(50);
            tokio::time::timeout(short, last.reclaimed()).await.unwrap();
        });
    }
}
