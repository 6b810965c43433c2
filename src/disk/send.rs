//! Sending a file range to a socket: [`Disk::sendfile`]. Inline when the
//! route has no pool or the fast path finds the range in the page cache:
//! zero-copy `sendfile` where `cachestat` answers, the copy fast path
//! (`preadv2(RWF_NOWAIT)` + `send`) where it is refused. Otherwise a pool
//! thread calls `sendfile` on a duplicate of the non-blocking socket, at
//! most `count` bytes per task — in the pool's short lane when only a few
//! pages are missing (about one small disk read), in the bulk lane
//! otherwise. A small hole in a file `cachestat` refuses is read alone on
//! the short lane and the copy goes on from the page cache; a larger one
//! in a hot file (on the copy fast path, or counted by `cachestat`) is
//! read with direct I/O on the short lane and sent from its buffer
//! ([`super::hot_hole`]). Under `aio on` the ring's send takes over ([`super::uring`]: no plain `sendfile` at
//! all).

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd};

use tokio::io::Interest;
use tokio::net::TcpStream;

use super::fastpath::{self, Op, Residency};
use super::hot_hole;
use super::io::offload;
use super::open::{pread_full, OpenFile};
use super::pool::{Lane, ThreadPool};
use super::readahead;
use super::sent::{self, counted, Route};
use super::types::{file_error, socket_side};
use super::Disk;

/// Largest copy of the copy fast path per call (the caller also bounds it
/// by `sendfile_max_chunk`): large enough that a big cached file costs few
/// system calls, small enough to stay in the CPU's cache.
const COPY_MAX: usize = 256 * 1024;

/// A miss of at most this much (missing pages) is one small disk read:
/// the pool's short lane.
pub(in crate::disk) const SHORT_MISS: u64 = 64 * 1024;

/// How the fast path decided one send.
enum Decision {
    /// Every page of the range is readable now: `sendfile` inline.
    Inline,
    /// `cachestat` refused the file: try the copy fast path.
    Copy,
    /// To the pool, in `lane`; `kept_off` when the range was resident but
    /// a recent pool read may still hold pages of it (no new note then).
    Pool { kept_off: bool, lane: Lane },
}

/// A send the loop hands to the pool: its lane, whether pages were
/// missing (not only still being read in by readahead), and how many
/// bytes from the offset a bulk task asks the disk for (one window,
/// `readahead`).
struct Miss {
    lane: Lane,
    missed: bool,
    read: u64,
}

