//! The FastCGI module's directives (`fastcgi_pass`, `fastcgi_param` and
//! the `fastcgi_*` twins of the proxy's settings), kept in
//! `LocSettings::fastcgi` (`config/app_upstream.rs`). `fastcgi_pass`
//! makes the location's handler the proxy's, speaking FastCGI
//! (`upstream::Protocol::FastCgi`). Buffer sizes and temp files are
//! checked and accepted: porter streams every body in bounded pieces.

#[allow(unused_imports)]
use super::*;
use crate::config::app_upstream::AppParam;

macro_rules! app {
    ($b:expr) => {
        $b.loc().fastcgi
    };
}
macro_rules! app_flag {
    ($field:ident) => {
        |b: &mut Build, d: &Directive| {
            let v = flag(d)?;
            set_once(&mut app!(b).$field, v, d)
        }
    };
}
macro_rules! app_time {
    ($field:ident) => {
        |b: &mut Build, d: &Directive| {
            let v = time(d, &d.args[0])?;
            set_once(&mut app!(b).$field, v, d)
        }
    };
}
macro_rules! app_names {
    ($field:ident) => {
        |b: &mut Build, d: &Directive| {
            let slot = &mut app!(b).$field;
            let mut list = slot.as_deref().cloned().unwrap_or_default();
            list.push(d.args[0].to_ascii_lowercase());
            *slot = Some(Arc::new(list));
            Ok(())
        }
    };
}

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("fastcgi_pass", LOC, Arity::N(1), set_fastcgi_pass),
    d("fastcgi_param", HSL, Arity::Range(2, 3), set_param),
    d("fastcgi_index", HSL, Arity::N(1), |b, d| {
        let v: Arc<str> = d.args[0].as_str().into();
        set_once(&mut app!(b).index, Some(v), d)
    }),
    d("fastcgi_split_path_info", LOC, Arity::N(1), |b, d| {
        let re = crate::vars::regex::Regex::compile(&d.args[0], false)?;
        if re.groups() != 2 {
            return Err(format!("pattern \"{}\" must have 2 captures", d.args[0]));
        }
        set_once(&mut app!(b).split_path_info, Some(Arc::new(re)), d)
    }),
    d(
        "fastcgi_connect_timeout",
        HSL,
        Arity::N(1),
        app_time!(connect_timeout),
    ),
    d(
        "fastcgi_send_timeout",
        HSL,
        Arity::N(1),
        app_time!(send_timeout),
    ),
    d(
        "fastcgi_read_timeout",
        HSL,
        Arity::N(1),
        app_time!(read_timeout),
    ),
    d("fastcgi_next_upstream", HSL, Arity::Min(1), |b, d| {
        let v = crate::upstream::NextUpstream::parse(&d.args)?;
        set_once(&mut app!(b).next_upstream, v, d)
    }),
    d("fastcgi_next_upstream_tries", HSL, Arity::N(1), |b, d| {
        let n = number(d, &d.args[0])?;
        set_once(&mut app!(b).next_upstream_tries, n, d)
    }),
    d(
        "fastcgi_next_upstream_timeout",
        HSL,
        Arity::N(1),
        app_time!(next_upstream_timeout),
    ),
    d("fastcgi_buffer_size", HSL, Arity::N(1), |b, d| {
        let v = size(d, &d.args[0])?;
        set_once(&mut app!(b).buffer_size, v, d)
    }),
    d("fastcgi_buffering", HSL, Arity::N(1), app_flag!(buffering)),
    d(
        "fastcgi_request_buffering",
        HSL,
        Arity::N(1),
        app_flag!(request_buffering),
    ),
    d(
        "fastcgi_intercept_errors",
        HSL,
        Arity::N(1),
        app_flag!(intercept_errors),
    ),
    d(
        "fastcgi_hide_header",
        HSL,
        Arity::N(1),
        app_names!(hide_header),
    ),
    d(
        "fastcgi_pass_header",
        HSL,
        Arity::N(1),
        app_names!(pass_header),
    ),
    d("fastcgi_ignore_headers", HSL, Arity::Min(1), |b, d| {
        let v = d.args.iter().map(|a| a.to_ascii_lowercase()).collect();
        set_once(&mut app!(b).ignore_headers, Arc::new(v), d)
    }),
    d(
        "fastcgi_pass_request_headers",
        HSL,
        Arity::N(1),
        app_flag!(pass_request_headers),
    ),
    d(
        "fastcgi_pass_request_body",
        HSL,
        Arity::N(1),
        app_flag!(pass_request_body),
    ),
    d(
        "fastcgi_socket_keepalive",
        HSL,
        Arity::N(1),
        app_flag!(socket_keepalive),
    ),
    d("fastcgi_bind", HSL, Arity::Range(1, 2), |b, d| {
        let v = super::proxy_socket::bind_value(d)?;
        set_once(&mut app!(b).bind, v, d)
    }),
    d("fastcgi_keep_conn", HSL, Arity::N(1), app_flag!(keep_conn)),
    d("fastcgi_catch_stderr", HSL, Arity::N(1), |b, d| {
        let slot = &mut app!(b).catch_stderr;
        let mut list = slot.as_deref().cloned().unwrap_or_default();
        list.push(d.args[0].clone());
        *slot = Some(Arc::new(list));
        Ok(())
    }),
    d("fastcgi_limit_rate", HSL, Arity::N(1), |b, d| {
        let v = size(d, &d.args[0])?;
        set_once(&mut app!(b).limit_rate, v, d)
    }),
    // Accepted, no effect: bodies stream in bounded pieces, never to a
    // temp file.
    d("fastcgi_buffers", HSL, Arity::N(2), super::tuning::buffers),
    d(
        "fastcgi_busy_buffers_size",
        HSL,
        Arity::N(1),
        super::tuning::size_only,
    ),
    d(
        "fastcgi_max_temp_file_size",
        HSL,
        Arity::N(1),
        super::tuning::size_only,
    ),
    d(
        "fastcgi_temp_file_write_size",
        HSL,
        Arity::N(1),
        super::tuning::size_only,
    ),
    d(
        "fastcgi_send_lowat",
        HSL,
        Arity::N(1),
        super::tuning::size_only,
    ),
    d(
        "fastcgi_ignore_client_abort",
        HSL,
        Arity::N(1),
        super::tuning::flag_only,
    ),
    d(
        "fastcgi_force_ranges",
        HSL,
        Arity::N(1),
        super::tuning::flag_only,
    ),
];

