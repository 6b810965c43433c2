//! `aio on` (io_uring) with the real binary: files come out intact
//! through the worker's ring (whole, ranges, `sendfile off`, fast path
//! off, many at once), and where io_uring is refused — here by a seccomp
//! filter that makes `io_uring_setup` fail with `EPERM`, as
//! `kernel.io_uring_disabled` or a container's profile does — `porter -t`
//! and start-up say so once with the directive's file:line, and requests
//! are served by the `default` pool. The proxy cache under `aio on`:
//! entries written through the pool, hits read and sent through the ring.
//!
//! Tests that need io_uring skip, saying why, where the kernel has none.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

use crate::common::metrics::Metrics;
use crate::common::origin::*;
use crate::common::*;

fn body(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 13 % 251) as u8).collect()
}

/// A server with `aio on` over a directory holding `big.bin` (3 MiB) and
/// `small.txt`; `/nofast/` turns the fast path off, `/copy/` also
/// `sendfile`.
fn server(setup: impl FnOnce(&mut Command)) -> (TempDir, Server) {
    let root = TempDir::new("aio-on-root");
    root.write("big.bin", body(3 * 1024 * 1024 + 5));
    root.write("small.txt", b"small file\n");
    let r = root.path().display();
    let conf = format!(
        "daemon off;\nworker_processes 2;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\n\
         aio_uring workers=4 max_in_flight=8;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n  default_type application/octet-stream;\n  access_log off;\n  \
           server {{\n    listen 127.0.0.1:{{PORT}};\n    root {r};\n    \
             sendfile on;\n    sendfile_max_chunk 256k;\n    \
             aio on;\n    \
             location = /metrics {{ porter_metrics; }}\n    \
             location /nofast/ {{ alias {r}/; aio_fast_path off; }}\n    \
             location /copy/ {{ alias {r}/; aio_fast_path off; sendfile off; }}\n  \
           }}\n}}\n"
    );
    let s = Server::start_with(TempDir::new("aio-on"), &conf, &[], setup);
    (root, s)
}

/// `file:line` of the `aio on` directive in the server's configuration.
fn aio_on_at(s: &Server) -> String {
    let text = s.read("porter.conf");
    let line = text
        .lines()
        .position(|l| l.trim() == "aio on;")
        .expect("aio on in the config")
        + 1;
    format!("{}:{line}", s.prefix.path().join("porter.conf").display())
}

fn uring_available() -> bool {
    match porter::disk::uring::probe() {
        Ok(()) => true,
        Err(why) => {
            eprintln!("skipping: {why}");
            false
        }
    }
}

fn assert_files_served(port: u16) {
    let big = body(3 * 1024 * 1024 + 5);
    for prefix in ["", "/nofast", "/copy"] {
        let r = get(port, &format!("{prefix}/big.bin"));
        assert_eq!(r.status, 200, "{prefix}");
        assert!(r.body == big, "{prefix}/big.bin differs");
        let r = get(port, &format!("{prefix}/small.txt"));
        assert_eq!(r.body, b"small file\n", "{prefix}");
        let r = get_with(
            port,
            &format!("{prefix}/big.bin"),
            "Range: bytes=1000-299999\r\n",
        );
        assert_eq!(r.status, 206, "{prefix}");
        assert!(r.body == big[1000..300000], "{prefix} range differs");
        assert_eq!(get(port, &format!("{prefix}/none")).status, 404, "{prefix}");
    }
}

#[test]
fn files_come_out_intact_through_the_ring() {
    if !uring_available() {
        return;
    }
    let (_root, s) = server(|_| {});
    let before = Metrics::fetch(s.port);
    assert_files_served(s.port);
    // Many at once on two workers whose rings take 8 operations each.
    let port = s.port;
    let clients: Vec<_> = (0..24)
        .map(|i| {
            std::thread::spawn(move || {
                let p = if i % 2 == 0 {
                    "/nofast/big.bin"
                } else {
                    "/copy/big.bin"
                };
                get(port, p).body.len()
            })
        })
        .collect();
    for c in clients {
        assert_eq!(c.join().unwrap(), 3 * 1024 * 1024 + 5);
    }
    let after = Metrics::fetch(s.port);
    let d = |n: &str| after.must(n, &[]) - before.must(n, &[]);
    assert!(d("porter_uring_submissions_total") >= 24.0);
    assert_eq!(after.must("porter_uring_in_flight", &[]), 0.0);
    let pool = [("pool", "default")];
    assert_eq!(
        after.must("porter_pool_tasks_total", &pool),
        before.must("porter_pool_tasks_total", &pool),
        "reads went to the pool"
    );
    let log = s.read("logs/error.log");
    assert!(!log.contains("falls back"), "{log}");
    for bad in ["panick", "[alert]", "[emerg]", "[crit]"] {
        assert!(!log.contains(bad), "{log}");
    }
}

