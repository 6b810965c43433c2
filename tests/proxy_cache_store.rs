//! The proxy cache store on real files, through the disk layer and a real
//! thread pool: fills, hits, every corruption case, concurrent writers,
//! purge, the loader (also after a SIGKILL mid-fill), the manager, ENOSPC
//! on a small tmpfs, reload reuse of a zone; the directory layout against
//! Debian's nginx acting as a caching proxy; and the configuration errors
//! against `nginx -t`.
//!
//! Run: `cargo test --release --test area_cache proxy_cache_store::`.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{free_port, wait_port, TempDir, Tmpfs, BIN};
use porter::cache::{
    loader, manager, CacheSet, CacheZone, EntryMeta, Fill, KeyHash, Levels, Lookup, TempPath,
    ZoneSpec,
};
use porter::disk::pool::{PoolSet, PoolSpec};
use porter::disk::{Disk, Io};
use porter::log::{ErrorLog, ErrorLogSpec, Level, LogFile, RequestLog};

const NGINX: &str = "/usr/sbin/nginx";

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A disk layer over one real pool `p`.
fn disk(threads: usize) -> Disk {
    let log = ErrorLog::new(Vec::new());
    let spec = PoolSpec {
        name: "p".into(),
        threads,
        max_queue: 1024,
    };
    Disk::new(Arc::new(PoolSet::build(&[spec], None, None, &log).unwrap()))
}

fn pool_io(d: &Disk) -> Io {
    d.route(Some("p"), false).unwrap()
}

fn tasks(d: &Disk) -> u64 {
    d.pools()
        .get("p")
        .unwrap()
        .stats()
        .done
        .load(std::sync::atomic::Ordering::Relaxed)
}

/// An error log writing to `path` (synchronously: no writer thread here).
fn file_log(path: &Path) -> ErrorLog {
    ErrorLog::new(vec![ErrorLogSpec {
        file: LogFile::open(path).unwrap(),
        level: Level::Debug,
    }])
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn spec(dir: &Path, use_temp_path: bool) -> ZoneSpec {
    let mut s = ZoneSpec::new("z", &dir.join("cache"), 1024 * 1024);
    s.levels = Levels::parse("1:2").unwrap();
    s.use_temp_path = use_temp_path;
    s
}

fn meta(key: &str) -> EntryMeta {
    EntryMeta {
        key: key.to_string(),
        status: 200,
        valid_until: 4_000_000_000,
        date: 1_800_000_000,
        last_modified: Some(1_700_000_000),
        stored: 1_800_000_000,
        updating_secs: 0,
        error_secs: 0,
        etag: Some("\"e\"".into()),
        vary: vec![("accept-encoding".into(), "gzip".into())],
        headers: vec![("Content-Type".into(), "text/plain".into())],
    }
}

/// The body stored under `key` in these tests: `len` bytes derived from it.
fn body(key: &str, len: usize) -> Vec<u8> {
    let seed = KeyHash::of(key.as_bytes()).0;
    (0..len).map(|i| seed[i % 16] ^ (i / 16) as u8).collect()
}

async fn fill(zone: &Arc<CacheZone>, d: &Disk, key: &str, len: usize, chunk: usize) {
    let io = pool_io(d);
    let log = RequestLog::plain(&ErrorLog::new(Vec::new()));
    let mut w = zone.begin(&io, None, meta(key), log).await.unwrap();
    for c in body(key, len).chunks(chunk.max(1)) {
        w.write(Arc::from(c)).await.unwrap();
    }
    w.finish().await.unwrap();
}

/// Reads a hit's body through the disk layer.
async fn read_body(e: &porter::cache::Entry) -> Vec<u8> {
    let mut buf = vec![0u8; e.header.body_len as usize];
    let n = e
        .file
        .read_at(&mut buf, e.header.body_offset)
        .await
        .unwrap();
    buf.truncate(n);
    buf
}

/// Every regular file under `dir` (relative paths).
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path().strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

fn temp_files(dir: &Path) -> Vec<PathBuf> {
    files(dir)
        .into_iter()
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'))
        })
        .collect()
}

#[test]
fn fill_then_hit_through_the_pool() {
    let dir = TempDir::new("cache-fill");
    let d = disk(2);
    let zone = CacheZone::new(spec(dir.path(), false), &ErrorLog::new(Vec::new()));
    let log = RequestLog::plain(&ErrorLog::new(Vec::new()));
    rt().block_on(async {
        let key = "http://origin/a.txt";
        for want in 1..=2 {
            match zone.lookup(&pool_io(&d), key, &log).await.unwrap() {
                Lookup::Miss { uses } => assert_eq!(uses, want, "min_uses counting"),
                Lookup::Hit(_) => panic!("hit before fill"),
            }
        }
        let before = tasks(&d);
        fill(&zone, &d, key, 300_000, 65536).await;
        assert!(
            tasks(&d) >= before + 8,
            "create, writes, header rewrite, rename ran on the pool"
        );
        let path = zone.entry_path(&KeyHash::of(key.as_bytes()));
        let hex = KeyHash::of(key.as_bytes()).hex();
        assert_eq!(
            path,
            dir.path()
                .join("cache")
                .join(&hex[31..])
                .join(&hex[29..31])
                .join(&hex)
        );
        assert!(path.is_file());
        assert!(temp_files(dir.path()).is_empty());
        let Lookup::Hit(e) = zone.lookup(&pool_io(&d), key, &log).await.unwrap() else {
            panic!("miss after fill")
        };
        assert_eq!(e.header.meta, meta(key));
        assert_eq!(e.header.body_len, 300_000);
        assert_eq!(
            e.file.meta.size,
            e.header.body_offset + e.header.body_len,
            "body at a known offset, nothing after it"
        );
        assert!(e.fresh(1_900_000_000));
        // Fresh through the second valid_until names, as NGINX.
        assert!(e.fresh(4_000_000_000));
        assert!(!e.fresh(4_000_000_001));
        assert!(!e.updating);
        assert_eq!(read_body(&e).await, body(key, 300_000));
        assert_eq!(zone.index().total_size(), 303_104); // whole 4 KiB blocks
    });
}

