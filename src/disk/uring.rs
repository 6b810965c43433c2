//! `aio on`: one io_uring per worker, driven by that worker's event loop.
//!
//! The ring's completions signal an eventfd registered with it; the
//! eventfd sits under tokio's `AsyncFd`, and a small local task (the
//! driver) reaps the completion queue whenever the eventfd is readable —
//! nothing polls. Each operation is a future ([`Op`]) that owns a slot of
//! the ring's slot table: `user_data` is the slot's index, and the slot
//! owns everything the kernel reads or writes for the operation (the
//! buffer, the path, the `open_how`, the `statx` result) until its
//! completion arrives. A future dropped early leaves its slot to the
//! driver, which frees the buffer (and closes a descriptor an `openat2`
//! returned) when the completion comes. So the kernel never writes into
//! freed memory.
//!
//! Bounds: at most `max_in_flight` operations per ring; more wait in a
//! FIFO in user space (no barging: a new operation queues behind waiting
//! ones). The kernel's io-wq threads — used for what cannot complete at
//! submission (a read on a file system without async buffered reads, a
//! path walk that misses the dentry cache, every `statx`) — are bounded to
//! `workers` per worker (`IORING_REGISTER_IOWQ_MAX_WORKERS`).
//!
//! [`probe`] runs once at start (master thread); when io_uring is missing
//! or refused, `aio on` falls back to `aio threads` (the `default` pool).
//! The operations themselves live in `uring/ops.rs`, the send of a file
//! range (no plain `sendfile` under `aio on`) in `uring/send.rs`.

mod gate;
mod ops;
mod send;

pub use self::send::Unsent;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::ffi::CString;
use std::fs::File;
use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use io_uring::{opcode, squeue, types, IoUring};
use tokio::io::unix::AsyncFd;

/// The rings' bounds, from the configuration (`aio_uring`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UringSpec {
    /// io-wq bounded workers per worker (`workers=N`): how many blocking
    /// disk calls one worker's ring may have running at once.
    pub workers: u32,
    /// Operations in flight per worker (`max_in_flight=N`); more wait in
    /// a FIFO.
    pub max_in_flight: u32,
}

impl Default for UringSpec {
    fn default() -> UringSpec {
        UringSpec {
            workers: 16,
            max_in_flight: 256,
        }
    }
}

/// `user_data` of operations that have no slot (the cancel at drop).
const NO_SLOT: u64 = u64::MAX;
/// Largest buffer kept for reuse, and how many are kept per ring.
const KEEP_BUF_MAX: usize = 1 << 20;
const KEEP_BUFS: usize = 32;
/// How long a ring being dropped waits for its operations to finish before
/// it leaks their buffers instead of freeing memory the kernel may write.
const DROP_WAIT: Duration = Duration::from_secs(1);
/// When to submit again what a busy kernel left queued.
const RETRY_SUBMIT: Duration = Duration::from_millis(1);

static PROBED: OnceLock<Result<(), String>> = OnceLock::new();

/// Tries once to create a ring with everything `aio on` needs (the read,
/// `openat2` and `statx` operations, the io-wq bound). `Err` holds the
/// reason, NGINX style (`io_uring_setup() failed (1: Operation not
/// permitted)`). Later calls return the first answer.
pub fn probe() -> Result<(), String> {
    PROBED.get_or_init(try_ring).clone()
}

/// The `notice` line for a configuration with `aio on` at `at`
/// (`file:line`) when the kernel gives no io_uring ([`probe`]); `None` when
/// it does.
pub fn fallback_notice(at: &str) -> Option<String> {
    let why = probe().err()?;
    Some(format!(
        "\"aio on\" in {at} falls back to \"aio threads\": {why}"
    ))
}

/// What [`probe`] found; `false` before it ran.
pub fn available() -> bool {
    matches!(PROBED.get(), Some(Ok(())))
}

