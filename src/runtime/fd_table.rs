//! The process's descriptor table, grown once at start.
//!
//! Linux grows a process's descriptor table when a new descriptor does not
//! fit, and waits for an RCU grace period to free the old one
//! (`expand_files` → `synchronize_rcu`): milliseconds to tens of
//! milliseconds asleep, on whichever thread made the descriptor — an event
//! loop accepting a connection or duplicating a socket for a pool thread.
//! Sampled in bench S1 (workers' kernel wait channels every 2 ms), these
//! were the only waits of porter's loops outside `epoll_wait`. The table
//! never shrinks, so the master grows it once, before any loop runs, to
//! what the workers may hold: a connection, an upstream connection and a
//! socket lent to a pool thread per `worker_connections`, plus files.

use std::io;

/// The largest table grown ahead: 1 Mi descriptors (8 MiB of pointers).
const CAP: u64 = 1 << 20;

/// Grows the table to hold `want` descriptors (at most the soft
/// `RLIMIT_NOFILE` and [`CAP`]); returns the size asked for.
pub fn grow(want: u64) -> io::Result<u64> {
    let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(CAP);
    let top = want.min(soft).min(CAP);
    if top < 2 {
        return Ok(top);
    }
    let null = std::fs::File::open("/dev/null")?;
    // The lowest free descriptor at or above `top - 1`: the table now
    // reaches it; closing it leaves the table as it is.
    let high = rustix::io::fcntl_dupfd_cloexec(&null, (top - 1) as i32)?;
    drop(high);
    Ok(top)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_grown_table_holds_a_descriptor_at_its_top() {
        let top = super::grow(4096).unwrap();
        assert!(top >= 2);
        // the table already reaches `top - 1`: a dup there needs no growth
        let null = std::fs::File::open("/dev/null").unwrap();
        let fd = rustix::io::fcntl_dupfd_cloexec(&null, (top - 1) as i32).unwrap();
        use std::os::fd::AsRawFd;
        assert!(fd.as_raw_fd() as u64 >= top - 1);
    }
}
