//! HTTP/3 over QUIC (`listen ... quic`, `http3 on`): quinn is the QUIC
//! transport (packets, TLS 1.3 through rustls, loss recovery, flow
//! control, Retry, stateless reset), h3 the HTTP/3 framing and QPACK;
//! both stay behind this module, as `h2` stays behind `http2/`. Each
//! worker runs one endpoint per QUIC address on its own UDP socket
//! (`endpoint.rs`; how datagrams find their worker: `runtime/quic_steer.rs`),
//! a task per connection (this file: handshake, the accept loop, GOAWAY on
//! a graceful stop) and a task per request stream (`stream.rs`, which runs
//! the same request path as HTTP/1.1 and HTTP/2 and answers through
//! `send.rs`).
//!
//! Limits: `http3_max_concurrent_streams` is QUIC's stream limit (a client
//! cannot open more: the transport refuses it, no stream state is kept),
//! `http3_stream_buffer_size` each stream's window,
//! `large_client_header_buffers` the decoded field section
//! (`SETTINGS_MAX_FIELD_SECTION_SIZE`, h3 answers 431 beyond), QPACK's
//! dynamic table is off (h3 decodes statelessly, so a QPACK bomb has no
//! table to fill), `keepalive_timeout` the idle timeout, and
//! `client_header_timeout` the handshake and each stream's HEADERS.

mod endpoint;
pub mod fuzz;
pub mod guard;
mod handover;
mod send;
mod stream;

pub use send::RecvBody;

use std::cell::Cell;
use std::net::{SocketAddr, UdpSocket};
use std::rc::Rc;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;

use super::connection::{Respond, WorkerEnv};
use super::context::{next_conn_id, ConnInfo, TlsInfo};
use crate::log::Level;
use crate::tls::peer::PeerCert;
use crate::tls::quic_session::{Handshake, Settled};
use crate::util::shutdown::Mode;

/// How long a connection told to go away may take to finish its streams.
const CLOSING_GRACE: Duration = Duration::from_secs(5);

/// New QUIC connections served (`porter_quic_connections_total`).
pub static ACCEPTED: AtomicU64 = AtomicU64::new(0);
/// New clients sent a Retry first (`quic_retry on`).
pub static RETRIED: AtomicU64 = AtomicU64::new(0);
/// New clients refused (`http3 off`).
pub static REFUSED: AtomicU64 = AtomicU64::new(0);

/// What the streams of one connection share with it.
pub struct ConnShared {
    /// The connection (`$http3`, `$quic`, `$ssl_*`).
    info: ConnInfo,
    /// What its handshake settled; a request read before it finished came
    /// in early data (0-RTT).
    settled: Arc<Settled>,
    /// Its listen group.
    group: usize,
    /// Streams accepted.
    requests: Cell<u64>,
    /// `client_header_timeout`: the wait for a stream's HEADERS.
    header_timeout: Duration,
    /// `keepalive_requests`: streams accepted before GOAWAY.
    max_requests: u64,
}

impl ConnShared {
    fn next_request(&self) -> u64 {
        let n = self.requests.get() + 1;
        self.requests.set(n);
        n
    }

    fn log<H>(&self, w: &WorkerEnv<H>, what: std::fmt::Arguments<'_>) {
        w.log.log_conn(
            Level::Info,
            Some(self.info.id),
            what,
            &format!(
                ", client: {}, server: {}",
                self.info.peer.ip(),
                self.info.local
            ),
        );
    }
}

