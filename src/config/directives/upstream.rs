//! `upstream { }` and its directives: `server`, `keepalive`,
//! `keepalive_timeout`, `keepalive_time`, `keepalive_requests`, the balancing methods `hash`,
//! `ip_hash`, `least_conn`, `random [two [least_conn]]`, and `zone`
//! (accepted: the workers are threads of one process, so peer state is
//! shared without a shared-memory zone). `server`,
//! `keepalive_timeout`, `keepalive_time` and `keepalive_requests` inside `upstream { }` are
//! other directives than the same names elsewhere: [`super::find_in`]
//! picks the row by context.

#[allow(unused_imports)]
use super::*;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    blk("upstream", HTTP, Arity::N(1), set_upstream),
    d(
        "server",
        UPSTREAM | SUPS,
        Arity::Min(1),
        set_upstream_server,
    ),
    d("keepalive", UPSTREAM, Arity::N(1), |b, d| {
        let n = match d.args[0].parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => {
                return Err(format!(
                    "invalid value \"{}\" in \"{}\" directive",
                    d.args[0], d.name
                ))
            }
        };
        set_once(&mut b.upstream().keepalive, n, d)
    }),
    d("keepalive_timeout", UPSTREAM, Arity::N(1), |b, d| {
        let t = time(d, &d.args[0])?;
        set_once(&mut b.upstream().keepalive_timeout, t, d)
    }),
    d("keepalive_time", UPSTREAM, Arity::N(1), |b, d| {
        let t = time(d, &d.args[0])?;
        set_once(&mut b.upstream().keepalive_time, t, d)
    }),
    d("keepalive_requests", UPSTREAM, Arity::N(1), |b, d| {
        let n = number(d, &d.args[0])?;
        set_once(&mut b.upstream().keepalive_requests, n, d)
    }),
    d(
        "hash",
        UPSTREAM | SUPS,
        Arity::Range(1, 2),
        set_upstream_hash,
    ),
    d("ip_hash", UPSTREAM, Arity::N(0), |b, _| {
        set_method(b, balance::Method::IpHash)
    }),
    d("least_conn", UPSTREAM | SUPS, Arity::N(0), |b, _| {
        set_method(b, balance::Method::LeastConn)
    }),
    d("random", UPSTREAM | SUPS, Arity::Range(0, 2), |b, d| {
        let m = match (
            d.args.first().map(String::as_str),
            d.args.get(1).map(String::as_str),
        ) {
            (None, None) => balance::Method::Random,
            (Some("two"), None | Some("least_conn")) => balance::Method::RandomTwo,
            (Some(p), None) | (_, Some(p)) => return Err(format!("invalid parameter \"{p}\"")),
        };
        set_method(b, m)
    }),
    d("zone", UPSTREAM | SUPS, Arity::Range(1, 2), |b, d| {
        if let Some(sz) = d.args.get(1) {
            match parse_size(sz) {
                None => return Err(format!("invalid zone size \"{sz}\"")),
                Some(n) if n < 8192 => return Err(format!("zone \"{}\" is too small", d.args[0])),
                Some(_) => {}
            }
        }
        set_once(&mut b.upstream().zone, d.args[0].clone(), d)
    }),
];

/// A balancing method. As NGINX, a second one replaces the first (NGINX
/// warns "load balancing method redefined"), and `backup` servers written
/// before `ip_hash` or `random` are kept but never asked.
fn set_method(b: &mut Build, m: balance::Method) -> Res {
    let ub = b.upstream();
    if ub.hash.is_some() {
        return Err("load balancing method redefined".to_string());
    }
    ub.method = Some(m);
    Ok(())
}

/// Whether the method cannot take `backup` servers.
fn refuses_backup(ub: &UpstreamB) -> bool {
    matches!(
        ub.method,
        Some(balance::Method::IpHash | balance::Method::Random | balance::Method::RandomTwo)
    )
}

/// An `upstream { }` block being read.
pub(super) struct UpstreamB {
    pub(super) name: String,
    pub(super) primary: Vec<PeerSpec>,
    pub(super) backup: Vec<PeerSpec>,
    pub(super) keepalive: Option<usize>,
    pub(super) keepalive_timeout: Option<Duration>,
    pub(super) keepalive_requests: Option<u64>,
    pub(super) keepalive_time: Option<Duration>,
    pub(super) hash: Option<(Template, bool)>,
    pub(super) method: Option<balance::Method>,
    pub(super) zone: Option<String>,
}

/// Resolves `host[:port]` (port 80 when absent) at config time, as NGINX
/// does for upstream servers (`unix:PATH` is a unix socket, not checked
/// until connected to); the error is NGINX's.
pub(super) fn resolve_upstream(
    host: &str,
    port: Option<u16>,
    shown: &str,
) -> Result<Vec<PeerAddr>, String> {
    if let Some(path) = crate::upstream::unix_path(host) {
        return Ok(vec![
            PeerAddr::unix(path).map_err(|e| format!("{e} in upstream \"{shown}\""))?
        ]);
    }
    let port = port.unwrap_or(80);
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<std::net::IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port).into()]);
    }
    let mut addrs: Vec<SocketAddr> = (bare, port)
        .to_socket_addrs()
        .map_err(|_| format!("host not found in upstream \"{shown}\""))?
        .collect();
    addrs.dedup();
    if addrs.is_empty() {
        return Err(format!("host not found in upstream \"{shown}\""));
    }
    Ok(addrs.into_iter().map(PeerAddr::from).collect())
}

