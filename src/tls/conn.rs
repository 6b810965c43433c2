//! One TLS connection driven over the worker's non-blocking socket:
//! rustls's `Acceptor` reads the ClientHello (so the caller can choose the
//! server block by SNI before any certificate is picked), then
//! `ServerConnection` encrypts and decrypts in memory while this file
//! moves records with `recv`/`sendmsg` on the `TcpStream` — the same
//! readiness calls (`try_io`, `readable`, `writable`) the plain path uses.
//! tokio-rustls would own the stream and need `&mut` for every call; the
//! connection loop lends `&TcpStream` to its reader and writer at once, so
//! the rustls state sits in a `RefCell`, never borrowed across an await.
//!
//! The same record I/O serves porter's own connections to upstreams
//! (`proxy_pass https://`): [`connect`] runs a client handshake, and the
//! connection is then read and written like an accepted one.
//!
//! With early data (`ssl_early_data on`, a resumed TLS 1.3 session) the
//! handshake returns once the client's early data is at hand, before its
//! `Finished`: reads take that data first and the handshake finishes as
//! later records are read, as NGINX reads `SSL_read_early_data` and
//! serves the request; [`TlsConn::handshaking`] tells the requests read
//! meanwhile apart (`$ssl_early_data`).
//!
//! When the connection may move to kernel TLS afterwards ([`accept`]'s
//! `whole_records`), the handshake reads whole records only (a peek at
//! each record's header, then exactly its length), so nothing the client
//! sent after its `Finished` sits decrypted or half-read in rustls when
//! [`TlsConn::into_ktls`] hands the secrets to the kernel (`ktls.rs`).

use std::cell::{Cell, RefCell};
use std::io::{self, IoSlice, Write};

use super::sock::{collect_early, flush_now, read_handshake, read_records, take_plaintext, Sock};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::server::{Acceptor, ClientHello};
use rustls::{ClientConfig, ClientConnection, Connection, ServerConfig};
use tokio::io::Interest;
use tokio::net::TcpStream;

/// What became of [`TlsConn::into_ktls`].
pub enum Ktls {
    /// The kernel encrypts and decrypts the connection's records now.
    On,
    /// Not switched (nothing given up): user-space TLS goes on.
    Stay(Box<TlsConn>),
    /// rustls gave its secrets up and the kernel refused them: the
    /// connection cannot go on.
    Failed(io::Error),
}

/// What the ClientHello asked for, as the server block is chosen.
pub struct Hello<'a> {
    /// The SNI name, if sent.
    pub server_name: Option<&'a str>,
    /// The client offers ALPN `acme-tls/1`: an ACME issuer validating
    /// TLS-ALPN-01 (RFC 8737).
    pub acme_tls: bool,
}

/// Why a handshake ended without a connection.
#[derive(Debug)]
pub enum HandshakeError {
    /// The client closed or reset the connection.
    Closed,
    /// The socket failed.
    Io(io::Error),
    /// The peer broke the protocol (or offered nothing in common).
    Tls(rustls::Error),
    /// The chosen server has `ssl_reject_handshake on`: the client got
    /// the alert `unrecognized_name`.
    Rejected,
}

/// Why the caller's `pick` gave no configuration for a ClientHello.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refuse {
    /// No server on the address has a certificate.
    NoCertificate,
    /// The chosen server has `ssl_reject_handshake on`.
    Reject,
}

/// A fatal `unrecognized_name` alert (112) in a TLS 1.2-versioned record,
/// as OpenSSL sends from NGINX's SNI callback for `ssl_reject_handshake`.
const UNRECOGNIZED_NAME: [u8; 7] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 112];

impl std::fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HandshakeError::Closed => f.write_str("peer closed connection in SSL handshake"),
            HandshakeError::Io(e) => write!(f, "SSL_do_handshake() failed ({e})"),
            HandshakeError::Tls(e) => write!(f, "SSL_do_handshake() failed ({e})"),
            HandshakeError::Rejected => f.write_str("handshake rejected"),
        }
    }
}