fn try_ring() -> Result<(), String> {
    let ring = IoUring::new(2)
        .map_err(|e| format!("io_uring_setup() failed {}", crate::util::errno_text(&e)))?;
    let mut probe = io_uring::Probe::new();
    ring.submitter()
        .register_probe(&mut probe)
        .map_err(|e| format!("io_uring probe failed {}", crate::util::errno_text(&e)))?;
    for (code, name) in [
        (opcode::Read::CODE, "read"),
        (opcode::OpenAt2::CODE, "openat2"),
        (opcode::Statx::CODE, "statx"),
    ] {
        if !probe.is_supported(code) {
            return Err(format!("io_uring has no {name} operation"));
        }
    }
    let mut max = [0u32; 2];
    ring.submitter()
        .register_iowq_max_workers(&mut max)
        .map_err(|e| {
            format!(
                "IORING_REGISTER_IOWQ_MAX_WORKERS failed {}",
                crate::util::errno_text(&e)
            )
        })?;
    Ok(())
}

/// Ring figures since start, all workers together (for metrics).
#[derive(Debug, Default)]
pub struct Stats {
    /// Operations submitted to a ring.
    pub submitted: AtomicU64,
    /// Completions reaped.
    pub completed: AtomicU64,
    /// Completions that were not there when their submission returned:
    /// the operation went to an io-wq thread or waited for a page (the
    /// kernel's completion does not say which).
    pub not_inline: AtomicU64,
    /// Operations that waited for a free slot (`max_in_flight` reached).
    pub queued: AtomicU64,
}

static STATS: Stats = Stats {
    submitted: AtomicU64::new(0),
    completed: AtomicU64::new(0),
    not_inline: AtomicU64::new(0),
    queued: AtomicU64::new(0),
};

/// The rings' figures.
pub fn stats() -> &'static Stats {
    &STATS
}

/// What a slot keeps alive for the kernel until the completion arrives
/// (fields the kernel reads through raw pointers, never Rust code).
#[derive(Debug)]
#[allow(dead_code)]
pub(super) enum Keep {
    /// A read: the buffer the kernel fills, the file it reads.
    Read { buf: Vec<u8>, file: Arc<File> },
    /// `openat2`: the path, the `open_how`, the directory it is relative
    /// to. A successful result is a descriptor to close if nobody waits.
    Open {
        path: CString,
        how: Box<types::OpenHow>,
        dir: Option<OwnedFd>,
    },
    /// `statx`: the path, where the answer goes, the directory.
    Statx {
        path: CString,
        out: Box<libc::statx>,
        dir: Option<Arc<File>>,
    },
}

#[derive(Debug)]
enum Slot {
    Free,
    /// Submitted; `orphan` once its future is gone.
    Busy {
        waker: Option<Waker>,
        keep: Keep,
        orphan: bool,
    },
    /// The completion arrived and its future has not taken it yet.
    Done {
        res: i32,
        keep: Keep,
    },
}

struct State {
    uring: IoUring,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Operations waiting for a slot, in arrival order.
    waiters: VecDeque<(u64, Option<Waker>)>,
    next_ticket: u64,
    bufs: Vec<Vec<u8>>,
}

/// One worker's ring. Not `Send`: it belongs to the worker's thread and
/// is reached through the `Rc` its routes carry.
pub struct Ring {
    state: RefCell<State>,
    /// Cold reads admitted at once (see `gate.rs`).
    cold: gate::RingGate,
    driver: tokio::task::AbortHandle,
    me: Weak<Ring>,
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.state.borrow();
        f.debug_struct("Ring")
            .field("slots", &s.slots.len())
            .field("free", &s.free.len())
            .field("waiting", &s.waiters.len())
            .finish()
    }
}

