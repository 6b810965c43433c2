//! `grpc_pass` (NGINX's `ngx_http_grpc_module`): a gRPC call relayed to an
//! upstream over HTTP/2 (`upstream::http2`), streaming both ways with
//! flow control end to end, the upstream's trailers (`grpc-status`,
//! `grpc-message`, custom metadata) passed on as trailers.
//!
//! A thin protocol module on the proxy's upstream core: the target and
//! its group (`upstream` blocks, implicit groups, `resolver`), peer
//! selection and `max_fails` (`upstream::balance`), the loop over peers
//! with `grpc_next_upstream` (`proxy::try_peers`), the settings
//! (`LocSettings::grpc`, an `AppSettings`, read through `proxy::Knobs`),
//! connecting with `grpc_bind`/`grpc_socket_keepalive`, the TLS of
//! `grpcs://` (`proxy::target_with`, `proxy::handshake`), the
//! `$upstream_*` records and the error-log lines are the proxy's; what is
//! gRPC's own is the HTTP/2 exchange:
//!
//! | File | Holds |
//! |---|---|
//! | `mod.rs` | [`serve`]: the call as the proxy's tries see it (`proxy::PeerTry`: `grpc_next_upstream` by the proxy's loop) |
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

use self::request::{BodySource, UpRequest};
use crate::h1::fields::{Fields, HeaderLines};
use crate::handlers::outcome::{Env, Outcome};
use crate::handlers::proxy::{
    app_spec, intercepted_if, resolve_group, resolve_target, target_with, try_peers, Knobs,
    PeerTry, TlsTarget, TryResult, UpstreamError,
};
use crate::http::context::RequestCtx;
use crate::http::response::Response;
use crate::upstream::{PeerRef, Protocol, ProxyPass, UpstreamGroup};

/// The content handler.
pub async fn serve(ctx: &mut RequestCtx, env: &Env<'_>, pass: &Arc<ProxyPass>) -> Outcome {
    match fetch(ctx, env, pass).await {
        Ok(resp) => {
            let on = Knobs::of(&ctx.loc.s, Protocol::Grpc).intercept_errors;
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
    let g = &loc.s.grpc;
    let target = resolve_target(ctx, env, pass)?;
    let group = resolve_group(ctx, env, target.group).await?;
    let tls = match target.tls {
        // `h2` offered by ALPN.
        true => Some(target_with(
            ctx,
            env.log,
            &app_spec(g, true),
            g.ssl_name.as_ref(),
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

/// A gRPC call is a POST: once sent it goes again only with
/// `grpc_next_upstream non_idempotent`, and only when its body can be
/// sent again.
impl PeerTry for Outgoing {
    type Response = Response;

    fn proto(&self) -> Protocol {
        Protocol::Grpc
    }

    async fn attempt(
        &self,
        ctx: &mut RequestCtx,
        env: &Env<'_>,
        group: &UpstreamGroup,
        peer: PeerRef,
    ) -> TryResult<Response> {
        attempt::run(ctx, env, group, peer, self).await
    }

    fn idempotent(&self) -> bool {
        false
    }

    fn resendable(&self, _: &RequestCtx) -> bool {
        self.replayable()
    }

    fn status(r: &Response) -> u16 {
        r.status
    }

    fn headers(r: &Response) -> Fields {
        Fields::from_pairs("", r.headers.lines())
    }

    fn no_peer_url(&self, group: &UpstreamGroup) -> String {
        format!("grpc://{}", group.name)
    }
}
