//! Entries a worker keeps open between hits: the proxy cache's
//! `open_file_cache`. A hit on a kept entry costs no `open`, `fstat`,
//! header `pread` or `close` — only the body's `sendfile` (or `pread`) and
//! the response's `writev`, where NGINX makes seven system calls per hit.
//!
//! The keys zone is the authority, not the file system: every file stored
//! under a key (a fill's rename, or the loader finding it) gets a new
//! generation number in the key's index node ([`super::index::Node::gen`]),
//! and a kept entry answers only while the node still exists with the
//! generation it was opened under. A refill, purge, eviction or bad file
//! therefore retires it at the next lookup, before anything is served from
//! it. Entry files are never changed in place (a revalidation writes a new
//! file), so a kept descriptor always reads the complete entry it opened.
//!
//! Bounds: [`MAX_ENTRIES`] per worker, and never more than an eighth of
//! the process's descriptor limit shared by the workers ([`set_budget`]:
//! with a soft limit of 1,024 and two workers, 64 each — kept entries must
//! not take the descriptors connections need), entries of at most [`MAX_SIZE`]
//! bytes (a large body's transfer dwarfs its open), closed after
//! [`INACTIVE`] without a hit. An entry removed from the disk stays
//! allocated while a worker holds it open, for at most that long. A kept
//! entry is given up [`RECHECK`] after it was opened, so the next hit
//! opens it again and checks its body (`verify.rs`): damage that reaches
//! the page cache later is found within that time.
//!
//! Written here rather than through the static files' `open_file_cache`
//! because its validation (stat of the path) is exactly the system call
//! this saves; the index already knows when an entry changes.

use std::cell::RefCell;
use std::fs::File;
use std::num::NonZeroUsize;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lru::LruCache;

use super::format::EntryHeader;
use super::key::KeyHash;
use crate::disk::FileMeta;

/// Entries kept open per worker.
pub const MAX_ENTRIES: usize = 1024;
/// Largest entry file kept open.
pub const MAX_SIZE: u64 = 1 << 20;
/// A kept entry without a hit for this long is closed.
pub const INACTIVE: Duration = Duration::from_secs(10);
/// A kept entry is opened (and its body checked) again this long after
/// it was opened.
pub const RECHECK: Duration = Duration::from_secs(60);

/// Entries each worker may keep open now (see [`set_budget`]).
static BUDGET: AtomicUsize = AtomicUsize::new(MAX_ENTRIES);

/// Sizes the per-worker budget from the descriptor limit `nofile` and the
/// number of workers: an eighth of the limit, shared, at most
/// [`MAX_ENTRIES`] each.
pub fn set_budget(nofile: u64, workers: usize) {
    BUDGET.store(budget(nofile, workers), Ordering::Relaxed);
}

fn budget(nofile: u64, workers: usize) -> usize {
    let share = nofile / 8 / workers.max(1) as u64;
    share.min(MAX_ENTRIES as u64) as usize
}

/// An open entry and what was read from it.
#[derive(Debug, Clone)]
pub struct Kept {
    /// The index generation it was opened under.
    pub gen: u64,
    /// The descriptor.
    pub file: Arc<File>,
    /// `fstat` at open time.
    pub meta: FileMeta,
    /// The decoded header.
    pub header: Arc<EntryHeader>,
    /// The entry file's path, as shown in log lines.
    pub path: Rc<str>,
    used: Instant,
    opened: Instant,
}

impl Kept {
    /// An entry opened under generation `gen`.
    pub fn new(
        gen: u64,
        file: Arc<File>,
        meta: FileMeta,
        header: Arc<EntryHeader>,
        path: Rc<str>,
    ) -> Kept {
        Kept {
            gen,
            file,
            meta,
            header,
            path,
            used: Instant::now(),
            opened: Instant::now(),
        }
    }
}

/// (zone, key): the zone is told apart by its index's address.
type Slot = (usize, KeyHash);

thread_local! {
    static KEPT: RefCell<LruCache<Slot, Kept>> =
        RefCell::new(LruCache::new(NonZeroUsize::new(MAX_ENTRIES).expect("non-zero")));
}

fn close_idle(c: &mut LruCache<Slot, Kept>, now: Instant) {
    while let Some((_, e)) = c.peek_lru() {
        if now.saturating_duration_since(e.used) < INACTIVE {
            break;
        }
        c.pop_lru();
    }
}

