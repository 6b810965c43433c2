//! `listen`: its parsing (the address, port ranges, every parameter) and
//! the line as the parser keeps it until the servers are grouped by
//! address (`build.rs`'s `add_listens`). Socket options are
//! `config::listen_opts`'s; the sockets get them in `runtime/listen.rs`.

#[allow(unused_imports)]
use super::*;
use crate::config::listen_opts::ListenOpts;

/// One `listen` line of a server, as parsed (`http.rs`).
pub(super) struct ListenB {
    pub(super) addr: SocketAddr,
    /// `listen unix:PATH` (`addr` is then a placeholder).
    pub(super) unix: Option<Arc<Path>>,
    pub(super) default_server: bool,
    pub(super) backlog: i32,
    /// `sndbuf=` and `rcvbuf=`: the socket's buffer sizes, if set.
    pub(super) bufs: SocketBufs,
    /// `ssl`, and where the `listen` is (for NGINX's missing-certificate error).
    pub(super) ssl: Option<(Arc<Path>, u32)>,
    /// `http2` (deprecated in NGINX 1.25.1 for the `http2` directive).
    pub(super) http2: bool,
    /// `proxy_protocol`: a PROXY header starts each connection.
    pub(super) proxy_protocol: bool,
    /// `quic`: a UDP address for HTTP/3, and where the `listen` is.
    pub(super) quic: Option<(Arc<Path>, u32)>,
    /// Socket options (`fastopen=`, `deferred`, `so_keepalive=`, ...).
    pub(super) opts: ListenOpts,
}

impl ListenB {
    /// The address as NGINX's messages name it: `unix:PATH` or `IP:PORT`.
    pub(super) fn name(&self) -> String {
        match &self.unix {
            Some(p) => format!("unix:{}", p.display()),
            None => self.addr.to_string(),
        }
    }
}

/// Parses a `listen` address: `8000`, `127.0.0.1:8000`, `*:80`, `[::1]:80`,
/// `localhost:8000`, `127.0.0.1` (port 80), and port ranges as NGINX 1.27.3
/// (`8182-8183`, `127.0.0.1:8182-8183`: one address per port).
/// `unix:PATH` is [`unix_path`]'s.
pub fn parse_listen_addr(s: &str) -> Result<Vec<SocketAddr>, String> {
    let err = |what: &str| format!("{what} in \"{s}\" of the \"listen\" directive");
    let port = |p: &str| -> Result<u16, String> {
        match p.parse::<u32>() {
            Ok(n) if (1..=65535).contains(&n) && p.bytes().all(|c| c.is_ascii_digit()) => {
                Ok(n as u16)
            }
            _ => Err(err("invalid port")),
        }
    };
    let ports = |p: &str| -> Result<std::ops::RangeInclusive<u16>, String> {
        let Some((first, last)) = p.split_once('-') else {
            let n = port(p)?;
            return Ok(n..=n);
        };
        let (first, last) = (port(first)?, port(last)?);
        if first > last {
            return Err(err("invalid port range"));
        }
        Ok(first..=last)
    };
    let each = |ip: std::net::IpAddr, r: std::ops::RangeInclusive<u16>| {
        r.map(|p| SocketAddr::new(ip, p)).collect::<Vec<_>>()
    };
    let any = std::net::IpAddr::from([0, 0, 0, 0]);
    if s.bytes().all(|c| c.is_ascii_digit() || c == b'-') {
        return Ok(each(any, ports(s)?));
    }
    let (host, r) = if let Some(rest) = s.strip_prefix('[') {
        let end = rest.find(']').ok_or_else(|| err("invalid host"))?;
        let after = &rest[end + 1..];
        let r = match after.strip_prefix(':') {
            Some(p) => ports(p)?,
            None if after.is_empty() => 80..=80,
            None => return Err(err("invalid port")),
        };
        let ip: std::net::Ipv6Addr = rest[..end].parse().map_err(|_| err("invalid host"))?;
        return Ok(each(ip.into(), r));
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h, ports(p)?),
            None => (s, 80..=80),
        }
    };
    if host == "*" {
        return Ok(each(any, r));
    }
    if let Ok(ip) = host.parse::<std::net::Ipv4Addr>() {
        return Ok(each(ip.into(), r));
    }
    let addrs: Vec<SocketAddr> = (host, *r.start())
        .to_socket_addrs()
        .map_err(|_| err("host not found"))?
        .filter(|a| a.is_ipv4())
        .flat_map(|a| each(a.ip(), r.clone()))
        .collect();
    if addrs.is_empty() {
        return Err(err("host not found"));
    }
    Ok(addrs)
}

