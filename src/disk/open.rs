//! Opening and reading files: [`PathRules`] (how a path may be resolved:
//! `disable_symlinks` beneath the document root), [`Io::open`] /
//! [`Io::stat`] (with the fast path, `openat2(RESOLVE_CACHED)` inline
//! first; then the pool, or the ring under `aio on`),
//! [`OpenFile::read_at`] (`preadv2(RWF_NOWAIT)` inline first), and
//! [`Disk::open`], the same open through the worker's `open_file_cache`.

use std::cell::{Cell, RefCell};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use rustix::fs::{OFlags, ResolveFlags};

use super::direct::Direct;
use super::fastpath::{self, Op};
use super::io::{offload, Io};
use super::open_file_cache::{self, OpenFileCacheSettings};
use super::pool::Lane;
use super::readahead::Ahead;
use super::types::{file_error, FileMeta};
use super::uring::Unsent;
use super::Disk;

/// How paths are resolved: NGINX's `disable_symlinks`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PathRules {
    /// `disable_symlinks on|if_not_owner`: refuse a symbolic link on the
    /// path (ELOOP), resolving beneath `root`.
    pub no_symlinks: bool,
    /// `if_not_owner`: a link owned as its target is followed
    /// (`owner_walk`, NGINX's walk, after `RESOLVE_NO_SYMLINKS` met one).
    pub if_not_owner: bool,
    /// The directory the path lies under (used with `no_symlinks`): the
    /// document root, or the `from=` part.
    pub root: Option<String>,
    /// `from=`: `root` is reached as it is (links followed); only the
    /// path beneath it is checked. Else `root` is checked too.
    pub from: bool,
}

impl PathRules {
    /// How `root` itself is resolved.
    pub(super) fn root_resolve(&self) -> ResolveFlags {
        if self.from {
            ResolveFlags::empty()
        } else {
            ResolveFlags::NO_SYMLINKS
        }
    }
}

/// An open file and its metadata, taken from the same descriptor, with the
/// route its reads take.
#[derive(Debug)]
pub struct OpenFile {
    /// The descriptor (shared with `open_file_cache`; closed with the last
    /// reference).
    pub file: Arc<File>,
    /// `fstat` of the descriptor at open time.
    pub meta: FileMeta,
    pub(super) io: Io,
    /// `cachestat` refused this file (`EPERM`): use the copy fast path.
    pub(super) cachestat_denied: Cell<bool>,
    /// Under `aio on`: bytes read for a send that the socket did not take
    /// yet, sent first by the next send at their offset.
    pub(super) unsent: RefCell<Option<Unsent>>,
    /// Under `aio on`: whether the file system refuses `RWF_NOWAIT`
    /// (asked once, see `ring_punts`).
    pub(super) nowait_refused: Cell<Option<bool>>,
    /// Bytes the copy fast path sent from the page cache that this open
    /// file's own reads did not bring in, since its last cold miss: how a
    /// hot file is told (`hot_hole`).
    pub(super) cached_run: Cell<u64>,
    /// The end of the last cold range read for this open file: where its
    /// cold stream's next window starts (`readahead`).
    pub(super) own_until: Cell<u64>,
    /// Where that last cold window started: the client's reaching it asks
    /// for the next one (`readahead`, one window ahead).
    pub(super) own_from: Cell<u64>,
    /// The window being read ahead of the client (`readahead::Ahead`).
    pub(super) ahead: RefCell<Option<Ahead>>,
    /// The end of the range the response is sending ([`OpenFile::send_until`]):
    /// no cold window, read or read ahead, passes it.
    pub(super) range_end: Cell<u64>,
    /// Whether a send of this open file has sent anything yet (a miss at
    /// the first send of a file not hot starts a cold stream).
    pub(super) sent_any: Cell<bool>,
    /// `directio`: reads bypass the page cache (`direct.rs`).
    pub(super) direct: Option<Direct>,
}

impl Clone for OpenFile {
    /// The same file and route; bytes a send left unsent stay with the
    /// original.
    fn clone(&self) -> OpenFile {
        OpenFile {
            cachestat_denied: self.cachestat_denied.clone(),
            nowait_refused: self.nowait_refused.clone(),
            direct: self.direct.clone(),
            ..OpenFile::new(self.file.clone(), self.meta, self.io.clone())
        }
    }
}

