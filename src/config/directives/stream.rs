//! `stream { }`: the TCP proxy's block, its `server { }` and `upstream { }`
//! blocks and the directives only they have (`listen`, `proxy_pass`,
//! `return`, `set`, the `proxy_*` timeouts, rates and retries, UDP's
//! `listen ... udp`, `proxy_requests` and `proxy_responses`,
//! `ssl_preread`, `preread_*`). The directives the stream block shares
//! with `http` (`error_log`, `access_log`, `allow`/`deny`, `limit_conn*`,
//! `map`, `geo`, `split_clients`, `tcp_nodelay`, and `upstream { }`'s
//! `server`, `hash`, `least_conn`, `random`, `zone`) are their own rows
//! with the stream contexts added: `Build::loc` gives them the stream
//! level's settings. `log_format` has a row here for the stream block's
//! own formats (NGINX keeps the two blocks' formats apart). TLS
//! (`listen ... ssl`, the `ssl_*` and `proxy_ssl*` rows) is
//! `stream_ssl.rs`'s. The model is `config/stream.rs`; the sessions run
//! in `src/stream/`.

use super::listen::ListenB;
use super::upstream::UpstreamB;
#[allow(unused_imports)]
use super::*;
use crate::config::stream::{StreamPass, StreamServer, StreamSet};

/// The stream block and its servers.
pub const SS: u16 = STREAM | SSRV;

macro_rules! stream_setting {
    ($field:ident, $parse:expr) => {
        |b: &mut Build, d: &Directive| {
            let v = $parse(d)?;
            set_once(&mut b.loc().stream.$field, v, d)
        }
    };
}

fn a_time(d: &Directive) -> Result<Duration, String> {
    time(d, &d.args[0])
}

fn a_size(d: &Directive) -> Result<u64, String> {
    size(d, &d.args[0])
}

/// A rate: a size, or a value with variables checked per session.
fn a_rate(d: &Directive) -> Result<Template, String> {
    let t = template(&d.args[0])?;
    if t.is_literal() {
        size(d, &d.args[0])?;
    }
    Ok(t)
}

fn a_number(d: &Directive) -> Result<u64, String> {
    number(d, &d.args[0])
}

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    blk("stream", MAIN, Arity::N(0), set_stream),
    blk("server", STREAM, Arity::N(0), set_server),
    blk("upstream", STREAM, Arity::N(1), set_upstream),
    d("log_format", STREAM, Arity::Min(2), |b, d| {
        let (name, f) = super::logs::parse_log_format(d)?;
        if b.stream.formats.contains_key(&name) {
            return Err(format!("duplicate \"log_format\" name \"{name}\""));
        }
        b.stream.formats.insert(name, Arc::new(f));
        Ok(())
    }),
    d("listen", SSRV, Arity::Min(1), set_listen),
    d("proxy_pass", SSRV, Arity::N(1), set_proxy_pass),
    d("return", SSRV, Arity::N(1), |b, d| {
        let v = template(&d.args[0])?;
        let srv = b.stream.servers.last_mut().expect("server");
        if srv.pass.is_some() || srv.ret.is_some() {
            return Err(dup(d));
        }
        srv.ret = Some(v);
        Ok(())
    }),
    d("set", SSRV, Arity::N(2), set_set),
    d(
        "proxy_connect_timeout",
        SS,
        Arity::N(1),
        stream_setting!(connect_timeout, a_time),
    ),
    d(
        "proxy_timeout",
        SS,
        Arity::N(1),
        stream_setting!(timeout, a_time),
    ),
    d(
        "proxy_requests",
        SS,
        Arity::N(1),
        stream_setting!(requests, a_number),
    ),
    d(
        "proxy_responses",
        SS,
        Arity::N(1),
        stream_setting!(responses, a_number),
    ),
    d(
        "proxy_next_upstream",
        SS,
        Arity::N(1),
        stream_setting!(next_upstream, flag),
    ),
    d(
        "proxy_next_upstream_tries",
        SS,
        Arity::N(1),
        stream_setting!(next_upstream_tries, a_number),
    ),
    d(
        "proxy_next_upstream_timeout",
        SS,
        Arity::N(1),
        stream_setting!(next_upstream_timeout, a_time),
    ),
    d(
        "proxy_buffer_size",
        SS,
        Arity::N(1),
        stream_setting!(buffer_size, a_size),
    ),
    d(
        "proxy_upload_rate",
        SS,
        Arity::N(1),
        stream_setting!(upload_rate, a_rate),
    ),
    d(
        "proxy_download_rate",
        SS,
        Arity::N(1),
        stream_setting!(download_rate, a_rate),
    ),
    d(
        "proxy_half_close",
        SS,
        Arity::N(1),
        stream_setting!(half_close, flag),
    ),
    d(
        "proxy_protocol",
        SS,
        Arity::N(1),
        stream_setting!(proxy_protocol, flag),
    ),
    d(
        "ssl_preread",
        SS,
        Arity::N(1),
        stream_setting!(ssl_preread, flag),
    ),
    d(
        "preread_timeout",
        SS,
        Arity::N(1),
        stream_setting!(preread_timeout, a_time),
    ),
    d(
        "preread_buffer_size",
        SS,
        Arity::N(1),
        stream_setting!(preread_buffer_size, a_size),
    ),
];

