//! Peer selection, as NGINX's `ngx_http_upstream_round_robin.c` and
//! `ngx_http_upstream_hash_module.c` do it, so a config moved from NGINX
//! spreads load the same way and `hash ... consistent` maps keys to the
//! same servers.
//!
//! - **Smooth weighted round-robin**: every live peer's `current_weight`
//!   grows by its `effective_weight`, the largest wins and gives back the
//!   total. A failure lowers `effective_weight` by `weight / max_fails`; it
//!   climbs back one step per selection.
//! - **`max_fails` / `fail_timeout`**: a peer with `max_fails` failures is
//!   skipped while its last failure is younger than `fail_timeout`; after
//!   that one request may probe it, and a success clears the count.
//! - **`backup`** peers are asked only when no primary peer is left.
//! - **`hash KEY`**: Cache::Memcached's rehash loop
//!   (`((crc32([REHASH] KEY) >> 16) & 0x7fff) + PREV`) over the weights.
//! - **`hash KEY consistent`**: ketama: `160 × weight` points per peer from
//!   `crc32(HOST "\0" PORT PREV_POINT)`, sorted; a key goes to the first
//!   point at or after `crc32(KEY)`, walking on past dead peers.
//! - After 20 hash tries both fall back to round-robin, as NGINX does.
//! - **`ip_hash`**: the first three octets of an IPv4 client (all sixteen
//!   bytes of IPv6), `hash = (hash * 113 + byte) % 6271` from 89, the
//!   weights walked as `hash` does; 20 tries, then round-robin.
//! - **`least_conn`**: the live peers with the fewest active requests
//!   relative to their weight (`conns × best.weight < best.conns × weight`),
//!   smooth round-robin among equals.
//! - **`random [two [least_conn]]`**: a peer drawn by weight (20 draws,
//!   then round-robin); with `two`, two distinct draws and the one with
//!   fewer active requests relative to weight.
//! - **`max_conns=N`**: a peer with N requests in flight is skipped (a
//!   lone peer too), as NGINX's `peer->conns >= peer->max_conns`.
//! - A peer's active count runs from its selection to the end of its try:
//!   a failure, or for the response that stands the end of its body
//!   ([`InFlight`] dropped; NGINX frees the peer when the request ends).
//!
//! Peer state is shared by every worker thread: one `Mutex` per peer set,
//! held only for the arithmetic of one selection or one release.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::ketama::find_point;
pub use super::ketama::{crc32, ketama_ring};
use super::PeerAddr;
use crate::vars::template::Template;

/// One `server` line after its address resolved (a name with several
/// addresses gives several peers, as in NGINX).
#[derive(Debug, Clone)]
pub struct PeerSpec {
    /// The `server` argument as written (`127.0.0.1:8081`), the ketama key.
    pub server: String,
    /// The address connected to.
    pub addr: PeerAddr,
    /// `weight=N` (default 1).
    pub weight: u32,
    /// `max_fails=N` (default 1; 0 disables the accounting).
    pub max_fails: u32,
    /// `fail_timeout=T` (default 10 s).
    pub fail_timeout: Duration,
    /// `down`.
    pub down: bool,
    /// `max_conns=N`: requests in flight at most (0: no limit).
    pub max_conns: u32,
}

#[derive(Debug, Clone)]
struct PeerState {
    /// Requests in flight to it (`least_conn`, `random two`).
    conns: u32,
    current_weight: i64,
    effective_weight: i64,
    fails: u32,
    accessed: Option<Instant>,
    checked: Instant,
    /// Tries ended ([`PeerSet::release`]) and, of those, failed: the
    /// status pages' figures, counted under the lock a release takes.
    tries: u64,
    failures: u64,
}

