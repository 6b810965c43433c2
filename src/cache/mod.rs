//! The proxy cache store (`proxy_cache_path`): entries on disk in NGINX's
//! layout, an in-memory index of keys shared by all workers, a writer that
//! makes an entry visible only once it is complete, and the loader and
//! manager that rebuild and trim a zone in the background.
//!
//! Split by question, as Pingora's cache is:
//! - [`key`]: key → MD5 → `PATH/c/29/b7f5…029c` (NGINX's `levels`);
//! - [`format`](mod@format): the entry file (header, then the body at a known offset);
//! - [`index`]: the keys zone (sizes, validity, LRU, uses, fill lock);
//! - this module: [`CacheZone`] (purge, the fill lock) and [`CacheSet`]
//!   (the zones of a configuration generation); `lookup.rs`:
//!   [`CacheZone::lookup`]; `writer.rs`: [`CacheZone::begin`] and
//!   [`CacheWriter`];
//! - [`loader`] and [`manager`]: the background threads; `health.rs`:
//!   a zone whose directory disappears or turns read-only goes out of
//!   service ([`CacheZone::in_service`]) and comes back;
//! - [`policy`]: whether and how long a response may be cached, and which
//!   stored variant answers a request;
//! - [`verify`]: the body's CRC-32C, checked on open (up to 1 MiB) or
//!   while the body is sent, so a body damaged on disk is never a HIT.
//!
//! **No event loop waits on a disk.** Every file-system call made on behalf
//! of a request — open and header read of an entry, the temp file's
//! creation, writes, `mkdir` of level directories, `rename` into place,
//! `unlink` of a bad or purged entry — goes through the disk layer's [`Io`]
//! route of the location's `aio` (so `aio threads=pool_$disk` puts a zone's I/O on that
//! disk's pool). The loader and manager run on dedicated threads (NGINX's
//! cache loader and manager processes) and call the disk layer inline.
//!
//! **Crash safety.** A body is written to a temp file (in the entry's level
//! directory with `use_temp_path=off`, in `proxy_temp_path` otherwise),
//! its header is completed, and only then is it renamed over the entry's
//! name and inserted into the index. A process killed mid-fill leaves a
//! temp file the next loader removes, never a partial entry under an
//! entry's name. porter does not `fsync` (NGINX does not either): after a
//! power loss an entry may be short or zeroed, and the reader's checks
//! (magic, checksum, size) turn it into a miss and remove it.
//!
//! How the proxy handler drives it (the store knows nothing of upstreams):
//!
//! ```text
//! zone  = env.caches.get(&rendered_proxy_cache)             // None → log, 500
//! log   = ctx.log(env.log)                                // RequestLog
//! match zone.lookup(&io, &key, &log).await? {
//!   Hit(e) if policy::variant_matches(&e.header.meta.vary, req)
//!          && (e.fresh(now) || use_stale && e.updating) → send e.file from
//!          e.header.body_offset, e.header.body_len bytes (sendfile)
//!   Hit(e) (Vary differs) → look up policy::variant_key(&key, values) instead
//!   Miss { uses } if uses < proxy_cache_min_uses → proxy, don't store
//!   _ → match zone.claim_fill(&key) {                        // proxy_cache_lock
//!         Fill::Wait(w) → w.wait(lock_timeout).await, then look up again
//!         Fill::Owner(guard) → fetch; policy::validity(status, &headers,
//!           &loc.s.proxy_cache_valid, now) → Until(t):
//!             w = zone.begin(&io, loc.s.proxy_temp_path.as_ref(), meta, log)
//!             per chunk: w.write(chunk)  (error → w.abort(), keep proxying)
//!             end: w.finish(); drop(guard)   // waiters wake, entry visible
//!       }
//! }
//! ```

pub mod format;
mod health;
pub mod index;
pub mod key;
pub mod loader;
mod lookup;
pub mod manager;
pub mod open_entries;
pub mod policy;
pub mod verify;
mod writer;

use std::collections::{HashMap, VecDeque};
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::disk::{Io, OpenFile};
use crate::log::{ErrorLog, Level};
use crate::util::thread_user::ThreadUser;

pub(crate) use self::format::HeaderError;
pub use self::format::{EntryHeader, EntryMeta, FormatError};
pub use self::index::{Evicted, Fill, FillGuard, FillWaiter, Index};
pub use self::key::{KeyHash, Levels};
pub(crate) use self::lookup::read_header;
pub use self::writer::CacheWriter;
pub(crate) use self::writer::{is_own_temp, temp_run};

