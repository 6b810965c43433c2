//! Where a request is proxied to: the `upstream` group a literal
//! `proxy_pass` names, or the one a URL with variables renders to (an
//! `upstream` block by name, or an address known only now), and the
//! request's upstream variables (`$proxy_host`, `$proxy_port`).

use std::sync::Arc;
use std::time::Duration;

use super::request::UpstreamError;
use crate::handlers::Env;
use crate::http::context::RequestCtx;
use crate::http::upstream_vars::UpstreamVars;
use crate::log::Level;
use crate::upstream::{self, balance::PeerSet, ProxyPass, ProxyTarget, UpstreamGroup};

/// Where the target of this request resolved.
pub struct Target {
    /// The group whose peers are tried.
    pub group: Arc<UpstreamGroup>,
    /// The URI part of the `proxy_pass` URL, if any.
    pub url_uri: Option<String>,
    /// The URL had variables (its URI part is sent as is).
    pub dynamic: bool,
    /// `https://`: connections to the group speak TLS.
    pub tls: bool,
}

/// Sets up `$proxy_host` and the rest of the request's upstream variables
/// (the default cache key needs them before anything is sent).
pub fn prepare(ctx: &mut RequestCtx, env: &Env<'_>, pass: &ProxyPass) -> Result<(), UpstreamError> {
    resolve_target(ctx, env, pass).map(|_| ())
}

fn cache_status(ctx: &RequestCtx) -> Option<crate::cache::CacheStatus> {
    ctx.upstream.as_ref().and_then(|u| u.cache_status)
}

/// The request's target, with its upstream variables set.
pub fn resolve_target(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    pass: &ProxyPass,
) -> Result<Target, UpstreamError> {
    let t = match &pass.target {
        ProxyTarget::Dynamic(t) => t,
        ProxyTarget::Group(g) => {
            ctx.upstream = Some(Box::new(UpstreamVars {
                proxy_host: pass.proxy_host.clone(),
                proxy_port: pass.proxy_port.to_string(),
                cache_status: cache_status(ctx),
                ..Default::default()
            }));
            return Ok(Target {
                group: Arc::clone(g),
                url_uri: pass.uri.clone(),
                dynamic: false,
                tls: pass.tls,
            });
        }
    };
    let url = t.render(ctx);
    let split = match upstream::split_url(&url) {
        Ok(s) => s,
        Err(e) => {
            log(ctx, env, format_args!("{e}"));
            return Err(UpstreamError::Status(500));
        }
    };
    let proxy_host = split.proxy_host();
    let port = split.port_or_default();
    ctx.upstream = Some(Box::new(UpstreamVars {
        proxy_host: proxy_host.clone(),
        proxy_port: port.to_string(),
        cache_status: cache_status(ctx),
        ..Default::default()
    }));
    let group = match pass.groups.iter().find(|g| g.name == split.host) {
        Some(g) => Arc::clone(g),
        None => address_group(ctx, env, &split.host, proxy_host, port)?,
    };
    Ok(Target {
        group,
        url_uri: split.uri,
        dynamic: true,
        tls: split.tls,
    })
}

fn log(ctx: &RequestCtx, env: &Env<'_>, msg: std::fmt::Arguments<'_>) {
    ctx.error_log(env.log)
        .log_conn(Level::Error, Some(ctx.conn.id), msg, &ctx.log_context());
}

/// A one-request group for an address known only now (a URL with
/// variables that names no `upstream` block); a name is 502, as NGINX
/// without a `resolver`.
fn address_group(
    ctx: &RequestCtx,
    env: &Env<'_>,
    host: &str,
    proxy_host: String,
    port: u16,
) -> Result<Arc<UpstreamGroup>, UpstreamError> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let Ok(ip) = bare.parse::<std::net::IpAddr>() else {
        log(
            ctx,
            env,
            format_args!("no resolver defined to resolve {host}"),
        );
        return Err(UpstreamError::Status(502));
    };
    Ok(Arc::new(UpstreamGroup {
        method: Default::default(),
        id: upstream::balance::next_id(),
        name: proxy_host.clone(),
        primary: PeerSet::new(vec![upstream::PeerSpec {
            server: proxy_host,
            addr: std::net::SocketAddr::new(ip, port),
            weight: 1,
            max_fails: 1,
            fail_timeout: Duration::from_secs(10),
            down: false,
        }]),
        backup: PeerSet::new(Vec::new()),
        hash: None,
        keepalive: 0,
        keepalive_timeout: Duration::from_secs(60),
        keepalive_requests: 1000,
    }))
}
