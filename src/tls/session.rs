//! Session resumption, shared by every worker: workers are threads of one
//! process, so one session store (`ssl_session_cache shared:NAME:SIZE`)
//! and one ticket key set (`ssl_session_tickets`) serve them all, where
//! NGINX needs a shared-memory zone. rustls keeps no creation time it
//! checks on resumption, so both wrappers here stamp what they store and
//! refuse what is older than `ssl_session_timeout`. The cache itself is
//! written here ([`SessionCache`]): rustls's takes time proportional to
//! its size for each TLS 1.3 resumption.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustls::server::{ProducesTickets, StoresServerSessions};

/// Bytes of a stored session (NGINX: one megabyte holds about 4000).
const SESSION_BYTES: usize = 256;

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `stamp ++ value` → `value` while `stamp` is at most `timeout` old.
fn fresh(mut v: Vec<u8>, timeout: u64) -> Option<Vec<u8>> {
    let stamp = u64::from_be_bytes(v.get(..8)?.try_into().ok()?);
    if now_secs().saturating_sub(stamp) > timeout {
        return None;
    }
    v.drain(..8);
    Some(v)
}

fn stamped(value: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(8 + value.len());
    v.extend_from_slice(&now_secs().to_be_bytes());
    v.extend_from_slice(value);
    v
}

/// A session cache of `bytes` (`shared:NAME:SIZE`), to be shared by the
/// servers naming the same zone.
pub fn memory_cache(bytes: u64) -> Arc<dyn StoresServerSessions> {
    let n = (bytes as usize / SESSION_BYTES).max(1);
    Arc::new(SessionCache::new(n))
}

/// Sessions the builtin 0-RTT store holds.
const EARLY_SESSIONS: usize = 4096;

/// The sessions QUIC resumes with 0-RTT (`ssl_early_data on`): rustls
/// takes early data only on a session from a server-side store, each
/// taken once (RFC 8446 8.1: a ticket's early data cannot be replayed
/// on another connection), never on a stateless ticket. The server's
/// `ssl_session_cache` (`cache`) when it has one, else a cache of
/// [`EARLY_SESSIONS`] of its own.
pub fn early_store(
    cache: Option<Arc<dyn StoresServerSessions>>,
    timeout: Duration,
) -> Arc<dyn StoresServerSessions> {
    cache.unwrap_or_else(|| {
        let own = Arc::new(SessionCache::new(EARLY_SESSIONS));
        Arc::new(TimedStore::new(own, timeout))
    })
}

/// The shared session cache: at most `max` sessions, the oldest evicted
/// first, with `put`, `get` and `take` in constant time. Written here
/// rather than using rustls's `ServerSessionMemoryCache`, whose `take`
/// searches its insertion queue from the front: TLS 1.3 resumption from
/// the cache (`ssl_session_tickets off`) takes its entry on every
/// resumed handshake (single use), so with `shared:SSL:10m` (40 960
/// sessions) that search cost more than the handshake's own crypto and
/// grew as the cache filled (bench/RESULTS.md, 2026-11-25 `bench/tls`).
#[derive(Debug)]
pub struct SessionCache {
    inner: Mutex<Entries>,
    max: usize,
}

#[derive(Debug, Default)]
struct Entries {
    /// key → (when it was put, the session).
    map: HashMap<Vec<u8>, (u64, Vec<u8>)>,
    /// Keys in the order they were put; an entry whose number is no longer
    /// the map's (taken, or put again since) is skipped when evicting and
    /// dropped when the queue is compacted.
    order: VecDeque<(u64, Vec<u8>)>,
    /// Numbers the puts.
    next: u64,
}

impl Entries {
    fn live(&self, n: u64, key: &[u8]) -> bool {
        self.map.get(key).is_some_and(|e| e.0 == n)
    }
}

impl SessionCache {
    /// An empty cache holding at most `max` sessions.
    pub fn new(max: usize) -> SessionCache {
        SessionCache {
            inner: Mutex::new(Entries::default()),
            max: max.max(1),
        }
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl StoresServerSessions for SessionCache {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        let mut e = self.entries();
        let n = e.next;
        e.next += 1;
        e.order.push_back((n, key.clone()));
        e.map.insert(key, (n, value));
        while e.map.len() > self.max {
            let Some((n, k)) = e.order.pop_front() else {
                break;
            };
            if e.live(n, &k) {
                e.map.remove(&k);
            }
        }
        // Taken keys leave stale queue entries behind: drop them once they
        // outnumber the live ones (amortised constant time per put).
        if e.order.len() > 2 * self.max.min(e.map.len().max(1)) + 16 {
            let Entries { map, order, .. } = &mut *e;
            order.retain(|(n, k)| map.get(k).is_some_and(|v| v.0 == *n));
        }
        true
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.entries().map.get(key).map(|e| e.1.clone())
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.entries().map.remove(key).map(|e| e.1)
    }

    fn can_cache(&self) -> bool {
        true
    }
}

/// A session store whose entries expire after `ssl_session_timeout`.
#[derive(Debug)]
pub struct TimedStore {
    inner: Arc<dyn StoresServerSessions>,
    timeout: u64,
}

impl TimedStore {
    /// `inner` with entries older than `timeout` ignored.
    pub fn new(inner: Arc<dyn StoresServerSessions>, timeout: Duration) -> TimedStore {
        TimedStore {
            inner,
            timeout: timeout.as_secs(),
        }
    }
}

impl StoresServerSessions for TimedStore {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        self.inner.put(key, stamped(&value))
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.inner.get(key).and_then(|v| fresh(v, self.timeout))
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.inner.take(key).and_then(|v| fresh(v, self.timeout))
    }

