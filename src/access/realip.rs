//! The address logic of NGINX's realip module: which header names the
//! client (`real_ip_header`), which senders are trusted to name it
//! (`set_real_ip_from`), and NGINX's walk through a list of addresses
//! from its end (`ngx_http_get_forwarded_addr`), stopping at the first
//! untrusted hop when `real_ip_recursive on`, or taking the last address
//! when off. Addresses are read as NGINX's `ngx_parse_addr_port` reads
//! them: IPv4 in NGINX's dotted form, IPv6 without brackets, or either
//! with a port (`1.2.3.4:80`, `[::1]:80`), which then becomes the
//! client's port; without one the port is 0 (`$remote_port` empty).
//! The request phase that applies it is `handlers/realip.rs`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::rules::Net;

/// `real_ip_header`: where the client's address is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RealIpHeader {
    /// `X-Real-IP` (the default): its first line.
    XRealIp,
    /// `X-Forwarded-For`: every line, the last one first.
    XForwardedFor,
    /// `proxy_protocol`: the address of the connection's PROXY header.
    ProxyProtocol,
    /// Any other header (its name lowercased): its first line.
    Other(String),
}

impl RealIpHeader {
    /// Parses the directive's argument; NGINX compares the three known
    /// names case-sensitively, so `x-forwarded-for` is "any header".
    pub fn parse(arg: &str) -> RealIpHeader {
        match arg {
            "X-Real-IP" => RealIpHeader::XRealIp,
            "X-Forwarded-For" => RealIpHeader::XForwardedFor,
            "proxy_protocol" => RealIpHeader::ProxyProtocol,
            other => RealIpHeader::Other(other.to_ascii_lowercase()),
        }
    }
}

/// Whether `addr` is a trusted sender (NGINX's `ngx_cidr_match`: the
/// family must match; no mapping of IPv4-mapped IPv6 addresses).
pub fn trusted(from: &[Net], addr: IpAddr) -> bool {
    from.iter().any(|n| match (n, addr) {
        (Net::V4(a, m), IpAddr::V4(p)) => u32::from(p) & m == *a,
        (Net::V6(a, m), IpAddr::V6(p)) => u128::from(p) & m == *a,
        _ => false,
    })
}

/// NGINX's `ngx_inet_addr`: four decimal octets (leading zeros and empty
/// octets read as digits would), 255.255.255.255 refused.
fn inet_addr(s: &[u8]) -> Option<Ipv4Addr> {
    let (mut addr, mut octet, mut dots) = (0u32, 0u32, 0);
    for &c in s {
        match c {
            b'0'..=b'9' => {
                octet = octet * 10 + u32::from(c - b'0');
                if octet > 255 {
                    return None;
                }
            }
            b'.' => {
                addr = (addr << 8) + octet;
                octet = 0;
                dots += 1;
            }
            _ => return None,
        }
    }
    let addr = (addr << 8) + octet;
    (dots == 3 && addr != u32::MAX).then(|| Ipv4Addr::from(addr))
}

/// NGINX's `ngx_parse_addr`: an address without a port.
fn parse_addr(s: &[u8]) -> Option<IpAddr> {
    if let Some(v4) = inet_addr(s) {
        return Some(IpAddr::V4(v4));
    }
    std::str::from_utf8(s)
        .ok()?
        .parse::<Ipv6Addr>()
        .ok()
        .map(IpAddr::V6)
}

/// NGINX's `ngx_parse_addr_port`: an address, or one with a port.
pub fn parse_addr_port(s: &[u8]) -> Option<SocketAddr> {
    if let Some(ip) = parse_addr(s) {
        return Some(SocketAddr::new(ip, 0));
    }
    let (host, port) = if let Some(rest) = s.strip_prefix(b"[") {
        let close = rest.iter().position(|&c| c == b']')?;
        let port = rest[close + 1..].strip_prefix(b":")?;
        (&rest[..close], port)
    } else {
        let colon = s.iter().position(|&c| c == b':')?;
        (&s[..colon], &s[colon + 1..])
    };
    if port.is_empty() || !port.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let port: u32 = std::str::from_utf8(port).ok()?.parse().ok()?;
    if !(1..=65535).contains(&port) {
        return None;
    }
    Some(SocketAddr::new(parse_addr(host)?, port as u16))
}

/// What one header value gave (NGINX's return codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Walk {
    /// Nothing taken from it.
    Declined,
    /// Walked to its start.
    Ok,
    /// Stopped inside it at an untrusted or unreadable entry.
    Done,
}

