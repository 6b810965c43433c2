//! [`Wire`]: one end of a stream session as the relay, `return` and
//! `ssl_preread` read and write it — the client's TCP socket, an
//! upstream's socket (TCP or UNIX), or either with TLS over it
//! (`listen ... ssl`, `proxy_ssl on`; `tls::conn` does the record I/O).
//! The calls never wait; the caller waits on [`Wire::readable`] and
//! [`Wire::writable`]. With TLS a write may leave records queued in
//! rustls once the socket is full: [`Wire::try_flush`] sends them and
//! says whether any are left, so the caller also waits for the socket
//! to take those. Ending the sending side is `close_notify` on TLS (the
//! TLS peer's end of data) and `shutdown(SHUT_WR)` on plain TCP.

use std::io;

use bytes::BufMut;
use tokio::net::TcpStream;

use crate::tls::conn::TlsConn;
use crate::upstream::Socket;

/// One end of a session.
#[derive(Clone, Copy)]
pub enum Wire<'a> {
    /// The client's plain TCP socket.
    Tcp(&'a TcpStream),
    /// A plain upstream socket.
    Sock(&'a Socket),
    /// TLS over a TCP socket (the client's, or an upstream's).
    Tls(&'a TcpStream, &'a TlsConn),
}

impl Wire<'_> {
    /// Appends at most `max` bytes read now to `buf`: `Ok(0)` at the
    /// end (a TCP FIN, or TLS's `close_notify`), `WouldBlock` when none
    /// is there.
    pub fn try_read_into(&self, buf: &mut Vec<u8>, max: usize) -> io::Result<usize> {
        let max = max.max(1);
        match self {
            Wire::Tcp(t) => {
                buf.reserve(max);
                let mut room = buf.limit(max);
                t.try_read_buf(&mut room)
            }
            Wire::Sock(s) => s.try_read_into(buf, max),
            Wire::Tls(t, tls) => tls.try_read_at_most(t, buf, max),
        }
    }

    /// Writes what the socket (or rustls's buffer) takes now.
    pub fn try_write(&self, data: &[u8]) -> io::Result<usize> {
        match self {
            Wire::Tcp(t) => t.try_write(data),
            Wire::Sock(s) => s.try_write(data),
            Wire::Tls(t, tls) => tls.try_write(t, data),
        }
    }

    /// Sends queued TLS records the socket takes now: true when some are
    /// still queued (nothing is ever queued on a plain socket).
    pub fn try_flush(&self) -> io::Result<bool> {
        let Wire::Tls(t, tls) = self else {
            return Ok(false);
        };
        match tls.try_flush(t) {
            Ok(()) => Ok(false),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(true),
            Err(e) => Err(e),
        }
    }

    /// Ends the sending side: `close_notify` on TLS, a TCP half-close on
    /// a plain socket.
    pub fn shut_write(&self) {
        match self {
            Wire::Tcp(t) => {
                let _ = socket2::SockRef::from(*t).shutdown(std::net::Shutdown::Write);
            }
            Wire::Sock(s) => s.shutdown_write(),
            Wire::Tls(t, tls) => tls.close_notify(t),
        }
    }

    /// Ends a TLS session politely as the session closes (NGINX's
    /// `SSL_shutdown`); nothing for a plain socket.
    pub fn close_notify(&self) {
        if let Wire::Tls(t, tls) = self {
            tls.close_notify(t);
        }
    }

    /// Waits until the socket has something to read.
    pub async fn readable(&self) -> io::Result<()> {
        match self {
            Wire::Tcp(t) | Wire::Tls(t, _) => t.readable().await,
            Wire::Sock(s) => s.readable().await,
        }
    }

    /// Waits until the socket takes bytes.
    pub async fn writable(&self) -> io::Result<()> {
        match self {
            Wire::Tcp(t) | Wire::Tls(t, _) => t.writable().await,
            Wire::Sock(s) => s.writable().await,
        }
    }

    /// Writes all of `data` (and every record it makes), each wait for
    /// the socket bounded by `timeout`.
    pub async fn write_all(&self, mut data: &[u8], timeout: std::time::Duration) -> io::Result<()> {
        let timed_out = || io::Error::from_raw_os_error(libc::ETIMEDOUT);
        loop {
            let r = if data.is_empty() {
                match self.try_flush()? {
                    false => return Ok(()),
                    true => Err(io::ErrorKind::WouldBlock.into()),
                }
            } else {
                self.try_write(data)
            };
            match r {
                Ok(n) => data = &data[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    match tokio::time::timeout(timeout, self.writable()).await {
                        Ok(r) => r?,
                        Err(_) => return Err(timed_out()),
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}
