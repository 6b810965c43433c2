//! Sending a file range to a socket: [`Disk::sendfile`]. Inline when the
//! route has no pool or the fast path finds the range in the page cache
//! (zero-copy `sendfile`, or the copy fast path where `cachestat` is
//! refused); otherwise a pool thread calls `sendfile` on a duplicate of the
//! non-blocking socket, at most `count` bytes per task. Under `aio on` the
//! ring's send takes over ([`super::uring`]: no plain `sendfile` at all).

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd};

use tokio::io::Interest;
use tokio::net::TcpStream;

use super::fastpath::{self, Op, Residency};
use super::io::offload;
use super::open::OpenFile;
use super::pool::ThreadPool;
use super::types::{file_error, socket_side};
use super::Disk;

/// Largest copy of the copy fast path per call (the caller also bounds it
/// by `sendfile_max_chunk`): large enough that a big cached file costs few
/// system calls, small enough to stay in the CPU's cache.
const COPY_MAX: usize = 256 * 1024;

/// How the fast path decided one send.
enum Decision {
    /// Every page of the range is readable now: `sendfile` inline.
    Inline,
    /// `cachestat` refused the file: try the copy fast path.
    Copy,
    /// To the pool; `kept_off` when the range was resident but a recent
    /// pool read may still hold pages of it (no new note then).
    Pool { kept_off: bool },
}

/// `sendfile` errors of the socket pass as they are; the rest are the
/// file's.
fn sendfile_error(e: io::Error) -> io::Error {
    if socket_side(&e) {
        e
    } else {
        file_error("sendfile", e)
    }
}

impl Disk {
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
        let inline_sendfile = |offset: &mut u64| {
            stream
                .try_io(Interest::WRITABLE, || {
                    sendfile_some(stream, &f.file, offset, count)
                })
                .map_err(sendfile_error)
        };
        if let Some(ring) = &f.io.ring {
            return ring.send_file(stream, f, offset, count).await;
        }
        let Some(pool) = &f.io.pool else {
            return inline_sendfile(offset);
        };
        let len = (count as u64).min(f.meta.size.saturating_sub(*offset));
        let mut kept_off = false;
        if f.io.fast {
            match decide(f, *offset, len) {
                Decision::Inline => {
                    fastpath::count(Op::Sendfile, true);
                    return inline_sendfile(offset);
                }
                Decision::Copy => {
                    if let Some(r) = self.copy_nowait(stream, f, offset, len as usize) {
                        fastpath::count(Op::Sendfile, true);
                        return r;
                    }
                    fastpath::count(Op::Sendfile, false);
                }
                Decision::Pool { kept_off: k } => {
                    fastpath::count(Op::Sendfile, false);
                    kept_off = k;
                }
            }
        }
        if f.io.fast && !kept_off {
            // a real miss: the sendfile to come will start readahead
            fastpath::note_offloaded(f.meta.id);
        }
        sendfile_on_pool(pool, stream, f, offset, count, len).await
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
}

/// The fast path's decision for `len` bytes of `f` at `offset`.
fn decide(f: &OpenFile, offset: u64, len: u64) -> Decision {
    let features = fastpath::features();
    if !features.cachestat || f.cachestat_denied.get() {
        return denied(f);
    }
    match fastpath::range_cached(&f.file, offset, len) {
        // A pool thread's readahead may hold locked pages anywhere in the
        // range (see `note_offloaded`), so every page is checked instead
        // of the ends.
        Residency::Known(true) if fastpath::recently_offloaded(f.meta.id) => {
            if features.read_nowait && fastpath::all_readable(&f.file, offset, len) {
                Decision::Inline
            } else {
                Decision::Pool { kept_off: true }
            }
        }
        // Resident is not enough: pages still being read by readahead
        // count too (see `ends_readable`).
        Residency::Known(true) if features.read_nowait => {
            if fastpath::ends_readable(&f.file, offset, len) {
                Decision::Inline
            } else {
                Decision::Pool { kept_off: false }
            }
        }
        Residency::Known(true) => Decision::Inline,
        Residency::Known(false) => Decision::Pool { kept_off: false },
        Residency::Denied => denied(f),
    }
}

/// `cachestat` may not look at `f`: the copy fast path when `RWF_NOWAIT`
/// works.
fn denied(f: &OpenFile) -> Decision {
    if fastpath::features().read_nowait {
        f.cachestat_denied.set(true);
        Decision::Copy
    } else {
        Decision::Pool { kept_off: false }
    }
}

/// One `sendfile` of at most `count` bytes by a thread of `pool`, on a
/// duplicate of the socket; `len` is what is left of the file in range.
async fn sendfile_on_pool(
    pool: &ThreadPool,
    stream: &TcpStream,
    f: &OpenFile,
    offset: &mut u64,
    count: usize,
    len: u64,
) -> io::Result<usize> {
    let sock = stream.as_fd().try_clone_to_owned()?;
    let file = f.file.clone();
    let start = *offset;
    let (id, fast) = (f.meta.id, f.io.fast);
    let sent = offload(pool, move || {
        let mut off = start;
        // Whether this call reads from the disk (and leaves readahead in
        // flight): asked here, when the task runs, not when it was queued.
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
        Err(e) => Err(sendfile_error(e)),
    }
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
