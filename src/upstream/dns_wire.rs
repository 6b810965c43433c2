//! The DNS messages the resolver (`resolver.rs`) sends and reads, as
//! NGINX's `ngx_resolver.c` builds and parses them: one recursive
//! question per query, and of an answer only what a name lookup needs —
//! its id, code, TC bit, A/AAAA addresses, CNAME target and the smallest
//! TTL of its records.
//!
//! Written here rather than with `hickory-proto`, which refuses names
//! longer than 255 bytes on the wire while NGINX asks for and follows them
//! (nginx-tests' `http_resolver.t`, "long name"), and whose strict decoder
//! would turn an answer NGINX reads into no answer. As NGINX: an A record
//! of another length than 4 (or AAAA than 16), or a record cut short,
//! makes the whole reply invalid (ignored, so the lookup waits for a
//! resend); DNAME and other types are skipped.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `A`.
pub const TYPE_A: u16 = 1;
/// `AAAA`.
pub const TYPE_AAAA: u16 = 28;
const TYPE_CNAME: u16 = 5;

/// What one reply says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reply {
    /// The id, matched against the query's.
    pub id: u16,
    /// RCODE (0 no error, 1 format error, 2 server failure, 3 NXDOMAIN…).
    pub code: u8,
    /// TC: the answer did not fit in the datagram.
    pub truncated: bool,
    /// Records in the answer section.
    pub records: usize,
    /// A and AAAA addresses, in order.
    pub addrs: Vec<IpAddr>,
    /// The target of a CNAME record (lowercase, no trailing dot).
    pub cname: Option<String>,
    /// The smallest TTL of the answer's records (negative counts as 0).
    pub ttl: Option<u32>,
}

/// A recursive query for `name` (dotted, no trailing dot) of type `qtype`
/// with a random id: the id and the message; `None` for an empty label
/// or one over 63 bytes.
pub fn query(name: &str, qtype: u16) -> Option<(u16, Vec<u8>)> {
    let mut id = [0u8; 2];
    let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut id);
    let id = u16::from_be_bytes(id);
    let mut m = Vec::with_capacity(name.len() + 18);
    m.extend_from_slice(&id.to_be_bytes());
    // RD set; one question.
    m.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.') {
        if label.is_empty() || label.len() > 63 {
            return None;
        }
        m.push(label.len() as u8);
        m.extend_from_slice(label.as_bytes());
    }
    m.push(0);
    m.extend_from_slice(&qtype.to_be_bytes());
    m.extend_from_slice(&1u16.to_be_bytes()); // IN
    Some((id, m))
}

fn be16(b: &[u8], i: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(i)?, *b.get(i + 1)?]))
}

/// The offset after the name at `i` (a pointer ends it).
fn skip_name(b: &[u8], mut i: usize) -> Option<usize> {
    loop {
        let len = *b.get(i)? as usize;
        if len & 0xc0 == 0xc0 {
            return Some(i + 2);
        }
        if len == 0 {
            return Some(i + 1);
        }
        i += 1 + len;
    }
}

/// The name at `i`, pointers followed (at most 128), lowercase.
fn read_name(b: &[u8], mut i: usize) -> Option<String> {
    let mut out = String::new();
    for _ in 0..128 {
        let len = *b.get(i)? as usize;
        if len & 0xc0 == 0xc0 {
            i = (be16(b, i)? & 0x3fff) as usize;
            continue;
        }
        if len == 0 {
            return Some(out);
        }
        let label = b.get(i + 1..i + 1 + len)?;
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(&String::from_utf8_lossy(label).to_ascii_lowercase());
        i += 1 + len;
    }
    None
}

