//! `grpc_pass` (NGINX's `ngx_http_grpc_module`): a gRPC call relayed to an
//! upstream over HTTP/2 (`upstream::http2`), streaming both ways with
//! flow control end to end, the upstream's trailers (`grpc-status`,
//! `grpc-message`, custom metadata) passed on as trailers.
//!
//! A thin protocol module on the proxy's upstream core: the target and
//! its group (`upstream` blocks, implicit groups, `resolver`), peer
//! selection and `max_fails` (`upstream::balance`), connecting with
//! `grpc_bind`/`grpc_socket_keepalive`, the TLS of `grpcs://`
//! (`proxy::target_with`, `proxy::handshake`), the `$upstream_*`
//! records and the error-log lines are the proxy's; what is gRPC's own is
//! the HTTP/2 exchange:
//!
//! | File | Holds |
//! |---|---|
//! | `mod.rs` | [`serve`]: the tries over the group's peers, `grpc_next_upstream` |
//! | `attempt.rs` | one try: a connection (pooled or new), the request, the response head |
//! | `request.rs` | the request's head (`grpc_set_header`) and the body relay |
//! | `response.rs` | the client's response: head, the body as a stream, trailers |
//!
//! Failures before the response head are NGINX's: 502 (504 on a
//! timeout) as a plain HTTP status, which gRPC clients read as
//! `UNAVAILABLE` (502, 503, 504) or `UNKNOWN`, with NGINX's log line.

mod attempt;
mod request;
mod response;

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Instant;

use self::request::{BodySource, UpRequest};
use crate::handlers::outcome::{Env, Outcome};
use crate::handlers::proxy::{
    intercepted_if, resolve_group, resolve_target, selection, target_with, TlsTarget, UpstreamError,
};
use crate::http::context::RequestCtx;
use crate::http::response::Response;
use crate::http::upstream_vars::TryRecord;
use crate::tls::client::ClientSpec;
use crate::upstream::{NextUpstream, ProxyPass, UpstreamGroup};

/// The content handler.
pub async fn serve(ctx: &mut RequestCtx, env: &Env<'_>, pass: &Arc<ProxyPass>) -> Outcome {
    match fetch(ctx, env, pass).await {
        Ok(resp) => {
            let on = ctx.loc.s.grpc_intercept_errors;
            match intercepted_if(on, ctx, resp.status, &resp.headers) {
                Some(o) => o,
                None => Outcome::Send(resp),
            }
        }
        Err(UpstreamError::Status(code)) => Outcome::Status(code),
        Err(UpstreamError::ClientGone) => Outcome::Close,
    }
}

/// The request as it goes to every peer tried.
pub(super) struct Outgoing {
    head: UpRequest,
    /// The body, until a try takes it (frames relayed can be sent once; a
    /// body read whole again and again).
    body: RefCell<Option<BodySource>>,
    tls: Option<TlsTarget>,
}

impl Outgoing {
    /// Whether a further try can send the whole request: a body read
    /// whole is sent by every try, relayed frames only by the first that
    /// took them.
    fn replayable(&self) -> bool {
        match &*self.body.borrow() {
            Some(_) => true,
            None => !self.head.had_body,
        }
    }

    /// The body for one try: a copy of a body read whole, the frames once.
    fn take_body(&self) -> Option<BodySource> {
        let mut b = self.body.borrow_mut();
        match &*b {
            Some(BodySource::Bytes(bytes)) => Some(BodySource::Bytes(bytes.clone())),
            _ => b.take(),
        }
    }
}

/// The upstream's response, the tries and their log lines done.
async fn fetch(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    pass: &ProxyPass,
) -> Result<Response, UpstreamError> {
    let loc = Arc::clone(&ctx.loc);
    let s = &loc.s;
    let target = resolve_target(ctx, env, pass)?;
    let group = resolve_group(ctx, env, target.group).await?;
    let tls = match target.tls {
        true => Some(target_with(
            ctx,
            env.log,
            &ssl_spec(s),
            s.grpc_ssl_name.as_ref(),
        )?),
        false => None,
    };
    let body = request::body(ctx, env).await?;
    let head = request::head(ctx, tls.is_some(), body.as_ref());
    let out = Outgoing {
        head,
        body: RefCell::new(body),
        tls,
    };
    try_peers(ctx, env, &group, &out).await
}

/// The location's `grpc_ssl_*` settings; `h2` offered by ALPN.
fn ssl_spec(s: &crate::config::LocSettings) -> ClientSpec {
    ClientSpec {
        verify: s.grpc_ssl_verify,
        trusted: s.grpc_ssl_trusted_certificate.clone(),
        verify_depth: usize::try_from(s.grpc_ssl_verify_depth).unwrap_or(usize::MAX),
        server_name: s.grpc_ssl_server_name,
        tls12: s.grpc_ssl_protocols.0,
        tls13: s.grpc_ssl_protocols.1,
        ciphers: Arc::clone(&s.grpc_ssl_ciphers),
        session_reuse: s.grpc_ssl_session_reuse,
        cert: None,
        alpn_h2: true,
    }
}

/// Tries the group's peers in balancing order until one answers or
/// `grpc_next_upstream` says stop (as the proxy's `try_peers`).
async fn try_peers(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    group: &UpstreamGroup,
    out: &Outgoing,
) -> Result<Response, UpstreamError> {
    let loc = Arc::clone(&ctx.loc);
    let s = &loc.s;
    let (mut sel, max_tries) = selection(ctx, group, s.grpc_next_upstream_tries);
    let started = Instant::now();
    let mut tries = 0;
    loop {
        let Some(peer) = group.select(&mut sel) else {
            return Err(no_live_upstreams(ctx, env, group));
        };
        tries += 1;
        let outcome = attempt::run(ctx, env, group, peer, out).await;
        // gRPC calls are POSTs: once sent they go again only with
        // `non_idempotent`, and only when the body can be sent again.
        let may_retry = |cond: u16, sent: bool| {
            s.grpc_next_upstream.has(cond)
                && tries < max_tries
                && (s.grpc_next_upstream_timeout.is_zero()
                    || started.elapsed() < s.grpc_next_upstream_timeout)
                && (!sent || s.grpc_next_upstream.has(NextUpstream::NON_IDEMPOTENT))
                && out.replayable()
        };
        match outcome {
            Ok(resp) => {
                let status = resp.status;
                if NextUpstream::status_bit(status).is_some_and(|b| may_retry(b, true)) {
                    group.release(peer, !matches!(status, 403 | 404));
                    continue;
                }
                group.release(peer, false);
                if let Some(u) = ctx.upstream.as_mut() {
                    u.headers = resp.headers.clone();
                }
                return Ok(resp);
            }
            Err(Ok(f)) => {
                group.release(peer, f.peer_failed);
                if may_retry(f.cond, f.sent) {
                    continue;
                }
                return Err(UpstreamError::Status(f.status));
            }
            Err(Err(e)) => {
                group.release(peer, false);
                return Err(e);
            }
        }
    }
}

/// Every peer is down or tried: NGINX's line, 502.
fn no_live_upstreams(ctx: &mut RequestCtx, env: &Env<'_>, group: &UpstreamGroup) -> UpstreamError {
    ctx.log(env.log)
        .with_upstream(&format!("grpc://{}", group.name))
        .error(format_args!(
            "no live upstreams while connecting to upstream"
        ));
    if let Some(u) = ctx.upstream.as_mut() {
        u.tries.push(TryRecord {
            addr: group.name.clone(),
            status: Some(502),
            ..Default::default()
        });
    }
    UpstreamError::Status(502)
}
