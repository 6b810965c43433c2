//! NGINX's `resolver`: names a `proxy_pass` URL with variables renders at
//! run time (`proxy_pass http://$host$request_uri;`) that are not an
//! `upstream` block are looked up here, over UDP to the configured name
//! servers, without blocking the worker's loop.
//!
//! As `ngx_resolver.c`: an A query (and an AAAA one unless `ipv6=off`) goes
//! to one server, is sent again to the next one every 5 s, and the lookup
//! gives up after `resolver_timeout` (`110: Operation timed out`). Answers
//! are cached for the smallest TTL of their records, or `valid=` when
//! given; a negative answer (NXDOMAIN, or no address) for `valid=` or 10 s.
//! The cache is one per `resolver` directive, shared by every worker under
//! a `Mutex` held only to look up or store an entry.
//!
//! The DNS messages are built and parsed with `hickory-proto`; the cache,
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

use hickory_proto::op::{Message, MessageType, Query, ResponseCode};
use hickory_proto::rr::{Name, RecordType};
use tokio::net::UdpSocket;

/// NGINX's `resend_timeout`: a query is sent to the next server after this.
const RESEND: Duration = Duration::from_secs(5);

/// How long a negative answer is kept without `valid=` (NGINX's 10 s).
const NEGATIVE_TTL: Duration = Duration::from_secs(10);

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

#[derive(Debug, Clone)]
struct Entry {
    answer: Result<Vec<IpAddr>, ResolveError>,
    until: Instant,
}

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

    fn cached(&self, name: &str) -> Option<Result<Vec<IpAddr>, ResolveError>> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        match cache.get(name) {
            Some(e) if e.until > Instant::now() => Some(e.answer.clone()),
            Some(_) => {
                cache.remove(name);
                None
            }
            None => None,
        }
    }

    fn store(&self, name: &str, answer: Result<Vec<IpAddr>, ResolveError>, ttl: Duration) {
        let entry = Entry {
            answer,
            until: Instant::now() + ttl,
        };
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.insert(name.to_string(), entry);
    }

    /// The addresses of `name` (IPv4 first), from the cache or the name
    /// servers, within `timeout`.
    pub async fn resolve(
        &self,
        name: &str,
        timeout: Duration,
    ) -> Result<Vec<IpAddr>, ResolveError> {
        let name = name.to_ascii_lowercase();
        if let Some(a) = self.cached(&name) {
            return a;
        }
        let Ok(qname) = Name::from_ascii(format!("{name}.")) else {
            return Err(ResolveError::Code(1));
        };
        let looked = tokio::time::timeout(timeout, self.lookup(&qname)).await;
        let (answer, ttl) = match looked {
            Err(_) | Ok(Err(ResolveError::TimedOut)) => return Err(ResolveError::TimedOut),
            Ok(Ok((addrs, ttl))) => (Ok(addrs), self.valid.unwrap_or(ttl)),
            Ok(Err(e)) => (Err(e), self.valid.unwrap_or(NEGATIVE_TTL)),
        };
        self.store(&name, answer.clone(), ttl);
        answer
    }

    /// Asks the servers in turn, resending every [`RESEND`], until the A
    /// (and AAAA) answers are in: the addresses and their smallest TTL.
    async fn lookup(&self, qname: &Name) -> Result<(Vec<IpAddr>, Duration), ResolveError> {
        if self.servers.is_empty() {
            return Err(ResolveError::TimedOut);
        }
        let mut types = vec![RecordType::A];
        if self.ipv6 {
            types.push(RecordType::AAAA);
        }
        let queries: Vec<(u16, Vec<u8>)> = types
            .iter()
            .map(|&t| query(qname, t))
            .collect::<Option<_>>()
            .ok_or(ResolveError::Code(1))?;
        let mut answers: Vec<Option<Answer>> = vec![None; queries.len()];
        let mut buf = vec![0u8; 4096];
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed) % self.servers.len();
            let server = self.servers[i];
            let bind: SocketAddr = match server {
                SocketAddr::V4(_) => (std::net::Ipv4Addr::UNSPECIFIED, 0).into(),
                SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
            };
            let Ok(sock) = UdpSocket::bind(bind).await else {
                return Err(ResolveError::TimedOut);
            };
            if sock.connect(server).await.is_err() {
                tokio::time::sleep(RESEND).await;
                continue;
            }
            for ((_, q), a) in queries.iter().zip(&answers) {
                if a.is_none() {
                    let _ = sock.send(q).await;
                }
            }
            let round = tokio::time::sleep(RESEND);
            tokio::pin!(round);
            loop {
                tokio::select! {
                    _ = &mut round => break,
                    r = sock.recv(&mut buf) => {
                        let Ok(n) = r else { break };
                        let Some((id, a)) = parse(&buf[..n]) else { continue };
                        if let Some(pos) = queries.iter().position(|(qid, _)| *qid == id) {
                            answers[pos] = Some(a);
                        }
                        if answers.iter().all(Option::is_some) {
                            return combine(answers.into_iter().flatten().collect());
                        }
                    }
                }
            }
        }
    }
}

