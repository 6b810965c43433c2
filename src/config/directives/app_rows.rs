//! The directives every upstream module has, each a twin of a `proxy_*`
//! setting (`*_connect_timeout`, `*_next_upstream`, `*_hide_header`,
//! ...): [`upstream_rows!`] writes their rows for one module (`fastcgi`,
//! `uwsgi`, `scgi`, `grpc`) and its `LocSettings` field, an `AppSettings`
//! (`config/app_upstream.rs`); [`app_rows!`] those of the CGI-like three
//! alone (`*_param`, `*_buffering`, ...), [`upstream_ssl_rows!`] the
//! `*_ssl_*` ones (gRPC's); [`set_pass`] is `fastcgi_pass`, `uwsgi_pass`
//! and `scgi_pass`. Buffer sizes and temp files are checked and accepted:
//! porter streams every body in bounded pieces.

use super::*;
use crate::config::app_upstream::{AppBuilder, AppParam};
use crate::upstream::Protocol;

/// The rows every upstream module has, `proxy_*`'s twins (FastCGI,
/// uwsgi, SCGI and gRPC alike): the timeouts, `PREFIX_next_upstream*`,
/// `PREFIX_buffer_size`, the header lists and the socket settings, kept
/// in `b.loc().FIELD`.
macro_rules! upstream_rows {
    ($field:ident, $p:literal) => {
        [
            d(concat!($p, "_connect_timeout"), HSL, Arity::N(1), |b, d| {
                let v = time(d, &d.args[0])?;
                set_once(&mut b.loc().$field.connect_timeout, v, d)
            }),
            d(concat!($p, "_send_timeout"), HSL, Arity::N(1), |b, d| {
                let v = time(d, &d.args[0])?;
                set_once(&mut b.loc().$field.send_timeout, v, d)
            }),
            d(concat!($p, "_read_timeout"), HSL, Arity::N(1), |b, d| {
                let v = time(d, &d.args[0])?;
                set_once(&mut b.loc().$field.read_timeout, v, d)
            }),
            d(concat!($p, "_next_upstream"), HSL, Arity::Min(1), |b, d| {
                let v = crate::upstream::NextUpstream::parse(&d.args)?;
                set_once(&mut b.loc().$field.next_upstream, v, d)
            }),
            d(
                concat!($p, "_next_upstream_tries"),
                HSL,
                Arity::N(1),
                |b, d| {
                    let n = number(d, &d.args[0])?;
                    set_once(&mut b.loc().$field.next_upstream_tries, n, d)
                },
            ),
            d(
                concat!($p, "_next_upstream_timeout"),
                HSL,
                Arity::N(1),
                |b, d| {
                    let v = time(d, &d.args[0])?;
                    set_once(&mut b.loc().$field.next_upstream_timeout, v, d)
                },
            ),
            d(concat!($p, "_buffer_size"), HSL, Arity::N(1), |b, d| {
                let v = size(d, &d.args[0])?;
                set_once(&mut b.loc().$field.buffer_size, v, d)
            }),
            d(
                concat!($p, "_intercept_errors"),
                HSL,
                Arity::N(1),
                |b, d| {
                    let v = flag(d)?;
                    set_once(&mut b.loc().$field.intercept_errors, v, d)
                },
            ),
            d(
                concat!($p, "_socket_keepalive"),
                HSL,
                Arity::N(1),
                |b, d| {
                    let v = flag(d)?;
                    set_once(&mut b.loc().$field.socket_keepalive, v, d)
                },
            ),
            d(concat!($p, "_hide_header"), HSL, Arity::N(1), |b, d| {
                super::app_rows::add_name(&mut b.loc().$field.hide_header, d)
            }),
            d(concat!($p, "_pass_header"), HSL, Arity::N(1), |b, d| {
                super::app_rows::add_name(&mut b.loc().$field.pass_header, d)
            }),
            d(
                concat!($p, "_ignore_headers"),
                HSL,
                Arity::Min(1),
                |b, d| {
                    let v = d.args.iter().map(|a| a.to_ascii_lowercase()).collect();
                    set_once(&mut b.loc().$field.ignore_headers, Arc::new(v), d)
                },
            ),
            d(concat!($p, "_bind"), HSL, Arity::Range(1, 2), |b, d| {
                let v = super::proxy_socket::bind_value(d)?;
                set_once(&mut b.loc().$field.bind, v, d)
            }),
        ]
    };
}
pub(super) use upstream_rows;

