//! The two-way byte relay of a proxied stream session, as NGINX's
//! `ngx_stream_proxy_process`: one buffer of `proxy_buffer_size` per
//! direction, read from one side only when its buffer is empty, written
//! to the other until it is; `proxy_timeout` ends a session in which
//! neither side moved a byte for that long; `proxy_upload_rate` and
//! `proxy_download_rate` pace the reads as NGINX does (at most
//! `rate × (seconds since start + 1)` bytes so far, and a pause of
//! `n / rate` seconds after each read of `n`). When one side ends its
//! sending, the session ends once what it sent is delivered — unless
//! `proxy_half_close` is on: then that direction alone is shut
//! (`shutdown(SHUT_WR)` on the other side) and the session ends when both
//! have ended. A read error counts as the end of that side.
//!
//! Written over readiness (`readable`/`try_read`) rather than
//! `tokio::io::copy_bidirectional`, which has no idle timeout shared by
//! both directions, no pacing and always half-closes.

use std::io;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;
use tokio::time::sleep_until;

use crate::upstream::Socket;

/// What the relay keeps to.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Each direction's buffer.
    pub buffer: usize,
    /// `proxy_timeout`.
    pub timeout: Duration,
    /// `proxy_upload_rate` (0: none).
    pub upload_rate: u64,
    /// `proxy_download_rate` (0: none).
    pub download_rate: u64,
    /// `proxy_half_close`.
    pub half_close: bool,
}

/// How the relay ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The client ended its side (and, with half-close, so did the upstream).
    Client,
    /// The upstream ended its side.
    Upstream,
    /// `proxy_timeout` passed with no byte moved.
    TimedOut,
}

/// What went each way.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    /// Read from the client.
    pub from_client: u64,
    /// Written to the upstream.
    pub to_upstream: u64,
    /// Read from the upstream.
    pub from_upstream: u64,
    /// Written to the client.
    pub to_client: u64,
    /// When the upstream's first byte came.
    pub first_byte: Option<Instant>,
}

/// One direction: its buffer and where it stands.
struct Pipe {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    shut: bool,
    read: u64,
    written: u64,
    rate: u64,
    began: Instant,
    /// A paced read waits until then.
    resume: Option<tokio::time::Instant>,
}

impl Pipe {
    fn new(size: usize, rate: u64, initial: Vec<u8>) -> Pipe {
        let mut buf = initial;
        let end = buf.len();
        buf.resize(size.max(end).max(1), 0);
        Pipe {
            buf,
            start: 0,
            end,
            eof: false,
            shut: false,
            read: 0,
            written: 0,
            rate,
            began: Instant::now(),
            resume: None,
        }
    }

    fn pending(&self) -> bool {
        self.start < self.end
    }

    fn wants_read(&self) -> bool {
        !self.eof && !self.pending() && self.resume.is_none()
    }

    /// Done: the sender ended and everything it sent is delivered.
    fn done(&self) -> bool {
        self.eof && !self.pending()
    }

    /// How much a read may take now; `None` when pacing says wait (the
    /// pause is set).
    fn allowance(&mut self) -> Option<usize> {
        if self.rate == 0 {
            return Some(self.buf.len());
        }
        let secs = self.began.elapsed().as_secs() + 1;
        let limit = (self.rate * secs) as i64 - self.read as i64;
        if limit <= 0 {
            let ms = (-limit) as u64 * 1000 / self.rate + 1;
            self.resume = Some(tokio::time::Instant::now() + Duration::from_millis(ms));
            return None;
        }
        Some(self.buf.len().min(limit as usize))
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

/// One end of the relay: the client's socket or the upstream's.
trait Side {
    fn try_read(&self, buf: &mut [u8]) -> io::Result<usize>;
    fn try_write(&self, buf: &[u8]) -> io::Result<usize>;
    fn shut_write(&self);
}

impl Side for TcpStream {
    fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        TcpStream::try_read(self, buf)
    }
    fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        TcpStream::try_write(self, buf)
    }
    fn shut_write(&self) {
        let _ = socket2::SockRef::from(self).shutdown(std::net::Shutdown::Write);
    }
}

impl Side for Socket {
    fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        Socket::try_read(self, buf)
    }
    fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        Socket::try_write(self, buf)
    }
    fn shut_write(&self) {
        self.shutdown_write()
    }
}

/// Moves what it can through `p` from `src` to `dst` without waiting;
/// true when a byte moved (or a side ended). A failed write ends the
/// direction and drops what was left.
fn step(p: &mut Pipe, src: &dyn Side, dst: &dyn Side) -> bool {
    let mut moved = false;
    loop {
        if p.pending() {
            match dst.try_write(&p.buf[p.start..p.end]) {
                Ok(n) => {
                    p.start += n;
                    p.written += n as u64;
                    moved = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return moved,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    p.start = p.end;
                    p.eof = true;
                    return true;
                }
            }
            continue;
        }
        if p.eof || p.resume.is_some() {
            return moved;
        }
        let Some(room) = p.allowance() else {
            return moved;
        };
        match src.try_read(&mut p.buf[..room]) {
            Ok(0) => {
                p.eof = true;
                return true;
            }
            Ok(n) => {
                p.start = 0;
                p.end = n;
                p.after_read(n);
                moved = true;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return moved,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => {
                p.eof = true;
                return true;
            }
        }
    }
}

/// Relays between `client` and `up` until the session ends; `initial`
/// is what the client sent already (read while prereading), sent first.
pub async fn relay(
    client: &TcpStream,
    up: &Socket,
    lim: Limits,
    initial: Vec<u8>,
) -> (Counts, End) {
    let mut upl = Pipe::new(lim.buffer, lim.upload_rate, initial);
    let mut down = Pipe::new(lim.buffer, lim.download_rate, Vec::new());
    let mut first_byte = None;
    let mut deadline = tokio::time::Instant::now() + lim.timeout;
    let end = loop {
        let mut moved = step(&mut upl, client, up);
        let before = down.read;
        moved |= step(&mut down, up, client);
        if first_byte.is_none() && down.read > before {
            first_byte = Some(Instant::now());
        }
        if lim.half_close {
            if upl.done() && !upl.shut {
                up.shut_write();
                upl.shut = true;
            }
            if down.done() && !down.shut {
                client.shut_write();
                down.shut = true;
            }
            if upl.done() && down.done() {
                break End::Client;
            }
        } else if upl.done() {
            break End::Client;
        } else if down.done() {
            break End::Upstream;
        }
        if moved {
            deadline = tokio::time::Instant::now() + lim.timeout;
            continue;
        }
        let far = tokio::time::Instant::now() + Duration::from_secs(86400);
        let (ur, dr) = (upl.resume.unwrap_or(far), down.resume.unwrap_or(far));
        tokio::select! {
            _ = client.readable(), if upl.wants_read() => {}
            _ = up.writable(), if upl.pending() => {}
            _ = up.readable(), if down.wants_read() => {}
            _ = client.writable(), if down.pending() => {}
            _ = sleep_until(ur), if upl.resume.is_some() => upl.resume = None,
            _ = sleep_until(dr), if down.resume.is_some() => down.resume = None,
            _ = sleep_until(deadline) => break End::TimedOut,
        }
    };
    let counts = Counts {
        from_client: upl.read,
        to_upstream: upl.written,
        from_upstream: down.read,
        to_client: down.written,
        first_byte,
    };
    (counts, end)
}
