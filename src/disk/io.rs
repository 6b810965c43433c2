//! [`Io`]: the route a request's disk calls take — inline (`aio off`, and
//! the proxy cache's loader and manager threads), a thread pool (`aio
//! threads`) or the worker's io_uring (`aio on`), with or without the fast
//! path first — and the calls that
//! need nothing but that route: the proxy cache store's `create`,
//! `write_at`, `sync`, `mkdir_all`, `rename`, `unlink`, `read_dir`,
//! `free_space` (metadata calls in the pool's short lane, data writes in
//! the bulk lane; on the pool under `aio on` too: the ring does not carry
//! them). A route is a cheap clone (an `Arc` of the pool, an `Rc` of the
//! ring), resolved once by the caller ([`super::Disk::route`]) and carried
//! as one value. A route with a ring is not `Send`: it stays on the worker
//! thread that owns the ring.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use rustix::fs::OFlags;

use super::pool::{Lane, PoolError, ThreadPool};
use super::types::{DiskError, FileKind};
use super::uring::Ring;

/// How the calls of one request are carried out: a resolved pool (none
/// for `aio off`), the worker's ring for `aio on` (opens, stats and reads
/// go through it; everything else to the pool), and whether the fast path
/// is tried first.
#[derive(Debug, Clone, Default)]
pub struct Io {
    pub(super) pool: Option<Arc<ThreadPool>>,
    pub(super) ring: Option<Rc<Ring>>,
    pub(super) fast: bool,
}

impl Io {
    /// Every call inline.
    pub fn inline() -> Io {
        Io::default()
    }

    /// Every call on `pool`, after the fast path when `fast`.
    pub fn threads(pool: Arc<ThreadPool>, fast: bool) -> Io {
        Io {
            pool: Some(pool),
            ring: None,
            fast,
        }
    }

    /// Opens, stats and reads through `ring` (after the fast path when
    /// `fast`); the other calls on `pool`.
    pub(super) fn uring(ring: Rc<Ring>, pool: Arc<ThreadPool>, fast: bool) -> Io {
        Io {
            pool: Some(pool),
            ring: Some(ring),
            fast,
        }
    }

    /// Whether this route uses an io_uring (`aio on` with a ring).
    pub fn has_ring(&self) -> bool {
        self.ring.is_some()
    }

    /// Runs `f` inline without a pool, else on the pool in `lane`.
    pub(super) async fn run<T, F>(&self, lane: Lane, f: F) -> io::Result<T>
    where
        T: Send + 'static,
        F: FnOnce() -> io::Result<T> + Send + 'static,
    {
        match &self.pool {
            None => f(),
            Some(p) => offload(p, lane, f).await,
        }
    }

    /// Creates `path` for writing (`O_CREAT|O_EXCL`, mode 0600), as a
    /// cache temp file is.
    pub async fn create(&self, path: &Path) -> io::Result<Arc<File>> {
        let path = path.to_path_buf();
        self.run(Lane::Short, move || {
            let fd = rustix::fs::open(
                &path,
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC,
                rustix::fs::Mode::from_raw_mode(0o600),
            )?;
            Ok(Arc::new(File::from(fd)))
        })
        .await
    }

    /// Writes all of `data` at `offset` (the pool only with `aio_write on`:
    /// the caller holds the matching route).
    pub async fn write_at(&self, file: &Arc<File>, data: Arc<[u8]>, offset: u64) -> io::Result<()> {
        let file = file.clone();
        self.run(Lane::Bulk, move || file.write_all_at(&data, offset))
            .await
    }

    /// `fsync`.
    pub async fn sync(&self, file: &Arc<File>) -> io::Result<()> {
        let file = file.clone();
        self.run(Lane::Bulk, move || file.sync_all()).await
    }

    /// `mkdir -p` with mode 0700.
    ///
    /// Several requests may create one directory at once: a component that
    /// appears meanwhile is not an error.
    pub async fn mkdir_all(&self, path: &Path) -> io::Result<()> {
        let path = path.to_path_buf();
        self.run(Lane::Short, move || {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&path)
        })
        .await
    }

    /// `rename(from, to)` (atomic within one file system).
    pub async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (from, to): (PathBuf, PathBuf) = (from.into(), to.into());
        self.run(Lane::Short, move || std::fs::rename(&from, &to))
            .await
    }

    /// `unlink(path)`.
    pub async fn unlink(&self, path: &Path) -> io::Result<()> {
        let path = path.to_path_buf();
        self.run(Lane::Short, move || std::fs::remove_file(&path))
            .await
    }

    /// The entries of directory `path`: (name, kind) without `.` and `..`;
    /// the kind comes from `d_type`, or from `lstat` where the file system
    /// does not fill it in.
    pub async fn read_dir(&self, path: &Path) -> io::Result<Vec<(String, FileKind)>> {
        let path = path.to_path_buf();
        self.run(Lane::Short, move || {
            let mut out = Vec::new();
            for e in std::fs::read_dir(&path)? {
                let e = e?;
                let Ok(name) = e.file_name().into_string() else {
                    continue;
                };
                let ft = e.file_type()?;
                let kind = if ft.is_file() {
                    FileKind::Regular
                } else if ft.is_dir() {
                    FileKind::Directory
                } else {
                    FileKind::Other
                };
                out.push((name, kind));
            }
            Ok(out)
        })
        .await
    }

    /// Bytes available to unprivileged users on the file system holding
    /// `path` (`statvfs`), for `min_free`.
    pub async fn free_space(&self, path: &Path) -> io::Result<u64> {
        let path = path.to_path_buf();
        self.run(Lane::Short, move || {
            let st = rustix::fs::statvfs(&path)?;
            Ok(st.f_bavail.saturating_mul(st.f_frsize))
        })
        .await
    }
}

/// Runs `f` on `pool` in `lane` and awaits its result.
pub(super) async fn offload<T, F>(pool: &ThreadPool, lane: Lane, f: F) -> io::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> io::Result<T> + Send + 'static,
{
    match pool.submit_in(lane, f) {
        Ok(rx) => match rx.await {
            Ok(r) => r,
            Err(_) => Err(io::Error::other(DiskError::Lost)),
        },
        Err(PoolError::Overflow { pool, waiting }) => {
            Err(io::Error::other(DiskError::Overflow { pool, waiting }))
        }
        Err(PoolError::Stopped) => Err(io::Error::other(DiskError::Stopped(
            pool.name().to_string(),
        ))),
    }
}

/// Creates a cache directory at start-up (on the master thread, before
/// any event loop runs) and gives it to the workers' user, as NGINX's
/// master does for `proxy_cache_path`.
pub fn make_dir_owned(path: &Path, owner: Option<(u32, u32)>) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    // Missing parents as `mkdir -p` makes them (0755): 0700 parents owned
    // by root would shut the workers' user out of the directory itself.
    // A failure here shows in the directory's own mkdir, which is the
    // error reported.
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(parent);
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)?;
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(path, Some(uid), Some(gid))?;
    }
    Ok(())
}