/// The `stream` block being read.
#[derive(Default)]
pub(super) struct StreamB {
    seen: bool,
    /// The `stream` level's own settings.
    pub(super) main: LocBuilder,
    /// Its servers, in file order.
    pub(super) servers: Vec<StreamServerB>,
    /// Its `upstream` blocks by name.
    upstreams: HashMap<String, Arc<UpstreamGroup>>,
    /// Its `log_format`s by name.
    pub(super) formats: HashMap<String, Arc<LogFormat>>,
    /// The `ssl_*` settings of the level and of each server.
    pub(super) ssl: super::stream_ssl::StreamSsl,
}

/// A stream `server { }` being read.
pub(super) struct StreamServerB {
    pub(super) loc: LocBuilder,
    /// Its addresses, each with whether it is `udp`.
    listens: Vec<(ListenB, bool)>,
    pass: Option<StreamPass>,
    ret: Option<Template>,
    sets: Vec<StreamSet>,
    file: Arc<Path>,
    line: u32,
}

fn set_stream(b: &mut Build, d: &Directive) -> Res {
    if b.stream.seen {
        return Err(dup(d));
    }
    b.stream.seen = true;
    // The stream block's variables are its own (`$protocol`, …).
    crate::vars::stream_names::set_stream(true);
    let r = b.walk_nested(d, STREAM);
    crate::vars::stream_names::set_stream(false);
    r
}

fn set_server(b: &mut Build, d: &Directive) -> Res {
    b.stream.ssl.open_server();
    b.stream.servers.push(StreamServerB {
        loc: LocBuilder::default(),
        listens: Vec::new(),
        pass: None,
        ret: None,
        sets: Vec::new(),
        file: d.file.clone(),
        line: d.line,
    });
    // A `set` variable may be used above its `set` (NGINX resolves
    // variables once the whole block is read).
    for e in d.block.as_deref().unwrap_or(&[]) {
        if let (true, Some(name)) = (e.name == "set", e.args.first()) {
            let name = name.strip_prefix('$').unwrap_or("");
            if !name.is_empty() && Var::from_name(name).is_none() {
                template::declare_indexed(name);
            }
        }
    }
    b.walk_nested(d, SSRV)
}

fn set_upstream(b: &mut Build, d: &Directive) -> Res {
    let name = d.args[0].clone();
    if b.stream.upstreams.contains_key(&name) {
        return Err(format!("duplicate upstream \"{name}\""));
    }
    b.cur_upstream = Some(UpstreamB::new(name.clone()));
    let r = b.walk_nested(d, SUPS);
    let ub = b.cur_upstream.take().expect("upstream");
    r?;
    let group = super::upstream::group_of(ub)?;
    b.stream.upstreams.insert(name, Arc::new(group));
    Ok(())
}

fn set_listen(b: &mut Build, d: &Directive) -> Res {
    let udp = d.args[1..].iter().any(|p| p == "udp");
    for p in &d.args[1..] {
        let name = p.split('=').next().unwrap_or(p);
        match name {
            "ssl" if udp => return Err("\"ssl\" parameter is incompatible with \"udp\"".into()),
            "default_server" | "default" | "http2" | "quic" => {
                return Err(format!("invalid parameter \"{p}\""))
            }
            // NGINX's checks, in its order of mention.
            "backlog" | "so_keepalive" | "proxy_protocol" | "fastopen" if udp => {
                return Err(format!("\"{name}\" parameter is incompatible with \"udp\""))
            }
            _ => {}
        }
    }
    let mut plain = d.clone();
    plain.args.retain(|a| a != "udp");
    let listens = super::listen::parse_listen(b, &plain)?;
    if udp && listens.iter().any(|l| l.unix.is_some()) {
        return Err("\"listen unix:... udp\" is not supported by porter".into());
    }
    let srv = b.stream.servers.last_mut().expect("server");
    srv.listens.extend(listens.into_iter().map(|l| (l, udp)));
    Ok(())
}

