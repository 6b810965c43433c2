//! WebSocket over HTTP/2 (RFC 8441): an extended CONNECT stream whose
//! request became an HTTP/1.1 upgrade to the upstream (`request.rs`) and
//! got its `101` is answered `200` (HEADERS without END_STREAM) and then
//! carries the tunnel: the stream's DATA frames are the client's side of
//! it, the upstream's socket the other, as `http::tunnel` joins an
//! HTTP/1.1 connection to it. NGINX has no such thing (an HTTP/2
//! WebSocket there is refused and the browser falls back to HTTP/1.1).
//!
//! Flow control is the backpressure both ways: a DATA frame's window is
//! given back only once its bytes were written to the upstream, and the
//! upstream is read again only once `h2` granted capacity for what came
//! before (`send::Out`, each wait bounded by `send_timeout`). The
//! client's END_STREAM half-closes the upstream (its write is shut down),
//! the upstream's end sends END_STREAM, as the HTTP/1.1 tunnel passes a
//! half-close on; a reset of the stream, or a failure of the upstream
//! (then the stream is reset with CONNECT_ERROR), ends both. The idle
//! timeout (`proxy_read_timeout`, pushed on by reads of either side) and
//! the access log line are the HTTP/1.1 tunnel's.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::RecvStream;

use super::send::{self, Out};
use crate::http::context::RequestCtx;
use crate::http::response::Response;
use crate::http::tunnel::{read_next, timed_out, Fault, Idle, TunnelPeer, TunnelTimeouts, Upgrade};
use crate::log::{ErrorLog, Level};

/// Answers the stream whose upstream switched protocols (`resp`, with its
/// upgrade) and runs the tunnel until both sides ended or one failed;
/// then logs the request (status 200, `$bytes_sent` counting the DATA
/// sent through the tunnel).
pub async fn serve(
    ctx: &mut RequestCtx,
    mut resp: Response,
    respond: &mut SendResponse<Bytes>,
    recv: RecvStream,
    log: &ErrorLog,
) {
    let Some(up) = resp.upgrade.take() else {
        return;
    };
    let loc = std::sync::Arc::clone(&ctx.loc);
    let s = &loc.s;
    // The 101's handshake fields answer the key porter made up.
    resp.status = 200;
    resp.headers
        .retain(|(n, _)| !n.eq_ignore_ascii_case("sec-websocket-accept"));
    let (head, head_len) = send::head(&resp, s.server_tokens);
    ctx.status = 200;
    let Ok(stream) = respond.send_response(head, false) else {
        ctx.write_access_log();
        return;
    };
    let mut out = Out::new(stream, s.http2_chunk_size, s.send_timeout);
    let try_log = up.log.clone();
    let fault = Box::pin(run(&mut out, recv, *up)).await;
    if let Some(f) = fault {
        if f != Fault::ClientTimedOut {
            out.reset_with(h2::Reason::CONNECT_ERROR);
        }
        if let Some(text) = f.log_text() {
            let log = try_log.unwrap_or_else(|| ctx.log(log));
            log.line(Level::Info, format_args!("{text}"));
        }
    }
    ctx.completed = fault.is_none();
    ctx.bytes_sent = head_len + out.sent;
    ctx.body_bytes_sent = out.sent;
    ctx.limits.held.clear();
    ctx.write_access_log();
}

/// Both directions at once; the first fault ends the tunnel.
async fn run(out: &mut Out, recv: RecvStream, up: Upgrade) -> Option<Fault> {
    let idle = Idle::new(up.timeouts.idle);
    let peer = &*up.peer;
    let size = up.buffer.max(1024);
    let received = up.received.as_deref();
    let to_client = async {
        let mut buf = up.early;
        loop {
            if !buf.is_empty() {
                let data = Bytes::copy_from_slice(&buf);
                buf.clear();
                out.owned(data, false).await.map_err(client_fault)?;
            }
            let read = |b: &mut Vec<u8>| peer.try_read(b, size);
            let n = read_next(&mut buf, size, &idle, read, || peer.readable()).await?;
            if let Some(rx) = received {
                rx.fetch_add(n as u64, Ordering::Relaxed);
            }
            if n == 0 {
                return out.owned(Bytes::new(), true).await.map_err(client_fault);
            }
        }
    };
    let to_peer = client_to_peer(recv, peer, &up.timeouts, &idle);
    tokio::try_join!(to_client, to_peer).err()
}

/// The client's DATA frames to the upstream, each frame's window given
/// back once it was written; END_STREAM shuts the upstream's write down.
async fn client_to_peer(
    mut recv: RecvStream,
    peer: &dyn TunnelPeer,
    t: &TunnelTimeouts,
    idle: &Idle,
) -> Result<(), Fault> {
    loop {
        let data = loop {
            match tokio::time::timeout_at(idle.deadline(), recv.data()).await {
                Ok(d) => break d,
                Err(_) if idle.deadline() <= tokio::time::Instant::now() => {
                    return Err(Fault::UpstreamTimedOut)
                }
                Err(_) => {}
            }
        };
        let data = match data {
            Some(Ok(d)) => d,
            Some(Err(_)) => return Err(Fault::Failed),
            None => {
                peer.shutdown_write();
                return Ok(());
            }
        };
        idle.touch();
        match peer.write(&data, t.to_peer).await {
            Ok(()) => {}
            Err(e) if timed_out(&e) => return Err(Fault::UpstreamTimedOut),
            Err(_) => return Err(Fault::Failed),
        }
        let _ = recv.flow_control().release_capacity(data.len());
    }
}

/// A failed send to the client: its timeout, or the stream gone.
fn client_fault(e: std::io::Error) -> Fault {
    if timed_out(&e) {
        Fault::ClientTimedOut
    } else {
        Fault::Failed
    }
}
