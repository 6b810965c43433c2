//! Per-worker pools of idle keep-alive connections to upstream peers
//! (NGINX's `ngx_http_upstream_keepalive_module`): `keepalive N` keeps at
//! most N idle connections per group in each worker, the most recently
//! used first, dropping the oldest when full.
//!
//! A worker is one thread with one event loop, so its pool is a
//! thread-local and needs no lock. An idle connection is dropped when it
//! has waited `keepalive_timeout`, when it served `keepalive_requests`
//! requests, or when the peer closed it or sent something unasked: each
//! put and take sweeps the expired ones, and a take checks the socket with
//! a non-blocking read before handing it out.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

/// An upstream connection and what it has served.
#[derive(Debug)]
pub struct UpstreamConn {
    /// The socket.
    pub stream: TcpStream,
    /// The peer address.
    pub addr: SocketAddr,
    /// Requests sent on it so far.
    pub requests: u64,
    /// It came out of the keep-alive pool (a failure before the first
    /// response byte is then retried on a fresh connection).
    pub reused: bool,
}

struct Idle {
    conn: UpstreamConn,
    since: Instant,
}

thread_local! {
    static POOLS: RefCell<HashMap<u64, VecDeque<Idle>>> = RefCell::new(HashMap::new());
}

fn sweep(q: &mut VecDeque<Idle>, timeout: Duration) {
    let now = Instant::now();
    q.retain(|i| now.duration_since(i.since) < timeout);
}

/// An idle connection to `addr` from group `group`'s pool, if a live one
/// is there.
pub fn take(group: u64, addr: SocketAddr, timeout: Duration) -> Option<UpstreamConn> {
    POOLS.with(|p| {
        let mut pools = p.borrow_mut();
        let q = pools.get_mut(&group)?;
        sweep(q, timeout);
        while let Some(pos) = q.iter().rposition(|i| i.conn.addr == addr) {
            let mut idle = q.remove(pos).expect("position is in range");
            let mut probe = [0u8; 1];
            match idle.conn.stream.try_read(&mut probe) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    idle.conn.reused = true;
                    return Some(idle.conn);
                }
                // Closed by the peer, or it sent bytes nobody asked for.
                _ => continue,
            }
        }
        None
    })
}

/// Returns a connection whose response was read completely to group
/// `group`'s pool of at most `max` idle connections.
pub fn put(group: u64, max: usize, timeout: Duration, conn: UpstreamConn) {
    if max == 0 {
        return;
    }
    POOLS.with(|p| {
        let mut pools = p.borrow_mut();
        let q = pools.entry(group).or_default();
        sweep(q, timeout);
        while q.len() >= max {
            q.pop_front();
        }
        q.push_back(Idle {
            conn,
            since: Instant::now(),
        });
    })
}

/// Idle connections in group `group`'s pool on this worker (for tests).
pub fn idle_count(group: u64) -> usize {
    POOLS.with(|p| p.borrow().get(&group).map_or(0, VecDeque::len))
}
