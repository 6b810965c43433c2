//! `ngx_http_grpc_module`'s directives: `grpc_pass` (the target kept as
//! `proxy_pass` keeps one, so the upstream groups, their balancing and
//! `resolver` are the proxy's) and the `grpc_*` settings of a gRPC
//! request (src/handlers/grpc, src/upstream/h2.rs). Each is its own
//! location setting, inherited one by one like NGINX's: a server may set
//! `proxy_read_timeout` and `grpc_read_timeout` apart.

#[allow(unused_imports)]
use super::*;

/// Adds a name (lowercase) to a list setting (`grpc_hide_header`, ...).
fn push_name(slot: &mut Option<Arc<Vec<String>>>, name: &str) {
    let mut list = slot.as_deref().cloned().unwrap_or_default();
    list.push(name.to_ascii_lowercase());
    *slot = Some(Arc::new(list));
}

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("grpc_pass", LOC, Arity::N(1), set_grpc_pass),
    d("grpc_set_header", HSL, Arity::N(2), |b, d| {
        let v = template(&d.args[1])?;
        let slot = &mut b.loc().grpc_set_header;
        let mut list = slot.as_deref().cloned().unwrap_or_default();
        list.push((d.args[0].clone(), v));
        *slot = Some(Arc::new(list));
        Ok(())
    }),
    d("grpc_hide_header", HSL, Arity::N(1), |b, d| {
        push_name(&mut b.loc().grpc_hide_header, &d.args[0]);
        Ok(())
    }),
    d("grpc_pass_header", HSL, Arity::N(1), |b, d| {
        push_name(&mut b.loc().grpc_pass_header, &d.args[0]);
        Ok(())
    }),
    d(
        "grpc_connect_timeout",
        HSL,
        Arity::N(1),
        loc_time!(grpc_connect_timeout),
    ),
    d(
        "grpc_read_timeout",
        HSL,
        Arity::N(1),
        loc_time!(grpc_read_timeout),
    ),
    d(
        "grpc_send_timeout",
        HSL,
        Arity::N(1),
        loc_time!(grpc_send_timeout),
    ),
    d("grpc_next_upstream", HSL, Arity::Min(1), |b, d| {
        let v = crate::upstream::NextUpstream::parse(&d.args)?;
        set_once(&mut b.loc().grpc_next_upstream, v, d)
    }),
    d("grpc_next_upstream_tries", HSL, Arity::N(1), |b, d| {
        let n = number(d, &d.args[0])?;
        set_once(&mut b.loc().grpc_next_upstream_tries, n, d)
    }),
    d(
        "grpc_next_upstream_timeout",
        HSL,
        Arity::N(1),
        loc_time!(grpc_next_upstream_timeout),
    ),
    d(
        "grpc_buffer_size",
        HSL,
        Arity::N(1),
        loc_size!(grpc_buffer_size),
    ),
    d(
        "grpc_intercept_errors",
        HSL,
        Arity::N(1),
        loc_flag!(grpc_intercept_errors),
    ),
    d(
        "grpc_socket_keepalive",
        HSL,
        Arity::N(1),
        loc_flag!(grpc_socket_keepalive),
    ),
    d("grpc_bind", HSL, Arity::Range(1, 2), |b, d| {
        let v = super::proxy_socket::bind_value(d)?;
        set_once(&mut b.loc().grpc_bind, v, d)
    }),
    d(
        "grpc_ssl_verify",
        HSL,
        Arity::N(1),
        loc_flag!(grpc_ssl_verify),
    ),
    d("grpc_ssl_trusted_certificate", HSL, Arity::N(1), |b, d| {
        if d.args[0].contains('$') {
            return Err(format!(
                "variables in \"{}\" are not supported by porter",
                d.name
            ));
        }
        let certs = crate::tls::client::load_trusted(&b.full_path(&d.args[0]))?;
        set_once(&mut b.loc().grpc_ssl_trusted_certificate, Some(certs), d)
    }),
    d(
        "grpc_ssl_server_name",
        HSL,
        Arity::N(1),
        loc_flag!(grpc_ssl_server_name),
    ),
    d("grpc_ssl_name", HSL, Arity::N(1), |b, d| {
        let v = template(&d.args[0])?;
        set_once(&mut b.loc().grpc_ssl_name, Some(v), d)
    }),
    d("grpc_ssl_protocols", HSL, Arity::Min(1), |b, d| {
        let v = super::proxy_ssl::protocols(d)?;
        set_once(&mut b.loc().grpc_ssl_protocols, v, d)
    }),
    d("grpc_ssl_ciphers", HSL, Arity::N(1), |b, d| {
        let v = super::proxy_ssl::select_ciphers(d)?;
        set_once(&mut b.loc().grpc_ssl_ciphers, v, d)
    }),
    d(
        "grpc_ssl_session_reuse",
        HSL,
        Arity::N(1),
        loc_flag!(grpc_ssl_session_reuse),
    ),
    d("grpc_ssl_verify_depth", HSL, Arity::N(1), |b, d| {
        let n = number(d, &d.args[0])?;
        set_once(&mut b.loc().grpc_ssl_verify_depth, n, d)
    }),
];

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
            redirect_default: None,
            // gRPC has its own relay (handlers/grpc); the proxy core's
            // request encoder is never used for it.
            proto: crate::upstream::Protocol::Http,
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
            redirect_default: None,
            proto: crate::upstream::Protocol::Http,
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
