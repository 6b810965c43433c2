//! Proof with a really slow disk (issue 3, item 8): porter against a FUSE
//! file system whose lookup, stat, open and read each sleep (see
//! `tests/common/slowfs.py`), so a blocking call really blocks the thread
//! that makes it, as a cold disk does.
//!
//! One worker (`worker_processes 1`) so one event loop is shared; a "hot"
//! file lives in a normal, cached directory, "cold" files on the slow
//! mount. With `aio off` a cold request stalls the hot ones; with
//! `aio threads` the hot ones keep their latency and never touch the pool;
//! with `aio on` (io_uring) the same holds, the cold work going through the
//! worker's ring instead of a pool.
//! Then the pool's edges: overflow (503 + Retry-After + log line) and
//! recovery, `max_queue=0`, per-request pool names, a client leaving during
//! an offloaded sendfile (and during a ring send), and a read error
//! mid-file (pool, inline and ring). Tests of `aio on` skip, saying so,
//! where the kernel gives no io_uring.
//!
//! Timing assertions compare ratios with wide margins, never absolute
//! times. The tests hold one lock so their timings do not disturb each
//! other. They skip (saying why) without root, /dev/fuse or fusepy, unless
//! `PORTER_REQUIRE_FUSE` is set, as in CI.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::MutexGuard;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::common::metrics::Metrics;
use crate::common::slowfs::{self, SlowFs, SlowFsOptions};
use crate::common::*;

/// One disk test at a time in this binary: each saturates the disk or
/// times its requests (`common::DISK_SERIAL`, shared by the disk files).
use crate::common::DISK_SERIAL as SERIAL;

/// Takes the file's lock, or returns `None` (after saying why) when FUSE
/// is unavailable and not required.
fn setup() -> Option<MutexGuard<'static, ()>> {
    if !slowfs::usable("slow-disk") {
        return None;
    }
    Some(SERIAL.lock().unwrap_or_else(|e| e.into_inner()))
}

/// A full config: one worker, `main_extra` in the main context, a
/// `/metrics` location, then `server_body`.
fn conf(main_extra: &str, server_body: &str) -> String {
    format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\n{main_extra}\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n  default_type application/octet-stream;\n  \
           access_log {{PREFIX}}/logs/access.log;\n  \
           server {{\n    listen 127.0.0.1:{{PORT}};\n    \
             location = /metrics {{ porter_metrics; }}\n{server_body}\n  }}\n}}\n"
    )
}

/// Contents of cold file `i` (distinct per file, so a mix-up shows).
fn cold_body(i: usize, len: usize) -> Vec<u8> {
    let tag = format!("cold file {i}\n");
    tag.bytes().cycle().take(len).collect()
}

/// A backing directory with `n` cold files `c0..c{n-1}` of `len` bytes.
fn cold_files(n: usize, len: usize) -> TempDir {
    let d = TempDir::new("cold");
    for i in 0..n {
        d.write(&format!("c{i}"), cold_body(i, len));
    }
    d
}

/// The hot directory: `hot.bin`, 16 KiB.
fn hot_dir() -> TempDir {
    let d = TempDir::new("hot");
    d.write("hot.bin", hot_body());
    d
}

fn hot_body() -> Vec<u8> {
    (0..16 * 1024).map(|i| (i % 251) as u8).collect()
}

/// GET and how long it took (connect to last body byte).
fn timed_get(port: u16, path: &str) -> (Resp, Duration) {
    let t = Instant::now();
    let r = get(port, path);
    (r, t.elapsed())
}

