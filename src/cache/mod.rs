//! The proxy cache store (`proxy_cache_path`): entries on disk in NGINX's
//! layout, an in-memory index of keys shared by all workers, a writer that
//! makes an entry visible only once it is complete, and the loader and
//! manager that rebuild and trim a zone in the background.
//!
//! Split by question, as Pingora's cache is:
//! - [`key`]: key → MD5 → `PATH/c/29/b7f5…029c` (NGINX's `levels`);
//! - [`format`](mod@format): the entry file (header, then the body at a known offset);
//! - [`index`]: the keys zone (sizes, validity, LRU, uses, fill lock);
//! - this module: [`CacheZone`] (lookup, [`CacheWriter`], purge) and
//!   [`CacheSet`] (the zones of a configuration generation);
//! - [`loader`] and [`manager`]: the background threads;
//! - [`policy`]: whether and how long a response may be cached, and which
//!   stored variant answers a request.
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
//! log   = CacheLog { log, conn: Some(id), ctx: ctx.log_context() }
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
pub mod index;
pub mod key;
pub mod loader;
pub mod manager;
pub mod open_entries;
pub mod policy;

use std::collections::{HashMap, VecDeque};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::disk::{Io, OpenFile, PathRules};
use crate::log::{ErrorLog, Level};
use crate::util::thread_user::ThreadUser;

pub use self::format::{EntryHeader, EntryMeta, FormatError};
pub use self::index::{Evicted, Fill, FillGuard, FillWaiter, Index};
pub use self::key::{KeyHash, Levels};

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

/// Where and how a cache operation logs: the error log and the request's
/// context (`*CONN` and NGINX's `, client: …` tail), so a bad entry or a
/// failed write is one line the user can tie to a request.
#[derive(Debug, Clone)]
pub struct CacheLog {
    /// The error log.
    pub log: ErrorLog,
    /// The connection number.
    pub conn: Option<u64>,
    /// The `, client: …, request: "…"` tail.
    pub ctx: String,
}

impl CacheLog {
    /// Lines without request context (background threads, tests).
    pub fn plain(log: &ErrorLog) -> CacheLog {
        CacheLog {
            log: log.clone(),
            conn: None,
            ctx: String::new(),
        }
    }

    fn line(&self, level: Level, msg: std::fmt::Arguments<'_>) {
        self.log.log_conn(level, self.conn, msg, &self.ctx);
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
    /// Its decoded header.
    pub header: EntryHeader,
    /// Its path.
    pub path: PathBuf,
    /// A fill of this key is under way (`proxy_cache_use_stale updating`).
    pub updating: bool,
}

impl Entry {
    /// Fresh at unix time `now`.
    pub fn fresh(&self, now: i64) -> bool {
        now < self.header.meta.valid_until
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
}

impl std::fmt::Debug for CacheZone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheZone")
            .field("name", &self.name)
            .field("path", &self.path)
            .finish()
    }
}

/// Temp file names: `.<hex>.<run>.<seq>`, unique per process run, so the
/// loader removes leftovers of an earlier run and never a file a writer of
/// this run is filling.
static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

fn run_id() -> u64 {
    static RUN: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *RUN.get_or_init(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        (u64::from(std::process::id()) << 32) ^ t.as_nanos() as u64
    })
}

/// The run a temp file name belongs to, if it is one of ours.
pub(crate) fn temp_run(name: &str) -> Option<u64> {
    let rest = name.strip_prefix('.')?;
    let mut parts = rest.split('.');
    let (_hex, run, _seq) = (parts.next()?, parts.next()?, parts.next()?);
    u64::from_str_radix(run, 16).ok()
}

