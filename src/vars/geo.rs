//! `geo [$address] $variable { … }`: a variable whose value is chosen by
//! the client's address (or another variable holding one), as NGINX's geo
//! module does.
//!
//! Two tables, NGINX's: by default a longest-prefix match over CIDR
//! networks, IPv4 and IPv6 apart (an IPv4-mapped IPv6 address is looked up
//! among the IPv4 networks); after `ranges`, IPv4 ranges `a-b`, kept as
//! NGINX keeps them in buckets of one /16 each, where a range may split a
//! range it lies inside but not overlap one partly. `default` is the value
//! of `0.0.0.0/0` and `::/0` (empty when not given). An address that does
//! not parse is looked up as 255.255.255.255, as NGINX's `INADDR_NONE`.
//!
//! `proxy CIDR` names trusted proxies: a client among them is replaced by
//! the last address of `X-Forwarded-For`, and with `proxy_recursive` by
//! the last one that is not itself a trusted proxy
//! (`ngx_http_get_forwarded_addr`). Values are plain strings, without
//! variables, as in NGINX.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use crate::util::net::{forwarded_addr, inet_addr, parse_net, Net};
use std::sync::Arc;

use super::template::{Template, Var, VarSource};

/// Parses a network of a `geo` block (`ADDR`, `ADDR/BITS`);
/// `Some((net, true))` when bits below the mask were set (NGINX warns
/// "low address bits of … are meaningless" and clears them).
pub fn parse_cidr(s: &str) -> Option<(Net, bool)> {
    // NGINX's address parser answers `INADDR_NONE` for 255.255.255.255,
    // which it takes for an error everywhere but written alone here.
    if s == "255.255.255.255" {
        return Some((Net::V4(u32::MAX, u32::MAX), false));
    }
    parse_net(s).filter(|(n, _)| matches!(n, Net::V4(..) | Net::V6(..)))
}

fn mask32(bits: u8) -> u32 {
    u32::MAX.checked_shl(32 - bits as u32).unwrap_or(0)
}

fn mask128(bits: u8) -> u128 {
    u128::MAX.checked_shl(128 - bits as u32).unwrap_or(0)
}

fn unmap(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => ip,
        },
        v4 => v4,
    }
}

/// One IPv4 range inside a /16 bucket: low 16 bits of its first and last
/// address.
#[derive(Debug, Clone)]
struct Range {
    start: u16,
    end: u16,
    value: Arc<str>,
}

/// The lookup table.
#[derive(Debug)]
enum Table {
    /// Networks by prefix length: `v4[bits]` maps masked addresses.
    Cidr {
        v4: Vec<HashMap<u32, Arc<str>>>,
        v6: Vec<HashMap<u128, Arc<str>>>,
    },
    /// `ranges`: sorted ranges per /16, and the default value.
    Ranges {
        low: HashMap<u16, Vec<Range>>,
        default: Option<Arc<str>>,
    },
}

/// One `geo` block, compiled.
#[derive(Debug)]
pub struct Geo {
    /// The variable's name, without `$`.
    pub name: String,
    slot: usize,
    source: Option<Template>,
    volatile: bool,
    proxies: Vec<Net>,
    proxy_recursive: bool,
    table: Table,
}

impl PartialEq for Geo {
    fn eq(&self, other: &Geo) -> bool {
        self.slot == other.slot
    }
}

impl Eq for Geo {}

/// A `geo` block being read.
pub struct GeoBuilder {
    geo: Geo,
    /// A CIDR entry was written (`ranges` must come first).
    cidr_seen: bool,
    /// Warnings for the walker to print with the line's place.
    warnings: Vec<String>,
}

impl GeoBuilder {
    /// A geo of `source` (`None`: the client address) into `$name`;
    /// `slot` caches its value per request.
    pub fn new(name: &str, source: Option<Template>, slot: usize) -> GeoBuilder {
        GeoBuilder {
            geo: Geo {
                name: name.to_string(),
                slot,
                source,
                volatile: false,
                proxies: Vec::new(),
                proxy_recursive: false,
                table: Table::Cidr {
                    v4: vec![HashMap::new(); 33],
                    v6: vec![HashMap::new(); 129],
                },
            },
            cidr_seen: false,
            warnings: Vec::new(),
        }
    }

    /// Warnings the last line produced (NGINX's `[warn]` texts), drained.
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// One line of the block: its words. Errors are NGINX's texts.
    pub fn line(&mut self, words: &[&str]) -> Result<(), String> {
        match words {
            ["ranges"] => {
                if self.cidr_seen {
                    return Err(
                        "the \"ranges\" directive must be the first directive inside \"geo\" block"
                            .into(),
                    );
                }
                self.geo.table = Table::Ranges {
                    low: HashMap::new(),
                    default: None,
                };
                Ok(())
            }
            ["proxy_recursive"] => {
                self.geo.proxy_recursive = true;
                Ok(())
            }
            ["volatile"] => {
                self.geo.volatile = true;
                Ok(())
            }
            ["proxy", net] => {
                let cidr = self.cidr_value(net)?;
                self.geo.proxies.push(cidr);
                Ok(())
            }
            [key, value] => match self.geo.table {
                Table::Ranges { .. } => self.range(key, value),
                Table::Cidr { .. } => self.cidr(key, value),
            },
            _ => Err("invalid number of the geo parameters".into()),
        }
    }

