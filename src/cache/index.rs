//! The keys zone: what the cache knows about every key without touching a
//! disk. One index per zone, shared by all workers (workers are threads of
//! one process, so a `Mutex` held for a few map operations replaces
//! NGINX's shared memory and its slab allocator).
//!
//! Each node records the entry's size on disk, its validity, its last use
//! and its uses (for `proxy_cache_min_uses`), whether a complete file
//! exists, and whether a fill is under way (`proxy_cache_lock`, and the
//! `updating` state of `proxy_cache_use_stale updating`). Capacity comes
//! from the `keys_zone` size, about 8 000 keys per megabyte as in NGINX;
//! a full zone drops its least recently used node (NGINX's "could not
//! allocate node" followed by a forced expiry). Nodes whose file must go
//! are handed back to the caller, who removes the file through the disk
//! layer (or leaves it to the manager thread).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lru::LruCache;
use tokio::sync::watch;

use super::key::KeyHash;

/// Keys per byte of `keys_zone`: NGINX's "about 8 thousand keys" per MB.
pub const KEYS_PER_MB: u64 = 8000;

/// What the index holds for one key.
#[derive(Debug, Clone)]
pub struct Node {
    /// Bytes the file takes on disk (0 while no file exists).
    pub size: u64,
    /// Fresh until this unix time (0 = not known yet: read the header).
    pub valid_until: i64,
    /// Last lookup or store.
    pub last_use: Instant,
    /// Lookups counted while the key was not cached
    /// (`proxy_cache_min_uses`).
    pub uses: u32,
    /// A complete file is in place.
    pub exists: bool,
    /// Which file: a number new for every file stored under the key (0
    /// while none is), so a descriptor kept open between hits
    /// (`open_entries`) is known to be the current one.
    pub gen: u64,
    /// The status of an error answer remembered for the key until
    /// `valid_until` (NGINX's node `error`: an intercepted error that was
    /// cacheable); 0 when none.
    pub error: u16,
    fill: Option<watch::Sender<()>>,
    /// When the fill under way was claimed (`proxy_cache_lock_age`).
    fill_since: Instant,
}

impl Node {
    fn new(now: Instant) -> Node {
        Node {
            size: 0,
            valid_until: 0,
            last_use: now,
            uses: 0,
            exists: false,
            gen: 0,
            error: 0,
            fill: None,
            fill_since: now,
        }
    }

    /// A fill of this key is under way (NGINX's `updating`).
    pub fn updating(&self) -> bool {
        self.fill.is_some()
    }
}

/// The next [`Node::gen`] (shared by all zones, so a generation never
/// repeats within a process).
static NEXT_GEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn next_gen() -> u64 {
    NEXT_GEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A node that left the index and whose file (if any) must be removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evicted {
    /// The key.
    pub hash: KeyHash,
    /// Bytes freed.
    pub size: u64,
    /// A file exists and should be unlinked.
    pub exists: bool,
}

struct State {
    nodes: LruCache<KeyHash, Node>,
    /// Sum of `size` over all nodes (for `max_size`).
    total: u64,
}

/// One zone's index.
pub struct Index {
    state: Mutex<State>,
    capacity: usize,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("capacity", &self.capacity)
            .finish()
    }
}

/// The outcome of claiming the fill of a key (`proxy_cache_lock`).
pub enum Fill {
    /// This caller fills the key; others wait until the guard drops.
    Owner(FillGuard),
    /// Another request is filling it: wait on this.
    Wait(FillWaiter),
}

/// Held by the one request filling a key. Dropping it (after the entry is
/// stored, or on failure) ends the `updating` state and wakes the waiters.
pub struct FillGuard {
    index: Arc<Index>,
    hash: KeyHash,
    tx: Option<watch::Sender<()>>,
}

impl Drop for FillGuard {
    fn drop(&mut self) {
        let mut st = self.index.state.lock().unwrap();
        if let Some(n) = st.nodes.peek_mut(&self.hash) {
            if let (Some(mine), Some(theirs)) = (&self.tx, &n.fill) {
                if mine.same_channel(theirs) {
                    n.fill = None;
                }
            }
        }
        drop(st);
        // Dropping the sender closes the channel: every waiter wakes.
        self.tx.take();
    }
}

impl FillGuard {
    /// The key being filled.
    pub fn hash(&self) -> KeyHash {
        self.hash
    }
}

