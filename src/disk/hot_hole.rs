//! A hot file that loses more than 64 KiB in a row (issue 11): a large
//! folio, or several neighbours taken at once by a memory cgroup's
//! reclaim. To the copy fast path such a hole looks like a cold range
//! (the byte 64 KiB on is missing too, `fastpath::small_hole`), and a cold
//! range waits behind the bulk gate and reads through the page cache —
//! 0.2–0.7 s for 256 KiB in a throttled cgroup, where the same read with
//! `O_DIRECT` took 29–112 ms (docs/design.md, *Miss scheduling*).
//!
//! So for a file known to be hot the hole is read once with direct I/O
//! on the pool's short lane, into a buffer this worker keeps for a moment
//! ([`KEEP_FOR`]) and sends from; the same task asks the page cache to
//! read the range back (`POSIX_FADV_WILLNEED`, no waiting), so the
//! requests after those few find it there again. What is hot:
//!
//! The same holds for the workers' own files, where `cachestat` counts
//! more than 64 KiB missing in a `sendfile`'s range (`Disk::sendfile`).
//!
//! - a request's open file served at least [`HOT_RUN`] bytes from the
//!   page cache that it did not read from the disk itself (a cold request
//!   misses its first byte, and then sends what its own reads brought
//!   in), or another request of the file did within [`HOT_FOR`];
//! - and the file is cached again just after the range to read (one more
//!   one-byte `RWF_NOWAIT` probe, asked only of hot files), or the range
//!   ends the file: a hole, not a file the page cache holds only the
//!   start of.
//!
//! Cold requests pay nothing: their first miss resets the run, and the
//! probe is never asked of them. The direct read is made on a second
//! descriptor opened `O_DIRECT` through `/proc/self/fd` (the flag cannot
//! be set on the shared one); where that fails (a file system without
//! direct I/O) the range is read buffered into the same buffer.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

use super::fastpath;
use super::open::OpenFile;
use super::send::send_now;
use super::sent::{counted, Route};

/// Bytes one open file must have served from the page cache (not read by
/// its own request) for its file to count as hot.
pub(super) const HOT_RUN: u64 = 1024 * 1024;
/// How long a file stays hot after a request found [`HOT_RUN`] cached.
const HOT_FOR: Duration = Duration::from_secs(2);
/// How long a hole read with direct I/O is kept for the requests that
/// meet it before the page cache has it again.
const KEEP_FOR: Duration = Duration::from_secs(1);
/// Holes kept per worker at most (each at most [`DIRECT_MAX`]).
const KEPT_MAX: usize = 8;
/// Largest direct read of a hole.
pub(super) const DIRECT_MAX: u64 = 256 * 1024;
/// Alignment of direct I/O (offset, length, buffer): a page covers every
/// logical block size in use.
const ALIGN: u64 = 4096;

/// A hole's bytes read with direct I/O: `buf[from..to]` is the file at
/// `offset`.
#[derive(Debug)]
pub(super) struct HoleBytes {
    buf: Vec<u8>,
    from: usize,
    to: usize,
}

#[derive(Debug)]
struct Kept {
    file: FileKey,
    offset: u64,
    bytes: Rc<HoleBytes>,
    at: Instant,
}

/// A file, as long as it is not changed: device, inode, ctime.
type FileKey = ((u64, u64), (i64, i64));

fn key(f: &OpenFile) -> FileKey {
    (f.meta.id, f.meta.changed)
}

/// One worker's hot files and kept holes.
#[derive(Debug, Default)]
pub(super) struct HotHoles {
    hot: RefCell<HashMap<(u64, u64), Instant>>,
    kept: RefCell<Vec<Kept>>,
}

impl HotHoles {
    /// The fast path sent `sent` bytes of `f` at `offset` from the page
    /// cache (the copy fast path, or a `sendfile` that `cachestat` found
    /// cached).
    pub(super) fn saw_cached(&self, f: &OpenFile, offset: u64, sent: u64) {
        if offset < f.own_until.get() {
            return;
        }
        let before = f.cached_run.get();
        let run = before + sent;
        f.cached_run.set(run);
        if before < HOT_RUN && run >= HOT_RUN {
            let now = Instant::now();
            let mut hot = self.hot.borrow_mut();
            if hot.len() >= 256 {
                hot.retain(|_, t| now.duration_since(*t) < HOT_FOR);
            }
            hot.insert(f.meta.id, now);
        }
    }