impl Ring {
    /// Creates this worker's ring and its driver task. Must run inside the
    /// worker's `LocalSet` (the driver is a local task).
    pub fn new(spec: UringSpec) -> io::Result<Rc<Ring>> {
        let entries = spec.max_in_flight.clamp(1, 4096);
        let uring = IoUring::builder()
            .setup_clamp()
            .build(entries.next_power_of_two())?;
        let mut max = [spec.workers.max(1), 0];
        uring.submitter().register_iowq_max_workers(&mut max)?;
        super::priority::watch_io_workers();
        // SAFETY: eventfd returns a new descriptor or -1.
        let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor we just created and nobody else owns.
        let efd = unsafe { OwnedFd::from_raw_fd(efd) };
        uring.submitter().register_eventfd(efd.as_raw_fd())?;
        // SAFETY: an OwnedFd keeps one open descriptor until it drops.
        let efd = unsafe { AsyncFd::register_with_interest(efd, tokio::io::Interest::READABLE) }?;
        let n = entries as usize;
        Ok(Rc::new_cyclic(|weak: &Weak<Ring>| {
            let driver = crate::metrics::timed::spawn(drive(efd, weak.clone())).abort_handle();
            Ring {
                state: RefCell::new(State {
                    uring,
                    slots: (0..n).map(|_| Slot::Free).collect(),
                    free: (0..n as u32).rev().collect(),
                    waiters: VecDeque::new(),
                    next_ticket: 0,
                    bufs: Vec::new(),
                }),
                driver,
                cold: gate::RingGate::new(n),
                me: weak.clone(),
            }
        }))
    }

    /// A place for a read of a cold range (see `gate.rs`); a read of a
    /// small hole needs none.
    pub(in crate::disk) async fn cold_permit(&self) -> gate::Permit<'_> {
        self.cold.enter().await
    }

    /// A buffer of at least `len` bytes (initialised: its length is its
    /// size), reused when one is free.
    pub(super) fn buffer(&self, len: usize) -> Vec<u8> {
        let mut s = self.state.borrow_mut();
        match s.bufs.iter().position(|b| b.len() >= len) {
            Some(i) => s.bufs.swap_remove(i),
            None => vec![0u8; len.max(64 * 1024)],
        }
    }

    /// Gives a buffer from [`Ring::buffer`] back for reuse.
    pub(super) fn give_back(&self, buf: Vec<u8>) {
        self.state.borrow_mut().put_buf(buf);
    }

    /// The future of one operation: `entry` (without `user_data`) whose
    /// pointers point into `keep`.
    pub(super) fn op(self: &Rc<Self>, entry: squeue::Entry, keep: Keep) -> Op {
        Op {
            ring: self.clone(),
            state: OpState::New { entry, keep },
        }
    }

    /// Reaps completions and retries submissions left in the queue; wakes
    /// whoever is waiting on them.
    fn reap_and_flush(&self) {
        let (wake, submitted) = {
            let mut s = self.state.borrow_mut();
            let submitted = s.uring.submission().is_empty() || s.submit_now();
            (s.reap(None), submitted)
        };
        wake.into_iter().for_each(Waker::wake);
        if !submitted {
            self.retry_later();
        }
    }

    /// Entries the kernel did not take stay queued; with nothing else in
    /// flight no completion would wake the driver, so a timer does.
    fn retry_later(&self) {
        let ring = self.me.clone();
        crate::metrics::timed::spawn(async move {
            tokio::time::sleep(RETRY_SUBMIT).await;
            if let Some(r) = ring.upgrade() {
                r.reap_and_flush();
            }
        });
    }
}

impl State {
    fn put_buf(&mut self, buf: Vec<u8>) {
        if buf.len() <= KEEP_BUF_MAX && self.bufs.len() < KEEP_BUFS {
            self.bufs.push(buf);
        }
    }

    /// `io_uring_enter` for what is queued. A kernel short of memory or
    /// busy (`EAGAIN`, `EBUSY`) leaves entries queued: `false` then, and
    /// the caller schedules another try ([`Ring::retry_later`]).
    fn submit_now(&mut self) -> bool {
        loop {
            match self.uring.submit() {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                _ => return self.uring.submission().is_empty(),
            }
        }
    }

