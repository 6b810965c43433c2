//! Thread pools, the fast path, `open_file_cache` and the metrics, on a
//! normal (fast) disk: what can be shown without slowing a disk down. The
//! slow-disk proofs are in `slow_disk.rs`.

use std::time::Duration;

use crate::common::metrics::Metrics;
use crate::common::*;

fn docroot() -> TempDir {
    let d = TempDir::new("aio");
    d.write("hot.txt", "hot file\n");
    d.write("big.bin", vec![b'x'; 3 * 1024 * 1024 + 7]);
    d
}

fn conf(main: &str, http: &str, server: &str, root: &TempDir) -> String {
    format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\nerror_log {{PREFIX}}/logs/error.log info;\n{main}\n\
         events {{ }}\nhttp {{\n  access_log off;\n{http}\n  server {{\n    listen 127.0.0.1:{{PORT}};\n    root {};\n\
         location = /metrics {{ porter_metrics; }}\n    location = /status {{ stub_status; }}\n{server}\n  }}\n}}\n",
        root.path().display()
    )
}

#[test]
fn implicit_default_pool_and_named_threads() {
    let root = docroot();
    let s = Server::start(&conf("", "  aio threads;", "", &root));
    assert_eq!(get(s.port, "/hot.txt").text(), "hot file\n");
    let all = Metrics::fetch(s.port);
    let default = [("pool", "default")];
    assert_eq!(all.must("porter_pool_threads", &default), 32.0);
    assert_eq!(all.must("porter_pool_max_queue", &default), 65536.0);
    // Threads are named after the pool (what `top -H` shows).
    assert_eq!(wait_threads(s.child.id(), "default-", 32), 32);
}

/// Pool threads run `SCHED_IDLE`, 5 nice steps below the event loops (the
/// nice they keep for a boost, `disk/priority.rs`); the loops stay
/// `SCHED_OTHER`.
#[test]
fn pool_threads_run_below_the_event_loops() {
    let root = docroot();
    let s = Server::start(&conf(
        "thread_pool io threads=4;",
        "  aio threads=io;",
        "",
        &root,
    ));
    assert_eq!(get(s.port, "/big.bin").status, 200);
    let pid = s.child.id();
    assert_eq!(wait_threads(pid, "io-", 4), 4);
    // SCHED_IDLE only where the watch thread can lift it (CAP_SYS_NICE);
    // else nice +5 alone, and the log says so.
    let idle = if s
        .read("logs/error.log")
        .contains("no CAP_SYS_NICE for SCHED_IDLE")
    {
        0
    } else {
        5
    };
    // A boost (a loop seen asleep in the kernel on a busy machine) lifts
    // them for 50 ms at a time: wait for one look outside it.
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while thread_policies(pid, "io-") != vec![idle; 4] && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(thread_policies(pid, "io-"), vec![idle; 4]);
    assert_eq!(thread_policies(pid, "porter-w0"), vec![0]);
    let nice = |prefix: &str| thread_stat_field(pid, prefix, 19);
    let loop_nice = nice("porter-w0")[0];
    assert_eq!(nice("io-"), vec![(loop_nice + 5).min(19); 4]);
}

