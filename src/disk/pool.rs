//! `thread_pool NAME threads=N max_queue=M`: a plain pool, as NGINX's
//! `ngx_thread_pool.c` is — a mutex, a condition variable, a FIFO and a
//! count of tasks waiting, checked against `max_queue` when a task is
//! posted. Completion goes back to the submitting event loop through a
//! oneshot channel, whose waker unparks that loop: no polling.
//!
//! A pool is shared by all workers, so `threads` bounds the concurrency of
//! the disk it serves (one pool per disk).
//!
//! **Two lanes.** A task is posted in the short lane (metadata calls, and
//! reads whose range is mostly in the page cache: about one small disk
//! read each) or the bulk lane (whole-chunk reads from the disk). A free
//! thread takes the oldest short task first; bulk tasks may occupy at most
//! `threads - threads / 4` threads, so a quarter of the threads (none for
//! pools of under four) is always free for short tasks, and a request that
//! misses one page never waits behind a queue of cold reads. Within that
//! bound the bulk lane's [`BulkGate`] admits only as many tasks as the disk
//! serves within its latency target, so the short lane's reads do not wait
//! long in the disk's own queue either. `max_queue` counts both lanes, as
//! NGINX's single queue does. A task owns everything it
//! touches (duplicated descriptors, `Arc`ed files), so it stays safe when
//! the connection that posted it is gone: its result is then dropped.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::bulk_gate::BulkGate;
use crate::log::{ErrorLog, Level};
use crate::util::thread_user::ThreadUser;

/// A task running longer than this is reported (NGINX's 60 s warning).
const SLOW_TASK: Duration = Duration::from_secs(60);

/// A task computes its result and returns the step that delivers it, so
/// the thread can count itself free before the submitter is woken.
type Deliver = Box<dyn FnOnce() + Send + 'static>;
type Task = Box<dyn FnOnce() -> Deliver + Send + 'static>;

/// A pool's declared shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSpec {
    /// Pool name.
    pub name: String,
    /// Threads (total, shared by all workers).
    pub threads: usize,
    /// Tasks allowed to wait for a thread.
    pub max_queue: usize,
}

impl PoolSpec {
    /// NGINX's implicit `default` pool: 32 threads, 65536 waiting tasks.
    pub fn default_pool() -> PoolSpec {
        PoolSpec {
            name: "default".into(),
            threads: 32,
            max_queue: 65536,
        }
    }
}

/// Counters of one pool (for metrics).
#[derive(Debug, Default)]
pub struct PoolStats {
    /// Tasks completed.
    pub done: AtomicU64,
    /// Tasks rejected because the queue was full.
    pub overflows: AtomicU64,
    /// Threads running a task now.
    pub busy: AtomicUsize,
    /// Tasks waiting now.
    pub waiting: AtomicUsize,
    /// Short-lane tasks completed.
    pub short_done: AtomicU64,
    /// Bulk tasks the gate lets run at once now.
    pub bulk_allowed: AtomicUsize,
}

impl Queue {
    fn waiting(&self) -> usize {
        self.short.len() + self.bulk.len()
    }
}

/// Which queue a task waits in (see the module's header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Metadata calls and mostly-resident reads: taken first, and by the
    /// threads held back from bulk work.
    Short,
    /// Reads that go to the disk for most of their range.
    Bulk,
}

struct Queue {
    short: VecDeque<Task>,
    bulk: VecDeque<Task>,
    /// Bulk tasks running now (at most the gate's `allowed`, itself at
    /// most `bulk_limit`).
    running_bulk: usize,
    gate: BulkGate,
    idle: usize,
    /// Tasks taken by a thread and not yet delivered.
    running: usize,
    stopping: bool,
}

struct Inner {
    spec: PoolSpec,
    queue: Mutex<Queue>,
    ready: Condvar,
    stats: PoolStats,
    /// Start time of the task each thread runs (for the slow-task warning).
    running: Mutex<Vec<Option<(Instant, bool)>>>,
    log: Mutex<ErrorLog>,
}

/// A thread pool; dropping the last handle stops its threads once the
/// queue is drained.
pub struct ThreadPool {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadPool")
            .field("spec", &self.inner.spec)
            .finish()
    }
}

/// Why a task was not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PoolError {
    /// The queue was full: `waiting` tasks were waiting.
    Overflow {
        /// Pool name.
        pool: String,
        /// Tasks waiting at the time.
        waiting: usize,
    },
    /// The pool is shutting down.
    Stopped,
}

