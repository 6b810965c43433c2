//! Porter's own readahead for cold streams (issue 27). The kernel's is off
//! on every file read through a pool or a ring (`fastpath::own_readahead`:
//! an 8 MiB window queued at the first read, counted by no pool, put a hot
//! file's lost page seconds behind it), so a cold read brings in only what
//! porter asks for — and porter used to ask for 64–128 KiB at a time,
//! split further by the fast path's one-page probes: on a disk limited by
//! operations per second (a hard disk, a cloud volume's quota) that met
//! the operation limit at a quarter of the bandwidth.
//!
//! So a request that reads a file from the disk is a **cold stream**, and
//! each of its reads asks for one [`window`]: 512 KiB, or less where the
//! device says so (`max_sectors_kb`, `read_ahead_kb` under
//! `/sys/dev/block/MAJ:MIN/queue/`). One window is one bulk task (one
//! place in the bulk gate, one request at the device). A stream knows
//! where its last window ended (`OpenFile::own_until`): a send that
//! reaches that offset goes straight to the next window's read, without
//! the one-byte `RWF_NOWAIT` probe that would queue a page of its own, and
//! a cold stream's miss is never probed as a hole (the probe one 64 KiB
//! on is one more page read). Holes in hot files and small files keep
//! their short reads (`hot_hole`, `fastpath::small_hole`).
//!
//! **One window ahead** (double buffering): once a cold stream's window is
//! read, the next one is asked for at once ([`Ahead`]: a bulk task of the
//! pool, or under `aio on` a ring read holding a place in the ring's gate),
//! so the disk reads while the client takes the window before. No further:
//! the window after is asked only when the client has reached the one
//! read ahead. A send that reaches a window still being read waits for
//! that read ([`take_ahead`]) rather than asking for its own, which would
//! split it. Both reads are bulk reads: the gate counts them, and the
//! short lane still passes them.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::fastpath;
use super::hot_hole::HotHoles;
use super::open::OpenFile;
use super::pool::{Lane, ThreadPool};

/// The largest read of a cold stream: large enough that a disk limited by
/// operations is limited by its bytes instead (40 MB/s at 200 reads/s
/// needs 200 KB a read), small enough that a hot file's hole waits behind
/// at most the bulk gate's few windows at the device (2 × 512 KiB ≈ 26 ms
/// at 40 MB/s).
pub(super) const WINDOW: u64 = 512 * 1024;
/// The smallest window, whatever the device says: a small hole's read.
const WINDOW_MIN: u64 = 64 * 1024;

/// The window for a device that takes at most `max_sectors_kb` in one
/// request and reads ahead `read_ahead_kb` (either unknown: `None`; a
/// `read_ahead_kb` of 0 only turns the kernel's readahead off, which
/// porter's is not).
pub(super) fn window_for(max_sectors_kb: Option<u64>, read_ahead_kb: Option<u64>) -> u64 {
    let mut w = WINDOW;
    for kb in [max_sectors_kb, read_ahead_kb].into_iter().flatten() {
        if kb > 0 {
            w = w.min(kb * 1024);
        }
    }
    w.max(WINDOW_MIN)
}

/// The block queue directory of device `dev` (`st_dev`): its own for a
/// whole disk, its disk's for a partition; `None` for a file system on no
/// block device (tmpfs, FUSE, NFS).
fn queue_dir(dev: u64) -> Option<PathBuf> {
    let sys = PathBuf::from(format!(
        "/sys/dev/block/{}:{}",
        libc::major(dev),
        libc::minor(dev)
    ));
    [sys.join("queue"), sys.join("../queue")]
        .into_iter()
        .find(|q| q.join("max_sectors_kb").exists())
}

