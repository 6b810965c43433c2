//! A DNS responder on a loopback UDP port for the `resolver` tests (http's
//! and stream's): A records from a table (a name listed more than once
//! gets all its addresses, in order), an empty answer to AAAA for a known
//! name, silence for `slow.test`, NXDOMAIN for any other name. Every
//! query is recorded as `NAME TYPE`.

use std::collections::HashMap;
use std::net::{Ipv4Addr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A DNS responder on a loopback UDP port.
pub struct Dns {
    /// Its port.
    pub port: u16,
    /// Queries seen, as `NAME TYPE` (type number).
    queries: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl Dns {
    /// Answers A queries for the names in `zone` (address, TTL); AAAA
    /// queries for them get an empty answer; `slow.test` gets none; any
    /// other name NXDOMAIN.
    pub fn start(zone: &[(&str, Ipv4Addr, u32)]) -> Dns {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let mut table: HashMap<String, Vec<(Ipv4Addr, u32)>> = HashMap::new();
        for (n, a, t) in zone {
            table.entry(n.to_string()).or_default().push((*a, *t));
        }
        let d = Dns {
            port: sock.local_addr().unwrap().port(),
            queries: Arc::default(),
            stop: Arc::default(),
        };
        let (queries, stop) = (d.queries.clone(), d.stop.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while !stop.load(Ordering::Relaxed) {
                let Ok((n, from)) = sock.recv_from(&mut buf) else {
                    continue;
                };
                let Some((name, qtype, qend)) = question(&buf[..n]) else {
                    continue;
                };
                queries.lock().unwrap().push(format!("{name} {qtype}"));
                if name == "slow.test" {
                    continue;
                }
                let reply = answer(&buf[..qend], table.get(&name), qtype);
                let _ = sock.send_to(&reply, from);
            }
        });
        d
    }

    /// How many queries `q` (`NAME TYPE`) came.
    pub fn count(&self, q: &str) -> usize {
        self.queries
            .lock()
            .unwrap()
            .iter()
            .filter(|x| x.as_str() == q)
            .count()
    }
}

impl Drop for Dns {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The question's name (lowercase, no final dot), type, and where the
/// question section ends.
fn question(m: &[u8]) -> Option<(String, u16, usize)> {
    let mut i = 12;
    let mut labels = Vec::new();
    loop {
        let len = *m.get(i)? as usize;
        i += 1;
        if len == 0 {
            break;
        }
        labels.push(String::from_utf8_lossy(m.get(i..i + len)?).to_ascii_lowercase());
        i += len;
    }
    let qtype = u16::from_be_bytes([*m.get(i)?, *m.get(i + 1)?]);
    Some((labels.join("."), qtype, i + 4))
}

/// The reply to the query `q` (header and question): the records for an
/// A query of a known name, nothing for its AAAA, NXDOMAIN for others.
fn answer(q: &[u8], recs: Option<&Vec<(Ipv4Addr, u32)>>, qtype: u16) -> Vec<u8> {
    let mut r = q.to_vec();
    let rcode = if recs.is_some() { 0 } else { 3 };
    r[2] = 0x81; // QR, RD
    r[3] = 0x80 | rcode; // RA
    r[10..12].copy_from_slice(&[0, 0]); // no additional (EDNS) records
    let recs: &[(Ipv4Addr, u32)] = match (recs, qtype) {
        (Some(v), 1) => v,
        _ => &[],
    };
    r[6..8].copy_from_slice(&(recs.len() as u16).to_be_bytes());
    for (ip, ttl) in recs {
        r.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1]);
        r.extend_from_slice(&ttl.to_be_bytes());
        r.extend_from_slice(&[0, 4]);
        r.extend_from_slice(&ip.octets());
    }
    r
}