/// One query's answer: its code, addresses and smallest TTL.
#[derive(Debug, Clone)]
struct Answer {
    code: u8,
    addrs: Vec<IpAddr>,
    ttl: u32,
}

/// A recursive query for `name`'s `t` records: its id and bytes.
fn query(name: &Name, t: RecordType) -> Option<(u16, Vec<u8>)> {
    let mut m = Message::query();
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(name.clone(), t));
    let id = m.metadata.id;
    m.to_vec().ok().map(|b| (id, b))
}

fn parse(bytes: &[u8]) -> Option<(u16, Answer)> {
    let m = Message::from_vec(bytes).ok()?;
    if m.metadata.message_type != MessageType::Response {
        return None;
    }
    let mut addrs = Vec::new();
    let mut ttl = u32::MAX;
    for r in &m.answers {
        if let Some(ip) = r.data.ip_addr() {
            addrs.push(ip);
            ttl = ttl.min(r.ttl);
        }
    }
    let code = match m.metadata.response_code {
        ResponseCode::NoError => 0,
        c => c.low(),
    };
    Some((m.metadata.id, Answer { code, addrs, ttl }))
}

/// The A and AAAA answers as one: the addresses (IPv4 first) and their
/// smallest TTL, or the error (NGINX's: the first answer's code, "Host not
/// found" when no address came back).
fn combine(answers: Vec<Answer>) -> Result<(Vec<IpAddr>, Duration), ResolveError> {
    let addrs: Vec<IpAddr> = answers.iter().flat_map(|a| a.addrs.clone()).collect();
    if addrs.is_empty() {
        let code = answers
            .iter()
            .map(|a| a.code)
            .find(|&c| c != 0)
            .unwrap_or(3);
        return Err(ResolveError::Code(code));
    }
    let ttl = answers
        .iter()
        .filter(|a| !a.addrs.is_empty())
        .map(|a| a.ttl)
        .min()
        .unwrap_or(0);
    Ok((addrs, Duration::from_secs(ttl as u64)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(code: u8, addrs: &[&str], ttl: u32) -> Answer {
        Answer {
            code,
            addrs: addrs.iter().map(|a| a.parse().unwrap()).collect(),
            ttl,
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
        let r = combine(vec![answer(0, &["10.0.0.1"], 30), answer(0, &["::1"], 20)]).unwrap();
        assert_eq!(r.0.len(), 2);
        assert_eq!(r.1, Duration::from_secs(20));
        // An empty AAAA answer does not shorten the A records' TTL.
        let r = combine(vec![answer(0, &["10.0.0.1"], 30), answer(0, &[], 0)]).unwrap();
        assert_eq!(r.1, Duration::from_secs(30));
    }

    #[test]
    fn no_address_is_host_not_found() {
        assert_eq!(
            combine(vec![answer(3, &[], 0), answer(3, &[], 0)]),
            Err(ResolveError::Code(3))
        );
        assert_eq!(combine(vec![answer(0, &[], 0)]), Err(ResolveError::Code(3)));
        assert_eq!(combine(vec![answer(2, &[], 0)]), Err(ResolveError::Code(2)));
    }

    #[test]
    fn queries_parse_back() {
        let name = Name::from_ascii("example.test.").unwrap();
        let (id, bytes) = query(&name, RecordType::A).unwrap();
        let m = Message::from_vec(&bytes).unwrap();
        assert_eq!(m.metadata.id, id);
        assert_eq!(m.queries[0].query_type(), RecordType::A);
        assert!(parse(&bytes).is_none(), "a query is not an answer");
    }
}
