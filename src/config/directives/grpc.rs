//! `ngx_http_grpc_module`'s directives: `grpc_pass` (the target kept as
//! `proxy_pass` keeps one, so the upstream groups, their balancing and
//! `resolver` are the proxy's), `grpc_set_header`, and the `grpc_*`
//! settings every upstream module has (`app_rows::upstream_rows!`,
//! `upstream_ssl_rows!`), kept in `LocSettings::grpc`, an `AppSettings`
//! inherited field by field like NGINX's: a server may set
//! `proxy_read_timeout` and `grpc_read_timeout` apart.

use super::app_rows::{upstream_rows, upstream_ssl_rows};
#[allow(unused_imports)]
use super::*;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("grpc_pass", LOC, Arity::N(1), set_grpc_pass),
    d("grpc_set_header", HSL, Arity::N(2), |b, d| {
        let v = template(&d.args[1])?;
        let slot = &mut b.loc().grpc.set_header;
        let mut list = slot.as_deref().cloned().unwrap_or_default();
        list.push((d.args[0].clone(), v));
        *slot = Some(Arc::new(list));
        Ok(())
    }),
];

/// The `grpc_*` twins of the proxy's settings, shared with FastCGI,
/// uwsgi and SCGI.
pub(super) static COMMON: &[Spec] = &upstream_rows!(grpc, "grpc");

/// `grpc_ssl_*`.
pub(super) static SSL: &[Spec] = &upstream_ssl_rows!(grpc, "grpc");

/// The `proxy_pass` form of a `grpc_pass` address: `grpc://` is
/// `http://`, `grpcs://` `https://`, and an address without a scheme is
/// `grpc://` (NGINX's `ngx_http_grpc_pass`).
fn as_proxy_url(url: &str) -> Result<String, String> {
    let lower = url.to_ascii_lowercase();
    if let Some(rest) = lower.strip_prefix("grpc://").map(|_| &url[7..]) {
        return Ok(format!("http://{rest}"));
    }
    if let Some(rest) = lower.strip_prefix("grpcs://").map(|_| &url[8..]) {
        return Ok(format!("https://{rest}"));
    }
    if url.starts_with('$') {
        return Err(format!(
            "a variable as the scheme of \"grpc_pass\" is not supported by porter: write \"grpc://{url}\" or \"grpcs://{url}\""
        ));
    }
    if lower.contains("://") {
        return Err(format!("invalid URL prefix in \"{url}\""));
    }
    Ok(format!("http://{url}"))
}

/// `grpc_pass [grpc[s]://]HOST[:PORT] | unix:PATH`: an `upstream` name,
/// else an address resolved now; with variables, rendered per request.
fn set_grpc_pass(b: &mut Build, d: &Directive) -> Res {
    use crate::upstream::{split_url, ProxyPass, ProxyTarget};
    super::proxy::first_proxy_pass(b, d)?;
    let url = as_proxy_url(&d.args[0])?;
    let groups = Arc::new(b.upstreams.clone());
    let location = b.location().path.clone();
    let pass = if url.contains('$') {
        ProxyPass {
            target: ProxyTarget::Dynamic(template(&url)?),
            uri: None,
            proxy_host: String::new(),
            proxy_port: "80".to_string(),
            tls: false,
            location,
            groups,
            all_groups: Arc::clone(&b.all_upstreams),
            redirect_default: None,
            proto: crate::upstream::Protocol::Grpc,
        }
    } else {
        let split = split_url(&url)?;
        if split.tls && split.unix_path().is_some() {
            return Err("grpcs:// to a unix socket is not supported by porter".to_string());
        }
        let shown = &url[crate::upstream::url_scheme(&url).map_or(0, |(n, _)| n)..];
        // `:authority`: the host with its port whenever one is written
        // (NGINX's `glcf->host`), `localhost` for a unix socket.
        let proxy_host = match (split.port, split.unix_path()) {
            (Some(p), None) => format!("{}:{p}", split.host),
            _ => split.proxy_host(),
        };
        let group = match b.upstreams.iter().find(|g| g.name == split.host) {
            Some(g) => Arc::clone(g),
            None => super::proxy::implicit_group(b, &split, shown, &proxy_host)?,
        };
        ProxyPass {
            target: ProxyTarget::Group(group),
            proxy_port: split.proxy_port(),
            tls: split.tls,
            uri: None,
            proxy_host,
            location,
            groups,
            all_groups: Arc::clone(&b.all_upstreams),
            redirect_default: None,
            proto: crate::upstream::Protocol::Grpc,
        }
    };
    b.location().handler = Handler::Grpc(Arc::new(pass));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::as_proxy_url;

    #[test]
    fn grpc_schemes_map_to_the_proxy_ones() {
        assert_eq!(as_proxy_url("grpc://a:1").unwrap(), "http://a:1");
        assert_eq!(as_proxy_url("GRPCS://a:1").unwrap(), "https://a:1");
        assert_eq!(as_proxy_url("127.0.0.1:9").unwrap(), "http://127.0.0.1:9");
        assert_eq!(as_proxy_url("unix:/s").unwrap(), "http://unix:/s");
        assert_eq!(as_proxy_url("grpc://$host:1").unwrap(), "http://$host:1");
        assert!(as_proxy_url("http://a").is_err());
        assert!(as_proxy_url("$u").is_err());
    }
}
