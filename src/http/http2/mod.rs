//! HTTP/2 (`http2 on`): a connection whose TLS handshake settled on ALPN
//! `h2`, or a plain one that opened with the h2c preface ("prior
//! knowledge", as NGINX: no `Upgrade: h2c`). The `h2` crate does the
//! framing, HPACK, stream states and flow control; this module runs the
//! connection (settings from the server's config, the accept loop,
//! timeouts, the limits that bound hostile clients) and gives each stream
//! to `stream.rs`, which turns it into the same request the HTTP/1.1 loop
//! serves.
//!
//! Settings sent: `SETTINGS_MAX_CONCURRENT_STREAMS` =
//! `http2_max_concurrent_streams` (`h2` refuses streams beyond with
//! RST_STREAM REFUSED_STREAM), `SETTINGS_INITIAL_WINDOW_SIZE` =
//! `http2_body_preread_size`, `SETTINGS_MAX_HEADER_LIST_SIZE` = the
//! `large_client_header_buffers` total. Timeouts as NGINX 1.25:
//! `client_header_timeout` for the preface and first SETTINGS,
//! `keepalive_timeout` while no stream is open (then GOAWAY), and
//! `keepalive_requests` streams per connection (then GOAWAY).
//!
//! Hostile clients (the attacks of the last years on HTTP/2 servers):
//! - rapid reset (CVE-2023-44487): streams reset before `h2` handed them
//!   over are bounded by `max_pending_accept_reset_streams`; streams reset
//!   while the handlers work stop them and count against a budget
//!   (`ConnShared::client_reset`: more than twice the concurrent streams,
//!   and over half of all streams): past it, GOAWAY ENHANCE_YOUR_CALM;
//! - CONTINUATION floods and HPACK bombs: `max_header_list_size` bounds
//!   the decoded header list, whatever the frames and table references;
//! - SETTINGS, PING, empty-frame floods: `flood.rs` (GOAWAY
//!   ENHANCE_YOUR_CALM past a score); a client that does not read its
//!   PING/SETTINGS acknowledgements is not read from either (`h2` writes
//!   them before reading on);
//! - zero-window stalls: a stream waits for window at most `send_timeout`
//!   and holds one chunk meanwhile;
//! - stream-ID exhaustion: IDs only grow (`h2` refuses a lower one), and
//!   `keepalive_requests` ends the connection long before 2^31.
//!
//! `SETTINGS_ENABLE_CONNECT_PROTOCOL` is sent: a WebSocket may come as an
//! extended CONNECT stream (RFC 8441; `request.rs`, `tunnel.rs`).

mod flood;
mod io;
pub(crate) mod request;
pub mod send;
mod stream;
mod tunnel;

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use tokio::task::JoinSet;
use tokio::time::Instant;

use self::flood::FrameMeter;
use self::io::{H2Io, Turn};
use super::closing;
use super::connection::{Respond, WorkerEnv};
use super::context::{strip_port, ConnInfo};
use super::stream::ClientStream;
use crate::config::LocSettings;
use crate::log::Level;
use crate::util::shutdown::Mode;

/// The h2c connection preface (RFC 9113 3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How long a connection told to go away may take to finish its streams
/// and flush its GOAWAY.
const CLOSING_GRACE: Duration = Duration::from_secs(5);

/// What the streams of one connection share with it.
pub struct ConnShared {
    /// The connection (`$http2` set).
    info: ConnInfo,
    /// Its listen group.
    group: usize,
    /// Streams accepted.
    requests: Cell<u64>,
    /// Streams the client reset before their response was complete.
    resets: Cell<u64>,
    /// Resets allowed before the share of resets is looked at.
    reset_budget: u64,
    /// Set when the resets passed the budget; wakes the connection.
    calm: tokio::sync::Notify,
}

impl ConnShared {
    fn next_request(&self) -> u64 {
        let n = self.requests.get() + 1;
        self.requests.set(n);
        n
    }

