//! `CpuPool`: a small, capped pool of threads for CPU-heavy work on large
//! inputs that must not run on an event loop (gzip compression of large
//! bodies). Plain as `disk::pool` is: a mutex, a condition variable and a
//! FIFO; completion goes back to the submitting loop through a oneshot
//! channel whose waker unparks it.
//!
//! The threads are capped at the number of CPUs (at most
//! [`MAX_THREADS`]): compression is CPU-bound, so more threads would only
//! take CPU time from the event loops. They start on first use, from a
//! worker thread, and so inherit its dropped privileges; they run 5 nice
//! steps below the loops, as the disk pools do. The queue needs no bound
//! of its own: each connection waits for its task before it posts the
//! next, so at most one task per connection is queued.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, OnceLock};

use tokio::sync::oneshot;

/// The most threads the pool starts, whatever the CPU count.
pub const MAX_THREADS: usize = 4;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// The pool: jobs waiting, and the condition its threads sleep on.
pub struct CpuPool {
    queue: Mutex<VecDeque<Job>>,
    ready: Condvar,
}

static POOL: OnceLock<&'static CpuPool> = OnceLock::new();

/// The process's pool, started on first use.
fn pool() -> &'static CpuPool {
    POOL.get_or_init(|| {
        let p: &'static CpuPool = Box::leak(Box::new(CpuPool {
            queue: Mutex::new(VecDeque::new()),
            ready: Condvar::new(),
        }));
        let n = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, MAX_THREADS);
        for i in 0..n {
            let spawned = std::thread::Builder::new()
                .name(format!("cpu-{i}"))
                .spawn(move || p.run());
            if spawned.is_err() && i == 0 {
                // No thread at all: jobs run on the caller (see `submit`).
                break;
            }
        }
        p
    })
}

impl CpuPool {
    fn run(&self) {
        // Below the event loops, as the disk pools' threads.
        let me = rustix::thread::gettid();
        if let Ok(now) = rustix::process::getpriority_process(Some(me)) {
            let _ = rustix::process::setpriority_process(Some(me), (now + 5).min(19));
        }
        loop {
            let job = {
                let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    if let Some(j) = q.pop_front() {
                        break j;
                    }
                    q = self.ready.wait(q).unwrap_or_else(|e| e.into_inner());
                }
            };
            job();
        }
    }
}

/// Runs `f` on the pool; its result arrives on the receiver.
pub fn submit<T, F>(f: F) -> oneshot::Receiver<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    let p = pool();
    let job: Job = Box::new(move || {
        let _ = tx.send(f());
    });
    p.queue
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push_back(job);
    p.ready.notify_one();
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_any_number() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let rxs: Vec<_> = (0..50u64).map(|i| submit(move || i * 2)).collect();
            for (i, rx) in rxs.into_iter().enumerate() {
                assert_eq!(rx.await.unwrap(), i as u64 * 2);
            }
        });
    }
}
