//! One UDP session of a stream server (NGINX's stream proxy over
//! `SOCK_DGRAM`, 1.22): the phases of a TCP session (`limit_conn`, `set`,
//! `allow`/`deny`; `ssl_preread` reads no datagram, as NGINX's), then
//! `return` (one datagram) or `proxy_pass`: a UDP socket connected to a
//! peer of the group, the client's datagrams sent on one by one and the
//! peer's sent back from the listening address. How it ends, as NGINX's:
//! - done once `proxy_responses` datagrams came back for each client
//!   datagram (after `proxy_requests` datagrams when that is set;
//!   `proxy_responses 0`: once the first is sent);
//! - `proxy_requests N`: after N client datagrams the client's address is
//!   no longer bound to the session (its next datagram starts another);
//! - `proxy_timeout` with no datagram either way: 200 when the responses
//!   expected came (or none were set), else 502, "upstream timed out";
//! - only a failed `connect()` tries the next peer: a peer that does not
//!   answer, or answers ICMP port unreachable, is no reason to; an error
//!   on its socket counts as the peer's failure (`max_fails`) when the
//!   session ends. An error reading from it counts as an empty answer (an
//!   empty datagram goes back) and ends the reading; an error sending to
//!   it ends the session (200);
//! - once a graceful stop began, at its next upstream datagram
//!   ("disconnected on shutdown", 200) or its timeout.
//!
//! `proxy_upload_rate` drops the client's datagrams while it pauses;
//! `proxy_download_rate` leaves the peer's queued in its socket. The idle
//! timer stops while either pauses.

use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::Interest;
use tokio::net::UdpSocket;
use tokio::time::sleep_until;

use super::proxy;
use super::session::{Session, Try};
use super::udp::{Binding, Listener, Slot};
use crate::config::stream::StreamServer;
use crate::http::context::ConnInfo;
use crate::log::{ErrorLog, Level};
use crate::upstream::balance::{PeerRef, UpstreamGroup};
use crate::upstream::{ConnectOptions, PeerAddr};
use crate::vars::template::VarSource;

/// What a session waits for on its peer's socket: a datagram, or an
/// error (ICMP port unreachable) that a read then returns.
const READ: Interest = Interest::READABLE.add(Interest::ERROR);

/// Runs the session that `first` from `b.peer` started; `_slot` is its
/// place in `worker_connections`, held to the end.
pub(super) async fn run(l: Rc<Listener>, b: Binding, first: Vec<u8>, _slot: Slot) {
    let srv = Arc::clone(&l.srv);
    let elog = srv.s.error_log.clone().unwrap_or_else(|| l.log.clone());
    let id = crate::http::context::next_conn_id();
    let mut s = Session::new(ConnInfo::accepted(id, b.peer, b.local));
    s.udp = true;
    s.received.set(first.len() as u64);
    let (_held, go) = super::preaccess(&s, &srv, &elog);
    if go {
        match &srv.ret {
            Some(t) => {
                let v = t.render(&s);
                if l.send_to(v.as_bytes(), &b).await.is_ok() {
                    s.sent.set(v.len() as u64);
                }
            }
            None => proxy_session(&l, &b, &s, &elog, first).await,
        }
    }
    l.unbind(&b);
    s.ended.set(Some(Instant::now()));
    for log in srv.s.access_log.iter() {
        log.write(&s, None);
    }
}

/// The peer a session sends to.
struct Upstream {
    socket: UdpSocket,
    group: Arc<UpstreamGroup>,
    peer: PeerRef,
    began: Instant,
}

/// A UDP socket connected to `addr` (bound first for `proxy_bind`).
fn udp_connect(addr: &PeerAddr, opts: &ConnectOptions) -> io::Result<UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let PeerAddr::Inet(peer) = addr else {
        // A UNIX-domain peer of a UDP session: no datagram socket here.
        return Err(io::Error::from_raw_os_error(libc::EPROTOTYPE));
    };
    let s = Socket::new(Domain::for_address(*peer), Type::DGRAM, Some(Protocol::UDP))?;
    s.set_nonblocking(true)?;
    s.set_cloexec(true)?;
    if let Some((local, transparent)) = opts.bind {
        if transparent {
            match local {
                std::net::SocketAddr::V4(_) => s.set_ip_transparent_v4(true)?,
                std::net::SocketAddr::V6(_) => s.set_ip_transparent_v6(true)?,
            }
        }
        s.bind(&local.into())?;
    }
    s.connect(&(*peer).into())?;
    UdpSocket::from_std(s.into())
}