/// `fastcgi_param NAME VALUE [if_not_empty]`: lines add up within a
/// level; a level with any replaces the outer level's list (NGINX's
/// merge of `params`).
fn set_param(b: &mut Build, d: &Directive) -> Res {
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
    let slot = &mut app!(b).params;
    let mut list = slot.as_deref().cloned().unwrap_or_default();
    list.push(p);
    *slot = Some(Arc::new(list));
    Ok(())
}

/// `fastcgi_pass ADDRESS`: an `upstream` name, `HOST:PORT` or
/// `unix:PATH` (resolved now, NGINX's implicit upstream), or with
/// variables, rendered per request.
fn set_fastcgi_pass(b: &mut Build, d: &Directive) -> Res {
    use crate::upstream::{split_url, Protocol, ProxyPass, ProxyTarget};
    super::proxy::first_proxy_pass(b, d)?;
    let addr = &d.args[0];
    let groups = Arc::new(b.upstreams.clone());
    let location = b.location().path.clone();
    let target = if addr.contains('$') {
        ProxyTarget::Dynamic(template(addr)?)
    } else {
        match b.upstreams.iter().find(|g| &g.name == addr) {
            Some(g) => ProxyTarget::Group(Arc::clone(g)),
            None => {
                let split = split_url(&format!("http://{addr}"))?;
                if split.uri.is_some() {
                    return Err(format!("invalid host in upstream \"{addr}\""));
                }
                if split.port.is_none() && split.unix_path().is_none() {
                    return Err(format!("no port in upstream \"{addr}\""));
                }
                let host = split.proxy_host();
                ProxyTarget::Group(super::proxy::implicit_group(b, &split, addr, &host)?)
            }
        }
    };
    let pass = ProxyPass {
        proto: Protocol::FastCgi,
        target,
        uri: None,
        proxy_host: addr.clone(),
        proxy_port: String::new(),
        tls: false,
        location,
        groups,
        redirect_default: None,
    };
    b.location().handler = Handler::Proxy(Arc::new(pass));
    Ok(())
}
