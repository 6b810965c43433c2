//! Cache zones on several disks, each zone's file work on its own thread
//! pool (`aio threads=pool_$disk`), the zone chosen per URI by
//! `split_clients`: entries land on their zone's disk, and under load no
//! zone's I/O blocks the event loop. porter before an in-test origin
//! (`tests/common/cache.rs`).

use std::time::{Duration, Instant};

use crate::common::cache::*;
use crate::common::metrics::Metrics;
use crate::common::origin::*;
use crate::common::*;

/// The configuration: three zones, `split_clients` choosing one
/// per URI, each zone's I/O on its own pool.
#[test]
fn split_clients_spreads_entries_over_three_disks() {
    let origin = Origin::start(|r| Reply::ok(r.target.as_bytes()));
    let conf = format!(
        "daemon off;\nworker_processes 2;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\n\
         thread_pool pool_1 threads=16; thread_pool pool_2 threads=16; thread_pool pool_3 threads=16;\n\
         events {{ worker_connections 512; }}\n\
         http {{\n  access_log {{PREFIX}}/logs/access.log;\n  \
           upstream backend {{ server 127.0.0.1:{}; }}\n  \
           proxy_cache_path {{PREFIX}}/mnt/disk1 levels=1:2 keys_zone=cache_1:256m max_size=1024G use_temp_path=off;\n  \
           proxy_cache_path {{PREFIX}}/mnt/disk2 levels=1:2 keys_zone=cache_2:256m max_size=1024G use_temp_path=off;\n  \
           proxy_cache_path {{PREFIX}}/mnt/disk3 levels=1:2 keys_zone=cache_3:256m max_size=1024G use_temp_path=off;\n  \
           split_clients $request_uri $disk {{ 33.3% 1; 33.3% 2; * 3; }}\n  \
           proxy_cache_valid 10m;\n  \
           server {{ listen 127.0.0.1:{{PORT}};\n    \
             location / {{ proxy_pass http://backend; proxy_cache_key $request_uri;\n      \
               proxy_cache cache_$disk; aio threads=pool_$disk; sendfile on;\n      \
               add_header X-Disk $disk always; add_header X-Cache $upstream_cache_status always; }} }}\n}}\n",
        origin.port
    );
    let srv = Server::start(&conf);
    let mnt = srv.prefix.path().join("mnt");
    let mut per_disk = [0usize; 3];
    for i in 0..30 {
        let uri = format!("/obj/{i}");
        let r = req(srv.port, "GET", &uri, "");
        assert_eq!((r.status, cache_status(&r)), (200, "MISS"));
        let disk: usize = r.header("X-Disk").unwrap().parse().unwrap();
        per_disk[disk - 1] += 1;
        for d in 1..=3 {
            let p = entry_path(&mnt.join(format!("disk{d}")), &uri);
            if d == disk {
                let deadline = Instant::now() + Duration::from_secs(10);
                while !p.exists() {
                    assert!(
                        Instant::now() < deadline,
                        "{uri}: no {} in disk{d}: {:?}\n{}",
                        p.display(),
                        files_under(&mnt),
                        srv.read("logs/error.log")
                    );
                    std::thread::sleep(Duration::from_millis(20));
                }
            } else {
                assert!(!p.exists(), "{uri} also in disk{d}");
            }
        }
        let h = req(srv.port, "GET", &uri, "");
        assert_eq!((cache_status(&h), h.text()), ("HIT", uri.clone()));
    }
    assert!(
        per_disk.iter().all(|&n| n > 0),
        "every disk used: {per_disk:?}"
    );
    assert_eq!(origin.count(), 30);
}

/// Sum of the `/metrics` samples named `name` whose labels include
/// `labels` (0 when there are none).
fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    Metrics(text.to_string()).get(name, labels).unwrap_or(0.0)
}

