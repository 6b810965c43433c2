//! `error_log syslog:...` and `access_log syslog:...`: lines sent as
//! RFC 3164 datagrams, the way NGINX's `ngx_syslog.c` sends them.
//!
//! `syslog:server=ADDR[:PORT]|unix:PATH[,facility=][,severity=][,tag=]
//! [,nohostname]` (port 514, facility `local7`, severity `info`, tag
//! `nginx` by default, NGINX's parameter errors word for word). A datagram
//! is `<PRI>Mmm dd hh:mm:ss HOST TAG: MSG` (no `HOST ` with `nohostname`),
//! PRI = facility * 8 + severity; an error log line's severity is its
//! level, an access log line's the configured one.
//!
//! Sent at once by the thread that logs, never queued behind the log
//! writer's disk writes: one non-blocking `send` on a connected datagram
//! socket, opened on first use and reopened after a failed send (the
//! collector was down), as NGINX's. A full socket buffer drops the line.
//! Written here rather than taken from a crate: the format is NGINX's,
//! not a syslog library's (RFC 5424 or local `/dev/log` conventions).

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use socket2::{Domain, SockAddr, Socket, Type};

use super::Level;

const FACILITIES: [&str; 24] = [
    "kern", "user", "mail", "daemon", "auth", "intern", "lpr", "news", "uucp", "clock", "authpriv",
    "ftp", "ntp", "audit", "alert", "cron", "local0", "local1", "local2", "local3", "local4",
    "local5", "local6", "local7",
];

const SEVERITIES: [&str; 8] = [
    "emerg", "alert", "crit", "error", "warn", "notice", "info", "debug",
];

/// NGINX's cap on one error line, plus the header (`NGX_SYSLOG_MAX_STR`).
const MAX_MSG: usize = 2048;

/// Where the datagrams go.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Server {
    Inet(SocketAddr),
    Unix(PathBuf),
}

/// One `syslog:` destination of a log directive.
#[derive(Debug)]
pub struct SyslogPeer {
    server: Server,
    facility: u8,
    severity: u8,
    tag: String,
    nohostname: bool,
    /// The connected socket; `None` until the first line or after a
    /// failed send.
    sock: Mutex<Option<Socket>>,
}

impl SyslogPeer {
    /// Parses what follows `syslog:` (NGINX's `ngx_syslog_parse_args`).
    pub fn parse(args: &str) -> Result<SyslogPeer, String> {
        let (mut server, mut facility, mut severity, mut tag) = (None, None, None, None);
        let mut nohostname = false;
        for p in args.split(',') {
            let dup = |what: &str| format!("duplicate syslog \"{what}\"");
            if let Some(v) = p.strip_prefix("server=") {
                if server.is_some() {
                    return Err(dup("server"));
                }
                server = Some(parse_server(v)?);
            } else if let Some(v) = p.strip_prefix("facility=") {
                if facility.is_some() {
                    return Err(dup("facility"));
                }
                let i = FACILITIES.iter().position(|f| *f == v);
                facility = Some(i.ok_or_else(|| format!("unknown syslog facility \"{v}\""))?);
            } else if let Some(v) = p.strip_prefix("severity=") {
                if severity.is_some() {
                    return Err(dup("severity"));
                }
                let i = SEVERITIES.iter().position(|s| *s == v);
                severity = Some(i.ok_or_else(|| format!("unknown syslog severity \"{v}\""))?);
            } else if let Some(v) = p.strip_prefix("tag=") {
                if tag.is_some() {
                    return Err(dup("tag"));
                }
                if v.len() > 32 {
                    return Err("syslog tag length exceeds 32".into());
                }
                if !v.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
                    return Err(
                        "syslog \"tag\" only allows alphanumeric characters and underscore".into(),
                    );
                }
                tag = Some(v.to_string());
            } else if p == "nohostname" {
                nohostname = true;
            } else {
                return Err(format!("unknown syslog parameter \"{p}\""));
            }
        }
        Ok(SyslogPeer {
            server: server.ok_or("no syslog server specified")?,
            facility: facility.unwrap_or(23) as u8,
            severity: severity.unwrap_or(6) as u8,
            tag: tag.unwrap_or_else(|| "nginx".into()),
            nohostname,
            sock: Mutex::new(None),
        })
    }

    /// Sends `msg` (one line, no newline): an error log line at `level`,
    /// or (`None`) an access log line at the configured severity.
    pub fn send(&self, level: Option<Level>, msg: &[u8]) {
        let severity = level.map_or(self.severity, |l| l as u8);
        let mut dgram = self.header(severity).into_bytes();
        let room = (MAX_MSG + 128).saturating_sub(dgram.len());
        dgram.extend_from_slice(&msg[..msg.len().min(room)]);
        let mut sock = self.sock.lock().unwrap_or_else(|e| e.into_inner());
        if sock.is_none() {
            *sock = self.connect().ok();
        }
        let Some(s) = sock.as_ref() else { return };
        if s.send(&dgram).is_err() {
            // Refused (nobody listens) or the buffer is full: this line is
            // lost; the next opens a new socket, as NGINX's.
            *sock = None;
        }
    }

    /// `<PRI>Mmm dd hh:mm:ss HOST TAG: ` (NGINX's `ngx_syslog_add_header`).
    fn header(&self, severity: u8) -> String {
        let pri = u32::from(self.facility) * 8 + u32::from(severity);
        let now = crate::util::time::now().0;
        let time = crate::util::time::strftime("%b %e %H:%M:%S", now, false);
        if self.nohostname {
            format!("<{pri}>{time} {}: ", self.tag)
        } else {
            format!("<{pri}>{time} {} {}: ", hostname(), self.tag)
        }
    }

    fn connect(&self) -> io::Result<Socket> {
        let (domain, addr) = match &self.server {
            Server::Inet(a) => (Domain::for_address(*a), SockAddr::from(*a)),
            Server::Unix(p) => (Domain::UNIX, SockAddr::unix(p)?),
        };
        let s = Socket::new(domain, Type::DGRAM, None)?;
        s.set_nonblocking(true)?;
        s.set_cloexec(true)?;
        s.connect(&addr)?;
        Ok(s)
    }
}