/// A peer's state as the status pages show it ([`PeerSet::view`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerView {
    /// `down` in the config.
    pub down: bool,
    /// `max_fails` reached within `fail_timeout`: skipped for now.
    pub unavailable: bool,
    /// Requests in flight to it.
    pub active: u32,
    /// Failures counted towards `max_fails` now.
    pub fails: u32,
    /// Tries ended since start (or the last reload).
    pub tries: u64,
    /// Of those, failed (an error, a timeout, an invalid header).
    pub failures: u64,
}

/// A list of peers (the primary set or the backup set) and their shared
/// state.
#[derive(Debug)]
pub struct PeerSet {
    /// The peers, in config order.
    pub peers: Vec<PeerSpec>,
    state: Mutex<Vec<PeerState>>,
    total_weight: u64,
}

impl PeerSet {
    /// A set over `peers`, all alive.
    pub fn new(peers: Vec<PeerSpec>) -> PeerSet {
        let now = Instant::now();
        let state = peers
            .iter()
            .map(|p| PeerState {
                conns: 0,
                current_weight: 0,
                effective_weight: p.weight as i64,
                fails: 0,
                accessed: None,
                checked: now,
                tries: 0,
                failures: 0,
            })
            .collect();
        let total_weight = peers.iter().map(|p| p.weight as u64).sum();
        PeerSet {
            peers,
            state: Mutex::new(state),
            total_weight,
        }
    }

    /// Each peer's state now, in config order: one lock, one copy.
    pub fn view(&self) -> Vec<PeerView> {
        let now = Instant::now();
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.peers
            .iter()
            .zip(st.iter())
            .map(|(p, s)| PeerView {
                down: p.down,
                unavailable: !p.down && !Self::alive(p, s, now),
                active: s.conns,
                fails: s.fails,
                tries: s.tries,
                failures: s.failures,
            })
            .collect()
    }

    fn usable(p: &PeerSpec, s: &PeerState, now: Instant) -> bool {
        Self::alive(p, s, now) && (p.max_conns == 0 || s.conns < p.max_conns)
    }

    fn alive(p: &PeerSpec, s: &PeerState, now: Instant) -> bool {
        !(p.down
            || p.max_fails > 0
                && s.fails >= p.max_fails
                && now.duration_since(s.checked) <= p.fail_timeout)
    }

    /// Smooth weighted round-robin among the peers not in `tried` (and, if
    /// `only` is given, among those whose `server` equals it). `single`: the
    /// group's only peer, never marked unavailable (NGINX's `single`).
    fn pick_rr(&self, tried: &[bool], only: Option<&str>, single: bool) -> Option<usize> {
        let now = Instant::now();
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if single && self.peers.len() == 1 && only.is_none() {
            let p = &self.peers[0];
            let full = p.max_conns > 0 && st[0].conns >= p.max_conns;
            return (!p.down && !tried[0] && !full).then_some(0);
        }
        let mut best: Option<(usize, i64)> = None;
        let mut total: i64 = 0;
        for (i, p) in self.peers.iter().enumerate() {
            if tried[i] || only.is_some_and(|s| s != p.server) {
                continue;
            }
            let s = &mut st[i];
            if !Self::usable(p, s, now) {
                continue;
            }
            s.current_weight += s.effective_weight;
            total += s.effective_weight;
            if s.effective_weight < p.weight as i64 {
                s.effective_weight += 1;
            }
            if best.is_none_or(|(_, w)| s.current_weight > w) {
                best = Some((i, s.current_weight));
            }
        }
        let (b, _) = best?;
        st[b].current_weight -= total;
        if now.duration_since(st[b].checked) > self.peers[b].fail_timeout {
            st[b].checked = now;
        }
        Some(b)
    }

