//! `listen` socket options as NGINX on Linux has them: `fastopen=N`,
//! `deferred`, `so_keepalive=`, `ipv6only=`, `reuseport`, `bind`,
//! `multipath`, and NGINX's answers to the FreeBSD-only ones.
//!
//! Parsing only, pure (NGINX's `ngx_http_core_listen` wording); the
//! listening sockets get them in `runtime/listen.rs`. `accept_filter=` is
//! NGINX's `[emerg] accept filters "..." are not supported on this
//! platform, ignored` (the configuration still loads, as NGINX's does);
//! `setfib=` is not a parameter on Linux at all (`invalid parameter`).

use super::value::parse_time;

/// `so_keepalive=on|off|[keepidle]:[keepintvl]:[keepcnt]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeepAlive {
    /// `SO_KEEPALIVE` on (`on`, or any of the three values) or off (`off`).
    pub on: bool,
    /// `TCP_KEEPIDLE`, seconds.
    pub idle: Option<u32>,
    /// `TCP_KEEPINTVL`, seconds.
    pub intvl: Option<u32>,
    /// `TCP_KEEPCNT`.
    pub cnt: Option<u32>,
}

/// The socket options of one listening address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenOpts {
    /// An option that needs the address's own socket was given (NGINX's
    /// `lsopt.set`): `backlog=`, buffers and everything here.
    pub set: bool,
    /// `fastopen=N`: `TCP_FASTOPEN`'s queue length.
    pub fastopen: Option<i32>,
    /// `deferred`: `TCP_DEFER_ACCEPT` (NGINX sets 1 second).
    pub deferred: bool,
    /// `so_keepalive=`, which accepted connections inherit.
    pub keepalive: Option<KeepAlive>,
    /// `ipv6only=on|off` (`IPV6_V6ONLY`; NGINX's default on).
    pub ipv6only: bool,
    /// `multipath`: an MPTCP socket (NGINX 1.29.3).
    pub multipath: bool,
}

impl Default for ListenOpts {
    fn default() -> Self {
        ListenOpts {
            set: false,
            fastopen: None,
            deferred: false,
            keepalive: None,
            ipv6only: true,
            multipath: false,
        }
    }
}

impl ListenOpts {
    /// Takes `p` when it is one of these options: `Ok(true)`; `Ok(false)`
    /// when it is some other parameter; NGINX's message for a bad value.
    pub fn take(&mut self, p: &str) -> Result<bool, String> {
        match p {
            "bind" | "reuseport" => {}
            "deferred" => self.deferred = true,
            "multipath" => self.multipath = true,
            _ if p.starts_with("fastopen=") => {
                let n = atoi(&p[9..]).ok_or_else(|| format!("invalid fastopen \"{p}\""))?;
                self.fastopen = Some(n);
            }
            _ if p.starts_with("ipv6only=o") => {
                self.ipv6only = match &p[10..] {
                    "n" => true,
                    "ff" => false,
                    _ => return Err(format!("invalid ipv6only flags \"{}\"", &p[9..])),
                };
            }
            _ if p.starts_with("so_keepalive=") => {
                let v = &p[13..];
                let k =
                    keepalive(v).ok_or_else(|| format!("invalid so_keepalive value: \"{v}\""))?;
                self.keepalive = Some(k);
            }
            _ => return Ok(false),
        }
        self.set = true;
        Ok(true)
    }
}

/// NGINX's `ngx_atoi`: digits only, no sign.
fn atoi(s: &str) -> Option<i32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `on`, `off`, or `idle:intvl:cnt` with any part empty (not all).
fn keepalive(v: &str) -> Option<KeepAlive> {
    match v {
        "on" => {
            return Some(KeepAlive {
                on: true,
                ..KeepAlive::default()
            })
        }
        "off" => return Some(KeepAlive::default()),
        _ => {}
    }
    let mut parts = v.splitn(3, ':');
    let secs = |s: &str| -> Option<Option<u32>> {
        if s.is_empty() {
            return Some(None);
        }
        let t = parse_time(s)?;
        Some(Some(u32::try_from(t.as_secs()).ok()?))
    };
    let idle = secs(parts.next().unwrap_or(""))?;
    let intvl = secs(parts.next().unwrap_or(""))?;
    let cnt = match parts.next().unwrap_or("") {
        "" => None,
        c => Some(u32::try_from(atoi(c)?).ok()?),
    };
    // NGINX: a zero counts as unset, and one of the three must be set.
    let nz = |o: Option<u32>| o.filter(|n| *n != 0);
    let (idle, intvl, cnt) = (nz(idle), nz(intvl), nz(cnt));
    if idle.is_none() && intvl.is_none() && cnt.is_none() {
        return None;
    }
    Some(KeepAlive {
        on: true,
        idle,
        intvl,
        cnt,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(p: &str) -> Result<ListenOpts, String> {
        let mut o = ListenOpts::default();
        assert!(o.take(p)?, "{p} not taken");
        Ok(o)
    }

    #[test]
    fn fastopen_takes_a_queue_length() {
        assert_eq!(take("fastopen=256").unwrap().fastopen, Some(256));
        assert_eq!(take("fastopen=0").unwrap().fastopen, Some(0));
        assert_eq!(
            take("fastopen=x").unwrap_err(),
            "invalid fastopen \"fastopen=x\""
        );
    }

    #[test]
    fn so_keepalive_reads_nginx_forms() {
        let k = take("so_keepalive=30m::10").unwrap().keepalive.unwrap();
        assert_eq!(
            (k.on, k.idle, k.intvl, k.cnt),
            (true, Some(1800), None, Some(10))
        );
        assert!(!take("so_keepalive=off").unwrap().keepalive.unwrap().on);
        assert!(take("so_keepalive=on").unwrap().keepalive.unwrap().on);
        assert_eq!(
            take("so_keepalive=::").unwrap_err(),
            "invalid so_keepalive value: \"::\""
        );
        assert!(take("so_keepalive=1:2:x").is_err());
    }

    #[test]
    fn ipv6only_is_on_or_off() {
        assert!(!take("ipv6only=off").unwrap().ipv6only);
        assert!(take("ipv6only=on").unwrap().ipv6only);
        assert_eq!(
            take("ipv6only=ox").unwrap_err(),
            "invalid ipv6only flags \"ox\""
        );
    }

    #[test]
    fn other_parameters_are_left() {
        let mut o = ListenOpts::default();
        assert!(!o.take("ssl").unwrap());
        assert!(!o.take("setfib=1").unwrap());
        assert!(!o.set);
    }
}
