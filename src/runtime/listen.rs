//! Listening sockets: one `SO_REUSEPORT` socket per worker per address, so
//! the kernel spreads connections across workers with no accept lock.
//!
//! The master owns the sockets and hands each worker generation duplicates.
//! On reload, addresses that stay keep their sockets (and the connections
//! queued in them); only new addresses are bound and vanished ones closed.
//! A `listen ... quic` address gets UDP sockets the same way, one per
//! worker, steered by connection ID (`quic_steer.rs`); a stream
//! server's `listen ... udp` address too, spread by the client's address
//! (the kernel's hash), so each session stays on one worker.
//! A binary upgrade hands them, TCP and UDP, to the new binary (`upgrade.rs`), which
//! starts from them ([`Listeners::inherit`]) instead of binding.
//! A `listen unix:PATH` address has one socket that every worker accepts
//! on (the kernel has no `SO_REUSEPORT` groups for UNIX-domain sockets),
//! as NGINX's: its file is made when it is bound, kept across reloads and
//! removed when a reload drops the address or the server stops (not when a
//! new binary took the socket over).

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::Arc;

use socket2::{Domain, Protocol, Socket, Type};

use crate::config::listen_opts::ListenOpts;
use crate::config::model::SocketBufs;
use crate::config::{Config, ListenGroup};
use crate::util::errno_text;

/// The sockets of every address, indexed by worker.
#[derive(Default)]
pub struct Listeners {
    by_addr: HashMap<SocketAddr, Vec<TcpListener>>,
    /// The UDP sockets of `listen ... quic` and stream `udp` addresses,
    /// by worker.
    udp: HashMap<SocketAddr, Vec<UdpSocket>>,
    /// The sockets of `listen unix:` addresses, by path.
    unix: HashMap<Arc<Path>, UnixListener>,
}

fn socket(addr: SocketAddr, reuseport: bool, opts: &ListenOpts) -> io::Result<Socket> {
    // `multipath`: MPTCP, which falls back to TCP per connection.
    let proto = Protocol::from(if opts.multipath {
        libc::IPPROTO_MPTCP
    } else {
        libc::IPPROTO_TCP
    });
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(proto))?;
    s.set_reuse_address(true)?;
    if reuseport {
        s.set_reuse_port(true)?;
    }
    if addr.is_ipv6() {
        s.set_only_v6(opts.ipv6only)?;
    }
    s.set_nonblocking(true)?;
    s.set_cloexec(true)?;
    Ok(s)
}

fn bind_one(addr: SocketAddr, g: &ListenGroup) -> Result<TcpListener, String> {
    let s = socket(addr, true, &g.opts)
        .map_err(|e| format!("socket() {addr} failed {}", errno_text(&e)))?;
    // Buffers before listen(): accepted connections inherit the sizes.
    set_bufs(&s, addr, g.bufs)?;
    s.bind(&addr.into())
        .map_err(|e| format!("bind() to {addr} failed {}", errno_text(&e)))?;
    s.listen(g.backlog).map_err(|e| {
        format!(
            "listen() to {addr}, backlog {} failed {}",
            g.backlog,
            errno_text(&e)
        )
    })?;
    configure(&s, addr, g, false)?;
    Ok(s.into())
}

fn set_bufs(s: &Socket, addr: SocketAddr, bufs: SocketBufs) -> Result<(), String> {
    let fail = |name: &str, n: usize, e: io::Error| {
        format!("setsockopt({name}, {n}) {addr} failed {}", errno_text(&e))
    };
    if let Some(n) = bufs.sndbuf {
        s.set_send_buffer_size(n)
            .map_err(|e| fail("SO_SNDBUF", n, e))?;
    }
    if let Some(n) = bufs.rcvbuf {
        s.set_recv_buffer_size(n)
            .map_err(|e| fail("SO_RCVBUF", n, e))?;
    }
    Ok(())
}