fn set_proxy_pass(b: &mut Build, d: &Directive) -> Res {
    let arg = &d.args[0];
    let pass = if arg.contains('$') {
        StreamPass::Dynamic(template(arg)?, Arc::new(b.stream.upstreams.clone()))
    } else if let Some(g) = b.stream.upstreams.get(arg) {
        StreamPass::Group(Arc::clone(g))
    } else {
        StreamPass::Group(Arc::new(implicit_group(arg)?))
    };
    let srv = b.stream.servers.last_mut().expect("server");
    if srv.pass.is_some() || srv.ret.is_some() {
        return Err(dup(d));
    }
    srv.pass = Some(pass);
    Ok(())
}

/// The group of a `proxy_pass HOST:PORT` (or `unix:PATH`) naming no
/// `upstream` block: NGINX's stream proxy wants the port.
fn implicit_group(arg: &str) -> Result<UpstreamGroup, String> {
    let addrs = if crate::upstream::unix_path(arg).is_some() {
        resolve_upstream(arg, None, arg)?
    } else {
        let split = crate::upstream::split_url(&format!("http://{arg}"))
            .map_err(|_| format!("invalid host in upstream \"{arg}\""))?;
        if split.uri.is_some() {
            return Err(format!("invalid host in upstream \"{arg}\""));
        }
        let Some(port) = split.port else {
            return Err(format!("no port in upstream \"{arg}\""));
        };
        resolve_upstream(&split.host, Some(port), arg)?
    };
    Ok(UpstreamGroup::implicit(arg.to_string(), arg, addrs))
}

/// `set $var VALUE`: a `set` variable, or a `map`'s value (NGINX's map
/// variables are changeable).
fn set_set(b: &mut Build, d: &Directive) -> Res {
    let name = match d.args[0].strip_prefix('$') {
        Some(n) if !n.is_empty() => n,
        _ => return Err(format!("invalid variable name \"{}\"", d.args[0])),
    };
    let (slot, var) = match Var::from_name(name) {
        Some(Var::Map(m)) => (m.slot(), None),
        Some(Var::Indexed(_)) | None => {
            let v = template::declare_indexed(name);
            v.by_set.store(true, std::sync::atomic::Ordering::Relaxed);
            (v.index, Some(v))
        }
        Some(_) => return Err(format!("the duplicate \"{name}\" variable")),
    };
    let value = template(&d.args[1])?;
    let srv = b.stream.servers.last_mut().expect("server");
    srv.sets.push(StreamSet { slot, value, var });
    Ok(())
}

impl Build {
    /// The stream servers merged and grouped by address, added to
    /// `groups` (an address both blocks listen on is an error); their TLS
    /// is built with the HTTP servers' `shared` caches and `certs`.
    pub(super) fn stream_groups(
        &mut self,
        groups: &mut Vec<(ListenGroup, bool)>,
        shared: &mut super::ssl::SslShared,
        certs: &mut super::proxy_ssl::ClientCerts,
    ) -> Result<(), ConfError> {
        let plain = |message: String| ConfError {
            message,
            file: None,
            line: 0,
        };
        for (i, mut sb) in std::mem::take(&mut self.stream.servers)
            .into_iter()
            .enumerate()
        {
            let at = format!("{}:{}", sb.file.display(), sb.line);
            if sb.listens.is_empty() {
                return Err(plain(format!(
                    "no \"listen\" is defined for server in {at}"
                )));
            }
            if sb.pass.is_none() && sb.ret.is_none() {
                return Err(plain(format!("no handler for server in {at}")));
            }
            sb.loc.inherit(&self.stream.main);
            super::stream_ssl::client_cert(&mut sb.loc, certs)?;
            let ssl_listen = sb.listens.iter().find_map(|(l, _)| l.ssl.as_ref());
            let ssl_listen = ssl_listen.map(|(f, n)| (f, *n));
            let tls = super::stream_ssl::server_tls(&self.stream.ssl, i, ssl_listen, shared)?;
            let server = Arc::new(StreamServer {
                s: sb.loc.finish(),
                pass: sb.pass,
                ret: sb.ret,
                sets: sb.sets,
                at,
                tls,
            });
            for (l, udp) in &sb.listens {
                // A TCP and a UDP address may share an IP and port.
                if groups
                    .iter()
                    .any(|(g, _)| g.addr == l.addr && g.is_udp() == *udp && g.unix == l.unix)
                {
                    let what = format!("duplicate \"{}\" address and port pair", l.name());
                    return Err(plain(what));
                }
                groups.push((
                    ListenGroup {
                        addr: l.addr,
                        unix: l.unix.clone(),
                        backlog: l.backlog,
                        bufs: l.bufs,
                        opts: l.opts,
                        servers: Vec::new(),
                        default: 0,
                        ssl: l.ssl.is_some(),
                        http2: false,
                        proxy_protocol: l.proxy_protocol,
                        quic: false,
                        stream: Some(Arc::clone(&server)),
                        udp: *udp,
                        quic_key: Arc::from(Vec::new()),
                    },
                    true,
                ));
            }
        }
        Ok(())
    }
}
