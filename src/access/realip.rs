//! NGINX's realip module: which header names the client
//! (`real_ip_header`); which senders are trusted to name it
//! (`set_real_ip_from`) and the walk through a list of addresses from its
//! end are `util::net`'s (shared with `geo`'s `proxy`), re-exported here.
//! An address read with a port gives the client's port; without one the
//! port is 0 (`$remote_port` empty). The request phase that applies it is
//! `handlers/realip.rs`.

pub use crate::util::net::{forwarded_addr, parse_addr_port, trusted};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::net::{parse_net, Net};
    use std::net::SocketAddr;

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