/// The lane of a send missing `missing` of its pages.
fn lane_for(missing: u64) -> Lane {
    if missing * fastpath::page_size() <= SHORT_MISS {
        Lane::Short
    } else {
        Lane::Bulk
    }
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
        let r = self.send_range(stream, f, offset, count).await;
        if matches!(r, Ok(n) if n > 0) {
            f.sent_any.set(true);
            self.read_ahead(f, *offset);
        }
        r
    }

    /// A cold stream's next window, asked for while its client takes the
    /// last one (`readahead`: one window ahead).
    fn read_ahead(&self, f: &OpenFile, offset: u64) {
        if let Some(ring) = &f.io.ring {
            ring.read_ahead(f, &self.hot, offset);
        } else if let Some(pool) = &f.io.pool {
            readahead::ahead_on_pool(pool, f, &self.hot, offset);
        }
    }

    /// [`Disk::sendfile`], before noting that the open file sent bytes.
    async fn send_range(
        &self,
        stream: &TcpStream,
        f: &OpenFile,
        offset: &mut u64,
        count: usize,
    ) -> io::Result<usize> {
        let inline_sendfile = |offset: &mut u64| {
            let r = stream
                .try_io(Interest::WRITABLE, || {
                    sendfile_some(stream, &f.file, offset, count)
                })
                .map_err(sendfile_error);
            counted(Route::Sendfile, r)
        };
        if let Some(ring) = &f.io.ring {
            return ring.send_file(stream, f, self, offset, count).await;
        }
        let Some(pool) = &f.io.pool else {
            return inline_sendfile(offset);
        };
        // A window being read ahead: wait for it rather than read it again.
        if let Some(ahead) = readahead::take_ahead(f, *offset) {
            ahead.done().await;
        }
        let len = (count as u64).min(f.meta.size.saturating_sub(*offset));
        let (mut kept_off, mut lane) = (false, Lane::Bulk);
        if f.io.fast {
            match self.decide(f, *offset, len) {
                Decision::Inline => {
                    fastpath::count(Op::Sendfile, true);
                    let at = *offset;
                    let r = inline_sendfile(offset);
                    if let Ok(n) = &r {
                        self.hot.saw_cached(f, at, *n as u64);
                    }
                    return r;
                }
                Decision::Copy => {
                    if let Some(r) = self.copy_send(pool, stream, f, offset, len).await {
                        return r;
                    }
                }
                Decision::Pool {
                    kept_off: k,
                    lane: l,
                } => {
                    fastpath::count(Op::Sendfile, false);
                    if l == Lane::Bulk {
                        if let Some(r) = self.counted_miss(pool, stream, f, offset, len).await {
                            return r;
                        }
                    }
                    (kept_off, lane) = (k, l);
                }
            }
        }
        if f.io.fast && !kept_off {
            // a real miss: the sendfile to come will start readahead
            fastpath::note_offloaded(f.meta.id);
        }
        // A cold range is read one window at a time (`readahead`): the
        // stream's next send starts where this window ends.
        let read = match lane {
            Lane::Bulk => {
                let read = readahead::read_len(f, *offset, len);
                self.hot.saw_cold(f, *offset, read);
                read
            }
            Lane::Short => len,
        };
        let miss = Miss {
            lane,
            missed: !kept_off,
            read,
        };
        sendfile_on_pool(pool, miss, stream, f, offset, count, len).await
    }

    /// The copy fast path's send: what the page cache holds at `offset`,
    /// else [`Disk::copy_miss`]. `None`: a cold range, for the bulk lane.
    async fn copy_send(
        &self,
        pool: &ThreadPool,
        stream: &TcpStream,
        f: &OpenFile,
        offset: &mut u64,
        len: u64,
    ) -> Option<io::Result<usize>> {
        // Where a cold stream's last window ended nothing is read yet: no
        // probe (it would queue a page of its own).
        if !readahead::at_window_end(f, &self.hot, *offset) {
            if let Some(r) = self.copy_counted(stream, f, offset, len) {
                fastpath::count(Op::Sendfile, true);
                return Some(r);
            }
        }
        fastpath::count(Op::Sendfile, false);
        self.copy_miss(pool, stream, f, offset, len).await
    }

    /// A miss of the copy fast path at `offset`: a hot file's large hole
    /// read a moment ago is sent from its buffer; a small hole is read
    /// alone, in the short lane, and the copy goes on; a larger one in a
    /// hot file is read with direct I/O (`hot_hole`), also in the short
    /// lane. `None`: a cold range (a cold stream's miss is never probed as
    /// a hole, `readahead`), for the bulk lane.
    async fn copy_miss(
        &self,
        pool: &ThreadPool,
        stream: &TcpStream,
        f: &OpenFile,
        offset: &mut u64,
        len: u64,
    ) -> Option<io::Result<usize>> {
        if let Some(r) = self.hot.send_kept(stream, f, offset, len) {
            return Some(r);
        }
        if len <= SHORT_MISS || !readahead::cold_stream(f, &self.hot) {
            if let Some(hole) = fastpath::small_hole(&f.file, *offset, len, SHORT_MISS) {
                if let Err(e) = self.fill_hole_once(pool, f, *offset, hole).await {
                    return Some(Err(e));
                }
                if let Some(r) = self.copy_counted(stream, f, offset, len) {
                    return Some(r);
                }
            } else if let Some(r) = self.send_hot_hole(pool, stream, f, offset, len).await {
                return Some(r);
            }
        }
        None
    }

    /// A miss of more than a small hole that `cachestat` counted (the
    /// workers' own files): a hot file's large hole read a moment ago is
    /// sent from its buffer, one not yet read is read with direct I/O on
    /// the short lane (`hot_hole`), as on the copy fast path. The range may
    /// run into the hole from cached pages: those are sent first, as the
    /// copy fast path does, and the next send meets the hole at its start.
    /// `None`: a cold range (or a cold stream's miss), for the bulk lane.
    async fn counted_miss(
        &self,
        pool: &ThreadPool,
        stream: &TcpStream,
        f: &OpenFile,
        offset: &mut u64,
        len: u64,
    ) -> Option<io::Result<usize>> {
        if let Some(r) = self.hot.send_kept(stream, f, offset, len) {
            return Some(r);
        }
        if readahead::cold_stream(f, &self.hot) || !self.hot.is_hot(f) {
            return None;
        }
        let cached = fastpath::cached_prefix(&f.file, *offset, len)?;
        if cached > 0 {
            // All cached: the send is inline or short, never back here.
            let r = Box::pin(self.send_range(stream, f, offset, cached as usize));
            return Some(r.await);
        }
        self.send_hot_hole(pool, stream, f, offset, len).await
    }

    /// A miss at `*offset` of a file hot on this worker that is a hole
    /// larger than a small one (`HotHoles::hole`): read once with direct
    /// I/O on the pool's short lane and sent from the kept bytes. `None`:
    /// not hot, or not such a hole (a cold range).
    pub(super) async fn send_hot_hole(
        &self,
        pool: &ThreadPool,
        stream: &TcpStream,
        f: &OpenFile,
        offset: &mut u64,
        len: u64,
    ) -> Option<io::Result<usize>> {
        let hole = self.hot.hole(f, *offset, len)?;
        if let Err(e) = self.read_hole_once(pool, f, *offset, hole).await {
            return Some(Err(e));
        }
        self.hot.send_kept(stream, f, offset, len)
    }

    /// The fast path's decision for `len` bytes of `f` at `offset`.
    fn decide(&self, f: &OpenFile, offset: u64, len: u64) -> Decision {
        let features = fastpath::features();
        let mut counts = None;
        if features.cachestat && !f.cachestat_denied.get() {
            counts = fastpath::cached_pages(&f.file, offset, len);
            f.cachestat_denied.set(counts.is_none());
        }
        let Some((resident, pages)) = counts else {
            return if features.read_nowait {
                Decision::Copy
            } else {
                Decision::Pool {
                    kept_off: false,
                    lane: Lane::Bulk,
                }
            };
        };
        if resident < pages {
            return Decision::Pool {
                kept_off: false,
                lane: lane_for(pages - resident),
            };
        }
        // Resident is not enough: a page readahead has inserted but not yet
        // filled counts too. After a pool read of this file its readahead
        // may hold locked pages anywhere in the range (see
        // `note_offloaded`), so every page is checked; else the ends (see
        // `ends_readable`).
        let recent = fastpath::recently_offloaded(f.meta.id);
        let readable = if !features.read_nowait {
            !recent
        } else if recent {
            fastpath::all_readable(&f.file, offset, len)
        } else {
            fastpath::ends_readable(&f.file, offset, len)
        };
        if readable {
            Decision::Inline
        } else {
            Decision::Pool {
                kept_off: recent,
                lane: Lane::Short,
            }
        }
    }

    /// [`Disk::copy_nowait`], counting what came from the page cache
    /// towards the file's hotness (`hot_hole`).
    fn copy_counted(
        &self,
        stream: &TcpStream,
        f: &OpenFile,
        offset: &mut u64,
        len: u64,
    ) -> Option<io::Result<usize>> {
        let at = *offset;
        let r = self.copy_nowait(stream, f, offset, len as usize)?;
        if let Ok(sent) = &r {
            self.hot.saw_cached(f, at, *sent as u64);
        }
        Some(r)
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
        let r = send_now(stream, &buf[..got]).inspect(|&s| *offset += s as u64);
        Some(counted(Route::Copy, r))
    }
}

