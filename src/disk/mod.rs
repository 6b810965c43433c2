//! The disk layer: every file-system call the server makes goes through
//! this module, and nothing outside it may block on a disk. It is a base:
//! it imports nothing from the layers above it (handlers, HTTP, the proxy
//! cache, the runtime); what it needs from them (the pool threads'
//! privilege drop) is handed in.
//!
//! Each call is routed, per request, by the location's `aio` ([`Io`],
//! resolved once by [`Disk::route`]):
//!
//! - `aio off`: the call runs inline on the event loop (NGINX's default).
//! - `aio threads[=POOL]`: the call runs on the pool's threads and the
//!   event loop awaits its completion (a oneshot channel wakes it; nothing
//!   polls). With `aio_fast_path on` (the default) the event loop first
//!   tries the call in a form that cannot block ([`fastpath`]): a cached
//!   path, resident pages. A hit is served inline and never meets the pool;
//!   a miss (`EAGAIN`, a short read, pages not resident) is offloaded, and
//!   a partial read keeps what it got and offloads only the rest.
//! - `aio on`: opens, stats and reads go through the worker's io_uring
//!   ([`uring`]) after the same fast path; a file range is read and
//!   `send`t, never `sendfile`d; the other calls (the cache store's
//!   writes) run on the `default` pool. Without io_uring, `aio on` is
//!   `aio threads`.
//!
//! A task owns everything it touches (an `Arc` of the file, a `dup` of the
//! socket), so a task whose connection has gone finishes harmlessly and
//! its result is dropped. Pool failures surface as [`DiskError`] inside an
//! `io::Error`; [`Failure::of`] turns any failure into a status and a log
//! line.
//!
//! | File | Holds |
//! |---|---|
//! | `types.rs` | [`FileMeta`], [`FileKind`], [`DiskError`], [`Failure`] |
//! | `io.rs` | [`Io`], the route, and the calls that need only it (create, write, rename, …) |
//! | `open.rs` | [`PathRules`], [`OpenFile`], open/stat/read, [`Disk::open`] with `open_file_cache` |
//! | `owner_walk.rs` | `disable_symlinks if_not_owner`: NGINX's walk, one component at a time |
//! | `send.rs` | [`Disk::sendfile`]: inline, copy fast path, or a pool thread (short or bulk lane) |
//! | `sent.rs` | [`sent::Route`]: which route delivered body bytes (`porter_disk_send_bytes_total`) |
//! | `direct.rs` | `directio`: [`Disk::set_direct`], reads around the page cache with `O_DIRECT` |
//! | `hot_hole.rs` | a hot file's hole larger than 64 KiB: read once with direct I/O, kept a moment |
//! | `readahead.rs` | porter's readahead: a cold stream reads one device-sized window per bulk task |
//! | `open_file_cache.rs` | NGINX's `open_file_cache` |
//! | `fastpath.rs` | the calls that cannot block, and the kernel probe |
//! | `pool.rs` | `thread_pool`: [`pool::ThreadPool`] (two lanes), [`pool::PoolSet`] |
//! | `realpath.rs` | [`realpath_now`] (`$realpath_root`): the cached walk first |
//! | `spool.rs` | [`Spool`]: a request body's temp file (`client_body_temp_path`), unlinked once open |
//! | `store.rs` | [`StoreFile`]: a response saved by `proxy_store`, temp file then renamed into place |
//! | `dav.rs` | WebDAV's file work: `lstat`, trees deleted and copied, files copied and moved ([`DavDone`]) |
//! | `state_file.rs` | private state files (ACME's `state_path`): read, atomic 0600 replacement |
//! | `priority.rs` | pool threads and `aio on`'s io-wq workers run `SCHED_IDLE`, below the event loops |
//! | `uring.rs`, `uring/` | `aio on`: the worker's [`uring::Ring`], its operations and send |

pub mod bulk_gate;
mod dav;
mod direct;
pub mod fastpath;
mod hot_hole;
mod io;
mod list_dir;
mod open;
pub mod open_file_cache;
mod owner_walk;
pub mod pool;
pub mod priority;
mod readahead;
mod realpath;
mod send;
pub mod sent;
mod spool;
pub mod state_file;
mod store;
mod types;
pub mod uring;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