impl ThreadPool {
    /// Starts `spec.threads` threads named `NAME-i`, each switching to
    /// `user` first when given.
    pub fn start(
        spec: PoolSpec,
        user: Option<ThreadUser>,
        log: ErrorLog,
    ) -> std::io::Result<ThreadPool> {
        let inner = Arc::new(Inner {
            queue: Mutex::new(Queue {
                short: VecDeque::new(),
                bulk: VecDeque::new(),
                running_bulk: 0,
                gate: BulkGate::new(bulk_limit(spec.threads)),
                idle: 0,
                running: 0,
                stopping: false,
            }),
            ready: Condvar::new(),
            stats: PoolStats::default(),
            running: Mutex::new(vec![None; spec.threads]),
            log: Mutex::new(log),
            spec,
        });
        let allowed = inner.queue.lock().unwrap().gate.allowed();
        inner.stats.bulk_allowed.store(allowed, Ordering::Relaxed);
        for i in 0..inner.spec.threads {
            let inner2 = inner.clone();
            let user = user.clone();
            // `top -H` shows "NAME-i"; the kernel keeps 15 bytes, so a long
            // pool name is cut to leave room for the index.
            let suffix = format!("-{i}");
            let mut name: String = inner.spec.name.clone();
            while name.len() + suffix.len() > 15 {
                name.pop();
            }
            std::thread::Builder::new()
                .name(format!("{name}{suffix}"))
                .spawn(move || {
                    if let Some(u) = &user {
                        if let Err(e) = u.switch() {
                            inner2.log.lock().unwrap().log(
                                Level::Emerg,
                                format_args!(
                                    "thread pool \"{}\": setuid failed: {e}",
                                    inner2.spec.name
                                ),
                            );
                            return;
                        }
                    }
                    let _registered = super::priority::lower_this_thread();
                    run_thread(&inner2, i)
                })?;
        }
        let watchdog = Arc::downgrade(&inner);
        std::thread::Builder::new()
            .name("porter-watchdog".into())
            .spawn(move || loop {
                std::thread::sleep(Duration::from_secs(1));
                let Some(inner) = watchdog.upgrade() else {
                    return;
                };
                if inner.queue.lock().unwrap().stopping {
                    return;
                }
                let mut running = inner.running.lock().unwrap();
                for slot in running.iter_mut().flatten() {
                    if !slot.1 && slot.0.elapsed() >= SLOW_TASK {
                        slot.1 = true;
                        inner.log.lock().unwrap().log(
                            Level::Warn,
                            format_args!(
                                "thread pool \"{}\": task is running for {} s",
                                inner.spec.name,
                                slot.0.elapsed().as_secs()
                            ),
                        );
                    }
                }
            })?;
        Ok(ThreadPool { inner })
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.inner.spec.name
    }

    /// The pool's shape.
    pub fn spec(&self) -> &PoolSpec {
        &self.inner.spec
    }

    /// Its counters.
    pub fn stats(&self) -> &PoolStats {
        &self.inner.stats
    }

    /// Points the pool's messages at a new error log (after a reload).
    pub fn set_log(&self, log: ErrorLog) {
        *self.inner.log.lock().unwrap() = log;
    }

    /// Posts `f` in the bulk lane: see [`ThreadPool::submit_in`].
    pub fn submit<T, F>(&self, f: F) -> Result<oneshot::Receiver<T>, PoolError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        self.submit_in(Lane::Bulk, f)
    }

    /// Posts `f` in `lane` and returns a receiver for its result. Fails at once when
    /// the pool is full: `threads + max_queue` tasks already queued or
    /// running (so `max_queue=0` allows `threads` tasks in flight and none
    /// waiting). A thread counts as free again before its result wakes the
    /// submitter, so a request's next task is never refused for its own
    /// previous one.
    pub fn submit_in<T, F>(&self, lane: Lane, f: F) -> Result<oneshot::Receiver<T>, PoolError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let task: Task = Box::new(move || {
            let v = f();
            Box::new(move || {
                let _ = tx.send(v);
            })
        });
        let mut q = self.inner.queue.lock().unwrap();
        if q.stopping {
            return Err(PoolError::Stopped);
        }
        let spec = &self.inner.spec;
        if q.waiting() + q.running >= spec.threads + spec.max_queue {
            let waiting = q.waiting();
            drop(q);
            self.inner.stats.overflows.fetch_add(1, Ordering::Relaxed);
            return Err(PoolError::Overflow {
                pool: self.inner.spec.name.clone(),
                waiting,
            });
        }
        match lane {
            Lane::Short => q.short.push_back(task),
            Lane::Bulk => q.bulk.push_back(task),
        }
        self.inner
            .stats
            .waiting
            .store(q.waiting(), Ordering::Relaxed);
        drop(q);
        self.inner.ready.notify_one();
        Ok(rx)
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        self.inner.queue.lock().unwrap().stopping = true;
        self.inner.ready.notify_all();
    }
}

/// Bulk tasks a pool of `threads` may run at once: all but a quarter.
fn bulk_limit(threads: usize) -> usize {
    threads - threads / 4
}