/// Reads a reply; `None` for what is not a valid response.
pub fn parse(b: &[u8]) -> Option<Reply> {
    let flags = be16(b, 2)?;
    // QR set, a standard query's reply (NGINX's `(flags & 0xf870) != 0x8000`).
    if flags & 0xf870 != 0x8000 {
        return None;
    }
    let mut r = Reply {
        id: be16(b, 0)?,
        code: (flags & 0xf) as u8,
        truncated: flags & 0x0200 != 0,
        records: be16(b, 6)? as usize,
        ..Reply::default()
    };
    let mut i = 12;
    for _ in 0..be16(b, 4)? {
        i = skip_name(b, i)? + 4;
    }
    for _ in 0..r.records {
        i = skip_name(b, i)?;
        let head = b.get(i..i + 10)?;
        let rtype = u16::from_be_bytes([head[0], head[1]]);
        let ttl = i32::from_be_bytes([head[4], head[5], head[6], head[7]]).max(0) as u32;
        let len = u16::from_be_bytes([head[8], head[9]]) as usize;
        i += 10;
        let data = b.get(i..i + len)?;
        r.ttl = Some(r.ttl.map_or(ttl, |t| t.min(ttl)));
        match rtype {
            TYPE_A => {
                let a: [u8; 4] = data.try_into().ok()?;
                r.addrs.push(IpAddr::V4(Ipv4Addr::from(a)));
            }
            TYPE_AAAA => {
                let a: [u8; 16] = data.try_into().ok()?;
                r.addrs.push(IpAddr::V6(Ipv6Addr::from(a)));
            }
            TYPE_CNAME => r.cname = Some(read_name(b, i)?),
            _ => {}
        }
        i += len;
    }
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reply to `q` with the answer records `rrs` (already encoded).
    fn reply(q: &[u8], flags: u16, rrs: &[Vec<u8>]) -> Vec<u8> {
        let mut m = q.to_vec();
        m[2..4].copy_from_slice(&flags.to_be_bytes());
        m[6..8].copy_from_slice(&(rrs.len() as u16).to_be_bytes());
        rrs.iter().for_each(|r| m.extend_from_slice(r));
        m
    }

    fn rr(rtype: u16, ttl: u32, data: &[u8]) -> Vec<u8> {
        let mut r = vec![0xc0, 12];
        r.extend_from_slice(&rtype.to_be_bytes());
        r.extend_from_slice(&[0, 1]);
        r.extend_from_slice(&ttl.to_be_bytes());
        r.extend_from_slice(&(data.len() as u16).to_be_bytes());
        r.extend_from_slice(data);
        r
    }

    #[test]
    fn a_query_is_what_hickory_reads() {
        let (id, q) = query("example.test", TYPE_A).unwrap();
        let m = hickory_proto::op::Message::from_vec(&q).unwrap();
        assert_eq!(m.metadata.id, id);
        assert!(m.metadata.recursion_desired);
        assert_eq!(m.queries[0].name().to_ascii(), "example.test.");
        assert_eq!(parse(&q), None, "a query is not a reply");
        assert!(query("a..b", TYPE_A).is_none());
        assert!(query(&"a".repeat(64), TYPE_A).is_none());
    }

    #[test]
    fn names_longer_than_255_bytes_are_asked() {
        let long = vec!["a".repeat(63); 4].join(".");
        let (_, q) = query(&long, TYPE_A).unwrap();
        assert_eq!(q.len(), 12 + 257 + 4);
    }

    #[test]
    fn addresses_alias_and_smallest_ttl() {
        let (_, q) = query("c.test", TYPE_A).unwrap();
        // CNAME c.test -> x.c.test (a label and a pointer to the question),
        // then an A record.
        let cname = rr(TYPE_CNAME, 5, &[1, b'x', 0xc0, 12]);
        let a = rr(TYPE_A, 60, &[10, 0, 0, 1]);
        let r = parse(&reply(&q, 0x8180, &[cname, a])).unwrap();
        assert_eq!(r.cname.as_deref(), Some("x.c.test"));
        assert_eq!(r.addrs, vec![IpAddr::from([10, 0, 0, 1])]);
        assert_eq!((r.ttl, r.records, r.code), (Some(5), 2, 0));
    }

    #[test]
    fn truncated_error_and_invalid_replies() {
        let (_, q) = query("t.test", TYPE_A).unwrap();
        let r = parse(&reply(&q, 0x8380 | 2, &[])).unwrap();
        assert!(r.truncated);
        assert_eq!((r.code, r.records, r.ttl), (2, 0, None));
        // A zero-length A record: the reply is invalid, as NGINX's.
        assert_eq!(parse(&reply(&q, 0x8180, &[rr(TYPE_A, 1, &[])])), None);
        // Cut short.
        let mut cut = reply(&q, 0x8180, &[rr(TYPE_A, 1, &[1, 2, 3, 4])]);
        cut.truncate(cut.len() - 2);
        assert_eq!(parse(&cut), None);
    }
}