/// `proxy_cache_path` as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneSpec {
    /// `keys_zone=NAME:…`.
    pub name: String,
    /// The cache directory.
    pub path: PathBuf,
    /// `levels=`.
    pub levels: Levels,
    /// `keys_zone=…:SIZE` in bytes.
    pub keys_size: u64,
    /// `inactive=` (default 10 minutes).
    pub inactive: Duration,
    /// `max_size=` (none: unlimited).
    pub max_size: Option<u64>,
    /// `min_free=` (none: unlimited).
    pub min_free: Option<u64>,
    /// `use_temp_path=` (default on: temp files in `proxy_temp_path`).
    pub use_temp_path: bool,
    /// `manager_files=` (default 100).
    pub manager_files: usize,
    /// `manager_sleep=` (default 50 ms).
    pub manager_sleep: Duration,
    /// `manager_threshold=` (default 200 ms).
    pub manager_threshold: Duration,
    /// `loader_files=` (default 100).
    pub loader_files: usize,
    /// `loader_sleep=` (default 50 ms).
    pub loader_sleep: Duration,
    /// `loader_threshold=` (default 200 ms).
    pub loader_threshold: Duration,
}

impl ZoneSpec {
    /// A zone with NGINX's defaults for everything but name, path and size.
    pub fn new(name: &str, path: &Path, keys_size: u64) -> ZoneSpec {
        ZoneSpec {
            name: name.to_string(),
            path: path.to_path_buf(),
            levels: Levels::default(),
            keys_size,
            inactive: Duration::from_secs(600),
            max_size: None,
            min_free: None,
            use_temp_path: true,
            manager_files: 100,
            manager_sleep: Duration::from_millis(50),
            manager_threshold: Duration::from_millis(200),
            loader_files: 100,
            loader_sleep: Duration::from_millis(50),
            loader_threshold: Duration::from_millis(200),
        }
    }

    /// What cannot change without a new index: the rest is taken over by
    /// a reload.
    fn same_store(&self, other: &ZoneSpec) -> bool {
        self.name == other.name
            && self.path == other.path
            && self.levels == other.levels
            && self.keys_size == other.keys_size
    }
}

/// `proxy_temp_path PATH [L1 [L2 [L3]]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TempPath {
    /// The directory.
    pub path: PathBuf,
    /// Its levels (by the temp file's number, as NGINX names temp files).
    pub levels: Levels,
}

impl TempPath {
    /// NGINX's default, `proxy_temp` under the prefix.
    pub fn default_for(prefix: &Path) -> TempPath {
        TempPath {
            path: prefix.join("proxy_temp"),
            levels: Levels::default(),
        }
    }
}

/// What a lookup found.
#[derive(Debug)]
pub enum Lookup {
    /// A complete entry whose header passed every check. It may be stale:
    /// see [`Entry::fresh`].
    Hit(Box<Entry>),
    /// No usable entry. `uses` is how many lookups of the key have missed
    /// so far, this one included (`proxy_cache_min_uses`).
    Miss {
        /// Lookups counted while the key was not cached.
        uses: u32,
    },
}

/// An open, checked entry: send `header.body_len` bytes of `file` from
/// `header.body_offset` (with `Disk::sendfile` or [`OpenFile::read_at`]).
#[derive(Debug)]
pub struct Entry {
    /// The open file (the descriptor stays valid if the entry is replaced
    /// or removed meanwhile).
    pub file: OpenFile,
    /// Its decoded header, shared with the worker's kept entry
    /// (`open_entries`): a hit copies no header line.
    pub header: Arc<EntryHeader>,
    /// Its path, as the lines that name it show it (shared likewise).
    pub path: Rc<str>,
    /// A fill of this key is under way (`proxy_cache_use_stale updating`).
    pub updating: bool,
}

impl Entry {
    /// Fresh at unix time `now`: up to and including the second
    /// `valid_until` names, as NGINX's `c->valid_sec < now` test for stale.
    pub fn fresh(&self, now: i64) -> bool {
        now <= self.header.meta.valid_until
    }

    /// Within its `stale-while-revalidate` window at `now`: served stale
    /// while it is refreshed, as with `proxy_cache_use_stale updating`
    /// (NGINX's `c->stale_updating`).
    pub fn stale_updating(&self, now: i64) -> bool {
        let m = &self.header.meta;
        now <= m.valid_until.saturating_add(m.updating_secs)
    }

    /// Within its `stale-if-error` window at `now`: served stale when the
    /// upstream fails (not for an error status: NGINX 1.19.3+'s
    /// `c->stale_error`).
    pub fn stale_error(&self, now: i64) -> bool {
        let m = &self.header.meta;
        now <= m.valid_until.saturating_add(m.error_secs)
    }
}