    /// Counts a request in flight to peer `i`.
    fn start(&self, i: usize) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st[i].conns += 1;
    }

    /// `least_conn`: the usable untried peers with the fewest requests in
    /// flight per weight, smooth round-robin among equals (NGINX's
    /// `ngx_http_upstream_get_least_conn_peer`).
    fn pick_least_conn(&self, tried: &[bool]) -> Option<usize> {
        let now = Instant::now();
        let best = {
            let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let mut best: Option<usize> = None;
            for (i, p) in self.peers.iter().enumerate() {
                if tried[i] || !Self::usable(p, &st[i], now) {
                    continue;
                }
                let fewer = |b: usize| {
                    (st[i].conns as u64) * (self.peers[b].weight as u64)
                        < (st[b].conns as u64) * (p.weight as u64)
                };
                if best.is_none_or(fewer) {
                    best = Some(i);
                }
            }
            let b = best?;
            // Every peer with as few: the smooth round-robin picks.
            let ratio = |i: usize| (st[i].conns as u64, self.peers[i].weight as u64);
            let (bc, bw) = ratio(b);
            (0..self.peers.len())
                .map(|i| {
                    let (c, w) = ratio(i);
                    tried[i] || !Self::usable(&self.peers[i], &st[i], now) || c * bw != bc * w
                })
                .collect::<Vec<bool>>()
        };
        self.pick_rr(&best, None, false)
    }

    /// `random`: one peer drawn by weight among the usable untried ones
    /// (20 draws at most).
    fn pick_random(&self, tried: &[bool]) -> Option<usize> {
        for _ in 0..20 {
            let i = self.draw();
            if !tried[i] && self.available(i) {
                return Some(i);
            }
        }
        None
    }

    /// `random two`: two distinct draws, the one with fewer requests in
    /// flight per weight (NGINX's `get_random2_peer`).
    fn pick_random_two(&self, tried: &[bool]) -> Option<usize> {
        let a = self.pick_random(tried)?;
        let mut others = tried.to_vec();
        others[a] = true;
        let Some(b) = self.pick_random(&others) else {
            return Some(a);
        };
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (pa, pb) = (&self.peers[a], &self.peers[b]);
        let b_fewer =
            (st[b].conns as u64) * (pa.weight as u64) < (st[a].conns as u64) * (pb.weight as u64);
        Some(if b_fewer { b } else { a })
    }

    /// A peer index drawn with probability proportional to its weight.
    fn draw(&self) -> usize {
        let mut w = rand_below(self.total_weight.max(1));
        let mut p = 0;
        while p + 1 < self.peers.len() && w >= self.peers[p].weight as u64 {
            w -= self.peers[p].weight as u64;
            p += 1;
        }
        p
    }

    /// `ip_hash`: NGINX's walk over the client address (three octets of
    /// IPv4, sixteen bytes of IPv6), 20 tries.
    fn pick_ip_hash(
        &self,
        tried: &[bool],
        addr: &[u8],
        sel_hash: &mut u64,
        tries: &mut u32,
    ) -> Option<usize> {
        while *tries <= 20 {
            for &b in addr {
                *sel_hash = (*sel_hash * 113 + b as u64) % 6271;
            }
            let mut w = *sel_hash % self.total_weight.max(1);
            let mut p = 0;
            while w >= self.peers[p].weight as u64 {
                w -= self.peers[p].weight as u64;
                p += 1;
            }
            if !tried[p] && self.available(p) {
                self.touch(p);
                return Some(p);
            }
            *tries += 1;
        }
        None
    }

    /// Whether peer `i` may take a request now (for the hash loops).
    fn available(&self, i: usize) -> bool {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        Self::usable(&self.peers[i], &st[i], Instant::now())
    }

    fn touch(&self, i: usize) {
        let now = Instant::now();
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if now.duration_since(st[i].checked) > self.peers[i].fail_timeout {
            st[i].checked = now;
        }
    }

    /// Records the outcome of a request to peer `i` (NGINX's
    /// `free_round_robin_peer`); `ended`: no longer in flight.
    fn release(&self, i: usize, failed: bool, ended: bool) {
        let p = &self.peers[i];
        let now = Instant::now();
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut st[i];
        if ended {
            s.conns = s.conns.saturating_sub(1);
        }
        s.tries += 1;
        if failed {
            s.failures += 1;
            s.fails += 1;
            s.accessed = Some(now);
            s.checked = now;
            if let Some(step) = p.weight.checked_div(p.max_fails) {
                s.effective_weight -= step as i64;
            }
            if s.effective_weight < 0 {
                s.effective_weight = 0;
            }
        } else if s.accessed.is_some_and(|a| a < s.checked) {
            s.fails = 0;
        }
    }
}

