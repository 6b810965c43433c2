//! NGINX's realip module: `set_real_ip_from`, `real_ip_header`,
//! `real_ip_recursive` (http, server, location, with NGINX's arguments,
//! errors and inheritance: a level with no `set_real_ip_from` takes its
//! parent's whole list); and the proxy's `proxy_protocol`, which NGINX
//! has in its stream module only. `set_real_ip_from` is also the stream
//! realip module's one directive (stream, stream server: the PROXY
//! header's address is the client's). Applied in `handlers/realip.rs`,
//! `stream/mod.rs` and `handlers/proxy/fetch.rs`; `listen ...
//! proxy_protocol` is in `http.rs`.

#[allow(unused_imports)]
use super::*;
use crate::access::realip::RealIpHeader;
use crate::access::rules::{self, Net};

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d(
        "set_real_ip_from",
        HSL | STREAM | SSRV,
        Arity::N(1),
        set_real_ip_from,
    ),
    d("real_ip_header", HSL, Arity::N(1), |b, d| {
        let v = RealIpHeader::parse(&d.args[0]);
        set_once(&mut b.loc().real_ip_header, v, d)
    }),
    d(
        "real_ip_recursive",
        HSL,
        Arity::N(1),
        loc_flag!(real_ip_recursive),
    ),
    d(
        "proxy_protocol",
        HSL,
        Arity::N(1),
        loc_flag!(proxy_protocol),
    ),
];

/// `set_real_ip_from ADDR[/BITS] | unix: | HOST`: a host name is resolved
/// now, each of its addresses trusted alone.
fn set_real_ip_from(b: &mut Build, d: &Directive) -> Res {
    let arg = &d.args[0];
    let nets: Vec<Net> = match rules::parse_net(arg) {
        Some((Net::All, _)) | None => resolve(arg)?,
        Some((net, low_bits)) => {
            if low_bits {
                warn(d, &format!("low address bits of {arg} are meaningless"));
            }
            vec![net]
        }
    };
    let list = b.loc().real_ip_from.get_or_insert_with(Default::default);
    Arc::make_mut(list).extend(nets);
    Ok(())
}

fn resolve(host: &str) -> Result<Vec<Net>, String> {
    let not_found = || format!("host not found in set_real_ip_from \"{host}\"");
    let addrs = (host, 0).to_socket_addrs().map_err(|_| not_found())?;
    let nets: Vec<Net> = addrs
        .map(|a| match a.ip() {
            std::net::IpAddr::V4(v4) => Net::V4(u32::from(v4), u32::MAX),
            std::net::IpAddr::V6(v6) => Net::V6(u128::from(v6), u128::MAX),
        })
        .collect();
    if nets.is_empty() {
        return Err(not_found());
    }
    Ok(nets)
}