/// What NGINX's `ngx_configure_listening_sockets` sets after `listen()`,
/// on a new socket and again on one a reload keeps (`kept`: its buffers
/// and backlog are set anew too): `so_keepalive=` (inherited by accepted
/// connections), `fastopen=` and, last, `deferred` (1 second, NGINX's
/// value; 0 takes it off a kept socket).
fn configure(s: &Socket, addr: SocketAddr, g: &ListenGroup, kept: bool) -> Result<(), String> {
    let fail =
        |what: String, e: io::Error| format!("setsockopt({what}) {addr} failed {}", errno_text(&e));
    if kept {
        set_bufs(s, addr, g.bufs)?;
        s.listen(g.backlog).map_err(|e| {
            let e = errno_text(&e);
            format!("listen() to {addr}, backlog {} failed {e}", g.backlog)
        })?;
    }
    if let Some(k) = g.opts.keepalive {
        s.set_keepalive(k.on)
            .map_err(|e| fail("SO_KEEPALIVE".into(), e))?;
        let tunables = [
            (libc::TCP_KEEPIDLE, "TCP_KEEPIDLE", k.idle),
            (libc::TCP_KEEPINTVL, "TCP_KEEPINTVL", k.intvl),
            (libc::TCP_KEEPCNT, "TCP_KEEPCNT", k.cnt),
        ];
        for (opt, name, v) in tunables {
            if let Some(v) = v {
                set_tcp_int(s, opt, v as i32).map_err(|e| fail(format!("{name}, {v}"), e))?;
            }
        }
    }
    if let Some(n) = g.opts.fastopen {
        set_tcp_int(s, libc::TCP_FASTOPEN, n).map_err(|e| fail(format!("TCP_FASTOPEN, {n}"), e))?;
    }
    if g.opts.deferred || kept {
        let v = i32::from(g.opts.deferred);
        set_tcp_int(s, libc::TCP_DEFER_ACCEPT, v)
            .map_err(|e| fail(format!("TCP_DEFER_ACCEPT, {v}"), e))?;
    }
    Ok(())
}

