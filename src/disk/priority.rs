//! Disk threads run below the event loops: `SCHED_IDLE`.
//!
//! A pool thread serves one miss at a time and spends most of it asleep
//! on the disk; an event loop serves every cached request of its
//! connections. When both want the same core, the loop must win at once:
//! a hot request held back by a pool thread's path walk, page-cache copy
//! or memory-cgroup reclaim waits for it. Nice +5 (the first rule) was not
//! enough: in bench S2 (paced hot file among cold small files, two cores)
//! the loops still waited 52 times in 5 s for 0.5–3 ms to get a core
//! back, and pool threads held the core for 37 % of that time — the hot file's p99 under
//! load stayed 5–8 × its p99 alone. `SCHED_IDLE` (weight 3 against a
//! loop's 1024, and any other thread's wake-up preempts it at once) took
//! it to 1.4–2.0 × with cold throughput unchanged (bench/RESULTS.md,
//! 2026-11-26). The policy ranks threads only within one scheduling group
//! (the server's session under autogroup, its cgroup under systemd), so
//! other programs on the machine do not starve porter's disk threads any
//! more than they could porter itself.
//!
//! The same holds for the kernel's io-wq threads that run `aio on`'s
//! blocking calls (`iou-wrk-TID`): the kernel forks them from the loop
//! that submitted, so they inherit the loop's priority. [`watch_io_workers`]
//! starts one thread per process that looks for new ones every
//! [`IO_WORKER_SCAN`] and lowers them the same way.
//!
//! **Inversion.** A loop and the pool threads share a few user-space
//! locks (the pool's queue, the map of offloaded files, glibc's malloc
//! arenas). Where the loops saturate the cores, a `SCHED_IDLE` thread
//! preempted while holding one of them waits long for its next turn, and
//! the loop that wants the lock with it: bench S2 with a saturating hot
//! client saw loops asleep on such a `futex` for up to 167 ms. So the
//! event-loop watch (`runtime::loop_watch`), which looks at every busy
//! loop every 5 ms, calls [`boost`] when it finds one asleep in the
//! kernel: every disk thread runs `SCHED_OTHER` (nice +5, the rule before
//! this one) until no loop has been seen asleep for [`BOOST_HOLD`]
//! ([`settle`]). Going back from `SCHED_IDLE` needs `CAP_SYS_NICE` (or an
//! `RLIMIT_NICE` that root without `CAP_SYS_RESOURCE` cannot raise), so
//! the watch thread is started before the workers drop root, and
//! [`probe_boost`] checks at start that it can: where it cannot (porter
//! started without root, a container without `CAP_SYS_NICE`), disk threads
//! keep the nice +5 rule and never go under `SCHED_IDLE`.
//!
//! Hand-written: no crate sets another thread's policy by name; the calls
//! are `sched_setscheduler` and a listing of `/proc/self/task`.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Nice steps below the loops a pool thread takes first: what it runs at
/// while boosted, or where `SCHED_IDLE` is refused (a seccomp filter) —
/// the rule before `SCHED_IDLE`.
const FALLBACK_NICE: i32 = 5;

/// How often the process's threads are listed for new io-wq workers.
pub const IO_WORKER_SCAN: Duration = Duration::from_millis(100);

/// How long the disk threads stay boosted after a loop was last seen
/// asleep in the kernel.
pub const BOOST_HOLD: Duration = Duration::from_millis(50);

/// The disk threads of this process: pool threads (which add and remove
/// themselves) and io-wq workers (kept by the io-wq watch).
static DISK_THREADS: Mutex<DiskThreads> = Mutex::new(DiskThreads {
    pool: Vec::new(),
    io_workers: Vec::new(),
    boosted_until: None,
});

struct DiskThreads {
    pool: Vec<i32>,
    io_workers: Vec<i32>,
    /// Set while boosted: when to lower the threads again.
    boosted_until: Option<Instant>,
}