impl From<io::Error> for HandshakeError {
    fn from(e: io::Error) -> HandshakeError {
        HandshakeError::Io(e)
    }
}

/// A TLS connection after its handshake: a client's connection to
/// porter, or porter's to an upstream.
pub struct TlsConn {
    conn: RefCell<Connection>,
    /// Plaintext written with `more` and not yet encrypted (at most
    /// [`CORK`] bytes): it goes into the same record as what follows, so
    /// a small response (head and body) is one record, one seal, one
    /// `sendmsg`, as NGINX's `ssl_buffer_size` buffer makes it.
    corked: RefCell<Vec<u8>>,
    /// The handshake read whole records only and ended at a record's
    /// end: rustls holds no byte the kernel would need (kTLS possible).
    clean_cut: bool,
    /// The session's ID, for `$ssl_session_id` (`session_id.rs`).
    session_id: super::session_id::SessionId,
    /// Early data read and not yet taken by [`TlsConn::try_read`].
    early: RefCell<Vec<u8>>,
    /// Served from early data: true until the handshake finishes.
    handshaking: Option<Arc<AtomicBool>>,
}

/// Most plaintext held back for the next write: one full record.
const CORK: usize = 16 * 1024;

/// The largest last piece copied behind the cork rather than passed to
/// rustls beside it (with a head, it stays within [`CORK_KEEP`]).
const JOIN: usize = 1536;

/// A corked buffer larger than this is freed once emptied (an idle
/// connection keeps at most this much).
const CORK_KEEP: usize = 2 * 1024;

/// Runs the handshake on `tcp`: reads the ClientHello, asks `pick` for the
/// configuration (the server block's, chosen by SNI; or why there is
/// none: no certificate, or `ssl_reject_handshake`), and completes the
/// handshake. The caller bounds it with `ssl_handshake_timeout`.
/// With `whole_records` the handshake reads whole records only, so the
/// connection may then move to kTLS ([`TlsConn::into_ktls`]).
pub async fn accept(
    tcp: &TcpStream,
    pick: impl FnOnce(&Hello<'_>) -> Result<Arc<ServerConfig>, Refuse>,
    whole_records: bool,
) -> Result<TlsConn, HandshakeError> {
    let left = Cell::new(0);
    let whole = whole_records.then_some(&left);
    let mut acceptor = Acceptor::default();
    let accepted = loop {
        match read_handshake(tcp, whole, &mut |s| acceptor.read_tls(s)) {
            Ok(0) => return Err(HandshakeError::Closed),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                tcp.readable().await?;
                continue;
            }
            Err(e) => return Err(e.into()),
        }
        match acceptor.accept() {
            Ok(Some(a)) => break a,
            Ok(None) => {}
            Err((e, mut alert)) => {
                let _ = alert.write_all(&mut Sock(tcp));
                return Err(HandshakeError::Tls(e));
            }
        }
    };
    let config = {
        let hello: ClientHello<'_> = accepted.client_hello();
        let acme_tls = hello
            .alpn()
            .is_some_and(|mut p| p.any(|p| p == b"acme-tls/1"));
        pick(&Hello {
            server_name: hello.server_name(),
            acme_tls,
        })
    };
    let config = match config {
        Ok(c) => c,
        Err(Refuse::Reject) => {
            let _ = Sock(tcp).write_all(&UNRECOGNIZED_NAME);
            return Err(HandshakeError::Rejected);
        }
        Err(Refuse::NoCertificate) => {
            return Err(HandshakeError::Tls(rustls::Error::General(
                "no \"ssl_certificate\" is defined in server listening on SSL port".into(),
            )))
        }
    };
    let takes_early = config.max_early_data_size > 0;
    let conn = match accepted.into_connection(config) {
        Ok(c) => c,
        Err((e, mut alert)) => {
            let _ = alert.write_all(&mut Sock(tcp));
            return Err(HandshakeError::Tls(e));
        }
    };
    let mut tls = TlsConn::new(conn.into());
    tls.session_id = tls.send_server_hello(tcp).await?;
    tls.finish_handshake(tcp, whole, takes_early).await?;
    if tls.conn.borrow().is_handshaking() {
        tls.handshaking = Some(Arc::new(AtomicBool::new(true)));
    }
    tls.clean_cut = whole_records && left.get() == 0;
    if tls.protocol() == "TLSv1.3" {
        tls.session_id = super::session_id::random();
    }
    Ok(tls)
}