    /// Queues `entry` in slot `slot` and submits it; `false` when the
    /// kernel left it queued.
    fn start(&mut self, slot: u32, entry: squeue::Entry, keep: Keep) -> bool {
        let entry = entry.user_data(slot as u64);
        // SAFETY: the entry's pointers point into `keep`, which the slot
        // owns until the completion arrives.
        while unsafe { self.uring.submission().push(&entry) }.is_err() {
            // Cannot stay full: entries ≥ slots, and each submit drains.
            self.submit_now();
        }
        self.slots[slot as usize] = Slot::Busy {
            waker: None,
            keep,
            orphan: false,
        };
        STATS.submitted.fetch_add(1, Ordering::Relaxed);
        self.submit_now()
    }

    /// Moves completions into their slots; `just` is the slot submitted by
    /// the call that reaps (its completion, if here, came inline).
    fn reap(&mut self, just: Option<u32>) -> Vec<Waker> {
        let mut wake = Vec::new();
        let done: Vec<(u64, i32)> = self
            .uring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        for (ud, res) in done {
            if ud == NO_SLOT {
                continue;
            }
            STATS.completed.fetch_add(1, Ordering::Relaxed);
            if Some(ud as u32) != just {
                STATS.not_inline.fetch_add(1, Ordering::Relaxed);
            }
            let i = ud as usize;
            match std::mem::replace(&mut self.slots[i], Slot::Free) {
                Slot::Busy {
                    orphan: false,
                    waker,
                    keep,
                } => {
                    self.slots[i] = Slot::Done { res, keep };
                    wake.extend(waker);
                }
                Slot::Busy { keep, .. } => {
                    self.dispose(keep, res);
                    self.release(ud as u32, &mut wake);
                }
                other => self.slots[i] = other,
            }
        }
        wake
    }

    /// What an orphaned operation leaves: its buffer back to the pool, a
    /// descriptor it opened closed.
    fn dispose(&mut self, keep: Keep, res: i32) {
        match keep {
            Keep::Read { buf, .. } => self.put_buf(buf),
            Keep::Open { .. } if res >= 0 => {
                // SAFETY: the kernel opened this descriptor for us and
                // nobody else has seen it.
                drop(unsafe { OwnedFd::from_raw_fd(res) });
            }
            _ => {}
        }
    }

    /// Frees `slot` and wakes the first waiting operation.
    fn release(&mut self, slot: u32, wake: &mut Vec<Waker>) {
        self.slots[slot as usize] = Slot::Free;
        self.free.push(slot);
        if let Some((_, w)) = self.waiters.front_mut() {
            wake.extend(w.take());
        }
    }
}

impl Drop for Ring {
    /// Stops the driver, cancels what is in flight and waits a moment for
    /// it; buffers of operations still running after that are leaked, not
    /// freed under the kernel.
    fn drop(&mut self) {
        self.driver.abort();
        let s = self.state.get_mut();
        let busy = |s: &State| s.slots.iter().any(|x| matches!(x, Slot::Busy { .. }));
        if !busy(s) {
            return;
        }
        let cancel = opcode::AsyncCancel2::new(types::CancelBuilder::any())
            .build()
            .user_data(NO_SLOT);
        // SAFETY: the cancel entry points at nothing.
        let _ = unsafe { s.uring.submission().push(&cancel) };
        let deadline = Instant::now() + DROP_WAIT;
        while busy(s) && Instant::now() < deadline {
            let ts = types::Timespec::new().nsec(50_000_000);
            let args = types::SubmitArgs::new().timespec(&ts);
            let _ = s.uring.submitter().submit_with_args(1, &args);
            // Every operation still busy is an orphan (each future holds
            // the ring): reaping frees what it kept.
            drop(s.reap(None));
        }
        for slot in &mut s.slots {
            if let Slot::Busy { .. } = slot {
                std::mem::forget(std::mem::replace(slot, Slot::Free));
            }
        }
    }
}