/// GETs `path` in a new thread, after `after`.
fn spawn_get(port: u16, path: String, after: Duration) -> JoinHandle<(Resp, Duration)> {
    std::thread::spawn(move || {
        std::thread::sleep(after);
        timed_get(port, &path)
    })
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn median(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[v.len() / 2]
}

/// Waits until pool `pool` runs and holds no task.
fn wait_pool_idle(port: u16, pool: &str) -> Metrics {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let m = Metrics::fetch(port);
        let busy = m.must("porter_pool_busy", &[("pool", pool)]);
        let queued = m.must("porter_pool_queued", &[("pool", pool)]);
        if busy == 0.0 && queued == 0.0 {
            return m;
        }
        assert!(
            Instant::now() < deadline,
            "pool {pool} still busy={busy} queued={queued}:\n{}",
            m.0
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until the workers' rings have nothing in flight.
fn wait_ring_idle(port: u16) -> Metrics {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let m = Metrics::fetch(port);
        let n = m.must("porter_uring_in_flight", &[]);
        if n == 0.0 {
            return m;
        }
        assert!(Instant::now() < deadline, "ring still has {n} in flight");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether this kernel gives porter an io_uring (else `aio on` tests
/// skip, saying why).
fn uring_available() -> bool {
    let ok = porter::disk::uring::probe();
    if let Err(why) = &ok {
        eprintln!("skipping aio on test: {why}");
    }
    ok.is_ok()
}

/// Lines of the error log containing `needle`.
fn log_lines(s: &Server, needle: &str) -> Vec<String> {
    s.read("logs/error.log")
        .lines()
        .filter(|l| l.contains(needle))
        .map(str::to_string)
        .collect()
}

/// Asserts the error log shows no crash or internal error.
fn assert_no_crash_in_log(s: &Server) {
    let log = s.read("logs/error.log");
    for bad in ["panick", "[alert]", "[emerg]", "[crit]"] {
        assert!(!log.contains(bad), "error log has {bad}:\n{log}");
    }
}

/// Stops the server and asserts it exited cleanly without a panic.
fn stop_cleanly(mut s: Server) {
    s.signal(libc::SIGTERM);
    let st = s
        .wait_exit(Duration::from_secs(10))
        .expect("exit on SIGTERM");
    let mut err = String::new();
    if let Some(mut e) = s.child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    assert!(st.success(), "exit status {st:?}, stderr: {err}");
    assert!(!err.contains("panicked"), "stderr: {err}");
}

/// Per-op delay of the mount in the hot/cold latency tests.
const DELAY_MS: u64 = 100;
/// Cold requests in flight at once in the hot/cold latency tests.
const COLD_LOAD: usize = 6;
/// Hot probes sent while the cold load runs.
const PROBES: usize = 5;

/// What one hot-under-cold-load run saw.
struct LoadRun {
    /// A cold request's latency with nothing else running (the best of two).
    cold_alone: Duration,
    /// Latencies of the cold requests sent together.
    cold: Vec<Duration>,
    /// Latencies of hot requests sent while the cold ones were in flight.
    probes: Vec<Duration>,
    before: Metrics,
    after: Metrics,
}

/// Measures a cold request alone, then sends [`COLD_LOAD`] cold requests at
/// once and [`PROBES`] hot ones shortly after, each on its own connection.
fn hot_under_cold_load(s: &Server, cold_pool: Option<&str>) -> LoadRun {
    let port = s.port;
    for _ in 0..3 {
        let r = get(port, "/hot.bin");
        assert_eq!(r.status, 200, "hot warm-up");
        assert_eq!(r.body, hot_body());
    }
    let mut cold_alone = Duration::MAX;
    for i in 0..2 {
        let (r, d) = timed_get(port, &format!("/cold/c{i}"));
        assert_eq!(r.status, 200, "cold alone: {}", r.text());
        assert_eq!(r.body, cold_body(i, 4096));
        cold_alone = cold_alone.min(d);
    }
    assert!(
        cold_alone >= Duration::from_millis(2 * DELAY_MS),
        "a cold request took only {cold_alone:?}: is the slow mount slow?"
    );
    if let Some(pool) = cold_pool {
        wait_pool_idle(port, pool);
    }
    let before = Metrics::fetch(port);
    let cold: Vec<_> = (0..COLD_LOAD)
        .map(|i| spawn_get(port, format!("/cold/c{}", 10 + i), Duration::ZERO))
        .collect();
    let probes: Vec<_> = (0..PROBES)
        .map(|i| {
            let after = Duration::from_millis(100 + 40 * i as u64);
            spawn_get(port, "/hot.bin".to_string(), after)
        })
        .collect();
    let probes: Vec<Duration> = probes
        .into_iter()
        .map(|h| {
            let (r, d) = h.join().unwrap();
            assert_eq!(r.status, 200, "hot probe");
            assert_eq!(r.body, hot_body());
            d
        })
        .collect();
    let cold: Vec<Duration> = cold
        .into_iter()
        .enumerate()
        .map(|(i, h)| {
            let (r, d) = h.join().unwrap();
            assert_eq!(r.status, 200, "cold c{}: {}", 10 + i, r.text());
            assert_eq!(r.body, cold_body(10 + i, 4096));
            d
        })
        .collect();
    if let Some(pool) = cold_pool {
        wait_pool_idle(port, pool);
    }
    let after = Metrics::fetch(port);
    LoadRun {
        cold_alone,
        cold,
        probes,
        before,
        after,
    }
}

/// Prints the figures (seen with `--nocapture`).
fn report(what: &str, run: &LoadRun) {
    eprintln!(
        "{what}: cold alone {:?}; cold under load {:?}; hot probes {:?}; loop busy {:?}s",
        run.cold_alone,
        run.cold,
        run.probes,
        run.after
            .get("porter_loop_busy_seconds_sum", &[("worker", "0")])
            .zip(
                run.before
                    .get("porter_loop_busy_seconds_sum", &[("worker", "0")])
            )
            .map(|(a, b)| a - b)
    );
}

fn loop_busy_delta(run: &LoadRun) -> f64 {
    let l = [("worker", "0")];
    run.after.must("porter_loop_busy_seconds_sum", &l)
        - run.before.must("porter_loop_busy_seconds_sum", &l)
}

fn latency_server(aio: &str) -> (SlowFs, TempDir, TempDir, Server) {
    let backing = cold_files(COLD_LOAD + 10, 4096);
    let fs = SlowFs::mount(backing.path(), &SlowFsOptions::uniform(DELAY_MS));
    let hot = hot_dir();
    let s = Server::start(&conf(
        "thread_pool cold threads=16;",
        &format!(
            "    root {};\n    sendfile on;\n    {aio}\n    \
             location /cold/ {{ alias {}/; }}",
            hot.path().display(),
            fs.path().display()
        ),
    ));
    (fs, backing, hot, s)
}

/// Without a pool, the one event loop does the slow opens and reads itself
/// and every connection on it waits: hot requests stall behind cold ones.
#[test]
fn aio_off_cold_requests_stall_hot_ones() {
    let Some(_serial) = setup() else { return };
    let (_fs, _backing, _hot, s) = latency_server("aio off;");
    let run = hot_under_cold_load(&s, None);
    report("aio off", &run);
    let c = secs(run.cold_alone);
    let hot = secs(median(&run.probes));
    assert!(
        hot >= 0.5 * c,
        "with aio off a hot request should wait for the cold ones: median hot {hot:.3}s, \
         cold alone {c:.3}s (probes {:?})",
        run.probes
    );
    // The loop served the cold requests one after another.
    let slowest = secs(*run.cold.iter().max().unwrap());
    assert!(
        slowest >= 2.0 * c,
        "cold requests should have been serialised: slowest {slowest:.3}s, alone {c:.3}s"
    );
    // And the loop-blocked metric says so: each cold request blocked it
    // for at least its lookup+open.
    let busy = loop_busy_delta(&run);
    let floor = COLD_LOAD as f64 * 2.0 * DELAY_MS as f64 / 1000.0;
    assert!(
        busy >= 0.5 * floor,
        "porter_loop_busy_seconds_sum grew by {busy:.3}s, expected about {floor:.3}s or more"
    );
    // The lag probe's timer waited behind at least one whole slow call.
    let lag = run
        .after
        .must("porter_loop_lag_max_seconds", &[("worker", "0")]);
    assert!(
        lag >= 0.5 * DELAY_MS as f64 / 1000.0,
        "porter_loop_lag_max_seconds is {lag:.3}s with the loop blocked {DELAY_MS} ms at a time"
    );
}

/// With a pool, the cold work runs on pool threads: hot requests keep their
/// latency, the loop stays free, and hot requests never go to the pool.
#[test]
fn aio_threads_hot_requests_keep_their_latency() {
    let Some(_serial) = setup() else { return };
    let (_fs, _backing, _hot, s) = latency_server("aio threads=cold;\n    aio_fast_path on;");
    let run = hot_under_cold_load(&s, Some("cold"));
    report("aio threads", &run);
    let c = secs(run.cold_alone);
    let hot_median = secs(median(&run.probes));
    let hot_max = secs(*run.probes.iter().max().unwrap());
    assert!(
        hot_median <= 0.1 * c && hot_max <= 0.25 * c,
        "hot requests should not wait for cold ones: median {hot_median:.3}s, max \
         {hot_max:.3}s, cold alone {c:.3}s (probes {:?})",
        run.probes
    );
    let pool = [("pool", "cold")];
    let tasks = run.after.must("porter_pool_tasks_total", &pool)
        - run.before.must("porter_pool_tasks_total", &pool);
    assert!(
        tasks >= COLD_LOAD as f64,
        "each cold request should have used the pool: {tasks} tasks for {COLD_LOAD} requests"
    );
    let open_miss = [("op", "open"), ("result", "miss")];
    let misses = run.after.must("porter_fastpath_total", &open_miss)
        - run.before.must("porter_fastpath_total", &open_miss);
    assert!(
        misses >= COLD_LOAD as f64,
        "cold opens should miss the fast path: {misses} misses for {COLD_LOAD} requests"
    );
    let busy = loop_busy_delta(&run);
    let one_op_each = COLD_LOAD as f64 * DELAY_MS as f64 / 1000.0;
    assert!(
        busy <= 0.5 * one_op_each,
        "the event loop was busy {busy:.3}s during the cold load: it waited on the slow disk"
    );

    // Hot-only phase, the pool idle: hot requests are served inline.
    let n = 20;
    let m0 = wait_pool_idle(s.port, "cold");
    for _ in 0..n {
        let r = get(s.port, "/hot.bin");
        assert_eq!(r.status, 200);
        assert_eq!(r.body, hot_body());
    }
    let m1 = wait_pool_idle(s.port, "cold");
    let delta = |name: &str, labels: &[(&str, &str)]| m1.must(name, labels) - m0.must(name, labels);
    assert_eq!(
        delta("porter_pool_tasks_total", &pool),
        0.0,
        "hot (cached) requests went to the pool"
    );
    let open_hits = delta(
        "porter_fastpath_total",
        &[("op", "open"), ("result", "hit")],
    );
    assert!(
        open_hits >= n as f64,
        "{open_hits} open hits for {n} hot requests"
    );
    assert_eq!(delta("porter_fastpath_total", &open_miss), 0.0);
    let data_hits = delta(
        "porter_fastpath_total",
        &[("op", "read"), ("result", "hit")],
    ) + delta(
        "porter_fastpath_total",
        &[("op", "sendfile"), ("result", "hit")],
    );
    assert!(
        data_hits >= n as f64,
        "{data_hits} read/sendfile hits for {n} hot requests"
    );
    let ttfb = delta("porter_ttfb_seconds_count", &[("worker", "0")]);
    assert!(ttfb >= n as f64, "porter_ttfb_seconds_count grew by {ttfb}");
}

/// `aio on`: the cold opens and reads go through the worker's io_uring;
/// hot requests keep their latency, the loop stays free, and hot requests
/// never reach the ring (the fast path serves them) nor a pool.
#[test]
fn aio_on_hot_requests_keep_their_latency() {
    let Some(_serial) = setup() else { return };
    if !uring_available() {
        return;
    }
    let (_fs, _backing, _hot, s) = latency_server("aio on;");
    let run = hot_under_cold_load(&s, None);
    report("aio on", &run);
    let c = secs(run.cold_alone);
    let hot_median = secs(median(&run.probes));
    let hot_max = secs(*run.probes.iter().max().unwrap());
    assert!(
        hot_median <= 0.1 * c && hot_max <= 0.25 * c,
        "hot requests should not wait for cold ones: median {hot_median:.3}s, max \
         {hot_max:.3}s, cold alone {c:.3}s (probes {:?})",
        run.probes
    );
    let after = wait_ring_idle(s.port);
    let ring = |m: &Metrics, name: &str| m.must(name, &[]);
    let submitted = ring(&after, "porter_uring_submissions_total")
        - ring(&run.before, "porter_uring_submissions_total");
    assert!(
        submitted >= 2.0 * COLD_LOAD as f64,
        "each cold request should open and read through the ring: {submitted} submissions"
    );
    let not_inline = ring(&after, "porter_uring_not_inline_total")
        - ring(&run.before, "porter_uring_not_inline_total");
    assert!(
        not_inline >= COLD_LOAD as f64,
        "the slow disk's calls cannot complete at submission: {not_inline} not inline"
    );
    let pool = [("pool", "default")];
    assert_eq!(
        after.must("porter_pool_tasks_total", &pool),
        run.before.must("porter_pool_tasks_total", &pool),
        "aio on reads went to the default pool"
    );
    let busy = loop_busy_delta(&run);
    let one_op_each = COLD_LOAD as f64 * DELAY_MS as f64 / 1000.0;
    assert!(
        busy <= 0.5 * one_op_each,
        "the event loop was busy {busy:.3}s during the cold load: it waited on the slow disk"
    );

    // Hot only: served inline by the fast path, nothing reaches the ring.
    let m0 = wait_ring_idle(s.port);
    for _ in 0..20 {
        let r = get(s.port, "/hot.bin");
        assert_eq!(r.status, 200);
        assert_eq!(r.body, hot_body());
    }
    let m1 = wait_ring_idle(s.port);
    assert_eq!(
        ring(&m1, "porter_uring_submissions_total"),
        ring(&m0, "porter_uring_submissions_total"),
        "hot (cached) requests went to the ring"
    );
    assert_no_crash_in_log(&s);
}

/// Server for the pool-limit tests: `pool_line` defines pool `p`, every
/// location uses it, cold files on a mount with `delay_ms` per operation.
fn pool_server(pool_line: &str, delay_ms: u64) -> (SlowFs, TempDir, TempDir, Server) {
    let backing = cold_files(8, 4096);
    let fs = SlowFs::mount(backing.path(), &SlowFsOptions::uniform(delay_ms));
    let hot = hot_dir();
    let s = Server::start(&conf(
        pool_line,
        &format!(
            "    root {};\n    aio threads=p;\n    \
             location /cold/ {{ alias {}/; }}",
            hot.path().display(),
            fs.path().display()
        ),
    ));
    (fs, backing, hot, s)
}

fn assert_cold_ok(r: &Resp, i: usize, what: &str, log: &str) {
    assert_eq!(r.status, 200, "{what}: {}\nerror log:\n{log}", r.text());
    assert_eq!(r.body, cold_body(i, 4096), "{what}");
}

/// A full queue rejects: 503 with Retry-After and NGINX's log line; once
/// the slow tasks finish, the same request succeeds.
#[test]
fn full_queue_gives_503_then_recovers() {
    let Some(_serial) = setup() else { return };
    let delay = 150;
    let (_fs, _b, _h, s) = pool_server("thread_pool p threads=1 max_queue=1;", delay);
    let port = s.port;
    // A occupies the one thread (its open alone is a lookup plus an open),
    // B waits in the queue, C finds the queue full.
    let a = spawn_get(port, "/cold/c1".into(), Duration::ZERO);
    let b = spawn_get(port, "/cold/c2".into(), Duration::from_millis(50));
    std::thread::sleep(Duration::from_millis(110));
    let (c, c_time) = timed_get(port, "/cold/c3");
    let log = || s.read("logs/error.log");
    assert_eq!(
        c.status,
        503,
        "third request with threads=1 max_queue=1: {c:?}\n{}",
        log()
    );
    let retry = c.header("Retry-After").expect("503 without Retry-After");
    assert!(!retry.trim().is_empty(), "empty Retry-After");
    assert!(
        c_time < Duration::from_millis(delay),
        "the 503 should not wait for the disk: {c_time:?}"
    );
    // A and B each hold at most one task at a time, so they fit
    // (threads + max_queue = 2): a request's next task (the sendfile after
    // the open) must not be refused because the thread that just finished
    // its previous task has not gone back to the queue yet.
    let (ra, _) = a.join().unwrap();
    let (rb, _) = b.join().unwrap();
    assert_cold_ok(&ra, 1, "A (running)", &log());
    assert_cold_ok(&rb, 2, "B (queued)", &log());
    let needle = "thread pool \"p\" queue overflow: 1 tasks waiting";
    s.wait_log("logs/error.log", needle, Duration::from_secs(2));
    std::thread::sleep(Duration::from_millis(100));
    let lines = log_lines(&s, "queue overflow");
    assert_eq!(lines.len(), 1, "one line for the one 503:\n{}", log());
    assert!(
        lines[0].contains("[error]") && lines[0].contains(needle),
        "{}",
        lines[0]
    );
    wait_pool_idle(port, "p");
    let (again, _) = timed_get(port, "/cold/c3");
    assert_cold_ok(
        &again,
        3,
        "C after the pool drained",
        &s.read("logs/error.log"),
    );
    let m = Metrics::fetch(port);
    assert_eq!(m.must("porter_pool_overflows_total", &[("pool", "p")]), 1.0);
    assert_eq!(m.must("porter_pool_threads", &[("pool", "p")]), 1.0);
}

/// `max_queue=0`: at most `threads` tasks in flight, none waiting.
#[test]
fn max_queue_zero_rejects_beyond_threads() {
    let Some(_serial) = setup() else { return };
    let delay = 150;
    let (_fs, _b, _h, s) = pool_server("thread_pool p threads=2 max_queue=0;", delay);
    let port = s.port;
    let a = spawn_get(port, "/cold/c1".into(), Duration::ZERO);
    let b = spawn_get(port, "/cold/c2".into(), Duration::from_millis(40));
    std::thread::sleep(Duration::from_millis(100));
    let (c, c_time) = timed_get(port, "/cold/c3");
    assert_eq!(
        c.status, 503,
        "third request with threads=2 max_queue=0: {c:?}"
    );
    assert!(c.header("Retry-After").is_some(), "503 without Retry-After");
    let (ra, a_time) = a.join().unwrap();
    let (rb, _) = b.join().unwrap();
    assert_cold_ok(&ra, 1, "A", &s.read("logs/error.log"));
    assert_cold_ok(&rb, 2, "B", &s.read("logs/error.log"));
    assert!(
        c_time.as_secs_f64() <= 0.25 * a_time.as_secs_f64(),
        "the 503 should come at once: {c_time:?} (a cold request takes {a_time:?})"
    );
    // How many of the two admitted tasks a thread has taken up by then
    // depends on the machine's load ("0 tasks waiting" when both run).
    let needle = "thread pool \"p\" queue overflow: ";
    let log = s.wait_log("logs/error.log", needle, Duration::from_secs(2));
    assert!(
        log.lines()
            .any(|l| l.contains(needle) && l.contains(" tasks waiting")),
        "{log}"
    );
    wait_pool_idle(port, "p");
    let (again, _) = timed_get(port, "/cold/c3");
    assert_cold_ok(
        &again,
        3,
        "C after the pool drained",
        &s.read("logs/error.log"),
    );
}

/// `aio threads=pool_$arg_p`: the pool is chosen per request; an unknown
/// name is a 500 and a log line.
#[test]
fn pool_name_from_a_variable() {
    let Some(_serial) = setup() else { return };
    let backing = cold_files(8, 4096);
    let fs = SlowFs::mount(backing.path(), &SlowFsOptions::uniform(30));
    let s = Server::start(&conf(
        "thread_pool pool_a threads=2;\nthread_pool pool_b threads=2;",
        &format!(
            "    location /cold/ {{ alias {}/; aio threads=pool_$arg_p; }}",
            fs.path().display()
        ),
    ));
    let port = s.port;
    let tasks = |m: &Metrics, p: &str| m.must("porter_pool_tasks_total", &[("pool", p)]);
    let m0 = Metrics::fetch(port);
    assert_cold_ok(
        &get(port, "/cold/c1?p=a"),
        1,
        "?p=a",
        &s.read("logs/error.log"),
    );
    let m1 = wait_pool_idle(port, "pool_a");
    assert!(tasks(&m1, "pool_a") > tasks(&m0, "pool_a"), "pool_a unused");
    assert_eq!(
        tasks(&m1, "pool_b"),
        tasks(&m0, "pool_b"),
        "pool_b used for ?p=a"
    );
    assert_cold_ok(
        &get(port, "/cold/c2?p=b"),
        2,
        "?p=b",
        &s.read("logs/error.log"),
    );
    let m2 = wait_pool_idle(port, "pool_b");
    assert!(tasks(&m2, "pool_b") > tasks(&m1, "pool_b"), "pool_b unused");
    assert_eq!(
        tasks(&m2, "pool_a"),
        tasks(&m1, "pool_a"),
        "pool_a used for ?p=b"
    );

    let r = get(port, "/cold/c3?p=zzz");
    assert_eq!(r.status, 500, "unknown pool: {r:?}");
    let needle = "thread pool \"pool_zzz\" not found";
    let log = s.wait_log("logs/error.log", needle, Duration::from_secs(2));
    assert!(log.contains(needle), "{log}");
    // Still serving.
    assert_cold_ok(
        &get(port, "/cold/c4?p=a"),
        4,
        "?p=a after the error",
        &s.read("logs/error.log"),
    );
    assert_no_crash_in_log(&s);
}

/// Reads the response head and about `want` body bytes, then closes the
/// connection with the rest unread (so the kernel resets it).
fn read_some_then_close(port: u16, path: &str, want: usize) {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let mut got = 0;
    let mut head = Vec::new();
    while got < want {
        let n = c.read(&mut buf).expect("read");
        assert!(n > 0, "server closed early");
        if head.len() < 12 {
            head.extend_from_slice(&buf[..n.min(12)]);
        }
        got += n;
    }
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&head)
    );
    drop(c);
}

/// Downloads `path` fully and returns the body length.
fn full_length(port: u16, path: &str) -> usize {
    let r = get(port, path);
    assert_eq!(r.status, 200, "{path}");
    r.body.len()
}

/// A client that leaves in the middle of a sendfile running on a pool
/// thread leaves the server healthy: no leaked task, no crash.
#[test]
fn client_leaving_during_offloaded_sendfile() {
    let Some(_serial) = setup() else { return };
    client_leaving("thread_pool io threads=4;", "aio threads=io;", |port| {
        let m = wait_pool_idle(port, "io");
        assert!(
            m.must("porter_pool_tasks_total", &[("pool", "io")]) > 0.0,
            "aio_fast_path off should send everything through the pool"
        );
    });
}

/// The same under `aio on`: a client leaving while the ring reads for it
/// (the read's buffer stays the ring's until the kernel is done) leaves
/// nothing in flight and the server healthy.
#[test]
fn client_leaving_during_a_ring_send() {
    let Some(_serial) = setup() else { return };
    if !uring_available() {
        return;
    }
    client_leaving("", "aio on;", |port| {
        let m = wait_ring_idle(port);
        assert!(
            m.must("porter_uring_submissions_total", &[]) > 0.0,
            "aio_fast_path off should read everything through the ring"
        );
    });
}

/// Clients leave big responses (cached, and on a slow mount) half-way
/// with `aio` as given and the fast path off; `settled` waits for the
/// disk work to end and checks it went where `aio` says. Hot requests in
/// between and whole files after are served intact.
fn client_leaving(main_extra: &str, aio: &str, settled: impl Fn(u16)) {
    const BIG: usize = 64 * 1024 * 1024;
    let hot = hot_dir();
    hot.write("big.bin", vec![b'b'; BIG]);
    // A second big file on the slow mount: each 128 KiB read takes 20 ms,
    // so the read is in progress when the client leaves.
    let backing = TempDir::new("slowbig");
    const SLOW_BIG: usize = 8 * 1024 * 1024;
    backing.write("big.bin", vec![b's'; SLOW_BIG]);
    let fs = SlowFs::mount(
        backing.path(),
        &SlowFsOptions {
            delay_ms: 20,
            ..Default::default()
        },
    );
    let s = Server::start(&conf(
        main_extra,
        &format!(
            "    root {};\n    {aio}\n    aio_fast_path off;\n    sendfile on;\n    \
             sendfile_max_chunk 256k;\n    location /slow/ {{ alias {}/; }}",
            hot.path().display(),
            fs.path().display()
        ),
    ));
    let port = s.port;
    for i in 0..5 {
        read_some_then_close(port, "/big.bin", 1 << 20);
        assert_eq!(
            get(port, "/hot.bin").body,
            hot_body(),
            "after disconnect {i}"
        );
    }
    for i in 0..3 {
        read_some_then_close(port, "/slow/big.bin", 300 * 1024);
        assert_eq!(
            get(port, "/hot.bin").body,
            hot_body(),
            "after slow disconnect {i}"
        );
    }
    settled(port);
    // Whole files still come through intact.
    assert_eq!(full_length(port, "/big.bin"), BIG);
    assert_eq!(full_length(port, "/slow/big.bin"), SLOW_BIG);
    assert_no_crash_in_log(&s);
    stop_cleanly(s);
}

/// A read error in the middle of a file: the response is cut short (or is
/// a 5xx if nothing was sent), one error log line, and the server goes on
/// — through a pool (`/t`), inline (`/o`) and, where the kernel has
/// io_uring, the ring (`/u`).
#[test]
fn read_error_mid_file() {
    let Some(_serial) = setup() else { return };
    const LEN: usize = 4 * 1024 * 1024;
    let backing = TempDir::new("eio");
    backing.write("bad.bin", vec![b'e'; LEN]);
    backing.write("good.bin", vec![b'g'; 64 * 1024]);
    let fs = SlowFs::mount(
        backing.path(),
        &SlowFsOptions {
            delay_ms: 10,
            eio: vec![("bad.bin".into(), 1024 * 1024)],
            ..Default::default()
        },
    );
    let hot = hot_dir();
    let s = Server::start(&conf(
        "thread_pool p threads=2;",
        &format!(
            "    root {};\n    sendfile on;\n    sendfile_max_chunk 256k;\n    \
             location /t/ {{ alias {mnt}/; aio threads=p; }}\n    \
             location /o/ {{ alias {mnt}/; aio off; }}\n    \
             location /u/ {{ alias {mnt}/; aio on; }}",
            hot.path().display(),
            mnt = fs.path().display()
        ),
    ));
    let port = s.port;
    let eio = "Input/output error";
    let mut routes = vec![(1, "/t"), (2, "/o")];
    if uring_available() {
        routes.push((3, "/u"));
    }
    for (n, prefix) in routes {
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(c, "GET {prefix}/bad.bin HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let raw = read_all(&mut c);
        let text = String::from_utf8_lossy(&raw[..raw.len().min(200)]).into_owned();
        if text.starts_with("HTTP/1.1 200") {
            let head_end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
            let body = raw.len() - head_end;
            assert!(
                body < LEN,
                "{prefix}: a read error must cut the response short, got all {body} bytes"
            );
        } else {
            assert!(text.starts_with("HTTP/1.1 5"), "{prefix}: {text}");
        }
        s.wait_log("logs/error.log", eio, Duration::from_secs(2));
        std::thread::sleep(Duration::from_millis(200));
        let lines = log_lines(&s, eio);
        assert_eq!(
            lines.len(),
            n,
            "{prefix}: one log line per failed request:\n{}",
            s.read("logs/error.log")
        );
        assert_eq!(full_length(port, &format!("{prefix}/good.bin")), 64 * 1024);
        assert_eq!(get(port, "/hot.bin").body, hot_body());
    }
    // NGINX logs a failed file read at [crit]; anything else that
    // serious would be a crash.
    for l in s.read("logs/error.log").lines() {
        let serious = ["[crit]", "[alert]", "[emerg]", "panick"]
            .iter()
            .any(|w| l.contains(w));
        assert!(!serious || l.contains(eio), "{l}");
    }
    stop_cleanly(s);
}