    /// The client reset a stream whose response was not complete: past
    /// the budget, when resets are over half of the streams, the
    /// connection is told to calm down (rapid reset).
    fn client_reset(&self) {
        let r = self.resets.get() + 1;
        self.resets.set(r);
        if r > self.reset_budget && r * 2 > self.requests.get() {
            self.calm.notify_one();
        }
    }
}

/// Whether `buf`, the first bytes of a plain connection where h2c is
/// `enabled`, is (so far) the h2c preface: `Some(true)` when whole,
/// `Some(false)` when it may still become it, `None` when it is not.
pub fn preface(enabled: bool, buf: &[u8]) -> Option<bool> {
    let n = buf.len().min(PREFACE.len());
    (enabled && buf[..n] == PREFACE[..n]).then_some(n == PREFACE.len())
}

/// Whether a connection on `group` may start with the h2c preface: a
/// plain address with `http2 on` in its default server, or
/// `listen ... http2`.
pub fn h2c_enabled(group: &crate::config::ListenGroup) -> bool {
    !group.ssl && (group.http2 || group.servers[group.default].base.s.http2)
}

/// Serves an HTTP/2 connection until it closes. `early` holds what was
/// read before HTTP/2 was recognised (the h2c preface).
pub async fn serve<H: Respond + 'static>(
    stream: ClientStream,
    early: Vec<u8>,
    mut info: ConnInfo,
    group: usize,
    w: Rc<WorkerEnv<H>>,
) {
    info.http2 = if stream.tls_conn().is_some() {
        "h2"
    } else {
        "h2c"
    };
    let listen = &w.config.listens[group];
    // The server TLS chose by SNI (else the default) sets the connection's
    // limits, as NGINX takes them from the connection's server.
    let sni = info.tls.as_ref().and_then(|t| t.server_name.clone());
    let server = listen.find_server(sni.as_deref().map(strip_port));
    let s = server.base.s.clone();
    let meter = Rc::new(FrameMeter::new());
    let stream = Rc::new(stream);
    let turn = Turn::default();
    let io = H2Io::new(Rc::clone(&stream), early, Rc::clone(&meter), turn.clone());
    let handshake = builder(&s, server.limits.max_head).handshake::<_, Bytes>(io);
    let h2 = match tokio::time::timeout(s.client_header_timeout, handshake).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            log_info(&w, &info, format_args!("HTTP/2 handshake failed: {e}"));
            return;
        }
        Err(_) => {
            let what = "client timed out (110: Connection timed out) while waiting for request";
            log_info(&w, &info, format_args!("{what}"));
            return;
        }
    };
    let shared = Rc::new(ConnShared {
        info,
        group,
        requests: Cell::new(0),
        resets: Cell::new(0),
        reset_budget: 2 * u64::from(s.http2_max_concurrent_streams.max(1)),
        calm: tokio::sync::Notify::new(),
    });
    run(h2, &s, &meter, &turn, shared, w).await;
    // `h2` is gone: close as HTTP/1.1 does, draining what the client still
    // sends (a reset would destroy the GOAWAY before it is read).
    if let Ok(stream) = Rc::try_unwrap(stream) {
        closing::lingering_close(stream, closing::Linger::of(&s)).await;
    }
}

/// An HTTP/2 connection after its handshake: its event loop.
type H2Conn = h2::server::Connection<H2Io, Bytes>;

