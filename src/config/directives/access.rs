//! Access control and limits: `allow`, `deny`, `satisfy`, `auth_delay`, `auth_basic`,
//! `auth_basic_user_file`, `limit_req_zone`, `limit_req`, `limit_req_*`,
//! `limit_conn_zone`, `limit_conn`, `limit_conn_*` — with NGINX's
//! arguments, errors and inheritance (a level with no `allow`/`deny`, no
//! `limit_req` or no `limit_conn` line takes its parent's whole list).
//!
//! A zone may be named by `limit_req` before `limit_req_zone` declares it,
//! as NGINX's shared-memory zones may; [`AccessB::finish`] refuses a zone
//! never declared, with NGINX's "zero size shared memory zone".

#[allow(unused_imports)]
use super::*;
use crate::access::limit_conn::{ConnZoneDef, LimitConn, LimitConnZone};
use crate::access::limit_req::{LimitReq, LimitReqZone, ReqZoneDef};
use crate::access::rules::{self, AccessRule};

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("allow", HSL | LMT | STREAM | SSRV, Arity::N(1), set_rule),
    d("deny", HSL | LMT | STREAM | SSRV, Arity::N(1), set_rule),
    d("satisfy", HSL, Arity::N(1), set_satisfy),
    d("auth_delay", HSL, Arity::N(1), loc_time!(auth_delay)),
    d("auth_basic", HSL | LMT, Arity::N(1), |b, d| {
        let v = template(&d.args[0])?;
        set_once(&mut b.loc().auth_basic, Some(v), d)
    }),
    d("auth_basic_user_file", HSL | LMT, Arity::N(1), |b, d| {
        let raw = &d.args[0];
        let full = if raw.starts_with('/') || raw.starts_with('$') {
            raw.clone()
        } else {
            b.full_path(raw).to_string_lossy().into_owned()
        };
        let v = template(&full)?;
        if raw.starts_with('$') {
            let prefix = b.full_path(".").to_string_lossy().into_owned();
            b.loc().auth_basic_file_prefix = Some(Some(Arc::from(prefix.trim_end_matches('.'))));
        }
        set_once(&mut b.loc().auth_basic_user_file, Some(v), d)
    }),
    d("limit_req_zone", HTTP, Arity::N(3), set_limit_req_zone),
    d("limit_req", HSL, Arity::Range(1, 3), set_limit_req),
    d("limit_req_status", HSL, Arity::N(1), |b, d| {
        let v = status(d)?;
        set_once(&mut b.loc().limit_req_status, v, d)
    }),
    d("limit_req_log_level", HSL, Arity::N(1), |b, d| {
        let v = log_level(d)?;
        set_once(&mut b.loc().limit_req_log_level, v, d)
    }),
    d(
        "limit_req_dry_run",
        HSL,
        Arity::N(1),
        loc_flag!(limit_req_dry_run),
    ),
    d(
        "limit_conn_zone",
        HTTP | STREAM,
        Arity::N(2),
        set_limit_conn_zone,
    ),
    d(
        "limit_conn",
        HSL | STREAM | SSRV,
        Arity::N(2),
        set_limit_conn,
    ),
    d("limit_conn_status", HSL, Arity::N(1), |b, d| {
        let v = status(d)?;
        set_once(&mut b.loc().limit_conn_status, v, d)
    }),
    d(
        "limit_conn_log_level",
        HSL | STREAM | SSRV,
        Arity::N(1),
        |b, d| {
            let v = log_level(d)?;
            set_once(&mut b.loc().limit_conn_log_level, v, d)
        },
    ),
    d(
        "limit_conn_dry_run",
        HSL | STREAM | SSRV,
        Arity::N(1),
        loc_flag!(limit_conn_dry_run),
    ),
];

/// The zones named so far, declared or not.
#[derive(Default)]
pub(super) struct AccessB {
    req_zones: Vec<Arc<LimitReqZone>>,
    conn_zones: Vec<Arc<LimitConnZone>>,
}

