//! `limit_conn_zone` / `limit_conn`: how many requests per key are being
//! processed at once, as NGINX's limit_conn module counts them. A request
//! takes a slot in each zone whose key it renders non-empty and keeps it
//! until it ends ([`Held`] gives it back when dropped); over the limit it
//! is refused. A zone is shared by every worker (one mutex over a map);
//! its size bounds the keys (a key costs its length plus 24 bytes,
//! rounded up to a power of two, as NGINX's slab would), and a key that
//! finds no room is refused as NGINX's failed `ngx_slab_alloc` is. A
//! reload that declares a zone of the same name, size and key keeps its
//! counts, as NGINX keeps a shared-memory zone ([`super::zone`] holds
//! what the two limit modules' zones share).

use std::collections::HashMap;
use std::sync::Arc;

use super::zone::{SharedZone, ZoneDef};
use crate::vars::template::Template;

/// What `limit_conn_zone` declared.
#[derive(Debug)]
pub struct ConnZoneDef {
    /// The key.
    pub key: Template,
    /// Bytes the keys may use.
    pub size: u64,
}

impl ZoneDef for ConnZoneDef {
    type State = State;
    const MODULE: &'static str = "limit_conn";
    fn key(&self) -> &Template {
        &self.key
    }
    fn size(&self) -> u64 {
        self.size
    }
}

/// One `limit_conn_zone`, shared by every worker.
pub type LimitConnZone = SharedZone<ConnZoneDef>;

/// A zone's counts: requests in progress per key, and the bytes its keys
/// use.
#[derive(Debug, Default)]
pub struct State {
    counts: HashMap<Vec<u8>, u32>,
    used: u64,
}

/// One `limit_conn` line.
#[derive(Debug, Clone)]
pub struct LimitConn {
    /// The zone.
    pub zone: Arc<LimitConnZone>,
    /// The most requests per key at once.
    pub max: u32,
}

/// A slot a request holds; dropping it gives the slot back.
#[derive(Debug)]
pub struct Held {
    zone: Arc<LimitConnZone>,
    key: Vec<u8>,
}

/// The answer to [`LimitConnZone::acquire`].
#[derive(Debug)]
pub enum ConnVerdict {
    /// A slot, held until dropped.
    Held(Held),
    /// The key is at its limit.
    Limited,
    /// No room in the zone for a new key.
    NoMemory,
}

fn cost(key: &[u8]) -> u64 {
    (24 + key.len() as u64).next_power_of_two()
}

impl LimitConnZone {
    /// Takes a slot for `key` unless `max` are taken.
    pub fn acquire(self: &Arc<Self>, key: &[u8], max: u32) -> ConnVerdict {
        let size = self.def().map_or(0, |d| d.size);
        let Some(mut st) = self.lock() else {
            return ConnVerdict::NoMemory;
        };
        match st.counts.get_mut(key) {
            Some(n) if *n >= max => return ConnVerdict::Limited,
            Some(n) => *n += 1,
            None => {
                if st.used + cost(key) > size {
                    return ConnVerdict::NoMemory;
                }
                st.used += cost(key);
                st.counts.insert(key.to_vec(), 1);
            }
        }
        ConnVerdict::Held(Held {
            zone: self.clone(),
            key: key.to_vec(),
        })
    }

    /// Slots held now for `key` (for tests).
    pub fn count(&self, key: &[u8]) -> u32 {
        self.lock()
            .and_then(|st| st.counts.get(key).copied())
            .unwrap_or(0)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(mut st) = self.zone.lock() else {
            return;
        };
        if let Some(n) = st.counts.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                st.counts.remove(&self.key);
                st.used = st.used.saturating_sub(cost(&self.key));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_counted_per_key_and_given_back() {
        let z = LimitConnZone::new("c");
        z.define(ConnZoneDef {
            key: Template::literal("k"),
            size: 32,
        })
        .unwrap();
        let a = z.acquire(b"a", 2);
        let b = z.acquire(b"a", 2);
        assert!(matches!(z.acquire(b"a", 2), ConnVerdict::Limited));
        assert_eq!(z.count(b"a"), 2);
        // 32 bytes hold one key (1 + 24, rounded up): a second finds no room.
        assert!(matches!(z.acquire(b"b", 2), ConnVerdict::NoMemory));
        drop(a);
        assert!(matches!(z.acquire(b"a", 2), ConnVerdict::Held(_)));
        drop(b);
        assert_eq!(z.count(b"a"), 0);
        assert!(matches!(z.acquire(b"b", 2), ConnVerdict::Held(_)));
    }
}