/// Runs a client handshake on `tcp` (an upstream's socket) for `name`
/// (the certificate is checked against it when `config` verifies, and it
/// goes out as SNI when `config` enables it). The caller bounds it with
/// `proxy_connect_timeout`.
pub async fn connect(
    tcp: &TcpStream,
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
) -> Result<TlsConn, HandshakeError> {
    let conn = ClientConnection::new(config, name).map_err(HandshakeError::Tls)?;
    let tls = TlsConn::new(conn.into());
    tls.finish_handshake(tcp, None, false).await?;
    Ok(tls)
}

impl TlsConn {
    fn new(conn: Connection) -> TlsConn {
        TlsConn {
            conn: RefCell::new(conn),
            corked: RefCell::new(Vec::new()),
            clean_cut: false,
            session_id: Default::default(),
            early: RefCell::new(Vec::new()),
            handshaking: None,
        }
    }

    /// Served from early data: a flag that stays true until the
    /// handshake finishes (`None`: the handshake finished before any
    /// request was read).
    pub fn handshaking(&self) -> Option<Arc<AtomicBool>> {
        self.handshaking.clone()
    }

    /// After records were processed: the early data they held kept, and
    /// the end of the handshake noted.
    fn after_records(&self, c: &mut Connection) {
        if let Some(flag) = &self.handshaking {
            collect_early(c, &mut self.early.borrow_mut());
            if !c.is_handshaking() {
                flag.store(false, Ordering::Release);
            }
        }
    }

    /// Moves early data kept into `buf`: how many bytes (0: none kept).
    fn take_early(&self, buf: &mut Vec<u8>) -> usize {
        let mut early = self.early.borrow_mut();
        let n = early.len();
        buf.extend_from_slice(&early);
        early.clear();
        n
    }

    /// Sends the start of the server's first flight, keeping the session
    /// ID its ServerHello carries.
    async fn send_server_hello(&self, tcp: &TcpStream) -> io::Result<super::session_id::SessionId> {
        use super::session_id::{self, Tee, HELLO_PREFIX};
        let mut seen = Vec::new();
        loop {
            let r = {
                let mut c = self.conn.borrow_mut();
                if !c.wants_write() || seen.len() >= HELLO_PREFIX {
                    break;
                }
                tcp.try_io(Interest::WRITABLE, || {
                    c.write_tls(&mut Tee::new(&mut Sock(tcp), &mut seen))
                })
            };
            match r {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => tcp.writable().await?,
                Err(e) => return Err(e),
            }
        }
        Ok(session_id::from_server_hello(&seen))
    }

    /// `$ssl_session_id`: the session's ID.
    pub fn session_id(&self) -> super::session_id::SessionId {
        self.session_id
    }

