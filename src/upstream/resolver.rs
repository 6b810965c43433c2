//! NGINX's `resolver`: names a `proxy_pass` URL with variables renders at
//! run time (`proxy_pass http://$host$request_uri;`) that are not an
//! `upstream` block are looked up here, over UDP to the configured name
//! servers, without blocking the worker's loop.
//!
//! As `ngx_resolver.c`: an A query (and an AAAA one unless `ipv6=off`) goes
//! to one server, is sent again to the next one every 5 s, and the lookup
//! gives up after `resolver_timeout` (`110: Operation timed out`). A
//! truncated answer (TC) is asked again over TCP of the same server. An
//! answer with a CNAME and no address is cached as that alias and the
//! alias looked up in turn (DNAME records skipped, at most 50 steps).
//! Answers are cached for the smallest TTL of all their records (CNAMEs
//! included), or `valid=` when given; an error answer (NXDOMAIN, SERVFAIL,
//! no address) is not cached, as NGINX drops the node. A reply whose id
//! is not the query's is ignored (the resend may bring the right one).
//! The cache is one per `resolver` directive, shared by every worker under
//! a `Mutex` held only to look up or store an entry.
//!
//! The DNS messages are built and read by `dns_wire.rs`; the cache,
//! the resend and the timeout are written here rather than taken from
//! `hickory-resolver` because NGINX's rules for them differ from a stub
//! resolver's (`valid=` overriding TTLs, negative answers cached 10 s, one
//! `resolver_timeout` per location), and because a worker is a
//! single-threaded loop that must own its sockets: each lookup uses its
//! own UDP socket on the worker's loop.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::dns_wire::{self, Reply, TYPE_A, TYPE_AAAA};
use tokio::net::UdpSocket;

/// NGINX's `resend_timeout`: a query is sent to the next server after this.
const RESEND: Duration = Duration::from_secs(5);

/// Why a name did not resolve, as NGINX numbers and words it in
/// `NAME could not be resolved (N: TEXT)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResolveError {
    /// The server's answer code (1 format error … 5 refused; 3 also for
    /// an answer without addresses).
    Code(u8),
    /// No answer within `resolver_timeout`.
    TimedOut,
}

impl std::fmt::Display for ResolveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (n, text) = match *self {
            ResolveError::TimedOut => (110, "Operation timed out"),
            ResolveError::Code(c) => (
                c as u32,
                match c {
                    1 => "Format error",
                    2 => "Server failure",
                    3 => "Host not found",
                    4 => "Unimplemented",
                    5 => "Operation refused",
                    _ => "Unknown error",
                },
            ),
        };
        write!(f, "{n}: {text}")
    }
}

/// What a name is known to be: its addresses, or an alias.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Known {
    Addrs(Vec<IpAddr>),
    Cname(String),
}

#[derive(Debug, Clone)]
struct Entry {
    known: Known,
    until: Instant,
}

/// NGINX's `NGX_RESOLVER_MAX_RECURSION`: CNAME steps followed.
const MAX_RECURSION: usize = 50;

/// One `resolver` directive: its servers, options and cache.
#[derive(Debug)]
pub struct Resolver {
    servers: Vec<SocketAddr>,
    valid: Option<Duration>,
    ipv6: bool,
    next: AtomicUsize,
    cache: Mutex<HashMap<String, Entry>>,
}

impl Resolver {
    /// A resolver asking `servers` (tried in turn), with `valid=` and
    /// `ipv6=`.
    pub fn new(servers: Vec<SocketAddr>, valid: Option<Duration>, ipv6: bool) -> Resolver {
        Resolver {
            servers,
            valid,
            ipv6,
            next: AtomicUsize::new(0),
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn cached(&self, name: &str) -> Option<Known> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        match cache.get(name) {
            Some(e) if e.until > Instant::now() => Some(e.known.clone()),
            Some(_) => {
                cache.remove(name);
                None
            }
            None => None,
        }
    }

    fn store(&self, name: &str, known: Known, ttl: Duration) {
        let entry = Entry {
            known,
            until: Instant::now() + ttl,
        };
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.insert(name.to_string(), entry);
    }

    /// The addresses of `name` (IPv4 first), from the cache or the name
    /// servers, within `timeout`, following CNAMEs.
    pub async fn resolve(
        &self,
        name: &str,
        timeout: Duration,
    ) -> Result<Vec<IpAddr>, ResolveError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut name = name.to_ascii_lowercase();
        for _ in 0..=MAX_RECURSION {
            let known = match self.cached(&name) {
                Some(k) => k,
                None => {
                    let looked = tokio::time::timeout_at(deadline, self.lookup(&name)).await;
                    let (known, ttl) = match looked {
                        Err(_) => return Err(ResolveError::TimedOut),
                        Ok(r) => r?,
                    };
                    self.store(&name, known.clone(), self.valid.unwrap_or(ttl));
                    known
                }
            };
            match known {
                Known::Addrs(a) => return Ok(a),
                Known::Cname(alias) => name = alias,
            }
        }
        Err(ResolveError::Code(3))
    }