/// The kernel's io-wq workers that run the ring's blocking calls
/// (`iou-wrk-TID`, forked from the loop) are put under `SCHED_IDLE` like
/// pool threads, within a scan period of their birth.
#[test]
fn io_wq_workers_run_below_the_event_loops() {
    if !uring_available() {
        return;
    }
    let (_root, s) = server(|_| {});
    let pid = s.child.id();
    // With the fast path off every open and statx goes through the ring,
    // and a statx always runs on an io-wq worker.
    for _ in 0..4 {
        assert_eq!(get(s.port, "/nofast/small.txt").status, 200);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    let mut seen = thread_policies(pid, "iou-wrk-");
    while (seen.is_empty() || seen.iter().any(|&p| p != 5)) && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
        seen = thread_policies(pid, "iou-wrk-");
    }
    assert!(!seen.is_empty(), "no io-wq worker was started");
    assert_eq!(thread_policies(pid, "porter-w0"), vec![0]);
    if s.read("logs/error.log")
        .contains("no CAP_SYS_NICE for SCHED_IDLE")
    {
        eprintln!("no CAP_SYS_NICE: io-wq workers keep their policy");
        return;
    }
    assert!(
        seen.iter().all(|&p| p == 5),
        "io-wq workers' policies {seen:?}"
    );
    assert_eq!(thread_policies(pid, "porter-w0"), vec![0]);
    assert_eq!(thread_policies(pid, "porter-w1"), vec![0]);
}

/// A seccomp filter that makes `io_uring_setup` fail with `EPERM` and
/// allows everything else; installed in the child before `exec`.
fn deny_io_uring(cmd: &mut Command) {
    // SAFETY: the hook makes only async-signal-safe system calls.
    unsafe {
        cmd.pre_exec(|| {
            let stmt = |code: u32, k: u32| libc::sock_filter {
                code: code as u16,
                jt: 0,
                jf: 0,
                k,
            };
            let jeq = |k: u32| libc::sock_filter {
                code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
                jt: 0,
                jf: 1,
                k,
            };
            let filter = [
                // seccomp_data.nr
                stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0),
                jeq(libc::SYS_io_uring_setup as u32),
                stmt(
                    libc::BPF_RET | libc::BPF_K,
                    libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
                ),
                stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW),
            ];
            let prog = libc::sock_fprog {
                len: filter.len() as u16,
                filter: filter.as_ptr() as *mut libc::sock_filter,
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &prog as *const libc::sock_fprog,
                ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[test]
fn without_io_uring_aio_on_falls_back_to_threads_with_one_notice() {
    let (_root, s) = server(deny_io_uring);
    let at = aio_on_at(&s);
    let notice = format!(
        "\"aio on\" in {at} falls back to \"aio threads\": \
         io_uring_setup() failed (1: Operation not permitted)"
    );
    let log = s.wait_log("logs/error.log", "falls back", Duration::from_secs(5));
    let lines: Vec<_> = log.lines().filter(|l| l.contains("falls back")).collect();
    assert_eq!(lines.len(), 1, "{log}");
    assert!(
        lines[0].contains("[notice]") && lines[0].ends_with(&notice),
        "want {notice}\n{log}"
    );
    let before = Metrics::fetch(s.port);
    assert_files_served(s.port);
    let after = Metrics::fetch(s.port);
    assert_eq!(after.must("porter_uring_submissions_total", &[]), 0.0);
    let pool = [("pool", "default")];
    assert!(
        after.must("porter_pool_tasks_total", &pool)
            > before.must("porter_pool_tasks_total", &pool),
        "the default pool served nothing"
    );

    // `porter -t` says the same, on stderr.
    let mut t = Command::new(BIN);
    t.arg("-t")
        .arg("-p")
        .arg(s.prefix.path())
        .arg("-c")
        .arg("porter.conf");
    deny_io_uring(&mut t);
    let out = t.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains(&format!("porter: [notice] {notice}")), "{err}");
    assert!(err.contains("test is successful"), "{err}");
}

#[test]
fn proxy_cache_fills_through_the_pool_and_hits_through_the_ring() {
    if !uring_available() {
        return;
    }
    let big = body(200_000);
    let b2 = big.clone();
    let origin = Origin::start(move |_| Reply::ok(&b2));
    let conf = format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\n\
         events {{ worker_connections 64; }}\n\
         http {{\n  access_log off;\n  \
           proxy_cache_path {{PREFIX}}/cache levels=1:2 keys_zone=one:1m;\n  \
           server {{\n    listen 127.0.0.1:{{PORT}};\n    aio on;\n    aio_fast_path off;\n    \
             sendfile on;\n    location = /metrics {{ porter_metrics; }}\n    \
             location / {{ proxy_pass http://127.0.0.1:{}; proxy_cache one; \
               proxy_cache_valid 200 10m; add_header X-Cache $upstream_cache_status always; }}\n  \
           }}\n}}\n",
        origin.port
    );
    let s = Server::start(&conf);
    let miss = get(s.port, "/big");
    assert_eq!(miss.header("X-Cache"), Some("MISS"));
    assert!(miss.body == big);
    // The entry is renamed into place when the fill ends.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let before = loop {
        let m = Metrics::fetch(s.port);
        let r = get(s.port, "/big");
        assert!(r.body == big, "{:?}", r.header("X-Cache"));
        if r.header("X-Cache") == Some("HIT") {
            break m;
        }
        assert!(std::time::Instant::now() < deadline, "no HIT");
        std::thread::sleep(Duration::from_millis(50));
    };
    for _ in 0..3 {
        let r = get(s.port, "/big");
        assert_eq!(r.header("X-Cache"), Some("HIT"));
        assert!(r.body == big, "a hit differs");
    }
    let after = Metrics::fetch(s.port);
    let ring = after.must("porter_uring_submissions_total", &[])
        - before.must("porter_uring_submissions_total", &[]);
    // Entries stay open between hits: at least the body read of each.
    assert!(ring >= 3.0, "three hits made {ring} ring operations");
    assert_eq!(after.must("porter_uring_in_flight", &[]), 0.0);
    assert_eq!(origin.count(), 1, "one upstream request");
}
