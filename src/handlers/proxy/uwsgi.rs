//! What goes to a uwsgi application (`uwsgi_pass`): one packet — the
//! `uwsgi_param` lines rendered (`if_not_empty` ones left out when empty),
//! then the client's headers as `HTTP_*`, as FastCGI's `PARAMS` are built
//! ([`super::fastcgi::cgi_params`]), and `uwsgi_string` after them — then
//! the body as is. The packet is
//! `upstream::uwsgi`'s; the rest of the exchange is the proxy's.

use std::cell::RefCell;
use std::sync::Arc;

use super::fastcgi::cgi_params;
use super::request::{request_body, FetchOptions, ReqBody, UpstreamError};
use crate::handlers::outcome::Env;
use crate::http::body::ClientBody;
use crate::http::context::RequestCtx;
use crate::log::Level;
use crate::upstream::uwsgi;

/// The packet (with a body read whole appended) and how the body travels.
pub async fn build_request(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    client_body: Option<&RefCell<ClientBody<'_>>>,
    opts: &FetchOptions,
) -> Result<(Vec<u8>, ReqBody), UpstreamError> {
    let buffering = ctx.loc.s.uwsgi.request_buffering;
    let body = request_body(ctx, env, client_body, None, true, buffering).await?;
    let loc = Arc::clone(&ctx.loc);
    let s = &loc.s.uwsgi;
    let params = cgi_params(ctx, s, opts);
    let vars = params.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes()));
    let mut head = Vec::new();
    if let Err(e) = uwsgi::packet(
        &mut head,
        (s.modifier1, s.modifier2),
        vars,
        s.string.as_bytes(),
    ) {
        ctx.log(env.log).line(Level::Alert, format_args!("{e}"));
        return Err(UpstreamError::Status(500));
    }
    if let ReqBody::Buffered(b) = &body {
        head.extend_from_slice(b);
    }
    Ok((head, body))
}
