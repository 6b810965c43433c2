//! One HTTP/3 request stream, one request: its HEADERS become the same
//! request context the HTTP/1.1 loop and HTTP/2 build
//! (`stream_request.rs`: `$request` reads `GET /path HTTP/3.0`), the same
//! handlers answer it through [`Respond`], its DATA frames are the
//! request body ([`ClientBody::h3`]) and the response goes out as
//! HEADERS and DATA frames (`send.rs`). The access log line is the
//! HTTP/1.1 one. Each stream is a task of its own on the worker's loop.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use h3::server::RequestResolver;

use super::send::{Out, RecvBody};
use super::ConnShared;
use crate::http::body::ClientBody;
use crate::http::connection::{Respond, WorkerEnv};
use crate::http::context::RequestCtx;
use crate::http::http2::send::head;
use crate::http::response::{Body, Response};
use crate::http::stream_request;
use crate::http::writer::log_send_error;
use crate::log::Level;
use crate::metrics::{self, Gauge};

/// A request stream whose head is still to be read.
pub type Incoming = RequestResolver<super::guard::Guarded, Bytes>;

/// Serves the request stream `incoming`.
pub async fn serve<H: Respond>(incoming: Incoming, w: Rc<WorkerEnv<H>>, conn: Rc<ConnShared>) {
    let start = Instant::now();
    let resolved = tokio::time::timeout(conn.header_timeout, incoming.resolve_request()).await;
    let (req, stream) = match resolved {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            if !e.is_h3_no_error() {
                conn.log(&w, format_args!("client sent invalid HTTP/3 request: {e}"));
            }
            return;
        }
        Err(_) => {
            let what =
                "client timed out (110: Connection timed out) while reading client request headers";
            conn.log(&w, format_args!("{what}"));
            return;
        }
    };
    metrics::inc(&metrics::REQUESTS);
    let _writing = Gauge::new(&metrics::WRITING);
    let (parts, ()) = req.into_parts();
    let (send, recv) = stream.split();
    let n = conn.next_request();
    let (mut ctx, mut refused) =
        stream_request::start(&parts, "HTTP/3.0", &conn.info, conn.group, n, &w);
    ctx.start = start;
    // Read before the client's Finished: the request came in 0-RTT.
    ctx.early_data = !conn.settled.done();
    if ctx.early_data && refused.is_none() {
        refused = crate::http::tls_accept::too_early(&ctx);
    }
    let recv = RecvBody::start(recv).await;
    let body = RefCell::new(ClientBody::h3(recv, ctx.head.content_length));
    body.borrow_mut().set_timeout(ctx.loc.s.client_body_timeout);
    // Boxed, as the other protocols box a request's futures.
    let resp = Box::pin(stream_request::answer(&mut ctx, &body, &refused, &w)).await;
    let mut out = Out::new(
        send,
        ctx.loc.s.http3_stream_buffer_size,
        ctx.loc.s.send_timeout,
    );
    let Some(resp) = resp else {
        // `return 444`: the stream is reset, as NGINX closes it.
        out.reset();
        ctx.status = 444;
        ctx.write_access_log();
        return;
    };
    Box::pin(send_response(&mut ctx, resp, out, &w)).await;
    stream_request::discard_rest(&body, &ctx).await;
}

/// Sends `resp` as HEADERS and DATA frames, then logs the request.
async fn send_response<H: Respond>(
    ctx: &mut RequestCtx,
    mut resp: Response,
    mut out: Out,
    w: &WorkerEnv<H>,
) {
    let loc = Arc::clone(&ctx.loc);
    let s = &loc.s;
    if resp.status == 304 || resp.status == 204 || ctx.is_head() {
        resp.body = Body::Empty;
    }
    let (head, head_len) = head(&resp, s.server_tokens);
    if !s.access_log.is_empty() {
        ctx.sent_headers = resp.sent_headers();
    }
    ctx.status = resp.status;
    w.figures.ttfb.observe(ctx.start.elapsed());
    let mut r = out.head(head).await;
    if r.is_ok() {
        r = out.body(&mut resp).await;
    }
    if r.is_err() {
        out.reset();
    }
    ctx.body_bytes_sent = out.sent;
    ctx.bytes_sent = head_len + out.sent;
    ctx.completed = r.is_ok();
    if let Err(e) = &r {
        if e.kind() != std::io::ErrorKind::ConnectionReset {
            log_send_error(&w.log, ctx, e);
        } else {
            ctx.log_in(&w.log).line(
                Level::Info,
                format_args!("client closed stream while sending response: {e}"),
            );
        }
    }
    // Logged once the mirrors are done, as NGINX.
    ctx.wait_background().await;
    ctx.write_access_log();
}
