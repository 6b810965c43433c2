//! The cache loader: on start, rebuilds a zone's index from its directory
//! on a dedicated thread (NGINX's cache loader process) while the server
//! already serves. Until it is done, a lookup of a key the index does not
//! know still looks on disk, so no valid entry is lost.
//!
//! The walk is paced like NGINX's: `loader_files` files per batch, and a
//! batch also ends after `loader_threshold`; then it sleeps `loader_sleep`.
//! Each entry's header is read and checked (magic, version, checksum, size,
//! and that the key hashes to the file name); a bad entry is removed and
//! logged. Temp files left by an earlier run (a crash mid-fill) are
//! removed; temp files of this run belong to writers and are left alone.
//!
//! A long load (a million entries at NGINX's default pacing takes minutes)
//! says how far it got: a `loading:` line at notice level every
//! [`PROGRESS_EVERY`], then the closing `entries loaded` line. NGINX's
//! loader is silent until done; an operator watching a restart of a large
//! cache should not have to guess.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::{read_header, CacheZone, HeaderError, KeyHash};
use crate::disk::{FileKind, Io, PathRules};
use crate::log::Level;
use crate::util::thread_user::ThreadUser;

/// What a load found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadStats {
    /// Entries added to the index.
    pub entries: u64,
    /// Their size on disk.
    pub bytes: u64,
    /// Bad entries removed.
    pub bad: u64,
    /// Leftover temp files removed.
    pub temps: u64,
}

/// A thread name within the kernel's 15 bytes.
pub(crate) fn thread_name(prefix: &str, zone: &str) -> String {
    let mut n = format!("{prefix}{zone}");
    while n.len() > 15 {
        n.pop();
    }
    n
}

/// Starts a background thread of `zone` named `PREFIX-NAME`, running as
/// `user` when given. A thread that cannot switch to that user logs one
/// line (`cache WHAT: setuid(USER) failed`), runs `gave_up` on the zone and
/// ends; otherwise it runs `body` with a weak reference to the zone.
pub(crate) fn spawn_thread(
    zone: &Arc<CacheZone>,
    user: Option<ThreadUser>,
    prefix: &str,
    what: &'static str,
    gave_up: fn(&CacheZone),
    body: impl FnOnce(Weak<CacheZone>) + Send + 'static,
) -> io::Result<()> {
    let weak = Arc::downgrade(zone);
    std::thread::Builder::new()
        .name(thread_name(prefix, zone.name()))
        .spawn(move || {
            if let Some(c) = &user {
                if let Err(e) = c.switch() {
                    if let Some(z) = weak.upgrade() {
                        z.error_log().log(
                            Level::Emerg,
                            format_args!("cache {what}: setuid({}) failed: {e}", c.name),
                        );
                        gave_up(&z);
                    }
                    return;
                }
            }
            body(weak);
        })?;
    Ok(())
}

/// Starts the loader thread of `zone`.
pub(crate) fn spawn(zone: &Arc<CacheZone>, user: Option<ThreadUser>) -> io::Result<()> {
    // A loader that cannot run still ends loading: lookups then trust the
    // (empty) index plus the files they open.
    spawn_thread(zone, user, "cl-", "loader", CacheZone::set_loaded, |weak| {
        run(&weak);
    })
}

/// How often a running load logs its progress.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// Loads `zone` on the calling thread (which may block: it is the loader
/// thread, or a test). `None` when the zone went away meanwhile.
pub fn run(zone: &Weak<CacheZone>) -> Option<LoadStats> {
    run_reporting(zone, PROGRESS_EVERY)
}

/// [`run`], with a progress line every `every` of loading.
pub fn run_reporting(zone: &Weak<CacheZone>, every: Duration) -> Option<LoadStats> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    let io = Io::inline();
    let stats = rt.block_on(load(zone, &io, every))?;
    let z = zone.upgrade()?;
    z.set_loaded();
    z.error_log().log(
        Level::Notice,
        format_args!(
            "http file cache: \"{}\" {:.3}M, {} entries loaded, {} bad removed, {} temp files removed",
            z.path().display(),
            stats.bytes as f64 / (1024.0 * 1024.0),
            stats.entries,
            stats.bad,
            stats.temps
        ),
    );
    Some(stats)
}

struct Pace {
    batch: usize,
    started: Instant,
}

/// The `loading:` lines of a running load.
struct Progress {
    every: Duration,
    began: Instant,
    last: Instant,
}

impl Progress {
    fn new(every: Duration) -> Progress {
        let now = Instant::now();
        Progress {
            every,
            began: now,
            last: now,
        }
    }