    /// Asks the servers in turn, resending every [`RESEND`], until the A
    /// (and AAAA) answers are in: the addresses or alias, and the smallest
    /// TTL.
    async fn lookup(&self, name: &str) -> Result<(Known, Duration), ResolveError> {
        if self.servers.is_empty() {
            return Err(ResolveError::TimedOut);
        }
        let mut types = vec![TYPE_A];
        if self.ipv6 {
            types.push(TYPE_AAAA);
        }
        let queries: Vec<(u16, Vec<u8>)> = types
            .iter()
            .map(|&t| dns_wire::query(name, t))
            .collect::<Option<_>>()
            .ok_or(ResolveError::Code(1))?;
        let mut answers: Vec<Option<Answer>> = vec![None; queries.len()];
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed) % self.servers.len();
            let server = self.servers[i];
            // `ask` returns only with every answer in; else the next
            // server after RESEND.
            let _ = tokio::time::timeout(RESEND, ask(server, &queries, &mut answers)).await;
            if answers.iter().all(Option::is_some) {
                return combine(answers.into_iter().flatten().collect());
            }
        }
    }
}

/// One round with `server`: the queries not yet answered sent over UDP,
/// replies taken as they come (a truncated one asked again over TCP).
/// Returns once every query has its answer; on a failure it waits (for
/// the caller's resend to the next server).
async fn ask(server: SocketAddr, queries: &[(u16, Vec<u8>)], answers: &mut [Option<Answer>]) {
    let bind: SocketAddr = match server {
        SocketAddr::V4(_) => (std::net::Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let Ok(sock) = UdpSocket::bind(bind).await else {
        return std::future::pending().await;
    };
    if sock.connect(server).await.is_err() {
        return std::future::pending().await;
    }
    for ((_, q), a) in queries.iter().zip(answers.iter()) {
        if a.is_none() {
            let _ = sock.send(q).await;
        }
    }
    let mut buf = vec![0u8; 4096];
    while answers.iter().any(Option::is_none) {
        let Ok(n) = sock.recv(&mut buf).await else {
            return std::future::pending().await;
        };
        let Some(r) = dns_wire::parse(&buf[..n]) else {
            continue;
        };
        let Some(pos) = queries.iter().position(|(qid, _)| *qid == r.id) else {
            continue;
        };
        if answers[pos].is_some() {
            continue;
        }
        let seq = answers.iter().flatten().count();
        if !r.truncated {
            answers[pos] = Some(Answer { seq, reply: r });
            continue;
        }
        // NGINX's `ngx_resolver_send_tcp_query`: the same query, same server.
        let tcp = tcp_exchange(server, &queries[pos].1).await;
        match tcp.as_deref().and_then(dns_wire::parse) {
            Some(t) if t.id == r.id && !t.truncated => {
                answers[pos] = Some(Answer { seq, reply: t })
            }
            _ => return std::future::pending().await,
        }
    }
}

/// `query` over TCP (two length bytes before each message), its answer.
async fn tcp_exchange(server: SocketAddr, query: &[u8]) -> Option<Vec<u8>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(server).await.ok()?;
        let mut msg = (query.len() as u16).to_be_bytes().to_vec();
        msg.extend_from_slice(query);
        s.write_all(&msg).await.ok()?;
        let len = s.read_u16().await.ok()?;
        let mut buf = vec![0u8; len as usize];
        s.read_exact(&mut buf).await.ok()?;
        Some(buf)
    };
    tokio::time::timeout(RESEND, exchange).await.ok().flatten()
}

/// One query's reply and the order it came in.
#[derive(Debug, Clone)]
struct Answer {
    seq: usize,
    reply: Reply,
}

