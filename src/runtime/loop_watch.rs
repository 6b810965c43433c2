//! Event-loop *blocked* time, seen from outside the loop.
//!
//! `porter_loop_busy_seconds` times each stretch from a loop's wake-up to
//! its next wait for events. Under a saturating load that stretch also
//! holds back-to-back work and preemption by other threads (64 pool
//! threads and the load generator share two cores in bench S1), so it
//! cannot tell a loop that waits for the disk from one that merely has
//! much to do. What the design promises is the first: no call on a loop
//! sleeps in the kernel.
//!
//! So a watch thread samples every busy loop's scheduler state every
//! [`PERIOD`] from `/proc/self/task/TID/stat`: `R` is running or runnable
//! (working, or preempted), `S` or `D` is asleep inside a system call or a
//! page fault — blocked (a page read, a page-lock wait, a contended mutex).
//! A run of blocked samples is one blocked episode; its length goes to the
//! worker's `loop_blocked_max` and `loop_blocked_total`
//! (`porter_loop_blocked_max_seconds`, `porter_loop_blocked_seconds_total`).
//! The loop itself only flips an atomic flag on wake-up and before
//! waiting, so the measure costs the hot path nothing; an episode shorter
//! than a period may be missed, one of two periods or more is not.
//!
//! A blocked loop may be waiting for a lock that a disk thread holds
//! while it runs `SCHED_IDLE`, so each look also boosts the disk threads
//! or lets them settle again (`disk::priority`).
//!
//! Hand-written: no crate reads a thread's state this cheaply (procfs
//! crates parse the whole record and allocate per read).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use crate::metrics::WorkerMetrics;

/// How often each busy loop is looked at.
pub const PERIOD: Duration = Duration::from_millis(5);

/// A loop's side of the watch: whether it is busy now.
#[derive(Debug)]
pub struct LoopState {
    busy: AtomicBool,
}

impl LoopState {
    /// Called when the loop wakes with work (`true`) and before it waits
    /// for events (`false`).
    pub fn set_busy(&self, busy: bool) {
        self.busy.store(busy, Ordering::Relaxed);
    }
}

/// One watched loop, as the watch thread keeps it.
struct Watched {
    state: Weak<LoopState>,
    figures: Arc<WorkerMetrics>,
    stat: File,
    /// First and last blocked sample of the episode in progress.
    episode: Option<(Instant, Instant)>,
}

static WATCHED: Mutex<Vec<Watched>> = Mutex::new(Vec::new());
static STARTED: OnceLock<()> = OnceLock::new();

/// Starts the watch thread now, on the master before the workers drop
/// root: it inherits the master's credentials, so its boosts of the disk
/// threads (`disk::priority::boost`) may undo `SCHED_IDLE`.
pub fn start() {
    STARTED.get_or_init(|| {
        let _ = std::thread::Builder::new()
            .name("porter-loopwatch".into())
            .spawn(watch_loops);
    });
}

/// Starts watching the calling thread's event loop; its blocked episodes
/// go to `figures`. Called on the worker thread before its loop runs. The
/// watch ends when the returned state is dropped. `None` when the thread's
/// state cannot be read (no `/proc`): nothing is measured then.
pub fn watch(figures: Arc<WorkerMetrics>) -> Option<Arc<LoopState>> {
    let tid = rustix::thread::gettid().as_raw_nonzero().get();
    let stat = File::open(format!("/proc/self/task/{tid}/stat")).ok()?;
    let state = Arc::new(LoopState {
        busy: AtomicBool::new(false),
    });
    WATCHED.lock().unwrap().push(Watched {
        state: Arc::downgrade(&state),
        figures,
        stat,
        episode: None,
    });
    start();
    Some(state)
}

fn watch_loops() {
    let mut buf = [0u8; 512];
    loop {
        std::thread::sleep(PERIOD);
        let now = Instant::now();
        let mut all = WATCHED.lock().unwrap();
        let mut any_blocked = false;
        all.retain_mut(|w| {
            let Some(state) = w.state.upgrade() else {
                end_episode(w);
                return false;
            };
            let blocked = state.busy.load(Ordering::Relaxed)
                && w.stat
                    .read_at(&mut buf, 0)
                    .ok()
                    .and_then(|n| sched_state(&buf[..n]))
                    .is_some_and(|s| s == b'S' || s == b'D');
            // Still busy after reading: a loop that went to wait for
            // events meanwhile was not blocked.
            if blocked && state.busy.load(Ordering::Relaxed) {
                let first = w.episode.map_or(now, |e| e.0);
                w.episode = Some((first, now));
                any_blocked = true;
            } else {
                end_episode(w);
            }
            true
        });
        drop(all);
        // A loop asleep in the kernel may wait for a lock a disk thread
        // holds: give the disk threads their normal share until it runs.
        if any_blocked {
            crate::disk::priority::boost(now);
        } else {
            crate::disk::priority::settle(now);
        }
    }
}

/// Records the episode in progress, if any: from its first blocked sample
/// to its last, plus one period (the time it was seen for).
fn end_episode(w: &mut Watched) {
    if let Some((first, last)) = w.episode.take() {
        w.figures.loop_blocked(last - first + PERIOD);
    }
}

/// The state letter of a `/proc/…/stat` record: the first field after the
/// command name, which is in parentheses and may itself hold spaces or
/// parentheses (so the last `)` ends it).
fn sched_state(record: &[u8]) -> Option<u8> {
    let close = record.iter().rposition(|&b| b == b')')?;
    record[close + 1..]
        .iter()
        .copied()
        .find(|b| !b.is_ascii_whitespace())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_follows_the_last_parenthesis() {
        assert_eq!(sched_state(b"12 (porter-w0) R 1 2 3"), Some(b'R'));
        assert_eq!(sched_state(b"12 (a) b (c)) D 1 2"), Some(b'D'));
        assert_eq!(sched_state(b"12 (x"), None);
    }

    #[test]
    fn a_loop_asleep_in_the_kernel_while_busy_is_counted_blocked() {
        let figures = Arc::new(WorkerMetrics::default());
        let f2 = figures.clone();
        std::thread::spawn(move || {
            let state = watch(f2).expect("/proc");
            // busy but working: not blocked
            state.set_busy(true);
            let t = Instant::now();
            while t.elapsed() < Duration::from_millis(60) {
                std::hint::black_box(0u64.wrapping_add(1));
            }
            // busy and asleep in the kernel: blocked
            std::thread::sleep(Duration::from_millis(120));
            state.set_busy(false);
            // idle and asleep: not blocked
            std::thread::sleep(Duration::from_millis(60));
        })
        .join()
        .unwrap();
        std::thread::sleep(PERIOD * 4);
        let (max, total) = figures.loop_blocked_figures();
        assert!(
            (0.08..0.2).contains(&max.as_secs_f64()),
            "longest blocked episode {max:?}"
        );
        assert!(
            total >= max && total.as_secs_f64() < 0.25,
            "total {total:?}"
        );
    }
}
