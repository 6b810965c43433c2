//! A worker's QUIC socket shared by the generations whose endpoints read
//! it, so that a reload drains QUIC connections as it drains TCP ones.
//!
//! The master keeps each UDP socket across a reload, and worker i of the
//! new generation gets the same socket as worker i of the old one (the
//! steering program sends a connection's datagrams to the socket its ID
//! names, `runtime/quic_steer.rs`). Two quinn endpoints reading one
//! socket would each take datagrams of the other's connections and answer
//! them with a stateless reset, so only the newest endpoint reads
//! ([`SharedSocket`] is the `AsyncUdpSocket` each endpoint is given) and
//! it hands each datagram of an older generation's connection to that
//! endpoint's inbox: every connection ID an endpoint issues carries, in
//! its second byte, a tag unique among the endpoints on the socket
//! (`endpoint::WorkerCids`; the first byte is the worker's). A datagram
//! whose ID names no older endpoint, and every Initial and 0-RTT packet
//! (whose ID the client chose for a new connection), stays with the
//! newest. When the newest leaves (a graceful stop with no newer
//! generation, or a newer one that failed), the next newest reads again.
//! All this costs the reader nothing while it is alone on its socket.
//!
//! Written by hand: quinn has one endpoint per socket and no hand-over.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::task::{Context, Poll, Waker};

use quinn::udp::{RecvMeta, Transmit, UdpSocketState};
use quinn::{AsyncUdpSocket, UdpPoller};
use tokio::io::Interest;

/// Datagrams at most waiting in an older endpoint's inbox (more are
/// dropped, as a full socket buffer drops them).
const INBOX_MAX: usize = 4096;

/// Length of the connection IDs porter issues (`endpoint::CID_LEN`).
const CID_LEN: usize = 8;

/// One endpoint on a shared socket.
struct Inbox {
    /// The second byte of the connection IDs it issues.
    tag: u8,
    /// Datagrams the reader handed to it.
    queue: Mutex<VecDeque<(Vec<u8>, RecvMeta)>>,
    /// Its receive task, woken by a hand-over or a turn to read.
    waker: Mutex<Option<Waker>>,
    /// It is the newest endpoint: it reads the socket.
    reads: AtomicBool,
}

impl Inbox {
    fn wake(&self) {
        if let Some(w) = self.waker.lock().unwrap_or_else(|e| e.into_inner()).take() {
            w.wake();
        }
    }

    fn push(&self, data: Vec<u8>, meta: RecvMeta) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() < INBOX_MAX {
            q.push_back((data, meta));
        }
        drop(q);
        self.wake();
    }

    /// Moves handed-over datagrams into `bufs`: how many.
    fn take(&self, bufs: &mut [IoSliceMut<'_>], meta: &mut [RecvMeta]) -> usize {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let mut n = 0;
        while n < bufs.len().min(meta.len()) {
            let Some((data, m)) = q.pop_front() else {
                break;
            };
            let len = data.len().min(bufs[n].len());
            bufs[n][..len].copy_from_slice(&data[..len]);
            meta[n] = RecvMeta { len, ..m };
            n += 1;
        }
        n
    }
}

/// The endpoints on one socket, oldest first (the last one reads).
struct Hub {
    members: Mutex<Vec<Arc<Inbox>>>,
    /// More than one member: the reader looks at each datagram's ID.
    routing: AtomicBool,
}

/// The hubs by socket: its address and the worker's index.
type Hubs = HashMap<(SocketAddr, usize), Weak<Hub>>;

static HUBS: LazyLock<Mutex<Hubs>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// A worker's UDP socket as one endpoint sees it.
pub struct SharedSocket {
    io: tokio::net::UdpSocket,
    state: UdpSocketState,
    hub: Arc<Hub>,
    inbox: Arc<Inbox>,
}

impl fmt::Debug for SharedSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedSocket")
            .field("tag", &self.inbox.tag)
            .finish()
    }
}

impl SharedSocket {
    /// Joins the endpoints reading `socket` (worker `worker`'s) as the
    /// newest, which reads from now on: the socket, and the tag its
    /// connection IDs must carry.
    pub fn join(socket: std::net::UdpSocket, worker: usize) -> io::Result<(Arc<SharedSocket>, u8)> {
        let key = (socket.local_addr()?, worker);
        let state = UdpSocketState::new((&socket).into())?;
        let io = tokio::net::UdpSocket::from_std(socket)?;
        let mut hubs = HUBS.lock().unwrap_or_else(|e| e.into_inner());
        hubs.retain(|_, h| h.strong_count() > 0);
        let hub = match hubs.get(&key).and_then(Weak::upgrade) {
            Some(h) => h,
            None => {
                let h = Arc::new(Hub {
                    members: Mutex::new(Vec::new()),
                    routing: AtomicBool::new(false),
                });
                hubs.insert(key, Arc::downgrade(&h));
                h
            }
        };
        drop(hubs);
        let mut members = hub.members.lock().unwrap_or_else(|e| e.into_inner());
        let mut tag = members.last().map_or(0, |m| m.tag.wrapping_add(1));
        while members.iter().any(|m| m.tag == tag) {
            tag = tag.wrapping_add(1);
        }
        if let Some(old) = members.last() {
            old.reads.store(false, Ordering::Release);
        }
        let inbox = Arc::new(Inbox {
            tag,
            queue: Mutex::new(VecDeque::new()),
            waker: Mutex::new(None),
            reads: AtomicBool::new(true),
        });
        members.push(Arc::clone(&inbox));
        hub.routing.store(members.len() > 1, Ordering::Release);
        drop(members);
        let hub = Arc::clone(&hub);
        Ok((
            Arc::new(SharedSocket {
                io,
                state,
                hub,
                inbox,
            }),
            tag,
        ))
    }

