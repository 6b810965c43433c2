//! Miss scheduling on a real slow disk (issue 11): while cold reads fill a
//! pool, a hot file that lost a few pages costs about one small disk read,
//! and a metadata call (open of a file not yet seen) is not queued behind
//! the cold reads — the pool's short lane (docs/design.md, "Miss
//! scheduling").
//!
//! The disk is `tests/common/slowfs.py` with the page cache on and
//! readahead off, so every page that is not cached costs one slow FUSE
//! read, and pages already read stay cached while porter keeps the file
//! open (`open_file_cache`). The files belong to the workers' user
//! (`nobody`), so `cachestat` counts the missing pages; FUSE refuses
//! `RWF_NOWAIT`, so the path for root's files (the copy fast path, whose
//! small holes are read alone on the short lane) is tested in
//! `src/disk` on a real file system instead.

use std::sync::MutexGuard;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::common::metrics::Metrics;
use crate::common::slowfs::{self, SlowFs, SlowFsOptions};
use crate::common::*;

/// One disk test at a time in this binary: each saturates the disk or
/// times its requests (`common::DISK_SERIAL`, shared by the disk files).
use crate::common::DISK_SERIAL as SERIAL;

/// Every FUSE operation (lookup, open, read of one page) takes this long.
const OP_MS: u64 = 20;
const HOT_LEN: usize = 1024 * 1024;
/// The hole left in the hot file's cached pages: 4 pages.
const HOLE: std::ops::Range<usize> = 512 * 1024..528 * 1024;
const COLD: usize = 12;
const COLD_LEN: usize = 512 * 1024;

fn setup() -> Option<MutexGuard<'static, ()>> {
    if let Some(why) = slowfs::unavailable() {
        if std::env::var_os("PORTER_REQUIRE_FUSE").is_some() {
            panic!("PORTER_REQUIRE_FUSE is set but FUSE is unavailable: {why}");
        }
        eprintln!("skipping slow-disk test: {why}");
        return None;
    }
    Some(SERIAL.lock().unwrap_or_else(|e| e.into_inner()))
}

fn hot_body() -> Vec<u8> {
    (0..HOT_LEN).map(|i| (i % 253) as u8).collect()
}

fn start() -> (SlowFs, TempDir, Server) {
    let backing = TempDir::new("misses");
    backing.write("hot.bin", hot_body());
    backing.write("small.txt", "small\n");
    for i in 0..COLD {
        backing.write(&format!("c{i}"), vec![b'0' + i as u8; COLD_LEN]);
    }
    for e in std::fs::read_dir(backing.path()).unwrap() {
        std::os::unix::fs::chown(e.unwrap().path(), Some(65534), Some(65534)).unwrap();
    }
    let fs = SlowFs::mount(
        backing.path(),
        &SlowFsOptions {
            delay_ms: OP_MS,
            page_cache: true,
            max_readahead: Some(0),
            ..Default::default()
        },
    );
    let conf = format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\n\
         thread_pool disk threads=4 max_queue=1000;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n  default_type application/octet-stream;\n  \
           access_log off;\n  \
           server {{\n    listen 127.0.0.1:{{PORT}};\n    \
             location = /metrics {{ porter_metrics; }}\n    \
             location / {{\n      root {};\n      aio threads=disk;\n      \
               sendfile on;\n      sendfile_max_chunk 256k;\n      \
               open_file_cache max=64 inactive=60s;\n      \
               open_file_cache_valid 60s;\n    }}\n  }}\n}}\n",
        fs.path().display()
    );
    (fs, backing, Server::start(&conf))
}

/// Reads of `file` in the slow file system's trace after line `from`.
fn reads_of(fs: &SlowFs, file: &str, from: usize) -> usize {
    fs.trace()
        .lines()
        .skip(from)
        .filter(|l| l.contains(" read ") && l.contains(file))
        .count()
}

fn timed(port: u16, path: &str) -> (Resp, Duration) {
    let t = Instant::now();
    let r = get(port, path);
    (r, t.elapsed())
}

fn cold_load(port: u16) -> Vec<JoinHandle<(Resp, Duration)>> {
    (0..COLD)
        .map(|i| std::thread::spawn(move || timed(port, &format!("/c{i}"))))
        .collect()
}

#[test]
fn a_page_lost_by_a_hot_file_costs_one_read_not_the_queue() {
    let Some(_serial) = setup() else { return };
    let (fs, _backing, s) = start();
    // Cache the hot file but for a 16 KiB hole, through porter's kept
    // descriptor (each open on this file system drops the cached pages).
    let warm = |from: usize, to: usize| {
        let r = get_with(
            s.port,
            "/hot.bin",
            &format!("Range: bytes={from}-{}\r\n", to - 1),
        );
        assert_eq!(r.status, 206);
        assert_eq!(r.body, hot_body()[from..to]);
    };
    warm(0, HOLE.start);
    warm(HOLE.end, HOT_LEN);
    let before = Metrics::fetch(s.port);
    let mark = fs.trace().lines().count();
    let load_start = Instant::now();
    let cold = cold_load(s.port);
    // Let the cold reads fill the pool: 3 running, the rest queued.
    std::thread::sleep(Duration::from_millis(1000));
    let queued = Metrics::fetch(s.port).must("porter_pool_queued", &[("pool", "disk")]);
    let port = s.port;
    let meta = std::thread::spawn(move || timed(port, "/small.txt"));
    let (hot, hot_time) = timed(s.port, "/hot.bin");
    let (small, meta_time) = meta.join().unwrap();
    let mut load = Duration::ZERO;
    for c in cold {
        let (r, _) = c.join().unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.body.len(), COLD_LEN);
        load = load_start.elapsed();
    }
    assert_eq!(hot.status, 200);
    assert!(hot.body == hot_body(), "hot body differs");
    assert_eq!(small.text(), "small\n");
    let hole_reads = reads_of(&fs, "/hot.bin", mark);
    eprintln!(
        "cold load {:.2}s ({queued} tasks queued); hot {:.3}s with {hole_reads} disk reads; \
         first open of a small file {:.3}s",
        load.as_secs_f64(),
        hot_time.as_secs_f64(),
        meta_time.as_secs_f64()
    );
    // The test means something only if the pool was full and the hole
    // really went to the disk.
    assert!(
        queued >= 4.0,
        "the cold load did not fill the pool: {queued} queued"
    );
    assert!(
        (1..=2 * HOLE.len() / 4096).contains(&hole_reads),
        "{hole_reads} reads of the hot file: the hole was not (only) what was read"
    );
    // Behind the queue, the hot request would have waited for most of the
    // cold load; in the short lane it costs its few reads.
    assert!(
        hot_time.as_secs_f64() <= 0.2 * load.as_secs_f64(),
        "the hot file's miss waited behind the cold reads: {hot_time:?} of a {load:?} load"
    );
    assert!(
        meta_time.as_secs_f64() <= 0.2 * load.as_secs_f64(),
        "a first open waited behind the cold reads: {meta_time:?} of a {load:?} load"
    );
    let after = Metrics::fetch(s.port);
    let short = after.must("porter_pool_short_tasks_total", &[("pool", "disk")])
        - before.must("porter_pool_short_tasks_total", &[("pool", "disk")]);
    assert!(short >= 3.0, "{short} short-lane tasks");
}
