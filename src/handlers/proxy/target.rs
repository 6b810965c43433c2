//! Where a request is proxied to: the `upstream` group a literal
//! `proxy_pass` names, or the one a URL with variables renders to (an
//! `upstream` block by name, an address, the implicit group of another
//! `proxy_pass` with that host and port, or a name resolved now through
//! `resolver` without blocking the loop), and the request's upstream
//! variables (`$proxy_host`, `$proxy_port`).

use std::sync::Arc;

use super::request::UpstreamError;
use crate::handlers::outcome::Env;
use crate::http::context::RequestCtx;
use crate::http::upstream_vars::UpstreamVars;
use crate::upstream::{self, ProxyPass, ProxyTarget, UpstreamGroup};

/// The group a target's peers come from.
pub enum TargetGroup {
    /// Known: an `upstream` block, or an address.
    Ready(Arc<UpstreamGroup>),
    /// A name for `resolver` ([`resolve_group`]).
    Name {
        /// The host as rendered.
        host: String,
        /// The port connected to.
        port: u16,
        /// `$proxy_host`, the group's name.
        proxy_host: String,
    },
}

/// Where the target of this request resolved.
pub struct Target {
    /// The group whose peers are tried.
    pub group: TargetGroup,
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
                proxy_port: pass.proxy_port.clone(),
                cache_status: cache_status(ctx),
                ..Default::default()
            }));
            return Ok(Target {
                group: TargetGroup::Ready(Arc::clone(g)),
                url_uri: pass.uri.clone(),
                dynamic: false,
                tls: pass.tls,
            });
        }
    };
    let mut url = t.render(ctx);
    if pass.proto.is_app() {
        // `fastcgi_pass $addr`: an address or `upstream` name, no scheme
        // (`uwsgi_pass` may say `uwsgi://`).
        if let Err(e) = upstream::app_url(pass.proto, &mut url) {
            ctx.log(env.log).error(format_args!("{e}"));
            return Err(UpstreamError::Status(500));
        }
    }
    let split = match upstream::split_url(&url) {
        Ok(s) => s,
        Err(e) => {
            ctx.log(env.log).error(format_args!("{e}"));
            return Err(UpstreamError::Status(500));
        }
    };
    let proxy_host = split.proxy_host();
    let port = split.port_or_default();
    ctx.upstream = Some(Box::new(UpstreamVars {
        proxy_host: proxy_host.clone(),
        proxy_port: split.proxy_port(),
        cache_status: cache_status(ctx),
        ..Default::default()
    }));
    let group = match pass.groups.iter().find(|g| g.name == split.host) {
        Some(g) => TargetGroup::Ready(Arc::clone(g)),
        None => match address(&split.host, port) {
            Some(addr) => TargetGroup::Ready(one_shot_group(vec![addr], proxy_host)),
            None => match implicit(pass, &proxy_host) {
                Some(g) => TargetGroup::Ready(g),
                None => TargetGroup::Name {
                    host: split.host.clone(),
                    port,
                    proxy_host,
                },
            },
        },
    };
    Ok(Target {
        group,
        url_uri: split.uri,
        dynamic: true,
        tls: split.tls,
    })
}

/// The implicit group another `proxy_pass` made for the same host and
/// port (`proxy_pass http://localhost:8080` names the group
/// `localhost:8080`), as NGINX finds a rendered host in its upstream list
/// before asking the resolver.
fn implicit(pass: &ProxyPass, proxy_host: &str) -> Option<Arc<UpstreamGroup>> {
    pass.all_groups
        .get()
        .iter()
        .find(|g| g.name.eq_ignore_ascii_case(proxy_host))
        .cloned()
}

/// The address of an IP or `unix:PATH` host, if it is one.
fn address(host: &str, port: u16) -> Option<upstream::PeerAddr> {
    if let Some(path) = upstream::unix_path(host) {
        // split_url checked the path.
        return upstream::PeerAddr::unix(path).ok();
    }
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let ip = bare.parse::<std::net::IpAddr>().ok()?;
    Some(std::net::SocketAddr::new(ip, port).into())
}

/// The group of a target: a name goes through the location's `resolver`
/// (502 with NGINX's line when there is none or the name does not
/// resolve).
pub async fn resolve_group(
    ctx: &RequestCtx,
    env: &Env<'_>,
    group: TargetGroup,
) -> Result<Arc<UpstreamGroup>, UpstreamError> {
    let (host, port, proxy_host) = match group {
        TargetGroup::Ready(g) => return Ok(g),
        TargetGroup::Name {
            host,
            port,
            proxy_host,
        } => (host, port, proxy_host),
    };
    let Some(resolver) = ctx.loc.s.resolver.clone() else {
        ctx.log(env.log)
            .error(format_args!("no resolver defined to resolve {host}"));
        return Err(UpstreamError::Status(502));
    };
    match resolver.resolve(&host, ctx.loc.s.resolver_timeout).await {
        Ok(ips) => {
            let addrs = ips
                .into_iter()
                .map(|ip| std::net::SocketAddr::new(ip, port).into())
                .collect();
            Ok(one_shot_group(addrs, proxy_host))
        }
        Err(e) => {
            ctx.log(env.log)
                .error(format_args!("{host} could not be resolved ({e})"));
            Err(UpstreamError::Status(502))
        }
    }
}

/// A one-request group over addresses known only now (a URL with
/// variables that names no `upstream` block), tried in turn as NGINX
/// tries a resolved name's addresses.
fn one_shot_group(addrs: Vec<upstream::PeerAddr>, proxy_host: String) -> Arc<UpstreamGroup> {
    let name = match addrs.as_slice() {
        [a] if a.is_unix() => a.to_string(),
        _ => proxy_host,
    };
    let server = name.clone();
    Arc::new(UpstreamGroup::implicit(name, &server, addrs))
}