fn read_kb(dir: &Path, name: &str) -> Option<u64> {
    std::fs::read_to_string(dir.join(name))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The window of cold reads from device `dev`: read from sysfs once per
/// device and process (a few small reads of memory-backed files), then a
/// map lookup.
pub(super) fn window(dev: u64) -> u64 {
    static WINDOWS: OnceLock<Mutex<HashMap<u64, u64>>> = OnceLock::new();
    let map = WINDOWS.get_or_init(Default::default);
    if let Some(&w) = map.lock().unwrap_or_else(|e| e.into_inner()).get(&dev) {
        return w;
    }
    let w = match queue_dir(dev) {
        Some(q) => window_for(read_kb(&q, "max_sectors_kb"), read_kb(&q, "read_ahead_kb")),
        None => WINDOW,
    };
    map.lock().unwrap_or_else(|e| e.into_inner()).insert(dev, w);
    w
}

/// Whether a miss of `f` is a cold stream's: the request has read cold
/// windows and not met the page cache since (a hot run resets it), or
/// this is its first send and its file is not hot on this worker.
pub(super) fn cold_stream(f: &OpenFile, hot: &HotHoles) -> bool {
    if f.own_until.get() > 0 {
        return f.cached_run.get() == 0;
    }
    !f.sent_any.get() && !hot.is_hot(f)
}

/// Whether the send at `offset` is where `f`'s last cold window ended: the
/// bytes there were not read, and a probe would only queue a page of its
/// own before the window's read.
pub(super) fn at_window_end(f: &OpenFile, hot: &HotHoles, offset: u64) -> bool {
    let end = f.own_until.get();
    end > 0 && offset == end && cold_stream(f, hot)
}

/// Where `f`'s cold stream ends: the end of the range the response sends
/// (`OpenFile::send_until`), or of the file.
fn stream_end(f: &OpenFile) -> u64 {
    f.meta.size.min(f.range_end.get())
}

/// The bytes a cold read at `offset` of `f` asks for: a window, never past
/// the end of the range being sent (bytes the response does not send
/// would be read for nothing, and may be a hot file's hole that then
/// waits behind the window), at least `want`, never past the end of the
/// file.
pub(super) fn read_len(f: &OpenFile, offset: u64, want: u64) -> u64 {
    window(f.meta.id.0)
        .min(stream_end(f).saturating_sub(offset))
        .max(want)
        .min(f.meta.size.saturating_sub(offset))
}

/// Asks the page cache to read `len` bytes of `f` at `offset` now, in one
/// request (`POSIX_FADV_WILLNEED` starts the reads and does not wait).
pub(super) fn ask(f: &File, offset: u64, len: u64) {
    let _ = rustix::fs::fadvise(
        f,
        offset,
        std::num::NonZeroU64::new(len),
        rustix::fs::Advice::WillNeed,
    );
}

/// Waits until the window [`ask`]ed for at `offset` is read: its last
/// byte, read through the page cache, is ready when the window's request
/// completes (a pool thread's wait; a miss there reads one page).
pub(super) fn wait(f: &File, offset: u64, len: u64) {
    if len > 0 {
        let mut b = [0u8; 1];
        let _ = std::os::unix::fs::FileExt::read_at(f, &mut b, offset + len - 1);
    }
}

/// A window asked for ahead of a cold stream's client: `start..end`, being
/// read or read.
#[derive(Debug)]
pub(super) struct Ahead {
    start: u64,
    end: u64,
    read: AheadRead,
}

/// How an [`Ahead`] window is read.
#[derive(Debug)]
pub(super) enum AheadRead {
    /// A bulk task of the pool: the window is in the page cache when it
    /// ends.
    Pool(oneshot::Receiver<io::Result<()>>),
    /// A ring read (`aio on`, a local task with a place in the ring's
    /// gate): the window's bytes and how many were read.
    Ring(JoinHandle<io::Result<(Vec<u8>, usize)>>),
}

impl Ahead {
    /// Waits for the window's read: its bytes (`start`, buffer, length)
    /// when a ring read them, `None` when they are in the page cache — or
    /// the read failed, and the send then reads for itself.
    pub(super) async fn done(self) -> Option<(u64, Vec<u8>, usize)> {
        match self.read {
            AheadRead::Pool(rx) => {
                let _ = rx.await;
                None
            }
            AheadRead::Ring(task) => match task.await {
                Ok(Ok((buf, n))) => Some((self.start, buf, n)),
                _ => None,
            },
        }
    }
}

/// The window to ask for ahead of `f`'s client, now at `offset`: the one
/// after the last asked, when `f` is a cold stream on a route with a
/// pool or a ring, nothing is being read ahead, the client has reached
/// the last window asked (so at most one window ahead of it), and the
/// range being sent goes on (never past its last byte). `(start, len)`.
pub(super) fn next_window(f: &OpenFile, hot: &HotHoles, offset: u64) -> Option<(u64, u64)> {
    let until = f.own_until.get();
    let due = f.io.fast
        && until > 0
        && until < stream_end(f)
        && offset >= f.own_from.get()
        && f.ahead.borrow().is_none()
        && cold_stream(f, hot);
    due.then(|| (until, read_len(f, until, 0)))
}

/// Notes that `len` bytes of `f` at `start` are being read ahead by
/// `read`: the stream's windows now end there.
pub(super) fn asked(f: &OpenFile, hot: &HotHoles, start: u64, len: u64, read: AheadRead) {
    hot.saw_cold(f, start, len);
    *f.ahead.borrow_mut() = Some(Ahead {
        start,
        end: start + len,
        read,
    });
}

/// Asks `pool` for the window after `f`'s last (see [`next_window`]): a
/// bulk task that asks for it in one request and ends when it is in the
/// page cache. A full pool reads nothing ahead.
pub(super) fn ahead_on_pool(pool: &ThreadPool, f: &OpenFile, hot: &HotHoles, offset: u64) {
    let Some((start, len)) = next_window(f, hot, offset) else {
        return;
    };
    let (file, id) = (f.file.clone(), f.meta.id);
    let task = pool.submit_in(Lane::Bulk, move || {
        ask(&file, start, len);
        wait(&file, start, len);
        // Its pages were read by the pool, maybe still locked at the
        // edges: the loop checks them page by page before a `sendfile`.
        fastpath::note_offloaded(id);
        Ok(())
    });
    if let Ok(rx) = task {
        asked(f, hot, start, len, AheadRead::Pool(rx));
    }
}

/// The window read ahead of `f`'s client that holds `offset`, to wait for.
/// One the client has left behind (a request that moved on) is dropped:
/// its read ends unheeded.
pub(super) fn take_ahead(f: &OpenFile, offset: u64) -> Option<Ahead> {
    let mut slot = f.ahead.borrow_mut();
    let (start, end) = slot.as_ref().map(|a| (a.start, a.end))?;
    if offset < start {
        return None;
    }
    let a = slot.take();
    a.filter(|_| offset < end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_window_is_512k_unless_the_device_takes_less() {
        assert_eq!(window_for(None, None), 512 * 1024);
        assert_eq!(window_for(Some(4096), Some(8192)), 512 * 1024);
        assert_eq!(window_for(Some(256), Some(8192)), 256 * 1024);
        assert_eq!(window_for(Some(1280), Some(128)), 128 * 1024);
        // read_ahead_kb 0 turns the kernel's readahead off, not porter's
        assert_eq!(window_for(Some(1024), Some(0)), 512 * 1024);
        assert_eq!(window_for(Some(4), Some(4)), 64 * 1024);
    }

    #[test]
    fn the_window_of_this_disk_is_what_its_queue_says() {
        let dev = std::fs::metadata(std::env::temp_dir()).unwrap().dev();
        let w = window(dev);
        assert_eq!(w, window(dev), "read once, then the same");
        match queue_dir(dev) {
            Some(q) => {
                let want = window_for(read_kb(&q, "max_sectors_kb"), read_kb(&q, "read_ahead_kb"));
                assert_eq!(w, want);
                assert!(read_kb(&q, "max_sectors_kb").is_some());
            }
            None => assert_eq!(w, WINDOW),
        }
    }

    #[test]
    fn a_device_with_no_block_queue_gets_the_default_window() {
        // major 0: anonymous devices (tmpfs, FUSE, overlay)
        assert_eq!(queue_dir(libc::makedev(0, 4242)), None);
        assert_eq!(window(libc::makedev(0, 4242)), WINDOW);
    }
}
