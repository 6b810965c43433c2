//! `listen ... udp` in a stream server: NGINX's UDP sessions, as
//! `ngx_event_recvmsg` makes them. Each worker has its own `SO_REUSEPORT`
//! socket of the address (the kernel spreads datagrams by the client's
//! address and port, so one client's datagrams reach one worker) and
//! reads it here: a datagram from an address bound to a session goes to
//! that session's [`Inbox`]; one from a new address starts a session
//! (`udp_session.rs`) when the worker has a connection for it
//! (`worker_connections`, through [`Connections`]), else it is dropped,
//! as NGINX drops it. A session's answers leave from this socket, to its
//! client's address. A client address is bound to its session until the
//! session ends, or until `proxy_requests` datagrams came: its next one
//! then starts another session. A graceful stop ends the reading (NGINX
//! closes its listening sockets then); the sessions still running end at
//! their next upstream datagram or at their `proxy_timeout`.
//!
//! An inbox holds what its session has not yet sent on, up to
//! `proxy_buffer_size` bytes: a datagram is cut to the room left and one
//! that finds none is dropped, and while the session's
//! `proxy_upload_rate` pauses it every datagram is dropped — NGINX hands
//! a datagram to its session at once, and one the session cannot read
//! then is lost.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::Arc;

use tokio::io::Interest;
use tokio::net::UdpSocket;
use tokio::sync::Notify;

use crate::config::stream::StreamServer;
use crate::log::{ErrorLog, Level};
use crate::util::shutdown::{Mode, ShutdownSignal};

/// The largest UDP payload (NGINX reads into a buffer of this size).
const MAX_DATAGRAM: usize = 65535;

/// The worker's count of its connections, which each UDP session joins
/// as NGINX counts it in `worker_connections`.
pub trait Connections {
    /// Takes a connection for a new session; false when the worker has
    /// none left (the datagram is dropped).
    fn open(&self) -> bool;
    /// Gives a session's connection back.
    fn close(&self);
}