/// Waits for another request's fill of a key.
pub struct FillWaiter {
    rx: watch::Receiver<()>,
    since: Instant,
}

impl FillWaiter {
    /// When the fill waited on was claimed (`proxy_cache_lock_age` counts
    /// from then).
    pub fn since(&self) -> Instant {
        self.since
    }

    /// Waits until the fill ends (stored or failed): `true`, or until
    /// `timeout` passes (`proxy_cache_lock_timeout`): `false`. Works across
    /// the workers' event loops (a tokio channel, no thread blocks).
    pub async fn wait(mut self, timeout: Duration) -> bool {
        tokio::time::timeout(timeout, async {
            // The sender never sends: only its drop ends the wait.
            while self.rx.changed().await.is_ok() {}
        })
        .await
        .is_ok()
    }
}

impl Index {
    /// An index for a `keys_zone` of `zone_size` bytes.
    pub fn for_zone_size(zone_size: u64) -> Index {
        let cap = (zone_size as u128 * KEYS_PER_MB as u128 / (1024 * 1024)) as usize;
        Index::with_capacity(cap.max(1))
    }

    /// An index holding at most `capacity` keys.
    pub fn with_capacity(capacity: usize) -> Index {
        Index {
            state: Mutex::new(State {
                nodes: LruCache::unbounded(),
                total: 0,
            }),
            capacity: capacity.max(1),
        }
    }