/// Puts thread `tid` (0: the calling thread) under `policy`; the nice
/// value stays what it was (`SCHED_IDLE` ignores it, `SCHED_OTHER` uses it
/// again).
fn set_policy(tid: i32, policy: libc::c_int) -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: a valid pointer to a sched_param that lives for the call.
    if unsafe { libc::sched_setscheduler(tid, policy, &param) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn set_idle(tid: i32) -> std::io::Result<()> {
    set_policy(tid, libc::SCHED_IDLE)
}

fn set_other(tid: i32) -> std::io::Result<()> {
    set_policy(tid, libc::SCHED_OTHER)
}

/// Lowers thread `tid` (`None`: the calling thread) [`FALLBACK_NICE`] nice
/// steps; lowering is always allowed, and a failure leaves it as it was.
fn lower_nice(tid: Option<rustix::process::Pid>) {
    if let Ok(now) = rustix::process::getpriority_process(tid) {
        let _ = rustix::process::setpriority_process(tid, (now + FALLBACK_NICE).min(19));
    }
}

/// Whether [`probe_boost`] found that a boost can undo `SCHED_IDLE`.
static IDLE_ALLOWED: AtomicBool = AtomicBool::new(false);

/// Checks, on the master at start (with the credentials the event-loop
/// watch will have), that a thread put under `SCHED_IDLE` can be put back
/// under `SCHED_OTHER` from outside; only then do disk threads use
/// `SCHED_IDLE`. Returns the answer.
pub fn probe_boost() -> bool {
    let (tx, rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let Ok(t) = std::thread::Builder::new()
        .name("porter-probe".into())
        .spawn(move || {
            let tid = rustix::thread::gettid().as_raw_nonzero().get();
            let _ = tx.send(set_idle(0).ok().map(|()| tid));
            let _ = done_rx.recv();
        })
    else {
        return false;
    };
    let ok = matches!(rx.recv(), Ok(Some(tid)) if set_other(tid).is_ok());
    drop(done_tx);
    let _ = t.join();
    IDLE_ALLOWED.store(ok, Ordering::Relaxed);
    ok
}

/// Lowers the calling pool thread below the event loops: nice +5, then
/// `SCHED_IDLE` where [`probe_boost`] allowed it and no boost is on; the
/// thread is registered for [`boost`] until the returned guard drops (when
/// the thread ends). A failure leaves the thread as it was.
pub fn lower_this_thread() -> Registered {
    let me = rustix::thread::gettid();
    lower_nice(Some(me));
    let tid = me.as_raw_nonzero().get();
    let mut all = DISK_THREADS.lock().unwrap();
    if IDLE_ALLOWED.load(Ordering::Relaxed) && all.boosted_until.is_none() {
        let _ = set_idle(0);
    }
    all.pool.push(tid);
    Registered(tid)
}

/// A pool thread's place in the list of disk threads; removed on drop.
pub struct Registered(i32);

impl Drop for Registered {
    fn drop(&mut self) {
        DISK_THREADS.lock().unwrap().pool.retain(|&t| t != self.0);
    }
}

/// A loop was seen asleep in the kernel while it had work: every disk
/// thread runs `SCHED_OTHER` (nice +5) for at least [`BOOST_HOLD`] from
/// `now`. Called by the event-loop watch.
pub fn boost(now: Instant) {
    if !IDLE_ALLOWED.load(Ordering::Relaxed) {
        return;
    }
    let mut all = DISK_THREADS.lock().unwrap();
    if all.boosted_until.is_none() {
        for &tid in all.pool.iter().chain(all.io_workers.iter()) {
            let _ = set_other(tid);
        }
    }
    all.boosted_until = Some(now + BOOST_HOLD);
}

/// No loop is asleep in the kernel now: once [`BOOST_HOLD`] has passed
/// since the last [`boost`], the disk threads go back under `SCHED_IDLE`.
/// Called by the event-loop watch at every look.
pub fn settle(now: Instant) {
    let mut all = DISK_THREADS.lock().unwrap();
    if all.boosted_until.is_some_and(|until| now >= until) {
        all.boosted_until = None;
        for &tid in all.pool.iter() {
            let _ = set_idle(tid);
        }
        for &tid in all.io_workers.iter() {
            let comm = std::fs::read(format!("/proc/self/task/{tid}/comm")).unwrap_or_default();
            if is_io_worker(&comm) {
                let _ = set_idle(tid);
            }
        }
    }
}

/// Starts, once per process, the thread that puts every io-wq worker of
/// this process under `SCHED_IDLE` within [`IO_WORKER_SCAN`] of its
/// birth. Called when a ring is created.
pub fn watch_io_workers() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        let _ = std::thread::Builder::new()
            .name("porter-iowq".into())
            .spawn(|| {
                let mut lowered = HashSet::new();
                loop {
                    lower_new_io_workers(&mut lowered);
                    std::thread::sleep(IO_WORKER_SCAN);
                }
            });
    });
}

