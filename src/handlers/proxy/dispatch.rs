//! The `proxy_pass` content handler: through the cache when `proxy_cache`
//! is on and the request is the cache's, else straight through the two
//! steps ([`super::fetch`], [`super::into_response`]), the answer saved
//! on the way when `proxy_store` says so (`store.rs`).

use std::sync::Arc;

use super::fetch::fetch_with;
use super::knobs::Knobs;
use super::request::{FetchOptions, UpstreamError};
use super::response::{intercepted, into_response};
use super::{accel, cache, store};
use crate::handlers::outcome::{Env, Outcome};
use crate::http::context::RequestCtx;
use crate::upstream::ProxyPass;

/// The content handler.
pub async fn serve(ctx: &mut RequestCtx, env: &Env<'_>, pass: &Arc<ProxyPass>) -> Outcome {
    // The location is held here so the zone's template is borrowed, not
    // copied per request.
    let loc = Arc::clone(&ctx.loc);
    let Some(zone) = Knobs::of(&loc.s, pass.proto).cache.zone.as_ref() else {
        return serve_with(ctx, env, pass, &FetchOptions::default()).await;
    };
    match cache::serve(ctx, env, pass, zone).await {
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
    // Unless `proxy_ignore_client_abort on`, a client that closes before
    // the upstream answers ends both (NGINX's
    // `ngx_http_upstream_check_broken_connection`; a cacheable request,
    // which goes on to fill its entry, does not come here).
    let watch = !ctx.loc.s.proxy_ignore_client_abort;
    let fetched = tokio::select! {
        r = fetch_with(ctx, env, pass, opts) => Some(r),
        _ = env.client_gone(), if watch => None,
    };
    let Some(fetched) = fetched else {
        ctx.log(env.log).line(
            crate::log::Level::Info,
            format_args!(
                "client prematurely closed connection, so upstream connection is closed too"
            ),
        );
        ctx.status = 499;
        return Outcome::Close;
    };
    match fetched {
        Ok(up) => {
            let ignore = Arc::clone(Knobs::of(&ctx.loc.s, pass.proto).ignore_headers);
            if let Some(o) = accel::redirect(ctx, env, &ignore, up.headers()) {
                return o;
            }
            served(ctx, env, pass, up).await
        }
        Err(UpstreamError::Status(code)) => Outcome::Status(code),
        Err(UpstreamError::ClientGone) => Outcome::Close,
    }
}

/// The client's answer for an upstream response not cached (saved as a
/// file on the way with `proxy_store`).
async fn served(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    pass: &ProxyPass,
    up: crate::upstream::UpstreamResponse,
) -> Outcome {
    match intercepted(ctx, pass, up.status(), up.headers()) {
        Some(o) => o,
        None => {
            let k = Knobs::of(&ctx.loc.s, pass.proto);
            let (len, lm) = (up.content_length(), up.last_modified());
            let plan = store::plan(ctx, env, &k, up.status(), len, lm);
            // NGINX's not-modified filter is off for a response that is
            // not cached (`r->disable_not_modified = !u->cacheable`).
            let mut r = into_response(ctx, pass, up);
            r.no_not_modified = true;
            if let Some(plan) = plan {
                store::wrap(&mut r, plan).await;
            }
            Outcome::Send(r)
        }
    }
}
