//! The disk layer: every file-system call the server makes goes through
//! this module, and nothing outside it may block on a disk.
//!
//! Each call is decided here, per request, by the location's `aio`:
//!
//! - `aio off`: the call runs inline on the event loop (NGINX's default).
//! - `aio threads[=POOL]`: the call runs on the pool's threads and the
//!   event loop awaits its completion (a oneshot channel wakes it; nothing
//!   polls). With `aio_fast_path on` (the default) the event loop first
//!   tries the call in a form that cannot block ([`fastpath`]): a cached
//!   path, resident pages. A hit is served inline and never meets the pool;
//!   a miss (`EAGAIN`, a short read, pages not resident) is offloaded, and
//!   a partial read keeps what it got and offloads only the rest.
//!
//! A task owns everything it touches (an `Arc` of the file, a `dup` of the
//! socket), so a task whose connection has gone finishes harmlessly and
//! its result is dropped. Pool failures surface as [`DiskError`] inside an
//! `io::Error`, for the handler to turn into 500 or 503.

pub mod cache;
pub mod fastpath;
pub mod pool;

use std::cell::{Cell, RefCell};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{OFlags, ResolveFlags};
use tokio::io::Interest;
use tokio::net::TcpStream;

use self::cache::{CacheConf, OpenCache};
use self::fastpath::{Op, Residency};
use self::pool::{PoolError, PoolSet, ThreadPool};

/// What kind of object a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file.
    Regular,
    /// A directory.
    Directory,
    /// Anything else (device, FIFO, socket).
    Other,
}

/// The `stat` facts the server uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileMeta {
    /// Size in bytes.
    pub size: u64,
    /// Modification time, seconds since the epoch.
    pub mtime: i64,
    /// File type.
    pub kind: FileKind,
    /// Device and inode (to tell a replaced file in `open_file_cache`).
    pub id: (u64, u64),
}

impl FileMeta {
    fn from_stat(st: &rustix::fs::Stat) -> FileMeta {
        let kind = match rustix::fs::FileType::from_raw_mode(st.st_mode) {
            rustix::fs::FileType::RegularFile => FileKind::Regular,
            rustix::fs::FileType::Directory => FileKind::Directory,
            _ => FileKind::Other,
        };
        FileMeta {
            size: st.st_size as u64,
            mtime: st.st_mtime,
            kind,
            id: (st.st_dev, st.st_ino),
        }
    }
}

/// Failures of the thread-pool machinery (not of the disk itself).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiskError {
    /// `aio threads=$var` named a pool that does not exist.
    #[error("thread pool \"{0}\" not found")]
    PoolNotFound(String),
    /// The pool's queue is full (NGINX's exact message).
    #[error("thread pool \"{pool}\" queue overflow: {waiting} tasks waiting")]
    Overflow {
        /// Pool name.
        pool: String,
        /// Tasks waiting.
        waiting: usize,
    },
    /// The pool is stopping (an old generation after reload).
    #[error("thread pool \"{0}\" is stopping")]
    Stopped(String),
    /// The task vanished without a result (its thread panicked).
    #[error("thread pool task was lost")]
    Lost,
    /// The file itself failed (`pread`, `sendfile` reading it): the caller
    /// logs it with the file's name.
    #[error("{op}() failed {text}")]
    Io {
        /// The call.
        op: &'static str,
        /// errno and its text, NGINX style: `(5: Input/output error)`.
        text: String,
    },
}

fn file_error(op: &'static str, e: io::Error) -> io::Error {
    if disk_error(&e).is_some() {
        return e;
    }
    io::Error::other(DiskError::Io {
        op,
        text: crate::util::errno_text(&e),
    })
}

/// Errors of `sendfile` that come from the socket side.
fn socket_side(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
        || matches!(
            e.raw_os_error(),
            Some(libc::EAGAIN)
                | Some(libc::EPIPE)
                | Some(libc::ECONNRESET)
                | Some(libc::ENOTCONN)
                | Some(libc::ETIMEDOUT)
        )
}