/// Runs worker `worker`'s QUIC endpoint on `socket` for listen group
/// `group` until a graceful stop, then waits for its connections (a fast
/// stop drops them with the worker).
pub async fn serve_endpoint<H: Respond + 'static>(
    socket: UdpSocket,
    group: usize,
    worker: usize,
    w: Rc<WorkerEnv<H>>,
) {
    let g = &w.config.listens[group];
    let s = &g.servers[g.default].base.s;
    let server = match endpoint::server_config(&w.config, group) {
        Ok(c) => c,
        Err(e) => {
            let what = format!("QUIC on {} is off: {e}", g.addr);
            w.log.log(Level::Emerg, format_args!("{what}"));
            return;
        }
    };
    // The newest endpoint on the socket reads it and hands an older
    // generation's datagrams to that one (a reload's drain).
    let joined = handover::SharedSocket::join(socket, worker);
    let made = joined.and_then(|(socket, tag)| {
        let config = endpoint::endpoint_config(g, worker, tag);
        let runtime = Arc::new(quinn::TokioRuntime);
        quinn::Endpoint::new_with_abstract_socket(config, Some(server), socket, runtime)
    });
    let ep = match made {
        Ok(e) => e,
        Err(e) => {
            w.log.log(
                Level::Emerg,
                format_args!("QUIC endpoint on {}: {e}", g.addr),
            );
            return;
        }
    };
    let (retry, enabled) = (s.quic_retry, s.http3);
    let mut conns = JoinSet::new();
    let mut shutdown = w.shutdown.clone();
    loop {
        tokio::select! {
            incoming = ep.accept() => {
                let Some(incoming) = incoming else { break };
                if !enabled {
                    crate::metrics::inc(&REFUSED);
                    incoming.refuse();
                } else if retry && !incoming.remote_address_validated() {
                    // `quic_retry on`: no state until the client proves
                    // its address with the token of a Retry.
                    crate::metrics::inc(&RETRIED);
                    let _ = incoming.retry();
                } else {
                    crate::metrics::inc(&ACCEPTED);
                    conns.spawn_local(connection(incoming, group, Rc::clone(&w)));
                }
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            _ = shutdown.wait_for(Mode::Graceful) => break,
        }
    }
    // New connections are refused from here; those open were told to go
    // away (each watches the shutdown) and finish their streams.
    ep.set_server_config(None);
    while conns.join_next().await.is_some() {}
    ep.wait_idle().await;
}

/// Serves one QUIC connection: the handshake (within
/// `ssl_handshake_timeout`, else `client_header_timeout`), then HTTP/3.
async fn connection<H: Respond + 'static>(
    incoming: quinn::Incoming,
    group: usize,
    w: Rc<WorkerEnv<H>>,
) {
    let g = &w.config.listens[group];
    let peer = incoming.remote_address();
    let local = SocketAddr::new(incoming.local_ip().unwrap_or(g.addr.ip()), g.addr.port());
    let mut info = ConnInfo::accepted(next_conn_id(), peer, local);
    let Some((quic, hs)) = handshake(incoming, group, &info, &w).await else {
        return;
    };
    let (sni, settled) = (hs.server_name, hs.settled);
    let server = g.find_server(sni.as_deref());
    let (client_verify, peer) = client_cert(&quic, server, g);
    info.tls = Some(Arc::new(TlsInfo {
        protocol: "TLSv1.3",
        cipher: settled.cipher(),
        server_name: sni.clone(),
        reused: settled.resumed(),
        client_verify,
        peer,
        curve: settled.curve(),
        session_id: crate::tls::session_id::random(),
        handshaking: None,
    }));
    info.http3 = "h3";
    let shared = Rc::new(ConnShared {
        info,
        settled,
        group,
        requests: Cell::new(0),
        header_timeout: server.limits.header_timeout,
        max_requests: server.base.s.keepalive_requests,
    });
    let max_head = server.limits.max_head as u64;
    let built = h3::server::builder()
        .max_field_section_size(max_head)
        .build::<_, bytes::Bytes>(guard::Guarded::new(
            quic.clone(),
            guard::request_frame_max(server.limits.max_head),
        ))
        .await;
    let h3c = match built {
        Ok(c) => c,
        Err(e) => {
            shared.log(&w, format_args!("HTTP/3 connection failed: {e}"));
            return;
        }
    };
    run(h3c, &quic, &shared, &w).await;
    quic.close(quinn::VarInt::from_u32(0x100), b"");
}