pub(crate) fn is_own_temp(name: &str) -> bool {
    temp_run(name) == Some(run_id())
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

    /// Looks `key` up: the index first, then (for a key it knows has a
    /// file, or any key while the loader runs) the file, whose header is
    /// read and checked. A file that fails a check is removed, logged
    /// once, and the lookup is a miss. Errors are those of the disk layer
    /// itself (pool overflow, EIO): the caller decides (NGINX logs and
    /// goes to the upstream).
    pub async fn lookup(&self, io: &Io, key: &str, log: &CacheLog) -> io::Result<Lookup> {
        let hash = KeyHash::of(key.as_bytes());
        let mut ev = Vec::new();
        let node = self.index.touch(hash, Instant::now(), &mut ev);
        self.discard(ev);
        if !node.exists && self.loaded() {
            return Ok(Lookup::Miss { uses: node.uses });
        }
        let path = self.entry_path(&hash);
        let zone = Arc::as_ptr(&self.index) as usize;
        if node.exists {
            if let Some(k) = open_entries::get(zone, &hash, node.gen, Instant::now()) {
                let file = OpenFile::new(k.file, k.meta, io.clone());
                return Ok(Lookup::Hit(Box::new(Entry {
                    file,
                    header: k.header,
                    path,
                    updating: node.updating(),
                })));
            }
        }
        // Entries are replaced by rename: never from `open_file_cache`;
        // and the document root's symlink policy does not apply here.
        let any = PathRules::default();
        let file = match io.open(&path, &any).await {
            Ok(f) => f,
            Err(e) if enoent(&e) => {
                if node.exists {
                    // Removed behind our back (an old manager, by hand).
                    self.index.lost(&hash);
                }
                return Ok(Lookup::Miss {
                    uses: node.uses.max(1),
                });
            }
            Err(e) => return Err(e),
        };
        match read_header(&file, Some(key)).await {
            Ok(header) => {
                let valid = header.meta.valid_until;
                if node.exists {
                    self.index.set_valid(&hash, valid);
                    let kept = open_entries::Kept::new(
                        node.gen,
                        file.file.clone(),
                        file.meta,
                        header.clone(),
                    );
                    open_entries::put(zone, &hash, kept);
                } else {
                    let mut ev = Vec::new();
                    self.index.stored(
                        hash,
                        disk_size(file.meta.size),
                        valid,
                        Instant::now(),
                        &mut ev,
                    );
                    self.discard(ev);
                }
                Ok(Lookup::Hit(Box::new(Entry {
                    file,
                    header,
                    path,
                    updating: self.index.updating(&hash),
                })))
            }
            Err(HeaderError::Io(e)) => Err(e),
            Err(HeaderError::Format(f)) => {
                open_entries::forget(zone, &hash);
                log.line(
                    Level::Crit,
                    format_args!("cache file \"{}\" {f}", path.display()),
                );
                // Remove the file read, not one a writer renamed into
                // place meanwhile (whose node is then right as it is).
                let same = match io.stat(&path, &any).await {
                    Ok(now) => now.id == file.meta.id,
                    Err(e) if enoent(&e) => false,
                    Err(e) => return Err(e),
                };
                if same {
                    self.index.lost(&hash);
                    match io.unlink(&path).await {
                        Ok(()) => {}
                        Err(e) if enoent(&e) => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok(Lookup::Miss {
                    uses: node.uses.max(1),
                })
            }
        }
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

    /// Starts storing a response under `meta.key`: creates the temp file
    /// (in the entry's level directory with `use_temp_path=off` or when
    /// `temp` is `None`, else under `temp`) and writes the header. Write
    /// the body with [`CacheWriter::write`], then [`CacheWriter::finish`]
    /// or [`CacheWriter::abort`].
    pub async fn begin(
        self: &Arc<Self>,
        io: &Io,
        temp: Option<&TempPath>,
        meta: EntryMeta,
        log: CacheLog,
    ) -> io::Result<CacheWriter> {
        let hash = KeyHash::of(meta.key.as_bytes());
        let hex = hash.hex();
        let seq = TEMP_SEQ.fetch_add(1, Ordering::Relaxed);
        let use_temp = self.spec.lock().unwrap().use_temp_path;
        let temp_path = match temp.filter(|_| use_temp) {
            Some(t) => {
                let name = format!("{seq:010}");
                t.levels
                    .dir_of(&t.path, &name)
                    .join(format!(".{hex}.{:x}.{seq}", run_id()))
            }
            None => self
                .levels
                .dir_of(&self.path, &hex)
                .join(format!(".{hex}.{:x}.{seq}", run_id())),
        };
        let header = format::encode(&meta, 0);
        let mut w = CacheWriter {
            zone: self.clone(),
            hash,
            io: io.clone(),
            temp: temp_path,
            file: None,
            header,
            valid_until: meta.valid_until,
            body_len: 0,
            log,
            done: false,
            failed: false,
        };
        let file = match io.create(&w.temp).await {
            Err(e) if enoent(&e) => {
                let dir = w.temp.parent().unwrap_or(Path::new("/")).to_path_buf();
                match io.mkdir_all(&dir).await {
                    Ok(()) => io.create(&w.temp).await,
                    Err(e) => Err(w.fail("mkdir", &dir, e)),
                }
            }
            r => r,
        };
        let file = match file {
            Ok(f) => f,
            Err(e) => {
                w.done = true;
                if w.failed {
                    return Err(e);
                }
                let p = w.temp.clone();
                return Err(w.fail("open", &p, e));
            }
        };
        w.file = Some(file);
        let header: Arc<[u8]> = Arc::from(&w.header[..]);
        if let Err(e) = w.write_raw(header, 0).await {
            w.remove_temp().await;
            w.done = true;
            return Err(e);
        }
        Ok(w)
    }
}

/// Why an entry's header could not be read.
#[derive(Debug)]
enum HeaderError {
    Io(io::Error),
    Format(FormatError),
}

/// Reads and checks the header of an open entry (`key`: the key expected;
/// `None` when the loader does not know it yet).
async fn read_header(file: &OpenFile, key: Option<&str>) -> Result<EntryHeader, HeaderError> {
    let size = file.meta.size;
    let first = (format::FIRST_READ as u64).min(size) as usize;
    let mut buf = vec![0u8; first];
    let n = file.read_at(&mut buf, 0).await.map_err(HeaderError::Io)?;
    buf.truncate(n);
    let len = format::header_len(&buf).map_err(HeaderError::Format)?;
    if len > buf.len() {
        if (len as u64) > size {
            return Err(HeaderError::Format(FormatError::Truncated));
        }
        let have = buf.len();
        buf.resize(len, 0);
        let n = file
            .read_at(&mut buf[have..], have as u64)
            .await
            .map_err(HeaderError::Io)?;
        buf.truncate(have + n);
    }
    format::decode(&buf, key, Some(size)).map_err(HeaderError::Format)
}

/// Stores one response: header and body into a temp file, then renamed
/// into place. Memory stays bounded: each chunk is written as it arrives.
///
/// A writer dropped without `finish` or `abort` hands its temp file to the
/// zone's manager thread for removal.
pub struct CacheWriter {
    zone: Arc<CacheZone>,
    hash: KeyHash,
    io: Io,
    temp: PathBuf,
    file: Option<Arc<std::fs::File>>,
    header: Vec<u8>,
    valid_until: i64,
    body_len: u64,
    log: CacheLog,
    done: bool,
    failed: bool,
}

impl std::fmt::Debug for CacheWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheWriter")
            .field("temp", &self.temp)
            .field("body_len", &self.body_len)
            .finish()
    }
}

impl CacheWriter {
    /// The temp file being written.
    pub fn temp_path(&self) -> &Path {
        &self.temp
    }

    /// Body bytes written so far.
    pub fn body_len(&self) -> u64 {
        self.body_len
    }

    /// Logs the first failure (one line per fill, whatever follows) and
    /// marks the writer failed.
    fn fail(&mut self, op: &str, path: &Path, e: io::Error) -> io::Error {
        if !self.failed {
            self.failed = true;
            let text = match crate::disk::disk_error(&e) {
                Some(d) => d.to_string(),
                None => crate::util::errno_text(&e),
            };
            self.log.line(
                Level::Crit,
                format_args!("{op}() \"{}\" failed {text}", path.display()),
            );
        }
        e
    }

    async fn write_raw(&mut self, data: Arc<[u8]>, at: u64) -> io::Result<()> {
        if self.failed {
            return Err(io::Error::other("cache write already failed"));
        }
        let file = self.file.clone().expect("open");
        match self.io.write_at(&file, data, at).await {
            Ok(()) => Ok(()),
            Err(e) => {
                let p = self.temp.clone();
                Err(self.fail("pwrite", &p, e))
            }
        }
    }

    /// Appends a body chunk. On error (ENOSPC…) one line is logged and the
    /// caller should [`abort`](Self::abort).
    pub async fn write(&mut self, chunk: Arc<[u8]>) -> io::Result<()> {
        let at = self.header.len() as u64 + self.body_len;
        let n = chunk.len() as u64;
        self.write_raw(chunk, at).await?;
        self.body_len += n;
        Ok(())
    }

    /// Completes the entry: rewrites the header with the body length,
    /// renames the temp file over the entry (creating level directories
    /// as needed) and only then inserts it into the index. Concurrent
    /// writers of one key never mix: each has its own temp file and the
    /// last complete rename wins. On error the temp file is removed.
    pub async fn finish(mut self) -> io::Result<()> {
        let r = self.finish_inner().await;
        if r.is_err() {
            self.remove_temp().await;
        }
        self.done = true;
        r
    }

    async fn finish_inner(&mut self) -> io::Result<()> {
        format::set_body_len(&mut self.header, self.body_len);
        let header: Arc<[u8]> = Arc::from(&self.header[..]);
        self.write_raw(header, 0).await?;
        let dst = self.zone.entry_path(&self.hash);
        let r = match self.io.rename(&self.temp, &dst).await {
            Err(e) if enoent(&e) => {
                let dir = dst.parent().unwrap_or(Path::new("/")).to_path_buf();
                match self.io.mkdir_all(&dir).await {
                    Ok(()) => self.io.rename(&self.temp, &dst).await,
                    Err(e) => return Err(self.fail("mkdir", &dir, e)),
                }
            }
            r => r,
        };
        if let Err(e) = r {
            let what = format!("{}\" to \"{}", self.temp.display(), dst.display());
            return Err(self.fail("rename", Path::new(&what), e));
        }
        let size = disk_size(self.header.len() as u64 + self.body_len);
        let mut ev = Vec::new();
        self.zone
            .index
            .stored(self.hash, size, self.valid_until, Instant::now(), &mut ev);
        self.zone.discard(ev);
        Ok(())
    }

    /// Gives the entry up (client or upstream failure, ENOSPC): the temp
    /// file is removed and nothing becomes visible.
    pub async fn abort(mut self) {
        self.remove_temp().await;
        self.done = true;
    }

    async fn remove_temp(&mut self) {
        self.file = None;
        match self.io.unlink(&self.temp).await {
            Ok(()) => {}
            Err(e) if enoent(&e) => {}
            // The pool refused: leave it to the manager thread.
            Err(_) => self.zone.discard_path(self.temp.clone()),
        }
    }
}

impl Drop for CacheWriter {
    fn drop(&mut self) {
        if !self.done {
            self.zone.discard_path(std::mem::take(&mut self.temp));
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

    #[test]
    fn temp_names_carry_the_run() {
        let me = format!(".{}.{:x}.7", KeyHash::of(b"k").hex(), run_id());
        assert!(is_own_temp(&me));
        let other = format!(".{}.{:x}.7", KeyHash::of(b"k").hex(), run_id() ^ 1);
        assert!(!is_own_temp(&other));
        assert!(temp_run(&other).is_some());
        assert_eq!(temp_run(&KeyHash::of(b"k").hex()), None);
    }

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
        assert_eq!(*a.proxy_cache_valid, vec![rule(&[404], 60), rule(&[], 5)]);
        assert_eq!(
            a.proxy_temp_path,
            Some(TempPath {
                path: dir.join("t"),
                levels: Levels(vec![1, 2])
            })
        );
        let b = &srv.find_location("/b").s;
        assert_eq!(
            *b.proxy_cache_valid,
            vec![rule(&[200], 600), rule(&[301], 600), rule(&[302], 600)],
            "inherited whole from http, NGINX's default codes"
        );
        assert_eq!(b.proxy_temp_path, None);
    }

    #[test]
    fn disk_size_is_whole_blocks() {
        assert_eq!(disk_size(0), 0);
        assert_eq!(disk_size(1), 4096);
        assert_eq!(disk_size(4096), 4096);
        assert_eq!(disk_size(4097), 8192);
    }
}