/// A hit is sent with `sendfile` from the body offset, and once its path
/// and pages are cached, a lookup and its send never meet the pool.
#[test]
fn a_hit_is_sent_with_sendfile_and_cached_hits_stay_off_the_pool() {
    porter::disk::fastpath::probe();
    let dir = TempDir::new("cache-send");
    let d = disk(2);
    let zone = CacheZone::new(spec(dir.path(), false), &ErrorLog::new(Vec::new()));
    let log = RequestLog::plain(&ErrorLog::new(Vec::new()));
    let fast = d.route(Some("p"), true).unwrap();
    // A header far larger than the first read (two reads of the header).
    let mut m = meta("big-header");
    m.headers.push(("X-Pad".into(), "p".repeat(10_000)));
    rt().block_on(async {
        let io = pool_io(&d);
        let mut w = zone.begin(&io, None, m.clone(), log.clone()).await.unwrap();
        w.write(Arc::from(body("big-header", 100_000)))
            .await
            .unwrap();
        w.finish().await.unwrap();
        let Lookup::Hit(e) = zone.lookup(&fast, "big-header", &log).await.unwrap() else {
            panic!("miss")
        };
        assert_eq!(e.header.meta, m);
        assert!(e.header.body_offset > 10_000);

        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let reader = std::thread::spawn(move || {
            use std::io::Read;
            let (mut c, _) = listener.accept().unwrap();
            let mut got = Vec::new();
            c.read_to_end(&mut got).unwrap();
            got
        });
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut off = e.header.body_offset;
        let end = off + e.header.body_len;
        while off < end {
            let want = (end - off) as usize;
            match d.sendfile(&stream, &e.file, &mut off, want).await {
                Ok(_) => {}
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                    stream.writable().await.unwrap();
                }
                Err(err) => panic!("sendfile: {err}"),
            }
        }
        drop(stream);
        assert_eq!(reader.join().unwrap(), body("big-header", 100_000));

        let f = porter::disk::fastpath::features();
        if f.open_cached && f.read_nowait {
            let before = tasks(&d);
            for _ in 0..10 {
                let Lookup::Hit(e) = zone.lookup(&fast, "big-header", &log).await.unwrap() else {
                    panic!("miss")
                };
                assert_eq!(read_body(&e).await, body("big-header", 100_000));
            }
            assert_eq!(tasks(&d), before, "cached lookups went to the pool");
        } else {
            eprintln!("fast path unavailable here: pool-free hits not checked");
        }
    });
}

#[test]
fn use_temp_path_writes_in_proxy_temp_path_then_renames() {
    let dir = TempDir::new("cache-temp");
    let d = disk(2);
    let zone = CacheZone::new(spec(dir.path(), true), &ErrorLog::new(Vec::new()));
    let temp = TempPath {
        path: dir.path().join("proxy_temp"),
        levels: Levels(vec![1, 2]),
    };
    let log = RequestLog::plain(&ErrorLog::new(Vec::new()));
    rt().block_on(async {
        let io = pool_io(&d);
        let mut w = zone
            .begin(&io, Some(&temp), meta("k"), log.clone())
            .await
            .unwrap();
        assert!(w.temp_path().starts_with(&temp.path));
        assert!(w.temp_path().is_file());
        // Not visible until finished.
        assert!(matches!(
            zone.lookup(&pool_io(&d), "k", &log).await.unwrap(),
            Lookup::Miss { .. }
        ));
        w.write(Arc::from(&b"hello"[..])).await.unwrap();
        w.finish().await.unwrap();
        assert!(temp_files(dir.path()).is_empty());
        let Lookup::Hit(e) = zone.lookup(&pool_io(&d), "k", &log).await.unwrap() else {
            panic!("miss")
        };
        assert_eq!(read_body(&e).await, b"hello");
    });
}

/// Damages the stored entry of `key` with `f`, looks it up, and returns
/// the error-log lines that lookup wrote.
fn corrupt_case(tag: &str, f: impl FnOnce(&Path, &Path)) -> (bool, Vec<String>, bool) {
    let dir = TempDir::new(tag);
    let d = disk(2);
    let logp = dir.path().join("error.log");
    let zone = CacheZone::new(spec(dir.path(), false), &ErrorLog::new(Vec::new()));
    let log = RequestLog::plain(&file_log(&logp));
    rt().block_on(fill(&zone, &d, "key-a", 5000, 1000));
    let path = zone.entry_path(&KeyHash::of(b"key-a"));
    f(&path, dir.path());
    let r = rt()
        .block_on(zone.lookup(&pool_io(&d), "key-a", &log))
        .unwrap();
    let miss = matches!(r, Lookup::Miss { .. });
    (miss, lines(&logp), path.exists())
}

/// Damages an entry file (its path, the test directory).
type Damage = Box<dyn FnOnce(&Path, &Path)>;