pub use self::dav::{dav_error, DavDone, DavEntry, DavLine};
pub use self::io::{make_dir_owned, Io};
pub use self::list_dir::{DirEntry, EntryKind, Listing};
pub use self::open::{OpenFile, PathRules};
use self::open_file_cache::OpenFileCache;
pub use self::open_file_cache::OpenFileCacheSettings;
use self::pool::PoolSet;
pub use self::realpath::realpath_now;
pub use self::spool::Spool;
pub use self::store::{Rename, StoreFile};
pub use self::types::{disk_error, DiskError, Failure, FileKind, FileMeta};
use self::uring::Ring;

/// The disk layer of one worker: the pools of its generation, its io_uring
/// (`aio on`), and what the worker keeps between requests (its
/// `open_file_cache`, the copy fast path's buffer).
#[derive(Debug, Default)]
pub struct Disk {
    pools: Arc<PoolSet>,
    open_files: RefCell<OpenFileCache>,
    /// Buffer of the copy fast path (used within one synchronous step).
    scratch: RefCell<Vec<u8>>,
    /// Hole reads in flight on this worker, by (device, inode, offset):
    /// requests that meet the same hole wait for the one read.
    fills: RefCell<std::collections::HashMap<(u64, u64, u64), std::rc::Rc<tokio::sync::Notify>>>,
    /// Hot files and the holes larger than 64 KiB read from them with
    /// direct I/O (`hot_hole`).
    hot: hot_hole::HotHoles,
    /// The worker's ring, when the configuration has `aio on` and the
    /// kernel gives one.
    ring: Option<Rc<Ring>>,
}

impl Disk {
    /// A disk layer over the pools of a generation.
    pub fn new(pools: Arc<PoolSet>) -> Disk {
        Disk {
            pools,
            ..Disk::default()
        }
    }

    /// The same disk layer with this worker's ring (`aio on`).
    pub fn with_ring(self, ring: Option<Rc<Ring>>) -> Disk {
        Disk { ring, ..self }
    }

    /// The pools of this generation.
    pub fn pools(&self) -> &Arc<PoolSet> {
        &self.pools
    }

    /// The route for `aio`: inline without a pool name (`aio off`), else
    /// the named pool, with the fast path first when `fast_path`.
    /// [`DiskError::PoolNotFound`] for an unknown name (only a variable
    /// name can be unknown here; literal names are checked when the
    /// configuration loads).
    pub fn route(&self, pool: Option<&str>, fast_path: bool) -> Result<Io, DiskError> {
        let Some(name) = pool else {
            return Ok(Io::inline());
        };
        match self.pools.get(name) {
            Some(p) => Ok(Io::threads(p.clone(), fast_path)),
            None => Err(DiskError::PoolNotFound(name.to_string())),
        }
    }

    /// `io` if it has a pool, else the same route on the `default` pool
    /// (`aio off`), for writes no event loop may wait on (a request
    /// body's temp file). Inline only when there is no `default` pool.
    pub fn offloaded(&self, io: Io) -> Io {
        if io.pool.is_some() {
            return io;
        }
        match self.pools.get("default") {
            Some(p) => Io::threads(p.clone(), false),
            None => io,
        }
    }

