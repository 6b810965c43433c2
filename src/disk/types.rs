//! The values the disk layer hands back: what a path names ([`FileKind`],
//! [`FileMeta`]), how the pool machinery failed ([`DiskError`]), and what a
//! failed disk call means for a request ([`Failure`]: a status and one log
//! line, NGINX's wording) — decided here once for every caller.

use std::io;

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
    /// The owner may execute it (`if (-x …)`).
    pub exec: bool,
    /// Status change time (`ctime`: seconds, nanoseconds): moves on any
    /// write, truncation or metadata change and cannot be set back from
    /// user space (the cache's body checks rely on it, `cache::verify`).
    pub changed: (i64, i64),
}

impl FileMeta {
    pub(super) fn from_stat(st: &rustix::fs::Stat) -> FileMeta {
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
            exec: st.st_mode & libc::S_IXUSR == libc::S_IXUSR,
            changed: (st.st_ctime, st.st_ctime_nsec as i64),
        }
    }
}

impl FileMeta {
    /// The same facts from a `statx` answer (the ring's `stat`); `id`
    /// encodes the device as `stat` does, so both compare equal.
    pub(super) fn from_statx(st: &libc::statx) -> FileMeta {
        let kind = match u32::from(st.stx_mode) & libc::S_IFMT {
            libc::S_IFREG => FileKind::Regular,
            libc::S_IFDIR => FileKind::Directory,
            _ => FileKind::Other,
        };
        FileMeta {
            size: st.stx_size,
            mtime: st.stx_mtime.tv_sec,
            kind,
            id: (
                libc::makedev(st.stx_dev_major, st.stx_dev_minor),
                st.stx_ino,
            ),
            exec: u32::from(st.stx_mode) & libc::S_IXUSR == libc::S_IXUSR,
            changed: (st.stx_ctime.tv_sec, i64::from(st.stx_ctime.tv_nsec)),
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

/// The [`DiskError`] inside `e`, if it is one.
pub fn disk_error(e: &io::Error) -> Option<&DiskError> {
    e.get_ref()?.downcast_ref::<DiskError>()
}

/// `e` from a call on a file, marked as the file's failure of `op` (so a
/// socket error of the same call is not taken for a disk error).
pub(super) fn file_error(op: &'static str, e: io::Error) -> io::Error {
    if disk_error(&e).is_some() {
        return e;
    }
    io::Error::other(DiskError::Io {
        op,
        text: crate::util::errno_text(&e),
    })
}

/// Errors of `sendfile` that come from the socket side.
pub(super) fn socket_side(e: &io::Error) -> bool {
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

/// What a failed disk call means for its request: the status to answer
/// (when the head is not out yet) and the one line to log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// 503 for a full or stopping pool (the queue drains in moments: send
    /// `Retry-After`), else 500.
    pub status: u16,
    /// `crit` for the file's own failure (as NGINX logs a failed `pread`),
    /// `error` for the pool's.
    pub crit: bool,
    /// The message, NGINX's text: `thread pool "p" queue overflow: 3 tasks
    /// waiting`, `pread() "/srv/a" failed (5: Input/output error)`.
    pub line: String,
}

impl Failure {
    /// Classifies `e`, which a call `op` on `path` returned. A failure the
    /// disk layer marked as the file's names its own call.
    pub fn of(e: &io::Error, op: &str, path: &str) -> Failure {
        match disk_error(e) {
            Some(DiskError::Io { op, text }) => Failure {
                status: 500,
                crit: true,
                line: format!("{op}() \"{path}\" failed {text}"),
            },
            Some(de @ (DiskError::Overflow { .. } | DiskError::Stopped(_))) => Failure {
                status: 503,
                crit: false,
                line: de.to_string(),
            },
            Some(de) => Failure {
                status: 500,
                crit: false,
                line: de.to_string(),
            },
            None => Failure {
                status: 500,
                crit: true,
                line: format!("{op}() \"{path}\" failed {}", crate::util::errno_text(e)),
            },
        }
    }

    /// Whether `e` is the pool's failure rather than the file's.
    pub fn is_pool(e: &io::Error) -> bool {
        matches!(disk_error(e), Some(de) if !matches!(de, DiskError::Io { .. }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_pool_is_503_and_the_files_failure_names_its_call() {
        let full = io::Error::other(DiskError::Overflow {
            pool: "p".into(),
            waiting: 3,
        });
        let f = Failure::of(&full, "open", "/a");
        assert_eq!(f.status, 503);
        assert!(!f.crit);
        assert_eq!(f.line, "thread pool \"p\" queue overflow: 3 tasks waiting");
        let eio = file_error("sendfile", io::Error::from_raw_os_error(libc::EIO));
        let f = Failure::of(&eio, "pread", "/a");
        assert_eq!((f.status, f.crit), (500, true));
        assert_eq!(f.line, "sendfile() \"/a\" failed (5: Input/output error)");
        let plain = io::Error::from_raw_os_error(libc::EACCES);
        assert_eq!(
            Failure::of(&plain, "unlink", "/b").line,
            "unlink() \"/b\" failed (13: Permission denied)"
        );
        assert!(Failure::is_pool(&full) && !Failure::is_pool(&eio));
    }
}
