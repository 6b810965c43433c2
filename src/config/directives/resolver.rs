//! `resolver ADDRESS ... [valid=time] [ipv6=on|off] [status_zone=zone]`
//! and `resolver_timeout` (issue 13): the name servers a `proxy_pass` URL
//! with variables is resolved through at run time
//! ([`crate::upstream::resolver`]). Addresses are taken as NGINX takes
//! them: an IP address with an optional port (53 by default), IPv6 in
//! brackets, or a name resolved now. In `stream` (the stream core
//! module's pair) they serve a stream `proxy_pass` with variables.

#[allow(unused_imports)]
use super::*;
use crate::upstream::resolver::Resolver;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("resolver", HSL | STREAM | SSRV, Arity::Min(1), set_resolver),
    d(
        "resolver_timeout",
        HSL | STREAM | SSRV,
        Arity::N(1),
        loc_time!(resolver_timeout),
    ),
];

fn set_resolver(b: &mut Build, d: &Directive) -> Res {
    let mut servers = Vec::new();
    let mut valid = None;
    let mut ipv6 = true;
    let bad = |p: &str| format!("invalid parameter \"{p}\"");
    for a in &d.args {
        if let Some(v) = a.strip_prefix("valid=") {
            valid = Some(parse_time(v).ok_or_else(|| bad(a))?);
        } else if let Some(v) = a.strip_prefix("ipv6=") {
            ipv6 = match v {
                "on" => true,
                "off" => false,
                _ => return Err(bad(a)),
            };
        } else if a.starts_with("status_zone=") {
            // NGINX Plus statistics: nothing to collect here.
        } else {
            servers.extend(server_addrs(a)?);
        }
    }
    let r = Arc::new(Resolver::new(servers, valid, ipv6));
    set_once(&mut b.loc().resolver, Some(r), d)
}

/// `ADDRESS[:PORT]` of a name server (port 53 unless given).
fn server_addrs(a: &str) -> Result<Vec<SocketAddr>, String> {
    let split = crate::upstream::split_url(&format!("http://{a}"))
        .ok()
        .filter(|s| s.uri.is_none() && s.unix_path().is_none())
        .ok_or_else(|| format!("invalid address \"{a}\" in resolver"))?;
    let host = split.host.trim_start_matches('[').trim_end_matches(']');
    let port = split.port.unwrap_or(53);
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map(Iterator::collect)
        .unwrap_or_default();
    if addrs.is_empty() {
        return Err(format!("host not found in resolver \"{a}\""));
    }
    Ok(addrs)
}