/// `$ssl_client_verify` and the certificate the client sent on `quic`,
/// judged by the CAs of the server its SNI chose (else the default
/// server's), as the TCP handshake judges it (`tls_accept::established`).
fn client_cert(
    quic: &quinn::Connection,
    server: &crate::config::ServerConf,
    g: &crate::config::ListenGroup,
) -> (std::borrow::Cow<'static, str>, Option<Arc<PeerCert>>) {
    type Chain = Vec<rustls::pki_types::CertificateDer<'static>>;
    let chain = quic
        .peer_identity()
        .and_then(|id| id.downcast::<Chain>().ok());
    let tls = server.tls.as_ref().or(g.servers[g.default].tls.as_ref());
    let verify = match tls.and_then(|t| t.client_auth.as_ref()) {
        Some(auth) => auth.verify(chain.as_deref().map(Vec::as_slice)),
        None => "NONE".into(),
    };
    let peer = chain
        .as_deref()
        .and_then(|c| c.first())
        .and_then(|c| PeerCert::parse(c))
        .map(Arc::new);
    (verify, peer)
}

/// The handshake of `incoming` on listen group `group`, within
/// `ssl_handshake_timeout` (else `client_header_timeout`): the connection
/// and what its TLS settled. When the address takes 0-RTT
/// (`ssl_early_data on`) the connection is served from the client's first
/// flight, once its ClientHello was read: requests in early data are told
/// apart by [`Settled::done`], and a watchdog closes a connection whose
/// handshake does not finish in time.
async fn handshake<H: Respond + 'static>(
    incoming: quinn::Incoming,
    group: usize,
    info: &ConnInfo,
    w: &Rc<WorkerEnv<H>>,
) -> Option<(quinn::Connection, Handshake)> {
    let g = &w.config.listens[group];
    let default = &g.servers[g.default];
    let timeout = default
        .tls
        .as_ref()
        .map_or(default.limits.header_timeout, |t| t.handshake_timeout);
    let early = endpoint::takes_early_data(g);
    let mut connecting = incoming.accept().ok()?;
    let done = if early {
        match tokio::time::timeout(timeout, connecting.handshake_data()).await {
            // A server's `into_0rtt` always succeeds.
            Ok(Ok(_)) => match connecting.into_0rtt() {
                Ok((c, accepted)) => Ok((c, Some(accepted))),
                Err(_) => Err(None),
            },
            Ok(Err(e)) => Err(Some(e)),
            Err(_) => Err(None),
        }
    } else {
        match tokio::time::timeout(timeout, connecting).await {
            Ok(Ok(c)) => Ok((c, None)),
            Ok(Err(e)) => Err(Some(e)),
            Err(_) => Err(None),
        }
    };
    let quic = match done {
        Ok((c, accepted)) => {
            if let Some(accepted) = accepted {
                spawn_watchdog(c.clone(), accepted, timeout, info, w);
            }
            c
        }
        Err(Some(e)) => {
            let what = format!("QUIC handshake failed ({e}) while SSL handshaking");
            log_info(w, info, &what);
            return None;
        }
        Err(None) => {
            log_info(w, info, HANDSHAKE_TIMED_OUT);
            return None;
        }
    };
    let hs = quic.handshake_data()?.downcast::<Handshake>().ok()?;
    Some((quic, *hs))
}

const HANDSHAKE_TIMED_OUT: &str =
    "client timed out (110: Connection timed out) while SSL handshaking";