#[test]
fn every_corruption_is_a_logged_miss_and_the_file_goes() {
    let flip = |at: u64| {
        move |p: &Path, _: &Path| {
            use std::os::unix::fs::FileExt;
            let f = std::fs::OpenOptions::new()
                .write(true)
                .read(true)
                .open(p)
                .unwrap();
            let mut b = [0u8];
            f.read_at(&mut b, at).unwrap();
            f.write_all_at(&[b[0] ^ 0x55], at).unwrap();
        }
    };
    let cases: Vec<(&str, Damage, &str)> = vec![
        ("magic", Box::new(flip(0)), "has bad magic"),
        ("version", Box::new(flip(8)), "version mismatch"),
        ("checksum", Box::new(flip(40)), "has bad header checksum"),
        (
            "short",
            Box::new(|p: &Path, _: &Path| {
                let len = std::fs::metadata(p).unwrap().len();
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(p)
                    .unwrap()
                    .set_len(len - 1)
                    .unwrap();
            }),
            "has wrong size",
        ),
        (
            "long",
            Box::new(|p: &Path, _: &Path| {
                use std::io::Write;
                std::fs::OpenOptions::new()
                    .append(true)
                    .open(p)
                    .unwrap()
                    .write_all(b"x")
                    .unwrap();
            }),
            "has wrong size",
        ),
        (
            "empty",
            Box::new(|p: &Path, _: &Path| std::fs::write(p, b"").unwrap()),
            "has truncated header",
        ),
        (
            // Another key's complete entry under this key's name: what an
            // MD5 collision looks like.
            "collision",
            Box::new(|p: &Path, dir: &Path| {
                let other =
                    CacheZone::new(spec(&dir.join("other"), false), &ErrorLog::new(Vec::new()));
                let d = disk(1);
                rt().block_on(fill(&other, &d, "key-b", 5000, 1000));
                let src = other.entry_path(&KeyHash::of(b"key-b"));
                std::fs::copy(src, p).unwrap();
            }),
            "has md5 collision",
        ),
    ];
    for (tag, f, want) in cases {
        let (miss, log, exists) = corrupt_case(&format!("cache-bad-{tag}"), f);
        assert!(miss, "{tag}: a damaged entry is a miss");
        assert!(!exists, "{tag}: the damaged file was removed");
        assert_eq!(log.len(), 1, "{tag}: exactly one log line: {log:?}");
        assert!(
            log[0].contains("[crit]") && log[0].contains("cache file \"") && log[0].contains(want),
            "{tag}: {}",
            log[0]
        );
    }
}

#[test]
fn concurrent_writers_of_one_key_last_rename_wins() {
    let dir = TempDir::new("cache-race");
    let d = disk(4);
    let zone = CacheZone::new(spec(dir.path(), false), &ErrorLog::new(Vec::new()));
    let log = RequestLog::plain(&ErrorLog::new(Vec::new()));
    rt().block_on(async {
        let io = pool_io(&d);
        let mut a = zone.begin(&io, None, meta("k"), log.clone()).await.unwrap();
        let mut m = meta("k");
        m.status = 404;
        let mut b = zone.begin(&io, None, m, log.clone()).await.unwrap();
        assert_ne!(a.temp_path(), b.temp_path());
        for i in 0..20u8 {
            a.write(Arc::from(&[b'a'; 1000][..])).await.unwrap();
            if i % 2 == 0 {
                b.write(Arc::from(&[b'b'; 3000][..])).await.unwrap();
            }
        }
        b.finish().await.unwrap();
        let Lookup::Hit(e) = zone.lookup(&pool_io(&d), "k", &log).await.unwrap() else {
            panic!("miss")
        };
        assert_eq!(e.header.meta.status, 404);
        assert_eq!(read_body(&e).await, vec![b'b'; 30000]);
        a.finish().await.unwrap();
        let Lookup::Hit(e2) = zone.lookup(&pool_io(&d), "k", &log).await.unwrap() else {
            panic!("miss")
        };
        assert_eq!(e2.header.meta.status, 200);
        assert_eq!(read_body(&e2).await, vec![b'a'; 20000]);
        // The first hit's descriptor still reads the entry it opened.
        assert_eq!(read_body(&e).await, vec![b'b'; 30000]);
        assert!(temp_files(dir.path()).is_empty());
        assert_eq!(
            zone.index().total_size(),
            20480,
            "the replaced size is not counted twice"
        );
    });
}

#[test]
fn abort_purge_and_a_dropped_writer_leave_nothing() {
    let dir = TempDir::new("cache-abort");
    let d = disk(2);
    let zone = CacheZone::new(spec(dir.path(), false), &ErrorLog::new(Vec::new()));
    zone.start(None).unwrap(); // the manager removes a dropped writer's file
    let log = RequestLog::plain(&ErrorLog::new(Vec::new()));
    rt().block_on(async {
        let io = pool_io(&d);
        let mut w = zone.begin(&io, None, meta("a"), log.clone()).await.unwrap();
        w.write(Arc::from(&[1u8; 100][..])).await.unwrap();
        let temp = w.temp_path().to_path_buf();
        assert!(temp.is_file());
        w.abort().await;
        assert!(!temp.exists());
        assert!(matches!(
            zone.lookup(&pool_io(&d), "a", &log).await.unwrap(),
            Lookup::Miss { .. }
        ));

        let w = zone.begin(&io, None, meta("b"), log.clone()).await.unwrap();
        let temp = w.temp_path().to_path_buf();
        drop(w);
        let t = Instant::now();
        while temp.exists() && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            !temp.exists(),
            "the manager removed the dropped writer's temp file"
        );

        fill(&zone, &d, "c", 10, 10).await;
        assert!(zone.purge(&io, "c").await.unwrap());
        assert!(!zone.purge(&io, "c").await.unwrap());
        assert!(matches!(
            zone.lookup(&pool_io(&d), "c", &log).await.unwrap(),
            Lookup::Miss { .. }
        ));
        assert!(files(&dir.path().join("cache")).is_empty());
    });
}

