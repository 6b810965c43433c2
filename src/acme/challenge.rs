//! Challenges being validated, shared by the ACME thread (which
//! registers one while an authorization is pending) and the workers
//! (which answer the issuer's validation from it): HTTP-01 tokens here
//! (`GET /.well-known/acme-challenge/TOKEN`, answered with the key
//! authorization before any rewrite or location runs, as nginx-acme's
//! post-read handler does), TLS-ALPN-01 certificates in `tls_alpn.rs`.
//! Both are a [`Pending`] table: a worker pays one atomic load per
//! request or handshake while nothing is registered.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::RwLock;

/// The path prefix challenges are served under.
pub const PREFIX: &str = "/.well-known/acme-challenge/";

/// What is being validated, by key (a token, a name), and how many.
pub struct Pending<V> {
    count: AtomicUsize,
    map: RwLock<Option<HashMap<String, V>>>,
}

impl<V: Clone + Send + Sync + 'static> Pending<V> {
    /// An empty table (for a `static`).
    pub const fn new() -> Pending<V> {
        Pending {
            count: AtomicUsize::new(0),
            map: RwLock::new(None),
        }
    }

    /// The value registered under `key`; one atomic load when the table
    /// is empty.
    pub fn get(&self, key: &str) -> Option<V> {
        if self.count.load(Ordering::Acquire) == 0 {
            return None;
        }
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        map.as_ref()?.get(key).cloned()
    }

    /// Whether anything is registered (one atomic load).
    pub fn any(&self) -> bool {
        self.count.load(Ordering::Acquire) > 0
    }

    /// Serves `value` under `key` until the result is dropped.
    pub fn register(&'static self, key: &str, value: V) -> Registered {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        if map
            .get_or_insert_with(HashMap::new)
            .insert(key.to_string(), value)
            .is_none()
        {
            self.count.fetch_add(1, Ordering::Release);
        }
        Registered {
            key: key.to_string(),
            table: self,
        }
    }
}

impl<V: Clone + Send + Sync + 'static> Default for Pending<V> {
    fn default() -> Pending<V> {
        Pending::new()
    }
}

/// A table an entry can be removed from (what [`Registered`] holds).
trait Forget: Sync {
    fn forget(&self, key: &str);
}

impl<V: Send + Sync> Forget for Pending<V> {
    fn forget(&self, key: &str) {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        if map.as_mut().and_then(|m| m.remove(key)).is_some() {
            self.count.fetch_sub(1, Ordering::Release);
        }
    }
}

/// A registered challenge; dropping it unregisters it.
pub struct Registered {
    key: String,
    table: &'static dyn Forget,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.table.forget(&self.key);
    }
}

static TOKENS: Pending<String> = Pending::new();

/// The key authorization to answer `path` with, if it names an HTTP-01
/// token being validated.
pub fn answer(path: &str) -> Option<String> {
    if !TOKENS.any() {
        return None;
    }
    TOKENS.get(path.strip_prefix(PREFIX)?)
}

/// Serves `key_authorization` for the HTTP-01 `token` until the result
/// is dropped.
pub fn register(token: &str, key_authorization: &str) -> Registered {
    TOKENS.register(token, key_authorization.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_answered_while_registered_only() {
        assert_eq!(answer("/.well-known/acme-challenge/t1"), None);
        let r = register("t1", "t1.thumb");
        assert_eq!(
            answer("/.well-known/acme-challenge/t1").as_deref(),
            Some("t1.thumb")
        );
        assert_eq!(answer("/.well-known/acme-challenge/t2"), None);
        assert_eq!(answer("/t1"), None);
        drop(r);
        assert_eq!(answer("/.well-known/acme-challenge/t1"), None);
    }
}
