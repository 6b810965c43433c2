//! Per-worker pools of idle keep-alive connections to upstream peers
//! (NGINX's `ngx_http_upstream_keepalive_module`): `keepalive N` keeps at
//! most N idle connections per group in each worker, the most recently
//! used first, dropping the oldest when full.
//!
//! A worker is one thread with one event loop, so its pool is a
//! thread-local and needs no lock. Each idle connection has a small watcher
//! task on the worker's loop that closes it as soon as the peer closes it
//! (or sends something unasked) or `keepalive_timeout` passes; a take
//! stops the watcher. A take also checks the socket with a non-blocking
//! read before handing it out, for a close the watcher has not seen yet.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::io;
use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::{PeerAddr, UpStream};
use crate::h1::stream::{PeerFuture, TunnelPeer};

/// An upstream connection and what it has served.
#[derive(Debug)]
pub struct UpstreamConn {
    /// The socket (shared with the idle watcher while pooled).
    pub stream: Rc<UpStream>,
    /// The peer address.
    pub addr: PeerAddr,
    /// Requests sent on it so far.
    pub requests: u64,
    /// When it was opened (`keepalive_time` bounds its life in the pool).
    pub opened: Instant,
    /// It came out of the keep-alive pool (a failure before the first
    /// response byte is then retried on a fresh connection).
    pub reused: bool,
    /// The PROXY header it began with (`proxy_protocol on`): it is reused
    /// only for a request whose header would be the same, so an upstream
    /// never sees one client's request under another's address.
    pub proxy_header: Option<String>,
}

struct Idle {
    conn: UpstreamConn,
    since: Instant,
    serial: u64,
    /// Tells the watcher the connection left the pool.
    gone: Rc<Notify>,
}

impl Drop for Idle {
    fn drop(&mut self) {
        self.gone.notify_one();
    }
}

thread_local! {
    static POOLS: RefCell<HashMap<u64, VecDeque<Idle>>> = RefCell::new(HashMap::new());
    static SERIAL: Cell<u64> = const { Cell::new(0) };
}

fn sweep(q: &mut VecDeque<Idle>, timeout: Duration) {
    let now = Instant::now();
    q.retain(|i| now.duration_since(i.since) < timeout);
}

fn is_pooled(group: u64, serial: u64) -> bool {
    POOLS.with(|p| {
        p.borrow()
            .get(&group)
            .is_some_and(|q| q.iter().any(|i| i.serial == serial))
    })
}

/// Drops the idle connection `serial` of `group`, if still pooled.
fn remove(group: u64, serial: u64) {
    // Taken out first, dropped after the borrow ends.
    let gone = POOLS.with(|p| {
        let mut pools = p.borrow_mut();
        let q = pools.get_mut(&group)?;
        let pos = q.iter().position(|i| i.serial == serial)?;
        q.remove(pos)
    });
    drop(gone);
}

/// An idle connection to `addr` from group `group`'s pool that began
/// with the PROXY header `proxy_header` (or none), if a live one is there.
pub fn take(
    group: u64,
    addr: &PeerAddr,
    timeout: Duration,
    proxy_header: Option<&str>,
) -> Option<UpstreamConn> {
    POOLS.with(|p| {
        let mut pools = p.borrow_mut();
        let q = pools.get_mut(&group)?;
        sweep(q, timeout);
        let fits =
            |i: &Idle| &i.conn.addr == addr && i.conn.proxy_header.as_deref() == proxy_header;
        while let Some(pos) = q.iter().rposition(fits) {
            let idle = q.remove(pos).expect("position is in range");
            // Closed by the peer, or it sent bytes nobody asked for: skip.
            if idle.conn.stream.idle_ok() {
                let mut conn = take_conn(idle);
                conn.reused = true;
                return Some(conn);
            }
        }
        None
    })
}

/// The connection out of an idle entry (whose drop stops the watcher).
fn take_conn(idle: Idle) -> UpstreamConn {
    let placeholder_addr = idle.conn.addr.clone();
    let mut idle = idle;
    let stream = Rc::clone(&idle.conn.stream);
    let conn = std::mem::replace(
        &mut idle.conn,
        UpstreamConn {
            stream,
            addr: placeholder_addr,
            requests: 0,
            opened: Instant::now(),
            reused: false,
            proxy_header: None,
        },
    );
    drop(idle);
    conn
}

/// Returns a connection whose response was read completely to group
/// `group`'s pool of at most `max` idle connections. Must run on a
/// worker's event loop (it starts the connection's watcher there).
pub fn put(group: u64, max: usize, timeout: Duration, conn: UpstreamConn) {
    if max == 0 {
        return;
    }
    let serial = SERIAL.with(|s| {
        s.set(s.get() + 1);
        s.get()
    });
    let gone = Rc::new(Notify::new());
    let stream = Rc::clone(&conn.stream);
    let evicted = POOLS.with(|p| {
        let mut pools = p.borrow_mut();
        let q = pools.entry(group).or_default();
        let mut evicted = Vec::new();
        let now = Instant::now();
        while let Some(pos) = q
            .iter()
            .position(|i| now.duration_since(i.since) >= timeout)
        {
            evicted.extend(q.remove(pos));
        }
        while q.len() >= max {
            evicted.extend(q.pop_front());
        }
        q.push_back(Idle {
            conn,
            since: now,
            serial,
            gone: Rc::clone(&gone),
        });
        evicted
    });
    drop(evicted);
    crate::metrics::timed::spawn(async move {
        let expire = tokio::time::sleep(timeout);
        tokio::pin!(expire);
        loop {
            tokio::select! {
                _ = gone.notified() => return,
                _ = &mut expire => return remove(group, serial),
                r = stream.readable() => {
                    // Taken meanwhile: the bytes are the new owner's.
                    if r.is_err() || !is_pooled(group, serial) {
                        return remove(group, serial);
                    }
                    // Readable while idle: the peer closed it or sent
                    // something nobody asked for; a stale readiness (or
                    // a TLS session ticket) is cleared by the WouldBlock.
                    if !stream.idle_ok() {
                        return remove(group, serial);
                    }
                }
            }
        }
    });
}

/// Idle connections in group `group`'s pool on this worker (for tests).
pub fn idle_count(group: u64) -> usize {
    POOLS.with(|p| p.borrow().get(&group).map_or(0, VecDeque::len))
}

/// An upgraded connection is the upstream's side of the client's tunnel
/// (`http::tunnel`); it is never pooled again.
impl TunnelPeer for UpstreamConn {
    fn try_read(&self, buf: &mut Vec<u8>, max: usize) -> io::Result<usize> {
        self.stream.try_read(buf, max)
    }

    fn readable(&self) -> PeerFuture<'_, ()> {
        Box::pin(self.stream.readable())
    }

    fn write<'a>(&'a self, data: &'a [u8], timeout: Duration) -> PeerFuture<'a, ()> {
        Box::pin(self.stream.write_all(data, timeout))
    }

    fn shutdown_write(&self) {
        self.stream.shutdown_write();
    }
}