/// `hash KEY [consistent]`.
#[derive(Debug)]
pub struct HashConf {
    /// The key, rendered per request.
    pub key: Template,
    /// `consistent`: the ketama ring (sorted points → peer `server`).
    pub ring: Option<Vec<(u32, usize)>>,
}

/// The balancing method of a group (besides `hash`, kept in
/// [`UpstreamGroup::hash`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Method {
    /// Smooth weighted round-robin (and `hash` when set).
    #[default]
    RoundRobin,
    /// `ip_hash`.
    IpHash,
    /// `least_conn`.
    LeastConn,
    /// `random`.
    Random,
    /// `random two [least_conn]`.
    RandomTwo,
}

/// An `upstream` block (or the implicit group of a `proxy_pass` address).
#[derive(Debug)]
pub struct UpstreamGroup {
    /// `least_conn`, `ip_hash`, `random`; round-robin by default.
    pub method: Method,
    /// Serial number, unique in the process (keys the keep-alive pools).
    pub id: u64,
    /// The name (`backend`, or `host:port` for an implicit group).
    pub name: String,
    /// Primary peers.
    pub primary: PeerSet,
    /// `backup` peers (may be empty).
    pub backup: PeerSet,
    /// `hash`.
    pub hash: Option<HashConf>,
    /// `keepalive N` idle connections per worker (0: none).
    pub keepalive: usize,
    /// `keepalive_timeout` (default 60 s).
    pub keepalive_timeout: Duration,
    /// `keepalive_requests` (default 1000).
    pub keepalive_requests: u64,
    /// `keepalive_time` (default 1 h): a connection older than this is
    /// closed after its response instead of going back to the pool.
    pub keepalive_time: Duration,
}

impl UpstreamGroup {
    /// The group NGINX makes for a `proxy_pass` address that names no
    /// `upstream` block: every address of `server` a peer with the
    /// defaults (weight 1, `max_fails=1`, `fail_timeout=10s`), round-robin,
    /// no keep-alive.
    pub fn implicit(name: String, server: &str, addrs: Vec<PeerAddr>) -> UpstreamGroup {
        let peers = addrs
            .into_iter()
            .map(|addr| PeerSpec {
                server: server.to_string(),
                addr,
                weight: 1,
                max_fails: 1,
                fail_timeout: Duration::from_secs(10),
                down: false,
                max_conns: 0,
            })
            .collect();
        UpstreamGroup {
            method: Method::default(),
            id: next_id(),
            name,
            primary: PeerSet::new(peers),
            backup: PeerSet::new(Vec::new()),
            hash: None,
            keepalive: 0,
            keepalive_timeout: Duration::from_secs(60),
            keepalive_requests: 1000,
            keepalive_time: Duration::from_secs(3600),
        }
    }
}

/// Which peer a selection returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerRef {
    /// From the backup set.
    pub backup: bool,
    /// Index in its set.
    pub index: usize,
}