    /// A request of `f` reads `len` bytes at `offset` from the disk as a
    /// cold range.
    pub(super) fn saw_cold(&self, f: &OpenFile, offset: u64, len: u64) {
        f.cached_run.set(0);
        f.own_from.set(offset);
        f.own_until.set(offset + len);
    }

    /// Whether `f` is hot (see the module header).
    pub(super) fn is_hot(&self, f: &OpenFile) -> bool {
        if f.cached_run.get() >= HOT_RUN {
            return true;
        }
        let mut hot = self.hot.borrow_mut();
        match hot.get(&f.meta.id) {
            Some(t) if t.elapsed() < HOT_FOR => true,
            Some(_) => {
                hot.remove(&f.meta.id);
                false
            }
            None => false,
        }
    }

    /// For a miss at `offset` (at most `len` bytes wanted) that is not a
    /// small hole: the bytes to read with direct I/O when `f` is hot and
    /// cached again after them, else `None` (a cold range).
    pub(super) fn hole(&self, f: &OpenFile, offset: u64, len: u64) -> Option<u64> {
        if !self.is_hot(f) {
            return None;
        }
        let n = len.min(DIRECT_MAX);
        if offset + n >= f.meta.size {
            // The hole reaches the end of the file: nothing after it to ask.
            return Some(n);
        }
        cached_at(f, offset + n).then_some(n)
    }

    /// Keeps a hole's bytes for the requests that meet it next.
    pub(super) fn keep(&self, f: &OpenFile, offset: u64, bytes: HoleBytes) {
        let now = Instant::now();
        let mut kept = self.kept.borrow_mut();
        kept.retain(|k| now.duration_since(k.at) < KEEP_FOR);
        if kept.len() >= KEPT_MAX {
            kept.remove(0);
        }
        kept.push(Kept {
            file: key(f),
            offset,
            bytes: Rc::new(bytes),
            at: now,
        });
    }

    /// Sends at most `len` bytes of `f` at `*offset` from a kept hole
    /// that holds them (counted as the copy route); `None` when none does.
    pub(super) fn send_kept(
        &self,
        stream: &TcpStream,
        f: &OpenFile,
        offset: &mut u64,
        len: u64,
    ) -> Option<io::Result<usize>> {
        let (bytes, skip) = self.find(f, *offset)?;
        let slice = &bytes.buf[bytes.from + skip..bytes.to];
        let slice = &slice[..slice.len().min(len as usize)];
        let r = send_now(stream, slice).inspect(|&s| *offset += s as u64);
        Some(counted(Route::Copy, r))
    }

    /// The kept hole holding `f` at `offset`, and where in it.
    fn find(&self, f: &OpenFile, offset: u64) -> Option<(Rc<HoleBytes>, usize)> {
        let now = Instant::now();
        let mut kept = self.kept.borrow_mut();
        kept.retain(|k| now.duration_since(k.at) < KEEP_FOR);
        let file = key(f);
        kept.iter().find_map(|k| {
            let len = (k.bytes.to - k.bytes.from) as u64;
            (k.file == file && k.offset <= offset && offset < k.offset + len)
                .then(|| (k.bytes.clone(), (offset - k.offset) as usize))
        })
    }
}

/// Whether the byte at `offset` of `f` is in the page cache: `cachestat`
/// where it answers (no I/O), else a one-byte `RWF_NOWAIT` read.
fn cached_at(f: &OpenFile, offset: u64) -> bool {
    if fastpath::features().cachestat && !f.cachestat_denied.get() {
        if let fastpath::Residency::Known(all) = fastpath::range_cached(&f.file, offset, 1) {
            return all;
        }
    }
    let mut b = [0u8; 1];
    matches!(fastpath::read_nowait(&f.file, &mut b, offset), Ok(1))
}