#[test]
fn fill_lock_and_updating_state() {
    let dir = TempDir::new("cache-lock");
    let d = disk(2);
    let zone = CacheZone::new(spec(dir.path(), false), &ErrorLog::new(Vec::new()));
    let log = RequestLog::plain(&ErrorLog::new(Vec::new()));
    rt().block_on(async {
        fill(&zone, &d, "k", 10, 10).await;
        let Fill::Owner(guard) = zone.claim_fill("k") else {
            panic!("first claim owns")
        };
        let Fill::Wait(waiter) = zone.claim_fill("k") else {
            panic!("second claim waits")
        };
        let Lookup::Hit(e) = zone.lookup(&pool_io(&d), "k", &log).await.unwrap() else {
            panic!("miss")
        };
        assert!(e.updating, "a stale hit can see the key is being updated");
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let t = tokio::task::spawn_local(waiter.wait(Duration::from_secs(5)));
                tokio::time::sleep(Duration::from_millis(20)).await;
                assert!(!t.is_finished());
                drop(guard);
                assert!(t.await.unwrap(), "the waiter wakes when the fill ends");
            })
            .await;
        assert!(matches!(zone.claim_fill("k"), Fill::Owner(_)));
    });
}

#[test]
fn loader_rebuilds_the_index_and_lookups_work_before_it_is_done() {
    let dir = TempDir::new("cache-load");
    let d = disk(2);
    let log = RequestLog::plain(&ErrorLog::new(Vec::new()));
    let first = CacheZone::new(spec(dir.path(), false), &ErrorLog::new(Vec::new()));
    rt().block_on(async {
        for i in 0..30 {
            fill(&first, &d, &format!("k{i}"), 100 * i, 7).await;
        }
    });
    drop(first);
    // A stray file where entries live, and a temp file of an earlier run.
    let stray_dir = dir.path().join("cache/0/00");
    std::fs::create_dir_all(&stray_dir).unwrap();
    std::fs::write(stray_dir.join("junk"), b"x").unwrap();
    std::fs::write(
        stray_dir.join(format!(".{}.1.2", KeyHash::of(b"k").hex())),
        b"partial",
    )
    .unwrap();

    let logp = dir.path().join("error.log");
    let mut s = spec(dir.path(), false);
    s.loader_files = 4;
    s.loader_sleep = Duration::from_millis(1);
    let zone = CacheZone::new(s, &file_log(&logp));
    assert!(!zone.loaded());
    rt().block_on(async {
        // Before the loader: an unknown key is looked for on disk.
        let Lookup::Hit(e) = zone.lookup(&pool_io(&d), "k7", &log).await.unwrap() else {
            panic!("entry lost before the loader ran")
        };
        assert_eq!(read_body(&e).await, body("k7", 700));
    });
    // A progress line after every file: the counts only grow, and the last
    // one comes before the closing line.
    let stats = loader::run_reporting(&Arc::downgrade(&zone), Duration::ZERO).unwrap();
    assert!(zone.loaded());
    assert_eq!(stats.entries, 29, "k7 was already known");
    assert_eq!(stats.temps, 1);
    assert_eq!(stats.bad, 1);
    assert_eq!(zone.index().len(), 30);
    assert!(temp_files(dir.path()).is_empty());
    assert!(!stray_dir.join("junk").exists());
    let log_lines = lines(&logp);
    assert!(
        log_lines
            .iter()
            .any(|l| l.contains("http file cache:") && l.contains("29 entries loaded")),
        "{log_lines:?}"
    );
    let counts: Vec<u64> = log_lines
        .iter()
        .filter_map(|l| l.split(" loading: ").nth(1))
        .map(|rest| rest.split(' ').next().unwrap().parse().unwrap())
        .collect();
    assert!(counts.len() >= 29, "one line per file: {log_lines:?}");
    assert!(counts.windows(2).all(|w| w[0] <= w[1]), "{counts:?}");
    assert_eq!(counts.last(), Some(&29));
    assert!(log_lines
        .last()
        .is_some_and(|l| l.contains("entries loaded")));
    rt().block_on(async {
        // After loading, an unknown key is a miss without a disk call.
        let before = tasks(&d);
        assert!(matches!(
            zone.lookup(&pool_io(&d), "nope", &log).await.unwrap(),
            Lookup::Miss { uses: 1 }
        ));
        assert_eq!(tasks(&d), before);
        let Lookup::Hit(e) = zone.lookup(&pool_io(&d), "k29", &log).await.unwrap() else {
            panic!("loaded entry missing")
        };
        assert_eq!(read_body(&e).await, body("k29", 2900));
    });
}

#[test]
fn manager_enforces_max_size_and_inactive() {
    let dir = TempDir::new("cache-mgr");
    let d = disk(2);
    let mut s = spec(dir.path(), false);
    s.max_size = Some(5 * 8192);
    s.inactive = Duration::from_millis(400);
    let zone = CacheZone::new(s, &ErrorLog::new(Vec::new()));
    let log = RequestLog::plain(&ErrorLog::new(Vec::new()));
    let inline = Io::inline();
    rt().block_on(async {
        for i in 0..8 {
            fill(&zone, &d, &format!("k{i}"), 5000, 5000).await; // 8 KiB each
        }
        // k0 used recently: it survives, the LRU ones go.
        zone.lookup(&pool_io(&d), "k0", &log).await.unwrap();
        assert_eq!(zone.index().total_size(), 8 * 8192);
        manager::pass(&zone, &inline).await;
        assert_eq!(zone.index().total_size(), 5 * 8192);
        let left = files(&dir.path().join("cache"));
        assert_eq!(left.len(), 5);
        for gone in ["k1", "k2", "k3"] {
            assert!(!zone.entry_path(&KeyHash::of(gone.as_bytes())).exists());
        }
        assert!(zone.entry_path(&KeyHash::of(b"k0")).exists());
        tokio::time::sleep(Duration::from_millis(450)).await;
        zone.lookup(&pool_io(&d), "k7", &log).await.unwrap();
        manager::pass(&zone, &inline).await;
        let left = files(&dir.path().join("cache"));
        assert_eq!(
            left.len(),
            1,
            "only the entry used within `inactive` stays: {left:?}"
        );
        assert!(zone.entry_path(&KeyHash::of(b"k7")).exists());
    });
}

