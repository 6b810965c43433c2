//! The client connection's byte stream: the TCP socket itself, or TLS over
//! it (`listen ... ssl`). The connection loop, the request body and the
//! response writer read and write through [`ClientStream`], so the loop's
//! logic is the same for both; what differs is here. A plain stream keeps
//! every zero-copy path (`sendfile`, `writev` of head and body); a TLS
//! stream encrypts in user space ([`crate::tls::conn`]), so file bodies
//! are read through the disk layer into buffers and never `sendfile`d. A
//! kTLS stream (the kernel has the record layer, [`crate::tls::ktls`]) is
//! written like a plain one — `sendfile`, `writev`, `MSG_MORE` — and read
//! with `recvmsg`, which names each record's type.

use std::io;
use std::net::Shutdown;
use std::time::Duration;

use tokio::io::{AsyncReadExt, Interest};
use tokio::net::TcpStream;

use crate::tls::conn::TlsConn;

/// A client connection's stream, plain or TLS.
pub struct ClientStream {
    tcp: TcpStream,
    tls: Option<Box<TlsConn>>,
    /// TLS in the kernel (kTLS): written as plain TCP, read record-aware.
    ktls: bool,
}

impl ClientStream {
    /// A plain TCP stream.
    pub fn plain(tcp: TcpStream) -> ClientStream {
        ClientStream {
            tcp,
            tls: None,
            ktls: false,
        }
    }

    /// A TLS stream whose record layer the kernel took over (kTLS).
    pub fn ktls(tcp: TcpStream) -> ClientStream {
        ClientStream {
            tcp,
            tls: None,
            ktls: true,
        }
    }

    /// Whether this is TLS (in user space or in the kernel).
    pub fn is_tls(&self) -> bool {
        self.tls.is_some() || self.ktls
    }