    fn cidr_value(&mut self, net: &str) -> Result<Net, String> {
        let (cidr, low_bits) =
            parse_cidr(net).ok_or_else(|| format!("invalid network \"{net}\""))?;
        if low_bits {
            self.warnings
                .push(format!("low address bits of {net} are meaningless"));
        }
        Ok(cidr)
    }

    fn cidr(&mut self, key: &str, value: &str) -> Result<(), String> {
        self.cidr_seen = true;
        let value: Arc<str> = Arc::from(value);
        if key == "default" {
            self.cidr_add(Net::V4(0, 0), value.clone(), key);
            self.cidr_add(Net::V6(0, 0), value, key);
            return Ok(());
        }
        if key == "delete" {
            let net = &*value;
            let cidr = self.cidr_value(net)?;
            let Table::Cidr { v4, v6 } = &mut self.geo.table else {
                unreachable!("cidr table")
            };
            let gone = match cidr {
                Net::V4(a, _) => v4[cidr.prefix_len() as usize].remove(&a).is_some(),
                Net::V6(a, _) => v6[cidr.prefix_len() as usize].remove(&a).is_some(),
                Net::All | Net::Unix => false,
            };
            if !gone {
                self.warnings
                    .push(format!("no network \"{net}\" to delete"));
            }
            return Ok(());
        }
        let cidr = self.cidr_value(key)?;
        self.cidr_add(cidr, value, key);
        Ok(())
    }

    fn cidr_add(&mut self, cidr: Net, value: Arc<str>, net: &str) {
        let Table::Cidr { v4, v6 } = &mut self.geo.table else {
            unreachable!("cidr table")
        };
        let old = match cidr {
            Net::V4(a, _) => v4[cidr.prefix_len() as usize].insert(a, value.clone()),
            Net::V6(a, _) => v6[cidr.prefix_len() as usize].insert(a, value.clone()),
            Net::All | Net::Unix => None,
        };
        if let Some(old) = old {
            self.warnings.push(format!(
                "duplicate network \"{net}\", value: \"{value}\", old value: \"{old}\""
            ));
        }
    }

    fn range(&mut self, key: &str, value: &str) -> Result<(), String> {
        let Table::Ranges { low, default } = &mut self.geo.table else {
            unreachable!("ranges table")
        };
        if key == "default" {
            if let Some(old) = default {
                self.warnings.push(format!(
                    "duplicate default geo range value: \"{value}\", old value: \"{old}\""
                ));
            }
            *default = Some(Arc::from(value));
            return Ok(());
        }
        let (net, del) = if key == "delete" {
            (value, true)
        } else {
            (key, false)
        };
        let (start, end) = parse_range(net).ok_or_else(|| format!("invalid range \"{net}\""))?;
        if del {
            if !delete_range(low, start, end) {
                self.warnings
                    .push(format!("no address range \"{net}\" to delete"));
            }
            return Ok(());
        }
        add_range(low, start, end, net, Arc::from(value), &mut self.warnings)
    }

    /// The finished geo.
    pub fn finish(self) -> Geo {
        self.geo
    }
}

/// `a.b.c.d-e.f.g.h`, first not above last.
fn parse_range(net: &str) -> Option<(u32, u32)> {
    let (a, b) = net.split_once('-')?;
    let start = u32::from(inet_addr(a.as_bytes())?);
    let end = u32::from(inet_addr(b.as_bytes())?);
    (start <= end).then_some((start, end))
}

/// The /16 pieces of `start..=end`: (bucket, first, last) low halves.
fn pieces(start: u32, end: u32) -> impl Iterator<Item = (u16, u16, u16)> {
    let mut n = Some(start);
    std::iter::from_fn(move || {
        let cur = n?;
        if cur > end {
            return None;
        }
        let h = (cur >> 16) as u16;
        let s = if cur == start { cur & 0xffff } else { 0 } as u16;
        let e = if (cur | 0xffff) > end {
            end & 0xffff
        } else {
            0xffff
        } as u16;
        n = (h != 0xffff).then(|| (cur.wrapping_add(0x10000)) & 0xffff_0000);
        Some((h, s, e))
    })
}