    /// Hands the datagrams among the first `n` of `bufs` that belong to
    /// an older endpoint to it and packs the rest at the front: how many
    /// stay.
    fn route(&self, bufs: &mut [IoSliceMut<'_>], meta: &mut [RecvMeta], n: usize) -> usize {
        let members = self.hub.members.lock().unwrap_or_else(|e| e.into_inner());
        // A read begun before a newer endpoint joined: what is nobody
        // else's is the newest's.
        let newest = members.last().filter(|m| !Arc::ptr_eq(m, &self.inbox));
        let mut kept = 0;
        for i in 0..n {
            let len = meta[i].len;
            let owner = tag_of(&bufs[i][..len])
                .and_then(|t| {
                    members
                        .iter()
                        .find(|m| m.tag == t && !Arc::ptr_eq(m, &self.inbox))
                })
                .or(newest);
            match owner {
                Some(m) => m.push(bufs[i][..len].to_vec(), meta[i]),
                None => {
                    if kept != i {
                        let (front, back) = bufs.split_at_mut(i);
                        front[kept][..len].copy_from_slice(&back[0][..len]);
                        meta[kept] = meta[i];
                    }
                    kept += 1;
                }
            }
        }
        kept
    }
}

impl Drop for SharedSocket {
    fn drop(&mut self) {
        let mut members = self.hub.members.lock().unwrap_or_else(|e| e.into_inner());
        members.retain(|m| !Arc::ptr_eq(m, &self.inbox));
        self.hub.routing.store(members.len() > 1, Ordering::Release);
        if let Some(newest) = members.last() {
            if !newest.reads.swap(true, Ordering::AcqRel) {
                newest.wake();
            }
        }
    }
}

/// The tag in the connection ID a datagram is sent to, when that ID may
/// be one porter issued: a short header's, or a long header's other than
/// Initial and 0-RTT (which carry the ID a client chose for a new
/// connection).
fn tag_of(d: &[u8]) -> Option<u8> {
    let first = *d.first()?;
    if first & 0x80 == 0 {
        return d.get(2).copied();
    }
    let kind = (first >> 4) & 0x3;
    if kind < 2 || d.get(5) != Some(&(CID_LEN as u8)) {
        return None;
    }
    d.get(7).copied()
}

/// Waits until the socket can take a datagram.
#[derive(Debug)]
struct Writable(Arc<SharedSocket>);

impl UdpPoller for Writable {
    fn poll_writable(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.io.poll_send_ready(cx)
    }
}

impl AsyncUdpSocket for SharedSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        Box::pin(Writable(self))
    }

    fn try_send(&self, transmit: &Transmit<'_>) -> io::Result<()> {
        self.io.try_io(Interest::WRITABLE, || {
            self.state.send((&self.io).into(), transmit)
        })
    }

    fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        *self.inbox.waker.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
        let n = self.inbox.take(bufs, meta);
        if n > 0 {
            return Poll::Ready(Ok(n));
        }
        if !self.inbox.reads.load(Ordering::Acquire) {
            return Poll::Pending;
        }
        loop {
            std::task::ready!(self.io.poll_recv_ready(cx))?;
            let read = self.io.try_io(Interest::READABLE, || {
                self.state.recv((&self.io).into(), bufs, meta)
            });
            let Ok(n) = read else { continue };
            if !self.hub.routing.load(Ordering::Acquire) {
                return Poll::Ready(Ok(n));
            }
            let kept = self.route(bufs, meta, n);
            if kept > 0 {
                return Poll::Ready(Ok(kept));
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    fn may_fragment(&self) -> bool {
        self.state.may_fragment()
    }

    fn max_transmit_segments(&self) -> usize {
        self.state.max_gso_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.state.gro_segments()
    }
}

#[cfg(test)]
mod tests {
    use super::tag_of;

    #[test]
    fn the_tag_is_read_where_porter_puts_it_and_not_from_a_clients_id() {
        // Short header: flags, then the ID (worker 3, tag 7).
        assert_eq!(tag_of(&[0x40, 3, 7, 1, 2, 3, 4, 5, 6, 9]), Some(7));
        // Handshake (type 2): flags, version, ID length 8, the ID.
        let hs = [0xe0, 0, 0, 0, 1, 8, 3, 7, 1, 2, 3, 4, 5, 6];
        assert_eq!(tag_of(&hs), Some(7));
        // Initial and 0-RTT name an ID the client chose.
        assert_eq!(tag_of(&[0xc0, 0, 0, 0, 1, 8, 3, 7, 1, 2, 3, 4, 5, 6]), None);
        assert_eq!(tag_of(&[0xd0, 0, 0, 0, 1, 8, 3, 7, 1, 2, 3, 4, 5, 6]), None);
        // Another length is not porter's.
        assert_eq!(tag_of(&[0xe0, 0, 0, 0, 1, 4, 3, 7, 1, 2]), None);
        assert_eq!(tag_of(&[]), None);
    }
}
