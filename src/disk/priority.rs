//! Disk threads run below the event loops: `SCHED_IDLE`.
//!
//! A pool thread serves one miss at a time and spends most of it asleep
//! on the disk; an event loop serves every cached request of its
//! connections. When both want the same core, the loop must win at once:
//! a hot request held back by a pool thread's path walk, page-cache copy
//! or memory-cgroup reclaim waits for it. Nice +5 (the first rule) was not
//! enough: in bench S2 (paced hot file among cold small files, two cores)
//! the loops still waited 52 times in 5 s for 0.5–3 ms to get a core back, and pool
//! threads held the core for 37 % of that time — the hot file's p99 under
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
//! Hand-written: no crate sets another thread's policy by name; the calls
//! are `sched_setscheduler` and a listing of `/proc/self/task`.

use std::collections::HashSet;
use std::sync::OnceLock;
use std::time::Duration;

/// Nice steps below the loops for a pool thread where `SCHED_IDLE` is
/// refused (a seccomp filter): the rule before `SCHED_IDLE`.
const FALLBACK_NICE: i32 = 5;

/// How often the process's threads are listed for new io-wq workers.
pub const IO_WORKER_SCAN: Duration = Duration::from_millis(100);

/// Puts thread `tid` (0: the calling thread) under `SCHED_IDLE`.
fn set_idle(tid: i32) -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: a valid pointer to a sched_param that lives for the call.
    if unsafe { libc::sched_setscheduler(tid, libc::SCHED_IDLE, &param) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Lowers the calling pool thread below the event loops: `SCHED_IDLE`, or
/// nice +5 where that is refused. A failure of both leaves the thread as
/// it was.
pub fn lower_this_thread() {
    if set_idle(0).is_ok() {
        return;
    }
    let me = rustix::thread::gettid();
    if let Ok(now) = rustix::process::getpriority_process(Some(me)) {
        let _ = rustix::process::setpriority_process(Some(me), (now + FALLBACK_NICE).min(19));
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
/// `SCHED_IDLE` and remembered; threads that have gone are forgotten.
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
        if is_io_worker(&comm) && set_idle(tid).is_ok() {
            alive.insert(tid);
        }
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

    #[test]
    fn a_pool_thread_lowers_itself_to_idle() {
        let got = std::thread::spawn(|| {
            lower_this_thread();
            policy(0)
        })
        .join()
        .unwrap();
        assert_eq!(got, libc::SCHED_IDLE);
        // the caller's own thread is untouched
        assert_eq!(policy(0), libc::SCHED_OTHER);
    }
}