/// How the cache answered a request (`$upstream_cache_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheStatus {
    /// Not in the cache (or not yet used `proxy_cache_min_uses` times).
    Miss,
    /// `proxy_cache_bypass` sent it upstream.
    Bypass,
    /// The entry had expired: fetched anew.
    Expired,
    /// An expired entry served (`proxy_cache_use_stale`, or during a
    /// background update).
    Stale,
    /// An expired entry served while another request refreshes it
    /// (`proxy_cache_use_stale updating`).
    Updating,
    /// An expired entry the upstream confirmed with 304
    /// (`proxy_cache_revalidate`).
    Revalidated,
    /// A fresh entry.
    Hit,
}

impl CacheStatus {
    /// Every status, in the order [`CacheZone::counts`] gives them.
    pub const ALL: [CacheStatus; 7] = [
        CacheStatus::Hit,
        CacheStatus::Miss,
        CacheStatus::Stale,
        CacheStatus::Expired,
        CacheStatus::Updating,
        CacheStatus::Revalidated,
        CacheStatus::Bypass,
    ];

    fn slot(self) -> usize {
        match self {
            CacheStatus::Hit => 0,
            CacheStatus::Miss => 1,
            CacheStatus::Stale => 2,
            CacheStatus::Expired => 3,
            CacheStatus::Updating => 4,
            CacheStatus::Revalidated => 5,
            CacheStatus::Bypass => 6,
        }
    }

    /// NGINX's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CacheStatus::Miss => "MISS",
            CacheStatus::Bypass => "BYPASS",
            CacheStatus::Expired => "EXPIRED",
            CacheStatus::Stale => "STALE",
            CacheStatus::Updating => "UPDATING",
            CacheStatus::Revalidated => "REVALIDATED",
            CacheStatus::Hit => "HIT",
        }
    }
}

/// Space an entry of `len` bytes takes on disk, as NGINX counts it: whole
/// 4 KiB blocks.
pub fn disk_size(len: u64) -> u64 {
    len.div_ceil(4096) * 4096
}

/// Files the manager thread must remove (writers dropped mid-fill,
/// evicted entries), with what wakes it. Shared with the manager by its
/// own `Arc`, so the manager can wait on it without keeping the zone
/// alive.
#[derive(Default)]
pub(crate) struct Chores {
    pub(crate) files: Mutex<VecDeque<PathBuf>>,
    pub(crate) wake: Condvar,
}

/// One `keys_zone`: its directory, index, and background threads.
pub struct CacheZone {
    spec: Mutex<ZoneSpec>,
    name: String,
    path: PathBuf,
    levels: Levels,
    index: Arc<Index>,
    loaded: AtomicBool,
    chores: Arc<Chores>,
    log: Mutex<ErrorLog>,
    health: health::Health,
    /// Requests answered, by their `$upstream_cache_status` (the status
    /// pages; relaxed adds, kept across reloads with the zone).
    answered: [AtomicU64; 7],
}

impl std::fmt::Debug for CacheZone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheZone")
            .field("name", &self.name)
            .field("path", &self.path)
            .finish()
    }
}

fn enoent(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound
}

impl CacheZone {
    /// A zone over `spec.path` (created by [`CacheSet::build`]); no
    /// threads run until [`CacheZone::start`]. Until the loader finishes,
    /// lookups of unknown keys look on disk.
    pub fn new(spec: ZoneSpec, log: &ErrorLog) -> Arc<CacheZone> {
        Arc::new(CacheZone {
            name: spec.name.clone(),
            path: spec.path.clone(),
            levels: spec.levels.clone(),
            index: Arc::new(Index::for_zone_size(spec.keys_size)),
            spec: Mutex::new(spec),
            loaded: AtomicBool::new(false),
            chores: Arc::new(Chores::default()),
            log: Mutex::new(log.clone()),
            health: health::Health::default(),
            answered: Default::default(),
        })
    }

    /// Starts the loader and manager threads (`porter-cl-NAME`,
    /// `porter-cm-NAME`), running as `user` when given.
    pub fn start(self: &Arc<Self>, user: Option<ThreadUser>) -> io::Result<()> {
        loader::spawn(self, user.clone())?;
        manager::spawn(self, user)
    }

    /// The zone's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its configuration (the limits may change on reload).
    pub fn spec(&self) -> ZoneSpec {
        self.spec.lock().unwrap().clone()
    }