/// NGINX's `ngx_http_get_forwarded_addr_internal`: from the end of one
/// comma-separated value, replaces `addr` by the entry before each
/// trusted hop.
fn walk_value(addr: &mut SocketAddr, value: &[u8], from: &[Net], recursive: bool) -> Walk {
    let mut found = false;
    let mut len = value.len();
    loop {
        let stop = if found { Walk::Done } else { Walk::Declined };
        if !trusted(from, addr.ip()) || len == 0 {
            return stop;
        }
        let mut p = len - 1;
        while p > 0 && matches!(value[p], b' ' | b',') {
            p -= 1;
            len -= 1;
        }
        while p > 0 {
            if matches!(value[p], b' ' | b',') {
                p += 1;
                break;
            }
            p -= 1;
        }
        match parse_addr_port(&value[p..len]) {
            Some(a) => *addr = a,
            None => return stop,
        }
        found = true;
        if !(recursive && p > 0) {
            return Walk::Ok;
        }
        len = p - 1;
    }
}

/// NGINX's `ngx_http_get_forwarded_addr`: the client's address according
/// to `values` (the header's lines in the order sent; the last is read
/// first) when the connection's peer `peer` is trusted, else `None`.
pub fn forwarded_addr(
    peer: SocketAddr,
    values: &[&str],
    from: &[Net],
    recursive: bool,
) -> Option<SocketAddr> {
    let mut addr = peer;
    let mut rc = Walk::Declined;
    let mut found = false;
    for v in values.iter().rev() {
        rc = walk_value(&mut addr, v.as_bytes(), from, recursive);
        if !recursive {
            break;
        }
        if rc == Walk::Declined && found {
            rc = Walk::Done;
            break;
        }
        if rc != Walk::Ok {
            break;
        }
        found = true;
    }
    (rc != Walk::Declined).then_some(addr)
}

#[cfg(test)]
mod tests {
    use super::super::rules::parse_net;
    use super::*;

    fn nets(list: &[&str]) -> Vec<Net> {
        list.iter().map(|s| parse_net(s).unwrap().0).collect()
    }

    fn peer(s: &str) -> SocketAddr {
        SocketAddr::new(s.parse().unwrap(), 40000)
    }

    fn real(p: &str, values: &[&str], from: &[&str], rec: bool) -> Option<String> {
        forwarded_addr(peer(p), values, &nets(from), rec).map(|a| a.to_string())
    }

    #[test]
    fn untrusted_peer_changes_nothing() {
        assert_eq!(real("10.0.0.1", &["1.1.1.1"], &["127.0.0.1"], false), None);
    }

    #[test]
    fn non_recursive_takes_the_last_entry() {
        let v = ["1.1.1.1, 10.0.0.2"];
        assert_eq!(
            real("127.0.0.1", &v, &["127.0.0.1", "10.0.0.0/8"], false),
            Some("10.0.0.2:0".into())
        );
    }

    #[test]
    fn recursive_stops_at_the_first_untrusted_hop() {
        let from = ["127.0.0.1", "10.0.0.0/8"];
        let v = ["9.9.9.9, 1.1.1.1, 10.0.0.2,10.0.0.3 "];
        assert_eq!(real("127.0.0.1", &v, &from, true), Some("1.1.1.1:0".into()));
        let all_trusted = ["10.0.0.9, 10.0.0.2"];
        assert_eq!(
            real("127.0.0.1", &all_trusted, &from, true),
            Some("10.0.0.9:0".into())
        );
    }

    #[test]
    fn recursive_walks_lines_from_the_last() {
        let from = ["127.0.0.1", "10.0.0.0/8"];
        let v = ["5.5.5.5", "10.0.0.7"];
        assert_eq!(real("127.0.0.1", &v, &from, true), Some("5.5.5.5:0".into()));
        assert_eq!(
            real("127.0.0.1", &v, &from, false),
            Some("10.0.0.7:0".into())
        );
    }

    #[test]
    fn garbage_stops_the_walk() {
        let from = ["127.0.0.1", "10.0.0.0/8"];
        assert_eq!(real("127.0.0.1", &["bogus"], &from, true), None);
        assert_eq!(
            real("127.0.0.1", &["bogus, 10.0.0.5"], &from, true),
            Some("10.0.0.5:0".into())
        );
    }

    #[test]
    fn addresses_with_ports_and_ipv6() {
        let p = |s: &str| parse_addr_port(s.as_bytes()).map(|a| a.to_string());
        assert_eq!(p("1.2.3.4:5678"), Some("1.2.3.4:5678".into()));
        assert_eq!(p("[2001:db8::1]:80"), Some("[2001:db8::1]:80".into()));
        assert_eq!(p("2001:db8::1"), Some("[2001:db8::1]:0".into()));
        assert_eq!(p("01.2.3.4"), Some("1.2.3.4:0".into()));
        assert_eq!(p("[::1]"), None);
        assert_eq!(p("1.2.3.4:0"), None);
        assert_eq!(p("1.2.3"), None);
        assert_eq!(p("255.255.255.255"), None);
    }

    #[test]
    fn families_must_match() {
        let from = nets(&["::1", "127.0.0.0/8"]);
        assert!(trusted(&from, "::1".parse().unwrap()));
        assert!(!trusted(&from, "::ffff:127.0.0.1".parse().unwrap()));
        assert!(!trusted(&nets(&["unix:"]), "127.0.0.1".parse().unwrap()));
    }
}
