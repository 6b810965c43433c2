//! Reverse-proxy directives: `proxy_pass` and the `proxy_*` settings of a
//! proxied request (src/handlers/proxy, src/upstream).

#[allow(unused_imports)]
use super::*;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("proxy_pass", LOC | LMT, Arity::N(1), set_proxy_pass),
    d("proxy_set_header", HSL, Arity::N(2), |b, d| {
        let v = template(&d.args[1])?;
        let slot = &mut b.loc().proxy_set_header;
        let mut list = slot.as_deref().cloned().unwrap_or_default();
        list.push((d.args[0].clone(), v));
        *slot = Some(Arc::new(list));
        Ok(())
    }),
    d("proxy_http_version", HSL, Arity::N(1), |b, d| {
        let v = match d.args[0].as_str() {
            "1.0" => false,
            "1.1" => true,
            v => return Err(format!("invalid value \"{v}\"")),
        };
        set_once(&mut b.loc().proxy_http11, v, d)
    }),
    d(
        "proxy_connect_timeout",
        HSL,
        Arity::N(1),
        loc_time!(proxy_connect_timeout),
    ),
    d(
        "proxy_read_timeout",
        HSL,
        Arity::N(1),
        loc_time!(proxy_read_timeout),
    ),
    d(
        "proxy_send_timeout",
        HSL,
        Arity::N(1),
        loc_time!(proxy_send_timeout),
    ),
    d("proxy_next_upstream", HSL, Arity::Min(1), |b, d| {
        let v = crate::upstream::NextUpstream::parse(&d.args)?;
        set_once(&mut b.loc().proxy_next_upstream, v, d)
    }),
    d("proxy_next_upstream_tries", HSL, Arity::N(1), |b, d| {
        let n = number(d, &d.args[0])?;
        set_once(&mut b.loc().proxy_next_upstream_tries, n, d)
    }),
    d(
        "proxy_next_upstream_timeout",
        HSL,
        Arity::N(1),
        loc_time!(proxy_next_upstream_timeout),
    ),
    d(
        "proxy_buffering",
        HSL,
        Arity::N(1),
        loc_flag!(proxy_buffering),
    ),
    d(
        "proxy_force_ranges",
        HSL,
        Arity::N(1),
        loc_flag!(proxy_force_ranges),
    ),
    d(
        "proxy_pass_request_headers",
        HSL,
        Arity::N(1),
        loc_flag!(proxy_pass_request_headers),
    ),
    d(
        "proxy_pass_request_body",
        HSL,
        Arity::N(1),
        loc_flag!(proxy_pass_request_body),
    ),
    d("proxy_hide_header", HSL, Arity::N(1), |b, d| {
        let slot = &mut b.loc().proxy_hide_header;
        let mut list = slot.as_deref().cloned().unwrap_or_default();
        list.push(d.args[0].to_ascii_lowercase());
        *slot = Some(Arc::new(list));
        Ok(())
    }),
    d("proxy_pass_header", HSL, Arity::N(1), |b, d| {
        let slot = &mut b.loc().proxy_pass_header;
        let mut list = slot.as_deref().cloned().unwrap_or_default();
        list.push(d.args[0].to_ascii_lowercase());
        *slot = Some(Arc::new(list));
        Ok(())
    }),
    d(
        "proxy_intercept_errors",
        HSL,
        Arity::N(1),
        loc_flag!(proxy_intercept_errors),
    ),
    d(
        "proxy_buffer_size",
        HSL,
        Arity::N(1),
        loc_size!(proxy_buffer_size),
    ),
    d(
        "proxy_limit_rate",
        HSL,
        Arity::N(1),
        loc_size!(proxy_limit_rate),
    ),
    d(
        "proxy_redirect",
        HSL,
        Arity::Range(1, 2),
        set_proxy_redirect,
    ),
];

