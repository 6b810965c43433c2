//! The disk layer: every file-system call the server makes goes through
//! this module, and nothing outside it may block on a disk.
//!
//! The interface is async so that how a call is carried out is this
//! module's business alone: today every call runs inline on the event loop
//! (NGINX's `aio off`); thread pools, the page-cache fast path and io_uring
//! are added behind the same functions without touching handlers.

pub mod pool;

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::Path;

use rustix::fs::{Mode, OFlags, ResolveFlags};

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
#[derive(Debug, Clone, Copy)]
pub struct FileMeta {
    /// Size in bytes.
    pub size: u64,
    /// Modification time, seconds since the epoch.
    pub mtime: i64,
    /// File type.
    pub kind: FileKind,
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
        }
    }
}

/// An open file and its metadata, taken from the same descriptor.
#[derive(Debug)]
pub struct OpenFile {
    /// The descriptor (closed on drop).
    pub file: File,
    /// `fstat` of the descriptor at open time.
    pub meta: FileMeta,
}

/// How paths are opened.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenOptions {
    /// `disable_symlinks on`: refuse any symbolic link on the path (ELOOP).
    pub no_symlinks: bool,
}

/// The disk layer of one worker.
#[derive(Debug, Default)]
pub struct Disk {}

impl Disk {
    /// A disk layer that runs every call inline (`aio off`).
    pub fn inline() -> Disk {
        Disk {}
    }

    /// Opens `path` read-only and `fstat`s it.
    ///
    /// `O_NONBLOCK` keeps a FIFO planted under the root from hanging the
    /// open, as NGINX does.
    pub async fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<OpenFile> {
        let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
        let fd = if opts.no_symlinks {
            rustix::fs::openat2(
                rustix::fs::CWD,
                path,
                flags,
                Mode::empty(),
                ResolveFlags::NO_SYMLINKS,
            )?
        } else {
            rustix::fs::open(path, flags, Mode::empty())?
        };
        let st = rustix::fs::fstat(&fd)?;
        Ok(OpenFile {
            file: File::from(fd),
            meta: FileMeta::from_stat(&st),
        })
    }

    /// `stat`s `path` (following symlinks).
    pub async fn stat(&self, path: &Path) -> io::Result<FileMeta> {
        let st = rustix::fs::stat(path)?;
        Ok(FileMeta::from_stat(&st))
    }

    /// Reads up to `buf.len()` bytes at `offset`; fewer only at end of file.
    pub async fn read_at(&self, f: &OpenFile, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            match f.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    /// One `sendfile` of at most `count` bytes from `f` at `*offset` to the
    /// non-blocking socket `sock`; advances `*offset`. `WouldBlock` means the
    /// socket is full.
    pub fn sendfile(
        &self,
        sock: impl AsFd,
        f: &OpenFile,
        offset: &mut u64,
        count: usize,
    ) -> io::Result<usize> {
        let n = rustix::fs::sendfile(sock, &f.file, Some(offset), count)?;
        Ok(n)
    }
}