#[test]
fn full_keys_zone_evicts_lru_and_its_file() {
    let dir = TempDir::new("cache-keys");
    let d = disk(2);
    // 8 KiB of keys zone: 62 keys.
    let mut s = spec(dir.path(), false);
    s.keys_size = 8192;
    let zone = CacheZone::new(s, &ErrorLog::new(Vec::new()));
    zone.start(None).unwrap();
    rt().block_on(async {
        for i in 0..70 {
            fill(&zone, &d, &format!("k{i}"), 10, 10).await;
        }
    });
    assert_eq!(zone.index().len(), 62);
    let t = Instant::now();
    while files(&dir.path().join("cache")).len() > 62 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(files(&dir.path().join("cache")).len(), 62);
    assert!(!zone.entry_path(&KeyHash::of(b"k0")).exists());
    assert!(zone.entry_path(&KeyHash::of(b"k69")).exists());
}

#[test]
fn reload_reuses_an_unchanged_zone() {
    let dir = TempDir::new("cache-reload");
    let log = ErrorLog::new(Vec::new());
    let a = spec(dir.path(), false);
    let one = CacheSet::build(std::slice::from_ref(&a), None, None, &log).unwrap();
    assert!(
        dir.path().join("cache").is_dir(),
        "the cache directory is created"
    );
    let mut a2 = a.clone();
    a2.max_size = Some(1 << 20); // a limit: taken over
    let two = CacheSet::build(&[a2], Some(&one), None, &log).unwrap();
    assert!(Arc::ptr_eq(one.get("z").unwrap(), two.get("z").unwrap()));
    assert_eq!(two.get("z").unwrap().spec().max_size, Some(1 << 20));
    let mut a3 = a.clone();
    a3.keys_size = 2 << 20; // a new keys zone: a new index
    let three = CacheSet::build(&[a3], Some(&two), None, &log).unwrap();
    assert!(!Arc::ptr_eq(two.get("z").unwrap(), three.get("z").unwrap()));
    assert!(three.get("other").is_none());
}

// ---------------------------------------------------------------------------
// Crash safety: a child filling many entries is killed with SIGKILL.