/// Without `CAP_SYS_NICE` (dropped from the bounding set before `exec`, as
/// a container may) nothing could lift a `SCHED_IDLE` thread again, so
/// pool threads keep the nice +5 rule alone, and the log says so once.
#[test]
fn without_cap_sys_nice_pool_threads_keep_nice_five() {
    use std::os::unix::process::CommandExt;
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipping: not root");
        return;
    }
    let root = docroot();
    let s = Server::start_with(
        TempDir::new("aio-nocap"),
        &conf("thread_pool io threads=2;", "  aio threads=io;", "", &root),
        &[],
        |cmd| unsafe {
            cmd.pre_exec(|| {
                // CAP_SYS_NICE is capability 23.
                if libc::prctl(libc::PR_CAPBSET_DROP, 23, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        },
    );
    assert_eq!(get(s.port, "/big.bin").status, 200);
    let pid = s.child.id();
    assert_eq!(wait_threads(pid, "io-", 2), 2);
    assert_eq!(thread_policies(pid, "io-"), vec![0; 2]);
    let log = s.read("logs/error.log");
    assert_eq!(
        log.matches("no CAP_SYS_NICE for SCHED_IDLE").count(),
        1,
        "{log}"
    );
}

/// Threads of `pid` whose name starts with `prefix`.
fn threads_named(pid: u32, prefix: &str) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter(|t| {
            std::fs::read_to_string(t.as_ref().unwrap().path().join("comm"))
                .unwrap_or_default()
                .starts_with(prefix)
        })
        .count()
}

/// A new thread names itself once it runs: waits up to 3 s for `want`.
fn wait_threads(pid: u32, prefix: &str, want: usize) -> usize {
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while threads_named(pid, prefix) != want && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    threads_named(pid, prefix)
}

#[test]
fn cached_files_are_served_by_the_fast_path_not_the_pool() {
    let root = docroot();
    let s = Server::start(&conf(
        "thread_pool disk threads=2;",
        "  aio threads=disk;\n  sendfile on;",
        "",
        &root,
    ));
    // Warm the path and pages.
    assert_eq!(get(s.port, "/hot.txt").status, 200);
    assert_eq!(get(s.port, "/big.bin").body.len(), 3 * 1024 * 1024 + 7);
    let before = Metrics::fetch(s.port);
    for _ in 0..20 {
        assert_eq!(get(s.port, "/hot.txt").text(), "hot file\n");
    }
    assert_eq!(get(s.port, "/big.bin").body.len(), 3 * 1024 * 1024 + 7);
    let after = Metrics::fetch(s.port);
    let tasks = |m: &Metrics| m.must("porter_pool_tasks_total", &[("pool", "disk")]);
    assert_eq!(tasks(&after), tasks(&before), "hot files went to the pool");
    let hits =
        |a: &Metrics, op: &str| a.must("porter_fastpath_total", &[("op", op), ("result", "hit")]);
    assert!(hits(&after, "open") - hits(&before, "open") >= 21.0);
    assert!(hits(&after, "read") - hits(&before, "read") >= 20.0);
    assert!(hits(&after, "sendfile") - hits(&before, "sendfile") >= 1.0);
    // Event-loop and TTFB histograms count something.
    let w0 = [("worker", "0")];
    assert!(after.must("porter_loop_busy_seconds_count", &w0) > 0.0);
    assert!(after.must("porter_ttfb_seconds_count", &w0) >= 22.0);
}

#[test]
fn fast_path_off_sends_everything_through_the_pool() {
    let root = docroot();
    let s = Server::start(&conf(
        "thread_pool disk threads=2;",
        "  aio threads=disk;\n  aio_fast_path off;\n  sendfile on;",
        "",
        &root,
    ));
    let before = Metrics::fetch(s.port);
    for _ in 0..5 {
        assert_eq!(get(s.port, "/hot.txt").text(), "hot file\n");
    }
    let body = get(s.port, "/big.bin").body;
    assert!(body.len() == 3 * 1024 * 1024 + 7 && body.iter().all(|&b| b == b'x'));
    let after = Metrics::fetch(s.port);
    let tasks = |m: &Metrics| m.must("porter_pool_tasks_total", &[("pool", "disk")]);
    // open + read per small file, open + at least one sendfile for the big one.
    assert!(tasks(&after) - tasks(&before) >= 12.0);
}

#[test]
fn variable_pool_names_resolve_per_request() {
    let root = docroot();
    let s = Server::start(&conf(
        "thread_pool pool_a threads=1;\nthread_pool pool_b threads=1;",
        "  aio threads=pool_$arg_p;\n  aio_fast_path off;",
        "",
        &root,
    ));
    let before = Metrics::fetch(s.port);
    assert_eq!(get(s.port, "/hot.txt?p=a").status, 200);
    assert_eq!(get(s.port, "/hot.txt?p=b").status, 200);
    assert_eq!(get(s.port, "/hot.txt?p=b").status, 200);
    let after = Metrics::fetch(s.port);
    let d = |p: &str| {
        let k = [("pool", p)];
        after.must("porter_pool_tasks_total", &k) - before.must("porter_pool_tasks_total", &k)
    };
    assert_eq!((d("pool_a"), d("pool_b")), (2.0, 4.0));
    assert_eq!(get(s.port, "/hot.txt?p=zzz").status, 500);
    s.wait_log(
        "logs/error.log",
        "thread pool \"pool_zzz\" not found",
        Duration::from_secs(3),
    );
}

#[test]
fn open_file_cache_keeps_descriptors_and_revalidates() {
    let root = docroot();
    let s = Server::start(&conf(
        "",
        "  open_file_cache max=10 inactive=60s;\n  open_file_cache_valid 1s;\n  open_file_cache_errors on;",
        "",
        &root,
    ));
    assert_eq!(get(s.port, "/hot.txt").text(), "hot file\n");
    assert_eq!(get(s.port, "/later.txt").status, 404);
    // Replace the file (new inode) and create the missing one: within
    // `valid` the cached answers stand, after it they are rechecked.
    std::fs::remove_file(root.path().join("hot.txt")).unwrap();
    root.write("hot.txt", "replaced\n");
    root.write("later.txt", "now here\n");
    assert_eq!(get(s.port, "/hot.txt").text(), "hot file\n");
    assert_eq!(get(s.port, "/later.txt").status, 404);
    std::thread::sleep(Duration::from_millis(1300));
    assert_eq!(get(s.port, "/hot.txt").text(), "replaced\n");
    assert_eq!(get(s.port, "/later.txt").text(), "now here\n");
}

#[test]
fn stub_status_has_nginx_layout() {
    let root = docroot();
    let s = Server::start(&conf("", "", "", &root));
    let t = get(s.port, "/status").text();
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines.len(), 4, "{t}");
    assert!(lines[0].starts_with("Active connections: "), "{t}");
    assert_eq!(lines[1], "server accepts handled requests");
    assert_eq!(lines[2].split_whitespace().count(), 3, "{t}");
    assert!(lines[3].starts_with("Reading: ") && lines[3].contains(" Writing: "));
}

#[test]
fn reload_keeps_unchanged_pools() {
    let root = docroot();
    let body = conf(
        "thread_pool disk threads=2;",
        "  aio threads=disk;\n  aio_fast_path off;",
        "",
        &root,
    );
    let s = Server::start(&body);
    for _ in 0..3 {
        assert_eq!(get(s.port, "/hot.txt").status, 200);
    }
    let before = Metrics::fetch(s.port);
    let pid = s.child.id();
    assert_eq!(wait_threads(pid, "disk-", 2), 2);
    // Reload with the same pool and a new location.
    let text = config_text(
        &body.replace(
            "location = /status",
            "location = /v { return 200 \"v2\"; }\n    location = /status",
        ),
        s.port,
        s.prefix.path(),
    );
    s.prefix.write("porter.conf", text);
    s.signal(libc_sighup());
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while get(s.port, "/v").text() != "v2" {
        assert!(std::time::Instant::now() < deadline, "reload did not apply");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Same threads, counters carried on.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(threads_named(pid, "disk-"), 2);
    let after = Metrics::fetch(s.port);
    let tasks = |m: &Metrics| m.must("porter_pool_tasks_total", &[("pool", "disk")]);
    assert!(tasks(&after) >= tasks(&before));
}

fn libc_sighup() -> i32 {
    1
}
