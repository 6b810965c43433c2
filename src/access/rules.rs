//! `allow` / `deny`: address rules, first match in configuration order,
//! as NGINX's access module checks them. NGINX keeps one list per address
//! family (`all` is in each); one ordered list whose rules name their
//! family gives the same answers. An IPv4-mapped IPv6 client is checked
//! against the IPv4 rules, as NGINX does.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The addresses one rule names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Net {
    /// `all`.
    All,
    /// An IPv4 network: address and mask.
    V4(u32, u32),
    /// An IPv6 network: address and mask.
    V6(u128, u128),
    /// `unix:` (clients on UNIX-domain sockets; porter listens on TCP only,
    /// so it never matches).
    Unix,
}

/// One `allow` or `deny` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessRule {
    /// `deny` (else `allow`).
    pub deny: bool,
    /// What it names.
    pub net: Net,
}

/// Parses a rule's argument: `all`, `unix:`, `ADDR` or `ADDR/BITS`.
/// `Some((net, true))` when the address has bits set below the mask (NGINX
/// warns "low address bits of ... are meaningless" and clears them).
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
    if let Ok(v4) = addr.parse::<Ipv4Addr>() {
        let bits = bits.unwrap_or(32);
        if bits > 32 {
            return None;
        }
        let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
        let a = u32::from(v4);
        return Some((Net::V4(a & mask, mask), a & !mask != 0));
    }
    if let Ok(v6) = addr.parse::<Ipv6Addr>() {
        let bits = bits.unwrap_or(128);
        if bits > 128 {
            return None;
        }
        let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
        let a = u128::from(v6);
        return Some((Net::V6(a & mask, mask), a & !mask != 0));
    }
    None
}

impl Net {
    fn contains(&self, peer: IpAddr) -> bool {
        match (self, peer) {
            (Net::All, _) => true,
            (Net::V4(a, m), IpAddr::V4(p)) => u32::from(p) & m == *a,
            (Net::V6(a, m), IpAddr::V6(p)) => u128::from(p) & m == *a,
            _ => false,
        }
    }
}

/// The first rule naming `peer`, if any.
pub fn first_match(rules: &[AccessRule], peer: IpAddr) -> Option<&AccessRule> {
    let peer = match peer {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    };
    rules.iter().find(|r| r.net.contains(peer))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(deny: bool, s: &str) -> AccessRule {
        AccessRule {
            deny,
            net: parse_net(s).unwrap().0,
        }
    }

    #[test]
    fn first_match_in_order_wins() {
        let rules = [
            rule(true, "10.0.0.1"),
            rule(false, "10.0.0.0/8"),
            rule(true, "all"),
        ];
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(first_match(&rules, ip("10.0.0.1")).unwrap().deny);
        assert!(!first_match(&rules, ip("10.9.0.1")).unwrap().deny);
        assert!(first_match(&rules, ip("11.0.0.1")).unwrap().deny);
        assert!(!first_match(&rules, ip("::ffff:10.1.2.3")).unwrap().deny);
        assert!(first_match(&rules[..2], ip("::1")).is_none());
    }

    #[test]
    fn networks_parse_as_nginx_does() {
        assert_eq!(
            parse_net("10.1.1.1/8"),
            Some((Net::V4(0x0a00_0000, 0xff00_0000), true))
        );
        assert_eq!(parse_net("0.0.0.0/0"), Some((Net::V4(0, 0), false)));
        assert!(parse_net("1.2.3.4/33").is_none());
        assert!(parse_net("1.2.3.4/").is_none());
        assert!(parse_net("example.com").is_none());
        assert_eq!(parse_net("::1"), Some((Net::V6(1, u128::MAX), false)));
        assert!(matches!(
            parse_net("2001:db8::/32"),
            Some((Net::V6(_, _), false))
        ));
        assert!(parse_net("::/129").is_none());
    }
}