/// `send`s what the socket takes of `bytes` now, without waiting
/// (`WouldBlock` when it takes nothing) and without `SIGPIPE`: how every
/// copy route of the disk layer hands a buffer to the client.
pub(super) fn send_now(stream: &TcpStream, bytes: &[u8]) -> io::Result<usize> {
    stream.try_io(Interest::WRITABLE, || {
        rustix::net::send(stream, bytes, rustix::net::SendFlags::NOSIGNAL).map_err(io::Error::from)
    })
}

/// Reads the `len` bytes at `offset` of `f` on the pool's short lane, so
/// that they are in the page cache when the loop copies them.
async fn fill_hole(pool: &ThreadPool, f: &OpenFile, offset: u64, len: u64) -> io::Result<()> {
    let file = f.file.clone();
    offload(pool, Lane::Short, move || {
        let mut buf = vec![0u8; len as usize];
        pread_full(&file, &mut buf, offset).map(drop)
    })
    .await
    .map_err(|e| file_error("pread", e))
}

impl Disk {
    /// [`fill_hole`], once per hole on this worker: a hot file that loses
    /// a page is asked for by many connections at once, and all of them
    /// wait for the one read (then copy again from the page cache) instead
    /// of each queueing its own.
    async fn fill_hole_once(
        &self,
        pool: &ThreadPool,
        f: &OpenFile,
        offset: u64,
        len: u64,
    ) -> io::Result<()> {
        self.once(f, offset, fill_hole(pool, f, offset, len)).await
    }