    fn can_cache(&self) -> bool {
        self.inner.can_cache()
    }
}

/// Session tickets whose content expires after `ssl_session_timeout`
/// (the lifetime hint sent to clients says the same).
#[derive(Debug)]
pub struct TimedTickets {
    inner: Arc<dyn ProducesTickets>,
    timeout: u32,
}

impl TimedTickets {
    /// `inner` (rustls's rotating AEAD ticketer) with tickets valid for
    /// `timeout`.
    pub fn new(inner: Arc<dyn ProducesTickets>, timeout: Duration) -> TimedTickets {
        TimedTickets {
            inner,
            timeout: timeout.as_secs().min(u32::MAX as u64) as u32,
        }
    }
}

impl ProducesTickets for TimedTickets {
    fn enabled(&self) -> bool {
        self.inner.enabled()
    }

    fn lifetime(&self) -> u32 {
        self.timeout
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        self.inner.encrypt(&stamped(plain))
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        fresh(self.inner.decrypt(cipher)?, self.timeout as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_sessions_expire_after_the_timeout() {
        let inner = memory_cache(1 << 20);
        let s = TimedStore::new(inner.clone(), Duration::from_secs(300));
        assert!(s.put(b"k".to_vec(), b"v".to_vec()));
        assert_eq!(s.get(b"k"), Some(b"v".to_vec()));
        let mut old = (now_secs() - 301).to_be_bytes().to_vec();
        old.push(b'v');
        inner.put(b"k".to_vec(), old);
        assert_eq!(s.get(b"k"), None);
    }

    #[test]
    fn tickets_round_trip_and_expire() {
        let t = TimedTickets::new(
            rustls::crypto::ring::Ticketer::new().unwrap(),
            Duration::from_secs(0),
        );
        let c = t.encrypt(b"state").unwrap();
        assert_eq!(t.decrypt(&c), Some(b"state".to_vec()));
        let stale = TimedTickets {
            inner: t.inner.clone(),
            timeout: 0,
        };
        let mut old = (now_secs() - 5).to_be_bytes().to_vec();
        old.extend_from_slice(b"state");
        let c = t.inner.encrypt(&old).unwrap();
        assert_eq!(stale.decrypt(&c), None);
    }

    #[test]
    fn the_cache_evicts_the_oldest_and_takes_once() {
        let c = SessionCache::new(3);
        for k in [b"a", b"b", b"c"] {
            assert!(c.put(k.to_vec(), k.to_vec()));
        }
        assert_eq!(c.take(b"b"), Some(b"b".to_vec()));
        assert_eq!(c.take(b"b"), None);
        c.put(b"d".to_vec(), b"d".to_vec());
        // Three live (a, c, d): nothing evicted for the taken b.
        assert_eq!(c.get(b"a"), Some(b"a".to_vec()));
        c.put(b"e".to_vec(), b"e".to_vec());
        assert_eq!(c.get(b"a"), None, "the oldest goes first");
        assert_eq!(c.get(b"c"), Some(b"c".to_vec()));
        // Put again: the newer value, and it is no longer the oldest.
        c.put(b"c".to_vec(), b"C".to_vec());
        c.put(b"f".to_vec(), b"f".to_vec());
        assert_eq!(c.get(b"c"), Some(b"C".to_vec()));
        assert_eq!(c.get(b"d"), None);
        assert!(c.entries().order.len() <= 2 * 3 + 16);
    }

    #[test]
    fn taking_every_entry_of_a_full_cache_empties_it_and_its_queue() {
        // TLS 1.3 resumption from the cache takes the newest entries of a
        // full cache (single use). That `take` costs the same at any fill
        // is shown by bench/tls's `resume-cache` case, not timed here.
        const N: usize = 10_000;
        let c = SessionCache::new(N);
        let key = |i: usize| (i as u64).to_be_bytes().to_vec();
        for i in 0..N {
            c.put(key(i), vec![0; 16]);
        }
        for i in (0..N).rev() {
            assert!(c.take(&key(i)).is_some());
        }
        assert!(c.entries().map.is_empty());
        // The queue's stale entries go at the next puts.
        for i in 0..20 {
            c.put(key(i), vec![0; 16]);
        }
        assert!(c.entries().order.len() < 100);
    }
}