/// One request's walk through a group: which peers it tried, and where a
/// hash loop stands.
#[derive(Debug)]
pub struct Selection {
    tried: Vec<bool>,
    tried_backup: Vec<bool>,
    key: Option<String>,
    hash: u64,
    rehash: u64,
    hash_tries: u32,
    ring_started: bool,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh group id (keys the per-worker keep-alive pools, so groups of
/// two config generations never share idle connections).
pub fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

impl UpstreamGroup {
    /// Every peer not marked `down`, primary and backup: NGINX's default
    /// number of tries (a `down` server is no try, so the last live peer's
    /// answer stands rather than `no live upstreams`).
    pub fn peer_count(&self) -> usize {
        let live = |s: &PeerSet| s.peers.iter().filter(|p| !p.down).count();
        live(&self.primary) + live(&self.backup)
    }

    /// The peer `r` names.
    pub fn peer(&self, r: PeerRef) -> &PeerSpec {
        if r.backup {
            &self.backup.peers[r.index]
        } else {
            &self.primary.peers[r.index]
        }
    }

    /// A fresh selection for one request; `key` is the rendered `hash` key.
    pub fn selection(&self, key: Option<String>) -> Selection {
        Selection {
            tried: vec![false; self.primary.peers.len()],
            tried_backup: vec![false; self.backup.peers.len()],
            key,
            hash: 0,
            rehash: 0,
            hash_tries: 0,
            ring_started: false,
        }
    }

    /// The next peer to try, or `None` when none is left ("no live
    /// upstreams").
    pub fn select(&self, sel: &mut Selection) -> Option<PeerRef> {
        let picked = match &self.hash {
            Some(h)
                if self.primary.peers.len() >= 2
                    && sel.key.as_ref().is_some_and(|k| !k.is_empty()) =>
            {
                match &h.ring {
                    Some(ring) => self.select_ring(ring, sel),
                    None => self.select_hash(sel),
                }
            }
            _ => None,
        };
        let picked = picked.or_else(|| self.pick_by_method(sel));
        let picked = picked.or_else(|| {
            self.primary
                .pick_rr(&sel.tried, None, self.backup.peers.is_empty())
        });
        if let Some(i) = picked {
            self.primary.start(i);
            sel.tried[i] = true;
            return Some(PeerRef {
                backup: false,
                index: i,
            });
        }
        // Backups only when the hash balancer is not in use, as in NGINX
        // (its hash module ignores `backup`).
        let backups = matches!(self.method, Method::RoundRobin | Method::LeastConn);
        if self.hash.is_none() && backups && !self.backup.peers.is_empty() {
            let picked = match self.method {
                Method::LeastConn => self.backup.pick_least_conn(&sel.tried_backup),
                _ => self.backup.pick_rr(&sel.tried_backup, None, false),
            };
            if let Some(i) = picked {
                self.backup.start(i);
                sel.tried_backup[i] = true;
                return Some(PeerRef {
                    backup: true,
                    index: i,
                });
            }
        }
        None
    }

    /// The primary peer `least_conn`, `ip_hash` or `random` picks (None:
    /// round-robin decides, as NGINX falls back to it).
    fn pick_by_method(&self, sel: &mut Selection) -> Option<usize> {
        let set = &self.primary;
        if set.peers.len() < 2 && self.method != Method::LeastConn {
            return None;
        }
        match self.method {
            Method::RoundRobin => None,
            Method::LeastConn => set.pick_least_conn(&sel.tried),
            Method::Random => set.pick_random(&sel.tried),
            Method::RandomTwo => set.pick_random_two(&sel.tried),
            Method::IpHash => {
                let addr: Vec<u8> = match sel.key.as_deref().and_then(|k| k.parse().ok()) {
                    Some(std::net::IpAddr::V4(a)) => a.octets()[..3].to_vec(),
                    Some(std::net::IpAddr::V6(a)) => a.octets().to_vec(),
                    None => return None,
                };
                if !sel.ring_started {
                    sel.ring_started = true;
                    sel.hash = 89;
                }
                set.pick_ip_hash(&sel.tried, &addr, &mut sel.hash, &mut sel.hash_tries)
            }
        }
    }

    fn select_hash(&self, sel: &mut Selection) -> Option<usize> {
        let set = &self.primary;
        let key = sel.key.as_deref().unwrap_or("");
        while sel.hash_tries <= 20 {
            let mut h = crc32fast::Hasher::new();
            if sel.rehash > 0 {
                h.update(sel.rehash.to_string().as_bytes());
            }
            h.update(key.as_bytes());
            let v = (h.finalize() >> 16) & 0x7fff;
            sel.hash += v as u64;
            sel.rehash += 1;
            let mut w = sel.hash % set.total_weight.max(1);
            let mut p = 0;
            while w >= set.peers[p].weight as u64 {
                w -= set.peers[p].weight as u64;
                p += 1;
            }
            if !sel.tried[p] && set.available(p) {
                set.touch(p);
                return Some(p);
            }
            sel.hash_tries += 1;
        }
        None
    }

    fn select_ring(&self, ring: &[(u32, usize)], sel: &mut Selection) -> Option<usize> {
        if ring.is_empty() {
            return None;
        }
        if !sel.ring_started {
            sel.ring_started = true;
            sel.hash = find_point(ring, crc32(sel.key.as_deref().unwrap_or("").as_bytes())) as u64;
        }
        let set = &self.primary;
        while sel.hash_tries <= 20 {
            let (_, owner) = ring[(sel.hash % ring.len() as u64) as usize];
            let server = &set.peers[owner].server;
            // Among the peers of that `server` (one per address), smooth
            // round-robin, as NGINX's get_chash_peer.
            let live: Vec<bool> = (0..set.peers.len())
                .map(|i| sel.tried[i] || !set.available(i))
                .collect();
            if let Some(i) = set.pick_rr(&live, Some(server), false) {
                return Some(i);
            }
            sel.hash += 1;
            sel.hash_tries += 1;
        }
        None
    }

    fn set(&self, r: PeerRef) -> &PeerSet {
        match r.backup {
            true => &self.backup,
            false => &self.primary,
        }
    }

    /// Records the outcome of a try that ends now: `failed` for an error,
    /// a timeout or an invalid header (not for an HTTP status).
    pub fn release(&self, r: PeerRef, failed: bool) {
        self.set(r).release(r.index, failed, true)
    }

    /// Records a try whose response stands: the request stays in flight
    /// to the peer (`max_conns`, `least_conn`) until the guard is dropped.
    pub fn answered(self: &Arc<Self>, r: PeerRef) -> InFlight {
        self.set(r).release(r.index, false, false);
        InFlight {
            group: Arc::clone(self),
            peer: r,
        }
    }
}

/// A response's request in flight to its peer: dropped when its body has
/// been read (or given up), it ends the peer's count.
#[derive(Debug)]
pub struct InFlight {
    group: Arc<UpstreamGroup>,
    peer: PeerRef,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let set = self.group.set(self.peer);
        let mut st = set.state.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut st[self.peer.index];
        s.conns = s.conns.saturating_sub(1);
    }
}

/// A number below `n`: xorshift64* per thread, seeded from std's random
/// hasher keys (a balancer needs spread, not secrecy; no crate for it).
fn rand_below(n: u64) -> u64 {
    use std::cell::Cell;
    use std::hash::{BuildHasher, Hasher};
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(0x9e37_79b9_7f4a_7c15);
            h.finish() | 1
        });
    }
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        s.set(x);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(server: &str, weight: u32) -> PeerSpec {
        PeerSpec {
            server: server.to_string(),
            addr: PeerAddr::Inet(server.parse().unwrap()),
            weight,
            max_fails: 1,
            max_conns: 0,
            fail_timeout: Duration::from_secs(10),
            down: false,
        }
    }

    fn group(peers: Vec<PeerSpec>, backup: Vec<PeerSpec>, hash: Option<HashConf>) -> UpstreamGroup {
        UpstreamGroup {
            method: Method::RoundRobin,
            id: 0,
            name: "g".into(),
            primary: PeerSet::new(peers),
            backup: PeerSet::new(backup),
            hash,
            keepalive: 0,
            keepalive_timeout: Duration::from_secs(60),
            keepalive_requests: 1000,
            keepalive_time: Duration::from_secs(3600),
        }
    }

    fn pick(g: &UpstreamGroup) -> usize {
        let mut s = g.selection(None);
        let r = g.select(&mut s).unwrap();
        g.release(r, false);
        r.index
    }

    #[test]
    fn a_view_shows_requests_in_flight_tries_failures_and_state() {
        let mut down = peer("10.0.0.3:80", 1);
        down.down = true;
        let g = group(
            vec![peer("10.0.0.1:80", 1), peer("10.0.0.2:80", 1), down],
            vec![],
            None,
        );
        let mut s = g.selection(None);
        let first = g.select(&mut s).unwrap();
        let v = g.primary.view();
        assert_eq!(v[first.index].active, 1);
        assert!(v[2].down);
        g.release(first, true);
        let second = g.select(&mut s).unwrap();
        g.release(second, false);
        let v = g.primary.view();
        let (f, o) = (&v[first.index], &v[second.index]);
        assert_eq!((f.active, f.tries, f.failures, f.fails), (0, 1, 1, 1));
        assert!(f.unavailable, "max_fails=1 reached within fail_timeout");
        assert_eq!((o.tries, o.failures, o.unavailable), (1, 0, false));
        assert!(!v[2].unavailable, "down, not unavailable");
    }

    #[test]
    fn smooth_weighted_round_robin_order() {
        // NGINX's documented example: weights 5, 1, 1 give a a b a c a a.
        let g = group(
            vec![
                peer("10.0.0.1:80", 5),
                peer("10.0.0.2:80", 1),
                peer("10.0.0.3:80", 1),
            ],
            vec![],
            None,
        );
        let seq: Vec<usize> = (0..7).map(|_| pick(&g)).collect();
        assert_eq!(seq, [0, 0, 1, 0, 2, 0, 0]);
    }

    #[test]
    fn failed_peer_is_skipped_for_fail_timeout_then_backup() {
        let g = group(
            vec![peer("10.0.0.1:80", 1), peer("10.0.0.2:80", 1)],
            vec![peer("10.0.0.9:80", 1)],
            None,
        );
        let mut s = g.selection(None);
        let a = g.select(&mut s).unwrap();
        g.release(a, true);
        // The failed one is out: every pick goes to the other.
        for _ in 0..4 {
            assert_eq!(pick(&g), 1 - a.index);
        }
        let mut s = g.selection(None);
        let b = g.select(&mut s).unwrap();
        g.release(b, true);
        // Both primaries down: the backup answers.
        let mut s = g.selection(None);
        let r = g.select(&mut s).unwrap();
        assert!(r.backup);
        // Within one request, once every peer was tried, none is left.
        assert!(g.select(&mut s).is_none());
    }

    #[test]
    fn lone_peer_is_never_down_unless_backups_exist() {
        let g = group(vec![peer("10.0.0.1:80", 1)], vec![], None);
        let mut s = g.selection(None);
        let r = g.select(&mut s).unwrap();
        g.release(r, true);
        assert_eq!(pick(&g), 0);
        let g = group(
            vec![peer("10.0.0.1:80", 1)],
            vec![peer("10.0.0.2:80", 1)],
            None,
        );
        let mut s = g.selection(None);
        let r = g.select(&mut s).unwrap();
        g.release(r, true);
        let mut s = g.selection(None);
        assert!(g.select(&mut s).unwrap().backup);
    }

    #[test]
    fn ketama_points_follow_nginx() {
        let peers = vec![peer("127.0.0.1:8081", 1), peer("127.0.0.1:8082", 2)];
        let ring = ketama_ring(&peers);
        assert_eq!(ring.len(), 480);
        assert!(ring.windows(2).all(|w| w[0].0 < w[1].0));
        // The first point of a server: crc32("127.0.0.1\08081" ++ 0u32 LE).
        let first = crc32(b"127.0.0.1\x008081\x00\x00\x00\x00");
        assert!(ring.iter().any(|&(h, i)| h == first && i == 0));
    }
}