/// The host name in every datagram: `gethostname`, lowercased (NGINX's
/// `cycle->hostname`).
fn hostname() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .to_ascii_lowercase()
    })
}

/// `server=`: `unix:PATH`, `IP[:PORT]`, `[IPv6][:PORT]` or `NAME[:PORT]`
/// (its first address), port 514 by default.
fn parse_server(v: &str) -> Result<Server, String> {
    let err = |what: &str| format!("{what} in syslog server \"{v}\"");
    if let Some(path) = v.strip_prefix("unix:") {
        if path.is_empty() {
            return Err(err("no path in the unix domain socket"));
        }
        return Ok(Server::Unix(PathBuf::from(path)));
    }
    if let Ok(a) = v.parse::<SocketAddr>() {
        return Ok(Server::Inet(a));
    }
    if let Ok(ip) = v.trim_start_matches('[').trim_end_matches(']').parse() {
        return Ok(Server::Inet(SocketAddr::new(ip, 514)));
    }
    let (host, port) = match v.rsplit_once(':') {
        Some((h, p)) => match p.parse::<u16>() {
            Ok(n) if n > 0 && p.bytes().all(|c| c.is_ascii_digit()) => (h, n),
            _ => return Err(err("invalid port")),
        },
        None => (v, 514),
    };
    if host.is_empty() {
        return Err(err("no host"));
    }
    (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .map(Server::Inet)
        .ok_or_else(|| err("host not found"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_nginx_s() {
        let p = SyslogPeer::parse("server=127.0.0.1").unwrap();
        assert_eq!(p.server, Server::Inet("127.0.0.1:514".parse().unwrap()));
        assert_eq!((p.facility, p.severity, p.tag.as_str()), (23, 6, "nginx"));
        assert!(p.header(6).starts_with("<190>"));
    }

    #[test]
    fn parameters_in_any_order() {
        let p =
            SyslogPeer::parse("severity=alert,server=[::1]:5140,facility=user,tag=X_1,nohostname")
                .unwrap();
        assert_eq!(p.server, Server::Inet("[::1]:5140".parse().unwrap()));
        assert_eq!((p.facility, p.severity), (1, 1));
        let h = p.header(p.severity);
        assert!(
            h.starts_with("<9>") && h.ends_with(":00 X_1: ") || h.ends_with(" X_1: "),
            "{h}"
        );
        assert!(!p.header(1).contains(&format!(" {} ", hostname())), "{h}");
    }

    #[test]
    fn errors_are_nginx_s() {
        let e = |a: &str| SyslogPeer::parse(a).unwrap_err();
        assert_eq!(e("facility=user"), "no syslog server specified");
        assert_eq!(
            e("server=1.2.3.4,facility=x"),
            "unknown syslog facility \"x\""
        );
        assert_eq!(
            e("server=1.2.3.4,severity=err"),
            "unknown syslog severity \"err\""
        );
        assert_eq!(
            e("server=1.2.3.4,tag=a-b"),
            "syslog \"tag\" only allows alphanumeric characters and underscore"
        );
        assert_eq!(e("server=1.2.3.4,foo"), "unknown syslog parameter \"foo\"");
        assert_eq!(
            e("server=1.2.3.4,server=1.2.3.4"),
            "duplicate syslog \"server\""
        );
        assert_eq!(
            e("server=1.2.3.4:x"),
            "invalid port in syslog server \"1.2.3.4:x\""
        );
    }
}
