//! `open_file_cache`: NGINX's cache of open descriptors, their `fstat`
//! results and open errors, per worker, so a hot file costs no
//! open/fstat/close.
//!
//! An entry is used as is for `open_file_cache_valid`; after that the next
//! request revalidates it with a `stat` of the path (through the fast path
//! or the pool, like any disk call) and keeps the descriptor when the
//! device, inode, size and mtime are unchanged. Entries unused for
//! `inactive` are dropped; past `max` the least recently used one goes
//! (the `lru` crate keeps that order). A descriptor is kept only from the
//! `open_file_cache_min_uses`-th use within `inactive`; errors only with
//! `open_file_cache_errors on`.

use std::borrow::Borrow;
use std::ffi::OsStr;
use std::fs::File;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lru::LruCache;

use super::FileMeta;

/// `open_file_cache max=N inactive=T` with its companion directives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenFileCacheSettings {
    /// `max=N`.
    pub max: usize,
    /// `inactive=T` (NGINX default 60 s).
    pub inactive: Duration,
    /// `open_file_cache_valid` (default 60 s).
    pub valid: Duration,
    /// `open_file_cache_min_uses` (default 1).
    pub min_uses: u64,
    /// `open_file_cache_errors` (default off).
    pub errors: bool,
}

/// What an entry remembers: the open file, or the errno of a failed open.
pub type Cached = Result<(Arc<File>, FileMeta), i32>;

/// Cache key: the path and how it was resolved. Compared and hashed as
/// the path's bytes: `Path`'s own `Hash` walks it component by component,
/// a tenth of a hit's lookup (issue 31); the paths are normalised
/// already, so no two spellings of one file meet here in practice (and if
/// they did, they would only be two entries).
#[derive(Debug, Clone)]
pub struct Key {
    /// The file-system path.
    pub path: PathBuf,
    /// How it was resolved (`disable_symlinks`).
    pub rules: super::PathRules,
}

// A stored key compares and hashes through [`KeyParts`], as a borrowed
// lookup does: the map finds an entry only if the two agree.
impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for Key {}

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (self as &dyn KeyParts).hash(h);
    }
}

/// A key's two parts as a lookup sees them: a stored [`Key`], or a
/// request's path and rules borrowed (`(&Path, &PathRules)`), so a lookup
/// builds no `PathBuf` (an allocation and a copy a request, issue 31).
/// Both hash and compare as [`Key`] does.
pub trait KeyParts {
    /// The path's bytes and the rules.
    fn parts(&self) -> (&OsStr, &super::PathRules);
}

impl KeyParts for Key {
    fn parts(&self) -> (&OsStr, &super::PathRules) {
        (self.path.as_os_str(), &self.rules)
    }
}

impl KeyParts for (&Path, &super::PathRules) {
    fn parts(&self) -> (&OsStr, &super::PathRules) {
        (self.0.as_os_str(), self.1)
    }
}

impl<'a> Borrow<dyn KeyParts + 'a> for Key {
    fn borrow(&self) -> &(dyn KeyParts + 'a) {
        self
    }
}

impl PartialEq for dyn KeyParts + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn KeyParts + '_ {}

impl std::hash::Hash for dyn KeyParts + '_ {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        let (path, rules) = self.parts();
        path.hash(h);
        rules.hash(h);
    }
}

#[derive(Debug)]
struct Entry {
    /// `None` until `min_uses` is reached.
    value: Option<Cached>,
    checked: Instant,
    last_used: Instant,
    uses: u64,
}

/// The answer of a lookup.
#[derive(Debug)]
pub enum Lookup {
    /// Usable without any system call.
    Fresh(Cached),
    /// Known, but older than `valid`: revalidate before use.
    Stale(Cached),
    /// Not cached (or not yet used `min_uses` times): open it.
    Miss,
}

/// One worker's cache.
#[derive(Debug)]
pub struct OpenFileCache {
    map: LruCache<Key, Entry>,
    last_sweep: Instant,
}

impl Default for OpenFileCache {
    fn default() -> Self {
        OpenFileCache {
            map: LruCache::unbounded(),
            last_sweep: Instant::now(),
        }
    }
}

impl OpenFileCache {
    fn fit(&mut self, conf: &OpenFileCacheSettings, now: Instant) {
        // The largest `max` of any location wins: one cache per worker.
        let cap = NonZeroUsize::new(conf.max.max(1)).expect("nonzero");
        if self.map.cap() == NonZeroUsize::MAX || self.map.cap() < cap {
            self.map.resize(cap);
        }
        // Drop entries idle longer than `inactive`, from the cold end, at
        // most once a second.
        if now.duration_since(self.last_sweep) >= Duration::from_secs(1) {
            self.last_sweep = now;
            while let Some((_, e)) = self.map.peek_lru() {
                if now.duration_since(e.last_used) <= conf.inactive {
                    break;
                }
                self.map.pop_lru();
            }
        }
    }

    /// Looks `key` up and counts the use.
    pub fn lookup(
        &mut self,
        key: &dyn KeyParts,
        conf: &OpenFileCacheSettings,
        now: Instant,
    ) -> Lookup {
        self.fit(conf, now);
        let Some(e) = self.map.get_mut(key) else {
            return Lookup::Miss;
        };
        if now.duration_since(e.last_used) > conf.inactive {
            self.map.pop(key);
            return Lookup::Miss;
        }
        e.last_used = now;
        e.uses += 1;
        let Some(v) = e.value.clone() else {
            return Lookup::Miss;
        };
        if now.duration_since(e.checked) < conf.valid {
            Lookup::Fresh(v)
        } else {
            Lookup::Stale(v)
        }
    }