/// The [`DiskError`] inside `e`, if it is one.
pub fn disk_error(e: &io::Error) -> Option<&DiskError> {
    e.get_ref()?.downcast_ref::<DiskError>()
}

/// `aio` of a location, with a variable pool name already rendered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Aio {
    /// Inline (`aio off`).
    #[default]
    Off,
    /// `aio threads=NAME`.
    Threads(String),
}

/// How the calls of one request are carried out: a resolved pool (none
/// for `aio off`) and whether the fast path is tried first.
#[derive(Debug, Clone, Default)]
pub struct Io {
    pool: Option<Arc<ThreadPool>>,
    fast: bool,
}

impl Io {
    /// Every call inline.
    pub fn inline() -> Io {
        Io::default()
    }
}

/// An open file and its metadata, taken from the same descriptor, with the
/// way its reads are carried out.
#[derive(Debug, Clone)]
pub struct OpenFile {
    /// The descriptor (shared with `open_file_cache`; closed with the last
    /// reference).
    pub file: Arc<File>,
    /// `fstat` of the descriptor at open time.
    pub meta: FileMeta,
    io: Io,
    /// `cachestat` refused this file (`EPERM`): use the copy fast path.
    cachestat_denied: Cell<bool>,
}

impl OpenFile {
    fn new(file: Arc<File>, meta: FileMeta, io: Io) -> OpenFile {
        OpenFile {
            file,
            meta,
            io,
            cachestat_denied: Cell::new(false),
        }
    }
}

/// How paths are opened.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// `disable_symlinks on`: refuse any symbolic link on the path (ELOOP),
    /// resolving beneath `root`.
    pub no_symlinks: bool,
    /// The document root the path lies under (used with `no_symlinks`).
    pub root: Option<String>,
    /// `aio`.
    pub aio: Aio,
    /// `aio_fast_path`.
    pub fast_path: bool,
    /// `open_file_cache`, when on.
    pub cache: Option<CacheConf>,
}

/// The disk layer of one worker: the pools of its generation and its
/// `open_file_cache`.
#[derive(Debug, Default)]
pub struct Disk {
    pools: Arc<PoolSet>,
    /// The proxy cache zones of this generation (`proxy_cache NAME`).
    caches: Arc<crate::cache::CacheSet>,
    cache: RefCell<OpenCache>,
    /// Buffer of the copy fast path (used within one synchronous step).
    scratch: RefCell<Vec<u8>>,
}

/// Largest copy of the copy fast path per call (the caller also bounds it
/// by `sendfile_max_chunk`): large enough that a big cached file costs few
/// system calls, small enough to stay in the CPU's cache.
const COPY_MAX: usize = 256 * 1024;

const READ_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::CLOEXEC)
    .union(OFlags::NONBLOCK)
    .union(OFlags::NOCTTY);
const PATH_FLAGS: OFlags = OFlags::PATH.union(OFlags::CLOEXEC);

/// Opens `path` with `flags`. With `no_symlinks`, the root is opened first
/// (no symlink on its own path) and the rest resolved beneath it. With
/// `cached_only`, fails with `WouldBlock` instead of touching the disk.
fn open_path(
    path: &Path,
    root: Option<&str>,
    flags: OFlags,
    no_symlinks: bool,
    cached_only: bool,
) -> io::Result<OwnedFd> {
    let cwd = rustix::fs::CWD;
    if no_symlinks {
        if let Some(rel) = root.and_then(|r| path.strip_prefix(r).ok()) {
            let dir = fastpath::openat2(
                cwd,
                Path::new(root.unwrap_or("/")),
                PATH_FLAGS | OFlags::DIRECTORY,
                ResolveFlags::NO_SYMLINKS,
                cached_only,
            )?;
            return fastpath::openat2(
                dir.as_fd(),
                rel,
                flags,
                fastpath::resolve_flags(true),
                cached_only,
            );
        }
        return fastpath::openat2(cwd, path, flags, ResolveFlags::NO_SYMLINKS, cached_only);
    }
    fastpath::openat2(cwd, path, flags, ResolveFlags::empty(), cached_only)
}

