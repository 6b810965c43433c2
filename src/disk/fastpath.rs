//! The page-cache fast path: system calls that either finish at once from
//! memory or say they would block, so the event loop can try them inline
//! and hand only the misses to a thread pool.
//!
//! - `openat2(RESOLVE_CACHED)`: the path walk uses only the dentry cache;
//!   `EAGAIN` when any component would need the disk.
//! - `preadv2(RWF_NOWAIT)`: copies only pages already in the page cache;
//!   a short read or `EAGAIN` says where the cache stops.
//! - `cachestat()` (Linux 6.5, syscall 451): how many pages of a range are
//!   resident, asked before an inline `sendfile`, which has no NOWAIT flag.
//!
//! rustix wraps the first two; `cachestat` has no wrapper in rustix or libc
//! yet, so it is called by number here.
//!
//! Support is probed once at start ([`probe`]); anything missing falls back
//! to "always offload" and is logged once at `notice`.

use std::fs::File;
use std::io::{self, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::ReadWriteFlags;

/// `cachestat` on every Linux architecture (the generic syscall table).
const SYS_CACHESTAT: libc::c_long = 451;

/// Which fast-path calls this kernel supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// `openat2` with `RESOLVE_CACHED`.
    pub open_cached: bool,
    /// `preadv2` with `RWF_NOWAIT`.
    pub read_nowait: bool,
    /// `cachestat`.
    pub cachestat: bool,
}

static FEATURES: OnceLock<Features> = OnceLock::new();

/// What [`probe`] found (all false before it ran).
pub fn features() -> Features {
    FEATURES.get().copied().unwrap_or(Features {
        open_cached: false,
        read_nowait: false,
        cachestat: false,
    })
}

fn unsupported(e: rustix::io::Errno) -> bool {
    matches!(
        e,
        rustix::io::Errno::NOSYS | rustix::io::Errno::INVAL | rustix::io::Errno::OPNOTSUPP
    )
}

/// Probes the kernel once; returns a line for each missing feature (for
/// the caller to log at `notice`).
pub fn probe() -> Vec<String> {
    page_size();
    let mut missing = Vec::new();
    let open_cached = match rustix::fs::openat2(
        rustix::fs::CWD,
        "/",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::CACHED,
    ) {
        Ok(_) => true,
        Err(rustix::io::Errno::AGAIN) => true,
        Err(e) => {
            missing.push(format!(
                "openat2(RESOLVE_CACHED) is not supported ({}: {}), every open() is offloaded",
                e.raw_os_error(),
                crate::util::errno_text(&io::Error::from(e))
            ));
            false
        }
    };
    let exe = std::env::current_exe().and_then(File::open);
    let (read_nowait, cachestat) = match exe {
        Ok(f) => {
            let mut b = [0u8; 1];
            let read_nowait = match rustix::io::preadv2(
                &f,
                &mut [IoSliceMut::new(&mut b)],
                0,
                ReadWriteFlags::NOWAIT,
            ) {
                Ok(_) | Err(rustix::io::Errno::AGAIN) => true,
                Err(e) if unsupported(e) => {
                    missing.push(format!(
                        "preadv2(RWF_NOWAIT) is not supported ({}), every read is offloaded",
                        crate::util::errno_text(&io::Error::from(e))
                    ));
                    false
                }
                Err(_) => true,
            };
            let cachestat = match cachestat_raw(f.as_fd(), 0, 1) {
                Ok(_) => true,
                Err(e) => {
                    missing.push(format!(
                        "cachestat() is not supported ({}), every sendfile() is offloaded",
                        crate::util::errno_text(&e)
                    ));
                    false
                }
            };
            (read_nowait, cachestat)
        }
        Err(e) => {
            missing.push(format!(
                "cannot probe preadv2(RWF_NOWAIT) and cachestat(): {e}; reads are offloaded"
            ));
            (false, false)
        }
    };
    let _ = FEATURES.set(Features {
        open_cached,
        read_nowait,
        cachestat,
    });
    missing
}

