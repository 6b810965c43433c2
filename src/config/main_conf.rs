//! The main and `events` context's settings (`MainConf`), with
//! `worker_cpu_affinity` and a listening socket's buffer sizes: out of
//! model.rs, which keeps the http-level types.

use std::path::PathBuf;
use std::time::Duration;

use crate::log::ErrorLogSpec;

/// `worker_cpu_affinity`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuAffinity {
    /// `auto [MASK]`: worker N on the Nth CPU of the mask, in turn.
    Auto(u64),
    /// One mask per worker; the last one for the workers past the list.
    Masks(Vec<u64>),
}

impl CpuAffinity {
    /// The CPUs of worker `index` on a machine of `ncpu` CPUs, as a mask.
    pub fn mask_of(&self, index: usize, ncpu: usize) -> u64 {
        let online = if ncpu >= 64 {
            u64::MAX
        } else {
            (1u64 << ncpu) - 1
        };
        match self {
            CpuAffinity::Masks(v) => v[index.min(v.len() - 1)],
            CpuAffinity::Auto(m) => {
                let cpus: Vec<u32> = (0..64).filter(|b| m & online & (1 << b) != 0).collect();
                match cpus.len() {
                    0 => online,
                    n => 1 << cpus[index % n],
                }
            }
        }
    }
}

/// Main and `events` context settings.
#[derive(Debug, Clone)]
pub struct MainConf {
    /// `daemon on|off` (default on, as NGINX).
    pub daemon: bool,
    /// `worker_processes N|auto`: worker threads, each with its own loop.
    pub worker_processes: usize,
    /// `worker_connections`: client connections per worker.
    pub worker_connections: usize,
    /// `worker_rlimit_nofile`.
    pub worker_rlimit_nofile: Option<u64>,
    /// `worker_cpu_affinity`: the CPUs each worker thread is pinned to.
    pub worker_cpu_affinity: Option<CpuAffinity>,
    /// `worker_priority N`: the workers' nice value (-20..20), as NGINX's
    /// worker processes; `None` leaves them at the master's.
    pub worker_priority: Option<i32>,
    /// `worker_shutdown_timeout`: caps a graceful shutdown.
    pub worker_shutdown_timeout: Option<Duration>,
    /// `accept_mutex` (accepted for compatibility; each worker has its own
    /// `SO_REUSEPORT` listener, so there is nothing to serialise).
    pub accept_mutex: bool,
    /// `user NAME [GROUP]`: whom workers run as when started as root.
    pub user: Option<(String, Option<String>)>,
    /// `pid FILE`.
    pub pid: Option<PathBuf>,
    /// `error_log` targets.
    pub error_log: Vec<ErrorLogSpec>,
    /// `thread_pool` declarations (plus the implicit `default` pool when
    /// `aio threads` uses it without declaring it).
    pub thread_pools: Vec<crate::disk::pool::PoolSpec>,
    /// Where `aio on` first appears (`file:line`), if it does: workers
    /// then create their io_uring, and the fallback notice names it.
    pub aio_on_at: Option<String>,
    /// `aio_uring workers=N max_in_flight=M`: the rings' bounds.
    pub aio_uring: crate::disk::uring::UringSpec,
}

/// `listen ... sndbuf=size rcvbuf=size`: `SO_SNDBUF` / `SO_RCVBUF` of the
/// listening socket, which its connections inherit (`None`: the kernel's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SocketBufs {
    /// `sndbuf=`.
    pub sndbuf: Option<usize>,
    /// `rcvbuf=`.
    pub rcvbuf: Option<usize>,
}