/// The A and AAAA replies as one, as NGINX's `ngx_resolver_process_a`
/// takes them in the order they came: an error code fails the name (the
/// last reply's, else the first's); else the addresses of both (IPv4
/// first); else, when the last reply has records, its CNAME's alias (a
/// last reply with none is "Host not found" even after a CNAME); with the
/// smallest TTL of every record.
fn combine(mut answers: Vec<Answer>) -> Result<(Known, Duration), ResolveError> {
    answers.sort_by_key(|a| a.seq);
    let replies: Vec<Reply> = answers.into_iter().map(|a| a.reply).collect();
    let Some(last) = replies.last() else {
        return Err(ResolveError::Code(3));
    };
    let first_code = replies.iter().map(|r| r.code).find(|&c| c != 0);
    if let Some(code) = (last.code != 0).then_some(last.code).or(first_code) {
        return Err(ResolveError::Code(code));
    }
    let ttl = replies.iter().filter_map(|r| r.ttl).min().unwrap_or(0);
    let ttl = Duration::from_secs(ttl as u64);
    let mut addrs: Vec<IpAddr> = replies.iter().flat_map(|r| r.addrs.clone()).collect();
    addrs.sort_by_key(IpAddr::is_ipv6);
    if !addrs.is_empty() {
        return Ok((Known::Addrs(addrs), ttl));
    }
    match (&last.cname, last.records) {
        (Some(alias), n) if n > 0 => Ok((Known::Cname(alias.clone()), ttl)),
        _ => Err(ResolveError::Code(3)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(seq: usize, code: u8, addrs: &[&str], ttl: u32) -> Answer {
        let addrs: Vec<IpAddr> = addrs.iter().map(|a| a.parse().unwrap()).collect();
        let reply = Reply {
            code,
            records: addrs.len(),
            ttl: (!addrs.is_empty()).then_some(ttl),
            addrs,
            ..Reply::default()
        };
        Answer { seq, reply }
    }

    fn cname(seq: usize, alias: &str, ttl: u32) -> Answer {
        let mut a = answer(seq, 0, &[], 0);
        a.reply.cname = Some(alias.into());
        a.reply.records = 1;
        a.reply.ttl = Some(ttl);
        a
    }

    fn addrs(r: (Known, Duration)) -> (usize, Duration) {
        match r.0 {
            Known::Addrs(a) => (a.len(), r.1),
            k => panic!("{k:?}"),
        }
    }

    #[test]
    fn errors_read_as_nginx_writes_them() {
        assert_eq!(ResolveError::Code(3).to_string(), "3: Host not found");
        assert_eq!(ResolveError::Code(2).to_string(), "2: Server failure");
        assert_eq!(
            ResolveError::TimedOut.to_string(),
            "110: Operation timed out"
        );
    }

    #[test]
    fn a_and_aaaa_combine_with_the_smallest_ttl() {
        let r = combine(vec![
            answer(0, 0, &["10.0.0.1"], 30),
            answer(1, 0, &["::1"], 20),
        ]);
        assert_eq!(addrs(r.unwrap()), (2, Duration::from_secs(20)));
        // An empty AAAA answer does not shorten the A records' TTL.
        let r = combine(vec![answer(0, 0, &["10.0.0.1"], 30), answer(1, 0, &[], 0)]);
        assert_eq!(addrs(r.unwrap()), (1, Duration::from_secs(30)));
    }

    #[test]
    fn errors_fail_the_name() {
        let e = |v| combine(v).unwrap_err();
        assert_eq!(
            e(vec![answer(0, 3, &[], 0), answer(1, 3, &[], 0)]),
            ResolveError::Code(3)
        );
        assert_eq!(e(vec![answer(0, 0, &[], 0)]), ResolveError::Code(3));
        assert_eq!(e(vec![answer(0, 2, &[], 0)]), ResolveError::Code(2));
        // NGINX: an error in either answer fails the name.
        assert_eq!(
            e(vec![answer(0, 0, &["10.0.0.1"], 30), answer(1, 2, &[], 0)]),
            ResolveError::Code(2)
        );
    }

    #[test]
    fn a_cname_is_followed_as_nginx_takes_it() {
        let alias = |a: &str| Known::Cname(a.into());
        // The last reply's alias (A: alias4, AAAA: alias6).
        let r = combine(vec![cname(1, "alias6", 7), cname(0, "alias4", 9)]).unwrap();
        assert_eq!(r, (alias("alias6"), Duration::from_secs(7)));
        let r = combine(vec![answer(0, 0, &[], 0), cname(1, "alias", 5)]).unwrap();
        assert_eq!(r.0, alias("alias"));
        // A CNAME, then an AAAA reply with no records: not found.
        let r = combine(vec![cname(0, "alias", 5), answer(1, 0, &[], 0)]);
        assert_eq!(r, Err(ResolveError::Code(3)));
    }
}