/// Operations the fast path counts, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `open` + `fstat`.
    Open,
    /// `stat` of a path.
    Stat,
    /// `pread`.
    Read,
    /// `sendfile`.
    Sendfile,
}

impl Op {
    /// Every operation, in metrics order.
    pub const ALL: [Op; 4] = [Op::Open, Op::Stat, Op::Read, Op::Sendfile];

    /// Its metrics label.
    pub fn name(self) -> &'static str {
        match self {
            Op::Open => "open",
            Op::Stat => "stat",
            Op::Read => "read",
            Op::Sendfile => "sendfile",
        }
    }
}

static HITS: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];
static MISSES: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

/// Counts a fast-path hit (served inline) or miss (offloaded).
pub fn count(op: Op, hit: bool) {
    let slot = if hit { &HITS } else { &MISSES };
    slot[op as usize].fetch_add(1, Ordering::Relaxed);
}

/// (hits, misses) of `op` since start.
pub fn counts(op: Op) -> (u64, u64) {
    (
        HITS[op as usize].load(Ordering::Relaxed),
        MISSES[op as usize].load(Ordering::Relaxed),
    )
}

/// Resolution flags for a path under a document root.
pub fn resolve_flags(no_symlinks: bool) -> ResolveFlags {
    if no_symlinks {
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS
    } else {
        ResolveFlags::empty()
    }
}

/// `openat2` relative to `dir` with `resolve`, adding `RESOLVE_CACHED` when
/// `cached_only`. `Err(WouldBlock)` means the walk needs the disk.
pub fn openat2(
    dir: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
    resolve: ResolveFlags,
    cached_only: bool,
) -> io::Result<OwnedFd> {
    let resolve = if cached_only {
        resolve | ResolveFlags::CACHED
    } else {
        resolve
    };
    // An empty relative path names the directory itself.
    let rel: &Path = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    loop {
        match rustix::fs::openat2(dir, rel, flags, Mode::empty(), resolve) {
            Ok(fd) => return Ok(fd),
            Err(rustix::io::Errno::INTR) => continue,
            // openat2 returns EAGAIN also when a rename raced the walk
            // (RESOLVE_BENEATH without CACHED); retry only that case.
            Err(rustix::io::Errno::AGAIN) if !cached_only => continue,
            // No `openat2` (a kernel before 5.6, or valgrind, which
            // `bench/cost`'s instruction counts run under): with no
            // resolve rule to keep, `openat` is the same call.
            Err(rustix::io::Errno::NOSYS) if resolve.is_empty() => {
                return rustix::fs::openat(dir, rel, flags, Mode::empty()).map_err(Into::into)
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// A `RWF_NOWAIT` read of more than this first asks for one byte (see
/// [`read_nowait`]).
const PROBE_ABOVE: usize = 64 * 1024;

/// Reads into `buf` at `offset` only from the page cache. Returns the bytes
/// copied: fewer than `buf.len()` when the cache stops there (or at end of
/// file, which the caller tells by a second attempt returning 0).
///
/// `RWF_NOWAIT` does not wait for the disk, but since Linux 5.9 a miss
/// still *starts* readahead for the range asked. So a large read first
/// asks for its first byte: a cold range then costs the device one page
/// queued by the loop, not a whole chunk queued before any pool thread
/// was free to take it (see *Readahead is porter's* in docs/design.md).
pub fn read_nowait(f: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    if buf.len() > PROBE_ABOVE && read_nowait_some(f, &mut buf[..1], offset)? == 0 {
        return Ok(0);
    }
    read_nowait_some(f, buf, offset)
}

/// Porter schedules the disk reads of files it serves through a pool or a
/// ring: the kernel's readahead is turned off on such a descriptor
/// (`POSIX_FADV_RANDOM`), so a read brings in the pages asked for and no
/// more — otherwise one cold request queues up to `read_ahead_kb` (8 MiB on
/// this machine's disk) at the device, no pool counts it, and every other
/// read, a hot file's lost page included, waits behind it. Files no larger
/// than [`OWN_READAHEAD_ABOVE`] are read whole by one call anyway.
pub fn own_readahead(f: &File, size: u64) {
    if size > OWN_READAHEAD_ABOVE {
        // Sets a flag on the open file under a spinlock: no I/O. A failure
        // only leaves the kernel's readahead on.
        let _ = rustix::fs::fadvise(f, 0, None, rustix::fs::Advice::Random);
    }
}

/// Files up to this size keep the kernel's readahead (see
/// [`own_readahead`]).
const OWN_READAHEAD_ABOVE: u64 = 64 * 1024;

fn read_nowait_some(f: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match rustix::io::preadv2(
            f,
            &mut [IoSliceMut::new(&mut buf[done..])],
            offset + done as u64,
            ReadWriteFlags::NOWAIT,
        ) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::AGAIN) => break,
            // Some file systems (FUSE, NFS) refuse the flag: a miss.
            Err(e) if unsupported(e) => break,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(done)
}

#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

fn cachestat_raw(fd: BorrowedFd<'_>, off: u64, len: u64) -> io::Result<u64> {
    let range = CachestatRange { off, len };
    let mut st = Cachestat::default();
    // SAFETY: cachestat reads `range` and writes `st`, both live, properly
    // sized repr(C) structs matching the kernel's ABI; flags must be 0.
    let r = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            fd.as_raw_fd() as libc::c_uint,
            &range as *const CachestatRange,
            &mut st as *mut Cachestat,
            0 as libc::c_uint,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.nr_cache)
}

/// The page size, from the C library (`sysconf`), which has the auxiliary
/// vector in memory. Not `rustix::param::page_size`: on a kernel without
/// `PR_GET_AUXV` (before 6.4) rustix reads `/proc/self/auxv`, which a
/// thread that has dropped root may not open, and panics — the first call
/// on a pool thread did, on Linux 6.1 (`tests/ktls_vm.rs`: every pool
/// `sendfile` was a "task was lost"). [`probe`] also asks once, in the
/// master.
pub(super) fn page_size() -> u64 {
    static PAGE: OnceLock<u64> = OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if n > 0 {
            n as u64
        } else {
            4096
        }
    })
}