/// The driver: reaps the ring each time its eventfd says a completion was
/// posted. Ends with the ring.
async fn drive(efd: AsyncFd<OwnedFd>, ring: Weak<Ring>) {
    loop {
        let Ok(mut ready) = efd.readable().await else {
            return;
        };
        let mut counter = [0u8; 8];
        // Resetting the counter first: a completion posted after it
        // signals again.
        let read = ready
            .try_io(|fd| rustix::io::read(fd.get_ref(), &mut counter).map_err(io::Error::from));
        if let Ok(Err(e)) = read {
            if e.kind() != io::ErrorKind::WouldBlock {
                return;
            }
        }
        let Some(ring) = ring.upgrade() else {
            return;
        };
        ring.reap_and_flush();
    }
}

enum OpState {
    /// Not yet submitted (or waiting for a slot as `ticket`).
    New {
        entry: squeue::Entry,
        keep: Keep,
    },
    Waiting {
        ticket: u64,
        entry: squeue::Entry,
        keep: Keep,
    },
    InFlight(u32),
    Finished,
}

/// One operation on the ring; resolves to the completion's result and
/// what the slot kept (the buffer, the `statx` answer).
pub(super) struct Op {
    ring: Rc<Ring>,
    state: OpState,
}

impl Future for Op {
    type Output = (i32, Keep);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<(i32, Keep)> {
        let this = self.get_mut();
        let ring = this.ring.clone();
        let mut s = ring.state.borrow_mut();
        loop {
            match std::mem::replace(&mut this.state, OpState::Finished) {
                OpState::New { entry, keep } => {
                    if s.waiters.is_empty() && !s.free.is_empty() {
                        this.submit(&mut s, entry, keep);
                        continue;
                    }
                    let ticket = s.next_ticket;
                    s.next_ticket += 1;
                    s.waiters.push_back((ticket, Some(cx.waker().clone())));
                    STATS.queued.fetch_add(1, Ordering::Relaxed);
                    this.state = OpState::Waiting {
                        ticket,
                        entry,
                        keep,
                    };
                    return Poll::Pending;
                }
                OpState::Waiting {
                    ticket,
                    entry,
                    keep,
                } => {
                    let first = s.waiters.front().map(|w| w.0) == Some(ticket);
                    if first && !s.free.is_empty() {
                        s.waiters.pop_front();
                        this.submit(&mut s, entry, keep);
                        // More slots free: the next in line may go too.
                        if !s.free.is_empty() {
                            if let Some(w) = s.waiters.front_mut().and_then(|w| w.1.take()) {
                                w.wake();
                            }
                        }
                        continue;
                    }
                    if let Some(w) = s.waiters.iter_mut().find(|w| w.0 == ticket) {
                        w.1 = Some(cx.waker().clone());
                    }
                    this.state = OpState::Waiting {
                        ticket,
                        entry,
                        keep,
                    };
                    return Poll::Pending;
                }
                OpState::InFlight(slot) => return this.poll_slot(&mut s, slot, cx),
                OpState::Finished => panic!("ring operation polled after completion"),
            }
        }
    }
}

impl Op {
    /// Takes a free slot, submits, and reaps what came inline.
    fn submit(&mut self, s: &mut State, entry: squeue::Entry, keep: Keep) {
        let slot = s.free.pop().expect("a free slot");
        if !s.start(slot, entry, keep) {
            self.ring.retry_later();
        }
        let wake = s.reap(Some(slot));
        self.state = OpState::InFlight(slot);
        // Others' completions reaped here: their tasks run later.
        wake.into_iter().for_each(Waker::wake);
    }