/// The first `listen` parameter that has no meaning on a UDP socket
/// (NGINX's "... parameter is incompatible with "quic"").
fn tcp_only(params: &[String]) -> Option<&str> {
    params.iter().find_map(|p| {
        let name = p.split('=').next().unwrap_or(p);
        matches!(
            name,
            "ssl"
                | "http2"
                | "proxy_protocol"
                | "deferred"
                | "backlog"
                | "so_keepalive"
                | "fastopen"
                | "multipath"
        )
        .then_some(name)
    })
}

/// `listen unix:PATH`: the socket file's path (a relative one under the
/// prefix), or NGINX's error for an empty one.
fn unix_path(b: &Build, s: &str) -> Result<Option<Arc<Path>>, String> {
    let Some(path) = s.strip_prefix("unix:") else {
        return Ok(None);
    };
    if path.is_empty() {
        return Err(format!(
            "no path in the unix domain socket in \"{s}\" of the \"listen\" directive"
        ));
    }
    Ok(Some(Arc::from(b.full_path(path).as_path())))
}

/// `backlog=`, `sndbuf=` and `rcvbuf=`: true when `p` is one of them.
fn sizes(p: &str, backlog: &mut i32, bufs: &mut SocketBufs) -> Result<bool, String> {
    if let Some(v) = p.strip_prefix("backlog=") {
        *backlog = v
            .parse::<i32>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("invalid backlog \"{p}\""))?;
        return Ok(true);
    }
    if !(p.starts_with("sndbuf=") || p.starts_with("rcvbuf=")) {
        return Ok(false);
    }
    let size = parse_size(&p[7..])
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("invalid {} \"{p}\"", &p[..6]))?;
    if p.starts_with('s') {
        bufs.sndbuf = Some(size as usize);
    } else {
        bufs.rcvbuf = Some(size as usize);
    }
    Ok(true)
}

pub(super) fn set_listen(b: &mut Build, d: &Directive) -> Res {
    let listens = parse_listen(b, d)?;
    let srv = b.server();
    for l in listens {
        if srv
            .listens
            .iter()
            .any(|o| o.addr == l.addr && o.quic.is_some() == l.quic.is_some() && o.unix == l.unix)
        {
            return Err(format!("a duplicate listen {}", d.args[0]));
        }
        srv.listens.push(l);
    }
    Ok(())
}

/// A `listen` line's addresses, each with the line's parameters (the
/// `stream` block's `listen` too).
pub(super) fn parse_listen(b: &Build, d: &Directive) -> Result<Vec<ListenB>, String> {
    // A UNIX-domain socket has one address; the placeholder `0.0.0.0:0`
    // stands for it where an IP address is kept (`ListenGroup::unix`).
    let unix = unix_path(b, &d.args[0])?;
    let addrs = match &unix {
        Some(_) => vec![SocketAddr::from(([0, 0, 0, 0], 0))],
        None => parse_listen_addr(&d.args[0])?,
    };
    let mut default_server = false;
    let mut backlog = 511;
    let mut bufs = SocketBufs::default();
    let mut ssl = None;
    let mut http2 = false;
    let mut proxy_protocol = false;
    let mut quic = None;
    let mut opts = ListenOpts::default();
    for p in &d.args[1..] {
        if opts.take(p)? {
            continue;
        }
        if sizes(p, &mut backlog, &mut bufs)? {
            opts.set = true;
            continue;
        }
        match p.as_str() {
            "default_server" | "default" => default_server = true,
            "ssl" => ssl = Some((d.file.clone(), d.line)),
            p if p.starts_with("accept_filter=") => {
                // NGINX on Linux: an [emerg] line, and the parameter ignored.
                let what =
                    format!("accept filters \"{p}\" are not supported on this platform, ignored");
                say_at("emerg", &d.file, d.line, &what);
            }
            "http2" => {
                // NGINX 1.25.1's warning; the parameter still works.
                warn(
                    d,
                    "the \"listen ... http2\" directive is deprecated, use the \"http2\" directive instead",
                );
                http2 = true;
            }
            "proxy_protocol" => proxy_protocol = true,
            "quic" => quic = Some((d.file.clone(), d.line)),
            p => return Err(format!("invalid parameter \"{p}\"")),
        }
    }
    if let (Some(_), Some(p)) = (&quic, tcp_only(&d.args[1..])) {
        return Err(format!("\"{p}\" parameter is incompatible with \"quic\""));
    }
    let mut out = Vec::new();
    for addr in addrs {
        out.push(ListenB {
            addr,
            unix: unix.clone(),
            default_server,
            backlog,
            bufs,
            ssl: ssl.clone(),
            http2,
            proxy_protocol,
            quic: quic.clone(),
            opts,
        });
    }
    Ok(out)
}