/// True when the bytes at `offset` and at `offset + len - 1` can be read
/// without waiting. `cachestat` counts a page that readahead has inserted
/// but not yet filled as cached, and an inline `sendfile` would then sleep
/// on its page lock; readahead fills a window front to back, so a range
/// whose first and last bytes are readable now is not in flight.
pub fn ends_readable(f: &File, offset: u64, len: u64) -> bool {
    if len == 0 {
        return true;
    }
    let mut b = [0u8; 1];
    let last = offset + len - 1;
    [offset, last]
        .iter()
        .all(|&at| matches!(read_nowait(f, &mut b, at), Ok(1)))
}

/// How long after a pool thread read a file from the disk the fast path
/// checks every page of a resident range before an inline `sendfile`. The
/// pool's read leaves readahead in flight beyond the bytes it returned,
/// and on a saturated disk those pages stay locked for seconds; `cachestat`
/// counts them as cached, and checking the ends of a range
/// ([`ends_readable`]) does not see a locked page in its middle (readahead
/// windows of several readers interleave, and their reads complete out of
/// order). An inline `sendfile` that meets one sleeps on its lock with the
/// whole event loop. A file the pool has not read for this long has no
/// readahead of its own left in flight.
const IN_FLIGHT_FOR: std::time::Duration = std::time::Duration::from_secs(3);

type InFlightFiles = std::collections::HashMap<(u64, u64), std::time::Instant>;

/// Files (device, inode) a pool thread read recently, shared by all
/// workers: the page cache, and readahead, are shared too.
static IN_FLIGHT: std::sync::LazyLock<std::sync::Mutex<InFlightFiles>> =
    std::sync::LazyLock::new(Default::default);
/// How many files [`IN_FLIGHT`] holds: while none, the check costs one
/// atomic load.
static IN_FLIGHT_LEN: AtomicUsize = AtomicUsize::new(0);