/// The rows of the CGI-like modules alone (FastCGI, uwsgi, SCGI; gRPC has
/// none of them): `PREFIX_param`, buffering, what of the request is
/// passed, `PREFIX_limit_rate`, kept in `b.loc().FIELD`.
macro_rules! app_rows {
    ($field:ident, $p:literal) => {
        [
            d(concat!($p, "_param"), HSL, Arity::Range(2, 3), |b, d| {
                super::app_rows::add_param(&mut b.loc().$field, d)
            }),
            d(concat!($p, "_buffering"), HSL, Arity::N(1), |b, d| {
                let v = flag(d)?;
                set_once(&mut b.loc().$field.buffering, v, d)
            }),
            d(
                concat!($p, "_request_buffering"),
                HSL,
                Arity::N(1),
                |b, d| {
                    let v = flag(d)?;
                    set_once(&mut b.loc().$field.request_buffering, v, d)
                },
            ),
            d(
                concat!($p, "_pass_request_headers"),
                HSL,
                Arity::N(1),
                |b, d| {
                    let v = flag(d)?;
                    set_once(&mut b.loc().$field.pass_request_headers, v, d)
                },
            ),
            d(
                concat!($p, "_pass_request_body"),
                HSL,
                Arity::N(1),
                |b, d| {
                    let v = flag(d)?;
                    set_once(&mut b.loc().$field.pass_request_body, v, d)
                },
            ),
            d(concat!($p, "_limit_rate"), HSL, Arity::N(1), |b, d| {
                let v = size(d, &d.args[0])?;
                set_once(&mut b.loc().$field.limit_rate, v, d)
            }),
            // Accepted, no effect: bodies stream in bounded pieces, never
            // to a temp file.
            d(
                concat!($p, "_buffers"),
                HSL,
                Arity::N(2),
                super::tuning::buffers,
            ),
            d(
                concat!($p, "_busy_buffers_size"),
                HSL,
                Arity::N(1),
                super::tuning::size_only,
            ),
            d(
                concat!($p, "_max_temp_file_size"),
                HSL,
                Arity::N(1),
                super::tuning::size_only,
            ),
            d(
                concat!($p, "_temp_file_write_size"),
                HSL,
                Arity::N(1),
                super::tuning::size_only,
            ),
            d(
                concat!($p, "_ignore_client_abort"),
                HSL,
                Arity::N(1),
                super::tuning::flag_only,
            ),
            d(
                concat!($p, "_force_ranges"),
                HSL,
                Arity::N(1),
                super::tuning::flag_only,
            ),
        ]
    };
}
pub(super) use app_rows;

/// `PREFIX_ssl_*` (gRPC's `grpcs://`): TLS to the upstream as
/// `proxy_ssl_*` configures it, kept in `b.loc().FIELD.ssl_*`; the client
/// certificate pair is loaded once the settings merged
/// (`proxy_ssl::load_client_certs`).
macro_rules! upstream_ssl_rows {
    ($field:ident, $p:literal) => {
        [
            d(concat!($p, "_ssl_verify"), HSL, Arity::N(1), |b, d| {
                let v = flag(d)?;
                set_once(&mut b.loc().$field.ssl_verify, v, d)
            }),
            d(
                concat!($p, "_ssl_trusted_certificate"),
                HSL,
                Arity::N(1),
                |b, d| {
                    let f = super::proxy_ssl::file_at(b, d)?;
                    let certs = crate::tls::client::load_trusted(&f.path)?;
                    set_once(&mut b.loc().$field.ssl_trusted_certificate, Some(certs), d)
                },
            ),
            d(concat!($p, "_ssl_crl"), HSL, Arity::N(1), |b, d| {
                let f = super::proxy_ssl::file_at(b, d)?;
                let crls = crate::tls::client::load_crls(&f.path)?;
                set_once(&mut b.loc().$field.ssl_crl, Some(crls), d)
            }),
            d(concat!($p, "_ssl_server_name"), HSL, Arity::N(1), |b, d| {
                let v = flag(d)?;
                set_once(&mut b.loc().$field.ssl_server_name, v, d)
            }),
            d(concat!($p, "_ssl_name"), HSL, Arity::N(1), |b, d| {
                let v = template(&d.args[0])?;
                set_once(&mut b.loc().$field.ssl_name, Some(v), d)
            }),
            d(concat!($p, "_ssl_protocols"), HSL, Arity::Min(1), |b, d| {
                let v = super::proxy_ssl::protocols(d)?;
                set_once(&mut b.loc().$field.ssl_protocols, v, d)
            }),
            d(concat!($p, "_ssl_ciphers"), HSL, Arity::N(1), |b, d| {
                let v = super::proxy_ssl::select_ciphers(d)?;
                set_once(&mut b.loc().$field.ssl_ciphers, v, d)
            }),
            d(
                concat!($p, "_ssl_session_reuse"),
                HSL,
                Arity::N(1),
                |b, d| {
                    let v = flag(d)?;
                    set_once(&mut b.loc().$field.ssl_session_reuse, v, d)
                },
            ),
            // Enforced after webpki's verdict (`tls::client`'s `Depth`).
            d(
                concat!($p, "_ssl_verify_depth"),
                HSL,
                Arity::N(1),
                |b, d| {
                    let n = number(d, &d.args[0])?;
                    set_once(&mut b.loc().$field.ssl_verify_depth, n, d)
                },
            ),
            d(concat!($p, "_ssl_certificate"), HSL, Arity::N(1), |b, d| {
                let f = super::proxy_ssl::file_at(b, d)?;
                set_once(&mut b.loc().$field.ssl_certificate, Some(f), d)
            }),
            d(
                concat!($p, "_ssl_certificate_key"),
                HSL,
                Arity::N(1),
                |b, d| {
                    let f = super::proxy_ssl::file_at(b, d)?;
                    set_once(&mut b.loc().$field.ssl_certificate_key, Some(f), d)
                },
            ),
            d(
                concat!($p, "_ssl_password_file"),
                HSL,
                Arity::N(1),
                |b, d| {
                    let f = super::proxy_ssl::file_at(b, d)?;
                    let lines = super::ssl::read_passwords(&f.path)?;
                    set_once(&mut b.loc().$field.ssl_password_file, Arc::new(lines), d)
                },
            ),
        ]
    };
}
pub(super) use upstream_ssl_rows;

