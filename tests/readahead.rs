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

use std::path::Path;
use std::time::Instant;

use crate::common::blkio::Throttle;
use crate::common::*;

const READ_BPS: u64 = 16_000_000;
const READ_IOPS: u64 = 200;
const COLD: usize = 6;
const FILE_LEN: usize = 4 * 1024 * 1024;
/// The average read the cgroup must see: half a window. Before porter read
/// ahead itself: 64 KiB (`aio on`), 114–122 KiB (`aio threads`).
const MIN_AVERAGE: u64 = 256 * 1024;

/// One disk test at a time in this binary: each saturates the disk or
/// times its requests (`common::DISK_SERIAL`, shared by the disk files).
use crate::common::DISK_SERIAL as SERIAL;

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

/// The blkio throttle on the disk holding `data`; `None` when it is
/// unavailable (and not required).
fn throttle(data: &TempDir) -> Option<Throttle> {
    match Throttle::new(data.path(), READ_BPS, Some(READ_IOPS)) {
        Ok(t) => Some(t),
        Err(why) => {
            if std::env::var_os("PORTER_REQUIRE_BLKIO").is_some() {
                panic!("PORTER_REQUIRE_BLKIO is set but the blkio throttle is unavailable: {why}");
            }
            eprintln!("skipping readahead test: {why}");
            None
        }
    }
}

/// Bytes the cgroup read from the disk since `bytes0`, once its reads stop
/// (the counters unchanged for 1.5 s).
fn settled_reads(throttle: &Throttle, bytes0: u64) -> u64 {
    let mut read = throttle.reads().1 - bytes0;
    let mut still = 0;
    for _ in 0..200 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let now = throttle.reads().1 - bytes0;
        still = if now == read { still + 1 } else { 0 };
        read = now;
        if still >= 15 {
            break;
        }
    }
    read
}