/// Notes that file `id` is read from the disk by a pool thread: when a
/// real miss is offloaded, and again when the read ends (its readahead
/// stays in flight for a while after).
pub fn note_offloaded(id: (u64, u64)) {
    note_at(id, std::time::Instant::now());
}

/// [`note_offloaded`] as if made at `at` (tests).
#[cfg(test)]
pub fn note_offloaded_at(id: (u64, u64), at: std::time::Instant) {
    note_at(id, at);
}

fn note_at(id: (u64, u64), at: std::time::Instant) {
    let mut files = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
    if files.len() >= 4096 {
        files.retain(|_, t| at.saturating_duration_since(*t) < IN_FLIGHT_FOR);
    }
    files.insert(id, at);
    IN_FLIGHT_LEN.store(files.len(), Ordering::Relaxed);
}

/// The window of [`recently_offloaded`] (tests).
#[cfg(test)]
pub const IN_FLIGHT_WINDOW: std::time::Duration = IN_FLIGHT_FOR;

/// True while file `id` may have readahead of a pool read in flight.
pub fn recently_offloaded(id: (u64, u64)) -> bool {
    if IN_FLIGHT_LEN.load(Ordering::Relaxed) == 0 {
        return false;
    }
    let mut files = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
    match files.get(&id) {
        Some(t) if t.elapsed() < IN_FLIGHT_FOR => true,
        Some(_) => {
            files.remove(&id);
            IN_FLIGHT_LEN.store(files.len(), Ordering::Relaxed);
            false
        }
        None => false,
    }
}

/// True when every page of `[offset, offset + len)` can be read without
/// waiting: a one-byte `preadv2(RWF_NOWAIT)` at each page (and at the last
/// byte). Used only for files with a pool read in flight
/// ([`recently_offloaded`]), where a locked page may sit anywhere in the
/// range; about a microsecond per 4 KiB page, far less than a trip through
/// a pool whose queue is full of cold reads.
pub fn all_readable(f: &File, offset: u64, len: u64) -> bool {
    if len == 0 {
        return true;
    }
    let page = page_size();
    let last = offset + len - 1;
    let mut b = [0u8; 1];
    let mut at = offset;
    loop {
        if !matches!(read_nowait(f, &mut b, at), Ok(1)) {
            return false;
        }
        if at >= last {
            return true;
        }
        at = ((at / page + 1) * page).min(last);
    }
}

/// For a range whose first byte is not in the page cache (the caller's
/// `RWF_NOWAIT` read found nothing at `offset`): `Some(bytes)` to read on
/// the short lane when the miss is at most `max` bytes long, `None` when
/// it is longer (or the file system refuses the flag, and every byte
/// looks missing). This is how a miss is measured for files `cachestat`
/// refuses.
///
/// One probe, at `offset + max`: readable means the run of missing pages
/// ends before it (a hot file loses a folio here and there), so the
/// `max` bytes from `offset` are one small read, mostly from the page
/// cache. Probing page by page, as a first version did, costs a disk
/// request per probe on a cold range: a `RWF_NOWAIT` miss starts the read
/// of the page it asked for, and 17 one-page requests per cold chunk made
/// the device's IOPS limit, not its bandwidth, the bound (S1: 977 IOPS
/// and 22 MB/s of a 1000 IOPS, 40 MB/s throttle).
pub fn small_hole(f: &File, offset: u64, len: u64, max: u64) -> Option<u64> {
    if len <= max {
        return Some(len);
    }
    let mut b = [0u8; 1];
    matches!(read_nowait(f, &mut b, offset + max), Ok(1)).then_some(max)
}

/// What `cachestat` says about a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Residency {
    /// Every page is resident (`true`) or not.
    Known(bool),
    /// `EPERM`: since Linux 6.14 `cachestat` answers only for files the
    /// caller owns or may write; workers that dropped privileges to serve
    /// root's files are refused.
    Denied,
}

