//! Session resumption, shared by every worker: workers are threads of one
//! process, so one session store (`ssl_session_cache shared:NAME:SIZE`)
//! and one ticket key set (`ssl_session_tickets`) serve them all, where
//! NGINX needs a shared-memory zone. rustls keeps no creation time it
//! checks on resumption, so both wrappers here stamp what they store and
//! refuse what is older than `ssl_session_timeout`.

use std::sync::Arc;
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
    rustls::server::ServerSessionMemoryCache::new(n)
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
}