/// A peer of the session's `proxy_pass`, trying the next only when
/// `connect()` fails, as `proxy_next_upstream*` allow; on failure the
/// status is set (502, or 500 for a name or address that cannot be used).
async fn connect(s: &Session, srv: &StreamServer, elog: &ErrorLog) -> Option<Upstream> {
    let st = &srv.s.stream;
    let g = match proxy::group(s, srv, srv.pass.as_ref()?, elog).await {
        Ok(g) => g,
        Err(code) => {
            s.status.set(code);
            return None;
        }
    };
    let key = g.hash.as_ref().map(|h| h.key.render(s as &dyn VarSource));
    let mut sel = g.selection(key);
    let started = Instant::now();
    let mut tries = 0u64;
    loop {
        let Some(peer) = g.select(&mut sel) else {
            let what = format_args!("no live upstreams while connecting to upstream");
            proxy::log(elog, s, Level::Error, what, "");
            let addr = g.name.clone();
            s.tries.borrow_mut().push(Try {
                addr,
                ..Try::default()
            });
            s.status.set(502);
            return None;
        };
        tries += 1;
        let addr = g.peer(peer).addr.to_string();
        s.tries.borrow_mut().push(Try {
            addr: addr.clone(),
            ..Try::default()
        });
        let opts = match proxy::connect_options(s, srv) {
            Ok(o) => o,
            Err(v) => {
                g.release(peer, false);
                let what = format_args!("invalid local address \"{v}\"");
                proxy::log(elog, s, Level::Error, what, "");
                s.status.set(500);
                return None;
            }
        };
        let began = Instant::now();
        match udp_connect(&g.peer(peer).addr, &opts) {
            Ok(socket) => {
                if let Some(t) = s.tries.borrow_mut().last_mut() {
                    t.connect = Some(began.elapsed());
                }
                let group = Arc::clone(&g);
                return Some(Upstream {
                    socket,
                    group,
                    peer,
                    began,
                });
            }
            Err(e) => {
                g.release(peer, true);
                let e = crate::util::errno_text(&e);
                let what = format_args!("connect() failed {e} while connecting to upstream");
                proxy::log(elog, s, Level::Error, what, &addr);
            }
        }
        let out_of_tries = (st.next_upstream_tries != 0 && tries >= st.next_upstream_tries)
            || tries >= g.peer_count() as u64;
        let out_of_time =
            !st.next_upstream_timeout.is_zero() && started.elapsed() >= st.next_upstream_timeout;
        if !st.next_upstream || out_of_tries || out_of_time {
            s.status.set(502);
            return None;
        }
    }
}

/// `proxy_pass` over UDP: a peer, the datagrams both ways, the try
/// recorded and the peer's outcome given to its group.
async fn proxy_session(l: &Listener, b: &Binding, s: &Session, elog: &ErrorLog, first: Vec<u8>) {
    let Some(up) = connect(s, &l.srv, elog).await else {
        return;
    };
    let st = &l.srv.s.stream;
    let mut r = Relay {
        l,
        b,
        s,
        elog,
        up: &up,
        requests: 1,
        responses: 0,
        to_upstream: 0,
        from_upstream: 0,
        first_byte: None,
        failed: false,
        read_failed: false,
        upload: Pace::new(super::rate(s, &st.upload_rate)),
        download: Pace::new(super::rate(s, &st.download_rate)),
        buf: vec![0u8; st.buffer_size.max(1) as usize],
    };
    r.upload.read = first.len() as u64;
    r.run(first).await;
    let (first_byte, failed) = (r.first_byte, r.failed);
    if let Some(t) = s.tries.borrow_mut().last_mut() {
        t.first_byte = first_byte.map(|f| f.duration_since(up.began));
        t.session = Some(up.began.elapsed());
    }
    up.group.release(up.peer, failed);
}

/// NGINX's pacing of one direction by its rate: at most `rate × (seconds
/// since the start + 1)` bytes read, and a pause of `n / rate` seconds
/// after each read of `n`.
struct Pace {
    rate: u64,
    began: Instant,
    read: u64,
    /// A pause runs until then.
    resume: Option<tokio::time::Instant>,
}

impl Pace {
    fn new(rate: u64) -> Pace {
        Pace {
            rate,
            began: Instant::now(),
            read: 0,
            resume: None,
        }
    }

