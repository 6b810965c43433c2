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
//! When the connection may move to kernel TLS afterwards ([`accept`]'s
//! `whole_records`), the handshake reads whole records only (a peek at
//! each record's header, then exactly its length), so nothing the client
//! sent after its `Finished` sits decrypted or half-read in rustls when
//! [`TlsConn::into_ktls`] hands the secrets to the kernel (`ktls.rs`).

use std::cell::{Cell, RefCell};
use std::io::{self, BufRead, IoSlice, Read, Write};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::server::{Acceptor, ClientHello};
use rustls::{ClientConfig, ClientConnection, Connection, ServerConfig};
use tokio::io::Interest;
use tokio::net::TcpStream;

/// The socket as rustls's `Read`/`Write` (non-blocking: `WouldBlock`
/// when empty or full). Writes never raise `SIGPIPE`.
struct Sock<'a>(&'a TcpStream);

impl Read for Sock<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(rustix::io::read(self.0, buf)?)
    }
}

impl Write for Sock<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(rustix::net::send(
            self.0,
            buf,
            rustix::net::SendFlags::NOSIGNAL,
        )?)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let mut control = rustix::net::SendAncillaryBuffer::default();
        Ok(rustix::net::sendmsg(
            self.0,
            bufs,
            &mut control,
            rustix::net::SendFlags::NOSIGNAL,
        )?)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The socket read one TLS record at a time: `left` is what remains of
/// the record being read (0: at a record's start, whose header is peeked
/// first). rustls is never given a byte past the record it asked for.
struct Whole<'a> {
    tcp: &'a TcpStream,
    left: &'a Cell<usize>,
}

impl Read for Whole<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut left = self.left.get();
        if left == 0 {
            let mut h = [0u8; 5];
            let n = rustix::net::recv(self.tcp, &mut h, rustix::net::RecvFlags::PEEK)?.0;
            if n == 0 {
                return Ok(0);
            }
            if n < h.len() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            left = h.len() + usize::from(u16::from_be_bytes([h[3], h[4]]));
        }
        let want = left.min(buf.len());
        let n = rustix::io::read(self.tcp, &mut buf[..want])?;
        if n > 0 {
            self.left.set(left - n);
        }
        Ok(n)
    }
}

/// Reads records from `tcp` into `read`'s rustls side: whole records
/// only when `whole` is given (kTLS may follow), else what is there.
fn read_handshake(
    tcp: &TcpStream,
    whole: Option<&Cell<usize>>,
    read: &mut dyn FnMut(&mut dyn Read) -> io::Result<usize>,
) -> io::Result<usize> {
    match whole {
        Some(left) => tcp.try_io(Interest::READABLE, || read(&mut Whole { tcp, left })),
        None => tcp.try_io(Interest::READABLE, || read(&mut Sock(tcp))),
    }
}

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
}

/// Most plaintext held back for the next write: one full record.
const CORK: usize = 16 * 1024;

/// The largest last piece copied behind the cork rather than passed to
/// rustls beside it (with a head, it stays within [`CORK_KEEP`]).
const JOIN: usize = 1536;

/// A corked buffer larger than this is freed once emptied (an idle
/// connection keeps at most this much).
const CORK_KEEP: usize = 2 * 1024;

/// Reads what the socket has into `read`'s rustls side; `Ok(0)` at EOF.
fn read_records(
    tcp: &TcpStream,
    read: &mut dyn FnMut(&mut Sock<'_>) -> io::Result<usize>,
) -> io::Result<usize> {
    tcp.try_io(Interest::READABLE, || read(&mut Sock(tcp)))
}

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
    let conn = match accepted.into_connection(config) {
        Ok(c) => c,
        Err((e, mut alert)) => {
            let _ = alert.write_all(&mut Sock(tcp));
            return Err(HandshakeError::Tls(e));
        }
    };
    let mut tls = TlsConn::new(conn.into());
    tls.session_id = tls.send_server_hello(tcp).await?;
    tls.finish_handshake(tcp, whole).await?;
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
    tls.finish_handshake(tcp, None).await?;
    Ok(tls)
}

impl TlsConn {
    fn new(conn: Connection) -> TlsConn {
        TlsConn {
            conn: RefCell::new(conn),
            corked: RefCell::new(Vec::new()),
            clean_cut: false,
            session_id: Default::default(),
        }
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

    async fn finish_handshake(
        &self,
        tcp: &TcpStream,
        whole: Option<&Cell<usize>>,
    ) -> Result<(), HandshakeError> {
        loop {
            self.flush(tcp, None).await?;
            let read = {
                let mut c = self.conn.borrow_mut();
                if !c.is_handshaking() {
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
        let mut c = self.conn.borrow_mut();
        loop {
            let space = (buf.capacity() - buf.len()).max(1024);
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

/// Appends up to `space` decrypted bytes to `buf`, as `Reader::read`
/// would (`WouldBlock` when none is at hand, `Ok(0)` after the peer's
/// `close_notify`, `UnexpectedEof` after a bare TCP close), but straight
/// from rustls's buffers: no zero-filling of `buf`'s spare room first
/// (which cost a memset of the whole buffer per read).
fn take_plaintext(c: &mut Connection, buf: &mut Vec<u8>, space: usize) -> io::Result<usize> {
    let mut reader = c.reader();
    let mut n = 0;
    while n < space {
        let chunk = match reader.fill_buf() {
            Ok(chunk) => chunk,
            Err(_) if n > 0 => break,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            break;
        }
        let k = chunk.len().min(space - n);
        buf.extend_from_slice(&chunk[..k]);
        reader.consume(k);
        n += k;
    }
    Ok(n)
}

/// Sends queued records as far as the socket takes them without waiting.
fn flush_now(c: &mut Connection, tcp: &TcpStream) -> io::Result<()> {
    while c.wants_write() {
        tcp.try_io(Interest::WRITABLE, || c.write_tls(&mut Sock(tcp)))?;
    }
    Ok(())
}