impl OpenFile {
    /// An open file whose reads take `io`: also a descriptor opened earlier
    /// (and its `fstat`), such as a proxy cache entry kept open between
    /// hits.
    pub fn new(file: Arc<File>, meta: FileMeta, io: Io) -> OpenFile {
        OpenFile {
            file,
            meta,
            io,
            cachestat_denied: Cell::new(false),
            unsent: RefCell::new(None),
            nowait_refused: Cell::new(None),
            cached_run: Cell::new(0),
            own_until: Cell::new(0),
            own_from: Cell::new(0),
            ahead: RefCell::new(None),
            range_end: Cell::new(u64::MAX),
            sent_any: Cell::new(false),
            direct: None,
        }
    }

    /// Notes that the response sends this file's bytes up to `end` (not
    /// included) next: a cold stream's windows, read and read ahead, stop
    /// there (`readahead`), so a range does not read what it does not
    /// send. Until it is called they stop at the end of the file.
    pub fn send_until(&self, end: u64) {
        self.range_end.set(end);
    }

    /// Reads up to `buf.len()` bytes at `offset`; fewer only at end of
    /// file. With the fast path a short `RWF_NOWAIT` read keeps what it
    /// got and offloads only the rest.
    pub async fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if let Some(d) = &self.direct {
            return self.read_direct(d, buf, offset).await;
        }
        let Some(pool) = &self.io.pool else {
            return pread_full(&self.file, buf, offset).map_err(|e| file_error("pread", e));
        };
        let fast = self.io.fast;
        let mut done = 0;
        if fast && fastpath::features().read_nowait {
            done = fastpath::read_nowait(&self.file, buf, offset)
                .map_err(|e| file_error("pread", e))?;
            let at_end = offset + done as u64 >= self.meta.size;
            if done == buf.len() || at_end {
                fastpath::count(Op::Read, true);
                return Ok(done);
            }
            fastpath::count(Op::Read, false);
        }
        if fast {
            // a real miss: the read to come will start readahead
            fastpath::note_offloaded(self.meta.id);
        }
        if let Some(ring) = &self.io.ring {
            // The ring reads into its own buffer (a dropped read must not
            // leave the kernel writing into `buf`), then copies.
            let at = offset + done as u64;
            let cold = buf.len() - done > SHORT_READ;
            // A cold read's page-cache pages are allocated (and, at a
            // memory cgroup's limit, reclaimed for) by an io-wq thread,
            // not the loop: see `Ring::send_file`.
            let punt = cold || self.ring_punts(at);
            let _permit = if cold {
                Some(ring.cold_permit().await)
            } else {
                None
            };
            let (rest, n) = ring
                .read_full(&self.file, buf.len() - done, at, punt)
                .await
                .map_err(|e| file_error("pread", e))?;
            buf[done..done + n].copy_from_slice(&rest[..n]);
            ring.give_back(rest);
            return Ok(done + n);
        }
        let file = self.file.clone();
        let want = buf.len() - done;
        let at = offset + done as u64;
        let id = self.meta.id;
        // A small read is one disk request: the short lane.
        let lane = if want <= SHORT_READ {
            Lane::Short
        } else {
            Lane::Bulk
        };
        let rest = offload(pool, lane, move || {
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
}

/// Reads of at most this much go in the pool's short lane.
const SHORT_READ: usize = 64 * 1024;

pub(super) const READ_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::CLOEXEC)
    .union(OFlags::NONBLOCK)
    .union(OFlags::NOCTTY);
pub(super) const PATH_FLAGS: OFlags = OFlags::PATH.union(OFlags::CLOEXEC);

/// Opens `path` with `flags`. With `no_symlinks`, the root is opened first
/// (no symlink on its own path) and the rest resolved beneath it. With
/// `cached_only`, fails with `WouldBlock` instead of touching the disk.
pub(super) fn open_path(
    path: &Path,
    rules: &PathRules,
    flags: OFlags,
    cached_only: bool,
) -> io::Result<OwnedFd> {
    let cwd = rustix::fs::CWD;
    if !rules.no_symlinks {
        return fastpath::openat2(cwd, path, flags, ResolveFlags::empty(), cached_only);
    }
    let root = rules.root.as_deref();
    let Some(rel) = root.and_then(|r| path.strip_prefix(r).ok()) else {
        return fastpath::openat2(cwd, path, flags, ResolveFlags::NO_SYMLINKS, cached_only);
    };
    let dir = fastpath::openat2(
        cwd,
        Path::new(root.unwrap_or("/")),
        PATH_FLAGS | OFlags::DIRECTORY,
        rules.root_resolve(),
        cached_only,
    )?;
    fastpath::openat2(
        dir.as_fd(),
        rel,
        flags,
        fastpath::resolve_flags(true),
        cached_only,
    )
}

fn open_and_stat(
    path: &Path,
    rules: &PathRules,
    cached_only: bool,
) -> io::Result<(File, FileMeta)> {
    let fd = open_path(path, rules, READ_FLAGS, cached_only)?;
    let st = rustix::fs::fstat(&fd)?;
    Ok((File::from(fd), FileMeta::from_stat(&st)))
}

/// What NGINX's walk (`O_PATH|O_NOFOLLOW`, one component at a time)
/// answers for a path with a link on it: a link on the way is opened as
/// itself and the next step fails with `ENOTDIR` (404); only a link at
/// the end is `ELOOP` (403). Told by opening the parent.
fn link_refusal(path: &Path, rules: &PathRules) -> io::Error {
    let not_dir = io::Error::from_raw_os_error(libc::ENOTDIR);
    if path.as_os_str().as_encoded_bytes().ends_with(b"/") {
        return not_dir;
    }
    let Some(parent) = path.parent() else {
        return io::Error::from_raw_os_error(libc::ELOOP);
    };
    match open_path(parent, rules, PATH_FLAGS | OFlags::DIRECTORY, false) {
        Ok(_) => io::Error::from_raw_os_error(libc::ELOOP),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => not_dir,
        Err(e) => e,
    }
}

fn owned_open_and_stat(path: &Path, rules: &PathRules) -> io::Result<(File, FileMeta)> {
    let fd = super::owner_walk::open(path, rules, READ_FLAGS)?;
    let st = rustix::fs::fstat(&fd)?;
    Ok((File::from(fd), FileMeta::from_stat(&st)))
}

fn owned_stat(path: &Path, rules: &PathRules) -> io::Result<FileMeta> {
    let fd = super::owner_walk::open(path, rules, PATH_FLAGS)?;
    Ok(FileMeta::from_stat(&rustix::fs::fstat(&fd)?))
}

fn stat_path(path: &Path, rules: &PathRules, cached_only: bool) -> io::Result<FileMeta> {
    if !cached_only && !rules.no_symlinks {
        return Ok(FileMeta::from_stat(&rustix::fs::stat(path)?));
    }
    let fd = open_path(path, rules, PATH_FLAGS, cached_only)?;
    Ok(FileMeta::from_stat(&rustix::fs::fstat(&fd)?))
}

pub(super) fn pread_full(f: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
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

impl Io {
    /// With the fast path, `call` inline with `RESOLVE_CACHED`: `None`
    /// when the walk would need the disk (or without the fast path).
    fn cached_first<T>(
        &self,
        op: Op,
        call: fn(&Path, &PathRules, bool) -> io::Result<T>,
        path: &Path,
        rules: &PathRules,
    ) -> Option<io::Result<T>> {
        if self.pool.is_none() || !self.fast || !fastpath::features().open_cached {
            return None;
        }
        match call(path, rules, true) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                fastpath::count(op, false);
                None
            }
            r => {
                fastpath::count(op, true);
                Some(r)
            }
        }
    }

