//! Networks and forwarded addresses as NGINX reads them, for every module
//! that needs them: [`Net`] and [`parse_net`] (`ngx_ptocidr`: `allow`/
//! `deny`, `set_real_ip_from`, `geo`'s networks and `proxy`), and the walk
//! through a list of addresses from its end ([`forwarded_addr`],
//! `ngx_http_get_forwarded_addr`), stopping at the first untrusted hop when
//! recursive, which realip and `geo`'s `proxy` share. Addresses are read as
//! NGINX's `ngx_parse_addr_port` reads them: IPv4 in NGINX's dotted form,
//! IPv6 without brackets, or either with a port (`1.2.3.4:80`,
//! `[::1]:80`); without one the port is 0. Below both `access` and
//! `vars`, so neither imports the other for it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// A network a rule or list names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Net {
    /// `all`.
    All,
    /// An IPv4 network: address and mask.
    V4(u32, u32),
    /// An IPv6 network: address and mask.
    V6(u128, u128),
    /// `unix:` (clients on UNIX-domain sockets, `listen unix:`).
    Unix,
}

/// Parses `all`, `unix:`, `ADDR` or `ADDR/BITS` (NGINX's `ngx_ptocidr`,
/// its IPv4 form read by `ngx_inet_addr`). `Some((net, true))` when the
/// address has bits set below the mask (NGINX warns "low address bits of
/// ... are meaningless" and clears them).
pub fn parse_net(s: &str) -> Option<(Net, bool)> {
    match s {
        "all" => return Some((Net::All, false)),
        "unix:" => return Some((Net::Unix, false)),
        _ => {}
    }
    let (addr, bits) = match s.split_once('/') {
        Some((a, b)) => (a, Some(b)),
        None => (s, None),
    };
    let bits = match bits {
        Some(b) if !b.is_empty() && b.bytes().all(|c| c.is_ascii_digit()) => {
            Some(b.parse::<u32>().ok()?)
        }
        Some(_) => return None,
        None => None,
    };
    match parse_addr(addr.as_bytes())? {
        IpAddr::V4(v4) => {
            let bits = bits.unwrap_or(32);
            if bits > 32 {
                return None;
            }
            let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
            let a = u32::from(v4);
            Some((Net::V4(a & mask, mask), a & !mask != 0))
        }
        IpAddr::V6(v6) => {
            let bits = bits.unwrap_or(128);
            if bits > 128 {
                return None;
            }
            let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
            let a = u128::from(v6);
            Some((Net::V6(a & mask, mask), a & !mask != 0))
        }
    }
}

impl Net {
    /// Whether `ip` lies in this network (`ngx_cidr_match`: the family
    /// must match; an IPv4-mapped IPv6 address is not unmapped here).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self, ip) {
            (Net::All, _) => true,
            (Net::V4(a, m), IpAddr::V4(p)) => u32::from(p) & m == *a,
            (Net::V6(a, m), IpAddr::V6(p)) => u128::from(p) & m == *a,
            _ => false,
        }
    }

    /// Whether the client lies in this network: `None` is a UNIX-domain
    /// socket's client, which only `all` and `unix:` name.
    pub fn contains_client(&self, client: Option<IpAddr>) -> bool {
        match client {
            Some(ip) => self.contains(ip),
            None => matches!(self, Net::All | Net::Unix),
        }
    }

    /// The prefix length of an address network (0 for `all`/`unix:`).
    pub fn prefix_len(&self) -> u8 {
        match self {
            Net::V4(_, m) => m.leading_ones() as u8,
            Net::V6(_, m) => m.leading_ones() as u8,
            Net::All | Net::Unix => 0,
        }
    }
}

/// Whether `addr` is a trusted sender (NGINX's `ngx_cidr_match`: the
/// family must match; no mapping of IPv4-mapped IPv6 addresses).
pub fn trusted(from: &[Net], addr: IpAddr) -> bool {
    from.iter().any(|n| n.contains(addr))
}

/// NGINX's `ngx_inet_addr`: four decimal octets (leading zeros and empty
/// octets read as digits would), 255.255.255.255 refused.
pub fn inet_addr(s: &[u8]) -> Option<Ipv4Addr> {
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
pub fn parse_addr(s: &[u8]) -> Option<IpAddr> {
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
/// `unix` says the address walked from is a UNIX-domain socket's client.
fn walk_value(
    addr: &mut SocketAddr,
    unix: bool,
    value: &[u8],
    from: &[Net],
    recursive: bool,
) -> Walk {
    let mut found = false;
    let mut len = value.len();
    let mut client = (!unix).then(|| addr.ip());
    loop {
        let stop = if found { Walk::Done } else { Walk::Declined };
        if !from.iter().any(|n| n.contains_client(client)) || len == 0 {
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
        client = Some(addr.ip());
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
    forwarded_client(peer, false, values, from, recursive)
}

/// [`forwarded_addr`] for a peer that may be a UNIX-domain socket's
/// client (`unix`: `peer` is a placeholder, trusted by `unix:` alone).
pub fn forwarded_client(
    peer: SocketAddr,
    mut unix: bool,
    values: &[&str],
    from: &[Net],
    recursive: bool,
) -> Option<SocketAddr> {
    let mut addr = peer;
    let mut rc = Walk::Declined;
    let mut found = false;
    for v in values.iter().rev() {
        rc = walk_value(&mut addr, unix, v.as_bytes(), from, recursive);
        // Anything but Declined replaced the address.
        unix &= rc == Walk::Declined;
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
