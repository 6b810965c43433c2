//! The operations `aio on` sends through the ring — a buffered read into a
//! ring-owned buffer, `openat2`, `statx` — and the disk calls built from
//! them: opening and `stat`ing a path under [`PathRules`] (the same walk as
//! the inline and pool routes), and reading a whole range.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use io_uring::{opcode, squeue, types};
use rustix::fs::{OFlags, ResolveFlags};

use super::{Keep, Ring};
use crate::disk::fastpath;
use crate::disk::open::{OpenFile, PathRules, PATH_FLAGS, READ_FLAGS};
use crate::disk::types::FileMeta;

fn errno(res: i32) -> io::Error {
    io::Error::from_raw_os_error(-res)
}

fn c_path(p: &Path) -> io::Result<CString> {
    // An empty relative path names the directory itself.
    let bytes = if p.as_os_str().is_empty() {
        b"."
    } else {
        p.as_os_str().as_bytes()
    };
    CString::new(bytes).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

impl Ring {
    /// One read of `file` at `offset` into `buf[range]`; returns the bytes
    /// read and the buffer. With `punt` the read goes straight to an io-wq
    /// thread (`IOSQE_ASYNC`), see [`OpenFile::ring_punts`]. A file opened
    /// `O_NONBLOCK` may make the ring answer `EAGAIN` instead of using a
    /// thread: the flag (meaningless for a regular file otherwise) is
    /// cleared and the read sent again.
    pub(in crate::disk) async fn read(
        self: &Rc<Self>,
        file: &Arc<File>,
        buf: Vec<u8>,
        range: Range<usize>,
        offset: u64,
        punt: bool,
    ) -> (io::Result<usize>, Vec<u8>) {
        let (mut res, mut buf) = self.read_once(file, buf, range.clone(), offset, punt).await;
        if res == -libc::EAGAIN && clear_nonblock(file) {
            (res, buf) = self.read_once(file, buf, range, offset, punt).await;
        }
        let r = if res < 0 {
            Err(errno(res))
        } else {
            Ok(res as usize)
        };
        (r, buf)
    }

    async fn read_once(
        self: &Rc<Self>,
        file: &Arc<File>,
        mut buf: Vec<u8>,
        range: Range<usize>,
        offset: u64,
        punt: bool,
    ) -> (i32, Vec<u8>) {
        let dst = &mut buf[range];
        let len = dst.len().min(u32::MAX as usize) as u32;
        let flags = if punt {
            squeue::Flags::ASYNC
        } else {
            squeue::Flags::empty()
        };
        let entry = opcode::Read::new(types::Fd(file.as_raw_fd()), dst.as_mut_ptr(), len)
            .offset(offset)
            .build()
            .flags(flags);
        let keep = Keep::Read {
            buf,
            file: file.clone(),
        };
        match self.op(entry, keep).await {
            (res, Keep::Read { buf, .. }) => (res, buf),
            _ => unreachable!("a read keeps its buffer"),
        }
    }

    /// Reads `want` bytes at `offset` (fewer only at end of file) into a
    /// ring buffer; returns it and how many bytes it holds. Give it back
    /// with [`Ring::give_back`].
    pub(in crate::disk) async fn read_full(
        self: &Rc<Self>,
        file: &Arc<File>,
        want: usize,
        offset: u64,
        punt: bool,
    ) -> io::Result<(Vec<u8>, usize)> {
        let mut buf = self.buffer(want);
        let mut done = 0;
        while done < want {
            let at = offset + done as u64;
            let (r, b) = self.read(file, buf, done..want, at, punt).await;
            buf = b;
            match r {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.give_back(buf);
                    return Err(e);
                }
            }
        }
        Ok((buf, done))
    }

    /// `openat2(dir or AT_FDCWD, rel, flags, resolve)`.
    async fn openat2(
        self: &Rc<Self>,
        dir: Option<OwnedFd>,
        rel: &Path,
        flags: OFlags,
        resolve: ResolveFlags,
    ) -> io::Result<OwnedFd> {
        let path = c_path(rel)?;
        let how = Box::new(
            types::OpenHow::new()
                .flags(flags.bits() as u64)
                .resolve(resolve.bits()),
        );
        let dirfd = dir.as_ref().map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
        // Straight to io-wq: the ring gets only walks the fast path could
        // not do from the dentry cache, and the kernel's own inline try
        // could sleep in a file system's open (FUSE asks its daemon).
        let entry = opcode::OpenAt2::new(types::Fd(dirfd), path.as_ptr(), &*how)
            .build()
            .flags(squeue::Flags::ASYNC);
        let (res, _) = self.op(entry, Keep::Open { path, how, dir }).await;
        if res < 0 {
            return Err(errno(res));
        }
        // SAFETY: the kernel opened this descriptor for us.
        Ok(unsafe { OwnedFd::from_raw_fd(res) })
    }

    /// `statx` of `path` (following symlinks), or of `dir` itself when
    /// `path` is `None` (`AT_EMPTY_PATH`, an `fstat`).
    async fn statx(
        self: &Rc<Self>,
        dir: Option<Arc<File>>,
        path: Option<&Path>,
    ) -> io::Result<FileMeta> {
        let (path, flags) = match path {
            Some(p) => (c_path(p)?, libc::AT_STATX_SYNC_AS_STAT),
            None => (
                CString::default(),
                libc::AT_EMPTY_PATH | libc::AT_STATX_SYNC_AS_STAT,
            ),
        };
        // SAFETY: statx is plain data; all zeroes is a valid value.
        let mut out: Box<libc::statx> = Box::new(unsafe { std::mem::zeroed() });
        let dirfd = dir.as_ref().map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
        let entry = opcode::Statx::new(
            types::Fd(dirfd),
            path.as_ptr(),
            (&mut *out as *mut libc::statx).cast(),
        )
        .flags(flags)
        .mask(libc::STATX_BASIC_STATS)
        .build()
        .flags(squeue::Flags::ASYNC);
        match self.op(entry, Keep::Statx { path, out, dir }).await {
            (res, _) if res < 0 => Err(errno(res)),
            (_, Keep::Statx { out, .. }) => Ok(FileMeta::from_statx(&out)),
            _ => unreachable!("a statx keeps its answer"),
        }
    }

    /// Opens `path` as the inline route's `open_path` does: with
    /// `no_symlinks`, the root first (no symlink on its own path), then
    /// the rest beneath it.
    async fn open_path(
        self: &Rc<Self>,
        path: &Path,
        rules: &PathRules,
        flags: OFlags,
    ) -> io::Result<OwnedFd> {
        if !rules.no_symlinks {
            return self.openat2(None, path, flags, ResolveFlags::empty()).await;
        }
        let root = rules.root.as_deref();
        let Some(rel) = root.and_then(|r| path.strip_prefix(r).ok()) else {
            return self
                .openat2(None, path, flags, ResolveFlags::NO_SYMLINKS)
                .await;
        };
        let dir = self
            .openat2(
                None,
                Path::new(root.unwrap_or("/")),
                PATH_FLAGS | OFlags::DIRECTORY,
                rules.root_resolve(),
            )
            .await?;
        let rel = rel.to_path_buf();
        self.openat2(Some(dir), &rel, flags, fastpath::resolve_flags(true))
            .await
    }

    /// Opens `path` read-only and `statx`es the descriptor, both through
    /// the ring.
    pub(in crate::disk) async fn open_and_stat(
        self: &Rc<Self>,
        path: &Path,
        rules: &PathRules,
    ) -> io::Result<(File, FileMeta)> {
        let fd = self.open_path(path, rules, READ_FLAGS).await?;
        let file = Arc::new(File::from(fd));
        let meta = self.statx(Some(file.clone()), None).await?;
        // The statx slot held the other reference; it is back now.
        let file = Arc::try_unwrap(file).map_err(|_| io::Error::other("file still shared"))?;
        Ok((file, meta))
    }

    /// `stat`s `path` through the ring (beneath the root with
    /// `no_symlinks`, as the other routes do).
    pub(in crate::disk) async fn stat_path(
        self: &Rc<Self>,
        path: &Path,
        rules: &PathRules,
    ) -> io::Result<FileMeta> {
        if !rules.no_symlinks {
            return self.statx(None, Some(path)).await;
        }
        let fd = self.open_path(path, rules, PATH_FLAGS).await?;
        self.statx(Some(Arc::new(File::from(fd))), None).await
    }
}