    /// A call on a path (`open_and_stat`, `stat_path`): the fast path
    /// first, then as the route says (inline or on the pool).
    async fn path_call<T: Send + 'static>(
        &self,
        op: Op,
        call: fn(&Path, &PathRules, bool) -> io::Result<T>,
        path: &Path,
        rules: &PathRules,
    ) -> io::Result<T> {
        if self.pool.is_none() {
            return call(path, rules, false);
        }
        if let Some(r) = self.cached_first(op, call, path, rules) {
            return r;
        }
        let path = path.to_path_buf();
        let rules = rules.clone();
        // A path walk costs a few small reads at most: the short lane.
        self.run(Lane::Short, move || call(&path, &rules, false))
            .await
    }

    /// Opens `path` read-only and `fstat`s it, without `open_file_cache`.
    ///
    /// `O_NONBLOCK` keeps a FIFO planted under the root from hanging the
    /// open, as NGINX does.
    pub async fn open(&self, path: &Path, rules: &PathRules) -> io::Result<OpenFile> {
        let opened = match &self.ring {
            Some(ring) => match self.cached_first(Op::Open, open_and_stat, path, rules) {
                Some(r) => r,
                None => ring.open_and_stat(path, rules).await,
            },
            None => self.path_call(Op::Open, open_and_stat, path, rules).await,
        };
        let (file, meta) = self
            .owner_walk(opened, path, rules, owned_open_and_stat)
            .await?;
        if self.pool.is_some() || self.ring.is_some() {
            fastpath::own_readahead(&file, meta.size);
        }
        Ok(OpenFile::new(Arc::new(file), meta, self.clone()))
    }

    /// `stat`s `path` (following symlinks unless `disable_symlinks`).
    pub async fn stat(&self, path: &Path, rules: &PathRules) -> io::Result<FileMeta> {
        let found = match &self.ring {
            Some(ring) => match self.cached_first(Op::Stat, stat_path, path, rules) {
                Some(r) => r,
                None => ring.stat_path(path, rules).await,
            },
            None => self.path_call(Op::Stat, stat_path, path, rules).await,
        };
        self.owner_walk(found, path, rules, owned_stat).await
    }

    /// A path refused for a link (`ELOOP`) under `disable_symlinks`:
    /// with `if_not_owner` walked again by NGINX's owner rule; with `on`
    /// told apart as NGINX's walk tells it ([`link_refusal`]). Both where
    /// the route runs blocking calls (the pool; inline under `aio off`):
    /// only a refused path pays for them.
    async fn owner_walk<T: Send + 'static>(
        &self,
        first: io::Result<T>,
        path: &Path,
        rules: &PathRules,
        call: fn(&Path, &PathRules) -> io::Result<T>,
    ) -> io::Result<T> {
        match first {
            Err(e) if rules.no_symlinks && e.raw_os_error() == Some(libc::ELOOP) => {
                let path = path.to_path_buf();
                let rules = rules.clone();
                self.run(Lane::Short, move || match rules.if_not_owner {
                    true => call(&path, &rules),
                    false => Err(link_refusal(&path, &rules)),
                })
                .await
            }
            r => r,
        }
    }
}