/// Three zones on three "disks", each with its own thread pool, chosen
/// by `split_clients`, before `origin`.
fn three_disk_conf(origin: u16) -> String {
    format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\n\
         thread_pool pool_1 threads=4; thread_pool pool_2 threads=4; thread_pool pool_3 threads=4;\n\
         events {{ worker_connections 512; }}\n\
         http {{\n  access_log {{PREFIX}}/logs/access.log;\n  \
           proxy_cache_path {{PREFIX}}/mnt/disk1 levels=1:2 keys_zone=cache_1:16m use_temp_path=off;\n  \
           proxy_cache_path {{PREFIX}}/mnt/disk2 levels=1:2 keys_zone=cache_2:16m use_temp_path=off;\n  \
           proxy_cache_path {{PREFIX}}/mnt/disk3 levels=1:2 keys_zone=cache_3:16m use_temp_path=off;\n  \
           split_clients $request_uri $disk {{ 33.3% 1; 33.3% 2; * 3; }}\n  \
           proxy_cache_valid 10m;\n  \
           server {{ listen 127.0.0.1:{{PORT}};\n    \
             location = /metrics {{ porter_metrics; }}\n    \
             location / {{ proxy_pass http://127.0.0.1:{}; proxy_cache_key $request_uri;\n      \
               proxy_cache cache_$disk; aio threads=pool_$disk; sendfile on;\n      \
               add_header X-Disk $disk always; add_header X-Cache $upstream_cache_status always; }} }}\n}}\n",
        origin
    )
}

/// Nothing blocks: under a load of concurrent fills and hits over the
/// issue's three zones, every zone's file work runs on that zone's pool
/// (`aio threads=pool_$disk`), and the event loop's iterations stay
/// short (the blocked-loop histogram of `/metrics`).
#[test]
fn cache_io_runs_on_each_zones_pool_and_never_blocks_the_loop() {
    let origin = Origin::start(|r| {
        let i: usize = r.target.rsplit('/').next().unwrap().parse().unwrap_or(0);
        Reply::ok(&pattern(300_000, i)).paced(64 * 1024, Duration::from_millis(2))
    });
    let conf = three_disk_conf(origin.port);
    let srv = Server::start(&conf);
    let port = srv.port;
    let before = get(port, "/metrics").text();
    // Six clients, each filling ten keys then reading them back.
    let threads: Vec<_> = (0..6)
        .map(|t| {
            std::thread::spawn(move || {
                let mut per_disk = [0usize; 3];
                for k in 0..10 {
                    let i = t * 10 + k;
                    let r = req(port, "GET", &format!("/o/{i}"), "");
                    assert_eq!(r.body, pattern(300_000, i), "/o/{i}");
                    let d: usize = r.header("X-Disk").unwrap().parse().unwrap();
                    per_disk[d - 1] += 1;
                }
                for k in 0..10 {
                    let i = t * 10 + k;
                    let r = req(port, "GET", &format!("/o/{i}"), "");
                    assert_eq!((cache_status(&r), r.body.len()), ("HIT", 300_000), "/o/{i}");
                }
                per_disk
            })
        })
        .collect();
    let mut per_disk = [0usize; 3];
    for t in threads {
        for (d, n) in t.join().unwrap().iter().enumerate() {
            per_disk[d] += n;
        }
    }
    let after = get(port, "/metrics").text();
    for (d, &n) in per_disk.iter().enumerate() {
        let pool = format!("pool_{}", d + 1);
        let pool = [("pool", pool.as_str())];
        let tasks = metric(&after, "porter_pool_tasks_total", &pool)
            - metric(&before, "porter_pool_tasks_total", &pool);
        // A fill is at least create, header write, body writes, final
        // header write and rename: each on the zone's own pool.
        assert!(
            tasks >= (5 * n) as f64,
            "pool_{} ran {tasks} tasks for {n} fills",
            d + 1
        );
    }
    assert!(per_disk.iter().all(|&n| n > 0), "{per_disk:?}");
    // The loop's iterations: a blocked one would take a disk's time.
    let count = metric(&after, "porter_loop_busy_seconds_count", &[])
        - metric(&before, "porter_loop_busy_seconds_count", &[]);
    let long = count
        - (metric(
            &after,
            "porter_loop_busy_seconds_bucket",
            &[("le", "0.025")],
        ) - metric(
            &before,
            "porter_loop_busy_seconds_bucket",
            &[("le", "0.025")],
        ));
    assert!(count > 100.0, "{count} loop iterations");
    assert!(
        long <= count * 0.01,
        "{long} of {count} loop iterations took over 25 ms"
    );
}
