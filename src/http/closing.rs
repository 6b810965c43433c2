//! How a connection closes: a lingering close (`lingering_close`,
//! `lingering_time`, `lingering_timeout`) that shuts the write side and
//! drains input for a while, so a client still sending reads the response
//! instead of a reset; and the close after a timeout, a reset when
//! `reset_timedout_connection` is on.

use std::time::{Duration, Instant};

use super::stream::ClientStream;
use crate::config::{LingeringClose, LocSettings};

/// How a closing connection drains its input: the `lingering_*` settings
/// of the location that answered.
#[derive(Clone, Copy)]
pub struct Linger {
    /// `lingering_close`.
    pub mode: LingeringClose,
    /// `lingering_time`: the longest it drains in all.
    pub time: Duration,
    /// `lingering_timeout`: the longest wait for more input.
    pub timeout: Duration,
}

impl Linger {
    /// The settings of `s`.
    pub fn of(s: &LocSettings) -> Linger {
        Linger {
            mode: s.lingering_close,
            time: s.lingering_time,
            timeout: s.lingering_timeout,
        }
    }
}

/// Shuts the write side and drains input for a while, so a client still
/// sending (a pipelined request, a body) reads our response instead of a
/// reset; with `lingering_close off`, closes at once.
pub async fn lingering_close(mut stream: ClientStream, l: Linger) {
    if l.mode == LingeringClose::Off {
        return;
    }
    stream.shutdown_write();
    let deadline = Instant::now() + l.time;
    // On the heap: an array here would make every connection's future 4 KiB bigger.
    let mut junk = vec![0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        match tokio::time::timeout(left.min(l.timeout), stream.drain(&mut junk)).await {
            Ok(Ok(n)) if n > 0 => continue,
            _ => return,
        }
    }
}

/// How a connection a timeout ended closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimedOutClose {
    /// With a reset (`reset_timedout_connection on`), so the kernel frees
    /// the socket and its unsent data at once instead of keeping it in
    /// FIN_WAIT.
    Reset,
    /// With a FIN, as any close.
    Fin,
}

impl TimedOutClose {
    /// A reset when `reset` (`reset_timedout_connection` applies).
    pub fn reset_if(reset: bool) -> TimedOutClose {
        if reset {
            TimedOutClose::Reset
        } else {
            TimedOutClose::Fin
        }
    }
}

/// Closes a connection a timeout ended, as `how` says.
pub fn close_timed_out(stream: ClientStream, how: TimedOutClose) {
    if how == TimedOutClose::Reset {
        let _ = socket2::SockRef::from(stream.tcp()).set_linger(Some(Duration::ZERO));
    }
}