impl Disk {
    /// Opens `path` as [`Io::open`] does, through the worker's
    /// `open_file_cache` when `cache` is on.
    pub async fn open(
        &self,
        io: &Io,
        path: &Path,
        rules: &PathRules,
        cache: Option<&OpenFileCacheSettings>,
    ) -> io::Result<OpenFile> {
        let Some(conf) = cache else {
            return io.open(path, rules).await;
        };
        let key = (path, rules);
        let now = std::time::Instant::now();
        let lookup = self.open_files.borrow_mut().lookup(&key, conf, now);
        match lookup {
            open_file_cache::Lookup::Fresh(Ok((file, meta))) => {
                Ok(OpenFile::new(file, meta, io.clone()))
            }
            open_file_cache::Lookup::Fresh(Err(errno)) => Err(io::Error::from_raw_os_error(errno)),
            open_file_cache::Lookup::Stale(Ok((file, meta))) => {
                // Revalidate: the same file (device, inode, size, mtime)?
                match io.stat(path, rules).await {
                    Ok(now_meta) if now_meta == meta => {
                        self.open_files.borrow_mut().revalidated(&key, now);
                        Ok(OpenFile::new(file, meta, io.clone()))
                    }
                    _ => self.open_and_remember(io, path, rules, conf).await,
                }
            }
            open_file_cache::Lookup::Stale(Err(_)) | open_file_cache::Lookup::Miss => {
                self.open_and_remember(io, path, rules, conf).await
            }
        }
    }

    async fn open_and_remember(
        &self,
        io: &Io,
        path: &Path,
        rules: &PathRules,
        conf: &OpenFileCacheSettings,
    ) -> io::Result<OpenFile> {
        let now = std::time::Instant::now();
        // Owned only here, when an open is remembered.
        let key = open_file_cache::Key {
            path: path.to_path_buf(),
            rules: rules.clone(),
        };
        match io.open(path, rules).await {
            Ok(f) => {
                self.open_files
                    .borrow_mut()
                    .insert(key, Ok((f.file.clone(), f.meta)), conf, now);
                Ok(f)
            }
            Err(e) => {
                if let Some(errno) = e.raw_os_error() {
                    self.open_files
                        .borrow_mut()
                        .insert(key, Err(errno), conf, now);
                }
                Err(e)
            }
        }
    }
}