/// NGINX's `ngx_http_geo_add_range`: each /16 piece goes into its bucket,
/// splitting a range it lies inside; a partial overlap is an error.
fn add_range(
    low: &mut HashMap<u16, Vec<Range>>,
    start: u32,
    end: u32,
    net: &str,
    value: Arc<str>,
    warnings: &mut Vec<String>,
) -> Result<(), String> {
    for (h, s, e) in pieces(start, end) {
        let a = low.entry(h).or_default();
        let new = |s, e| Range {
            start: s,
            end: e,
            value: value.clone(),
        };
        let mut placed = false;
        for i in (0..a.len()).rev() {
            let (rs, re) = (a[i].start, a[i].end);
            if e < rs {
                continue;
            }
            if s > re {
                a.insert(i + 1, new(s, e));
            } else if s == rs && e == re {
                warnings.push(format!(
                    "duplicate range \"{net}\", value: \"{value}\", old value: \"{}\"",
                    a[i].value
                ));
                a[i].value = value.clone();
            } else if s > rs && e < re {
                let tail = Range {
                    start: e + 1,
                    end: re,
                    value: a[i].value.clone(),
                };
                a[i].end = s - 1;
                a.insert(i + 1, new(s, e));
                a.insert(i + 2, tail);
            } else if s == rs && e < re {
                a[i].start = e + 1;
                a.insert(i, new(s, e));
            } else if s > rs && e == re {
                a[i].end = s - 1;
                a.insert(i + 1, new(s, e));
            } else {
                let (hi, lo) = (h >> 8, h & 0xff);
                return Err(format!(
                    "range \"{net}\" overlaps \"{hi}.{lo}.{}.{}-{hi}.{lo}.{}.{}\"",
                    rs >> 8,
                    rs & 0xff,
                    re >> 8,
                    re & 0xff
                ));
            }
            placed = true;
            break;
        }
        if !placed {
            a.insert(0, new(s, e));
        }
    }
    Ok(())
}

/// NGINX's `ngx_http_geo_delete_range`: removes each piece written exactly
/// so; `false` when some piece was not there.
fn delete_range(low: &mut HashMap<u16, Vec<Range>>, start: u32, end: u32) -> bool {
    let mut all = true;
    for (h, s, e) in pieces(start, end) {
        let a = low.entry(h).or_default();
        match a.iter().position(|r| r.start == s && r.end == e) {
            Some(i) => {
                a.remove(i);
            }
            None => all = false,
        }
    }
    all
}

impl Geo {
    /// Whether its source reads `$sent_http_*` (its values are plain).
    pub fn reads_sent_http(&self) -> bool {
        self.source.as_ref().is_some_and(Template::reads_sent_http)
    }

    /// Appends the geo's value for the request `src` to `out`.
    pub fn append(&self, src: &dyn VarSource, out: &mut String) {
        if !self.volatile {
            if let Some(v) = src.slot(self.slot) {
                out.push_str(&v);
                return;
            }
        }
        let value = self.lookup(self.address(src));
        if !self.volatile {
            src.store_slot(self.slot, value);
        }
        out.push_str(value);
    }

    /// The address looked up: the source's, then, from a trusted proxy,
    /// the one `X-Forwarded-For` names (`ngx_http_geo_addr`).
    fn address(&self, src: &dyn VarSource) -> Option<IpAddr> {
        let text = match &self.source {
            None => {
                let mut s = String::new();
                src.append(&Var::RemoteAddr, &mut s);
                s
            }
            Some(t) => t.render(src),
        };
        let mut addr: IpAddr = text.parse().ok()?;
        if self.proxies.is_empty() {
            return Some(addr);
        }
        let mut xff = String::new();
        src.append(&Var::Http("x-forwarded-for".into()), &mut xff);
        if !xff.is_empty() {
            self.forwarded(&mut addr, &xff);
        }
        Some(addr)
    }

    /// From a trusted proxy, the address `X-Forwarded-For` names
    /// (`ngx_http_get_forwarded_addr`, as realip walks it).
    fn forwarded(&self, addr: &mut IpAddr, xff: &str) {
        let peer = SocketAddr::new(*addr, 0);
        if let Some(a) = forwarded_addr(peer, &[xff], &self.proxies, self.proxy_recursive) {
            *addr = a.ip();
        }
    }

    /// The value for an address (`None`: it did not parse).
    fn lookup(&self, addr: Option<IpAddr>) -> &str {
        let addr = addr.map(unmap);
        match &self.table {
            Table::Cidr { v4, v6 } => {
                let found = match addr {
                    Some(IpAddr::V6(a)) => {
                        let a = u128::from(a);
                        (0..=128u8)
                            .rev()
                            .find_map(|b| v6[b as usize].get(&(a & mask128(b))))
                    }
                    other => {
                        let a = match other {
                            Some(IpAddr::V4(a)) => u32::from(a),
                            _ => u32::MAX,
                        };
                        (0..=32u8)
                            .rev()
                            .find_map(|b| v4[b as usize].get(&(a & mask32(b))))
                    }
                };
                found.map_or("", |v| v)
            }
            Table::Ranges { low, default } => {
                let a = match addr {
                    Some(IpAddr::V4(a)) => u32::from(a),
                    _ => u32::MAX,
                };
                let n = (a & 0xffff) as u16;
                low.get(&((a >> 16) as u16))
                    .and_then(|rs| rs.iter().find(|r| r.start <= n && n <= r.end))
                    .map(|r| &*r.value)
                    .or(default.as_deref())
                    .unwrap_or("")
            }
        }
    }
}