    /// A hot file's hole of `len` bytes at `offset`, larger than a small
    /// one: read once on this worker with direct I/O on the pool's short
    /// lane (`hot_hole::read_hole`), and kept for the requests that meet
    /// it until the page cache has it again.
    async fn read_hole_once(
        &self,
        pool: &ThreadPool,
        f: &OpenFile,
        offset: u64,
        len: u64,
    ) -> io::Result<()> {
        let read = async {
            let (file, size) = (f.file.clone(), f.meta.size);
            let bytes = offload(pool, Lane::Short, move || {
                hot_hole::read_hole(&file, size, offset, len)
            })
            .await
            .map_err(|e| file_error("pread", e))?;
            self.hot.keep(f, offset, bytes);
            Ok(())
        };
        self.once(f, offset, read).await
    }

    /// Runs `read` for the hole of `f` at `offset` unless another request
    /// on this worker is reading it; then waits for that read instead.
    async fn once(
        &self,
        f: &OpenFile,
        offset: u64,
        read: impl std::future::Future<Output = io::Result<()>>,
    ) -> io::Result<()> {
        let key = (f.meta.id.0, f.meta.id.1, offset);
        let pending = self.fills.borrow().get(&key).cloned();
        if let Some(done) = pending {
            // Created before the read can end (one thread), so the wake-up
            // cannot be missed.
            done.notified().await;
            return Ok(());
        }
        let done = std::rc::Rc::new(tokio::sync::Notify::new());
        self.fills.borrow_mut().insert(key, done.clone());
        // Dropped with this future too (the client went away): the
        // waiters then look again and read the hole themselves.
        let _owner = HoleOwner {
            disk: self,
            key,
            done,
        };
        read.await
    }
}

/// The read of one hole on this worker: when it ends (or is dropped),
/// the hole leaves the map and its waiters wake.
struct HoleOwner<'a> {
    disk: &'a Disk,
    key: (u64, u64, u64),
    done: std::rc::Rc<tokio::sync::Notify>,
}

impl Drop for HoleOwner<'_> {
    fn drop(&mut self) {
        self.disk.fills.borrow_mut().remove(&self.key);
        self.done.notify_waiters();
    }
}

/// One `sendfile` of at most `count` bytes by a thread of `pool`, on a
/// duplicate of the socket; `len` is what is left of the file in range.
async fn sendfile_on_pool(
    pool: &ThreadPool,
    miss: Miss,
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
    let Miss { lane, missed, read } = miss;
    let sent = offload(pool, lane, move || {
        let mut off = start;
        // Whether this call reads from the disk (and leaves readahead in
        // flight): asked here, when the task runs, not when it was queued
        // (where `cachestat` is refused, as the loop found it).
        let from_disk = fast
            && match fastpath::range_cached(&file, start, len) {
                Residency::Known(all) => !all,
                Residency::Denied => missed,
            };
        if lane == Lane::Bulk {
            // The kernel does no readahead on this descriptor (see
            // `fastpath::own_readahead`), and `sendfile` asks for a pipe's
            // worth (64 KiB) at a time: ask for the window in one request.
            readahead::ask(&file, start, read);
        }
        let r = sendfile_some(&sock, &file, &mut off, count);
        if lane == Lane::Bulk {
            // The gate counts this task until the whole window is in,
            // also where the socket took less than it.
            readahead::wait(&file, start, read);
        }
        if from_disk {
            fastpath::note_offloaded(id);
        }
        r
    })
    .await;
    match sent {
        Ok(n) => {
            *offset += n as u64;
            sent::count(Route::Pool, n);
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
