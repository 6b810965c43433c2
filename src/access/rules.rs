//! `allow` / `deny`: address rules, first match in configuration order,
//! as NGINX's access module checks them. NGINX keeps one list per address
//! family (`all` is in each); one ordered list whose rules name their
//! family gives the same answers. An IPv4-mapped IPv6 client is checked
//! against the IPv4 rules, as NGINX does.

use std::net::IpAddr;

pub use crate::util::net::{parse_net, Net};

/// One `allow` or `deny` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessRule {
    /// `deny` (else `allow`).
    pub deny: bool,
    /// What it names.
    pub net: Net,
}

/// The first rule naming `peer`, if any (`None`: a UNIX-domain socket's
/// client, which `all` and `unix:` name).
pub fn first_match(rules: &[AccessRule], peer: Option<IpAddr>) -> Option<&AccessRule> {
    let peer = peer.map(|peer| match peer {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    });
    rules.iter().find(|r| r.net.contains_client(peer))
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
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        assert!(first_match(&rules, ip("10.0.0.1")).unwrap().deny);
        assert!(!first_match(&rules, ip("10.9.0.1")).unwrap().deny);
        assert!(first_match(&rules, ip("11.0.0.1")).unwrap().deny);
        assert!(!first_match(&rules, ip("::ffff:10.1.2.3")).unwrap().deny);
        assert!(first_match(&rules[..2], ip("::1")).is_none());
        let unix = [rule(false, "127.0.0.1"), rule(true, "unix:")];
        assert!(first_match(&unix, None).unwrap().deny);
        assert!(first_match(&unix[..1], None).is_none());
        assert!(first_match(&rules, None).unwrap().deny);
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
