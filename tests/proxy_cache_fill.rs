//! Filling an entry when things go wrong: a `kill -9` during many fills
//! leaves no corrupt entry and no temp file after the restart, a full
//! disk (ENOSPC) still answers in full and stores nothing, and a client
//! that leaves mid-body does not end the fill (`proxy_buffering on`).
//! porter before an in-test origin (`tests/common/cache.rs`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use crate::common::cache::*;
use crate::common::origin::*;
use crate::common::*;

/// An origin serving `/k/N` as 120 KB of pattern `N`: even keys at once
/// (complete before a kill), odd ones crawling.
fn half_crawling_origin() -> Origin {
    Origin::start(|r| {
        let i: usize = r.target.trim_start_matches("/k/").parse().unwrap_or(0);
        let body = pattern(120_000, i);
        if i.is_multiple_of(2) {
            Reply::ok(&body)
        } else {
            Reply::ok(&body).paced(8192, Duration::from_millis(40))
        }
    })
}

/// kill -9 during many fills from a slow origin, then a restart on the
/// same cache: every key served is byte-exact (or fetched again), and no
/// temp file outlives the loader.
#[test]
fn crash_during_fills_leaves_no_corrupt_entry() {
    const N: usize = 24;
    let origin = half_crawling_origin();
    let text = conf(
        origin.port,
        " use_temp_path=off",
        "",
        "proxy_cache_valid 10m;",
    );
    let prefix = TempDir::new("pcache-crash");
    let mut srv = Server::start_in(prefix, &text, &[]);
    let port = srv.port;
    let clients: Vec<_> = (0..N)
        .map(|i| {
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
                let _ = s.write_all(
                    format!("GET /k/{i} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                        .as_bytes(),
                );
                read_all(&mut s)
            })
        })
        .collect();
    wait_for("every fill under way", Duration::from_secs(20), || {
        origin.count() >= N
    });
    std::thread::sleep(Duration::from_millis(400));
    let temps = files_under(&srv.prefix.path().join("cache"))
        .iter()
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .count();
    srv.child.kill().unwrap();
    srv.child.wait().unwrap();
    for c in clients {
        let _ = c.join();
    }
    assert!(temps > 0, "the kill came during fills");
    // Restart on the same prefix (and cache).
    let prefix = TempDir(srv.prefix.0.clone());
    std::mem::forget(std::mem::replace(&mut srv.prefix, TempDir(PathBuf::new())));
    drop(srv);
    let srv = Server::start_in(prefix, &text, &[]);
    let before = origin.count();
    let mut hits = 0;
    for i in 0..N {
        let r = req(srv.port, "GET", &format!("/k/{i}"), "");
        assert_eq!(r.status, 200, "/k/{i}");
        assert_eq!(
            r.body,
            pattern(120_000, i),
            "/k/{i} byte-exact ({})",
            cache_status(&r)
        );
        if cache_status(&r) == "HIT" {
            hits += 1;
        }
    }
    assert!(hits > 0, "some entries survived the crash");
    assert_eq!(
        origin.count() - before,
        N - hits,
        "the others fetched again"
    );
    wait_for(
        "the loader to remove temp files",
        Duration::from_secs(20),
        || {
            files_under(&srv.prefix.path().join("cache"))
                .iter()
                .all(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        },
    );
}

/// A cache on a tiny tmpfs: a body larger than it still reaches the
/// client whole, nothing is stored, one line is logged.
#[test]
fn enospc_while_filling_still_answers_in_full() {
    let prefix = TempDir::new("pcache-enospc");
    let mnt = prefix.path().join("small");
    let Some(_tmpfs) = Tmpfs::mount(&mnt, "256k") else {
        eprintln!("skipping: cannot mount a tmpfs (needs root)");
        return;
    };
    let body = pattern(1_000_000, 9);
    let b2 = body.clone();
    let origin = Origin::start(move |_| Reply::ok(&b2));
    let text = conf(origin.port, "", "", "proxy_cache_valid 10m;")
        .replace("{PREFIX}/cache levels", "{PREFIX}/small levels")
        .replace("keys_zone=one:1m", "keys_zone=one:1m use_temp_path=off");
    let srv = Server::start_in(prefix, &text, &[]);
    for _ in 0..2 {
        let r = req(srv.port, "GET", "/big", "");
        assert_eq!(r.status, 200);
        assert_eq!(r.body.len(), body.len());
        assert!(r.body == body, "the full, correct body");
        assert_eq!(cache_status(&r), "MISS");
    }
    assert_eq!(origin.count(), 2, "nothing cached");
    wait_for("two log lines", Duration::from_secs(10), || {
        srv.read("logs/error.log")
            .matches("No space left on device")
            .count()
            >= 2
    });
    std::thread::sleep(Duration::from_millis(300));
    let log = srv.read("logs/error.log");
    assert_eq!(
        log.matches("No space left on device").count(),
        2,
        "one line per fill: {log}"
    );
    wait_for("the temp files removed", Duration::from_secs(10), || {
        files_under(&mnt).is_empty()
    });
}

/// A client that leaves mid-body does not end the fill (NGINX's
/// `proxy_buffering on`): the entry completes and the next request hits.
/// With `proxy_buffering off` nothing is stored, as in NGINX.
#[test]
fn fill_outlives_a_client_that_leaves() {
    let origin = Origin::start(|r| {
        let i: usize = r.target.rsplit('/').next().unwrap().parse().unwrap_or(0);
        Reply::ok(&pattern(400_000, i)).paced(32 * 1024, Duration::from_millis(30))
    });
    let srv = Server::start(&conf_with(
        origin.port,
        "",
        "",
        // The lock makes the next request wait for the fill the left
        // client started.
        "proxy_cache_valid 10m; proxy_cache_lock on; proxy_cache_lock_timeout 30s; proxy_cache_lock_age 30s;",
        "location /nobuf/ { proxy_pass http://127.0.0.1:ORIGIN; proxy_cache one; proxy_cache_valid 10m;\n\
           proxy_buffering off; add_header X-Cache $upstream_cache_status always; }",
    ));
    for (path, kept) in [("/gone/1", true), ("/nobuf/2", false)] {
        let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
            .unwrap();
        let mut first = [0u8; 4096];
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        assert!(s.read(&mut first).unwrap() > 0);
        drop(s);
        let i: usize = path.rsplit('/').next().unwrap().parse().unwrap();
        if kept {
            wait_for(
                "the entry the left client started",
                Duration::from_secs(20),
                || {
                    let r = req(srv.port, "GET", path, "");
                    cache_status(&r) == "HIT" && r.body == pattern(400_000, i)
                },
            );
            assert_eq!(
                origin
                    .requests()
                    .iter()
                    .filter(|r| r.target == path)
                    .count(),
                1
            );
        } else {
            for _ in 0..2 {
                let r = req(srv.port, "GET", path, "");
                assert_eq!(cache_status(&r), "MISS", "{path}: not stored unbuffered");
                assert_eq!(r.body, pattern(400_000, i));
            }
        }
    }
    wait_for("no temp file left", Duration::from_secs(20), || {
        files_under(&srv.prefix.path().join("cache"))
            .iter()
            .all(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
    });
}
