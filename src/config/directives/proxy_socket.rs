//! The proxy module's socket and temp-file directives: `proxy_bind`,
//! `proxy_socket_keepalive` (applied when porter connects to a peer,
//! `handlers/proxy/fetch.rs`), and `proxy_max_temp_file_size`,
//! `proxy_temp_file_write_size`, `proxy_ignore_client_abort`, which tune
//! what porter does otherwise (a notice says what it does instead).

#[allow(unused_imports)]
use super::*;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("proxy_bind", HSL, Arity::Range(1, 2), set_proxy_bind),
    d(
        "proxy_socket_keepalive",
        HSL,
        Arity::N(1),
        loc_flag!(proxy_socket_keepalive),
    ),
    d("proxy_max_temp_file_size", HSL, Arity::N(1), |b, d| {
        super::tuning::size_only(b, d)?;
        super::internals::notice(
            d,
            "has no effect: porter never buffers a response in a temporary file; a slow client holds the upstream back instead",
        );
        Ok(())
    }),
    d("proxy_temp_file_write_size", HSL, Arity::N(1), |b, d| {
        super::tuning::size_only(b, d)?;
        super::internals::notice(
            d,
            "has no effect: porter never buffers a response in a temporary file",
        );
        Ok(())
    }),
    d("proxy_ignore_client_abort", HSL, Arity::N(1), |b, d| {
        super::tuning::flag_only(b, d)?;
        super::internals::notice(
            d,
            "has no effect: porter waits for the upstream's answer whether or not the client is still there (as \"on\") and stops reading the upstream once a write to the client fails (as \"off\"); a cache fill always completes",
        );
        Ok(())
    }),
];

/// `proxy_bind address [transparent] | off`: the address may hold
/// variables (`$remote_addr` with `transparent`), checked per request.
fn set_proxy_bind(b: &mut Build, d: &Directive) -> Res {
    let v = parse_bind(d)?;
    set_once(&mut b.loc().proxy_bind, v, d)
}

/// The value of `proxy_bind` (and `fastcgi_bind`): `None` for `off`.
pub(super) fn parse_bind(d: &Directive) -> Result<Option<ProxyBind>, String> {
    let v = match d.args.as_slice() {
        [off] if off == "off" => None,
        [a] => Some(ProxyBind {
            addr: template(a)?,
            transparent: false,
        }),
        [a, t] if t == "transparent" => Some(ProxyBind {
            addr: template(a)?,
            transparent: true,
        }),
        [_, p] => return Err(format!("invalid parameter \"{p}\"")),
        _ => unreachable!("arity 1-2"),
    };
    if let Some(ProxyBind { addr, .. }) = &v {
        if addr.is_literal() && ProxyBind::parse(addr.raw()).is_none() {
            return Err(format!("invalid address \"{}\"", addr.raw()));
        }
    }
    Ok(v)
}