/// An `IPPROTO_TCP` integer option socket2 has no setter for.
fn set_tcp_int(s: &Socket, opt: libc::c_int, v: i32) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid descriptor, a pointer to an int and its size.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            opt,
            (&v as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A UNIX-domain listening socket at `path` (NGINX's messages; a file
/// already there is an error, as NGINX leaves removing it to the user).
fn bind_unix(path: &Path, backlog: i32, bufs: SocketBufs) -> Result<UnixListener, String> {
    let at = format!("unix:{}", path.display());
    let s = Socket::new(Domain::UNIX, Type::STREAM, None)
        .map_err(|e| format!("socket() {at} failed {}", errno_text(&e)))?;
    s.set_nonblocking(true)
        .and_then(|_| s.set_cloexec(true))
        .map_err(|e| format!("socket() {at} failed {}", errno_text(&e)))?;
    if let Some(n) = bufs.sndbuf {
        let _ = s.set_send_buffer_size(n);
    }
    if let Some(n) = bufs.rcvbuf {
        let _ = s.set_recv_buffer_size(n);
    }
    let addr = socket2::SockAddr::unix(path)
        .map_err(|e| format!("bind() to {at} failed {}", errno_text(&e)))?;
    s.bind(&addr)
        .map_err(|e| format!("bind() to {at} failed {}", errno_text(&e)))?;
    // Anyone may connect (workers run as another user), as NGINX's 0666.
    use std::os::unix::fs::PermissionsExt;
    let perm = std::fs::Permissions::from_mode(0o666);
    if let Err(e) = std::fs::set_permissions(path, perm) {
        let _ = std::fs::remove_file(path);
        return Err(format!(
            "chmod() \"{}\" failed {}",
            path.display(),
            errno_text(&e)
        ));
    }
    if let Err(e) = s.listen(backlog) {
        let _ = std::fs::remove_file(path);
        return Err(format!(
            "listen() to {at}, backlog {backlog} failed {}",
            errno_text(&e)
        ));
    }
    Ok(s.into())
}

/// Whether `g` is bound as a TCP address (not UDP, not `unix:`).
fn is_tcp(g: &&ListenGroup) -> bool {
    !g.is_udp() && g.unix.is_none()
}

/// With `SO_REUSEPORT`, a second server of the same user could bind the
/// same port silently; a plain bind first detects "Address already in use"
/// as NGINX users expect.
fn probe_free(addr: SocketAddr, opts: &ListenOpts) -> Result<(), String> {
    let s = socket(addr, false, opts)
        .map_err(|e| format!("socket() {addr} failed {}", errno_text(&e)))?;
    s.bind(&addr.into())
        .map_err(|e| format!("bind() to {addr} failed {}", errno_text(&e)))
}

impl Listeners {
    /// The sockets a binary upgrade passed down, grouped by the address
    /// each is bound to (in the order given: worker 0's first).
    pub fn inherit(sockets: Vec<TcpListener>, udp: Vec<UdpSocket>) -> io::Result<Listeners> {
        let mut by_addr: HashMap<SocketAddr, Vec<TcpListener>> = HashMap::new();
        let mut unix = HashMap::new();
        for l in sockets {
            let named = socket2::SockRef::from(&l).local_addr()?;
            match named.as_pathname() {
                Some(path) if named.is_unix() => {
                    let l = UnixListener::from(std::os::fd::OwnedFd::from(l));
                    unix.insert(Arc::from(path), l);
                }
                _ => by_addr.entry(l.local_addr()?).or_default().push(l),
            }
        }
        let mut by_udp: HashMap<SocketAddr, Vec<UdpSocket>> = HashMap::new();
        for u in udp {
            by_udp.entry(u.local_addr()?).or_default().push(u);
        }
        Ok(Listeners {
            by_addr,
            udp: by_udp,
            unix,
        })
    }

    /// Every listening socket's descriptor, for a binary upgrade.
    pub fn raw_fds(&self) -> Vec<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        let mut addrs: Vec<_> = self.by_addr.keys().collect();
        addrs.sort();
        let mut udp: Vec<_> = self.udp.keys().collect();
        udp.sort();
        let tcp = addrs
            .into_iter()
            .flat_map(|a| self.by_addr[a].iter().map(AsRawFd::as_raw_fd));
        let quic = udp
            .into_iter()
            .flat_map(|a| self.udp[a].iter().map(AsRawFd::as_raw_fd));
        let mut paths: Vec<_> = self.unix.keys().collect();
        paths.sort();
        let unix = paths.into_iter().map(|p| self.unix[p].as_raw_fd());
        tcp.chain(unix).chain(quic).collect()
    }

    /// Makes the socket set match `cfg`, reusing sockets already open.
    /// On error nothing already serving is closed.
    pub fn update(&mut self, cfg: &Config) -> Result<(), String> {
        let workers = cfg.main.worker_processes;
        let mut next: HashMap<SocketAddr, Vec<TcpListener>> = HashMap::new();
        // Bind everything new first, so a failure leaves the old set intact.
        let mut fresh: HashMap<SocketAddr, Vec<TcpListener>> = HashMap::new();
        let udp = self.update_udp(cfg)?;
        for g in cfg.listens.iter().filter(is_tcp) {
            let have = self.by_addr.get(&g.addr).map_or(0, Vec::len);
            if have == 0 {
                probe_free(g.addr, &g.opts)?;
            }
            let mut v = Vec::new();
            for _ in have..workers {
                v.push(bind_one(g.addr, g)?);
            }
            fresh.insert(g.addr, v);
        }
        // Sockets kept take the options as they are now (NGINX's reload).
        for g in cfg.listens.iter().filter(is_tcp) {
            for l in self.by_addr.get(&g.addr).into_iter().flatten() {
                configure(&socket2::SockRef::from(l), g.addr, g, true)?;
            }
        }
        // Last: nothing fails after it, so no file it makes is left behind.
        let unix = self.update_unix(cfg)?;
        for g in cfg.listens.iter().filter(is_tcp) {
            let mut v = self.by_addr.remove(&g.addr).unwrap_or_default();
            v.truncate(workers);
            v.extend(fresh.remove(&g.addr).unwrap_or_default());
            next.insert(g.addr, v);
        }
        // Whatever is left in self.by_addr is no longer configured: closed here.
        self.by_addr = next;
        self.udp = udp;
        self.remove_unix_files();
        self.unix = unix;
        Ok(())
    }

    /// The UNIX-domain sockets `cfg` asks for: those open kept, new ones
    /// bound (their files made). Those no longer asked for stay in
    /// `self.unix` for [`remove_unix_files`](Self::remove_unix_files).
    fn update_unix(&mut self, cfg: &Config) -> Result<HashMap<Arc<Path>, UnixListener>, String> {
        let mut next = HashMap::new();
        let mut made = Vec::new();
        for g in &cfg.listens {
            let Some(path) = &g.unix else { continue };
            if next.contains_key(path) {
                continue;
            }
            let l = match self.unix.remove(path) {
                Some(l) => l,
                None => match bind_unix(path, g.backlog, g.bufs) {
                    Ok(l) => {
                        made.push(path.clone());
                        l
                    }
                    Err(e) => {
                        // Nothing changes: the sockets kept go back, the
                        // files just made go.
                        for (p, l) in next {
                            if made.contains(&p) {
                                drop(l);
                                let _ = std::fs::remove_file(&p);
                            } else {
                                self.unix.insert(p, l);
                            }
                        }
                        return Err(e);
                    }
                },
            };
            next.insert(path.clone(), l);
        }
        Ok(next)
    }

    /// Closes the UNIX-domain sockets and removes their files (the server
    /// stops, or a reload dropped them). Not when a new binary took them.
    pub fn remove_unix_files(&mut self) {
        for (path, l) in self.unix.drain() {
            drop(l);
            let _ = std::fs::remove_file(&path);
        }
    }

    /// The UDP socket set `cfg` asks for: sockets kept in their order
    /// (their index in the `SO_REUSEPORT` group is the worker's), new
    /// ones bound after them, the steering program attached.
    fn update_udp(&mut self, cfg: &Config) -> Result<HashMap<SocketAddr, Vec<UdpSocket>>, String> {
        let workers = cfg.main.worker_processes;
        let mut next = HashMap::new();
        let mut quic = std::collections::HashSet::new();
        for g in cfg.listens.iter().filter(|g| g.is_udp()) {
            if g.quic {
                quic.insert(g.addr);
            }
            let have = self.udp.get(&g.addr).map_or(0, Vec::len);
            if have == 0 {
                super::quic_steer::probe_free_udp(g.addr)?;
            }
            let mut fresh = Vec::new();
            for _ in have..workers {
                fresh.push(super::quic_steer::bind_udp(g.addr, g.bufs)?);
            }
            next.insert(g.addr, fresh);
        }
        let mut out = HashMap::new();
        for (addr, fresh) in next {
            let mut v = self.udp.remove(&addr).unwrap_or_default();
            v.truncate(workers);
            v.extend(fresh);
            // A stream `udp` address keeps the kernel's spread by the
            // client's address: a session's datagrams reach its worker.
            if quic.contains(&addr) {
                super::quic_steer::steer(&v[0], v.len()).map_err(|e| {
                    format!(
                        "setsockopt(SO_ATTACH_REUSEPORT_CBPF) {addr} failed {}",
                        errno_text(&e)
                    )
                })?;
            }
            out.insert(addr, v);
        }
        Ok(out)
    }

    /// Duplicates of worker `idx`'s UDP sockets, with the index of their
    /// `listen ... quic` (or stream `listen ... udp`) address in
    /// `cfg.listens`.
    pub fn udp_for_worker(&self, cfg: &Config, idx: usize) -> io::Result<Vec<(usize, UdpSocket)>> {
        let mut out = Vec::new();
        for (gi, g) in cfg.listens.iter().enumerate().filter(|(_, g)| g.is_udp()) {
            if let Some(s) = self.udp.get(&g.addr).and_then(|v| v.get(idx)) {
                out.push((gi, s.try_clone()?));
            }
        }
        Ok(out)
    }

    /// Duplicates of the `listen unix:` sockets for a worker, with the
    /// index of their address in `cfg.listens`.
    pub fn unix_for_worker(&self, cfg: &Config) -> io::Result<Vec<(usize, UnixListener)>> {
        let mut out = Vec::new();
        for (gi, g) in cfg.listens.iter().enumerate() {
            if let Some(l) = g.unix.as_ref().and_then(|p| self.unix.get(p)) {
                out.push((gi, l.try_clone()?));
            }
        }
        Ok(out)
    }

    /// Duplicates of worker `idx`'s sockets, with the index of their
    /// address in `cfg.listens`.
    pub fn for_worker(&self, cfg: &Config, idx: usize) -> io::Result<Vec<(usize, TcpListener)>> {
        let mut out = Vec::new();
        for (gi, g) in cfg.listens.iter().enumerate().filter(|(_, g)| is_tcp(g)) {
            if let Some(l) = self.by_addr.get(&g.addr).and_then(|v| v.get(idx)) {
                out.push((gi, l.try_clone()?));
            }
        }
        Ok(out)
    }
}