impl AccessB {
    fn req_zone(&mut self, name: &str) -> Arc<LimitReqZone> {
        if let Some(z) = self.req_zones.iter().find(|z| z.name == name) {
            return z.clone();
        }
        let z = LimitReqZone::new(name);
        self.req_zones.push(z.clone());
        z
    }

    fn conn_zone(&mut self, name: &str) -> Arc<LimitConnZone> {
        if let Some(z) = self.conn_zones.iter().find(|z| z.name == name) {
            return z.clone();
        }
        let z = LimitConnZone::new(name);
        self.conn_zones.push(z.clone());
        z
    }

    /// Every zone named must have been declared.
    pub(super) fn finish(&self) -> Res {
        let undeclared = self
            .req_zones
            .iter()
            .find(|z| z.def().is_none())
            .map(|z| &z.name)
            .or_else(|| {
                self.conn_zones
                    .iter()
                    .find(|z| z.def().is_none())
                    .map(|z| &z.name)
            });
        match undeclared {
            Some(name) => Err(format!("zero size shared memory zone \"{name}\"")),
            None => Ok(()),
        }
    }
}

fn set_rule(b: &mut Build, d: &Directive) -> Res {
    let (net, _low_bits) = rules::parse_net(&d.args[0])
        .ok_or_else(|| format!("invalid parameter \"{}\"", d.args[0]))?;
    let rule = AccessRule {
        deny: d.name == "deny",
        net,
    };
    let list = b.loc().access_rules.get_or_insert_with(Default::default);
    Arc::make_mut(list).push(rule);
    Ok(())
}

fn set_satisfy(b: &mut Build, d: &Directive) -> Res {
    let any = match d.args[0].as_str() {
        "all" => false,
        "any" => true,
        v => return Err(format!("invalid value \"{v}\"")),
    };
    set_once(&mut b.loc().satisfy_any, any, d)
}

fn status(d: &Directive) -> Result<u16, String> {
    let n: u16 = d.args[0]
        .parse()
        .map_err(|_| format!("\"{}\" directive invalid number", d.name))?;
    if !(400..=599).contains(&n) {
        return Err("value must be between 400 and 599".into());
    }
    Ok(n)
}

fn log_level(d: &Directive) -> Result<Level, String> {
    Ok(match d.args[0].as_str() {
        "info" => Level::Info,
        "notice" => Level::Notice,
        "warn" => Level::Warn,
        "error" => Level::Error,
        v => return Err(format!("invalid value \"{v}\"")),
    })
}

/// `zone=NAME:SIZE`: the name and a size of at least 8 pages.
fn zone_arg(arg: &str) -> Result<(String, u64), String> {
    let spec = &arg["zone=".len()..];
    let (name, size) = spec
        .split_once(':')
        .ok_or_else(|| format!("invalid zone size \"{arg}\""))?;
    let size = parse_size(size).ok_or_else(|| format!("invalid zone size \"{arg}\""))?;
    if size < 8 * 4096 {
        return Err(format!("zone \"{arg}\" is too small"));
    }
    Ok((name.to_string(), size))
}

/// `rate=Nr/s` or `rate=Nr/m` (a bare number is per second), in
/// milli-requests per second.
fn rate_arg(arg: &str) -> Result<u64, String> {
    let v = &arg["rate=".len()..];
    let (n, scale) = match (v.strip_suffix("r/s"), v.strip_suffix("r/m")) {
        (Some(n), _) => (n, 1),
        (_, Some(n)) => (n, 60),
        _ => (v, 1),
    };
    match n.parse::<u64>() {
        Ok(r) if r > 0 && n.bytes().all(|c| c.is_ascii_digit()) => Ok(r * 1000 / scale),
        _ => Err(format!("invalid rate \"{arg}\"")),
    }
}

