//! Where an upstream peer listens: an IP address and port, or a unix
//! socket (`server unix:/path;`, `proxy_pass http://unix:/path:/uri;`).
//! [`PeerAddr`] prints as NGINX prints a peer in `$upstream_addr` and in
//! the error log (`127.0.0.1:8080`, `unix:/path`), and [`connect`] opens
//! the socket without blocking the loop (tokio's `TcpStream` or
//! `UnixStream`), bounded by `proxy_connect_timeout`.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpStream, UnixStream};

/// The longest unix socket path the kernel takes (`sun_path` less its
/// terminating NUL), as NGINX checks it at config load.
pub const UNIX_PATH_MAX: usize = 107;

/// An upstream peer's address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PeerAddr {
    /// An IP address and port.
    Inet(SocketAddr),
    /// A unix socket path.
    Unix(Arc<Path>),
}

impl fmt::Display for PeerAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeerAddr::Inet(a) => write!(f, "{a}"),
            PeerAddr::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

impl From<SocketAddr> for PeerAddr {
    fn from(a: SocketAddr) -> PeerAddr {
        PeerAddr::Inet(a)
    }
}

impl PeerAddr {
    /// The unix socket of `unix:PATH` (without the prefix); the error is
    /// NGINX's.
    pub fn unix(path: &str) -> Result<PeerAddr, String> {
        if path.is_empty() {
            return Err("no path in the unix domain socket".to_string());
        }
        if path.len() > UNIX_PATH_MAX {
            return Err("too long path in the unix domain socket".to_string());
        }
        Ok(PeerAddr::Unix(Arc::from(Path::new(path))))
    }

    /// Whether it is a unix socket (NGINX separates its URI with `:` in
    /// the error log's `upstream:`).
    pub fn is_unix(&self) -> bool {
        matches!(self, PeerAddr::Unix(_))
    }
}

/// An open connection to a peer, before any TLS.
#[derive(Debug)]
pub enum Socket {
    /// TCP.
    Tcp(TcpStream),
    /// A unix socket.
    Unix(UnixStream),
}

impl Socket {
    /// Non-blocking write.
    pub fn try_write(&self, data: &[u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.try_write(data),
            Socket::Unix(s) => s.try_write(data),
        }
    }

    /// Non-blocking read.
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.try_read(buf),
            Socket::Unix(s) => s.try_read(buf),
        }
    }

    /// Non-blocking read appended to `buf`, at most `max` bytes, into its
    /// spare capacity: nothing is zeroed first, and only the pages the
    /// bytes land on are touched.
    pub fn try_read_into(&self, buf: &mut Vec<u8>, max: usize) -> io::Result<usize> {
        use bytes::BufMut;
        buf.reserve(max);
        let mut room = buf.limit(max);
        match self {
            Socket::Tcp(s) => s.try_read_buf(&mut room),
            Socket::Unix(s) => s.try_read_buf(&mut room),
        }
    }

    /// Writes all of `data` on the new socket before anything else (the
    /// PROXY header of `proxy_protocol on`), each wait at most `timeout`.
    pub async fn write_first(&self, mut data: &[u8], timeout: Duration) -> io::Result<()> {
        while !data.is_empty() {
            match self.try_write(data) {
                Ok(n) => data = &data[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    tokio::time::timeout(timeout, self.writable())
                        .await
                        .map_err(|_| io::Error::from_raw_os_error(libc::ETIMEDOUT))??;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Waits until the socket can be written to.
    pub async fn writable(&self) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.writable().await,
            Socket::Unix(s) => s.writable().await,
        }
    }

    /// Waits until the socket has something to read (or an error).
    pub async fn readable(&self) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.readable().await,
            Socket::Unix(s) => s.readable().await,
        }
    }

    /// Polls for read readiness (a poll-based reader: HTTP/2's).
    pub fn poll_read_ready(
        &self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        match self {
            Socket::Tcp(s) => s.poll_read_ready(cx),
            Socket::Unix(s) => s.poll_read_ready(cx),
        }
    }

    /// Polls for write readiness.
    pub fn poll_write_ready(
        &self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        match self {
            Socket::Tcp(s) => s.poll_write_ready(cx),
            Socket::Unix(s) => s.poll_write_ready(cx),
        }
    }

    /// Ends the sending side (`shutdown(SHUT_WR)`), the reading side
    /// staying open.
    pub fn shutdown_write(&self) {
        let _ = match self {
            Socket::Tcp(s) => socket2::SockRef::from(s).shutdown(std::net::Shutdown::Write),
            Socket::Unix(s) => socket2::SockRef::from(s).shutdown(std::net::Shutdown::Write),
        };
    }
}