    fn poll_slot(&mut self, s: &mut State, slot: u32, cx: &mut Context<'_>) -> Poll<(i32, Keep)> {
        let i = slot as usize;
        match std::mem::replace(&mut s.slots[i], Slot::Free) {
            Slot::Done { res, keep } => {
                let mut wake = Vec::new();
                s.release(slot, &mut wake);
                wake.into_iter().for_each(Waker::wake);
                Poll::Ready((res, keep))
            }
            Slot::Busy { keep, orphan, .. } => {
                s.slots[i] = Slot::Busy {
                    waker: Some(cx.waker().clone()),
                    keep,
                    orphan,
                };
                self.state = OpState::InFlight(slot);
                Poll::Pending
            }
            Slot::Free => unreachable!("a slot in flight was freed"),
        }
    }
}

impl Drop for Op {
    /// A waiting operation leaves the line; one in flight leaves its slot
    /// (and what the kernel may still write into) to the driver.
    fn drop(&mut self) {
        let mut s = self.ring.state.borrow_mut();
        let mut wake = Vec::new();
        match std::mem::replace(&mut self.state, OpState::Finished) {
            OpState::Waiting { ticket, .. } => {
                s.waiters.retain(|w| w.0 != ticket);
                if !s.free.is_empty() {
                    if let Some(w) = s.waiters.front_mut().and_then(|w| w.1.take()) {
                        wake.push(w);
                    }
                }
            }
            OpState::InFlight(slot) => {
                let i = slot as usize;
                match std::mem::replace(&mut s.slots[i], Slot::Free) {
                    Slot::Busy { keep, .. } => {
                        s.slots[i] = Slot::Busy {
                            waker: None,
                            keep,
                            orphan: true,
                        }
                    }
                    Slot::Done { res, keep } => {
                        s.dispose(keep, res);
                        s.release(slot, &mut wake);
                    }
                    Slot::Free => {}
                }
            }
            OpState::New { .. } | OpState::Finished => {}
        }
        drop(s);
        wake.into_iter().for_each(Waker::wake);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::open::PathRules;
    use crate::disk::{Disk, FileKind, FileMeta};
    use std::io::{Read, Write};
    use std::path::PathBuf;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("porter-uring-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Runs `f` on a current-thread runtime inside a `LocalSet`, as a
    /// worker does; `None` (the test is skipped) without io_uring.
    fn on_worker<F: Future>(f: impl FnOnce() -> F) -> Option<F::Output> {
        if let Err(why) = probe() {
            eprintln!("skipping: {why}");
            return None;
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        Some(tokio::task::LocalSet::new().block_on(&rt, f()))
    }

    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 % 251) as u8).collect()
    }

    fn spec(max_in_flight: u32) -> UringSpec {
        UringSpec {
            workers: 2,
            max_in_flight,
        }
    }

    fn idle(ring: &Ring) -> bool {
        let s = ring.state.borrow();
        s.free.len() == s.slots.len() && s.waiters.is_empty()
    }

    #[test]
    fn reads_a_range_into_a_ring_buffer() {
        let p = dir("read").join("f");
        let data = pattern(300_000);
        std::fs::write(&p, &data).unwrap();
        on_worker(|| async {
            let ring = Ring::new(spec(8)).unwrap();
            let f = Arc::new(File::open(&p).unwrap());
            let (buf, n) = ring.read_full(&f, 200_000, 50_000, false).await.unwrap();
            assert_eq!(n, 200_000);
            assert_eq!(&buf[..n], &data[50_000..250_000]);
            ring.give_back(buf);
            // At the end of the file: fewer bytes, then none.
            let (buf, n) = ring.read_full(&f, 10_000, 295_000, true).await.unwrap();
            assert_eq!(&buf[..n], &data[295_000..]);
            let (_, n) = ring.read_full(&f, 10, 300_000, false).await.unwrap();
            assert_eq!(n, 0);
            assert!(idle(&ring));
        });
    }

