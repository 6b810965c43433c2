//! The disk's own queue (issue 11): on a real disk slowed by a blkio
//! throttle, while cold requests keep it saturated, a hot file that lost a
//! page (dropped from the page cache, just that range) is served after
//! about one small read, not after the reads already queued at the disk.
//!
//! `tests/miss_scheduling.rs` checks the pool's queue (the short lane) on
//! FUSE; this checks what the lanes cannot: a short task's read still
//! joins the device's FIFO (here the throttle's) behind every bulk read
//! issued before it, and behind the kernel's readahead of every cold file
//! (8 MiB windows on this machine's disk), which no pool counts. porter
//! turns readahead off on the files it serves through a pool and its bulk
//! lane's gate keeps about 25 ms of reads queued (docs/design.md,
//! *Readahead is porter's* and *The bulk gate*).
//!
//! The files belong to root and the worker runs as `nobody`: the copy
//! fast path, as most deployments run; the `_workers_files` tests give
//! them to `nobody`, so that `cachestat` counts the missing pages and a
//! cached range is a zero-copy `sendfile`. Needs root and cgroup v1's blkio
//! controller; skips without them unless `PORTER_REQUIRE_BLKIO` is set
//! (as `.ci/run` does).

use std::path::Path;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::common::blkio::Throttle;
use crate::common::metrics::Metrics;
use crate::common::*;

/// The throttle: cold files need seconds, one small read milliseconds.
const READ_BPS: u64 = 16_000_000;
const COLD: usize = 24;
const FILE_LEN: usize = 2 * 1024 * 1024;
/// Offsets of the holes dropped from the hot file, one per probe.
const HOLES: [usize; 3] = [256 * 1024, 1024 * 1024, 1792 * 1024];
/// A hot file loses a folio here and there: 16 KiB. Under a memory
/// cgroup's reclaim it may lose more at once (a large folio, several
/// neighbours): 256 KiB, more than the 64 KiB of a small hole, read with
/// direct I/O (docs/design.md, *Miss scheduling*).
const SMALL_HOLE: usize = 16 * 1024;
const LARGE_HOLE: usize = 256 * 1024;

fn body(seed: usize) -> Vec<u8> {
    (0..FILE_LEN)
        .map(|i| ((i * 7 + seed) % 251) as u8)
        .collect()
}

/// Drops `len` bytes at `offset` of `path` from the page cache.
fn evict(path: &Path, offset: usize, len: usize) {
    let f = std::fs::File::open(path).unwrap();
    rustix::fs::fadvise(
        &f,
        offset as u64,
        std::num::NonZeroU64::new(len as u64),
        rustix::fs::Advice::DontNeed,
    )
    .unwrap();
}

/// Puts `path` in the page cache in single pages, so that a range of it
/// can be dropped later (`fadvise` does not split the large folios a
/// write or a readahead leaves).
fn cache_in_pages(path: &Path) {
    evict(path, 0, FILE_LEN);
    let f = std::fs::File::open(path).unwrap();
    rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::Random).unwrap();
    let mut b = [0u8; 1];
    for at in (0..FILE_LEN).step_by(4096) {
        std::os::unix::fs::FileExt::read_at(&f, &mut b, at as u64).unwrap();
    }
}

fn timed(port: u16, path: &str) -> (Resp, Duration) {
    let t = Instant::now();
    let r = get(port, path);
    (r, t.elapsed())
}

#[test]
fn a_hot_files_lost_page_does_not_wait_in_the_disks_queue() {
    hot_page_lost_under_cold_load("aio threads=disk", SMALL_HOLE, ROOTS);
}

#[test]
fn under_aio_on_too() {
    hot_page_lost_under_cold_load("aio on", SMALL_HOLE, ROOTS);
}

