//! HTTP/2 fairness on a really slow disk (the FUSE file system of
//! `tests/slow_disk.rs`, every lookup, open and read sleeping): one
//! connection with 128 streams on cold files must not starve the hot
//! streams on the same connection or on another one. A stream waiting on
//! the disk is a parked task (its read is on the thread pool), so hot
//! streams are served from the page cache in between.
//!
//! One worker, so one event loop carries everything. Timing assertions
//! are ratios with wide margins. Skips (saying why) without root,
//! /dev/fuse or fusepy, unless `PORTER_REQUIRE_FUSE` is set.

use std::time::{Duration, Instant};

use crate::common::h2client::{self as c, rt};
use crate::common::slowfs::{self, SlowFs, SlowFsOptions};
use crate::common::{Server, TempDir};

const COLD: usize = 128;
const DELAY_MS: u64 = 50;

fn cold_body(i: usize) -> Vec<u8> {
    format!("cold file {i}\n")
        .bytes()
        .cycle()
        .take(8192)
        .collect()
}

fn hot_body() -> Vec<u8> {
    (0..16 * 1024).map(|i| (i % 251) as u8).collect()
}

fn median(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[v.len() / 2]
}

/// The cold files `c0` to `c{COLD}`, for the slow mount.
fn cold_files() -> TempDir {
    let backing = TempDir::new("h2cold");
    for i in 0..=COLD {
        backing.write(&format!("c{i}"), cold_body(i));
    }
    backing
}

/// HTTP/2 with room for all the streams, `/cold/` on the slow disk
/// through a thread pool of its own, the rest from `hot`.
fn fairness_conf(hot: &std::path::Path, cold: &std::path::Path) -> String {
    format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\nthread_pool cold threads=16;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n  default_type application/octet-stream; access_log off;\n\
           server {{ listen 127.0.0.1:{{PORT}}; http2 on; http2_max_concurrent_streams 200;\n\
             root {}; aio threads=cold;\n\
             location /cold/ {{ alias {}/; }} }}\n}}\n",
        hot.display(),
        cold.display()
    )
}

#[test]
fn a_connection_with_128_cold_streams_does_not_starve_hot_streams() {
    if !slowfs::usable("HTTP/2 fairness") {
        return;
    }
    let backing = cold_files();
    let fs = SlowFs::mount(backing.path(), &SlowFsOptions::uniform(DELAY_MS));
    let hot = TempDir::new("h2hot");
    hot.write("hot.bin", hot_body());
    let s = Server::start(&fairness_conf(hot.path(), fs.path()));
    let port = s.port;
    rt().block_on(async {
        let a = c::connect(port).await;
        for _ in 0..3 {
            assert_eq!(c::get(&a, "/hot.bin").await.body, hot_body());
        }
        let t = Instant::now();
        let r = c::get(&a, "/cold/c0").await;
        let cold_alone = t.elapsed();
        assert_eq!(r.body, cold_body(0));
        assert!(
            cold_alone >= Duration::from_millis(2 * DELAY_MS),
            "a cold request took only {cold_alone:?}: is the mount slow?"
        );
        // 128 cold streams on connection A at once.
        let started = Instant::now();
        let cold: Vec<_> = (1..=COLD)
            .map(|i| {
                let a = a.clone();
                tokio::spawn(async move {
                    let r = c::get(&a, &format!("/cold/c{i}")).await;
                    assert_eq!(r.status, 200, "cold c{i}");
                    assert!(r.body == cold_body(i), "cold c{i} differs");
                    started.elapsed()
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(30)).await;
        // Hot streams on the same connection and on another one.
        let b = c::connect(port).await;
        let mut same = Vec::new();
        let mut other = Vec::new();
        for _ in 0..5 {
            for (conn, v) in [(&a, &mut same), (&b, &mut other)] {
                let t = Instant::now();
                let r = c::get(conn, "/hot.bin").await;
                assert_eq!(r.status, 200);
                assert!(r.body == hot_body());
                v.push(t.elapsed());
            }
        }
        let hot_done = started.elapsed();
        let mut cold_times = Vec::new();
        for h in cold {
            cold_times.push(h.await.unwrap());
        }
        let cold_done = *cold_times.iter().max().unwrap();
        eprintln!(
            "cold alone {cold_alone:?}; 128 cold streams done after {cold_done:?}; \
             hot on the same connection {same:?}, on another {other:?}; hot done at {hot_done:?}"
        );
        // The hot streams did not wait for the cold ones: each took a
        // fraction of one cold request, and all were done long before the
        // cold batch.
        for (name, v) in [("same connection", &same), ("other connection", &other)] {
            let m = median(v);
            assert!(
                m * 4 <= cold_alone,
                "hot streams on the {name}: median {m:?} vs a cold request alone {cold_alone:?}"
            );
        }
        assert!(
            cold_done >= cold_alone * 2,
            "the cold load was no load: {cold_done:?}"
        );
        assert!(
            hot_done * 2 <= cold_done,
            "hot streams done at {hot_done:?}, cold batch at {cold_done:?}"
        );
    });
}