    #[test]
    fn opens_and_stats_through_the_ring() {
        let d = dir("open");
        let p = d.join("f");
        std::fs::write(&p, b"hello").unwrap();
        let _ = std::fs::remove_file(d.join("link"));
        std::os::unix::fs::symlink(&p, d.join("link")).unwrap();
        on_worker(|| async {
            let ring = Ring::new(spec(8)).unwrap();
            let any = PathRules::default();
            let (f, meta) = ring.open_and_stat(&p, &any).await.unwrap();
            assert_eq!((meta.size, meta.kind), (5, FileKind::Regular));
            let st = rustix::fs::fstat(&f).unwrap();
            assert_eq!(meta, FileMeta::from_stat(&st), "statx and fstat agree");
            assert_eq!(ring.stat_path(&p, &any).await.unwrap(), meta);
            let dmeta = ring.stat_path(&d, &any).await.unwrap();
            assert_eq!(dmeta.kind, FileKind::Directory);
            let e = ring.open_and_stat(&d.join("nope"), &any).await.unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
            let beneath = PathRules {
                no_symlinks: true,
                root: Some(d.to_str().unwrap().to_string()),
                ..Default::default()
            };
            assert!(ring.open_and_stat(&p, &beneath).await.is_ok());
            let e = ring
                .open_and_stat(&d.join("link"), &beneath)
                .await
                .unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
            let e = ring.stat_path(&d.join("link"), &beneath).await.unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
            assert!(idle(&ring));
        });
    }

    #[test]
    fn operations_beyond_the_bound_wait_their_turn() {
        let p = dir("many").join("f");
        let data = pattern(64 * 1024);
        std::fs::write(&p, &data).unwrap();
        on_worker(|| async {
            let ring = Ring::new(spec(4)).unwrap();
            let f = Arc::new(File::open(&p).unwrap());
            let queued = STATS.queued.load(Ordering::Relaxed);
            // Eight reads of empty pipes: four take the slots, four wait.
            let mut writers = Vec::new();
            let mut pipes = Vec::new();
            for _ in 0..8 {
                let (rx, tx) = std::io::pipe().unwrap();
                let rx = Arc::new(File::from(OwnedFd::from(rx)));
                let ring = ring.clone();
                pipes.push(crate::metrics::timed::spawn(async move {
                    let (r, buf) = ring.read(&rx, ring.buffer(4), 0..4, 0, false).await;
                    buf[..r.unwrap()].to_vec()
                }));
                writers.push(tx);
            }
            // Sixty-four file reads behind them.
            let reads: Vec<_> = (0..64u64)
                .map(|i| {
                    let (ring, f) = (ring.clone(), f.clone());
                    crate::metrics::timed::spawn(async move {
                        let at = i * 1000;
                        let (buf, n) = ring.read_full(&f, 1000, at, false).await.unwrap();
                        (at as usize, buf[..n].to_vec())
                    })
                })
                .collect();
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert!(STATS.queued.load(Ordering::Relaxed) >= queued + 60);
            assert!(
                reads.iter().all(|r| !r.is_finished()),
                "a read jumped the line"
            );
            for (i, w) in writers.iter_mut().enumerate() {
                w.write_all(&[i as u8; 4]).unwrap();
            }
            for (i, p) in pipes.into_iter().enumerate() {
                assert_eq!(p.await.unwrap(), [i as u8; 4]);
            }
            for r in reads {
                let (at, got) = r.await.unwrap();
                assert_eq!(got, &data[at..at + 1000]);
            }
            assert!(idle(&ring));
        });
    }