/// Whether every page of `[offset, offset + len)` is in the page cache
/// (`len` already clipped to the file size). Errors other than `EPERM`
/// count as "no".
pub fn range_cached(f: &File, offset: u64, len: u64) -> Residency {
    match cached_pages(f, offset, len) {
        Some((resident, pages)) => Residency::Known(resident >= pages),
        None => Residency::Denied,
    }
}

/// `cachestat` of the pages holding `offset..offset+len`: (resident
/// pages, pages); `None` when the caller may not ask (`EPERM`). Another
/// failure counts as nothing resident.
pub fn cached_pages(f: &File, offset: u64, len: u64) -> Option<(u64, u64)> {
    if len == 0 {
        return Some((0, 0));
    }
    let page = page_size();
    let first = offset / page;
    let last = (offset + len - 1) / page;
    let pages = last - first + 1;
    match cachestat_raw(f.as_fd(), first * page, pages * page) {
        Ok(n) => Some((n.min(pages), pages)),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => None,
        Err(_) => Some((0, pages)),
    }
}

/// Whether `cachestat` refuses the files under `dir` to the calling
/// thread's credentials (Linux 6.14+ answers only for files the caller
/// owns or may write; a start-up notice says what that costs). Asked of
/// the first regular file found among `dir`'s first entries and those of
/// its first subdirectories; `None` when no such file could be opened.
pub fn cachestat_refused_under(dir: &Path) -> Option<bool> {
    let mut dirs = vec![dir.to_path_buf()];
    let mut next = 0;
    let mut seen = 0;
    while let Some(d) = dirs.get(next).cloned() {
        next += 1;
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            seen += 1;
            if seen > 256 {
                return None;
            }
            let p = e.path();
            match std::fs::metadata(&p) {
                Ok(m) if m.is_file() => {
                    let Ok(f) = File::open(&p) else { continue };
                    let r = cachestat_raw(f.as_fd(), 0, 1);
                    return Some(matches!(r, Err(e) if e.raw_os_error() == Some(libc::EPERM)));
                }
                Ok(m) if m.is_dir() && next == 1 => dirs.push(p),
                _ => {}
            }
        }
    }
    None
}