fn set_limit_req_zone(b: &mut Build, d: &Directive) -> Res {
    let key = template(&d.args[0])?;
    let mut zone = None;
    let mut rate = 1000;
    for a in &d.args[1..] {
        if a.starts_with("zone=") {
            zone = Some(zone_arg(a)?);
        } else if a.starts_with("rate=") {
            rate = rate_arg(a)?;
        } else {
            return Err(format!("invalid parameter \"{a}\""));
        }
    }
    let (name, size) =
        zone.ok_or_else(|| format!("\"{}\" must have \"zone\" parameter", d.name))?;
    let z = b.access.req_zone(&name);
    z.define(ReqZoneDef { key, rate, size })
        .map_err(|k| format!("{} \"{name}\" is already bound to key \"{k}\"", d.name))
}

fn set_limit_req(b: &mut Build, d: &Directive) -> Res {
    let mut zone = None;
    let mut burst = 0;
    let mut delay = 0;
    let positive = |a: &str, what: &str| match a.parse::<u64>() {
        Ok(n) if n > 0 && a.bytes().all(|c| c.is_ascii_digit()) => Ok(n),
        _ => Err(format!("invalid {what} value \"{}\"", a)),
    };
    for a in &d.args {
        if let Some(name) = a.strip_prefix("zone=") {
            zone = Some(b.access.req_zone(name));
        } else if let Some(v) = a.strip_prefix("burst=") {
            burst = positive(v, "burst").map_err(|_| format!("invalid burst value \"{a}\""))?;
        } else if let Some(v) = a.strip_prefix("delay=") {
            delay = positive(v, "delay").map_err(|_| format!("invalid delay value \"{a}\""))?;
        } else if a == "nodelay" {
            delay = u64::MAX / 1000;
        } else {
            return Err(format!("invalid parameter \"{a}\""));
        }
    }
    let zone = zone.ok_or_else(|| format!("\"{}\" must have \"zone\" parameter", d.name))?;
    let list = b.loc().limit_req.get_or_insert_with(Default::default);
    if list.iter().any(|l| Arc::ptr_eq(&l.zone, &zone)) {
        return Err(dup(d));
    }
    Arc::make_mut(list).push(LimitReq {
        zone,
        burst: burst * 1000,
        delay: delay.saturating_mul(1000),
    });
    Ok(())
}

fn set_limit_conn_zone(b: &mut Build, d: &Directive) -> Res {
    let key = template(&d.args[0])?;
    let a = &d.args[1];
    if !a.starts_with("zone=") {
        return Err(format!("invalid parameter \"{a}\""));
    }
    let (name, size) = zone_arg(a)?;
    let z = b.access.conn_zone(&name);
    z.define(ConnZoneDef { key, size })
        .map_err(|k| format!("{} \"{name}\" is already bound to key \"{k}\"", d.name))
}

fn set_limit_conn(b: &mut Build, d: &Directive) -> Res {
    let zone = b.access.conn_zone(&d.args[0]);
    let list = b.loc().limit_conn.get_or_insert_with(Default::default);
    if list.iter().any(|l| Arc::ptr_eq(&l.zone, &zone)) {
        return Err(dup(d));
    }
    let n = &d.args[1];
    let max = match n.parse::<u64>() {
        Ok(v) if v > 0 && n.bytes().all(|c| c.is_ascii_digit()) => v,
        _ => return Err(format!("invalid number of connections \"{n}\"")),
    };
    if max > 65535 {
        return Err("connection limit must be less 65536".into());
    }
    Arc::make_mut(list).push(LimitConn {
        zone,
        max: max as u32,
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_zones_as_nginx_reads_them() {
        assert_eq!(rate_arg("rate=10r/s"), Ok(10_000));
        assert_eq!(rate_arg("rate=30r/m"), Ok(500));
        assert_eq!(rate_arg("rate=5"), Ok(5000));
        assert_eq!(
            rate_arg("rate=0r/s"),
            Err("invalid rate \"rate=0r/s\"".into())
        );
        assert_eq!(zone_arg("zone=one:1m"), Ok(("one".into(), 1 << 20)));
        assert_eq!(
            zone_arg("zone=one:10k"),
            Err("zone \"zone=one:10k\" is too small".into())
        );
        assert_eq!(
            zone_arg("zone=one"),
            Err("invalid zone size \"zone=one\"".into())
        );
    }
}