/// Serves every cold file at once from the throttled disk and returns the
/// cgroup's (reads, bytes) for them; `None` when the throttle is
/// unavailable (and not required).
fn cold_reads(aio: &str, owner: Option<u32>) -> Option<(u64, u64)> {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Files on the real disk (not a tmpfs): the test's temporary directory.
    let data = TempDir::new("readahead");
    let throttle = throttle(&data)?;
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

/// The window of cold reads from the disk holding `dir`, as porter sizes
/// it: 512 KiB, or the smaller of the device's `max_sectors_kb` and
/// `read_ahead_kb` (`disk::readahead::window`).
fn device_window(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(dir).unwrap().dev();
    let sys = format!("/sys/dev/block/{}:{}", libc::major(dev), libc::minor(dev));
    let q = [format!("{sys}/queue"), format!("{sys}/../queue")]
        .into_iter()
        .find(|q| Path::new(q).join("max_sectors_kb").exists());
    let mut w = 512 * 1024;
    for name in ["max_sectors_kb", "read_ahead_kb"] {
        let kb = q
            .as_ref()
            .and_then(|q| std::fs::read_to_string(format!("{q}/{name}")).ok())
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(0);
        if kb > 0 {
            w = w.min(kb * 1024);
        }
    }
    w.max(64 * 1024)
}

/// A client that asks for a cold file and then stops reading: the server
/// can send only what the sockets' buffers hold (`sndbuf=64k`, the
/// client's 32 KiB), less than a window. Porter still reads one window
/// ahead of it (double buffering, so the disk does not wait for the
/// client) and no further: the cgroup's counters, once they stop
/// changing, show two windows read, not one and not the file. Then the
/// client reads the rest and gets the file intact.
fn reads_one_window_ahead(aio: &str, owner: Option<u32>) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let data = TempDir::new("readahead-stall");
    let Some(throttle) = throttle(&data) else {
        return;
    };
    cold_files(&data, owner);
    let window = device_window(data.path());
    let conf = config(data.path(), aio).replace(
        "listen 127.0.0.1:{PORT};",
        "listen 127.0.0.1:{PORT} sndbuf=64k;",
    );
    let s = Server::start(&conf);
    throttle.enter(s.child.id());
    let (_, bytes0) = throttle.reads();

    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(32 * 1024).unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", s.port).parse().unwrap();
    sock.connect(&addr.into()).unwrap();
    let mut c: std::net::TcpStream = sock.into();
    use std::io::{Read, Write};
    c.write_all(b"GET /c0 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut got = vec![0u8; 16 * 1024];
    let first = c.read(&mut got).unwrap();
    got.truncate(first);

    let read = settled_reads(&throttle, bytes0);
    eprintln!(
        "{aio}, files of uid {owner:?}: {} KiB read for a stalled client, window {} KiB",
        read / 1024,
        window / 1024
    );
    assert!(
        read >= 2 * window,
        "{aio}: {} KiB read for a client that stopped: no window read ahead of it",
        read / 1024
    );
    assert!(
        read < 3 * window,
        "{aio}: {} KiB read for a client that stopped: more than one window ahead of it",
        read / 1024
    );
    c.read_to_end(&mut got).unwrap();
    let head = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert!(
        got[head..] == body(0)[..],
        "{aio}: the body read ahead differs"
    );
}

#[test]
fn a_stalled_client_has_one_window_read_ahead_under_aio_threads() {
    reads_one_window_ahead("aio threads=disk", None);
}

#[test]
fn a_stalled_client_of_the_workers_files_has_one_window_read_ahead() {
    reads_one_window_ahead("aio threads=disk", Some(65534));
}

#[test]
fn a_stalled_client_has_one_window_read_ahead_under_aio_on() {
    reads_one_window_ahead("aio on", None);
}

/// A range of a cold file: its windows, read and read ahead, stop at the
/// range's last byte (issue 27: the window ahead ran to the file's end,
/// so warming the bytes before a hot file's hole read the hole too, and
/// the hole's own read found nothing to do). Two ranges, 200 KiB from
/// 1 MiB and 600 KiB from 2 MiB (a window and a part): the cgroup reads
/// them, rounded to pages, and nothing after.
fn reads_only_the_range(aio: &str, owner: Option<u32>) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let data = TempDir::new("readahead-range");
    let Some(throttle) = throttle(&data) else {
        return;
    };
    cold_files(&data, owner);
    let s = Server::start(&config(data.path(), aio));
    throttle.enter(s.child.id());
    for (i, (from, len)) in [(1 << 20, 200 * 1024 + 7), (2 << 20, 600 * 1024)]
        .into_iter()
        .enumerate()
    {
        let (_, bytes0) = throttle.reads();
        let to = from + len;
        let r = get_with(
            s.port,
            &format!("/c{i}"),
            &format!("Range: bytes={from}-{}\r\n", to - 1),
        );
        assert_eq!(r.status, 206);
        assert!(r.body == body(i)[from..to], "{aio}: range {i} differs");
        let read = settled_reads(&throttle, bytes0);
        eprintln!(
            "{aio}, files of uid {owner:?}: {} KiB read for a range of {} KiB",
            read / 1024,
            len / 1024
        );
        assert!(
            read >= len as u64,
            "{aio}: only {read} bytes read for a cold range of {len}: not cold"
        );
        assert!(
            read <= (to.next_multiple_of(4096) - from) as u64,
            "{aio}: {} KiB read for a range of {} KiB: read past its end",
            read / 1024,
            len / 1024
        );
    }
}

#[test]
fn a_range_is_read_to_its_end_not_further_under_aio_threads() {
    reads_only_the_range("aio threads=disk", None);
}

#[test]
fn a_range_of_the_workers_files_is_read_to_its_end_not_further() {
    reads_only_the_range("aio threads=disk", Some(65534));
}

#[test]
fn a_range_is_read_to_its_end_not_further_under_aio_on() {
    reads_only_the_range("aio on", None);
}