/// A session's connection, given back when dropped.
pub(super) struct Slot(Rc<dyn Connections>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// The datagrams a session has not yet taken.
pub(super) struct Inbox {
    queue: RefCell<VecDeque<Vec<u8>>>,
    /// Bytes the queue may still take (`proxy_buffer_size` less what it
    /// holds and what is not yet sent on).
    room: Cell<usize>,
    /// `proxy_upload_rate` pauses the session: datagrams are dropped.
    pub(super) paused: Cell<bool>,
    /// Datagrams the binding may still take (`proxy_requests`).
    left: Cell<u64>,
    wake: Notify,
}

impl Inbox {
    fn new(room: usize, left: u64) -> Inbox {
        Inbox {
            queue: RefCell::new(VecDeque::new()),
            room: Cell::new(room),
            paused: Cell::new(false),
            left: Cell::new(left),
            wake: Notify::new(),
        }
    }

    /// Queues `data` as NGINX's shared UDP buffer would take it; true
    /// when that was the last the binding takes (`proxy_requests`).
    fn offer(&self, data: &[u8]) -> bool {
        let room = self.room.get();
        if self.paused.get() || room == 0 {
            return false;
        }
        let n = data.len().min(room);
        self.room.set(room - n);
        self.queue.borrow_mut().push_back(data[..n].to_vec());
        self.wake.notify_one();
        self.left.set(self.left.get().saturating_sub(1));
        self.left.get() == 0
    }

    /// The next datagram queued, if any; its room comes back once the
    /// session calls [`done_with`](Self::done_with).
    pub(super) fn take(&self) -> Option<Vec<u8>> {
        self.queue.borrow_mut().pop_front()
    }

    /// A datagram of `n` bytes taken is sent on (or dropped).
    pub(super) fn done_with(&self, n: usize) {
        self.room.set(self.room.get() + n);
    }

    /// Resolves once a datagram was queued since the last call.
    pub(super) async fn arrived(&self) {
        self.wake.notified().await
    }
}

/// A client address bound to its session.
pub(super) struct Binding {
    /// The client's address.
    pub(super) peer: SocketAddr,
    /// The address it sent to (on a wildcard socket, the datagram's
    /// destination: `$server_addr`, and where answers come from).
    pub(super) local: SocketAddr,
    /// The session's number on this listener (a binding released early
    /// may be taken by the next session of the same address).
    pub(super) id: u64,
    /// Where its datagrams go.
    pub(super) inbox: Rc<Inbox>,
}

/// The sessions by client address and the address it sent to: each
/// session's number and inbox.
type Bindings = HashMap<(SocketAddr, SocketAddr), (u64, Rc<Inbox>)>;

/// One worker's socket of a `listen ... udp` address and its sessions.
pub(super) struct Listener {
    /// The socket: read here, answered on by the sessions.
    pub(super) socket: UdpSocket,
    /// Its address (`$server_addr`, `$server_port`).
    local: SocketAddr,
    /// Bound to a wildcard address: each datagram's destination is read
    /// (`udp_pktinfo.rs`).
    wildcard: bool,
    /// The stream server.
    pub(super) srv: Arc<StreamServer>,
    /// The worker's error log.
    pub(super) log: ErrorLog,
    conns: Rc<dyn Connections>,
    /// Sessions by client address and the address it sent to.
    bindings: RefCell<Bindings>,
    next: Cell<u64>,
    /// A graceful stop began: the socket is no longer read.
    pub(super) closing: Cell<bool>,
}

impl Listener {
    /// Ends `b`'s binding if it is still its session's.
    pub(super) fn unbind(&self, b: &Binding) {
        let mut all = self.bindings.borrow_mut();
        if all.get(&(b.peer, b.local)).is_some_and(|(i, _)| *i == b.id) {
            all.remove(&(b.peer, b.local));
        }
    }

    /// The next datagram: its length, its source, its destination.
    async fn recv(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr, SocketAddr)> {
        if !self.wildcard {
            let (n, peer) = self.socket.recv_from(buf).await?;
            return Ok((n, peer, self.local));
        }
        let fd = self.socket.as_raw_fd();
        let read = || super::udp_pktinfo::recv(fd, buf);
        let (n, peer, dst) = self.socket.async_io(Interest::READABLE, read).await?;
        let ip = dst.unwrap_or(self.local.ip());
        Ok((n, peer, SocketAddr::new(ip, self.local.port())))
    }

    /// Sends `data` to `b`'s client, from the address it sent to.
    pub(super) async fn send_to(&self, data: &[u8], b: &Binding) -> io::Result<usize> {
        if !self.wildcard {
            return self.socket.send_to(data, b.peer).await;
        }
        let fd = self.socket.as_raw_fd();
        let send = || super::udp_pktinfo::send(fd, data, b.peer, b.local.ip());
        self.socket.async_io(Interest::WRITABLE, send).await
    }

    /// A datagram from `peer` to `local`: to its session, or the start of
    /// one.
    fn dispatch(self: &Rc<Self>, data: &[u8], peer: SocketAddr, local: SocketAddr) {
        let key = (peer, local);
        let bound = self.bindings.borrow().get(&key).map(|(_, i)| Rc::clone(i));
        match bound {
            // Its `proxy_requests` came: the next datagram starts a session.
            Some(inbox) if inbox.offer(data) => {
                self.bindings.borrow_mut().remove(&key);
            }
            Some(_) => {}
            None => self.start(data, peer, local),
        }
    }

    /// Starts a session with `data` if the worker has room for it (bound
    /// to its addresses unless it takes no other datagram:
    /// `proxy_requests 1`).
    fn start(self: &Rc<Self>, data: &[u8], peer: SocketAddr, local: SocketAddr) {
        if !self.conns.open() {
            return;
        }
        let slot = Slot(Rc::clone(&self.conns));
        let id = self.next.get();
        self.next.set(id + 1);
        let st = &self.srv.s.stream;
        let left = st.requests.checked_sub(1).unwrap_or(u64::MAX);
        let inbox = Rc::new(Inbox::new(st.buffer_size.max(1) as usize, left));
        if left > 0 {
            (self.bindings.borrow_mut()).insert((peer, local), (id, Rc::clone(&inbox)));
        }
        let b = Binding {
            peer,
            local,
            id,
            inbox,
        };
        let session = super::udp_session::run(Rc::clone(self), b, data.to_vec(), slot);
        crate::metrics::timed::spawn(session);
    }
}

/// Reads one worker's socket of a `listen ... udp` address until a
/// graceful stop begins; `log` is the worker's error log, `conns` its
/// connection count.
pub async fn serve(
    socket: std::net::UdpSocket,
    srv: Arc<StreamServer>,
    log: ErrorLog,
    conns: Rc<dyn Connections>,
    mut shutdown: ShutdownSignal,
) {
    let registered = socket
        .local_addr()
        .and_then(|a| Ok((a, UdpSocket::from_std(socket)?)));
    let (local, socket) = match registered {
        Ok(x) => x,
        Err(e) => {
            log.log(Level::Emerg, format_args!("cannot register listener: {e}"));
            return;
        }
    };
    let wildcard = local.ip().is_unspecified();
    if wildcard {
        if let Err(e) = super::udp_pktinfo::enable(socket.as_raw_fd(), local.is_ipv6()) {
            let e = crate::util::errno_text(&e);
            log.log(
                Level::Alert,
                format_args!("setsockopt(IP_PKTINFO) {local} failed {e}"),
            );
        }
    }
    let l = Rc::new(Listener {
        socket,
        local,
        wildcard,
        srv,
        log,
        conns,
        bindings: RefCell::new(HashMap::new()),
        next: Cell::new(0),
        closing: Cell::new(false),
    });
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let stop = shutdown.wait_for(Mode::Graceful);
    tokio::pin!(stop);
    loop {
        let got = tokio::select! {
            r = l.recv(&mut buf) => r,
            _ = &mut stop => break,
        };
        match got {
            Ok((n, peer, to)) => l.dispatch(&buf[..n], peer, to),
            Err(e) => l.log.log(
                Level::Alert,
                format_args!("recvmsg() failed {}", crate::util::errno_text(&e)),
            ),
        }
    }
    l.closing.set(true);
    l.bindings.borrow_mut().clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inbox_cuts_a_datagram_to_its_room_and_drops_one_that_finds_none() {
        let i = Inbox::new(5, u64::MAX);
        assert!(!i.offer(b"abc"));
        i.offer(b"defg");
        i.offer(b"h");
        assert_eq!(i.take().as_deref(), Some(&b"abc"[..]));
        assert_eq!(i.take().as_deref(), Some(&b"de"[..]));
        assert_eq!(i.take(), None);
        i.done_with(5);
        i.paused.set(true);
        i.offer(b"x");
        assert_eq!(i.take(), None);
        i.paused.set(false);
        i.offer(b"");
        assert_eq!(i.take().as_deref(), Some(&b""[..]));
    }

    #[test]
    fn a_binding_ends_with_its_last_request() {
        let i = Inbox::new(100, 2);
        assert!(!i.offer(b"a"));
        assert!(i.offer(b"b"));
    }
}