    /// Counts a request the zone answered with `status`.
    pub fn count(&self, status: CacheStatus) {
        self.answered[status.slot()].fetch_add(1, Ordering::Relaxed);
    }

    /// Requests answered so far, by status, in [`CacheStatus::ALL`]'s order.
    pub fn counts(&self) -> [(CacheStatus, u64); 7] {
        CacheStatus::ALL.map(|st| (st, self.answered[st.slot()].load(Ordering::Relaxed)))
    }

    /// Its index.
    pub fn index(&self) -> &Arc<Index> {
        &self.index
    }

    /// True once the loader has walked the whole directory.
    pub fn loaded(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }

    pub(crate) fn set_loaded(&self) {
        self.loaded.store(true, Ordering::Release);
    }

    pub(crate) fn error_log(&self) -> ErrorLog {
        self.log.lock().unwrap().clone()
    }

    /// Logs a failed disk call `op` on `path` of the zone's loader or
    /// manager: one `crit` line in NGINX's words.
    pub(crate) fn log_failure(&self, e: &io::Error, op: &str, path: &Path) {
        let f = crate::disk::Failure::of(e, op, &path.to_string_lossy());
        self.error_log()
            .log(Level::Crit, format_args!("{}", f.line));
    }

    /// The path of the entry for `hash`.
    pub fn entry_path(&self, hash: &KeyHash) -> PathBuf {
        self.levels.path_of(&self.path, hash)
    }

    /// Hands files to the manager thread for removal.
    fn discard(&self, evicted: Vec<Evicted>) {
        let files: Vec<PathBuf> = evicted
            .into_iter()
            .filter(|e| e.exists)
            .map(|e| self.entry_path(&e.hash))
            .collect();
        if !files.is_empty() {
            self.chores.files.lock().unwrap().extend(files);
            self.chores.wake.notify_one();
        }
    }

    fn discard_path(&self, path: PathBuf) {
        self.chores.files.lock().unwrap().push_back(path);
        self.chores.wake.notify_one();
    }

    /// Claims the fill of `key` (`proxy_cache_lock`; also marks the key
    /// `updating` for `proxy_cache_use_stale updating`).
    pub fn claim_fill(&self, key: &str) -> Fill {
        let (fill, ev) = self
            .index
            .claim_fill(KeyHash::of(key.as_bytes()), Instant::now());
        self.discard(ev);
        fill
    }

    /// The error status remembered for `key` while it is valid (see
    /// [`CacheZone::remember_error`]).
    pub fn cached_error(&self, key: &str) -> Option<u16> {
        let now = crate::util::time::now().0;
        self.index.error(&KeyHash::of(key.as_bytes()), now)
    }

    /// Remembers that `key` answers with the error `status` until
    /// `valid_until`: an upstream error intercepted by `error_page` that
    /// was cacheable, kept in the keys zone only (no file), as NGINX.
    pub fn remember_error(&self, key: &str, status: u16, valid_until: i64) {
        let hash = KeyHash::of(key.as_bytes());
        let ev = self
            .index
            .set_error(hash, status, valid_until, Instant::now());
        self.discard(ev);
    }