    /// Completes the handshake; with `early` (the configuration takes
    /// early data) it ends as soon as early data is at hand, the rest of
    /// the handshake left to later reads.
    async fn finish_handshake(
        &self,
        tcp: &TcpStream,
        whole: Option<&Cell<usize>>,
        early: bool,
    ) -> Result<(), HandshakeError> {
        loop {
            self.flush(tcp, None).await?;
            let read = {
                let mut c = self.conn.borrow_mut();
                if !c.is_handshaking() {
                    break;
                }
                if early && self.early_at_hand(&mut c, tcp)? {
                    break;
                }
                match read_handshake(tcp, whole, &mut |s| c.read_tls(s)) {
                    Ok(0) => return Err(HandshakeError::Closed),
                    Ok(_) => {
                        if let Err(e) = c.process_new_packets() {
                            let _ = c.write_tls(&mut Sock(tcp));
                            return Err(HandshakeError::Tls(e));
                        }
                        true
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
                    Err(e) => return Err(e.into()),
                }
            };
            if !read {
                tcp.readable().await?;
            }
        }
        // The server's last flight and its session tickets.
        self.flush(tcp, None).await?;
        Ok(())
    }

    /// Processes the records already read (the ClientHello's read may
    /// have brought early data with it) and keeps their early data:
    /// whether some is at hand while the handshake goes on.
    fn early_at_hand(&self, c: &mut Connection, tcp: &TcpStream) -> Result<bool, HandshakeError> {
        if let Err(e) = c.process_new_packets() {
            let _ = c.write_tls(&mut Sock(tcp));
            return Err(HandshakeError::Tls(e));
        }
        let mut early = self.early.borrow_mut();
        collect_early(c, &mut early);
        Ok(!early.is_empty() && c.is_handshaking())
    }

    /// `TLSv1.2` or `TLSv1.3` (`$ssl_protocol`).
    pub fn protocol(&self) -> &'static str {
        match self.conn.borrow().protocol_version() {
            Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3",
            Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2",
            _ => "",
        }
    }

