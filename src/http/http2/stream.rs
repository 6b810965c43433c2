//! One HTTP/2 stream, one request: its HEADERS become the same request
//! context the HTTP/1.1 loop builds (`request.rs`), the same handlers
//! answer it through [`Respond`] (static files with ranges and
//! conditionals, `return`, `error_page`, the proxy and its cache,
//! metrics, stub_status), its DATA frames are the request body
//! ([`ClientBody::h2`]), and the response goes out as HEADERS and DATA
//! frames (`send.rs`). The access log line is the HTTP/1.1 one.
//!
//! Each stream is a task of its own on the worker's loop, so a stream
//! waiting on the disk, an upstream or its window holds no loop time and
//! the others go on. A client that resets the stream while the handlers
//! work stops them (their future is dropped) and counts against the
//! connection's reset budget (rapid reset, `mod.rs`).
//!
//! A WebSocket extended CONNECT (RFC 8441) has no body for the handlers:
//! its DATA frames are kept for the tunnel its `101` opens (`tunnel.rs`).

use std::cell::RefCell;
use std::future::poll_fn;
use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::RecvStream;

use super::send::{self, Out};
use super::ConnShared;
use crate::http::body::ClientBody;
use crate::http::connection::{Respond, WorkerEnv};
use crate::http::context::RequestCtx;
use crate::http::response::{Body, Response};
use crate::http::stream_request;
use crate::http::writer::log_send_error;
use crate::metrics::{self, Gauge};

/// Serves the stream whose request is `req`, answering on `respond`.
pub async fn serve<H: Respond>(
    req: http::Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    w: Rc<WorkerEnv<H>>,
    conn: Rc<ConnShared>,
) {
    metrics::inc(&metrics::REQUESTS);
    let _writing = Gauge::new(&metrics::WRITING);
    let start = Instant::now();
    let (parts, recv) = req.into_parts();
    let n = conn.next_request();
    let (mut ctx, refused) =
        stream_request::start(&parts, "HTTP/2.0", &conn.info, conn.group, n, &w);
    ctx.start = start;
    let content_length = ctx.head.content_length;
    let (body, tunnel_recv) = if ctx.head.extended_connect {
        (ClientBody::memory(Vec::new()), Some(recv))
    } else {
        (ClientBody::h2(recv, content_length), None)
    };
    let body = RefCell::new(body);
    body.borrow_mut().set_timeout(ctx.loc.s.client_body_timeout);
    // Boxed, as the HTTP/1.1 loop boxes a request's futures: the task
    // spawned per stream stays small until its handlers run.
    let resp = {
        let answer = Box::pin(stream_request::answer(&mut ctx, &body, &refused, &w));
        // The handlers run until they answer or the client resets the stream.
        tokio::select! {
            biased;
            r = answer => r,
            _ = poll_fn(|cx| respond.poll_reset(cx)) => {
                conn.client_reset();
                return;
            }
        }
    };
    let Some(resp) = resp else {
        // `return 444`: the stream is reset, as NGINX closes it.
        respond.send_reset(h2::Reason::INTERNAL_ERROR);
        ctx.status = 444;
        ctx.write_access_log();
        return;
    };
    if let (true, Some(recv)) = (resp.upgrade.is_some(), tunnel_recv) {
        Box::pin(super::tunnel::serve(
            &mut ctx,
            resp,
            &mut respond,
            recv,
            &w.log,
        ))
        .await;
        return;
    }
    Box::pin(send_response(&mut ctx, resp, respond, &w, &conn)).await;
    // A body the handlers left unread (a POST to a static file answered
    // 404 or 405) is read and dropped, as NGINX discards it, so the
    // client finishes sending and the stream closes cleanly; dropped
    // unread, the stream would be reset with CANCEL, which clients report
    // as an error although the response was complete.
    stream_request::discard_rest(&body, &ctx).await;
}

/// Sends `resp` as HEADERS and DATA frames, then logs the request.
async fn send_response<H: Respond>(
    ctx: &mut RequestCtx,
    mut resp: Response,
    mut respond: SendResponse<Bytes>,
    w: &WorkerEnv<H>,
    conn: &ConnShared,
) {
    let loc = Arc::clone(&ctx.loc);
    let s = &loc.s;
    if resp.status == 304 || resp.status == 204 || ctx.is_head() {
        resp.body = Body::Empty;
    }
    let (head, head_len) = send::head(&resp, s.server_tokens);
    if !s.access_log.is_empty() {
        ctx.sent_headers = resp.sent_headers();
    }
    ctx.status = resp.status;
    w.figures.ttfb.observe(ctx.start.elapsed());
    let empty = matches!(resp.body, Body::Empty);
    let sent = match respond.send_response(head, empty) {
        Ok(stream) => {
            let mut out = Out::new(stream, s.http2_chunk_size, s.send_timeout);
            let r = if empty {
                Ok(())
            } else {
                out.body(&mut resp).await
            };
            if r.is_err() {
                out.reset();
            }
            (out.sent, r)
        }
        Err(e) => (0, Err(io::Error::new(io::ErrorKind::ConnectionReset, e))),
    };
    ctx.body_bytes_sent = sent.0;
    ctx.bytes_sent = head_len + sent.0;
    ctx.completed = sent.1.is_ok();
    if let Err(e) = &sent.1 {
        if send::is_reset(e) {
            conn.client_reset();
        } else {
            log_send_error(&w.log, ctx, e);
        }
    }
    // Logged once the mirrors are done, as NGINX.
    ctx.wait_background().await;
    ctx.write_access_log();
}