    /// Whether a datagram may be read now (when the allowance is spent,
    /// a pause starts).
    fn may_read(&mut self) -> bool {
        if self.resume.is_some() {
            return false;
        }
        if self.rate == 0 {
            return true;
        }
        let secs = self.began.elapsed().as_secs() + 1;
        let limit = (self.rate * secs) as i64 - self.read as i64;
        if limit <= 0 {
            let ms = (-limit) as u64 * 1000 / self.rate + 1;
            self.resume = Some(tokio::time::Instant::now() + Duration::from_millis(ms));
            return false;
        }
        true
    }

    fn after_read(&mut self, n: usize) {
        self.read += n as u64;
        if let Some(ms) = (n as u64 * 1000).checked_div(self.rate) {
            if ms > 0 {
                self.resume = Some(tokio::time::Instant::now() + Duration::from_millis(ms));
            }
        }
    }
}

/// How the relay ended.
enum End {
    /// The responses expected came ("udp done").
    Done,
    /// An error sending to the peer.
    SendFailed,
    /// A graceful stop, at an upstream datagram.
    Shutdown,
    /// `proxy_timeout` with no datagram either way.
    TimedOut,
}

/// The datagrams of a proxied session.
struct Relay<'a> {
    l: &'a Listener,
    b: &'a Binding,
    s: &'a Session,
    elog: &'a ErrorLog,
    up: &'a Upstream,
    /// Datagrams read from the client (the first included).
    requests: u64,
    /// Datagrams read from the peer (a read error counts as one).
    responses: u64,
    to_upstream: u64,
    from_upstream: u64,
    first_byte: Option<Instant>,
    /// An error on the peer's socket: the peer failed.
    failed: bool,
    /// An error reading from the peer: no more reads.
    read_failed: bool,
    upload: Pace,
    download: Pace,
    /// One datagram from the peer (`proxy_buffer_size`, as NGINX's).
    buf: Vec<u8>,
}