/// A hole larger than a small one in a file cached before and after it is
/// still a hot file's hole, not a cold range: it must not wait behind the
/// cold reads either (before direct I/O: 0.8 s, a quarter of a cold
/// request).
#[test]
fn a_hot_files_lost_256k_does_not_wait_either() {
    hot_page_lost_under_cold_load("aio threads=disk", LARGE_HOLE, ROOTS);
}

/// Under `aio on` too: the large hole is read with direct I/O on the
/// pool's short lane, not through the ring's gate as a cold range (before:
/// 1.0–1.2 s, about a third of a cold request).
#[test]
fn a_hot_files_lost_256k_does_not_wait_under_aio_on_either() {
    hot_page_lost_under_cold_load("aio on", LARGE_HOLE, ROOTS);
}

/// The workers' own files (`cachestat` answers): a hot file's lost page is
/// a short `sendfile` on the pool.
#[test]
fn a_hot_files_lost_page_of_the_workers_files_does_not_wait() {
    hot_page_lost_under_cold_load("aio threads=disk", SMALL_HOLE, WORKERS);
}

/// The workers' own files, a 256 KiB hole: `cachestat` counts more than
/// 64 KiB missing, and the hot file's hole is read with direct I/O on the
/// short lane as on the copy fast path, not as a bulk `sendfile` behind
/// the cold reads.
#[test]
fn a_hot_files_lost_256k_of_the_workers_files_does_not_wait_either() {
    hot_page_lost_under_cold_load("aio threads=disk", LARGE_HOLE, WORKERS);
}

/// Who owns the test's files: root (the workers, `nobody`, may not ask
/// `cachestat`), or the workers.
const ROOTS: Option<u32> = None;
const WORKERS: Option<u32> = Some(65534);

/// One disk test at a time in this binary: each saturates the disk or
/// times its requests (`common::DISK_SERIAL`, shared by the disk files).
use crate::common::DISK_SERIAL as SERIAL;

/// Serves a hot file that loses `hole_len` bytes here and there while
/// cold files saturate a throttled disk, under `aio`, the files owned by
/// `owner`: a lost page costs about one small read.
fn hot_page_lost_under_cold_load(aio: &str, hole_len: usize, owner: Option<u32>) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Files on the real disk (not a tmpfs): the test's temporary directory.
    let data = TempDir::new("diskq");
    let throttle = match Throttle::new(data.path(), READ_BPS, None) {
        Ok(t) => t,
        Err(why) => {
            if std::env::var_os("PORTER_REQUIRE_BLKIO").is_some() {
                panic!("PORTER_REQUIRE_BLKIO is set but the blkio throttle is unavailable: {why}");
            }
            eprintln!("skipping disk-queue test: {why}");
            return;
        }
    };
    let hot = write_files(&data, owner);
    let s = Server::start(&site_conf(&data, aio));
    throttle.enter(s.child.id());
    // The hot file in the page cache (read by this process, unthrottled),
    // served once through porter.
    assert!(get(s.port, "/hot.bin").body == body(0));
    let before = Metrics::fetch(s.port);
    let run = probe_under_cold_load(&s, &hot, hole_len);
    let after = Metrics::fetch(s.port);
    // Under `aio on` small holes go through the ring, not the pool; large
    // ones through the `default` pool's short lane (direct I/O).
    let pool = if aio == "aio on" { "default" } else { "disk" };
    let short = if aio == "aio on" && hole_len == SMALL_HOLE {
        HOLES.len() as f64
    } else {
        after.must("porter_pool_short_tasks_total", &[("pool", pool)])
            - before.must("porter_pool_short_tasks_total", &[("pool", pool)])
    };
    eprintln!(
        "{aio}, files of uid {owner:?}, {hole_len}-byte holes: cold load {:.2}s (median cold request {:.2}s); hot file with a lost page: worst {:.3}s; \
         {short} short-lane tasks",
        run.load.as_secs_f64(),
        run.median_cold.as_secs_f64(),
        run.worst.as_secs_f64()
    );
    run.check(short);
}

