//! What a request on a multiplexed connection (an HTTP/2 or HTTP/3
//! stream) goes through between its decoded head and its response, the
//! same for both protocols: the [`RequestHead`] built from the `http`
//! crate's parts (`http2/request.rs`), the request context with its
//! server and location, the refusals the HTTP/1.1 loop would give (a bad
//! head, a bad URI, `ssl_verify_client`), the handlers asked through
//! [`Respond`], and the discard of a body they left unread. Each
//! protocol's adapter (`http2/stream.rs`, `http3/stream.rs`) owns only
//! its framing: reading the stream, writing HEADERS and DATA.

use std::cell::RefCell;

use http::request::Parts;

use super::body::ClientBody;
use super::connection::{Respond, WorkerEnv};
use super::context::{ConnInfo, RequestCtx, RequestUri};
use super::http2::request::head_of;
use super::request::RequestHead;
use super::response::Response;
use super::tls_accept::client_cert_refusal;
use crate::log::Level;

/// A refusal decided before the handlers: the status and the reason
/// logged.
pub type Refusal = Option<(u16, String)>;

/// The context of request `n` of connection `conn` (on listen group
/// `group`) whose head is `parts`, sent as `version` (`HTTP/2.0`,
/// `HTTP/3.0`), and the refusal it gets, if any.
pub fn start<H>(
    parts: &Parts,
    version: &str,
    conn: &ConnInfo,
    group: usize,
    n: u64,
    w: &WorkerEnv<H>,
) -> (Box<RequestCtx>, Refusal) {
    let listen = &w.config.listens[group];
    match head_of(parts, version) {
        Ok(h) => {
            let (ctx, uri) = RequestCtx::start(conn, listen, n, h);
            let ctx = Box::new(ctx);
            let refused = if uri == RequestUri::Normalised {
                client_cert_refusal(&ctx).or_else(|| {
                    ctx.early_data
                        .then(|| super::tls_accept::too_early(&ctx))
                        .flatten()
                })
            } else {
                Some((400, "client sent invalid request".to_string()))
            };
            (ctx, refused)
        }
        Err(e) => {
            let line = format!("{} {} {version}", parts.method, parts.uri);
            let h = RequestHead::unparsed(&line, None);
            let server = &listen.servers[listen.default];
            let ctx = Box::new(RequestCtx::new(conn, n, h, server));
            (ctx, Some((e.status(), e.to_string())))
        }
    }
}

/// The handlers' response to `ctx` (the refusal's page when it was
/// refused); `None` for `return 444`.
pub async fn answer<'a, H: Respond>(
    ctx: &mut RequestCtx,
    body: &'a RefCell<ClientBody<'a>>,
    refused: &Refusal,
    w: &'a WorkerEnv<H>,
) -> Option<Response> {
    let handlers = &w.handlers;
    match refused {
        Some((code, why)) => {
            ctx.log_in(&w.log).line(
                Level::Info,
                format_args!("{why} while reading client request headers"),
            );
            handlers.respond_status(ctx, Some(body), *code).await
        }
        None => handlers.respond(ctx, body).await,
    }
}

/// Reads and drops what is left of the request body within the
/// location's `lingering_timeout`/`lingering_time`, as NGINX discards a
/// body nobody read, so the client finishes sending and the stream
/// closes cleanly.
// The handlers' future, the only other user of the cell, has finished.
#[allow(clippy::await_holding_refcell_ref)]
pub async fn discard_rest(body: &RefCell<ClientBody<'_>>, ctx: &RequestCtx) {
    let mut body = body.borrow_mut();
    if !body.is_done() {
        let s = &ctx.loc.s;
        let _ = body
            .discard_within(s.lingering_timeout, s.lingering_time)
            .await;
    }
}