/// One pass: every `iou-wrk-*` thread not in `lowered` is put under
/// `SCHED_IDLE` (unless the disk threads are boosted) and remembered;
/// threads that have gone are forgotten. The list goes to
/// [`DISK_THREADS`] for [`boost`] and [`settle`].
fn lower_new_io_workers(lowered: &mut HashSet<i32>) {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return;
    };
    let mut alive = HashSet::with_capacity(lowered.len());
    for entry in dir.flatten() {
        let Some(tid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if lowered.contains(&tid) {
            alive.insert(tid);
            continue;
        }
        let comm = std::fs::read(entry.path().join("comm")).unwrap_or_default();
        if is_io_worker(&comm) {
            // 5 nice steps below the loop it was forked from: the nice it
            // runs at while boosted.
            lower_nice(rustix::process::Pid::from_raw(tid));
            let all = DISK_THREADS.lock().unwrap();
            if !IDLE_ALLOWED.load(Ordering::Relaxed)
                || all.boosted_until.is_some()
                || set_idle(tid).is_ok()
            {
                alive.insert(tid);
            }
        }
    }
    if alive != *lowered {
        DISK_THREADS.lock().unwrap().io_workers = alive.iter().copied().collect();
    }
    *lowered = alive;
}

/// Whether a thread's `comm` names an io_uring io-wq worker.
fn is_io_worker(comm: &[u8]) -> bool {
    comm.starts_with(b"iou-wrk-")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scheduling policy of thread `tid` of this process.
    fn policy(tid: i32) -> i32 {
        // SAFETY: reads the policy of a thread of this process.
        unsafe { libc::sched_getscheduler(tid) }
    }

    #[test]
    fn io_workers_are_told_by_name() {
        assert!(is_io_worker(b"iou-wrk-1234\n"));
        assert!(!is_io_worker(b"iou-sqp-1234\n"));
        assert!(!is_io_worker(b"porter-w0\n"));
    }

    /// Lowering, a boost while a loop is asleep, and the return to
    /// `SCHED_IDLE` once the hold has passed (as root: `probe_boost` needs
    /// `CAP_SYS_NICE`). One test: the list of disk threads is the
    /// process's.
    #[test]
    fn a_pool_thread_is_lowered_and_boosted_while_a_loop_sleeps() {
        if !probe_boost() {
            eprintln!("skipping: no CAP_SYS_NICE to undo SCHED_IDLE");
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            let registered = lower_this_thread();
            tx.send(registered.0).unwrap();
            go_rx.recv().unwrap();
        });
        let tid = rx.recv().unwrap();
        let (o, i) = (libc::SCHED_OTHER, libc::SCHED_IDLE);
        assert_eq!(policy(tid), i);
        assert_eq!(policy(0), o, "the caller's own thread is untouched");
        let now = Instant::now();
        boost(now);
        assert_eq!(policy(tid), o);
        settle(now + BOOST_HOLD / 2);
        assert_eq!(policy(tid), o, "lowered before the hold passed");
        settle(now + BOOST_HOLD);
        assert_eq!(policy(tid), i);
        go_tx.send(()).unwrap();
        t.join().unwrap();
        assert!(!DISK_THREADS.lock().unwrap().pool.contains(&tid));
    }
}