/// Accepts streams (each a task of the connection's `JoinSet`) until the
/// connection ends: the client leaves, an error, or a GOAWAY sent for
/// idleness, `keepalive_requests`, a graceful shutdown or misbehaviour
/// (then what is open may finish, within [`CLOSING_GRACE`]).
async fn run<H: Respond + 'static>(
    mut h2: H2Conn,
    s: &LocSettings,
    meter: &FrameMeter,
    turn: &Turn,
    shared: Rc<ConnShared>,
    w: Rc<WorkerEnv<H>>,
) {
    let mut streams = JoinSet::new();
    let mut shutdown = w.shutdown.clone();
    let mut idle_since = Instant::now();
    let mut accepted: u64 = 0;
    // Set once GOAWAY was sent: the connection ends when its streams do.
    let mut closing: Option<Instant> = None;
    let go_away = |h2: &mut H2Conn, closing: &mut Option<Instant>, calm: Option<&str>| {
        match calm {
            Some(why) => {
                log_info(&w, &shared.info, format_args!("{why}"));
                h2.abrupt_shutdown(h2::Reason::ENHANCE_YOUR_CALM);
            }
            None => h2.graceful_shutdown(),
        }
        closing.get_or_insert_with(Instant::now);
    };
    loop {
        let idle_deadline = idle_since + s.keepalive_timeout;
        let close_deadline = closing.map_or(idle_deadline, |c| c + CLOSING_GRACE);
        tokio::select! {
            biased;
            // Polled first each time the task is: a new turn (`io.rs`
            // flushes once per turn).
            _ = std::future::poll_fn(|_| {
                turn.advance();
                std::task::Poll::<()>::Pending
            }) => {}
            _ = shared.calm.notified() => {
                go_away(&mut h2, &mut closing, Some("client reset too many streams, closing connection"));
            }
            _ = meter.alarm.notified() => go_away(&mut h2, &mut closing, Some("http2 flood detected")),
            Some(_) = streams.join_next(), if !streams.is_empty() => {
                if streams.is_empty() {
                    idle_since = Instant::now();
                }
            }
            r = h2.accept() => match r {
                // Told to go away: `h2` still hands over streams until the
                // client acknowledges the GOAWAY's PING; they are refused
                // (the client may retry them elsewhere).
                Some(Ok((_, mut respond))) if closing.is_some() => {
                    respond.send_reset(h2::Reason::REFUSED_STREAM);
                }
                Some(Ok((req, respond))) => {
                    streams.spawn_local(stream::serve(req, respond, Rc::clone(&w), Rc::clone(&shared)));
                    accepted += 1;
                    if accepted >= s.keepalive_requests && closing.is_none() {
                        go_away(&mut h2, &mut closing, None);
                    }
                }
                Some(Err(e)) => {
                    if !e.is_io() && !e.is_go_away() {
                        log_info(&w, &shared.info, format_args!("HTTP/2 connection error: {e}"));
                    }
                    break;
                }
                None => break,
            },
            _ = tokio::time::sleep_until(idle_deadline), if streams.is_empty() && closing.is_none() => {
                go_away(&mut h2, &mut closing, None);
            }
            _ = tokio::time::sleep_until(close_deadline), if closing.is_some() => break,
            _ = shutdown.wait_for(Mode::Graceful), if closing.is_none() => {
                go_away(&mut h2, &mut closing, None);
            }
        }
    }
    // The streams still running go with the connection (the JoinSet
    // aborts them).
    drop(streams);
}

/// The `h2` server settings from the server's configuration.
fn builder(s: &LocSettings, max_head: usize) -> h2::server::Builder {
    let streams = s.http2_max_concurrent_streams;
    let mut b = h2::server::Builder::new();
    b.max_concurrent_streams(streams)
        .initial_window_size(s.http2_body_preread_size)
        // Every stream may fill its preread window at once.
        .initial_connection_window_size(
            (u64::from(streams.max(1)) * u64::from(s.http2_body_preread_size.max(65_535)))
                .min((1 << 31) - 1) as u32,
        )
        .max_header_list_size(max_head.min(u32::MAX as usize) as u32)
        // One piece in flight per stream, and the next being read: what
        // a stream may hold of its body in memory.
        .max_send_buffer_size(2 * s.http2_chunk_size.max(send::READ_PIECE))
        .max_pending_accept_reset_streams(streams.max(20) as usize)
        .max_local_error_reset_streams(Some(1024))
        .max_concurrent_reset_streams(streams.max(10) as usize)
        // WebSocket over HTTP/2 (RFC 8441, `tunnel.rs`).
        .enable_connect_protocol();
    b
}

fn log_info<H>(w: &WorkerEnv<H>, info: &ConnInfo, what: std::fmt::Arguments<'_>) {
    w.log.log_conn(
        Level::Info,
        Some(info.id),
        what,
        &format!(", client: {}, server: {}", info.peer.ip(), info.local),
    );
}