/// The next task for a free thread: the oldest short one, else the oldest
/// bulk one while fewer than the bulk limit run; `None` when stopping.
fn next_task(inner: &Inner) -> Option<(Task, Lane)> {
    let mut q = inner.queue.lock().unwrap();
    loop {
        let picked = match q.short.pop_front() {
            Some(t) => Some((t, Lane::Short)),
            None if q.running_bulk < q.gate.allowed() => {
                q.bulk.pop_front().map(|t| (t, Lane::Bulk))
            }
            None => None,
        };
        if let Some((t, lane)) = picked {
            q.running += 1;
            if lane == Lane::Bulk {
                q.running_bulk += 1;
            }
            inner.stats.waiting.store(q.waiting(), Ordering::Relaxed);
            return Some((t, lane));
        }
        if q.stopping {
            return None;
        }
        q.idle += 1;
        q = inner.ready.wait(q).unwrap();
        q.idle -= 1;
    }
}

fn run_thread(inner: &Inner, index: usize) {
    while let Some((task, lane)) = next_task(inner) {
        inner.stats.busy.fetch_add(1, Ordering::Relaxed);
        let began = Instant::now();
        inner.running.lock().unwrap()[index] = Some((began, false));
        // A panicking task drops its sender (the submitter sees the task
        // as lost) and leaves the thread serving.
        let deliver = std::panic::catch_unwind(std::panic::AssertUnwindSafe(task)).ok();
        {
            let mut q = inner.queue.lock().unwrap();
            q.running -= 1;
            if lane == Lane::Bulk {
                let (now, running) = (Instant::now(), q.running_bulk);
                q.gate.completed(now - began, running, now);
                inner
                    .stats
                    .bulk_allowed
                    .store(q.gate.allowed(), Ordering::Relaxed);
                q.running_bulk -= 1;
                // A bulk task may have waited for this slot, not for a
                // thread: wake one to take it.
                if !q.bulk.is_empty() {
                    inner.ready.notify_one();
                }
            }
        }
        inner.running.lock().unwrap()[index] = None;
        inner.stats.busy.fetch_sub(1, Ordering::Relaxed);
        inner.stats.done.fetch_add(1, Ordering::Relaxed);
        if lane == Lane::Short {
            inner.stats.short_done.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(deliver) = deliver {
            deliver();
        }
    }
}

/// The pools of one configuration generation, by name. Reload builds a
/// new set that keeps every pool whose name and shape are unchanged, so
/// tasks in flight and queued carry on; pools no longer configured stop
/// once the last generation using them is gone.
#[derive(Debug, Default)]
pub struct PoolSet {
    pools: HashMap<String, Arc<ThreadPool>>,
}

impl PoolSet {
    /// Starts (or reuses from `old`) a pool for every spec.
    pub fn build(
        specs: &[PoolSpec],
        old: Option<&PoolSet>,
        user: Option<ThreadUser>,
        log: &ErrorLog,
    ) -> std::io::Result<PoolSet> {
        let mut pools = HashMap::new();
        for spec in specs {
            let reuse = old
                .and_then(|o| o.pools.get(&spec.name))
                .filter(|p| p.spec() == spec);
            let pool = match reuse {
                Some(p) => {
                    p.set_log(log.clone());
                    p.clone()
                }
                None => Arc::new(ThreadPool::start(spec.clone(), user.clone(), log.clone())?),
            };
            pools.insert(spec.name.clone(), pool);
        }
        Ok(PoolSet { pools })
    }

    /// The pool called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<ThreadPool>> {
        self.pools.get(name)
    }

    /// Every pool, sorted by name (for metrics).
    pub fn sorted(&self) -> Vec<&Arc<ThreadPool>> {
        let mut v: Vec<_> = self.pools.values().collect();
        v.sort_by(|a, b| a.name().cmp(b.name()));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn pool(threads: usize, max_queue: usize) -> ThreadPool {
        ThreadPool::start(
            PoolSpec {
                name: "t".into(),
                threads,
                max_queue,
            },
            None,
            ErrorLog::new(Vec::new()),
        )
        .unwrap()
    }

    /// Posts tasks that block until released.
    fn blockers(
        p: &ThreadPool,
        n: usize,
    ) -> (
        Vec<Result<oneshot::Receiver<()>, PoolError>>,
        mpsc::Sender<()>,
    ) {
        let (tx, rx) = mpsc::channel::<()>();
        let rx = Arc::new(Mutex::new(rx));
        let v = (0..n)
            .map(|_| {
                let rx = rx.clone();
                p.submit(move || {
                    let _ = rx.lock().unwrap().recv();
                })
            })
            .collect();
        (v, tx)
    }

    fn settle(p: &ThreadPool, busy: usize) {
        let t = Instant::now();
        while p.stats().busy.load(Ordering::Relaxed) < busy && t.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn runs_tasks_and_returns_results() {
        let p = pool(2, 10);
        let rx = p.submit(|| 6 * 7).unwrap();
        assert_eq!(rx.blocking_recv().unwrap(), 42);
        // The worker counts the task after it has sent the result.
        let t = Instant::now();
        while p.stats().done.load(Ordering::Relaxed) < 1 && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(p.stats().done.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn overflow_when_queue_full_then_recovers() {
        let p = pool(1, 1);
        // Wait until the thread is idle so the first task is taken at once.
        std::thread::sleep(Duration::from_millis(50));
        let (first, release) = blockers(&p, 1);
        assert!(first[0].is_ok());
        settle(&p, 1);
        let (second, release2) = blockers(&p, 1);
        assert!(second[0].is_ok(), "one may wait");
        let (third, _r3) = blockers(&p, 1);
        assert_eq!(
            third.into_iter().next().unwrap().unwrap_err(),
            PoolError::Overflow {
                pool: "t".into(),
                waiting: 1
            }
        );
        assert_eq!(p.stats().overflows.load(Ordering::Relaxed), 1);
        release.send(()).unwrap();
        release2.send(()).unwrap();
        release2.send(()).ok();
        for r in first.into_iter().chain(second) {
            r.unwrap().blocking_recv().unwrap();
        }
        assert_eq!(p.submit(|| 1).unwrap().blocking_recv().unwrap(), 1);
    }

    #[test]
    fn a_thread_is_free_before_its_result_arrives() {
        // With one thread and no queue, a submitter that posts its next task
        // as soon as the previous result arrives is never refused.
        let p = pool(1, 0);
        for i in 0..500 {
            let rx = p.submit(move || i).expect("thread free");
            assert_eq!(rx.blocking_recv().unwrap(), i);
        }
        assert_eq!(p.stats().overflows.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn max_queue_zero_allows_only_idle_threads() {
        let p = pool(2, 0);
        std::thread::sleep(Duration::from_millis(50));
        let (ok, release) = blockers(&p, 2);
        assert!(ok.iter().all(Result::is_ok));
        settle(&p, 2);
        let (more, _r) = blockers(&p, 1);
        assert!(matches!(more[0], Err(PoolError::Overflow { .. })));
        release.send(()).unwrap();
        release.send(()).unwrap();
        for r in ok {
            r.unwrap().blocking_recv().unwrap();
        }
    }

    #[test]
    fn a_short_task_passes_a_full_bulk_lane() {
        // 4 threads: at most 3 run bulk tasks, one is kept for short ones.
        let p = pool(4, 100);
        std::thread::sleep(Duration::from_millis(50));
        let (bulk, release) = blockers(&p, 6);
        settle(&p, 3);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(p.stats().busy.load(Ordering::Relaxed), 3, "bulk limit");
        assert_eq!(p.stats().waiting.load(Ordering::Relaxed), 3);
        let t = Instant::now();
        let rx = p.submit_in(Lane::Short, || 7).unwrap();
        assert_eq!(rx.blocking_recv().unwrap(), 7);
        assert!(t.elapsed() < Duration::from_secs(1), "waited behind bulk");
        for _ in 0..6 {
            release.send(()).unwrap();
        }
        for r in bulk {
            r.unwrap().blocking_recv().unwrap();
        }
        assert_eq!(p.stats().short_done.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn short_tasks_go_first_and_small_pools_keep_every_thread() {
        assert_eq!((bulk_limit(1), bulk_limit(3), bulk_limit(4)), (1, 3, 3));
        assert_eq!(bulk_limit(64), 48);
        // One thread, busy: a short task posted after two bulk ones runs
        // before them.
        let p = pool(1, 10);
        std::thread::sleep(Duration::from_millis(50));
        let (first, release) = blockers(&p, 1);
        settle(&p, 1);
        let order = Arc::new(Mutex::new(Vec::new()));
        let post = |lane, tag: &'static str| {
            let order = order.clone();
            p.submit_in(lane, move || order.lock().unwrap().push(tag))
                .unwrap()
        };
        let a = post(Lane::Bulk, "bulk-a");
        let b = post(Lane::Bulk, "bulk-b");
        let c = post(Lane::Short, "short");
        release.send(()).unwrap();
        for r in first {
            r.unwrap().blocking_recv().unwrap();
        }
        for r in [a, b, c] {
            r.blocking_recv().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), ["short", "bulk-a", "bulk-b"]);
    }

    #[test]
    fn dropped_receiver_is_fine() {
        let p = pool(1, 4);
        let rx = p
            .submit(|| std::fs::File::open("/dev/null").unwrap())
            .unwrap();
        drop(rx);
        let rx = p.submit(|| 5).unwrap();
        assert_eq!(rx.blocking_recv().unwrap(), 5);
    }
}