/// The entry kept for `hash` in `zone` if it was opened under `gen` less
/// than [`RECHECK`] ago; any other kept entry for it is closed.
pub fn get(zone: usize, hash: &KeyHash, gen: u64, now: Instant) -> Option<Kept> {
    KEPT.with_borrow_mut(|c| {
        close_idle(c, now);
        let slot = (zone, *hash);
        match c.get_mut(&slot) {
            Some(e) if e.gen == gen && now.saturating_duration_since(e.opened) < RECHECK => {
                e.used = now;
                Some(e.clone())
            }
            Some(_) => {
                c.pop(&slot);
                None
            }
            None => None,
        }
    })
}

/// Keeps `entry` open (unless its file is larger than [`MAX_SIZE`]).
pub fn put(zone: usize, hash: &KeyHash, entry: Kept) {
    if entry.meta.size > MAX_SIZE {
        return;
    }
    let budget = BUDGET.load(Ordering::Relaxed);
    KEPT.with_borrow_mut(|c| put_within(c, (zone, *hash), entry, budget));
}

/// Keeps `entry` in `c`, closing the least recently used beyond `budget`.
fn put_within(c: &mut LruCache<Slot, Kept>, slot: Slot, entry: Kept, budget: usize) {
    close_idle(c, entry.used);
    while c.len() >= budget && c.pop_lru().is_some() {}
    if budget > 0 {
        c.put(slot, entry);
    }
}

/// Closes the entry kept for `hash` in `zone`, if any.
pub fn forget(zone: usize, hash: &KeyHash) {
    KEPT.with_borrow_mut(|c| {
        c.pop(&(zone, *hash));
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::format::EntryMeta;
    use crate::disk::FileKind;

    fn kept(gen: u64, size: u64) -> Kept {
        let meta = FileMeta {
            size,
            mtime: 0,
            kind: FileKind::Regular,
            id: (0, gen),
            exec: false,
            changed: (0, 0),
        };
        let header = EntryHeader {
            meta: EntryMeta::default(),
            body_offset: 0,
            body_len: 0,
            body_crc: None,
        };
        Kept::new(
            gen,
            Arc::new(File::open("/dev/null").unwrap()),
            meta,
            Arc::new(header),
            Rc::from("/dev/null"),
        )
    }

    #[test]
    fn kept_entries_stay_within_a_share_of_the_descriptor_limit() {
        // A soft limit of 1,024 and two workers: 64 each; a large limit
        // still stops at MAX_ENTRIES; no room at all keeps nothing.
        assert_eq!(budget(1024, 2), 64);
        assert_eq!(budget(1 << 20, 2), MAX_ENTRIES);
        assert_eq!(budget(7, 1), 0);
        let mut c = LruCache::new(NonZeroUsize::new(MAX_ENTRIES).unwrap());
        for i in 0..100u64 {
            put_within(&mut c, (9, KeyHash::of(&i.to_be_bytes())), kept(i, 1), 64);
        }
        assert_eq!(c.len(), 64);
        assert!(
            c.contains(&(9, KeyHash::of(&99u64.to_be_bytes()))),
            "newest kept"
        );
        put_within(&mut c, (9, KeyHash::of(b"x")), kept(1, 1), 0);
        assert_eq!(c.len(), 0);
    }

    #[test]
    fn answers_only_for_its_generation() {
        let h = KeyHash::of(b"k");
        put(1, &h, kept(7, 10));
        let now = Instant::now();
        assert!(get(1, &h, 7, now).is_some());
        assert!(get(2, &h, 7, now).is_none(), "another zone");
        // a refill (new generation) closes it
        assert!(get(1, &h, 8, now).is_none());
        assert!(get(1, &h, 7, now).is_none());
    }

    #[test]
    fn large_idle_and_forgotten_entries_are_not_kept() {
        let (a, b, c) = (KeyHash::of(b"a"), KeyHash::of(b"b"), KeyHash::of(b"c"));
        put(3, &a, kept(1, MAX_SIZE + 1));
        assert!(get(3, &a, 1, Instant::now()).is_none());
        put(3, &b, kept(2, 1));
        forget(3, &b);
        assert!(get(3, &b, 2, Instant::now()).is_none());
        put(3, &c, kept(3, 1));
        assert!(get(3, &c, 3, Instant::now() + INACTIVE).is_none(), "idle");
    }

    #[test]
    fn a_busy_entry_is_opened_again_after_recheck() {
        let h = KeyHash::of(b"busy");
        put(4, &h, kept(5, 1));
        // Hit every few seconds: never idle, yet given up at RECHECK.
        let start = Instant::now();
        let mut t = start;
        while t < start + RECHECK - Duration::from_secs(5) {
            assert!(get(4, &h, 5, t).is_some());
            t += Duration::from_secs(5);
        }
        assert!(get(4, &h, 5, start + RECHECK).is_none());
    }
}