/// The hot file (cached in single pages) and the cold ones (out of the
/// page cache) in `data`, given to `owner` when set; the hot file's path.
fn write_files(data: &TempDir, owner: Option<u32>) -> std::path::PathBuf {
    let give = |p: &Path| {
        if let Some(uid) = owner {
            std::os::unix::fs::chown(p, Some(uid), Some(uid)).unwrap();
        }
    };
    let hot = data.write("hot.bin", body(0));
    give(&hot);
    std::fs::File::open(&hot).unwrap().sync_all().unwrap();
    cache_in_pages(&hot);
    for i in 0..COLD {
        let p = data.write(&format!("c{i}"), body(i + 1));
        give(&p);
        std::fs::File::open(&p).unwrap().sync_all().unwrap();
        evict(&p, 0, FILE_LEN);
    }
    hot
}

/// One worker serving `data` with `aio`, and `/metrics`.
fn site_conf(data: &TempDir, aio: &str) -> String {
    format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\n\
         thread_pool disk threads=16 max_queue=1000;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n  default_type application/octet-stream;\n  access_log off;\n  \
           server {{\n    listen 127.0.0.1:{{PORT}};\n    \
             location = /metrics {{ porter_metrics; }}\n    \
             location / {{ root {}; {aio}; sendfile on; \
               sendfile_max_chunk 512k; }}\n  }}\n}}\n",
        data.path().display()
    )
}

/// What one run under the cold load measured.
struct ColdLoadRun {
    /// The whole cold load's time.
    load: Duration,
    /// The median cold request's time.
    median_cold: Duration,
    /// The slowest hot request with a lost page.
    worst: Duration,
}

/// Every cold file requested at once, and while they are queued at the
/// disk, the hot file asked for after each of its [`HOLES`] was dropped;
/// every body checked.
fn probe_under_cold_load(s: &Server, hot: &Path, hole_len: usize) -> ColdLoadRun {
    let start = Instant::now();
    let port = s.port;
    let cold: Vec<JoinHandle<(Resp, Duration)>> = (0..COLD)
        .map(|i| std::thread::spawn(move || timed(port, &format!("/c{i}"))))
        .collect();
    let mut worst = Duration::ZERO;
    for hole in HOLES {
        // The cold requests are queued at the disk by now.
        std::thread::sleep(Duration::from_millis(400));
        evict(hot, hole, hole_len);
        let (r, took) = timed(s.port, "/hot.bin");
        assert_eq!(r.status, 200);
        assert!(r.body == body(0), "hot body differs");
        worst = worst.max(took);
    }
    let mut cold_times = Vec::new();
    for (i, c) in cold.into_iter().enumerate() {
        let (r, took) = c.join().unwrap();
        assert_eq!(r.status, 200);
        assert!(r.body == body(i + 1), "cold body {i} differs");
        cold_times.push(took);
    }
    let load = start.elapsed();
    cold_times.sort();
    ColdLoadRun {
        load,
        median_cold: cold_times[COLD / 2],
        worst,
    }
}

impl ColdLoadRun {
    /// The disk was the bottleneck, the holes were read (`short` short-lane
    /// tasks), and a hole cost about one small read.
    fn check(&self, short: f64) {
        let (load, worst, median_cold) = (self.load, self.worst, self.median_cold);
        // The test means something only if the disk was the bottleneck and
        // the holes were read.
        let expected = (COLD * FILE_LEN) as f64 / READ_BPS as f64;
        assert!(
            load.as_secs_f64() >= 0.7 * expected,
            "the throttle did not hold: {load:?} for {expected:.1}s of reads"
        );
        assert!(short >= HOLES.len() as f64, "{short} short-lane tasks");
        // Behind the disk's queue, a hole waits for most of a cold request;
        // with the queue kept short it costs about one small read.
        assert!(
            worst.as_secs_f64() <= 0.15 * median_cold.as_secs_f64(),
            "a hot file's lost page waited in the disk's queue: {worst:?}, \
             median cold request {median_cold:?}"
        );
    }
}