/// How many bytes from `offset` (at most `len`) the page cache holds
/// without a gap, to a page: `cachestat` of halves of the range (about
/// log2 of its pages calls, asked only of a hot file's large miss).
/// `None` when the caller may not ask.
pub fn cached_prefix(f: &File, offset: u64, len: u64) -> Option<u64> {
    let page = page_size();
    let first = offset / page;
    let pages = (offset + len).div_ceil(page) - first;
    let all_cached = |n: u64| cached_pages(f, first * page, n * page).map(|(r, p)| r >= p);
    if all_cached(pages)? {
        return Some(len);
    }
    // The first `lo` pages are cached, the first `hi` are not all.
    let (mut lo, mut hi) = (0, pages);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if all_cached(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(((first + lo) * page).saturating_sub(offset).min(len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn temp_file(len: usize) -> (std::path::PathBuf, File) {
        let dir = std::env::temp_dir().join(format!("porter-fp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(format!("f{len}"));
        let mut f = File::create(&p).unwrap();
        f.write_all(&vec![7u8; len]).unwrap();
        drop(f);
        let f = File::open(&p).unwrap();
        (p, f)
    }

    #[test]
    fn probe_finds_the_features_of_this_kernel() {
        let missing = probe();
        // Linux 6.5+ has all three; the message list says what is missing.
        let f = features();
        assert_eq!(
            missing.is_empty(),
            f.open_cached && f.read_nowait && f.cachestat,
            "{missing:?}"
        );
    }

    #[test]
    fn freshly_written_file_is_cached_and_read_inline() {
        probe();
        if !features().cachestat || !features().read_nowait {
            return;
        }
        let (_p, f) = temp_file(20000);
        assert_eq!(range_cached(&f, 0, 20000), Residency::Known(true));
        assert_eq!(range_cached(&f, 4095, 2), Residency::Known(true));
        let mut buf = vec![0u8; 20000];
        assert_eq!(read_nowait(&f, &mut buf, 0).unwrap(), 20000);
        assert!(buf.iter().all(|&b| b == 7));
        // At end of file a read returns what is there.
        assert_eq!(read_nowait(&f, &mut buf, 19990).unwrap(), 10);
    }

    #[test]
    fn all_readable_checks_every_page() {
        probe();
        if !features().read_nowait {
            return;
        }
        let (_p, f) = temp_file(64 * 1024 + 10);
        assert!(all_readable(&f, 0, 64 * 1024 + 10));
        assert!(all_readable(&f, 5000, 3));
        assert!(all_readable(&f, 0, 0));
        // past the end nothing can be read
        assert!(!all_readable(&f, 0, 64 * 1024 + 11));
    }

    #[test]
    fn evicted_pages_are_reported_missing() {
        probe();
        if !features().cachestat {
            return;
        }
        let (_p, f) = temp_file(1 << 20);
        f.sync_all().unwrap();
        // Ask the kernel to drop this file's clean pages.
        rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).unwrap();
        assert_eq!(range_cached(&f, 0, 1 << 20), Residency::Known(false));
        assert!(!all_readable(&f, 0, 1 << 20));
        let mut buf = vec![0u8; 4096];
        assert!(read_nowait(&f, &mut buf, 512 * 1024).unwrap() < 4096);
    }

    #[test]
    fn the_cached_prefix_ends_at_the_first_missing_page() {
        probe();
        if !features().cachestat {
            return;
        }
        let (_p, f) = temp_file(1 << 20);
        f.sync_all().unwrap();
        // Cached in single pages (a write or a readahead leaves large
        // folios that `fadvise` does not split), then a hole at 256 KiB.
        rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).unwrap();
        rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::Random).unwrap();
        let mut b = [0u8; 1];
        for at in (0..1u64 << 20).step_by(4096) {
            std::os::unix::fs::FileExt::read_at(&f, &mut b, at).unwrap();
        }
        let hole = std::num::NonZeroU64::new(64 * 1024);
        rustix::fs::fadvise(&f, 256 * 1024, hole, rustix::fs::Advice::DontNeed).unwrap();
        assert_eq!(cached_prefix(&f, 0, 1 << 20), Some(256 * 1024));
        assert_eq!(cached_prefix(&f, 5000, 1 << 20), Some(256 * 1024 - 5000));
        assert_eq!(cached_prefix(&f, 0, 100_000), Some(100_000));
        assert_eq!(cached_prefix(&f, 256 * 1024 + 10, 4096), Some(0));
        assert_eq!(cached_prefix(&f, 320 * 1024, 4096), Some(4096));
    }

    #[test]
    fn a_file_the_pool_read_stays_off_the_inline_sendfile_for_a_while() {
        // ids no real file has (device 0 is never a block device here)
        let (read, other) = ((0, u64::MAX - 1), (0, u64::MAX - 2));
        note_offloaded(read);
        assert!(recently_offloaded(read));
        assert!(!recently_offloaded(other));
        // an entry older than the window is forgotten when looked up
        IN_FLIGHT
            .lock()
            .unwrap()
            .insert(other, std::time::Instant::now() - IN_FLIGHT_FOR);
        IN_FLIGHT_LEN.fetch_add(1, Ordering::Relaxed);
        assert!(!recently_offloaded(other));
        assert!(!IN_FLIGHT.lock().unwrap().contains_key(&other));
    }

    #[test]
    fn cached_open_of_a_known_path_succeeds() {
        probe();
        if !features().open_cached {
            return;
        }
        let (p, _f) = temp_file(10);
        let dir = File::open(p.parent().unwrap()).unwrap();
        let fd = openat2(
            dir.as_fd(),
            Path::new(p.file_name().unwrap()),
            OFlags::RDONLY | OFlags::CLOEXEC,
            resolve_flags(true),
            true,
        )
        .unwrap();
        drop(fd);
        let e = openat2(
            dir.as_fd(),
            Path::new("../../etc/passwd"),
            OFlags::RDONLY | OFlags::CLOEXEC,
            resolve_flags(true),
            false,
        )
        .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EXDEV));
    }
}