    /// A read the kernel has not finished when its future is dropped keeps
    /// its buffer in the slot until the completion comes; the slot is then
    /// freed for the operation waiting behind it.
    #[test]
    fn a_dropped_read_keeps_its_buffer_until_the_kernel_is_done() {
        let p = dir("drop").join("f");
        std::fs::write(&p, b"file").unwrap();
        on_worker(|| async {
            let ring = Ring::new(spec(1)).unwrap();
            let (rx, mut tx) = std::io::pipe().unwrap();
            let pipe = Arc::new(File::from(OwnedFd::from(rx)));
            // Nothing to read yet: the read stays in flight.
            let stuck = ring.read(&pipe, ring.buffer(16), 0..16, 0, false);
            let mut stuck = Box::pin(stuck);
            let waker = futures_noop_waker();
            let mut cx = Context::from_waker(&waker);
            assert!(stuck.as_mut().poll(&mut cx).is_pending());
            drop(stuck);
            assert!(!idle(&ring), "the kernel still owns the slot");
            // The only slot is taken: this read waits, then runs once the
            // pipe's completion frees it.
            let f = Arc::new(File::open(&p).unwrap());
            let ring2 = ring.clone();
            let after = crate::metrics::timed::spawn(async move {
                let (buf, n) = ring2.read_full(&f, 4, 0, false).await.unwrap();
                buf[..n].to_vec()
            });
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert!(!after.is_finished());
            tx.write_all(b"for the kernel").unwrap();
            let got = tokio::time::timeout(Duration::from_secs(5), after)
                .await
                .expect("the waiting read ran")
                .unwrap();
            assert_eq!(got, b"file");
            assert!(idle(&ring));
            let mut rest = Vec::new();
            drop(tx);
            let _ = (&*pipe).read_to_end(&mut rest);
            assert!(rest.is_empty(), "the dropped read consumed the bytes");
        });
    }

    fn futures_noop_waker() -> Waker {
        Waker::noop().clone()
    }

    /// `aio on`'s send through a socket that fills up: bytes read but not
    /// taken are kept and sent first; the peer gets the file exactly.
    #[test]
    fn send_through_the_ring_loses_and_repeats_nothing() {
        let p = dir("send").join("f");
        let data = pattern(3 * 1024 * 1024 + 17);
        std::fs::write(&p, &data).unwrap();
        let got = on_worker(|| async {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let peer = std::thread::spawn(move || {
                let (mut s, _) = l.accept().unwrap();
                // Let the socket fill before reading.
                std::thread::sleep(Duration::from_millis(200));
                let mut v = Vec::new();
                s.read_to_end(&mut v).unwrap();
                v
            });
            let sock = tokio::net::TcpStream::connect(addr).await.unwrap();
            socket2::SockRef::from(&sock)
                .set_send_buffer_size(64 * 1024)
                .unwrap();
            let ring = Ring::new(spec(8)).unwrap();
            let disk = Disk::new(Default::default()).with_ring(Some(ring));
            let io = crate::disk::Io::uring(
                disk.ring.clone().unwrap(),
                Arc::new(pool_for_test()),
                false,
            );
            let f = io.open(&p, &PathRules::default()).await.unwrap();
            let (mut off, mut blocked) = (0u64, 0);
            while off < f.meta.size {
                let want = (f.meta.size - off).min(300 * 1024) as usize;
                match disk.sendfile(&sock, &f, &mut off, want).await {
                    Ok(n) => assert!(n > 0),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        blocked += 1;
                        sock.writable().await.unwrap();
                    }
                    Err(e) => panic!("{e}"),
                }
            }
            assert!(blocked > 0, "the socket never filled");
            drop(sock);
            peer.join().unwrap()
        });
        if let Some(got) = got {
            assert_eq!(got.len(), data.len());
            assert!(got == data, "bytes differ");
        }
    }

    fn pool_for_test() -> crate::disk::pool::ThreadPool {
        let spec = crate::disk::pool::PoolSpec {
            name: "default".into(),
            threads: 1,
            max_queue: 4,
        };
        crate::disk::pool::ThreadPool::start(spec, None, crate::log::ErrorLog::new(Vec::new()))
            .unwrap()
    }
}