    /// Keys it can hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Keys it holds.
    pub fn len(&self) -> usize {
        self.state.lock().unwrap().nodes.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sum of the on-disk sizes of the entries.
    pub fn total_size(&self) -> u64 {
        self.state.lock().unwrap().total
    }

    /// A copy of the node for `hash` (without touching its recency).
    pub fn peek(&self, hash: &KeyHash) -> Option<Node> {
        self.state.lock().unwrap().nodes.peek(hash).cloned()
    }

    /// Makes room for one more node: drops least recently used nodes that
    /// are not being filled.
    fn make_room(st: &mut State, capacity: usize, out: &mut Vec<Evicted>) {
        while st.nodes.len() >= capacity {
            let victim = st
                .nodes
                .iter()
                .rev()
                .find(|(_, n)| n.fill.is_none())
                .map(|(k, _)| *k);
            let Some(k) = victim else { break };
            Self::evict(st, k, out);
        }
    }

    /// Drops node `k` (if present) and reports it in `out`.
    fn evict(st: &mut State, k: KeyHash, out: &mut Vec<Evicted>) {
        if let Some(n) = st.nodes.pop(&k) {
            st.total -= n.size;
            out.push(Evicted {
                hash: k,
                size: n.size,
                exists: n.exists,
            });
        }
    }

    fn node<'a>(
        st: &'a mut State,
        capacity: usize,
        hash: KeyHash,
        now: Instant,
        out: &mut Vec<Evicted>,
    ) -> &'a mut Node {
        if !st.nodes.contains(&hash) {
            Self::make_room(st, capacity, out);
            st.nodes.put(hash, Node::new(now));
        }
        st.nodes.get_mut(&hash).expect("just inserted")
    }

    /// A lookup: marks the key used now. For a key without a file, counts
    /// one more use (creating the node) and returns the count; for a key
    /// with a file, returns the node. Evicted nodes are appended to `out`.
    pub fn touch(&self, hash: KeyHash, now: Instant, out: &mut Vec<Evicted>) -> Node {
        let mut st = self.state.lock().unwrap();
        let n = Self::node(&mut st, self.capacity, hash, now, out);
        n.last_use = now;
        if !n.exists {
            n.uses = n.uses.saturating_add(1);
        }
        n.clone()
    }

    /// The node of `hash` now holds a complete file of `size` bytes valid
    /// until `valid_until`, under a new generation; the zone's total follows.
    fn put_file<'a>(
        st: &'a mut State,
        capacity: usize,
        (hash, size, valid_until): (KeyHash, u64, i64),
        now: Instant,
        out: &mut Vec<Evicted>,
    ) -> &'a mut Node {
        let n = Self::node(st, capacity, hash, now, out);
        let old = n.size;
        n.size = size;
        n.valid_until = valid_until;
        n.exists = true;
        n.gen = next_gen();
        n.error = 0;
        st.total = st.total - old + size;
        st.nodes.peek_mut(&hash).expect("just put")
    }

    /// Records a complete entry of `size` bytes valid until `valid_until`
    /// (after its rename), replacing what the node held.
    pub fn stored(
        &self,
        hash: KeyHash,
        size: u64,
        valid_until: i64,
        now: Instant,
        out: &mut Vec<Evicted>,
    ) {
        let mut st = self.state.lock().unwrap();
        let n = Self::put_file(&mut st, self.capacity, (hash, size, valid_until), now, out);
        n.last_use = now;
    }

    /// The loader found a complete entry: add it unless the key is known
    /// already (a request got there first). Returns whether it was added.
    pub fn loaded(
        &self,
        hash: KeyHash,
        size: u64,
        valid_until: i64,
        now: Instant,
        out: &mut Vec<Evicted>,
    ) -> bool {
        let mut st = self.state.lock().unwrap();
        if st.nodes.peek(&hash).is_some_and(|n| n.exists) {
            return false;
        }
        Self::put_file(&mut st, self.capacity, (hash, size, valid_until), now, out);
        // The loader's entries are older than anything a request touched.
        st.nodes.demote(&hash);
        true
    }

    /// Learns the validity of an entry whose header was just read.
    pub fn set_valid(&self, hash: &KeyHash, valid_until: i64) {
        if let Some(n) = self.state.lock().unwrap().nodes.peek_mut(hash) {
            n.valid_until = valid_until;
        }
    }

    /// Forgets `hash` (purge, a bad file, an evicted entry). Returns the
    /// node's facts when it existed.
    pub fn remove(&self, hash: &KeyHash) -> Option<Evicted> {
        let mut st = self.state.lock().unwrap();
        let n = st.nodes.pop(hash)?;
        st.total -= n.size;
        Some(Evicted {
            hash: *hash,
            size: n.size,
            exists: n.exists,
        })
    }

    /// Remembers that `hash` answers with the error `status` until
    /// `valid_until` (unix s), whatever file it holds (NGINX's
    /// `ngx_http_file_cache_free` with `c->error`); a later stored file
    /// clears it.
    pub fn set_error(
        &self,
        hash: KeyHash,
        status: u16,
        valid_until: i64,
        now: Instant,
    ) -> Vec<Evicted> {
        let mut out = Vec::new();
        let mut st = self.state.lock().unwrap();
        let n = Self::node(&mut st, self.capacity, hash, now, &mut out);
        n.error = status;
        n.valid_until = valid_until;
        out
    }

    /// The error status `hash` answers with at `now` (unix s); one past
    /// its time is forgotten (the key is looked up as usual).
    pub fn error(&self, hash: &KeyHash, now: i64) -> Option<u16> {
        let mut st = self.state.lock().unwrap();
        let n = st.nodes.peek_mut(hash)?;
        match n.error {
            0 => None,
            _ if n.valid_until < now => {
                n.error = 0;
                None
            }
            e => Some(e),
        }
    }

    /// Marks `hash` as having no file (it vanished) but keeps its uses.
    pub fn lost(&self, hash: &KeyHash) {
        let mut st = self.state.lock().unwrap();
        if let Some(n) = st.nodes.peek_mut(hash) {
            let size = n.size;
            n.exists = false;
            n.gen = 0;
            n.size = 0;
            st.total -= size;
        }
    }

    /// Claims the fill of `hash`: the first caller owns it until its guard
    /// drops; later callers get a waiter. The node is `updating` meanwhile.
    pub fn claim_fill(self: &Arc<Self>, hash: KeyHash, now: Instant) -> (Fill, Vec<Evicted>) {
        let mut out = Vec::new();
        let mut st = self.state.lock().unwrap();
        let n = Self::node(&mut st, self.capacity, hash, now, &mut out);
        if let Some(tx) = &n.fill {
            let w = FillWaiter {
                rx: tx.subscribe(),
                since: n.fill_since,
            };
            return (Fill::Wait(w), out);
        }
        let (tx, _rx) = watch::channel(());
        n.fill = Some(tx.clone());
        n.fill_since = now;
        drop(st);
        (
            Fill::Owner(FillGuard {
                index: self.clone(),
                hash,
                tx: Some(tx),
            }),
            out,
        )
    }

    /// True while a fill of `hash` is under way.
    pub fn updating(&self, hash: &KeyHash) -> bool {
        self.state
            .lock()
            .unwrap()
            .nodes
            .peek(hash)
            .is_some_and(|n| n.fill.is_some())
    }

    /// Removes, least recently used first, nodes unused since before
    /// `now - inactive` (all of them, files or not), then entries until
    /// the total size is at most `max_size` — at most `limit` nodes in all.
    /// Nodes being filled are skipped.
    pub fn expire(
        &self,
        now: Instant,
        inactive: Duration,
        max_size: Option<u64>,
        limit: usize,
    ) -> Vec<Evicted> {
        let mut st = self.state.lock().unwrap();
        let mut victims = Vec::new();
        for (k, n) in st.nodes.iter().rev() {
            if victims.len() >= limit {
                break;
            }
            if n.fill.is_some() {
                continue;
            }
            if now.saturating_duration_since(n.last_use) >= inactive {
                victims.push(*k);
            } else {
                break;
            }
        }
        let mut out = Vec::new();
        for k in victims {
            Self::evict(&mut st, k, &mut out);
        }
        if let Some(max) = max_size {
            while st.total > max && out.len() < limit {
                let victim = st
                    .nodes
                    .iter()
                    .rev()
                    .find(|(_, n)| n.fill.is_none() && n.exists)
                    .map(|(k, _)| *k);
                let Some(k) = victim else { break };
                let n = st.nodes.pop(&k).expect("present");
                st.total -= n.size;
                out.push(Evicted {
                    hash: k,
                    size: n.size,
                    exists: n.exists,
                });
            }
        }
        out
    }

    /// Removes the least recently used entries with files (not being
    /// filled), at most `count` (for `min_free`).
    pub fn evict_lru(&self, count: usize) -> Vec<Evicted> {
        let mut st = self.state.lock().unwrap();
        let victims: Vec<KeyHash> = st
            .nodes
            .iter()
            .rev()
            .filter(|(_, n)| n.fill.is_none() && n.exists)
            .take(count)
            .map(|(k, _)| *k)
            .collect();
        victims
            .into_iter()
            .filter_map(|k| {
                let n = st.nodes.pop(&k)?;
                st.total -= n.size;
                Some(Evicted {
                    hash: k,
                    size: n.size,
                    exists: n.exists,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(i: u32) -> KeyHash {
        KeyHash::of(&i.to_le_bytes())
    }

    #[test]
    fn a_remembered_error_answers_until_its_time_or_a_stored_file() {
        let idx = Index::with_capacity(10);
        let now = Instant::now();
        assert_eq!(idx.error(&h(1), 100), None, "unknown key");
        assert!(idx.set_error(h(1), 404, 200, now).is_empty());
        assert_eq!(idx.error(&h(1), 200), Some(404));
        assert_eq!(idx.error(&h(1), 201), None, "past its time");
        assert_eq!(idx.error(&h(1), 150), None, "forgotten once expired");
        idx.set_error(h(1), 403, 300, now);
        idx.stored(h(1), 4096, 300, now, &mut Vec::new());
        assert_eq!(idx.error(&h(1), 100), None, "a stored file clears it");
    }

    #[test]
    fn capacity_from_zone_size() {
        assert_eq!(Index::for_zone_size(1024 * 1024).capacity(), 8000);
        assert_eq!(Index::for_zone_size(10 * 1024 * 1024).capacity(), 80000);
        assert_eq!(Index::for_zone_size(8192).capacity(), 62);
    }

    #[test]
    fn uses_count_until_stored() {
        let ix = Index::with_capacity(10);
        let now = Instant::now();
        let mut out = Vec::new();
        assert_eq!(ix.touch(h(1), now, &mut out).uses, 1);
        assert_eq!(ix.touch(h(1), now, &mut out).uses, 2);
        ix.stored(h(1), 4096, 100, now, &mut out);
        let n = ix.touch(h(1), now, &mut out);
        assert!(n.exists);
        assert_eq!(n.uses, 2, "hits are not counted as uses");
        assert_eq!(ix.total_size(), 4096);
        ix.stored(h(1), 8192, 100, now, &mut out);
        assert_eq!(ix.total_size(), 8192, "a replacement replaces its size");
        assert!(out.is_empty());
    }

    #[test]
    fn full_zone_evicts_least_recently_used() {
        let ix = Index::with_capacity(3);
        let now = Instant::now();
        let mut out = Vec::new();
        for i in 0..3 {
            ix.stored(h(i), 10, 0, now, &mut out);
        }
        ix.touch(h(0), now, &mut out); // 1 is now the oldest
        ix.stored(h(3), 10, 0, now, &mut out);
        assert_eq!(
            out,
            vec![Evicted {
                hash: h(1),
                size: 10,
                exists: true
            }]
        );
        assert_eq!(ix.len(), 3);
        assert_eq!(ix.total_size(), 30);
        assert!(ix.peek(&h(0)).is_some());
        assert!(ix.peek(&h(1)).is_none());
    }

    #[test]
    fn a_node_being_filled_is_not_evicted() {
        let ix = Arc::new(Index::with_capacity(2));
        let now = Instant::now();
        let mut out = Vec::new();
        let (g, _) = ix.claim_fill(h(0), now);
        assert!(matches!(g, Fill::Owner(_)));
        ix.stored(h(1), 1, 0, now, &mut out);
        ix.stored(h(2), 1, 0, now, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].hash, h(1));
        assert!(ix.updating(&h(0)));
        assert!(ix
            .expire(
                now + Duration::from_secs(100),
                Duration::from_secs(1),
                None,
                100
            )
            .iter()
            .all(|e| e.hash != h(0)));
        drop(g);
        assert!(!ix.updating(&h(0)));
    }

    #[test]
    fn inactive_and_max_size() {
        let ix = Index::with_capacity(100);
        let t0 = Instant::now();
        let mut out = Vec::new();
        ix.stored(h(0), 100, 0, t0, &mut out);
        ix.stored(h(1), 100, 0, t0 + Duration::from_secs(5), &mut out);
        ix.stored(h(2), 100, 0, t0 + Duration::from_secs(9), &mut out);
        let gone = ix.expire(
            t0 + Duration::from_secs(10),
            Duration::from_secs(6),
            None,
            100,
        );
        assert_eq!(gone.iter().map(|e| e.hash).collect::<Vec<_>>(), vec![h(0)]);
        let gone = ix.expire(
            t0 + Duration::from_secs(10),
            Duration::from_secs(600),
            Some(150),
            100,
        );
        assert_eq!(gone.iter().map(|e| e.hash).collect::<Vec<_>>(), vec![h(1)]);
        assert_eq!(ix.total_size(), 100);
        assert_eq!(ix.evict_lru(5).len(), 1);
        assert_eq!(ix.total_size(), 0);
    }

    #[test]
    fn loader_does_not_override_a_request() {
        let ix = Index::with_capacity(10);
        let now = Instant::now();
        let mut out = Vec::new();
        ix.stored(h(0), 10, 50, now, &mut out);
        assert!(!ix.loaded(h(0), 99, 1, now, &mut out));
        assert_eq!(ix.peek(&h(0)).unwrap().size, 10);
        assert!(ix.loaded(h(1), 20, 1, now, &mut out));
        assert_eq!(ix.total_size(), 30);
        ix.lost(&h(1));
        assert_eq!(ix.total_size(), 10);
        assert_eq!(ix.remove(&h(0)).unwrap().size, 10);
        assert_eq!(ix.total_size(), 0);
    }

    #[test]
    fn one_fill_per_key_and_waiters_wake() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let ix = Arc::new(Index::with_capacity(10));
        let now = Instant::now();
        let (Fill::Owner(guard), _) = ix.claim_fill(h(7), now) else {
            panic!("first claim owns")
        };
        let (Fill::Wait(w1), _) = ix.claim_fill(h(7), now) else {
            panic!("second claim waits")
        };
        let (Fill::Wait(w2), _) = ix.claim_fill(h(7), now) else {
            panic!("third claim waits")
        };
        // Another key is independent.
        assert!(matches!(ix.claim_fill(h(8), now).0, Fill::Owner(_)));
        rt.block_on(async {
            // Times out while the owner holds it.
            assert!(!w1.wait(Duration::from_millis(30)).await);
            // The owner finishes on another thread (another worker).
            let t = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(30));
                drop(guard);
            });
            assert!(w2.wait(Duration::from_secs(5)).await);
            t.join().unwrap();
        });
        // After the fill, the next claim owns again.
        assert!(matches!(ix.claim_fill(h(7), now).0, Fill::Owner(_)));
    }
}
