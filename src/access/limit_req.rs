//! `limit_req_zone` / `limit_req`: NGINX's leaky bucket, in
//! milli-requests. Each key's state holds its `excess` (how far over the
//! rate it is, ×1000) and when it last changed; a request adds 1000 and
//! the bucket drains at the zone's rate. Over `burst` the request is
//! rejected; over `delay` (0 by default, never with `nodelay`) it waits
//! `(excess - delay) / rate`. With several `limit_req` lines the last one
//! is counted at once and the earlier ones hold their state (`count`)
//! until it is, then the longest wait wins — `ngx_http_limit_req_lookup`
//! and `_account`, step for step.
//!
//! A zone is shared by every worker: one mutex over a map of states and an
//! LRU order. Its size bounds the states as NGINX's slab does (a state
//! costs its key plus 48 bytes, rounded up to a power of two: about 16
//! thousand address keys per megabyte, as NGINX's documentation says);
//! when it is full the least recently used idle state goes, and when none
//! can go the request fails as NGINX's "could not allocate node" does.
//! A reload that declares a zone of the same name, size and key keeps its
//! states, as NGINX keeps a shared-memory zone ([`super::zone`] holds what
//! the two limit modules' zones share).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use super::zone::{SharedZone, ZoneDef};
use crate::vars::template::Template;

/// What `limit_req_zone` declared.
#[derive(Debug)]
pub struct ReqZoneDef {
    /// The key (a state per distinct non-empty value).
    pub key: Template,
    /// Milli-requests per second (`rate=10r/s` → 10000; `r/m` ÷ 60).
    pub rate: u64,
    /// Bytes the states may use.
    pub size: u64,
}

impl ZoneDef for ReqZoneDef {
    type State = State;
    const MODULE: &'static str = "limit_req";
    fn key(&self) -> &Template {
        &self.key
    }
    fn size(&self) -> u64 {
        self.size
    }
}

/// One `limit_req_zone`, shared by every worker.
pub type LimitReqZone = SharedZone<ReqZoneDef>;

/// One `limit_req` line.
#[derive(Debug, Clone)]
pub struct LimitReq {
    /// The zone.
    pub zone: Arc<LimitReqZone>,
    /// `burst`, in milli-requests.
    pub burst: u64,
    /// `delay`, in milli-requests (`nodelay`: `u64::MAX`).
    pub delay: u64,
}

#[derive(Debug)]
struct Node {
    excess: u64,
    /// None: created by a lookup that has not been counted yet (NGINX's
    /// `last = 0`, which drains any excess).
    last: Option<u64>,
    count: u32,
    stamp: u64,
}

/// A zone's states: one per key, their LRU order, and the bytes they use.
#[derive(Debug, Default)]
pub struct State {
    nodes: HashMap<Vec<u8>, Node>,
    lru: BTreeMap<u64, Vec<u8>>,
    next_stamp: u64,
    used: u64,
}

