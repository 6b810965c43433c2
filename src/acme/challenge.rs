//! HTTP-01 tokens being validated, shared by the ACME thread (which
//! registers them while an authorization is pending) and the workers
//! (which answer `GET /.well-known/acme-challenge/TOKEN` with the key
//! authorization before any rewrite or location runs, as nginx-acme's
//! post-read handler does). A worker pays one atomic load per request
//! while no token is registered.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::RwLock;

/// The path prefix challenges are served under.
pub const PREFIX: &str = "/.well-known/acme-challenge/";

static COUNT: AtomicUsize = AtomicUsize::new(0);
static TOKENS: RwLock<Option<HashMap<String, String>>> = RwLock::new(None);

/// The key authorization to answer `path` with, if it names a token
/// being validated.
pub fn answer(path: &str) -> Option<String> {
    if COUNT.load(Ordering::Acquire) == 0 {
        return None;
    }
    let token = path.strip_prefix(PREFIX)?;
    let map = TOKENS.read().unwrap_or_else(|e| e.into_inner());
    map.as_ref()?.get(token).cloned()
}

/// A registered token; dropping it unregisters the token.
pub struct Registered(String);

/// Serves `key_authorization` for `token` until the result is dropped.
pub fn register(token: &str, key_authorization: &str) -> Registered {
    let mut map = TOKENS.write().unwrap_or_else(|e| e.into_inner());
    let map = map.get_or_insert_with(HashMap::new);
    if map
        .insert(token.to_string(), key_authorization.to_string())
        .is_none()
    {
        COUNT.fetch_add(1, Ordering::Release);
    }
    Registered(token.to_string())
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut map = TOKENS.write().unwrap_or_else(|e| e.into_inner());
        if map.as_mut().and_then(|m| m.remove(&self.0)).is_some() {
            COUNT.fetch_sub(1, Ordering::Release);
        }
    }
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
