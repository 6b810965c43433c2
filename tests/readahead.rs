//! porter's own readahead (issue 27): a cold file is read from the disk in
//! large pieces — one window (512 KiB, or less where the device says so)
//! per disk request — under `aio threads` (root's files: the copy fast
//! path; the workers' own files: `cachestat` and the pool's `sendfile`)
//! and `aio on`. Before, each read asked for one 64–256 KiB chunk and the
//! fast path's one-page probes split it further: 64–122 KiB a request on
//! average, so a disk limited by operations per second (a hard disk, a
//! cloud volume's quota) ran at a quarter of its bandwidth.
//!
//! `sendfile_max_chunk 128k`: the window is porter's, not the chunk a send
//! asks for (before, a bulk `sendfile` read its chunk, so 128 KiB).
//!
//! The server runs in a blkio cgroup throttled to 16 MB/s and 200 reads/s
//! on the disk of the test's files, and the cgroup's own counters
//! (`blkio.throttle.io_serviced`, `io_service_bytes`) give the number and
//! size of the reads it made. Needs root and cgroup v1's blkio controller;
//! skips without them unless `PORTER_REQUIRE_BLKIO` is set (as `.ci/run`
//! does).

mod common;

use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use common::blkio::Throttle;
use common::*;

const READ_BPS: u64 = 16_000_000;
const READ_IOPS: u64 = 200;
const COLD: usize = 6;
const FILE_LEN: usize = 4 * 1024 * 1024;
/// The average read the cgroup must see: half a window. Before porter read
/// ahead itself: 64 KiB (`aio on`), 114–122 KiB (`aio threads`).
const MIN_AVERAGE: u64 = 256 * 1024;

/// Serializes the tests: each saturates the disk.
static SERIAL: Mutex<()> = Mutex::new(());

fn body(seed: usize) -> Vec<u8> {
    (0..FILE_LEN)
        .map(|i| ((i * 13 + seed) % 251) as u8)
        .collect()
}

/// Writes the cold files, flushes them and drops them from the page cache.
fn cold_files(data: &TempDir, owner: Option<u32>) {
    for i in 0..COLD {
        let p = data.write(&format!("c{i}"), body(i));
        if let Some(uid) = owner {
            std::os::unix::fs::chown(&p, Some(uid), Some(uid)).unwrap();
        }
        let f = std::fs::File::open(&p).unwrap();
        f.sync_all().unwrap();
        rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).unwrap();
    }
}

fn config(root: &Path, aio: &str) -> String {
    format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\n\
         thread_pool disk threads=16 max_queue=1000;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n  default_type application/octet-stream;\n  access_log off;\n  \
           server {{\n    listen 127.0.0.1:{{PORT}};\n    \
             location / {{ root {}; {aio}; sendfile on; \
               sendfile_max_chunk 128k; }}\n  }}\n}}\n",
        root.display()
    )
}

/// Serves every cold file at once from the throttled disk and returns the
/// cgroup's (reads, bytes) for them; `None` when the throttle is
/// unavailable (and not required).
fn cold_reads(aio: &str, owner: Option<u32>) -> Option<(u64, u64)> {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Files on the real disk (not a tmpfs): the test's temporary directory.
    let data = TempDir::new("readahead");
    let throttle = match Throttle::new(data.path(), READ_BPS, Some(READ_IOPS)) {
        Ok(t) => t,
        Err(why) => {
            if std::env::var_os("PORTER_REQUIRE_BLKIO").is_some() {
                panic!("PORTER_REQUIRE_BLKIO is set but the blkio throttle is unavailable: {why}");
            }
            eprintln!("skipping readahead test: {why}");
            return None;
        }
    };
    cold_files(&data, owner);
    let s = Server::start(&config(data.path(), aio));
    throttle.enter(s.child.id());
    let (reads0, bytes0) = throttle.reads();
    let start = Instant::now();
    let port = s.port;
    let cold: Vec<_> = (0..COLD)
        .map(|i| std::thread::spawn(move || get(port, &format!("/c{i}"))))
        .collect();
    for (i, c) in cold.into_iter().enumerate() {
        let r = c.join().unwrap();
        assert_eq!(r.status, 200);
        assert!(r.body == body(i), "cold body {i} differs");
    }
    let took = start.elapsed();
    let (reads1, bytes1) = throttle.reads();
    let (reads, bytes) = (reads1 - reads0, bytes1 - bytes0);
    eprintln!(
        "{aio}, files of uid {owner:?}: {COLD} cold files of {} KiB in {:.2}s: {reads} reads, \
         {} KiB, {} KiB on average",
        FILE_LEN / 1024,
        took.as_secs_f64(),
        bytes / 1024,
        bytes / 1024 / reads.max(1)
    );
    // The files came from the disk, through the cgroup's throttle.
    assert!(
        bytes >= (COLD * FILE_LEN) as u64,
        "only {bytes} bytes read from the disk: the files were not cold"
    );
    Some((reads, bytes))
}

fn assert_large(aio: &str, owner: Option<u32>) {
    let Some((reads, bytes)) = cold_reads(aio, owner) else {
        return;
    };
    assert!(
        bytes / reads >= MIN_AVERAGE,
        "{aio}: cold files read in {} KiB pieces on average ({reads} reads of {bytes} bytes)",
        bytes / reads / 1024
    );
}

/// Root's files, workers `nobody`: `cachestat` is refused, the copy fast
/// path probes, and a cold range is a bulk `sendfile` on the pool.
#[test]
fn cold_files_are_read_in_large_pieces_under_aio_threads() {
    assert_large("aio threads=disk", None);
}

/// The workers' own files: `cachestat` answers, no probe at all.
#[test]
fn cold_files_of_the_workers_user_are_read_in_large_pieces_too() {
    assert_large("aio threads=disk", Some(65534));
}

/// `aio on`: the ring reads a window and the socket takes it over the next
/// sends.
#[test]
fn cold_files_are_read_in_large_pieces_under_aio_on() {
    assert_large("aio on", None);
}