/// `proxy_pass http://NAME|HOST[:PORT][URI]`: an `upstream` name, else an
/// address resolved now (NGINX's implicit upstream); with variables, the
/// URL is rendered per request.
pub(super) fn set_proxy_pass(b: &mut Build, d: &Directive) -> Res {
    use crate::upstream::{split_url, ProxyPass, ProxyTarget};
    let kind = first_proxy_pass(b, d)?;
    let url = &d.args[0];
    let groups = Arc::new(b.upstreams.clone());
    let location = b.location().path.clone();
    // With variables, NGINX checks the URL once rendered (`http:/$uri`
    // is a URL): so does porter, per request.
    let pass = if url.contains('$') {
        ProxyPass {
            proto: crate::upstream::Protocol::Http,
            target: ProxyTarget::Dynamic(template(url)?),
            uri: None,
            proxy_host: String::new(),
            proxy_port: "80".to_string(),
            tls: false,
            location,
            groups,
            all_groups: Arc::clone(&b.all_upstreams),
            redirect_default: None,
        }
    } else {
        let split = uri_part_allowed(kind, split_url(url)?)?;
        if split.tls && split.unix_path().is_some() {
            return Err("https:// to a unix socket is not supported by porter".to_string());
        }
        let shown = &url[crate::upstream::url_scheme(url).map_or(0, |(n, _)| n)..];
        let proxy_host = split.proxy_host();
        let group = match b.upstreams.iter().find(|g| g.name == split.host) {
            Some(g) => Arc::clone(g),
            None => implicit_group(b, &split, shown, &proxy_host)?,
        };
        let redirect_default = Some(match &split.uri {
            Some(_) => (url.clone(), location.clone()),
            None => (format!("{url}/"), "/".to_string()),
        });
        ProxyPass {
            proto: crate::upstream::Protocol::Http,
            target: ProxyTarget::Group(group),
            proxy_port: split.proxy_port(),
            tls: split.tls,
            uri: split.uri,
            proxy_host,
            location,
            groups,
            all_groups: Arc::clone(&b.all_upstreams),
            redirect_default,
        }
    };
    b.location().handler = Handler::Proxy(Arc::new(pass));
    Ok(())
}

/// NGINX's implicit upstream of a `proxy_pass` address: one per
/// address and port, resolved now.
pub(super) fn implicit_group(
    b: &mut Build,
    split: &crate::upstream::SplitUrl,
    shown: &str,
    proxy_host: &str,
) -> Result<Arc<UpstreamGroup>, String> {
    let key = format!("{}:{}", split.host, split.port_or_default());
    if let Some(g) = b.implicit_upstreams.get(&key) {
        return Ok(Arc::clone(g));
    }
    let addrs = resolve_upstream(&split.host, Some(split.port_or_default()), shown)?;
    // NGINX names a unix socket's implicit group by its path.
    let name = split
        .unix_path()
        .map_or(proxy_host.to_string(), str::to_string);
    let g = Arc::new(UpstreamGroup::implicit(name, proxy_host, addrs));
    b.implicit_upstreams.insert(key, Arc::clone(&g));
    Ok(g)
}

/// The location's kind, unless it already has a `proxy_pass` (an `if`
/// block may replace the one it inherits).
pub(super) fn first_proxy_pass(b: &mut Build, d: &Directive) -> Result<LocationKind, String> {
    let (kind, handler) = (b.location().kind, &b.location().handler);
    if matches!(handler, Handler::Proxy(_) | Handler::Grpc(_)) && kind != LocationKind::If {
        return Err(dup(d));
    }
    // A request body larger than `client_body_buffer_size` is written to
    // its temp file on the `default` pool under `aio off`.
    b.default_pool_used = true;
    b.cache.proxies = true;
    Ok(kind)
}

/// NGINX refuses a URI part where no location prefix can be replaced.
fn uri_part_allowed(
    kind: LocationKind,
    split: crate::upstream::SplitUrl,
) -> Result<crate::upstream::SplitUrl, String> {
    let prefixless = matches!(
        kind,
        LocationKind::Regex | LocationKind::Named | LocationKind::If
    );
    if split.uri.is_some() && prefixless {
        return Err("\"proxy_pass\" cannot have URI part in location given by regular expression, or inside named location, or inside \"if\" statement, or inside \"limit_except\" block".into());
    }
    Ok(split)
}

/// `proxy_redirect off | default | redirect replacement` (lines add up;
/// `off` clears them); `redirect` is a prefix with variables, or `~regex`
/// (`~*` caseless) whose captures the replacement may use.
pub(super) fn set_proxy_redirect(b: &mut Build, d: &Directive) -> Res {
    use crate::upstream::RedirectRule;
    let rule = match d.args.as_slice() {
        [a] if a == "off" => None,
        [a] if a == "default" => Some(RedirectRule::Default),
        [a] => return Err(format!("invalid parameter \"{a}\"")),
        [from, to] if from.starts_with('~') => {
            let (re, caseless) = match from[1..].strip_prefix('*') {
                Some(re) => (re, true),
                None => (&from[1..], false),
            };
            let re = crate::vars::regex::Regex::compile(re, caseless)?;
            Some(RedirectRule::Regex(Arc::new(re), template(to)?))
        }
        [from, to] => Some(RedirectRule::Replace(template(from)?, template(to)?)),
        _ => unreachable!("arity checked"),
    };
    let slot = &mut b.loc().proxy_redirect;
    let mut list = match (&rule, slot.as_deref()) {
        (None, _) | (_, None) => Vec::new(),
        (Some(_), Some(v)) => v.clone(),
    };
    list.extend(rule);
    *slot = Some(Arc::new(list));
    Ok(())
}
