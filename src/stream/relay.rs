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
//! Either end may be TLS (`wire.rs`): a TLS sender's end is its
//! `close_notify` (or a bare close), a half-close toward a TLS peer is
//! porter's `close_notify`, records rustls still holds when the socket
//! was full are sent before more is read for that peer, and both TLS
//! ends get `close_notify` when the session ends.
//!
//! Written over readiness (`readable`/`try_read`) rather than
//! `tokio::io::copy_bidirectional`, which has no idle timeout shared by
//! both directions, no pacing and always half-closes.

use std::io;
use std::time::{Duration, Instant};

use tokio::time::sleep_until;

use super::wire::Wire;

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
    /// Bytes read and not yet all written (`buf[start..]`); its capacity
    /// is the direction's buffer.
    buf: Vec<u8>,
    size: usize,
    start: usize,
    eof: bool,
    shut: bool,
    /// TLS records toward the receiver are still queued in rustls.
    unflushed: bool,
    read: u64,
    written: u64,
    rate: u64,
    began: Instant,
    /// A paced read waits until then.
    resume: Option<tokio::time::Instant>,
}

impl Pipe {
    fn new(size: usize, rate: u64, initial: Vec<u8>) -> Pipe {
        let size = size.max(1);
        let mut buf = initial;
        buf.reserve(size.saturating_sub(buf.len()));
        Pipe {
            buf,
            size,
            start: 0,
            eof: false,
            shut: false,
            unflushed: false,
            read: 0,
            written: 0,
            rate,
            began: Instant::now(),
            resume: None,
        }
    }

    fn pending(&self) -> bool {
        self.start < self.buf.len()
    }

    fn wants_read(&self) -> bool {
        !self.eof && !self.pending() && self.resume.is_none()
    }

    /// Done: the sender ended and everything it sent is delivered.
    fn done(&self) -> bool {
        self.eof && !self.pending() && !self.unflushed
    }

    /// How much a read may take now; `None` when pacing says wait (the
    /// pause is set).
    fn allowance(&mut self) -> Option<usize> {
        if self.rate == 0 {
            return Some(self.size);
        }
        let secs = self.began.elapsed().as_secs() + 1;
        let limit = (self.rate * secs) as i64 - self.read as i64;
        if limit <= 0 {
            let ms = (-limit) as u64 * 1000 / self.rate + 1;
            self.resume = Some(tokio::time::Instant::now() + Duration::from_millis(ms));
            return None;
        }
        Some(self.size.min(limit as usize))
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

/// Moves what it can through `p` from `src` to `dst` without waiting;
/// true when a byte moved (or a side ended). A failed write ends the
/// direction and drops what was left.
fn step(p: &mut Pipe, src: Wire<'_>, dst: Wire<'_>) -> bool {
    let moved = pump(p, src, dst);
    match dst.try_flush() {
        Ok(left) => p.unflushed = left,
        Err(_) => {
            p.unflushed = false;
            p.start = p.buf.len();
            p.eof = true;
            return true;
        }
    }
    moved
}

/// [`step`]'s reads and writes.
fn pump(p: &mut Pipe, src: Wire<'_>, dst: Wire<'_>) -> bool {
    let mut moved = false;
    loop {
        if p.pending() {
            match dst.try_write(&p.buf[p.start..]) {
                Ok(n) => {
                    p.start += n;
                    p.written += n as u64;
                    moved = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return moved,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    p.start = p.buf.len();
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
        p.buf.clear();
        p.start = 0;
        match src.try_read_into(&mut p.buf, room) {
            Ok(0) => {
                p.eof = true;
                return true;
            }
            Ok(n) => {
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
pub async fn relay(client: Wire<'_>, up: Wire<'_>, lim: Limits, initial: Vec<u8>) -> (Counts, End) {
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
        if let Some(end) = ended(&mut upl, &mut down, client, up, lim.half_close) {
            break end;
        }
        if moved {
            deadline = tokio::time::Instant::now() + lim.timeout;
            continue;
        }
        let far = tokio::time::Instant::now() + Duration::from_secs(86400);
        let (ur, dr) = (upl.resume.unwrap_or(far), down.resume.unwrap_or(far));
        tokio::select! {
            _ = client.readable(), if upl.wants_read() => {}
            _ = up.writable(), if upl.pending() || upl.unflushed => {}
            _ = up.readable(), if down.wants_read() => {}
            _ = client.writable(), if down.pending() || down.unflushed => {}
            _ = sleep_until(ur), if upl.resume.is_some() => upl.resume = None,
            _ = sleep_until(dr), if down.resume.is_some() => down.resume = None,
            _ = sleep_until(deadline) => break End::TimedOut,
        }
    };
    if end != End::TimedOut {
        client.close_notify();
        up.close_notify();
    }
    let counts = Counts {
        from_client: upl.read,
        to_upstream: upl.written,
        from_upstream: down.read,
        to_client: down.written,
        first_byte,
    };
    (counts, end)
}

/// How the session ends after a step, if it does: half-closes what
/// `proxy_half_close` says to.
fn ended(
    upl: &mut Pipe,
    down: &mut Pipe,
    client: Wire<'_>,
    up: Wire<'_>,
    half: bool,
) -> Option<End> {
    if half {
        if upl.done() && !upl.shut {
            up.shut_write();
            upl.shut = true;
        }
        if down.done() && !down.shut {
            client.shut_write();
            down.shut = true;
        }
        if upl.done() && down.done() {
            return Some(End::Client);
        }
        return None;
    }
    if upl.done() {
        Some(End::Client)
    } else if down.done() {
        Some(End::Upstream)
    } else {
        None
    }
}
