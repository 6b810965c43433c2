//! Listening sockets: one `SO_REUSEPORT` socket per worker per address, so
//! the kernel spreads connections across workers with no accept lock.
//!
//! The master owns the sockets and hands each worker generation duplicates.
//! On reload, addresses that stay keep their sockets (and the connections
//! queued in them); only new addresses are bound and vanished ones closed.
//! A binary upgrade hands them to the new binary (`upgrade.rs`), which
//! starts from them ([`Listeners::inherit`]) instead of binding.

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, TcpListener};

use socket2::{Domain, Protocol, Socket, Type};

use crate::config::model::SocketBufs;
use crate::config::Config;
use crate::util::errno_text;

/// The sockets of every address, indexed by worker.
#[derive(Default)]
pub struct Listeners {
    by_addr: HashMap<SocketAddr, Vec<TcpListener>>,
}

fn socket(addr: SocketAddr, reuseport: bool) -> io::Result<Socket> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    if reuseport {
        s.set_reuse_port(true)?;
    }
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    s.set_nonblocking(true)?;
    s.set_cloexec(true)?;
    Ok(s)
}

fn bind_one(addr: SocketAddr, backlog: i32, bufs: SocketBufs) -> Result<TcpListener, String> {
    let s = socket(addr, true).map_err(|e| format!("socket() {addr} failed {}", errno_text(&e)))?;
    // Set before listen(): accepted connections inherit the sizes.
    if let Some(n) = bufs.sndbuf {
        s.set_send_buffer_size(n).map_err(|e| {
            format!(
                "setsockopt(SO_SNDBUF, {n}) {addr} failed {}",
                errno_text(&e)
            )
        })?;
    }
    if let Some(n) = bufs.rcvbuf {
        s.set_recv_buffer_size(n).map_err(|e| {
            format!(
                "setsockopt(SO_RCVBUF, {n}) {addr} failed {}",
                errno_text(&e)
            )
        })?;
    }
    s.bind(&addr.into())
        .map_err(|e| format!("bind() to {addr} failed {}", errno_text(&e)))?;
    s.listen(backlog).map_err(|e| {
        format!(
            "listen() to {addr}, backlog {backlog} failed {}",
            errno_text(&e)
        )
    })?;
    Ok(s.into())
}

/// With `SO_REUSEPORT`, a second server of the same user could bind the
/// same port silently; a plain bind first detects "Address already in use"
/// as NGINX users expect.
fn probe_free(addr: SocketAddr) -> Result<(), String> {
    let s =
        socket(addr, false).map_err(|e| format!("socket() {addr} failed {}", errno_text(&e)))?;
    s.bind(&addr.into())
        .map_err(|e| format!("bind() to {addr} failed {}", errno_text(&e)))
}

impl Listeners {
    /// The sockets a binary upgrade passed down, grouped by the address
    /// each is bound to (in the order given: worker 0's first).
    pub fn inherit(sockets: Vec<TcpListener>) -> io::Result<Listeners> {
        let mut by_addr: HashMap<SocketAddr, Vec<TcpListener>> = HashMap::new();
        for l in sockets {
            by_addr.entry(l.local_addr()?).or_default().push(l);
        }
        Ok(Listeners { by_addr })
    }

    /// Every listening socket's descriptor, for a binary upgrade.
    pub fn raw_fds(&self) -> Vec<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        let mut addrs: Vec<_> = self.by_addr.keys().collect();
        addrs.sort();
        addrs
            .into_iter()
            .flat_map(|a| self.by_addr[a].iter().map(AsRawFd::as_raw_fd))
            .collect()
    }

    /// Makes the socket set match `cfg`, reusing sockets already open.
    /// On error nothing already serving is closed.
    pub fn update(&mut self, cfg: &Config) -> Result<(), String> {
        let workers = cfg.main.worker_processes;
        let mut next: HashMap<SocketAddr, Vec<TcpListener>> = HashMap::new();
        // Bind everything new first, so a failure leaves the old set intact.
        let mut fresh: HashMap<SocketAddr, Vec<TcpListener>> = HashMap::new();
        for g in &cfg.listens {
            let have = self.by_addr.get(&g.addr).map_or(0, Vec::len);
            if have == 0 {
                probe_free(g.addr)?;
            }
            let mut v = Vec::new();
            for _ in have..workers {
                v.push(bind_one(g.addr, g.backlog, g.bufs)?);
            }
            fresh.insert(g.addr, v);
        }
        for g in &cfg.listens {
            let mut v = self.by_addr.remove(&g.addr).unwrap_or_default();
            v.truncate(workers);
            v.extend(fresh.remove(&g.addr).unwrap_or_default());
            next.insert(g.addr, v);
        }
        // Whatever is left in self.by_addr is no longer configured: closed here.
        self.by_addr = next;
        Ok(())
    }

    /// Duplicates of worker `idx`'s sockets, with the index of their
    /// address in `cfg.listens`.
    pub fn for_worker(&self, cfg: &Config, idx: usize) -> io::Result<Vec<(usize, TcpListener)>> {
        let mut out = Vec::new();
        for (gi, g) in cfg.listens.iter().enumerate() {
            if let Some(l) = self.by_addr.get(&g.addr).and_then(|v| v.get(idx)) {
                out.push((gi, l.try_clone()?));
            }
        }
        Ok(out)
    }
}