#[test]
#[ignore = "helper process of crash_mid_fill_leaves_only_complete_entries"]
fn crash_child() {
    let Some(dir) = std::env::var_os("PORTER_CACHE_CRASH_DIR") else {
        return;
    };
    let dir = PathBuf::from(dir);
    let zone = CacheZone::new(spec(&dir, false), &ErrorLog::new(Vec::new()));
    let mut threads = Vec::new();
    for t in 0..3 {
        let zone = zone.clone();
        threads.push(std::thread::spawn(move || {
            let d = disk(2);
            rt().block_on(async {
                for i in 0.. {
                    let key = format!("k{}", (i * 3 + t) % 40);
                    fill(&zone, &d, &key, 200_000 + 1000 * (i % 40), 8192).await;
                }
            })
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn crash_mid_fill_leaves_only_complete_entries() {
    let dir = TempDir::new("cache-crash");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &own_test("crash_child"),
            "--ignored",
            "--nocapture",
        ])
        .env("PORTER_CACHE_CRASH_DIR", dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let cache = dir.path().join("cache");
    let t = Instant::now();
    let mut temps_seen = 0;
    while t.elapsed() < Duration::from_secs(20) {
        let all = files(&cache);
        temps_seen = temp_files(&cache).len();
        if all.len() - temps_seen >= 20 && temps_seen > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    let left_temps = temp_files(&cache).len();
    eprintln!("killed with {left_temps} temp files in place (saw {temps_seen})");
    assert!(left_temps > 0, "the kill should land mid-fill");

    let logp = dir.path().join("error.log");
    let zone = CacheZone::new(spec(dir.path(), false), &file_log(&logp));
    let stats = loader::run(&Arc::downgrade(&zone)).unwrap();
    assert!(
        temp_files(&cache).is_empty(),
        "the loader removed leftovers"
    );
    assert_eq!(stats.temps as usize, left_temps);
    assert_eq!(stats.bad, 0, "no partial entry under an entry's name");
    let entries = files(&cache);
    assert!(entries.len() >= 20);
    assert_eq!(stats.entries as usize, entries.len());
    let d = disk(2);
    let log = RequestLog::plain(&file_log(&logp));
    rt().block_on(async {
        for i in 0..40 {
            let key = format!("k{i}");
            if let Lookup::Hit(e) = zone.lookup(&pool_io(&d), &key, &log).await.unwrap() {
                let b = read_body(&e).await;
                let len = e.header.body_len as usize;
                assert_eq!(b, body(&key, len), "{key}: complete and intact");
            }
        }
    });
    let l = lines(&logp);
    assert!(l.iter().all(|l| !l.contains("[crit]")), "{l:?}");
}

// ---------------------------------------------------------------------------
// ENOSPC on a small tmpfs.

#[test]
fn enospc_aborts_with_one_line_and_leaves_nothing() {
    let dir = TempDir::new("cache-enospc");
    let mnt = dir.path().join("mnt");
    let Some(_tmpfs) = Tmpfs::mount(&mnt, "256k") else {
        eprintln!("SKIPPED: cannot mount a tmpfs here (needs root and mount)");
        return;
    };
    let logp = dir.path().join("error.log");
    let zone = CacheZone::new(spec(&mnt, false), &ErrorLog::new(Vec::new()));
    let d = disk(2);
    let log = RequestLog::plain(&file_log(&logp));
    rt().block_on(async {
        let io = pool_io(&d);
        let mut w = zone
            .begin(&io, None, meta("big"), log.clone())
            .await
            .unwrap();
        let chunk: Arc<[u8]> = Arc::from(vec![7u8; 64 * 1024]);
        let mut err = None;
        for _ in 0..64 {
            if let Err(e) = w.write(chunk.clone()).await {
                err = Some(e);
                break;
            }
        }
        let e = err.expect("a 256 KiB tmpfs fills up");
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        // A caller that keeps writing gets errors, not more log lines.
        assert!(w.write(chunk.clone()).await.is_err());
        w.abort().await;
        assert!(
            files(&mnt).is_empty(),
            "no entry and no temp file: {:?}",
            files(&mnt)
        );
        assert!(matches!(
            zone.lookup(&pool_io(&d), "big", &log).await.unwrap(),
            Lookup::Miss { .. }
        ));
        // The space is back: a small entry fits. (A child another test
        // forks at that moment holds a copy of the temp file's descriptor
        // until its exec, so the space may come back a moment later.)
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while rustix::fs::statvfs(&mnt).map_or(0, |v| v.f_bavail * v.f_frsize) < 128 * 1024
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        fill(&zone, &d, "small", 1000, 1000).await;
    });
    let l = lines(&logp);
    assert_eq!(l.len(), 1, "{l:?}");
    assert!(
        l[0].contains("[crit]")
            && l[0].contains("pwrite() \"")
            && l[0].contains("(28: No space left on device)"),
        "{}",
        l[0]
    );
}

/// `min_free`: on a 1 MiB tmpfs with 700 KiB of entries, a 600 KiB
/// `min_free` makes the manager remove least recently used entries until
/// that much is free.
#[test]
fn manager_enforces_min_free() {
    let dir = TempDir::new("cache-minfree");
    let mnt = dir.path().join("mnt");
    let Some(_tmpfs) = Tmpfs::mount(&mnt, "1m") else {
        eprintln!("SKIPPED: cannot mount a tmpfs here (needs root and mount)");
        return;
    };
    let mut s = spec(&mnt, false);
    s.min_free = Some(600 * 1024);
    let zone = CacheZone::new(s, &ErrorLog::new(Vec::new()));
    let d = disk(2);
    let log = RequestLog::plain(&ErrorLog::new(Vec::new()));
    rt().block_on(async {
        for i in 0..7 {
            fill(&zone, &d, &format!("k{i}"), 100 * 1024 - 200, 50_000).await;
        }
        zone.lookup(&pool_io(&d), "k0", &log).await.unwrap();
        manager::pass(&zone, &Io::inline()).await;
    });
    let st = rustix::fs::statvfs(&mnt).unwrap();
    assert!(st.f_bavail * st.f_frsize >= 600 * 1024);
    let left = files(&mnt);
    assert!(left.len() < 7 && !left.is_empty(), "{left:?}");
    assert!(
        zone.entry_path(&KeyHash::of(b"k0")).exists(),
        "the recently used entry stays"
    );
    assert!(
        !zone.entry_path(&KeyHash::of(b"k1")).exists(),
        "the least recently used goes"
    );
}

// ---------------------------------------------------------------------------
// Against Debian's nginx.

fn nginx_missing() -> bool {
    if Path::new(NGINX).is_file() {
        return false;
    }
    eprintln!("SKIPPED: {NGINX} is not installed");
    true
}

/// nginx as a caching proxy in front of itself: the file it writes for a
/// known key must be where porter puts it.
#[test]
fn layout_matches_nginx() {
    if nginx_missing() {
        return;
    }
    let dir = TempDir::new("cache-nginx");
    let (front, origin) = (free_port(), free_port());
    let p = dir.path().display();
    let conf = format!(
        "daemon off; master_process off; pid {p}/nginx.pid; error_log {p}/error.log;
events {{}}
http {{
  access_log off;
  client_body_temp_path {p}/body; fastcgi_temp_path {p}/fcgi;
  uwsgi_temp_path {p}/uwsgi; scgi_temp_path {p}/scgi;
  proxy_temp_path {p}/ptemp;
  proxy_cache_path {p}/cache levels=1:2 keys_zone=t:1m;
  server {{ listen 127.0.0.1:{origin}; location / {{ return 200 \"origin\\n\"; }} }}
  server {{
    listen 127.0.0.1:{front};
    location / {{
      proxy_pass http://127.0.0.1:{origin};
      proxy_cache t;
      proxy_cache_key \"porter-layout$request_uri\";
      proxy_cache_valid 200 10m;
    }}
  }}
}}
"
    );
    dir.write("nginx.conf", conf);
    let mut child = Command::new(NGINX)
        .arg("-p")
        .arg(dir.path())
        .arg("-c")
        .arg(dir.path().join("nginx.conf"))
        .arg("-e")
        .arg(dir.path().join("error.log"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        wait_port(front, Duration::from_secs(10)),
        "nginx did not start"
    );
    let r = common::get(front, "/some/page?x=1");
    assert_eq!(r.status, 200);
    let cache = dir.path().join("cache");
    let t = Instant::now();
    while files(&cache)
        .iter()
        .all(|f| f.to_str().unwrap().contains('.'))
        && t.elapsed() < Duration::from_secs(5)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    let got = files(&cache);
    let key = "porter-layout/some/page?x=1";
    let zone = CacheZone::new(
        {
            let mut s = ZoneSpec::new("t", &cache, 1 << 20);
            s.levels = Levels::parse("1:2").unwrap();
            s
        },
        &ErrorLog::new(Vec::new()),
    );
    let ours = zone.entry_path(&KeyHash::of(key.as_bytes()));
    assert_eq!(got, vec![ours.strip_prefix(&cache).unwrap().to_path_buf()]);
    // And nginx's file names the same key.
    let text = std::fs::read(&ours).unwrap();
    assert!(String::from_utf8_lossy(&text).contains(&format!("\nKEY: {key}\n")));
}

/// Bad cache directives (`C`, `D`, `T`, `U` stand for paths in the
/// prefix) and the `-t` message both servers print (`F` the file).
const BAD_CACHE_CONFIGS: &[(&str, &str)] = &[
    (
        "proxy_cache_path C levels=1:3:2 keys_zone=x:1m;",
        "invalid \"levels\" \"levels=1:3:2\" in F:3",
    ),
    (
        "proxy_cache_path C levels=1:2;",
        "\"proxy_cache_path\" must have \"keys_zone\" parameter in F:3",
    ),
    (
        "proxy_cache_path C keys_zone=:1m;",
        "\"proxy_cache_path\" must have \"keys_zone\" parameter in F:3",
    ),
    (
        "proxy_cache_path C keys_zone=x:1m; proxy_cache_path D keys_zone=x:1m;",
        "duplicate zone \"x\" in F:3",
    ),
    (
        "proxy_cache_path C keys_zone=x;",
        "invalid keys zone size \"keys_zone=x\" in F:3",
    ),
    (
        "proxy_cache_path C keys_zone=x:1k;",
        "keys zone \"keys_zone=x:1k\" is too small in F:3",
    ),
    (
        "proxy_cache_path C keys_zone=x:1m inactive=zz;",
        "invalid inactive value \"inactive=zz\" in F:3",
    ),
    (
        "proxy_cache_path C keys_zone=x:1m max_size=zz;",
        "invalid max_size value \"max_size=zz\" in F:3",
    ),
    (
        "proxy_cache_path C keys_zone=x:1m min_free=zz;",
        "invalid min_free value \"min_free=zz\" in F:3",
    ),
    (
        "proxy_cache_path C keys_zone=x:1m use_temp_path=maybe;",
        "invalid use_temp_path value \"use_temp_path=maybe\", it must be \"on\" or \"off\" in F:3",
    ),
    (
        "proxy_cache_path C keys_zone=x:1m loader_files=zz;",
        "invalid loader_files value \"loader_files=zz\" in F:3",
    ),
    (
        "proxy_cache_path C keys_zone=x:1m manager_sleep=zz;",
        "invalid manager_sleep value \"manager_sleep=zz\" in F:3",
    ),
    (
        "proxy_cache_path C keys_zone=x:1m bogus=1;",
        "invalid parameter \"bogus=1\" in F:3",
    ),
    (
        "proxy_cache_path C;",
        "invalid number of arguments in \"proxy_cache_path\" directive in F:3",
    ),
    (
        "server { proxy_cache_path C keys_zone=x:1m; }",
        "\"proxy_cache_path\" directive is not allowed here in F:3",
    ),
    (
        "proxy_cache_path C keys_zone=x:1m;\n\nproxy_cache_path C keys_zone=y:1m;",
        "the same path name \"C\" used in F:3 and in F:5",
    ),
    (
        "proxy_temp_path C;\n\nproxy_cache_path C keys_zone=y:1m;",
        "the same path name \"C\" used in F:3 and in F:5",
    ),
    (
        "proxy_cache_valid 200 zz;",
        "invalid time value \"zz\" in F:3",
    ),
    ("proxy_cache_valid 99 10m;", "invalid status \"99\" in F:3"),
    (
        "proxy_cache_valid abc 10m;",
        "invalid status \"abc\" in F:3",
    ),
    (
        "proxy_temp_path T 0;",
        "\"proxy_temp_path\" directive invalid value in F:3",
    ),
    (
        "proxy_temp_path T; proxy_temp_path U;",
        "\"proxy_temp_path\" directive is duplicate in F:3",
    ),
];

/// `-t` messages for bad cache directives, as nginx prints them.
#[test]
fn config_errors_match_nginx() {
    let have_nginx = Path::new(NGINX).is_file();
    if !have_nginx {
        eprintln!("nginx not installed: checking porter against the recorded messages only");
    }
    let dir = TempDir::new("cache-conf");
    std::fs::create_dir_all(dir.path().join("logs")).unwrap();
    let p = dir.path().display().to_string();
    let conf = dir.path().join("t.conf");
    let f = conf.display().to_string();
    let c = format!("{p}/c");
    for (snippet, want) in BAD_CACHE_CONFIGS {
        let body = snippet
            .replace(" C", &format!(" {c}"))
            .replace(" D", &format!(" {p}/d"))
            .replace(" T", &format!(" {p}/t"))
            .replace(" U", &format!(" {p}/u"));
        std::fs::write(&conf, format!("events{{}}\nhttp{{\n{body}\n}}\n")).unwrap();
        let want = want
            .replace("F:", &format!("{f}:"))
            .replace("\"C\"", &format!("\"{c}\""));
        let out = Command::new(BIN)
            .args(["-p", &p, "-c"])
            .arg(&conf)
            .arg("-t")
            .output()
            .unwrap();
        let porter = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "{snippet}: porter accepted it");
        assert!(
            porter.contains(&format!("[emerg] {want}\n")),
            "{snippet}: porter said {porter}"
        );
        if have_nginx {
            let out = Command::new(NGINX)
                .args(["-p", &p, "-e", "/dev/null", "-c"])
                .arg(&conf)
                .arg("-t")
                .output()
                .unwrap();
            let nginx = String::from_utf8_lossy(&out.stderr).into_owned();
            assert!(
                nginx.contains(&format!("[emerg] {want}\n")),
                "{snippet}: nginx said {nginx}"
            );
        }
    }
    // And what nginx accepts, porter accepts.
    std::fs::write(
        &conf,
        format!(
            "events{{}}\nhttp{{\nproxy_cache_path {c} levels=2:2:2 keys_zone=x:10m inactive=1h max_size=1g min_free=100m use_temp_path=off loader_files=0 loader_sleep=0 manager_threshold=1s;\nproxy_cache_path {p}/e levels= keys_zone=e:1m;\nproxy_temp_path {p}/t 1 2;\nproxy_cache_valid 200 302 10m; proxy_cache_valid 404 1m; proxy_cache_valid any 0;\nserver {{ listen 127.0.0.1:1; location / {{ proxy_cache_valid 1h; proxy_temp_path {p}/t 1 2; }} }}\n}}\n"
        ),
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["-p", &p, "-c"])
        .arg(&conf)
        .arg("-t")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    if have_nginx {
        let out = Command::new(NGINX)
            .args(["-p", &p, "-e", "/dev/null", "-c"])
            .arg(&conf)
            .arg("-t")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "nginx: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

// ---------------------------------------------------------------------------
// The real binary: zones start with the server, and a reload keeps an
// unchanged zone (no second loader) while a changed one starts afresh.

#[test]
fn server_loads_zones_and_reload_reuses_unchanged_ones() {
    let prefix = TempDir::new("cache-srv");
    let cache = prefix.path().join("cache");
    {
        let mut s = spec(prefix.path(), false);
        s.path = cache.clone();
        let zone = CacheZone::new(s, &ErrorLog::new(Vec::new()));
        rt().block_on(fill(&zone, &disk(1), "seed", 1000, 1000));
    }
    let stale = cache.join(format!("c/.{}.1.1", KeyHash::of(b"x").hex()));
    std::fs::create_dir_all(stale.parent().unwrap()).unwrap();
    std::fs::write(&stale, b"partial").unwrap();
    // Run as root, porter's workers (and cache threads) are `nobody`, as
    // NGINX's are: the cache tree is theirs, as NGINX's would have to be.
    if unsafe { libc::geteuid() } == 0 {
        let ok = Command::new("chown")
            .arg("-R")
            .arg("nobody:")
            .arg(&cache)
            .status();
        assert!(ok.unwrap().success());
    }
    let conf = |size: &str| {
        format!(
            "daemon off; pid {{PREFIX}}/logs/porter.pid; error_log {{PREFIX}}/logs/error.log notice;
events {{}}
http {{
  access_log off;
  proxy_cache_path {{PREFIX}}/cache levels=1:2 keys_zone=z:{size};
  server {{ listen 127.0.0.1:{{PORT}}; location / {{ root {{PREFIX}}; }} }}
}}
"
        )
    };
    let s = common::Server::start_in(prefix, &conf("1m"), &[]);
    let log = s.wait_log(
        "logs/error.log",
        "http file cache:",
        Duration::from_secs(10),
    );
    assert!(
        log.contains("1 entries loaded") && log.contains("1 temp files removed"),
        "{log}"
    );
    assert!(!stale.exists());
    let count = |s: &common::Server| s.read("logs/error.log").matches("http file cache:").count();
    s.signal(1);
    s.wait_log("logs/error.log", "reconfigured", Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(count(&s), 1, "an unchanged zone is reused, not reloaded");
    let text = common::config_text(&conf("2m"), s.port, s.prefix.path());
    s.prefix.write("porter.conf", text);
    s.signal(1);
    let t = Instant::now();
    while count(&s) < 2 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        count(&s),
        2,
        "a resized keys zone is a new zone with its own loader"
    );
    assert_eq!(common::get(s.port, "/nope").status, 404, "still serving");
}

/// A cache directory that cannot be created stops the start with NGINX's
/// message, as nginx's does.
#[test]
fn uncreatable_cache_directory_fails_the_start() {
    let dir = TempDir::new("cache-mkdir");
    std::fs::create_dir_all(dir.path().join("logs")).unwrap();
    dir.write("afile", b"");
    let p = dir.path().display().to_string();
    let port = free_port();
    dir.write(
        "t.conf",
        format!(
            "daemon off; error_log {p}/logs/error.log; pid {p}/p.pid;\nevents {{}}\nhttp {{ access_log off;\nproxy_cache_path {p}/afile/c keys_zone=x:1m;\nserver {{ listen 127.0.0.1:{port}; }}\n}}\n"
        ),
    );
    let mut child = Command::new(BIN)
        .args(["-p", &p, "-c", "t.conf"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("porter started with an uncreatable cache directory");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(1));
    let log = std::fs::read_to_string(dir.path().join("logs/error.log")).unwrap();
    assert!(
        log.contains(&format!("[emerg] {}#", child.id()))
            && log.contains(&format!(
                "mkdir() \"{p}/afile/c\" failed (20: Not a directory)"
            )),
        "{log}"
    );
}

/// The name the test harness knows `name` of this file by: its module path
/// in the area binary without the crate's own name
/// (`proxy_cache_store::crash_child`).
fn own_test(name: &str) -> String {
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    format!("{module}::{name}")
}