impl Relay<'_> {
    /// Sends the first datagram (after a PROXY header of `proxy_protocol
    /// on`, a datagram of its own), relays to the end, says how it ended.
    async fn run(&mut self, first: Vec<u8>) {
        let st = &self.l.srv.s.stream;
        let mut sent = true;
        if st.proxy_protocol {
            let c = &self.s.conn;
            let line = crate::http::proxy_protocol::v1_line(c.peer, c.local);
            sent = self.send_up(line.as_bytes()).await;
        }
        let end = if sent && self.send_up(&first).await {
            self.relay().await
        } else {
            End::SendFailed
        };
        self.end(end);
    }

    async fn relay(&mut self) -> End {
        let timeout = self.l.srv.s.stream.timeout;
        let (up, b): (&Upstream, &Binding) = (self.up, self.b);
        let inbox = &b.inbox;
        let mut deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.finished() {
                return End::Done;
            }
            let far = tokio::time::Instant::now() + Duration::from_secs(86400);
            let (ur, dr) = (self.upload.resume, self.download.resume);
            tokio::select! {
                _ = inbox.arrived() => {
                    if !self.client_datagrams().await {
                        return End::SendFailed;
                    }
                }
                // An ICMP error (port unreachable) is error readiness,
                // not readable: waited for too, as NGINX's epoll sees it.
                r = up.socket.ready(READ), if !self.read_failed && dr.is_none() => {
                    if let Ok(ready) = r {
                        if let Some(end) = self.upstream_datagrams(ready.is_error()).await {
                            return end;
                        }
                    }
                }
                _ = sleep_until(ur.unwrap_or(far)), if ur.is_some() => {
                    self.upload.resume = None;
                    inbox.paused.set(false);
                }
                _ = sleep_until(dr.unwrap_or(far)), if dr.is_some() => self.download.resume = None,
                // The idle timer stops while either side pauses.
                _ = sleep_until(deadline), if ur.is_none() && dr.is_none() => return End::TimedOut,
            }
            deadline = tokio::time::Instant::now() + timeout;
        }
    }

    /// NGINX's end of a UDP session: the requests of `proxy_requests`
    /// came, and `proxy_responses` answers to each.
    fn finished(&self) -> bool {
        let st = &self.l.srv.s.stream;
        if st.requests != 0 && self.requests < st.requests {
            return false;
        }
        st.responses != u64::MAX && self.responses >= st.responses.saturating_mul(self.requests)
    }

    /// The client's datagrams queued, sent on unless pacing drops them;
    /// false when sending failed.
    async fn client_datagrams(&mut self) -> bool {
        let b: &Binding = self.b;
        let inbox = &b.inbox;
        while let Some(d) = inbox.take() {
            let n = d.len();
            inbox.done_with(n);
            if !self.upload.may_read() {
                continue;
            }
            self.upload.after_read(n);
            self.requests += 1;
            self.s.received.set(self.s.received.get() + n as u64);
            if !self.send_up(&d).await {
                return false;
            }
        }
        inbox.paused.set(self.upload.resume.is_some());
        true
    }

    /// The peer's datagrams waiting, sent back unless pacing holds them;
    /// with `error`, the error its socket reported first, taken as a read
    /// would return it (a read does not look at error readiness).
    async fn upstream_datagrams(&mut self, mut error: bool) -> Option<End> {
        loop {
            if self.l.closing.get() {
                return Some(End::Shutdown);
            }
            if !self.download.may_read() {
                return None;
            }
            let pending = match std::mem::take(&mut error) {
                true => self.up.socket.take_error().ok().flatten(),
                false => None,
            };
            let got = match pending {
                Some(e) => Err(e),
                None => self.up.socket.try_recv(&mut self.buf),
            };
            match got {
                Ok(n) => {
                    self.first_byte.get_or_insert_with(Instant::now);
                    self.download.after_read(n);
                    self.responses += 1;
                    self.from_upstream += n as u64;
                    self.to_client(n).await;
                    if self.finished() {
                        return Some(End::Done);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.failed = true;
                    self.read_failed = true;
                    self.error(&e, "recv() failed", "reading from upstream");
                    // An answer of nothing, as NGINX's (an empty datagram).
                    self.responses += 1;
                    self.to_client(0).await;
                    return None;
                }
            }
        }
    }

    /// Sends `n` bytes of the peer's datagram to the client (waiting for
    /// room in the socket's buffer, as NGINX keeps what it could not send).
    async fn to_client(&self, n: usize) {
        if let Ok(k) = self.l.send_to(&self.buf[..n], self.b).await {
            self.s.sent.set(self.s.sent.get() + k as u64);
        }
    }

    /// Sends a datagram to the peer; false on an error.
    async fn send_up(&mut self, d: &[u8]) -> bool {
        match self.up.socket.send(d).await {
            Ok(n) => {
                self.to_upstream += n as u64;
                true
            }
            Err(e) => {
                self.failed = true;
                self.error(&e, "sendmsg() failed", "sending to upstream");
                false
            }
        }
    }

    /// The try's figures as they stand (for a log line's context and
    /// `$upstream_bytes_*`).
    fn sync_try(&self) {
        if let Some(t) = self.s.tries.borrow_mut().last_mut() {
            t.sent = self.to_upstream;
            t.received = self.from_upstream;
        }
    }

    fn error(&self, e: &io::Error, what: &str, action: &str) {
        self.sync_try();
        let addr = self.up.group.peer(self.up.peer).addr.to_string();
        let msg = format_args!(
            "{what} {} while proxying and {action}",
            crate::util::errno_text(e)
        );
        proxy::log(self.elog, self.s, Level::Error, msg, &addr);
    }

    /// Logs how the relay ended, as NGINX does, and sets the status.
    fn end(&mut self, end: End) {
        self.sync_try();
        let s = self.s;
        let st = &self.l.srv.s.stream;
        let what = match end {
            End::Done => "udp done",
            End::SendFailed => return,
            End::Shutdown => {
                let msg = format_args!("disconnected on shutdown");
                self.elog.log_conn(Level::Info, Some(s.conn.id), msg, "");
                return;
            }
            End::TimedOut
                if st.responses == u64::MAX
                    || self.responses >= st.responses.saturating_mul(self.requests) =>
            {
                "udp timed out"
            }
            End::TimedOut => {
                let addr = self.up.group.peer(self.up.peer).addr.to_string();
                let msg = format_args!(
                    "upstream timed out (110: Connection timed out) while proxying connection"
                );
                proxy::log(self.elog, s, Level::Error, msg, &addr);
                self.failed = true;
                s.status.set(502);
                return;
            }
        };
        let msg = format_args!(
            "{what}, packets from/to client:{}/{}, bytes from/to client:{}/{}, \
             bytes from/to upstream:{}/{}",
            self.requests,
            self.responses,
            s.received.get(),
            s.sent.get(),
            self.from_upstream,
            self.to_upstream
        );
        self.elog.log_conn(Level::Info, Some(s.conn.id), msg, "");
    }
}