impl OpenFile {
    /// Whether the ring's reads of this file go straight to an io-wq
    /// thread: its file system refuses `RWF_NOWAIT` (FUSE, NFS). io_uring
    /// still tries such a read at submission, and the file system may then
    /// sleep in it (FUSE reads ahead synchronously) — on the event loop.
    /// File systems that take `RWF_NOWAIT` honour it there too, and a miss
    /// waits for its page without a thread. Asked once per open file with
    /// a one-byte `preadv2(RWF_NOWAIT)` at `offset`.
    pub(in crate::disk) fn ring_punts(&self, offset: u64) -> bool {
        if let Some(p) = self.nowait_refused.get() {
            return p;
        }
        let mut b = [0u8; 1];
        let r = rustix::io::preadv2(
            &*self.file,
            &mut [io::IoSliceMut::new(&mut b)],
            offset,
            rustix::io::ReadWriteFlags::NOWAIT,
        );
        let refused = r == Err(rustix::io::Errno::OPNOTSUPP);
        self.nowait_refused.set(Some(refused));
        refused
    }
}

/// Clears `O_NONBLOCK` on a regular file; whether it was set.
fn clear_nonblock(file: &File) -> bool {
    let Ok(flags) = rustix::fs::fcntl_getfl(file.as_fd()) else {
        return false;
    };
    if !flags.contains(OFlags::NONBLOCK) {
        return false;
    }
    rustix::fs::fcntl_setfl(file.as_fd(), flags - OFlags::NONBLOCK).is_ok()
}