    /// The route for `aio on`: the worker's ring for opens, stats and
    /// reads (after the fast path when `fast_path`), the `default` pool
    /// for the rest; without a ring, the `default` pool for everything
    /// (`aio threads`: the fallback the start-up notice announced).
    pub fn route_uring(&self, fast_path: bool) -> Result<Io, DiskError> {
        let pool = self
            .pools
            .get("default")
            .ok_or_else(|| DiskError::PoolNotFound("default".to_string()))?;
        Ok(match &self.ring {
            Some(ring) => Io::uring(ring.clone(), pool.clone(), fast_path),
            None => Io::threads(pool.clone(), fast_path),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::pool::PoolSpec;
    use super::*;
    use crate::log::ErrorLog;
    use std::io;
    use std::path::PathBuf;
    use std::time::Duration;
    use tokio::net::TcpStream;

    fn pools(threads: usize, max_queue: usize) -> Arc<PoolSet> {
        let spec = PoolSpec {
            name: "p".into(),
            threads,
            max_queue,
        };
        Arc::new(PoolSet::build(&[spec], None, None, &ErrorLog::new(Vec::new())).unwrap())
    }

    /// Tasks pool `p` has completed.
    fn tasks_done(disk: &Disk) -> u64 {
        disk.pools()
            .get("p")
            .unwrap()
            .stats()
            .done
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "porter-disk-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    fn threads(disk: &Disk, fast: bool) -> Io {
        disk.route(Some("p"), fast).unwrap()
    }

    fn any_path() -> PathRules {
        PathRules::default()
    }

    #[test]
    fn offloaded_open_read_and_writes_round_trip() {
        fastpath::probe();
        let d = dir();
        let disk = Disk::new(pools(2, 8));
        rt().block_on(async {
            let io = threads(&disk, false);
            io.mkdir_all(&d.join("a/b")).await.unwrap();
            let tmp = d.join("a/b/tmp");
            let f = io.create(&tmp).await.unwrap();
            io.write_at(&f, Arc::from(&b"hello world"[..]), 0)
                .await
                .unwrap();
            io.sync(&f).await.unwrap();
            let dst = d.join("a/b/final");
            io.rename(&tmp, &dst).await.unwrap();
            let of = disk.open(&io, &dst, &any_path(), None).await.unwrap();
            assert_eq!(of.meta.size, 11);
            let mut buf = [0u8; 5];
            assert_eq!(of.read_at(&mut buf, 6).await.unwrap(), 5);
            assert_eq!(&buf, b"world");
            io.unlink(&dst).await.unwrap();
            let e = disk.open(&io, &dst, &any_path(), None).await.unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
        });
        assert!(tasks_done(&disk) >= 8);
    }

    #[test]
    fn unknown_pool_is_a_disk_error() {
        let disk = Disk::new(pools(1, 1));
        let e = disk.route(Some("nope"), true).unwrap_err();
        assert_eq!(e, DiskError::PoolNotFound("nope".into()));
        assert_eq!(e.to_string(), "thread pool \"nope\" not found");
    }

    #[test]
    fn fast_path_serves_a_cached_file_without_the_pool() {
        fastpath::probe();
        if !fastpath::features().open_cached || !fastpath::features().read_nowait {
            return;
        }
        let d = dir();
        let p = d.join("hot");
        std::fs::write(&p, vec![1u8; 10000]).unwrap();
        let disk = Disk::new(pools(1, 4));
        rt().block_on(async {
            // The first open may walk the disk; later ones hit the cache.
            let io = threads(&disk, true);
            disk.open(&io, &p, &any_path(), None).await.unwrap();
            let before = tasks_done(&disk);
            for _ in 0..10 {
                let f = disk.open(&io, &p, &any_path(), None).await.unwrap();
                let mut buf = vec![0u8; 10000];
                assert_eq!(f.read_at(&mut buf, 0).await.unwrap(), 10000);
            }
            let after = tasks_done(&disk);
            assert_eq!(before, after, "cached opens and reads went to the pool");
        });
    }

    /// A connected pair: porter's side (tokio) and a thread draining the
    /// peer until it closes.
    async fn drained_socket() -> TcpStream {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let _ = std::io::copy(&mut s, &mut std::io::sink());
        });
        TcpStream::connect(addr).await.unwrap()
    }

    #[test]
    fn a_file_read_from_disk_by_the_pool_is_noted_and_a_resident_one_is_not() {
        fastpath::probe();
        let fp = fastpath::features();
        if !fp.cachestat || !fp.read_nowait {
            return;
        }
        let d = dir();
        let disk = Disk::new(pools(1, 4));
        rt().block_on(async {
            let sock = drained_socket().await;
            // Resident, but noted a moment before the window ends: every
            // page is readable, so it goes inline, and the note is not
            // renewed.
            let hot = d.join("noted-hot");
            std::fs::write(&hot, vec![3u8; 256 * 1024]).unwrap();
            let io = threads(&disk, true);
            let f = disk.open(&io, &hot, &any_path(), None).await.unwrap();
            let almost = fastpath::IN_FLIGHT_WINDOW - Duration::from_millis(300);
            fastpath::note_offloaded_at(f.meta.id, std::time::Instant::now() - almost);
            let before = tasks_done(&disk);
            let mut off = 0;
            disk.sendfile(&sock, &f, &mut off, 64 * 1024).await.unwrap();
            assert_eq!(off, 64 * 1024);
            assert_eq!(tasks_done(&disk), before, "all pages readable: inline");
            std::thread::sleep(Duration::from_millis(400));
            assert!(!fastpath::recently_offloaded(f.meta.id), "note renewed");
            // Not resident: a real miss, noted.
            let cold = d.join("cold");
            std::fs::write(&cold, vec![4u8; 256 * 1024]).unwrap();
            let c = disk.open(&io, &cold, &any_path(), None).await.unwrap();
            c.file.sync_all().unwrap();
            rustix::fs::fadvise(&*c.file, 0, None, rustix::fs::Advice::DontNeed).unwrap();
            let mut off = 0;
            disk.sendfile(&sock, &c, &mut off, 64 * 1024).await.unwrap();
            assert!(fastpath::recently_offloaded(c.meta.id));
        });
    }

    /// Short-lane tasks pool `p` has completed.
    fn short_done(disk: &Disk) -> u64 {
        disk.pools()
            .get("p")
            .unwrap()
            .stats()
            .short_done
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Caches all of `f` but the 4 KiB pages in `hole`: drops the file,
    /// then reads it back page by page through a descriptor without
    /// readahead.
    fn cache_all_but(
        f: &OpenFile,
        path: &std::path::Path,
        len: usize,
        hole: std::ops::Range<usize>,
    ) {
        f.file.sync_all().unwrap();
        rustix::fs::fadvise(&*f.file, 0, None, rustix::fs::Advice::DontNeed).unwrap();
        let r = std::fs::File::open(path).unwrap();
        rustix::fs::fadvise(&r, 0, None, rustix::fs::Advice::Random).unwrap();
        let mut b = [0u8; 1];
        for at in (0..len).step_by(4096).filter(|at| !hole.contains(at)) {
            std::os::unix::fs::FileExt::read_at(&r, &mut b, at as u64).unwrap();
        }
    }

    #[test]
    fn a_small_hole_in_a_file_cachestat_refuses_is_read_alone_on_the_short_lane() {
        fastpath::probe();
        let fp = fastpath::features();
        if !fp.cachestat || !fp.read_nowait {
            return;
        }
        let d = dir();
        let p = d.join("holed");
        let len = 512 * 1024;
        let body: Vec<u8> = (0..len).map(|i| (i % 241) as u8).collect();
        std::fs::write(&p, &body).unwrap();
        let disk = Disk::new(pools(4, 16));
        rt().block_on(async {
            let sock = drained_socket().await;
            let io = threads(&disk, true);
            let f = disk.open(&io, &p, &any_path(), None).await.unwrap();
            // Cache all but 16 KiB in the middle.
            cache_all_but(&f, &p, len, 256 * 1024..272 * 1024);
            let (resident, pages) = fastpath::cached_pages(&f.file, 0, len as u64).unwrap();
            let missing = (pages - resident) * 4096;
            assert!(
                missing > 0 && missing <= 64 * 1024,
                "{missing} bytes missing"
            );
            // As for root's files served by `nobody`: no cachestat.
            f.cachestat_denied.set(true);
            let (before, short_before) = (tasks_done(&disk), short_done(&disk));
            let mut off = 0;
            while off < len as u64 {
                match disk.sendfile(&sock, &f, &mut off, 128 * 1024).await {
                    Ok(n) => assert!(n > 0),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        sock.writable().await.unwrap()
                    }
                    Err(e) => panic!("{e}"),
                }
            }
            let tasks = tasks_done(&disk) - before;
            let short = short_done(&disk) - short_before;
            assert!(tasks >= 1, "the hole was not read by the pool");
            assert_eq!(tasks, short, "a bulk task was used for a small hole");
            assert_eq!(
                fastpath::cached_pages(&f.file, 0, len as u64).unwrap(),
                (pages, pages)
            );
        });
    }

    /// Sends all of `f` in `count`-byte calls, as the response writer does.
    async fn send_all(disk: &Disk, sock: &TcpStream, f: &OpenFile, count: usize) {
        let mut off = 0;
        while off < f.meta.size {
            match disk.sendfile(sock, f, &mut off, count).await {
                Ok(n) => assert!(n > 0),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => sock.writable().await.unwrap(),
                Err(e) => panic!("{e}"),
            }
        }
    }

    #[test]
    fn a_cold_stream_reads_one_window_per_bulk_task_and_probes_no_hole() {
        fastpath::probe();
        if !fastpath::features().read_nowait {
            return;
        }
        let d = dir();
        let p = d.join("cold-stream");
        let len = 2 * 1024 * 1024 + 100 * 1024;
        std::fs::write(&p, vec![5u8; len]).unwrap();
        let disk = Disk::new(pools(4, 64));
        rt().block_on(async {
            let sock = drained_socket().await;
            let io = threads(&disk, true);
            let f = disk.open(&io, &p, &any_path(), None).await.unwrap();
            f.file.sync_all().unwrap();
            rustix::fs::fadvise(&*f.file, 0, None, rustix::fs::Advice::DontNeed).unwrap();
            // As for root's files served by `nobody`: the copy fast path.
            f.cachestat_denied.set(true);
            let (before, short_before) = (tasks_done(&disk), short_done(&disk));
            send_all(&disk, &sock, &f, 128 * 1024).await;
            let window = readahead::window(f.meta.id.0) as usize;
            let bulk = (tasks_done(&disk) - before) - (short_done(&disk) - short_before);
            assert_eq!(short_done(&disk), short_before, "a cold stream read a hole");
            assert_eq!(
                bulk as usize,
                len.div_ceil(window),
                "one bulk task per window"
            );
            assert_eq!(
                fastpath::cached_pages(&f.file, 0, len as u64).map(|(r, p)| r == p),
                Some(true)
            );
        });
    }

    #[test]
    fn a_request_of_a_hot_file_that_meets_a_hole_keeps_its_short_read() {
        fastpath::probe();
        if !fastpath::features().read_nowait || !fastpath::features().cachestat {
            return;
        }
        let d = dir();
        let p = d.join("hot-stream");
        let len = 1024 * 1024;
        std::fs::write(&p, vec![6u8; len]).unwrap();
        let disk = Disk::new(pools(4, 64));
        rt().block_on(async {
            let sock = drained_socket().await;
            let io = threads(&disk, true);
            let f = disk.open(&io, &p, &any_path(), None).await.unwrap();
            // The hole is at the request's first byte: a hot file's.
            cache_all_but(&f, &p, len, 0..16 * 1024);
            f.cachestat_denied.set(true);
            disk.hot.saw_cached(&f, 0, hot_hole::HOT_RUN);
            let g = f.clone();
            let (before, short_before) = (tasks_done(&disk), short_done(&disk));
            send_all(&disk, &sock, &g, 128 * 1024).await;
            let tasks = tasks_done(&disk) - before;
            assert!(tasks >= 1, "the hole was not read by the pool");
            assert_eq!(
                tasks,
                short_done(&disk) - short_before,
                "a bulk read for a hole"
            );
        });
    }

    #[test]
    fn requests_meeting_the_same_hole_wait_for_one_read() {
        fastpath::probe();
        let fp = fastpath::features();
        if !fp.cachestat || !fp.read_nowait {
            return;
        }
        let d = dir();
        let p = d.join("holed-shared");
        std::fs::write(&p, vec![7u8; 512 * 1024]).unwrap();
        let disk = Disk::new(pools(1, 16));
        rt().block_on(async {
            let (s1, s2) = (drained_socket().await, drained_socket().await);
            let io = threads(&disk, true);
            let f = disk.open(&io, &p, &any_path(), None).await.unwrap();
            cache_all_but(&f, &p, 512 * 1024, 256 * 1024..260 * 1024);
            f.cachestat_denied.set(true);
            // A file many requests meet a hole of is hot: a first send of a
            // file that is not is a cold stream's (`readahead`).
            disk.hot.saw_cached(&f, 0, hot_hole::HOT_RUN);
            let g = f.clone();
            // Keep the only thread busy a moment, so both requests meet the
            // hole before any read of it ends.
            let busy = disk.pools().get("p").unwrap().submit(|| {
                std::thread::sleep(Duration::from_millis(200));
            });
            let before = short_done(&disk);
            let (mut o1, mut o2) = (256 * 1024, 256 * 1024);
            let (a, b) = tokio::join!(
                disk.sendfile(&s1, &f, &mut o1, 64 * 1024),
                disk.sendfile(&s2, &g, &mut o2, 64 * 1024)
            );
            assert!(a.unwrap() > 0 && b.unwrap() > 0);
            busy.unwrap().await.unwrap();
            assert_eq!(short_done(&disk) - before, 1, "the hole was read twice");
            assert!(disk.fills.borrow().is_empty());
        });
    }

    #[test]
    fn no_symlinks_resolves_beneath_the_root() {
        let d = dir();
        std::fs::write(d.join("real"), b"x").unwrap();
        let _ = std::fs::remove_file(d.join("link"));
        std::os::unix::fs::symlink(d.join("real"), d.join("link")).unwrap();
        let disk = Disk::new(pools(1, 4));
        let root = d.to_str().unwrap().to_string();
        rt().block_on(async {
            for fast in [false, true] {
                let rules = PathRules {
                    no_symlinks: true,
                    root: Some(root.clone()),
                    ..Default::default()
                };
                let io = threads(&disk, fast);
                let real = disk.open(&io, &d.join("real"), &rules, None).await;
                assert!(real.is_ok());
                let e = disk
                    .open(&io, &d.join("link"), &rules, None)
                    .await
                    .unwrap_err();
                assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
            }
        });
    }
}