fn open_and_stat(
    path: &Path,
    root: Option<&str>,
    no_symlinks: bool,
    cached_only: bool,
) -> io::Result<(File, FileMeta)> {
    let fd = open_path(path, root, READ_FLAGS, no_symlinks, cached_only)?;
    let st = rustix::fs::fstat(&fd)?;
    Ok((File::from(fd), FileMeta::from_stat(&st)))
}

fn stat_path(
    path: &Path,
    root: Option<&str>,
    no_symlinks: bool,
    cached_only: bool,
) -> io::Result<FileMeta> {
    if !cached_only && !no_symlinks {
        return Ok(FileMeta::from_stat(&rustix::fs::stat(path)?));
    }
    let fd = open_path(path, root, PATH_FLAGS, no_symlinks, cached_only)?;
    Ok(FileMeta::from_stat(&rustix::fs::fstat(&fd)?))
}

fn pread_full(f: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// `sendfile` until `count` bytes went out, the socket is full or the file
/// ends; `WouldBlock` only when nothing was sent.
fn sendfile_some(sock: impl AsFd, f: &File, offset: &mut u64, count: usize) -> io::Result<usize> {
    let mut sent = 0;
    while sent < count {
        match rustix::fs::sendfile(&sock, f, Some(offset), count - sent) {
            Ok(0) => break,
            Ok(n) => sent += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::AGAIN) if sent > 0 => break,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(sent)
}

/// A call on a path (`open_and_stat`, `stat_path`): with the fast path,
/// first inline with `RESOLVE_CACHED`; a walk that would need the disk, or
/// any call without the fast path, runs as [`run`] says.
async fn path_call<T: Send + 'static>(
    op: Op,
    call: fn(&Path, Option<&str>, bool, bool) -> io::Result<T>,
    path: &Path,
    opts: &OpenOptions,
    io: &Io,
) -> io::Result<T> {
    let no_symlinks = opts.no_symlinks;
    if io.pool.is_some() && io.fast && fastpath::features().open_cached {
        match call(path, opts.root.as_deref(), no_symlinks, true) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => fastpath::count(op, false),
            r => {
                fastpath::count(op, true);
                return r;
            }
        }
    }
    let path = path.to_path_buf();
    let root = opts.root.clone();
    run(io, move || call(&path, root.as_deref(), no_symlinks, false)).await
}