/// `*_param NAME VALUE [if_not_empty]`: lines add up within a level; a
/// level with any replaces the outer level's list (NGINX's merge of
/// `params`).
pub(super) fn add_param(a: &mut AppBuilder, d: &Directive) -> Res {
    let if_not_empty = match d.args.get(2).map(String::as_str) {
        None => false,
        Some("if_not_empty") => true,
        Some(v) => return Err(format!("invalid parameter \"{v}\"")),
    };
    let p = AppParam {
        name: d.args[0].clone(),
        value: template(&d.args[1])?,
        if_not_empty,
    };
    let mut list = a.params.as_deref().cloned().unwrap_or_default();
    list.push(p);
    a.params = Some(Arc::new(list));
    Ok(())
}

/// `*_hide_header` / `*_pass_header`: one more name (lowercase).
pub(super) fn add_name(slot: &mut Option<Arc<Vec<String>>>, d: &Directive) -> Res {
    let mut list = slot.as_deref().cloned().unwrap_or_default();
    list.push(d.args[0].to_ascii_lowercase());
    *slot = Some(Arc::new(list));
    Ok(())
}

/// `uwsgi_pass` / `scgi_pass ADDRESS`: an `upstream` name, `HOST:PORT` or
/// `unix:PATH` (resolved now, NGINX's implicit upstream; `uwsgi://` may
/// lead), or with variables, rendered per request. The location's
/// handler becomes the proxy's, speaking `proto`.
pub(super) fn set_pass(b: &mut Build, d: &Directive, proto: Protocol) -> Res {
    use crate::upstream::{split_url, ProxyPass, ProxyTarget};
    super::proxy::first_proxy_pass(b, d)?;
    let addr = &d.args[0];
    let groups = Arc::new(b.upstreams.clone());
    let location = b.location().path.clone();
    // `suwsgi://` became `https://`: its host is the TLS name by default.
    let (mut tls, mut proxy_host) = (false, addr.clone());
    let target = if addr.contains('$') {
        ProxyTarget::Dynamic(template(addr)?)
    } else {
        let mut url = addr.clone();
        crate::upstream::app_url(proto, &mut url)?;
        tls = url.starts_with("https://");
        let name = &url[url.find("://").map_or(0, |i| i + 3)..];
        if tls {
            proxy_host = name.to_string();
        }
        match b.upstreams.iter().find(|g| g.name == name) {
            Some(g) => ProxyTarget::Group(Arc::clone(g)),
            None => {
                let split = split_url(&url)?;
                if split.uri.is_some() {
                    return Err(format!("invalid host in upstream \"{name}\""));
                }
                if split.port.is_none() && split.unix_path().is_none() {
                    return Err(format!("no port in upstream \"{name}\""));
                }
                let host = split.proxy_host();
                ProxyTarget::Group(super::proxy::implicit_group(b, &split, name, &host)?)
            }
        }
    };
    let pass = ProxyPass {
        proto,
        target,
        uri: None,
        proxy_host,
        proxy_port: String::new(),
        tls,
        location,
        groups,
        all_groups: Arc::clone(&b.all_upstreams),
        redirect_default: None,
    };
    b.location().handler = Handler::Proxy(Arc::new(pass));
    Ok(())
}