fn set_upstream(b: &mut Build, d: &Directive) -> Res {
    let name = d.args[0].clone();
    if b.upstreams.iter().any(|g| g.name == name) {
        return Err(format!("duplicate upstream \"{name}\""));
    }
    b.cur_upstream = Some(UpstreamB::new(name));
    let r = b.walk_nested(d, UPSTREAM);
    let ub = b.cur_upstream.take().expect("upstream");
    r?;
    let group = group_of(ub)?;
    b.upstreams.push(Arc::new(group));
    Ok(())
}

impl UpstreamB {
    /// An empty block named `name`.
    pub(super) fn new(name: String) -> UpstreamB {
        UpstreamB {
            name,
            primary: Vec::new(),
            backup: Vec::new(),
            keepalive: None,
            keepalive_timeout: None,
            keepalive_requests: None,
            keepalive_time: None,
            hash: None,
            method: None,
            zone: None,
        }
    }
}

/// The group an `upstream { }` block read into `ub` makes (`http` and
/// `stream` alike).
pub(super) fn group_of(ub: UpstreamB) -> Result<UpstreamGroup, String> {
    if ub.primary.is_empty() {
        return Err("no servers are inside upstream".to_string());
    }
    if ub.hash.is_some() && !ub.backup.is_empty() {
        return Err("invalid parameter \"backup\"".to_string());
    }
    let hash = ub.hash.map(|(key, consistent)| HashConf {
        key,
        ring: consistent.then(|| balance::ketama_ring(&ub.primary)),
    });
    Ok(UpstreamGroup {
        method: ub.method.unwrap_or_default(),
        id: balance::next_id(),
        name: ub.name,
        primary: PeerSet::new(ub.primary),
        backup: PeerSet::new(ub.backup),
        hash,
        keepalive: ub.keepalive.unwrap_or(0),
        keepalive_timeout: ub.keepalive_timeout.unwrap_or(Duration::from_secs(60)),
        keepalive_requests: ub.keepalive_requests.unwrap_or(1000),
        keepalive_time: ub.keepalive_time.unwrap_or(Duration::from_secs(3600)),
    })
}

/// `server ADDR [weight=N] [max_fails=N] [fail_timeout=T] [max_conns=N]
/// [backup] [down]` inside `upstream { }`.
pub(super) fn set_upstream_server(b: &mut Build, d: &Directive) -> Res {
    let addr = &d.args[0];
    let mut weight = 1u32;
    let mut max_fails = 1u32;
    let mut fail_timeout = Duration::from_secs(10);
    let mut backup = false;
    let mut down = false;
    let mut max_conns = 0u32;
    let bad = |p: &str| format!("invalid parameter \"{p}\"");
    for p in &d.args[1..] {
        if let Some(v) = p.strip_prefix("weight=") {
            weight = v
                .parse()
                .ok()
                .filter(|&n: &u32| n > 0)
                .ok_or_else(|| bad(p))?;
        } else if let Some(v) = p.strip_prefix("max_fails=") {
            max_fails = v.parse().map_err(|_| bad(p))?;
        } else if let Some(v) = p.strip_prefix("fail_timeout=") {
            fail_timeout = parse_time(v).ok_or_else(|| bad(p))?;
        } else if p == "backup" {
            if refuses_backup(b.upstream()) {
                return Err("balancing method does not support parameter \"backup\"".to_string());
            }
            backup = true;
        } else if p == "down" {
            down = true;
        } else if let Some(v) = p.strip_prefix("max_conns=") {
            max_conns = v.parse().map_err(|_| bad(p))?;
        } else if p.starts_with("slow_start=") {
            return Err(format!("the \"{p}\" parameter is not supported by porter"));
        } else {
            return Err(bad(p));
        }
    }
    // `unix:PATH`: the whole rest is the path (no URI part here).
    let addrs = if crate::upstream::unix_path(addr).is_some() {
        resolve_upstream(addr, None, addr)?
    } else {
        let split = crate::upstream::split_url(&format!("http://{addr}"))
            .map_err(|_| format!("invalid host in upstream \"{addr}\""))?;
        if split.uri.is_some() {
            return Err(format!("invalid host in upstream \"{addr}\""));
        }
        if b.ctx == SUPS && split.port.is_none() {
            return Err(format!("no port in upstream \"{addr}\""));
        }
        resolve_upstream(&split.host, split.port, addr)?
    };
    let ub = b.upstream();
    let list = if backup {
        &mut ub.backup
    } else {
        &mut ub.primary
    };
    for a in addrs {
        list.push(PeerSpec {
            server: addr.clone(),
            addr: a,
            weight,
            max_fails,
            fail_timeout,
            down,
            max_conns,
        });
    }
    Ok(())
}

fn set_upstream_hash(b: &mut Build, d: &Directive) -> Res {
    let consistent = match d.args.get(1).map(String::as_str) {
        None => false,
        Some("consistent") => true,
        Some(p) => return Err(format!("invalid parameter \"{p}\"")),
    };
    if !b.upstream().backup.is_empty() || b.upstream().method.is_some() {
        return Err("load balancing method redefined".to_string());
    }
    let key = template(&d.args[0])?;
    set_once(&mut b.upstream().hash, (key, consistent), d)
}