/// A geo as a variable.
pub fn var(geo: Geo) -> Var {
    Var::Geo(Arc::new(geo))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(lines: &[&[&str]]) -> Geo {
        let mut b = GeoBuilder::new("g", None, 0);
        for l in lines {
            b.line(l).unwrap();
        }
        b.finish()
    }

    fn at(g: &Geo, a: &str) -> String {
        g.lookup(a.parse().ok()).to_string()
    }

    #[test]
    fn the_longest_prefix_wins_in_either_family() {
        let g = build(&[
            &["default", "d"],
            &["10.0.0.0/8", "ten"],
            &["10.1.0.0/16", "ten-one"],
            &["10.1.2.3", "host"],
            &["2001:db8::/32", "doc"],
            &["2001:db8:1::/48", "doc1"],
        ]);
        assert_eq!(at(&g, "10.2.0.1"), "ten");
        assert_eq!(at(&g, "10.1.9.9"), "ten-one");
        assert_eq!(at(&g, "10.1.2.3"), "host");
        assert_eq!(at(&g, "::ffff:10.1.2.3"), "host");
        assert_eq!(at(&g, "11.0.0.1"), "d");
        assert_eq!(at(&g, "2001:db8:1::5"), "doc1");
        assert_eq!(at(&g, "2001:db8:2::5"), "doc");
        assert_eq!(at(&g, "::1"), "d");
        assert_eq!(at(&g, "garbage"), "d");
    }

    #[test]
    fn without_a_default_an_unmatched_address_is_empty() {
        let g = build(&[&["127.0.0.0/8", "lo"], &["delete", "127.0.0.0/8"]]);
        assert_eq!(at(&g, "127.0.0.1"), "");
    }

    #[test]
    fn ranges_split_an_enclosing_range_and_refuse_a_partial_overlap() {
        let mut b = GeoBuilder::new("g", None, 0);
        b.line(&["ranges"]).unwrap();
        b.line(&["10.0.0.0-10.0.255.255", "outer"]).unwrap();
        b.line(&["10.0.1.0-10.0.1.255", "inner"]).unwrap();
        b.line(&["10.1.0.0-10.2.0.5", "span"]).unwrap();
        assert_eq!(
            b.line(&["10.0.0.5-10.0.1.9", "x"]).unwrap_err(),
            "range \"10.0.0.5-10.0.1.9\" overlaps \"10.0.1.0-10.0.1.255\""
        );
        let g = b.finish();
        assert_eq!(at(&g, "10.0.0.9"), "outer");
        assert_eq!(at(&g, "10.0.1.9"), "inner");
        assert_eq!(at(&g, "10.0.2.9"), "outer");
        assert_eq!(at(&g, "10.1.200.1"), "span");
        assert_eq!(at(&g, "10.2.0.5"), "span");
        assert_eq!(at(&g, "10.2.0.6"), "");
    }

    #[test]
    fn ranges_must_come_first() {
        let mut b = GeoBuilder::new("g", None, 0);
        b.line(&["default", "x"]).unwrap();
        assert!(b
            .line(&["ranges"])
            .unwrap_err()
            .contains("must be the first"));
    }

    #[test]
    fn forwarded_addresses_are_taken_from_trusted_proxies_only() {
        let g = build(&[
            &["proxy", "127.0.0.0/8"],
            &["proxy", "192.168.0.0/16"],
            &["proxy_recursive"],
        ]);
        let mut a: IpAddr = "127.0.0.1".parse().unwrap();
        g.forwarded(&mut a, "1.1.1.1, 192.168.1.1");
        assert_eq!(a, "1.1.1.1".parse::<IpAddr>().unwrap());
        let g = build(&[&["proxy", "127.0.0.0/8"]]);
        let mut a: IpAddr = "127.0.0.1".parse().unwrap();
        g.forwarded(&mut a, "1.1.1.1, 192.168.1.1");
        assert_eq!(a, "192.168.1.1".parse::<IpAddr>().unwrap());
        let mut a: IpAddr = "10.0.0.1".parse().unwrap();
        g.forwarded(&mut a, "1.1.1.1");
        assert_eq!(a, "10.0.0.1".parse::<IpAddr>().unwrap());
    }
}
