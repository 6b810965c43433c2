//! Sending a file range under `aio on` without plain `sendfile`, which has
//! no non-blocking form and can sleep on a page evicted after any check:
//! what the page cache holds is copied with `preadv2(RWF_NOWAIT)` (the
//! fast path), anything else is read through the ring (a hot file's hole
//! larger than a small one: with direct I/O on the pool, `hot_hole`), and
//! the bytes are `send`t on the non-blocking socket. Bytes the full
//! socket did not take stay with the [`OpenFile`] ([`Unsent`], keyed by
//! file offset) and go first on the next call: nothing is read twice or
//! lost.

use std::io;
use std::rc::Rc;

use tokio::net::TcpStream;

use super::Ring;
use crate::disk::fastpath::{self, Op};
use crate::disk::hot_hole::HotHoles;
use crate::disk::open::OpenFile;
use crate::disk::readahead;
use crate::disk::send::{send_now, SHORT_MISS};
use crate::disk::sent::{self, Route};
use crate::disk::types::file_error;
use crate::disk::Disk;

/// Largest read per send (the caller also bounds it by
/// `sendfile_max_chunk`), as the copy fast path's.
const SEND_MAX: usize = 256 * 1024;

/// Bytes read for a send that the socket has not taken yet:
/// `buf[start..end]` belongs at file offset `offset`.
#[derive(Debug)]
pub struct Unsent {
    offset: u64,
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

/// A miss at `*offset` of a file hot on this worker that is a hole larger
/// than a small one: read once with direct I/O on the pool's short lane
/// and sent from the kept bytes, as under `aio threads` (`hot_hole`), not
/// through the ring's gate as a cold range. `None`: not such a hole (a
/// small one, a cold range, a cold stream's window), for the ring.
async fn hot_hole(
    stream: &TcpStream,
    f: &OpenFile,
    disk: &Disk,
    offset: &mut u64,
    len: usize,
) -> Option<io::Result<usize>> {
    let (hot, len) = (&disk.hot, len as u64);
    if let Some(r) = hot.send_kept(stream, f, offset, len) {
        return Some(r);
    }
    let pool = f.io.pool.as_ref()?;
    if !hot.is_hot(f)
        || readahead::cold_stream(f, hot)
        || fastpath::small_hole(&f.file, *offset, len, SHORT_MISS).is_some()
    {
        return None;
    }
    disk.send_hot_hole(pool, stream, f, offset, len).await
}

impl Ring {
    /// Sends at most `count` bytes of `f` from `*offset` and advances it:
    /// bytes kept from the last call first, else a read (page cache
    /// inline, or the ring) and a `send`. `WouldBlock`: the socket is full
    /// (what was read is kept); `Ok(0)`: the file ended early.
    pub(in crate::disk) async fn send_file(
        self: &Rc<Self>,
        stream: &TcpStream,
        f: &OpenFile,
        disk: &Disk,
        offset: &mut u64,
        count: usize,
    ) -> io::Result<usize> {
        let hot = &disk.hot;
        let kept = f.unsent.borrow_mut().take();
        if let Some(u) = kept {
            if u.offset == *offset {
                return self.send_kept(stream, f, u, offset, count);
            }
            // Another range of the file: the caller moved on.
            self.give_back(u.buf);
        }
        // A window read ahead (`readahead`): its bytes, once read.
        if let Some(ahead) = readahead::take_ahead(f, *offset) {
            if let Some((start, buf, n)) = ahead.done().await {
                if *offset < start + n as u64 {
                    let u = Unsent {
                        offset: *offset,
                        buf,
                        start: (*offset - start) as usize,
                        end: n,
                    };
                    return self.send_kept(stream, f, u, offset, count);
                }
                self.give_back(buf);
            }
        }
        let left = f.meta.size.saturating_sub(*offset);
        let len = (count as u64).min(left).min(SEND_MAX as u64) as usize;
        if len == 0 {
            return Ok(0);
        }
        // A cold stream reads one window at a time (`readahead`); the
        // socket takes it over the next sends, from `Unsent`.
        let window = readahead::read_len(f, *offset, len as u64) as usize;
        let mut buf = self.buffer(len.max(window));
        let mut got = 0;
        // Where a cold stream's last window ended nothing is read yet: no
        // probe (it would queue a page of its own).
        let fast = f.io.fast && !readahead::at_window_end(f, hot, *offset);
        if fast && fastpath::features().read_nowait {
            got = match fastpath::read_nowait(&f.file, &mut buf[..len], *offset) {
                Ok(n) => n,
                Err(e) => {
                    self.give_back(buf);
                    return Err(file_error("pread", e));
                }
            };
            fastpath::count(Op::Sendfile, got > 0);
            if got == 0 {
                // a real miss: the read to come will start readahead
                fastpath::note_offloaded(f.meta.id);
            } else {
                hot.saw_cached(f, *offset, got as u64);
            }
        }
        if got == 0 && f.io.fast {
            if let Some(r) = hot_hole(stream, f, disk, offset, len).await {
                self.give_back(buf);
                return r;
            }
        }
        if got == 0 {
            // A small hole in a cached range is read at once; a cold range
            // (a cold stream's miss is never probed as a hole) waits for a
            // place in the ring's gate, so that the disk's queue stays
            // short for such holes, and reads a whole window.
            let hole = f.io.fast
                && (len as u64 <= SHORT_MISS || !readahead::cold_stream(f, hot))
                && fastpath::small_hole(&f.file, *offset, len as u64, SHORT_MISS).is_some();
            let _permit = if hole {
                None
            } else {
                Some(self.cold_permit().await)
            };
            let read = if hole { len } else { window };
            if !hole {
                hot.saw_cold(f, *offset, read as u64);
            }
            // A cold range goes straight to an io-wq thread: submitted
            // here, the kernel would allocate its page-cache pages on the
            // loop, and under a memory cgroup's limit that allocation
            // reclaims first (seen as 15-30 ms asleep in S1).
            let punt = !hole || f.ring_punts(*offset);
            let (r, b) = self.read(&f.file, buf, 0..read, *offset, punt).await;
            buf = b;
            got = match r {
                Ok(0) | Err(_) => {
                    self.give_back(buf);
                    return r.map_err(|e| file_error("pread", e));
                }
                Ok(n) => n,
            };
        }
        let u = Unsent {
            offset: *offset,
            buf,
            start: 0,
            end: got,
        };
        self.send_kept(stream, f, u, offset, count)
    }