    /// One record-aware read of a kTLS socket, without waiting.
    fn ktls_read(&self, buf: &mut Vec<u8>) -> io::Result<usize> {
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.tcp);
        self.tcp
            .try_io(Interest::READABLE, || crate::tls::ktls::recv(fd, buf))
    }

    /// A TLS stream whose handshake is done.
    pub fn tls(tcp: TcpStream, tls: TlsConn) -> ClientStream {
        ClientStream {
            tcp,
            tls: Some(Box::new(tls)),
            ktls: false,
        }
    }

    /// The socket (for `sendfile` and socket options; plain streams only
    /// send through it directly).
    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }

    /// The user-space TLS session, if this is such a TLS stream (not for
    /// kTLS, which is written as plain TCP).
    pub fn tls_conn(&self) -> Option<&TlsConn> {
        self.tls.as_deref()
    }

    /// Appends what arrives next to `buf`, waiting for it; `Ok(0)` at end.
    pub async fn read_buf(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        if self.ktls {
            loop {
                match self.ktls_read(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.tcp.readable().await?,
                    r => return r,
                }
            }
        }
        match &self.tls {
            None => self.tcp.read_buf(buf).await,
            Some(t) => t.read(&self.tcp, buf).await,
        }
    }

    /// One read without waiting (`WouldBlock` when nothing is there).
    pub fn try_read_buf(&self, buf: &mut Vec<u8>) -> io::Result<usize> {
        if self.ktls {
            return self.ktls_read(buf);
        }
        match &self.tls {
            None => self.tcp.try_read_buf(buf),
            Some(t) => t.try_read(&self.tcp, buf),
        }
    }

    /// Like [`try_read_buf`](Self::try_read_buf), and a plain read that
    /// did not fill the buffer also clears the socket's read readiness,
    /// as NGINX's `ngx_unix_recv` does (`ready = 0` after a short read):
    /// the next attempt waits for epoll instead of paying a `recv` that
    /// says `EAGAIN`. Readiness that arrived after the `recv` is kept.
    pub fn read_now(&self, buf: &mut Vec<u8>) -> io::Result<usize> {
        if let Some(t) = &self.tls {
            return t.try_read(&self.tcp, buf);
        }
        if self.ktls {
            return self.ktls_read(buf);
        }
        let stream = &self.tcp;
        let mut got = 0;
        let r = stream.try_io(Interest::READABLE, || {
            let space = buf.capacity() - buf.len();
            let n = rustix::io::read(stream, buf.spare_capacity_mut())
                .map(|(init, _)| init.len())
                .map_err(io::Error::from)?;
            // SAFETY: `read` initialised the first `n` bytes of the spare capacity.
            unsafe { buf.set_len(buf.len() + n) };
            got = n;
            if n > 0 && n < space {
                Err(io::ErrorKind::WouldBlock.into())
            } else {
                Ok(n)
            }
        });
        match r {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && got > 0 => Ok(got),
            r => r,
        }
    }

    /// Waits until a read may give something (for TLS: decrypted bytes
    /// already buffered count).
    pub async fn readable(&self) -> io::Result<()> {
        if let Some(t) = &self.tls {
            if t.has_plaintext() {
                return Ok(());
            }
        }
        self.tcp.readable().await
    }

    /// Resolves when the client closed the connection while a request
    /// waits (a peek reads end of file or fails), as NGINX's
    /// `ngx_http_test_reading`; never once a byte is there to read (the
    /// next request, a TLS record: NGINX stops watching then too), nor on
    /// kTLS, whose socket a peek could not read plainly.
    pub async fn closed_by_peer(&self) {
        let mut b = [0u8; 1];
        match self.tcp.peek(&mut b).await {
            Ok(0) | Err(_) if !self.ktls => {}
            _ => std::future::pending().await,
        }
    }

    /// Writes all of `buf`; `more` says a body follows (`MSG_MORE`, or
    /// records kept back for one TLS write). Each wait for the socket is
    /// bounded by `timeout` (`ETIMEDOUT` then).
    pub async fn write_all(&self, mut buf: &[u8], more: bool, timeout: Duration) -> io::Result<()> {
        if let Some(t) = &self.tls {
            return t.write_all(&self.tcp, buf, more, timeout).await;
        }
        let flags = if more {
            rustix::net::SendFlags::MORE | rustix::net::SendFlags::NOSIGNAL
        } else {
            rustix::net::SendFlags::NOSIGNAL
        };
        let stream = &self.tcp;
        while !buf.is_empty() {
            match stream.try_io(Interest::WRITABLE, || {
                rustix::net::send(stream, buf, flags).map_err(io::Error::from)
            }) {
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.wait_writable(timeout).await?
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Writes `head` then `body` (one `writev` on a plain stream).
    pub async fn write_two(&self, head: &[u8], body: &[u8], timeout: Duration) -> io::Result<()> {
        if let Some(t) = &self.tls {
            t.write_all(&self.tcp, head, true, timeout).await?;
            return t.write_all(&self.tcp, body, false, timeout).await;
        }
        let mut done = 0;
        let total = head.len() + body.len();
        while done < total {
            let bufs = if done < head.len() {
                [io::IoSlice::new(&head[done..]), io::IoSlice::new(body)]
            } else {
                [
                    io::IoSlice::new(&body[done - head.len()..]),
                    io::IoSlice::new(&[]),
                ]
            };
            match self.tcp.try_write_vectored(&bufs) {
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.wait_writable(timeout).await?
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Waits for the socket to take more, at most `timeout`.
    pub async fn wait_writable(&self, timeout: Duration) -> io::Result<()> {
        match tokio::time::timeout(timeout, self.tcp.writable()).await {
            Ok(r) => r,
            Err(_) => Err(io::Error::from_raw_os_error(libc::ETIMEDOUT)),
        }
    }

    /// Ends the sending side: TLS's `close_notify` (as far as the socket
    /// takes it now; on kTLS a control record), then the TCP half-close.
    pub fn shutdown_write(&self) {
        if let Some(t) = &self.tls {
            t.close_notify(&self.tcp);
        }
        if self.ktls {
            crate::tls::ktls::send_close_notify(std::os::fd::AsRawFd::as_raw_fd(&self.tcp));
        }
        let _ = socket2::SockRef::from(&self.tcp).shutdown(Shutdown::Write);
    }

    /// Reads and drops raw bytes (lingering close: what the client still
    /// sends after the response, encrypted or not, is not looked at).
    pub async fn drain(&mut self, junk: &mut [u8]) -> io::Result<usize> {
        self.tcp.read(junk).await
    }
}
