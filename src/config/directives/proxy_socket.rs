//! The proxy module's socket and temp-file directives: `proxy_bind`,
//! `proxy_socket_keepalive` (applied when porter connects to a peer,
//! `handlers/proxy/fetch.rs`), and `proxy_max_temp_file_size`,
//! `proxy_temp_file_write_size`, which tune what porter does otherwise (a
//! notice says what it does instead), and `proxy_ignore_client_abort`.

#[allow(unused_imports)]
use super::*;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d(
        "proxy_bind",
        HSL | STREAM | SSRV,
        Arity::Range(1, 2),
        set_proxy_bind,
    ),
    d(
        "proxy_socket_keepalive",
        HSL | STREAM | SSRV,
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
    // Off (NGINX's default): a client that closes before the upstream
    // answers ends the request (`handlers/proxy/dispatch.rs`); once the
    // answer streams, a failed write to the client stops it either way,
    // and a cache fill always completes.
    d("proxy_ignore_client_abort", HSL, Arity::N(1), |b, d| {
        let v = flag(d)?;
        set_once(&mut b.loc().proxy_ignore_client_abort, v, d)
    }),
];

/// `proxy_bind address [transparent] | off`: the address may hold
/// variables (`$remote_addr` with `transparent`), checked per request.
fn set_proxy_bind(b: &mut Build, d: &Directive) -> Res {
    let v = bind_value(d)?;
    set_once(&mut b.loc().proxy_bind, v, d)
}

/// `proxy_bind`/`grpc_bind`'s value (None: `off`).
pub(super) fn bind_value(d: &Directive) -> Result<Option<ProxyBind>, String> {
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