    /// Removes the entry for `key` from the index and the disk. `true` if
    /// a file was removed.
    pub async fn purge(&self, io: &Io, key: &str) -> io::Result<bool> {
        let hash = KeyHash::of(key.as_bytes());
        self.index.remove(&hash);
        match io.unlink(&self.entry_path(&hash)).await {
            Ok(()) => Ok(true),
            Err(e) if enoent(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// The zones of one configuration generation, by name. A reload keeps the
/// live zone (index, threads) of every `proxy_cache_path` whose name,
/// path, levels and size are unchanged, taking over its new limits; other
/// zones start afresh (their index rebuilt by a loader), and zones no
/// longer configured stop with the last generation using them.
#[derive(Debug, Default)]
pub struct CacheSet {
    zones: HashMap<String, Arc<CacheZone>>,
}

impl CacheSet {
    /// Creates (or reuses from `old`) a zone for every spec: the cache
    /// directory is created (owned by `user`, as NGINX's master
    /// does) and the zone's loader and manager start.
    pub fn build(
        specs: &[ZoneSpec],
        old: Option<&CacheSet>,
        user: Option<ThreadUser>,
        log: &ErrorLog,
    ) -> Result<CacheSet, String> {
        let mut zones = HashMap::new();
        for spec in specs {
            let reuse = old
                .and_then(|o| o.zones.get(&spec.name))
                .filter(|z| z.spec().same_store(spec));
            let zone = match reuse {
                Some(z) => {
                    *z.spec.lock().unwrap() = spec.clone();
                    *z.log.lock().unwrap() = log.clone();
                    z.clone()
                }
                None => {
                    crate::disk::make_dir_owned(&spec.path, user.as_ref().map(|u| u.ids)).map_err(
                        |e| {
                            format!(
                                "mkdir() \"{}\" failed {}",
                                spec.path.display(),
                                crate::util::errno_text(&e)
                            )
                        },
                    )?;
                    let z = CacheZone::new(spec.clone(), log);
                    z.start(user.clone())
                        .map_err(|e| format!("cannot start cache threads: {e}"))?;
                    z
                }
            };
            zones.insert(spec.name.clone(), zone);
        }
        Ok(CacheSet { zones })
    }

    /// The zone `proxy_cache NAME` (or a rendered `$var`) names; `None`:
    /// the caller logs and answers 500.
    pub fn get(&self, name: &str) -> Option<&Arc<CacheZone>> {
        self.zones.get(name)
    }

    /// Every zone, sorted by name.
    pub fn sorted(&self) -> Vec<&Arc<CacheZone>> {
        let mut v: Vec<_> = self.zones.values().collect();
        v.sort_by(|a, b| a.name().cmp(b.name()));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parsed configuration: a zone with every parameter, and
    /// `proxy_cache_valid` / `proxy_temp_path` merged as NGINX merges them.
    #[test]
    fn configuration_builds_zones_and_location_settings() {
        let dir = std::env::temp_dir().join(format!("porter-cache-conf-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("logs")).unwrap();
        let conf = dir.join("t.conf");
        std::fs::write(
            &conf,
            "events {}\nhttp {\n\
             proxy_cache_path cache levels=1:2 keys_zone=one:10m inactive=1h max_size=1g \
             min_free=10m use_temp_path=off loader_files=7 loader_sleep=5ms \
             loader_threshold=1s manager_files=9 manager_sleep=1s manager_threshold=2s;\n\
             proxy_cache_path /abs keys_zone=two:1m;\n\
             proxy_cache_valid 10m;\n\
             server { listen 127.0.0.1:1;\n\
               location /a { proxy_cache_valid 404 1m; proxy_cache_valid any 5s; proxy_temp_path t 1 2; }\n\
               location /b { }\n\
             }\n}\n",
        )
        .unwrap();
        let opts = crate::config::LoadOptions {
            prefix: dir.clone(),
            conf_file: Some(conf),
            ..Default::default()
        };
        let cfg = crate::config::load(&opts).unwrap().config;
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(cfg.cache_zones.len(), 2);
        let one = &cfg.cache_zones[0];
        let mut want = ZoneSpec::new("one", &dir.join("cache"), 10 << 20);
        want.levels = Levels(vec![1, 2]);
        want.inactive = Duration::from_secs(3600);
        want.max_size = Some(1 << 30);
        want.min_free = Some(10 << 20);
        want.use_temp_path = false;
        want.loader_files = 7;
        want.loader_sleep = Duration::from_millis(5);
        want.loader_threshold = Duration::from_secs(1);
        want.manager_files = 9;
        want.manager_sleep = Duration::from_secs(1);
        want.manager_threshold = Duration::from_secs(2);
        assert_eq!(one, &want);
        assert_eq!(
            cfg.cache_zones[1],
            ZoneSpec::new("two", Path::new("/abs"), 1 << 20)
        );
        let srv = &cfg.servers[0];
        let rule = |codes: &[u16], secs| policy::CacheValid {
            codes: codes.to_vec(),
            time: Duration::from_secs(secs),
        };
        let a = &srv.find_location("/a").s;
        assert_eq!(*a.proxy_cache.valid, vec![rule(&[404], 60), rule(&[], 5)]);
        assert_eq!(
            a.proxy_cache.temp_path,
            Some(TempPath {
                path: dir.join("t"),
                levels: Levels(vec![1, 2])
            })
        );
        let b = &srv.find_location("/b").s;
        assert_eq!(
            *b.proxy_cache.valid,
            vec![rule(&[200], 600), rule(&[301], 600), rule(&[302], 600)],
            "inherited whole from http, NGINX's default codes"
        );
        assert_eq!(b.proxy_cache.temp_path, None);
    }

    #[test]
    fn disk_size_is_whole_blocks() {
        assert_eq!(disk_size(0), 0);
        assert_eq!(disk_size(1), 4096);
        assert_eq!(disk_size(4096), 4096);
        assert_eq!(disk_size(4097), 8192);
    }
}