    fn step(&mut self, z: &CacheZone, stats: &LoadStats) {
        let now = Instant::now();
        if now.duration_since(self.last) < self.every {
            return;
        }
        self.last = now;
        z.error_log().log(
            Level::Notice,
            format_args!(
                "http file cache: \"{}\" loading: {} entries, {:.3}M, {} bad removed, {:.1} s",
                z.path().display(),
                stats.entries,
                stats.bytes as f64 / (1024.0 * 1024.0),
                stats.bad,
                now.duration_since(self.began).as_secs_f64()
            ),
        );
    }
}

async fn load(zone: &Weak<CacheZone>, io: &Io, every: Duration) -> Option<LoadStats> {
    let (root, depth) = {
        let z = zone.upgrade()?;
        (z.path().to_path_buf(), z.levels.0.len())
    };
    let mut stats = LoadStats::default();
    let mut progress = Progress::new(every);
    let mut pace = Pace {
        batch: 0,
        started: Instant::now(),
    };
    let mut stack: Vec<(PathBuf, usize)> = vec![(root, 0)];
    while let Some((dir, level)) = stack.pop() {
        let names = match io.read_dir(&dir).await {
            Ok(n) => n,
            Err(e) => {
                let z = zone.upgrade()?;
                z.log_failure(&e, "opendir", &dir);
                continue;
            }
        };
        for (name, kind) in names {
            let path = dir.join(&name);
            match kind {
                FileKind::Directory if level < depth => stack.push((path, level + 1)),
                FileKind::Regular => {
                    let z = zone.upgrade()?;
                    file(&z, io, &path, &name, level == depth, &mut stats).await;
                    progress.step(&z, &stats);
                    drop(z);
                    pace_step(zone, &mut pace).await?;
                }
                _ => {}
            }
        }
    }
    Some(stats)
}

/// Sleeps `loader_sleep` after `loader_files` files or `loader_threshold`.
async fn pace_step(zone: &Weak<CacheZone>, pace: &mut Pace) -> Option<()> {
    pace.batch += 1;
    let spec = zone.upgrade()?.spec();
    if pace.batch >= spec.loader_files.max(1) || pace.started.elapsed() >= spec.loader_threshold {
        tokio::time::sleep(spec.loader_sleep).await;
        pace.batch = 0;
        pace.started = Instant::now();
    }
    Some(())
}

/// Unlinks `path`; `true` when it was removed here.
async fn remove(z: &CacheZone, io: &Io, path: &Path) -> bool {
    match io.unlink(path).await {
        Ok(()) => true,
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Err(e) => {
            z.log_failure(&e, "unlink", path);
            false
        }
    }
}

/// A bad entry: NGINX's `cache file "PATH" WHY` line (crit), then its
/// removal, counted once it is gone.
async fn remove_bad(z: &CacheZone, io: &Io, path: &Path, why: &str, stats: &mut LoadStats) {
    z.error_log().log(
        Level::Crit,
        format_args!("cache file \"{}\" {why}", path.display()),
    );
    if remove(z, io, path).await {
        stats.bad += 1;
    }
}

async fn file(
    z: &CacheZone,
    io: &Io,
    path: &Path,
    name: &str,
    at_depth: bool,
    stats: &mut LoadStats,
) {
    if super::temp_run(name).is_some() {
        if !super::is_own_temp(name) && remove(z, io, path).await {
            stats.temps += 1;
        }
        return;
    }
    let hash = match KeyHash::from_hex(name) {
        Some(h) if at_depth && z.entry_path(&h) == path => h,
        // Not an entry where an entry belongs (NGINX removes these too).
        _ => {
            if at_depth {
                remove_bad(z, io, path, "is misplaced, removed", stats).await;
            }
            return;
        }
    };
    let f = match io.open(path, &PathRules::default()).await {
        Ok(f) => f,
        Err(_) => return, // removed meanwhile
    };
    match read_header(&f, None).await {
        Ok(h) if KeyHash::of(h.meta.key.as_bytes()) == hash => {
            let size = super::disk_size(f.meta.size);
            let mut ev = Vec::new();
            if z.index
                .loaded(hash, size, h.meta.valid_until, Instant::now(), &mut ev)
            {
                stats.entries += 1;
                stats.bytes += size;
            }
            z.discard(ev);
        }
        Ok(_) => remove_bad(z, io, path, "has md5 collision", stats).await,
        Err(HeaderError::Format(e)) => remove_bad(z, io, path, &e.to_string(), stats).await,
        Err(HeaderError::Io(e)) => {
            z.log_failure(&e, "pread", path);
        }
    }
}
