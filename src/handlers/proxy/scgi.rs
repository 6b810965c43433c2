//! What goes to an SCGI application (`scgi_pass`): the netstring —
//! `CONTENT_LENGTH`, the `scgi_param` lines rendered, the client's headers
//! as `HTTP_*`, as FastCGI's `PARAMS` are built
//! ([`super::fastcgi::cgi_params`]) — then the body as is. The netstring
//! is `upstream::scgi`'s; the rest of the exchange is the proxy's.

use std::cell::RefCell;
use std::sync::Arc;

use super::fastcgi::cgi_params;
use super::request::{request_body, FetchOptions, ReqBody, UpstreamError};
use crate::handlers::outcome::Env;
use crate::http::body::ClientBody;
use crate::http::context::RequestCtx;
use crate::upstream::scgi;

/// The netstring (with a body read whole appended) and how the body
/// travels.
pub async fn build_request(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    client_body: Option<&RefCell<ClientBody<'_>>>,
    opts: &FetchOptions,
) -> Result<(Vec<u8>, ReqBody), UpstreamError> {
    let buffering = ctx.loc.s.scgi.request_buffering;
    let body = request_body(ctx, env, client_body, None, true, buffering).await?;
    let loc = Arc::clone(&ctx.loc);
    let params = cgi_params(ctx, &loc.s.scgi, opts);
    let vars = params.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes()));
    // NGINX sends the client's length (a chunked body read whole has its
    // length by then), even when `scgi_pass_request_body off` keeps the
    // body back.
    let length = match &body {
        ReqBody::Buffered(b) => b.len() as u64,
        ReqBody::Spooled(f) => f.len(),
        _ => ctx.head.content_length.unwrap_or(0),
    };
    let mut head = Vec::new();
    scgi::netstring(&mut head, length, vars);
    if let ReqBody::Buffered(b) = &body {
        head.extend_from_slice(b);
    }
    Ok((head, body))
}