/// What the zones decided for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReqVerdict {
    /// No `limit_req` had a non-empty key.
    Declined,
    /// Within every limit.
    Passed,
    /// Wait `ms`; `excess` in the zone of limit `limit`.
    Delayed {
        /// Milliseconds to wait.
        ms: u64,
        /// The excess that caused it.
        excess: u64,
        /// Index of the limit.
        limit: usize,
    },
    /// Over `burst` in limit `limit`.
    Rejected {
        /// The excess.
        excess: u64,
        /// Index of the limit.
        limit: usize,
    },
    /// The zone of limit `limit` had no room for a new state.
    NoMemory {
        /// Index of the limit.
        limit: usize,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rc {
    Ok,
    Again,
    Busy,
    Error,
}

/// Milliseconds on a monotonic clock.
fn now_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

fn cost(key: &[u8]) -> u64 {
    (48 + key.len() as u64).next_power_of_two()
}

/// NGINX's `excess - rate * |ms| / 1000 + 1000`, floored at 0.
fn leak(node: &Node, rate: u64, now: u64) -> (u64, i64) {
    let Some(last) = node.last else {
        return (0, 1);
    };
    let mut ms = now as i64 - last as i64;
    if ms < -60000 {
        ms = 1;
    }
    let e = node.excess as i128 - rate as i128 * ms.unsigned_abs() as i128 / 1000 + 1000;
    (e.max(0) as u64, ms)
}

impl LimitReqZone {
    fn rate(&self) -> u64 {
        self.def().map_or(1000, |d| d.rate.max(1))
    }

    fn size(&self) -> u64 {
        self.def().map_or(0, |d| d.size)
    }

    /// `ngx_http_limit_req_lookup`.
    fn lookup(&self, key: &[u8], burst: u64, account: bool, now: u64) -> (Rc, u64) {
        let rate = self.rate();
        let Some(mut st) = self.lock() else {
            return (Rc::Error, 0);
        };
        let stamp = st.next_stamp;
        st.next_stamp += 1;
        if let Some(node) = st.nodes.get_mut(key) {
            let old = std::mem::replace(&mut node.stamp, stamp);
            let (excess, ms) = leak(node, rate, now);
            let verdict = if excess > burst {
                (Rc::Busy, excess)
            } else if account {
                node.excess = excess;
                if ms != 0 {
                    node.last = Some(now);
                }
                (Rc::Ok, excess)
            } else {
                node.count += 1;
                (Rc::Again, excess)
            };
            st.lru.remove(&old);
            st.lru.insert(stamp, key.to_vec());
            return verdict;
        }
        let size = self.size();
        st.expire(1, now, rate);
        if st.used + cost(key) > size {
            st.expire(0, now, rate);
            if st.used + cost(key) > size {
                return (Rc::Error, 0);
            }
        }
        st.used += cost(key);
        st.nodes.insert(
            key.to_vec(),
            Node {
                excess: 0,
                last: account.then_some(now),
                count: u32::from(!account),
                stamp,
            },
        );
        st.lru.insert(stamp, key.to_vec());
        (if account { Rc::Ok } else { Rc::Again }, 0)
    }

    /// Counts a state a lookup held (`ngx_http_limit_req_account`'s loop
    /// body): its new excess.
    fn settle(&self, key: &[u8], now: u64) -> u64 {
        let rate = self.rate();
        let Some(mut st) = self.lock() else {
            return 0;
        };
        let Some(node) = st.nodes.get_mut(key) else {
            return 0;
        };
        let (excess, ms) = leak(node, rate, now);
        if ms != 0 {
            node.last = Some(now);
        }
        node.excess = excess;
        node.count = node.count.saturating_sub(1);
        excess
    }

    /// Lets a held state go without counting it (`ngx_http_limit_req_unlock`).
    fn release(&self, key: &[u8]) {
        let Some(mut st) = self.lock() else {
            return;
        };
        if let Some(node) = st.nodes.get_mut(key) {
            node.count = node.count.saturating_sub(1);
        }
    }

    /// States kept now (for tests).
    pub fn states(&self) -> usize {
        self.lock().map_or(0, |st| st.nodes.len())
    }
}

impl State {
    /// `ngx_http_limit_req_expire`: drops up to two drained states from
    /// the LRU end (`n = 1`), or the LRU one whatever its state plus up to
    /// two drained ones (`n = 0`); never one a request holds.
    fn expire(&mut self, mut n: u32, now: u64, rate: u64) {
        while n < 3 {
            let Some((&stamp, key)) = self.lru.first_key_value() else {
                return;
            };
            let Some(node) = self.nodes.get(key) else {
                return;
            };
            if node.count > 0 {
                return;
            }
            if n != 0 {
                let ms = node.last.map_or(u64::MAX, |l| now.abs_diff(l));
                if ms < 60000 {
                    return;
                }
                let drained = node.excess as i128 - rate as i128 * ms as i128 / 1000;
                if drained > 0 {
                    return;
                }
            }
            n += 1;
            let key = key.clone();
            self.lru.remove(&stamp);
            self.nodes.remove(&key);
            self.used = self.used.saturating_sub(cost(&key));
        }
    }
}

/// Runs `limits` for one request whose rendered keys are `keys` (None or
/// empty: that limit does not apply), as NGINX's handler does.
pub fn check(limits: &[LimitReq], keys: &[Option<Vec<u8>>]) -> ReqVerdict {
    let now = now_ms();
    let mut rc = None;
    let mut excess = 0;
    let mut stop = limits.len();
    let mut held = vec![false; limits.len()];
    for (i, l) in limits.iter().enumerate() {
        let Some(key) = keys
            .get(i)
            .and_then(|k| k.as_deref())
            .filter(|k| !k.is_empty())
        else {
            continue;
        };
        let (r, e) = l.zone.lookup(key, l.burst, i + 1 == limits.len(), now);
        rc = Some(r);
        excess = e;
        held[i] = r == Rc::Again;
        if r != Rc::Again {
            stop = i;
            break;
        }
    }
    let key = |i: usize| keys[i].as_deref().unwrap_or_default();
    match rc {
        None => return ReqVerdict::Declined,
        Some(Rc::Busy | Rc::Error) => {
            for i in (0..stop).filter(|&i| held[i]) {
                limits[i].zone.release(key(i));
            }
            return if rc == Some(Rc::Busy) {
                ReqVerdict::Rejected {
                    excess,
                    limit: stop,
                }
            } else {
                ReqVerdict::NoMemory { limit: stop }
            };
        }
        Some(Rc::Again) => excess = 0,
        Some(Rc::Ok) => {}
    }
    // `ngx_http_limit_req_account`.
    let mut limit = stop.min(limits.len() - 1);
    let wait = |excess: u64, l: &LimitReq| match excess.checked_sub(l.delay) {
        Some(over) if over > 0 => over * 1000 / l.zone.rate(),
        _ => 0,
    };
    let mut max_delay = wait(excess, &limits[limit]);
    for i in (0..stop).rev().filter(|&i| held[i]) {
        let e = limits[i].zone.settle(key(i), now);
        let d = wait(e, &limits[i]);
        if d > max_delay {
            max_delay = d;
            excess = e;
            limit = i;
        }
    }
    if max_delay == 0 {
        ReqVerdict::Passed
    } else {
        ReqVerdict::Delayed {
            ms: max_delay,
            excess,
            limit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zone of its own (zones alike share their states).
    fn zone(rate: u64, size: u64) -> Arc<LimitReqZone> {
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let z = LimitReqZone::new(&format!("z{n}"));
        z.define(ReqZoneDef {
            key: Template::literal("k"),
            rate,
            size,
        })
        .unwrap();
        z
    }

    fn limit(z: &Arc<LimitReqZone>, burst: u64, delay: u64) -> LimitReq {
        LimitReq {
            zone: z.clone(),
            burst: burst * 1000,
            delay: delay.saturating_mul(1000),
        }
    }

    #[test]
    fn a_burst_passes_then_rejects_as_the_bucket_fills() {
        let z = zone(1000, 32768); // 1r/s
        let l = [limit(&z, 2, u64::MAX / 1000)]; // burst=2 nodelay
        let k = [Some(b"a".to_vec())];
        let got: Vec<_> = (0..5).map(|_| check(&l, &k)).collect();
        assert_eq!(got[0], ReqVerdict::Passed);
        assert_eq!(got[1], ReqVerdict::Passed);
        assert_eq!(got[2], ReqVerdict::Passed);
        assert!(matches!(
            got[3],
            ReqVerdict::Rejected {
                excess: 3000,
                limit: 0
            }
        ));
        // Another key has its own bucket; an empty key is not limited.
        assert_eq!(check(&l, &[Some(b"b".to_vec())]), ReqVerdict::Passed);
        assert_eq!(check(&l, &[Some(Vec::new())]), ReqVerdict::Declined);
    }

    #[test]
    fn without_nodelay_the_excess_waits() {
        let z = zone(2000, 32768); // 2r/s
        let l = [limit(&z, 5, 1)]; // burst=5 delay=1
        let k = [Some(b"a".to_vec())];
        assert_eq!(check(&l, &k), ReqVerdict::Passed);
        assert_eq!(check(&l, &k), ReqVerdict::Passed); // excess 1000 <= delay
        match check(&l, &k) {
            ReqVerdict::Delayed { ms, excess, .. } => {
                assert!((1900..=2000).contains(&excess), "{excess}");
                assert!(ms <= 500, "{ms}");
            }
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn the_longest_wait_of_several_limits_wins() {
        let slow = zone(1000, 32768);
        let fast = zone(100_000, 32768);
        let l = [limit(&slow, 10, 0), limit(&fast, 10, 0)];
        let k = [Some(b"a".to_vec()), Some(b"a".to_vec())];
        assert_eq!(check(&l, &k), ReqVerdict::Passed);
        assert!(matches!(
            check(&l, &k),
            ReqVerdict::Delayed { limit: 0, .. }
        ));
    }

    #[test]
    fn a_zone_declared_alike_again_keeps_the_states() {
        let def = |size| ReqZoneDef {
            key: Template::literal("k"),
            rate: 1000,
            size,
        };
        let old = LimitReqZone::new("kept");
        old.define(def(32768)).unwrap();
        let l = |z: &Arc<LimitReqZone>| [limit(z, 0, 0)];
        let k = [Some(b"a".to_vec())];
        assert_eq!(check(&l(&old), &k), ReqVerdict::Passed);
        let alike = LimitReqZone::new("kept");
        alike.define(def(32768)).unwrap();
        assert!(matches!(check(&l(&alike), &k), ReqVerdict::Rejected { .. }));
        let resized = LimitReqZone::new("kept");
        resized.define(def(65536)).unwrap();
        assert_eq!(check(&l(&resized), &k), ReqVerdict::Passed);
    }

    #[test]
    fn a_full_zone_drops_its_least_recently_used_state() {
        // Room for 512 states of 64 bytes.
        let z = zone(1000, 32768);
        let l = [limit(&z, 0, 0)];
        for i in 0..600u32 {
            let k = [Some(format!("key{i}").into_bytes())];
            assert_eq!(check(&l, &k), ReqVerdict::Passed);
        }
        assert_eq!(z.states(), 512);
        // key0 was dropped: it starts afresh and passes.
        assert_eq!(check(&l, &[Some(b"key0".to_vec())]), ReqVerdict::Passed);
        // key599 was kept: a second request at once is over burst=0.
        assert!(matches!(
            check(&l, &[Some(b"key599".to_vec())]),
            ReqVerdict::Rejected { .. }
        ));
    }
}
