//! The `proxy_pass` content handler: through the cache when `proxy_cache`
//! is on and the request is the cache's, else straight through the two
//! steps ([`super::fetch`], [`super::into_response`]).

use std::sync::Arc;

use super::cache;
use super::fetch::fetch_with;
use super::request::{FetchOptions, UpstreamError};
use super::response::{intercepted, into_response};
use crate::handlers::{Env, Outcome};
use crate::http::context::RequestCtx;
use crate::upstream::ProxyPass;

/// The content handler.
pub async fn serve(ctx: &mut RequestCtx, env: &Env<'_>, pass: &Arc<ProxyPass>) -> Outcome {
    let zone = match pass.proto {
        crate::upstream::Protocol::Http => ctx.loc.s.proxy_cache.clone(),
        crate::upstream::Protocol::FastCgi => None,
    };
    let Some(zone) = zone else {
        return serve_with(ctx, env, pass, &FetchOptions::default()).await;
    };
    match cache::serve(ctx, env, pass, &zone).await {
        Some(o) => o,
        // A method the cache does not take, or a `proxy_cache $var` that
        // renders empty: upstream, with the cache's header rules.
        None => {
            let opts = FetchOptions {
                cache_headers: true,
                ..Default::default()
            };
            serve_with(ctx, env, pass, &opts).await
        }
    }
}

/// Proxies without the cache (a request the cache does not take).
pub async fn serve_with(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    pass: &Arc<ProxyPass>,
    opts: &FetchOptions,
) -> Outcome {
    match fetch_with(ctx, env, pass, opts).await {
        Ok(up) => match intercepted(ctx, pass, up.status(), up.headers()) {
            Some(o) => o,
            None => {
                // NGINX's not-modified filter is off for a response that is
                // not cached (`r->disable_not_modified = !u->cacheable`).
                let mut r = into_response(ctx, pass, up);
                r.no_not_modified = true;
                Outcome::Send(r)
            }
        },
        Err(UpstreamError::Status(code)) => Outcome::Status(code),
        Err(UpstreamError::ClientGone) => Outcome::Close,
    }
}