/// Runs `f` on `pool` and awaits its result.
async fn offload<T, F>(pool: &ThreadPool, f: F) -> io::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> io::Result<T> + Send + 'static,
{
    match pool.submit(f) {
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

/// Runs `f` inline without a pool, else on the pool.
async fn run<T, F>(io: &Io, f: F) -> io::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> io::Result<T> + Send + 'static,
{
    match &io.pool {
        None => f(),
        Some(p) => offload(p, f).await,
    }
}

impl Disk {
    /// A disk layer over the pools of a generation.
    pub fn new(pools: Arc<PoolSet>) -> Disk {
        Disk {
            pools,
            ..Disk::default()
        }
    }

    /// The pools of this generation.
    pub fn pools(&self) -> &Arc<PoolSet> {
        &self.pools
    }

    /// The same disk layer with the proxy cache zones of its generation.
    pub fn with_caches(self, caches: Arc<crate::cache::CacheSet>) -> Disk {
        Disk { caches, ..self }
    }

    /// The proxy cache zones of this generation: `caches().get(name)`.
    pub fn caches(&self) -> &Arc<crate::cache::CacheSet> {
        &self.caches
    }

    /// Resolves `aio` to a pool: [`DiskError::PoolNotFound`] for an unknown
    /// name (only a variable name can be unknown here; literal names are
    /// checked when the configuration loads).
    pub fn io(&self, aio: &Aio, fast_path: bool) -> io::Result<Io> {
        match aio {
            Aio::Off => Ok(Io::inline()),
            Aio::Threads(name) => match self.pools.get(name) {
                Some(p) => Ok(Io {
                    pool: Some(p.clone()),
                    fast: fast_path,
                }),
                None => Err(io::Error::other(DiskError::PoolNotFound(name.clone()))),
            },
        }
    }

    /// Opens `path` read-only and `fstat`s it, through `open_file_cache`
    /// when configured.
    ///
    /// `O_NONBLOCK` keeps a FIFO planted under the root from hanging the
    /// open, as NGINX does.
    pub async fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<OpenFile> {
        let io = self.io(&opts.aio, opts.fast_path)?;
        let Some(conf) = opts.cache.clone() else {
            let (file, meta) = self.open_uncached(path, &opts, &io).await?;
            return Ok(OpenFile::new(Arc::new(file), meta, io));
        };
        let key = cache::Key {
            path: path.to_path_buf(),
            no_symlinks: opts.no_symlinks,
        };
        let now = std::time::Instant::now();
        let lookup = self.cache.borrow_mut().lookup(&key, &conf, now);
        match lookup {
            cache::Lookup::Fresh(Ok((file, meta))) => Ok(OpenFile::new(file, meta, io)),
            cache::Lookup::Fresh(Err(errno)) => Err(io::Error::from_raw_os_error(errno)),
            cache::Lookup::Stale(Ok((file, meta))) => {
                // Revalidate: the same file (device, inode, size, mtime)?
                match self.stat_inner(path, &opts, &io).await {
                    Ok(now_meta) if now_meta == meta => {
                        self.cache.borrow_mut().revalidated(&key, now);
                        Ok(OpenFile::new(file, meta, io))
                    }
                    _ => self.open_and_remember(path, &opts, io, key, &conf).await,
                }
            }
            cache::Lookup::Stale(Err(_)) | cache::Lookup::Miss => {
                self.open_and_remember(path, &opts, io, key, &conf).await
            }
        }
    }

    async fn open_and_remember(
        &self,
        path: &Path,
        opts: &OpenOptions,
        io: Io,
        key: cache::Key,
        conf: &CacheConf,
    ) -> io::Result<OpenFile> {
        let now = std::time::Instant::now();
        match self.open_uncached(path, opts, &io).await {
            Ok((file, meta)) => {
                let file = Arc::new(file);
                self.cache
                    .borrow_mut()
                    .insert(key, Ok((file.clone(), meta)), conf, now);
                Ok(OpenFile::new(file, meta, io))
            }
            Err(e) => {
                if let Some(errno) = e.raw_os_error() {
                    self.cache.borrow_mut().insert(key, Err(errno), conf, now);
                }
                Err(e)
            }
        }
    }

    async fn open_uncached(
        &self,
        path: &Path,
        opts: &OpenOptions,
        io: &Io,
    ) -> io::Result<(File, FileMeta)> {
        path_call(Op::Open, open_and_stat, path, opts, io).await
    }

    async fn stat_inner(&self, path: &Path, opts: &OpenOptions, io: &Io) -> io::Result<FileMeta> {
        path_call(Op::Stat, stat_path, path, opts, io).await
    }

    /// `stat`s `path` (following symlinks unless `disable_symlinks`).
    pub async fn stat(&self, path: &Path, opts: OpenOptions) -> io::Result<FileMeta> {
        let io = self.io(&opts.aio, opts.fast_path)?;
        self.stat_inner(path, &opts, &io).await
    }

    /// Reads up to `buf.len()` bytes at `offset`; fewer only at end of file.
    pub async fn read_at(&self, f: &OpenFile, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let Some(pool) = &f.io.pool else {
            return pread_full(&f.file, buf, offset).map_err(|e| file_error("pread", e));
        };
        let mut done = 0;
        if f.io.fast && fastpath::features().read_nowait {
            done =
                fastpath::read_nowait(&f.file, buf, offset).map_err(|e| file_error("pread", e))?;
            let at_end = offset + done as u64 >= f.meta.size;
            if done == buf.len() || at_end {
                fastpath::count(Op::Read, true);
                return Ok(done);
            }
            fastpath::count(Op::Read, false);
        }
        if f.io.fast {
            // a real miss: the read to come will start readahead
            fastpath::note_offloaded(f.meta.id);
        }
        let file = f.file.clone();
        let want = buf.len() - done;
        let at = offset + done as u64;
        let (id, fast) = (f.meta.id, f.io.fast);
        let rest = offload(pool, move || {
            let mut v = vec![0u8; want];
            let n = pread_full(&file, &mut v, at);
            if fast {
                // a real miss (the loop's NOWAIT read stopped short): the
                // note's window counts from the end of this read
                fastpath::note_offloaded(id);
            }
            let n = n?;
            v.truncate(n);
            Ok(v)
        })
        .await
        .map_err(|e| file_error("pread", e))?;
        buf[done..done + rest.len()].copy_from_slice(&rest);
        Ok(done + rest.len())
    }

    /// An [`OpenFile`] over a descriptor opened earlier (and its `fstat`),
    /// carried out with `opts`' I/O: a proxy cache entry kept open between
    /// hits.
    pub fn adopt(
        &self,
        file: Arc<File>,
        meta: FileMeta,
        opts: &OpenOptions,
    ) -> io::Result<OpenFile> {
        Ok(OpenFile::new(
            file,
            meta,
            self.io(&opts.aio, opts.fast_path)?,
        ))
    }

    /// Sends at most `count` bytes of `f` from `*offset` to the socket and
    /// advances `*offset`. Inline when `aio off` or when the range is in
    /// the page cache (fast path); otherwise a pool thread calls `sendfile`
    /// on a duplicate of the non-blocking socket. `WouldBlock` means the
    /// socket is full: wait until it is writable and call again.
    pub async fn sendfile(
        &self,
        stream: &TcpStream,
        f: &OpenFile,
        offset: &mut u64,
        count: usize,
    ) -> io::Result<usize> {
        let side = |e: io::Error| {
            if socket_side(&e) {
                e
            } else {
                file_error("sendfile", e)
            }
        };
        let inline_sendfile = |offset: &mut u64| {
            stream
                .try_io(Interest::WRITABLE, || {
                    sendfile_some(stream, &f.file, offset, count)
                })
                .map_err(side)
        };
        let Some(pool) = &f.io.pool else {
            return inline_sendfile(offset);
        };
        let features = fastpath::features();
        // offloaded although resident, because of a recent pool read
        let mut kept_off = false;
        let len = (count as u64).min(f.meta.size.saturating_sub(*offset));
        if f.io.fast {
            let residency = if features.cachestat && !f.cachestat_denied.get() {
                match fastpath::range_cached(&f.file, *offset, len) {
                    // A pool thread's readahead may hold locked pages
                    // anywhere in the range (see `note_offloaded`).
                    // So every page is checked instead of the ends.
                    Residency::Known(true) if fastpath::recently_offloaded(f.meta.id) => {
                        let all =
                            features.read_nowait && fastpath::all_readable(&f.file, *offset, len);
                        kept_off = !all;
                        Residency::Known(all)
                    }
                    // Resident is not enough: pages still being read by
                    // readahead count too (see `ends_readable`).
                    Residency::Known(true) if features.read_nowait => {
                        Residency::Known(fastpath::ends_readable(&f.file, *offset, len))
                    }
                    r => r,
                }
            } else {
                Residency::Denied
            };
            match residency {
                Residency::Known(true) => {
                    fastpath::count(Op::Sendfile, true);
                    return inline_sendfile(offset);
                }
                Residency::Known(false) => fastpath::count(Op::Sendfile, false),
                Residency::Denied if features.read_nowait => {
                    f.cachestat_denied.set(true);
                    if let Some(r) = self.copy_nowait(stream, f, offset, len as usize) {
                        fastpath::count(Op::Sendfile, true);
                        return r;
                    }
                    fastpath::count(Op::Sendfile, false);
                }
                Residency::Denied => fastpath::count(Op::Sendfile, false),
            }
        }
        let sock = stream.as_fd().try_clone_to_owned()?;
        if f.io.fast && !kept_off {
            // a real miss: the sendfile to come will start readahead
            fastpath::note_offloaded(f.meta.id);
        }
        let file = f.file.clone();
        let start = *offset;
        let (id, fast) = (f.meta.id, f.io.fast);
        let sent = offload(pool, move || {
            let mut off = start;
            // Whether this call reads from the disk (and leaves readahead
            // in flight): asked here, when the task runs, not when it was
            // queued.
            let from_disk = fast
                && !matches!(
                    fastpath::range_cached(&file, start, len),
                    Residency::Known(true)
                );
            let r = sendfile_some(&sock, &file, &mut off, count);
            if from_disk {
                fastpath::note_offloaded(id);
            }
            r
        })
        .await;
        match sent {
            Ok(n) => {
                *offset += n as u64;
                Ok(n)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // The thread saw a full socket; clear the loop's stale
                // readiness only if the socket is still full now.
                let fd = stream.as_raw_fd();
                stream.try_io(Interest::WRITABLE, || poll_writable(fd))?;
                Err(io::ErrorKind::WouldBlock.into())
            }
            Err(e) => Err(side(e)),
        }
    }

    /// The copy fast path, for files `cachestat` may not look at: copy
    /// what the page cache holds of the range (`preadv2(RWF_NOWAIT)`) and
    /// `send` it. `None` when nothing is cached at `offset` (offload).
    fn copy_nowait(
        &self,
        stream: &TcpStream,
        f: &OpenFile,
        offset: &mut u64,
        len: usize,
    ) -> Option<io::Result<usize>> {
        if len == 0 {
            return Some(Ok(0));
        }
        let mut buf = self.scratch.borrow_mut();
        let n = len.min(COPY_MAX);
        buf.resize(n, 0);
        let got = match fastpath::read_nowait(&f.file, &mut buf[..n], *offset) {
            Ok(0) => return None,
            Ok(g) => g,
            Err(e) => return Some(Err(file_error("pread", e))),
        };
        let sent = stream.try_io(Interest::WRITABLE, || {
            rustix::net::send(stream, &buf[..got], rustix::net::SendFlags::NOSIGNAL)
                .map_err(io::Error::from)
        });
        Some(sent.inspect(|&s| *offset += s as u64))
    }

    /// Creates `path` for writing (`O_CREAT|O_EXCL`, mode 0600), as a
    /// cache temp file is.
    pub async fn create(&self, io: &Io, path: &Path) -> io::Result<Arc<File>> {
        let path = path.to_path_buf();
        run(io, move || {
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
    /// the caller passes the matching [`Io`]).
    pub async fn write_at(
        &self,
        io: &Io,
        file: &Arc<File>,
        data: Arc<[u8]>,
        offset: u64,
    ) -> io::Result<()> {
        let file = file.clone();
        run(io, move || file.write_all_at(&data, offset)).await
    }

    /// `fsync`.
    pub async fn sync(&self, io: &Io, file: &Arc<File>) -> io::Result<()> {
        let file = file.clone();
        run(io, move || file.sync_all()).await
    }

    /// `mkdir -p` with mode 0700.
    ///
    /// Several requests may create one directory at once: a component that
    /// appears meanwhile is not an error.
    pub async fn mkdir_all(&self, io: &Io, path: &Path) -> io::Result<()> {
        let path = path.to_path_buf();
        run(io, move || {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&path)
        })
        .await
    }

    /// `rename(from, to)` (atomic within one file system).
    pub async fn rename(&self, io: &Io, from: &Path, to: &Path) -> io::Result<()> {
        let (from, to): (PathBuf, PathBuf) = (from.into(), to.into());
        run(io, move || std::fs::rename(&from, &to)).await
    }

    /// `unlink(path)`.
    pub async fn unlink(&self, io: &Io, path: &Path) -> io::Result<()> {
        let path = path.to_path_buf();
        run(io, move || std::fs::remove_file(&path)).await
    }

    // Calls of the proxy cache's loader and manager (src/cache), which run
    // on their own threads with `Io::inline()`.

    /// The entries of directory `path`: (name, kind) without `.` and `..`;
    /// the kind comes from `d_type`, or from `lstat` where the file system
    /// does not fill it in.
    pub async fn read_dir(&self, io: &Io, path: &Path) -> io::Result<Vec<(String, FileKind)>> {
        let path = path.to_path_buf();
        run(io, move || {
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
    pub async fn free_space(&self, io: &Io, path: &Path) -> io::Result<u64> {
        let path = path.to_path_buf();
        run(io, move || {
            let st = rustix::fs::statvfs(&path)?;
            Ok(st.f_bavail.saturating_mul(st.f_frsize))
        })
        .await
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

/// `Ok` when the socket has room now, else `WouldBlock` (a zero-timeout
/// `poll`, which never blocks).
fn poll_writable(fd: std::os::fd::RawFd) -> io::Result<()> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout.
    let r = unsafe { libc::poll(&mut p, 1, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    if r == 1 && p.revents & (libc::POLLOUT | libc::POLLERR | libc::POLLHUP) != 0 {
        Ok(())
    } else {
        Err(io::ErrorKind::WouldBlock.into())
    }
}

#[cfg(test)]
mod tests {
    use super::pool::PoolSpec;
    use super::*;
    use crate::log::ErrorLog;
    use std::time::Duration;

    fn pools(threads: usize, max_queue: usize) -> Arc<PoolSet> {
        let spec = PoolSpec {
            name: "p".into(),
            threads,
            max_queue,
        };
        Arc::new(PoolSet::build(&[spec], None, None, &ErrorLog::new(Vec::new())).unwrap())
    }

    /// Tasks pool `p` has completed.
    fn tasks_done(disk: &Disk) -> u64 {
        disk.pools()
            .get("p")
            .unwrap()
            .stats()
            .done
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "porter-disk-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    fn threads(fast: bool) -> OpenOptions {
        OpenOptions {
            aio: Aio::Threads("p".into()),
            fast_path: fast,
            ..Default::default()
        }
    }

    #[test]
    fn offloaded_open_read_and_writes_round_trip() {
        fastpath::probe();
        let d = dir();
        let disk = Disk::new(pools(2, 8));
        rt().block_on(async {
            let io = disk.io(&Aio::Threads("p".into()), false).unwrap();
            disk.mkdir_all(&io, &d.join("a/b")).await.unwrap();
            let tmp = d.join("a/b/tmp");
            let f = disk.create(&io, &tmp).await.unwrap();
            disk.write_at(&io, &f, Arc::from(&b"hello world"[..]), 0)
                .await
                .unwrap();
            disk.sync(&io, &f).await.unwrap();
            let dst = d.join("a/b/final");
            disk.rename(&io, &tmp, &dst).await.unwrap();
            let of = disk.open(&dst, threads(false)).await.unwrap();
            assert_eq!(of.meta.size, 11);
            let mut buf = [0u8; 5];
            assert_eq!(disk.read_at(&of, &mut buf, 6).await.unwrap(), 5);
            assert_eq!(&buf, b"world");
            disk.unlink(&io, &dst).await.unwrap();
            let e = disk.open(&dst, threads(false)).await.unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
        });
        assert!(tasks_done(&disk) >= 8);
    }

    #[test]
    fn unknown_pool_is_a_disk_error() {
        let disk = Disk::new(pools(1, 1));
        let e = disk.io(&Aio::Threads("nope".into()), true).unwrap_err();
        assert_eq!(
            disk_error(&e),
            Some(&DiskError::PoolNotFound("nope".into()))
        );
        assert_eq!(e.to_string(), "thread pool \"nope\" not found");
    }

    #[test]
    fn fast_path_serves_a_cached_file_without_the_pool() {
        fastpath::probe();
        if !fastpath::features().open_cached || !fastpath::features().read_nowait {
            return;
        }
        let d = dir();
        let p = d.join("hot");
        std::fs::write(&p, vec![1u8; 10000]).unwrap();
        let disk = Disk::new(pools(1, 4));
        rt().block_on(async {
            // The first open may walk the disk; later ones hit the cache.
            disk.open(&p, threads(true)).await.unwrap();
            let before = tasks_done(&disk);
            for _ in 0..10 {
                let f = disk.open(&p, threads(true)).await.unwrap();
                let mut buf = vec![0u8; 10000];
                assert_eq!(disk.read_at(&f, &mut buf, 0).await.unwrap(), 10000);
            }
            let after = tasks_done(&disk);
            assert_eq!(before, after, "cached opens and reads went to the pool");
        });
    }

    /// A connected pair: porter's side (tokio) and a thread draining the
    /// peer until it closes.
    async fn drained_socket() -> TcpStream {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let _ = std::io::copy(&mut s, &mut std::io::sink());
        });
        TcpStream::connect(addr).await.unwrap()
    }

    #[test]
    fn a_file_read_from_disk_by_the_pool_is_noted_and_a_resident_one_is_not() {
        fastpath::probe();
        let fp = fastpath::features();
        if !fp.cachestat || !fp.read_nowait {
            return;
        }
        let d = dir();
        let disk = Disk::new(pools(1, 4));
        rt().block_on(async {
            let sock = drained_socket().await;
            // Resident, but noted a moment before the window ends: every
            // page is readable, so it goes inline, and the note is not
            // renewed.
            let hot = d.join("noted-hot");
            std::fs::write(&hot, vec![3u8; 256 * 1024]).unwrap();
            let f = disk.open(&hot, threads(true)).await.unwrap();
            let almost = fastpath::IN_FLIGHT_WINDOW - Duration::from_millis(300);
            fastpath::note_offloaded_at(f.meta.id, std::time::Instant::now() - almost);
            let before = tasks_done(&disk);
            let mut off = 0;
            disk.sendfile(&sock, &f, &mut off, 64 * 1024).await.unwrap();
            assert_eq!(off, 64 * 1024);
            assert_eq!(tasks_done(&disk), before, "all pages readable: inline");
            std::thread::sleep(Duration::from_millis(400));
            assert!(!fastpath::recently_offloaded(f.meta.id), "note renewed");
            // Not resident: a real miss, noted.
            let cold = d.join("cold");
            std::fs::write(&cold, vec![4u8; 256 * 1024]).unwrap();
            let c = disk.open(&cold, threads(true)).await.unwrap();
            c.file.sync_all().unwrap();
            rustix::fs::fadvise(&*c.file, 0, None, rustix::fs::Advice::DontNeed).unwrap();
            let mut off = 0;
            disk.sendfile(&sock, &c, &mut off, 64 * 1024).await.unwrap();
            assert!(fastpath::recently_offloaded(c.meta.id));
        });
    }

    #[test]
    fn no_symlinks_resolves_beneath_the_root() {
        let d = dir();
        std::fs::write(d.join("real"), b"x").unwrap();
        let _ = std::fs::remove_file(d.join("link"));
        std::os::unix::fs::symlink(d.join("real"), d.join("link")).unwrap();
        let disk = Disk::new(pools(1, 4));
        let root = d.to_str().unwrap().to_string();
        rt().block_on(async {
            for fast in [false, true] {
                let opts = OpenOptions {
                    no_symlinks: true,
                    root: Some(root.clone()),
                    ..threads(fast)
                };
                assert!(disk.open(&d.join("real"), opts.clone()).await.is_ok());
                let e = disk.open(&d.join("link"), opts).await.unwrap_err();
                assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
            }
        });
    }
}