/// Closes `quic` when its handshake, under way while 0-RTT requests are
/// served, does not finish within `timeout`.
fn spawn_watchdog<H: 'static>(
    quic: quinn::Connection,
    accepted: quinn::ZeroRttAccepted,
    timeout: Duration,
    info: &ConnInfo,
    w: &Rc<WorkerEnv<H>>,
) {
    let (w, id, peer, local) = (Rc::clone(w), info.id, info.peer, info.local);
    tokio::task::spawn_local(async move {
        if tokio::time::timeout(timeout, accepted).await.is_err() {
            let info = ConnInfo::accepted(id, peer, local);
            log_info(&w, &info, HANDSHAKE_TIMED_OUT);
            quic.close(quinn::VarInt::from_u32(0), b"");
        }
    });
}

/// The accept loop of an HTTP/3 connection: each request stream a task,
/// until the client leaves, an error, a graceful stop (GOAWAY, then the
/// open streams may finish within [`CLOSING_GRACE`]), or the
/// `keepalive_requests`th stream (GOAWAY at once, as NGINX sends it with
/// that stream; the streams accepted finish, later ones are rejected, and
/// the connection closes when the last is done).
async fn run<H: Respond + 'static>(
    mut h3c: h3::server::Connection<guard::Guarded, bytes::Bytes>,
    quic: &quinn::Connection,
    shared: &Rc<ConnShared>,
    w: &Rc<WorkerEnv<H>>,
) {
    let mut streams = JoinSet::new();
    let mut shutdown = w.shutdown.clone();
    let mut closing: Option<tokio::time::Instant> = None;
    let (mut accepted, mut goaway) = (0u64, false);
    loop {
        let grace = closing.map(|c| c + CLOSING_GRACE);
        tokio::select! {
            r = h3c.accept() => match r {
                Ok(Some(incoming)) => {
                    streams.spawn_local(stream::serve(incoming, Rc::clone(w), Rc::clone(shared)));
                    accepted += 1;
                    if accepted >= shared.max_requests && !goaway {
                        goaway = true;
                        let _ = h3c.shutdown(1).await;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    if !e.is_h3_no_error() && !is_quiet(&e) {
                        shared.log(w, format_args!("HTTP/3 connection error: {e}"));
                    }
                    break;
                }
            },
            Some(_) = streams.join_next(), if !streams.is_empty() => {
                if goaway && streams.is_empty() {
                    break;
                }
            }
            _ = shutdown.wait_for(Mode::Graceful), if closing.is_none() => {
                closing = Some(tokio::time::Instant::now());
                goaway = true;
                // h3 names the first stream not served as the last one
                // accepted plus this count (0 would tell the client its
                // last request is not served while it is).
                let _ = h3c.shutdown(1).await;
                if streams.is_empty() {
                    break;
                }
            }
            _ = tokio::time::sleep_until(grace.unwrap_or_else(tokio::time::Instant::now)), if grace.is_some() => break,
        }
    }
    // Streams still open when the connection ends: let them finish their
    // responses (they end with the connection's QUIC state otherwise).
    let deadline = tokio::time::Instant::now() + CLOSING_GRACE;
    while !streams.is_empty() {
        tokio::select! {
            _ = streams.join_next() => {}
            _ = tokio::time::sleep_until(deadline) => break,
        }
    }
    // The last responses may be with quinn still, not yet acknowledged,
    // and a close now (h3 closes when dropped) would lose them: a client
    // told to go away closes once it has them; else the grace ends it.
    if goaway {
        let _ = tokio::time::timeout(CLOSING_GRACE, quic.closed()).await;
    }
}

/// A connection end that is no error to log: an idle timeout, or the
/// client closing without an HTTP/3 error code.
fn is_quiet(e: &h3::error::ConnectionError) -> bool {
    let text = e.to_string();
    text.contains("timeout") || text.contains("closed by peer") || text.contains("Timeout")
}

fn log_info<H>(w: &WorkerEnv<H>, info: &ConnInfo, what: &str) {
    w.log.log_conn(
        Level::Info,
        Some(info.id),
        format_args!("{what}"),
        &format!(", client: {}, server: {}", info.peer.ip(), info.local),
    );
}