    /// The negotiated suite, as OpenSSL names it (`$ssl_cipher`).
    pub fn cipher(&self) -> &'static str {
        match self.conn.borrow().negotiated_cipher_suite() {
            Some(s) => super::ciphers::openssl_name(s.suite()),
            None => "",
        }
    }

    /// The key-exchange group, as OpenSSL names it (`$ssl_curve`).
    pub fn curve(&self) -> &'static str {
        let c = self.conn.borrow();
        c.negotiated_key_exchange_group()
            .map_or("", |g| super::groups::openssl_name(g.name()))
    }

    /// The SNI name the client sent (`$ssl_server_name`).
    pub fn server_name(&self) -> Option<String> {
        match &*self.conn.borrow() {
            Connection::Server(c) => c.server_name().map(str::to_string),
            Connection::Client(_) => None,
        }
    }

    /// The certificate chain the client sent, if any.
    pub fn peer_certificates(&self) -> Option<Vec<rustls::pki_types::CertificateDer<'static>>> {
        self.conn
            .borrow()
            .peer_certificates()
            .map(|c| c.iter().map(|d| d.clone().into_owned()).collect())
    }

    /// Whether the session was resumed (`$ssl_session_reused`).
    pub fn resumed(&self) -> bool {
        matches!(
            self.conn.borrow().handshake_kind(),
            Some(rustls::HandshakeKind::Resumed)
        )
    }

    /// Decrypted bytes (or the peer's close) already at hand, without
    /// touching the socket.
    pub fn has_plaintext(&self) -> bool {
        if !self.early.borrow().is_empty() {
            return true;
        }
        match self.conn.borrow_mut().process_new_packets() {
            Ok(s) => s.plaintext_bytes_to_read() > 0 || s.peer_has_closed(),
            Err(_) => true,
        }
    }

    /// One attempt to append decrypted bytes to `buf` (up to its spare
    /// capacity): `Ok(0)` when the peer closed, `WouldBlock` when the
    /// socket has nothing more. Records read along the way that call for
    /// an answer (alerts, key updates) are answered without waiting.
    pub fn try_read(&self, tcp: &TcpStream, buf: &mut Vec<u8>) -> io::Result<usize> {
        let space = (buf.capacity() - buf.len()).max(1024);
        self.try_read_at_most(tcp, buf, space)
    }

    /// [`TlsConn::try_read`] appending at most `space` bytes (early data
    /// aside), for a reader that paces what it takes (the stream relay's
    /// `proxy_upload_rate`).
    pub fn try_read_at_most(
        &self,
        tcp: &TcpStream,
        buf: &mut Vec<u8>,
        space: usize,
    ) -> io::Result<usize> {
        let mut c = self.conn.borrow_mut();
        loop {
            if self.handshaking.is_some() {
                let n = self.take_early(buf);
                if n > 0 {
                    return Ok(n);
                }
            }
            match take_plaintext(&mut c, buf, space) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // Closed without close_notify: an end all the same.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            match read_records(tcp, &mut |s| c.read_tls(s)) {
                Ok(0) => return Ok(0),
                Ok(_) => {
                    let state = c.process_new_packets();
                    let _ = flush_now(&mut c, tcp);
                    self.after_records(&mut c);
                    if let Err(e) = state {
                        return Err(io::Error::new(io::ErrorKind::InvalidData, e));
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Appends decrypted bytes to `buf`, waiting for the socket.
    pub async fn read(&self, tcp: &TcpStream, buf: &mut Vec<u8>) -> io::Result<usize> {
        loop {
            match self.try_read(tcp, buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => tcp.readable().await?,
                r => return r,
            }
        }
    }

    /// Encrypts all of `data` and sends it. With `more` (a body follows)
    /// up to one record's worth of plaintext is held back to share a
    /// record with what follows, and records stay queued while rustls's
    /// buffer (64 KiB) has room, so a head and the start of its body leave
    /// as one record in one write, as `MSG_MORE` does on plain
    /// connections. Each wait for the socket is bounded by `timeout`
    /// (`send_timeout`).
    pub async fn write_all(
        &self,
        tcp: &TcpStream,
        mut data: &[u8],
        more: bool,
        timeout: Duration,
    ) -> io::Result<()> {
        {
            // A small last piece joins the cork too: rustls then gets one
            // slice (for two it builds a list of them on the heap).
            let mut corked = self.corked.borrow_mut();
            let join = more || (!corked.is_empty() && data.len() <= JOIN);
            if join && corked.len() + data.len() <= CORK {
                corked.extend_from_slice(data);
                if more {
                    return Ok(());
                }
                data = &[];
            }
        }
        loop {
            data = &data[self.seal(data)?..];
            if data.is_empty() && more {
                return Ok(());
            }
            self.flush(tcp, Some(timeout)).await?;
            if data.is_empty() {
                return Ok(());
            }
        }
    }

    /// Encrypts the corked plaintext, then as much of `data` as rustls's
    /// buffer takes, in as few records as they fill: the bytes of `data`
    /// taken (the cork is emptied first).
    fn seal(&self, data: &[u8]) -> io::Result<usize> {
        let mut c = self.conn.borrow_mut();
        let mut corked = self.corked.borrow_mut();
        let mut taken = 0;
        while !corked.is_empty() || taken < data.len() {
            let n = if corked.is_empty() {
                c.writer().write(&data[taken..])?
            } else if taken == data.len() {
                c.writer().write(&corked)?
            } else {
                let bufs = [IoSlice::new(&corked), IoSlice::new(&data[taken..])];
                c.writer().write_vectored(&bufs)?
            };
            if n == 0 {
                break;
            }
            let from_cork = n.min(corked.len());
            corked.drain(..from_cork);
            taken += n - from_cork;
        }
        if corked.is_empty() && corked.capacity() > CORK_KEEP {
            *corked = Vec::new();
        }
        Ok(taken)
    }

    /// Sends every queued record, waiting for the socket (at most
    /// `timeout` per wait, when given).
    pub async fn flush(&self, tcp: &TcpStream, timeout: Option<Duration>) -> io::Result<()> {
        loop {
            self.seal(&[])?;
            let r = {
                let mut c = self.conn.borrow_mut();
                if !c.wants_write() {
                    return Ok(());
                }
                tcp.try_io(Interest::WRITABLE, || c.write_tls(&mut Sock(tcp)))
            };
            match r {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => match timeout {
                    Some(t) => match tokio::time::timeout(t, tcp.writable()).await {
                        Ok(r) => r?,
                        Err(_) => return Err(io::Error::from_raw_os_error(libc::ETIMEDOUT)),
                    },
                    None => tcp.writable().await?,
                },
                Err(e) => return Err(e),
            }
        }
    }

    /// Moves the connection's record layer into the kernel (`ktls.rs`):
    /// both directions' keys, as rustls exports them, go to `TLS_TX` and
    /// `TLS_RX` on `tcp`. Only after a handshake that read whole records
    /// and left nothing queued or buffered, with a cipher `support` says
    /// the kernel takes, and once the `tls` ULP is attached; otherwise the
    /// connection stays in user space untouched.
    pub fn into_ktls(self, tcp: &TcpStream, support: &super::ktls::Support) -> Ktls {
        use super::ktls;
        let version = {
            let mut c = self.conn.borrow_mut();
            let settled = self.clean_cut
                && self.corked.borrow().is_empty()
                && !c.is_handshaking()
                && !c.wants_write()
                && matches!(
                    c.process_new_packets(),
                    Ok(s) if s.plaintext_bytes_to_read() == 0 && !s.peer_has_closed()
                );
            let cipher = c.negotiated_cipher_suite().and_then(ktls::Cipher::of_suite);
            match (settled, cipher, c.protocol_version()) {
                (true, Some(cipher), Some(v)) if support.takes(cipher) => Some(v),
                _ => None,
            }
        };
        let Some(version) = version else {
            return Ktls::Stay(Box::new(self));
        };
        let fd = std::os::fd::AsRawFd::as_raw_fd(tcp);
        if ktls::set_ulp(fd).is_err() {
            return Ktls::Stay(Box::new(self));
        }
        let secrets = match self.conn.into_inner().dangerous_extract_secrets() {
            Ok(s) => s,
            Err(e) => return Ktls::Failed(io::Error::other(e)),
        };
        let secrets = ktls::Secrets {
            version,
            tx: secrets.tx,
            rx: secrets.rx,
        };
        match ktls::install(fd, &secrets) {
            Ok(()) => Ktls::On,
            Err(e) => Ktls::Failed(e),
        }
    }

    /// Whether ALPN settled on HTTP/2 (`h2`).
    pub fn alpn_h2(&self) -> bool {
        self.conn.borrow().alpn_protocol() == Some(b"h2")
    }

    /// ALPN settled on `acme-tls/1`: a TLS-ALPN-01 validation, over once
    /// the handshake is (RFC 8737 §3).
    pub fn alpn_acme_tls(&self) -> bool {
        self.conn.borrow().alpn_protocol() == Some(b"acme-tls/1")
    }

    /// Encrypts as much of `data` as rustls's buffer takes and sends what
    /// the socket takes now, without waiting (for a poll-based writer,
    /// HTTP/2): the bytes taken, or `WouldBlock` when neither the buffer
    /// nor the socket has room.
    pub fn try_write(&self, tcp: &TcpStream, data: &[u8]) -> io::Result<usize> {
        self.seal(&[])?;
        if !self.corked.borrow().is_empty() {
            // rustls's buffer is full: what was corked goes first.
            flush_now(&mut self.conn.borrow_mut(), tcp)?;
            self.seal(&[])?;
            if !self.corked.borrow().is_empty() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
        }
        let mut c = self.conn.borrow_mut();
        let mut n = c.writer().write(data)?;
        if n == 0 {
            flush_now(&mut c, tcp)?;
            n = c.writer().write(data)?;
        }
        match flush_now(&mut c, tcp) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && n > 0 => Ok(n),
            Err(e) => Err(e),
            Ok(()) if n == 0 && !data.is_empty() => Err(io::ErrorKind::WouldBlock.into()),
            Ok(()) => Ok(n),
        }
    }

    /// Sends every queued record the socket takes now: `WouldBlock` while
    /// some remain.
    pub fn try_flush(&self, tcp: &TcpStream) -> io::Result<()> {
        self.seal(&[])?;
        flush_now(&mut self.conn.borrow_mut(), tcp)
    }

    /// Queues `close_notify` and sends what the socket takes now.
    pub fn close_notify(&self, tcp: &TcpStream) {
        let _ = self.seal(&[]);
        let mut c = self.conn.borrow_mut();
        c.send_close_notify();
        let _ = flush_now(&mut c, tcp);
    }
}