/// Connects to `addr` within `timeout`.
pub async fn connect(addr: &PeerAddr, timeout: Duration) -> io::Result<Socket> {
    connect_with(addr, timeout, &ConnectOptions::default()).await
}

/// How a connection to a peer is made (`proxy_bind`,
/// `proxy_socket_keepalive`).
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    /// The local address to bind first (`proxy_bind`), and whether it may
    /// be one this host does not own (`transparent`: `IP_TRANSPARENT`).
    pub bind: Option<(SocketAddr, bool)>,
    /// `SO_KEEPALIVE` on the socket (`proxy_socket_keepalive on`).
    pub keepalive: bool,
}

/// [`connect`] with `opts` (a unix socket takes none of them).
pub async fn connect_with(
    addr: &PeerAddr,
    timeout: Duration,
    opts: &ConnectOptions,
) -> io::Result<Socket> {
    match tokio::time::timeout(timeout, connect_now(addr, opts)).await {
        Ok(r) => r,
        Err(_) => Err(io::Error::from_raw_os_error(libc::ETIMEDOUT)),
    }
}

async fn connect_now(addr: &PeerAddr, opts: &ConnectOptions) -> io::Result<Socket> {
    match addr {
        PeerAddr::Inet(a) if opts.bind.is_none() && !opts.keepalive => {
            let s = TcpStream::connect(*a).await?;
            let _ = s.set_nodelay(true);
            Ok(Socket::Tcp(s))
        }
        PeerAddr::Inet(a) => {
            let s = tcp_socket(*a, opts)?.connect(*a).await?;
            let _ = s.set_nodelay(true);
            Ok(Socket::Tcp(s))
        }
        PeerAddr::Unix(p) => Ok(Socket::Unix(UnixStream::connect(p).await?)),
    }
}

/// A TCP socket for `peer` with `opts` applied, bound when asked.
fn tcp_socket(peer: SocketAddr, opts: &ConnectOptions) -> io::Result<tokio::net::TcpSocket> {
    let domain = socket2::Domain::for_address(peer);
    let s = socket2::Socket::new(domain, socket2::Type::STREAM, Some(socket2::Protocol::TCP))?;
    s.set_nonblocking(true)?;
    if opts.keepalive {
        s.set_keepalive(true)?;
    }
    if let Some((local, transparent)) = opts.bind {
        if transparent {
            match local {
                SocketAddr::V4(_) => s.set_ip_transparent_v4(true)?,
                SocketAddr::V6(_) => s.set_ip_transparent_v6(true)?,
            }
        }
        s.bind(&local.into())?;
    }
    Ok(tokio::net::TcpSocket::from_std_stream(s.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_as_nginx_prints_peers() {
        let a = PeerAddr::Inet("127.0.0.1:8080".parse().unwrap());
        assert_eq!(a.to_string(), "127.0.0.1:8080");
        assert_eq!(
            PeerAddr::unix("/tmp/a.sock").unwrap().to_string(),
            "unix:/tmp/a.sock"
        );
    }

    #[test]
    fn refuses_empty_and_too_long_paths_with_nginx_messages() {
        assert_eq!(
            PeerAddr::unix("").unwrap_err(),
            "no path in the unix domain socket"
        );
        let long = format!("/{}", "a".repeat(UNIX_PATH_MAX));
        assert_eq!(
            PeerAddr::unix(&long).unwrap_err(),
            "too long path in the unix domain socket"
        );
    }
}