/// Reads `len` bytes of `file` (of `size` bytes) at `offset` with direct
/// I/O (buffered where the file system refuses it), then asks the page
/// cache to read the range back. Runs on a pool thread.
pub(super) fn read_hole(file: &File, size: u64, offset: u64, len: u64) -> io::Result<HoleBytes> {
    let start = offset - offset % ALIGN;
    let end = (offset + len).min(size).div_ceil(ALIGN) * ALIGN;
    let span = (end - start) as usize;
    let mut buf = vec![0u8; span + ALIGN as usize];
    let pad = buf.as_ptr().align_offset(ALIGN as usize);
    let got = match super::direct::reopen(file) {
        Ok(d) => read_direct(&d, &mut buf[pad..pad + span], start, size),
        Err(_) => Err(io::ErrorKind::Unsupported.into()),
    };
    let got = match got {
        Ok(n) => n,
        // No direct I/O here: the same range, buffered.
        Err(_) => super::open::pread_full(file, &mut buf[pad..pad + span], start)?,
    };
    let from = pad + (offset - start) as usize;
    let to = (pad + got).min(from + len as usize).max(from);
    let _ = rustix::fs::fadvise(
        file,
        offset,
        std::num::NonZeroU64::new(len),
        rustix::fs::Advice::WillNeed,
    );
    Ok(HoleBytes { buf, from, to })
}

/// Reads `buf` (aligned, a multiple of [`ALIGN`]) at the aligned `start`
/// until it is full or the file (of `size` bytes) ends.
fn read_direct(d: &File, buf: &mut [u8], start: u64, size: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() && start + (done as u64) < size {
        match d.read_at(&mut buf[done..], start + done as u64) {
            Ok(0) => break,
            // A short read ends at the end of the file (or a block).
            Ok(n) if !(n as u64).is_multiple_of(ALIGN) => return Ok(done + n),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn temp_file(len: usize) -> File {
        let dir = std::env::temp_dir().join(format!("porter-hh-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(format!("f{len}"));
        let mut f = File::create(&p).unwrap();
        let body: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        f.write_all(&body).unwrap();
        f.sync_all().unwrap();
        File::open(&p).unwrap()
    }

    fn open(f: &File) -> OpenFile {
        let meta = super::super::FileMeta::from_stat(&rustix::fs::fstat(f).unwrap());
        let f = f.try_clone().unwrap();
        OpenFile::new(std::sync::Arc::new(f), meta, super::super::Io::inline())
    }

    #[test]
    fn only_a_file_served_from_the_page_cache_is_hot() {
        fastpath::probe();
        if !fastpath::features().read_nowait {
            return;
        }
        let len = 3 << 20;
        let file = temp_file(len);
        let holes = HotHoles::default();
        // A cold request: its first range missed, and what its own read
        // brought in does not count.
        let cold = open(&file);
        holes.saw_cold(&cold, 0, 2 << 20);
        holes.saw_cached(&cold, 0, 2 << 20);
        assert_eq!(holes.hole(&cold, 2 << 20, 512 * 1024), None);
        // A request that found 1 MiB cached makes the file hot, for the
        // next request of it too.
        let first = open(&file);
        holes.saw_cached(&first, 0, HOT_RUN);
        assert!(holes.is_hot(&first));
        let next = open(&file);
        assert!(holes.is_hot(&next));
        // A hole: cached again after the range.
        assert_eq!(holes.hole(&next, 0, 512 * 1024), Some(DIRECT_MAX));
        // Not cached after the range: a file the cache holds only the
        // start of, not a hole.
        rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed).unwrap();
        assert_eq!(holes.hole(&next, 0, 512 * 1024), None);
        // A hole that ends the file has nothing after it.
        let tail = len as u64 - 100_000;
        assert_eq!(holes.hole(&next, tail, 512 * 1024), Some(DIRECT_MAX));
    }

    #[test]
    fn a_hole_read_directly_holds_the_files_bytes() {
        let len = 300_000;
        let f = temp_file(len);
        for (offset, want) in [
            (0u64, 4096u64),
            (5000, 70_000),
            (299_000, 4096),
            (8192, 8192),
        ] {
            let h = read_hole(&f, len as u64, offset, want).unwrap();
            let end = (offset + want).min(len as u64);
            assert_eq!((h.to - h.from) as u64, end - offset, "at {offset}");
            let expect: Vec<u8> = (offset..end).map(|i| (i % 251) as u8).collect();
            assert!(h.buf[h.from..h.to] == expect[..], "bytes at {offset}");
        }
    }
}