    /// The stale entry for `key` was found unchanged.
    pub fn revalidated(&mut self, key: &dyn KeyParts, now: Instant) {
        if let Some(e) = self.map.get_mut(key) {
            e.checked = now;
        }
    }

    /// Records the result of an open.
    pub fn insert(&mut self, key: Key, value: Cached, conf: &OpenFileCacheSettings, now: Instant) {
        self.fit(conf, now);
        if value.is_err() && !conf.errors {
            self.map.pop(&key);
            return;
        }
        let uses = self.map.peek(&key).map_or(1, |e| e.uses.max(1));
        let keep = uses >= conf.min_uses;
        self.map.put(
            key,
            Entry {
                value: keep.then_some(value),
                checked: now,
                last_used: now,
                uses,
            },
        );
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::FileKind;

    fn conf(max: usize) -> OpenFileCacheSettings {
        OpenFileCacheSettings {
            max,
            inactive: Duration::from_secs(20),
            valid: Duration::from_secs(5),
            min_uses: 1,
            errors: false,
        }
    }

    fn key(p: &str) -> Key {
        Key {
            path: p.into(),
            rules: Default::default(),
        }
    }

    fn file() -> Cached {
        let f = Arc::new(File::open("/proc/self/exe").unwrap());
        Ok((
            f,
            FileMeta {
                size: 1,
                mtime: 0,
                kind: FileKind::Regular,
                id: (1, 2),
                exec: false,
                changed: (0, 0),
            },
        ))
    }

    /// A request's borrowed path and rules find the entry an owned key
    /// stored, and other rules for the same path do not.
    #[test]
    fn borrowed_parts_find_the_owned_key() {
        let mut c = OpenFileCache::default();
        let t = Instant::now();
        c.insert(key("/srv/a"), file(), &conf(10), t);
        let rules = crate::disk::PathRules::default();
        let found = c.lookup(&(Path::new("/srv/a"), &rules), &conf(10), t);
        assert!(matches!(found, Lookup::Fresh(Ok(_))));
        let other = crate::disk::PathRules {
            no_symlinks: true,
            ..Default::default()
        };
        let missed = c.lookup(&(Path::new("/srv/a"), &other), &conf(10), t);
        assert!(matches!(missed, Lookup::Miss));
    }

    #[test]
    fn fresh_then_stale_then_inactive() {
        let mut c = OpenFileCache::default();
        let t0 = Instant::now();
        let k = key("/a");
        assert!(matches!(c.lookup(&k, &conf(10), t0), Lookup::Miss));
        c.insert(k.clone(), file(), &conf(10), t0);
        assert!(matches!(
            c.lookup(&k, &conf(10), t0 + Duration::from_secs(1)),
            Lookup::Fresh(Ok(_))
        ));
        assert!(matches!(
            c.lookup(&k, &conf(10), t0 + Duration::from_secs(7)),
            Lookup::Stale(Ok(_))
        ));
        c.revalidated(&k, t0 + Duration::from_secs(7));
        assert!(matches!(
            c.lookup(&k, &conf(10), t0 + Duration::from_secs(8)),
            Lookup::Fresh(Ok(_))
        ));
        assert!(matches!(
            c.lookup(&k, &conf(10), t0 + Duration::from_secs(60)),
            Lookup::Miss
        ));
    }

    #[test]
    fn max_evicts_least_recently_used() {
        let mut c = OpenFileCache::default();
        let t = Instant::now();
        for p in ["/a", "/b", "/c"] {
            c.insert(key(p), file(), &conf(2), t);
        }
        assert_eq!(c.len(), 2);
        assert!(matches!(c.lookup(&key("/a"), &conf(2), t), Lookup::Miss));
        assert!(matches!(
            c.lookup(&key("/c"), &conf(2), t),
            Lookup::Fresh(_)
        ));
    }

    #[test]
    fn errors_only_when_asked_and_min_uses() {
        let mut c = OpenFileCache::default();
        let t = Instant::now();
        c.insert(key("/x"), Err(libc::ENOENT), &conf(4), t);
        assert!(matches!(c.lookup(&key("/x"), &conf(4), t), Lookup::Miss));
        let errs = OpenFileCacheSettings {
            errors: true,
            ..conf(4)
        };
        c.insert(key("/x"), Err(libc::ENOENT), &errs, t);
        assert!(matches!(
            c.lookup(&key("/x"), &errs, t),
            Lookup::Fresh(Err(libc::ENOENT))
        ));
        let twice = OpenFileCacheSettings {
            min_uses: 2,
            ..conf(4)
        };
        c.insert(key("/y"), file(), &twice, t);
        // First use recorded, no descriptor kept yet.
        assert!(matches!(c.lookup(&key("/y"), &twice, t), Lookup::Miss));
        c.insert(key("/y"), file(), &twice, t);
        assert!(matches!(c.lookup(&key("/y"), &twice, t), Lookup::Fresh(_)));
    }
}