    /// Reads the window after `f`'s last ahead of its client, now at
    /// `offset` (see `readahead::next_window`): a local task that waits for
    /// a place in the ring's gate, as the stream's own cold reads do, and
    /// reads the window into a buffer for the send that reaches it.
    pub(in crate::disk) fn read_ahead(self: &Rc<Self>, f: &OpenFile, hot: &HotHoles, offset: u64) {
        let Some((start, len)) = readahead::next_window(f, hot, offset) else {
            return;
        };
        let (ring, file) = (self.clone(), f.file.clone());
        let task = tokio::task::spawn_local(async move {
            let _permit = ring.cold_permit().await;
            let buf = ring.buffer(len as usize);
            // Punted to io-wq, as every cold read (see `send_file`).
            let (r, buf) = ring.read(&file, buf, 0..len as usize, start, true).await;
            match r {
                Ok(n) => Ok((buf, n)),
                Err(e) => {
                    ring.give_back(buf);
                    Err(e)
                }
            }
        });
        readahead::asked(f, hot, start, len, readahead::AheadRead::Ring(task));
    }

    /// `send`s up to `count` bytes of `u`; keeps what the socket does not
    /// take.
    fn send_kept(
        &self,
        stream: &TcpStream,
        f: &OpenFile,
        mut u: Unsent,
        offset: &mut u64,
        count: usize,
    ) -> io::Result<usize> {
        let n = (u.end - u.start).min(count);
        let bytes = &u.buf[u.start..u.start + n];
        match send_now(stream, bytes) {
            Ok(s) => {
                sent::count(Route::Uring, s);
                *offset += s as u64;
                u.offset += s as u64;
                u.start += s;
                if u.start < u.end {
                    *f.unsent.borrow_mut() = Some(u);
                } else {
                    self.give_back(u.buf);
                }
                Ok(s)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                *f.unsent.borrow_mut() = Some(u);
                Err(e)
            }
            Err(e) => {
                self.give_back(u.buf);
                Err(e)
            }
        }
    }
}
