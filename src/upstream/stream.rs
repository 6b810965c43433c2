//! The socket to an upstream: plain TCP or a unix socket, or TLS over TCP
//! (`proxy_pass https://`). Both are read and written through the same
//! calls, each wait bounded by the caller's timeout, so the proxy, the
//! body stream and the keep-alive pool need not know which it is.

use std::io;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::net::TcpStream;

use super::addr::Socket;
use crate::tls::conn::TlsConn;

/// A connection to an upstream peer.
pub struct UpStream {
    sock: Socket,
    /// Boxed: rustls's connection is 1.2 KiB, and a plain connection
    /// (most of them, pooled or tunnelled for hours) need not carry it.
    tls: Option<Box<TlsConn>>,
}

impl std::fmt::Debug for UpStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpStream")
            .field("sock", &self.sock)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

fn timed_out() -> io::Error {
    io::Error::from_raw_os_error(libc::ETIMEDOUT)
}

impl UpStream {
    /// A plain connection.
    pub fn plain(sock: Socket) -> UpStream {
        UpStream { sock, tls: None }
    }

    /// A connection whose TLS handshake is done.
    pub fn tls(tcp: TcpStream, tls: TlsConn) -> UpStream {
        UpStream {
            sock: Socket::Tcp(tcp),
            tls: Some(Box::new(tls)),
        }
    }

    /// The TLS session and its TCP socket, for a TLS connection.
    fn tls_parts(&self) -> Option<(&TlsConn, &TcpStream)> {
        match (&self.tls, &self.sock) {
            (Some(t), Socket::Tcp(tcp)) => Some((t, tcp)),
            _ => None,
        }
    }

    /// Whether it speaks TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Writes all of `data`, each wait bounded by `timeout`.
    pub async fn write_all(&self, mut data: &[u8], timeout: Duration) -> io::Result<()> {
        if let Some((t, tcp)) = self.tls_parts() {
            return t.write_all(tcp, data, false, timeout).await;
        }
        while !data.is_empty() {
            match self.sock.try_write(data) {
                Ok(n) => data = &data[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    match tokio::time::timeout(timeout, self.sock.writable()).await {
                        Ok(r) => r?,
                        Err(_) => return Err(timed_out()),
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reads what is available into `buf` (at most `max` more bytes),
    /// waiting at most `timeout`; `Ok(0)` when the upstream closed.
    /// Cancel-safe: `buf` only grows by bytes actually read.
    pub async fn read_some(
        &self,
        buf: &mut Vec<u8>,
        max: usize,
        timeout: Duration,
    ) -> io::Result<usize> {
        loop {
            let r = self.try_read(buf, max);
            match r {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    match tokio::time::timeout(timeout, self.sock.readable()).await {
                        Ok(r) => r?,
                        Err(_) => return Err(timed_out()),
                    }
                }
                r => return r,
            }
        }
    }

    /// One read without waiting: appends at most `max` bytes to `buf`
    /// (`WouldBlock` when nothing is there).
    pub fn try_read(&self, buf: &mut Vec<u8>, max: usize) -> io::Result<usize> {
        if let Some((t, tcp)) = self.tls_parts() {
            // Decrypted bytes go into spare capacity; bound it by `max`.
            let mut part = Vec::with_capacity(max);
            let n = t.try_read(tcp, &mut part)?;
            buf.extend_from_slice(&part);
            return Ok(n);
        }
        self.sock.try_read_into(buf, max)
    }

    /// Poll-based read (for `h2`'s `AsyncRead`): appends at most `max`
    /// bytes to `buf`, `Ok(0)` at the end.
    pub fn poll_read(
        &self,
        cx: &mut Context<'_>,
        buf: &mut Vec<u8>,
        max: usize,
    ) -> Poll<io::Result<usize>> {
        loop {
            match self.try_read(buf, max) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if self.tls.as_ref().is_some_and(|t| t.has_plaintext()) {
                        continue;
                    }
                    ready!(self.sock.poll_read_ready(cx))?;
                }
                r => return Poll::Ready(r),
            }
        }
    }

    /// Poll-based write (for `h2`'s `AsyncWrite`): the bytes taken.
    pub fn poll_write(&self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        loop {
            let r = match self.tls_parts() {
                Some((t, tcp)) => t.try_write(tcp, data),
                None => self.sock.try_write(data),
            };
            match r {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(self.sock.poll_write_ready(cx))?
                }
                r => return Poll::Ready(r),
            }
        }
    }

    /// Poll-based flush: every TLS record queued goes out (nothing to do
    /// for a plain socket).
    pub fn poll_flush(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some((t, tcp)) = self.tls_parts() else {
            return Poll::Ready(Ok(()));
        };
        loop {
            match t.try_flush(tcp) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(self.sock.poll_write_ready(cx))?
                }
                r => return Poll::Ready(r),
            }
        }
    }

    /// Waits until the socket has something to read (or an error).
    pub async fn readable(&self) -> io::Result<()> {
        self.sock.readable().await
    }

    /// Whether an idle connection can still carry a request: nothing
    /// arrived but what TLS itself sends (a session ticket), and the peer
    /// has not closed it.
    pub fn idle_ok(&self) -> bool {
        let mut probe = Vec::with_capacity(1);
        matches!(
            self.try_read(&mut probe, 1),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock
        )
    }

    /// Ends the sending side: TLS's `close_notify`, then the half-close
    /// (a tunnel whose client stopped sending).
    pub fn shutdown_write(&self) {
        self.close_notify();
        self.sock.shutdown_write();
    }

    /// Ends a TLS session politely (`close_notify`) before the socket is
    /// dropped; nothing for a plain one.
    pub fn close_notify(&self) {
        if let Some((t, tcp)) = self.tls_parts() {
            t.close_notify(tcp);
        }
    }
}

impl Drop for UpStream {
    fn drop(&mut self) {
        self.close_notify();
    }
}
