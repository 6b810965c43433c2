//! Cache integrity beyond NGINX (`src/cache/verify.rs`): an entry whose
//! body was damaged on disk after it was stored — a flipped byte, a tail
//! zeroed as after a power loss, a truncation — is never sent as a HIT.
//! porter runs between a test client and an in-test origin on loopback;
//! each test fills an entry through a real MISS, damages the entry file
//! in place, and asks again over a real socket.

use std::io::{Read, Seek, SeekFrom, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::origin::*;
use crate::common::*;

/// One zone `one` in `{PREFIX}/cache`, `location /` proxying to the origin
/// with a fixed key (`KEY/…`), `$upstream_cache_status` in `X-Cache`.
fn conf(origin: u16) -> String {
    conf_valid(origin, "proxy_cache_valid 200 10m;")
}

/// [`conf`] with other validity directives (`valid`).
fn conf_valid(origin: u16, valid: &str) -> String {
    format!(
        "daemon off;\nworker_processes 2;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\n\
         events {{ worker_connections 64; }}\n\
         http {{\n  access_log off;\n  \
           proxy_cache_path {{PREFIX}}/cache levels=1:2 keys_zone=one:1m;\n  \
           server {{\n    listen 127.0.0.1:{{PORT}};\n    \
             location / {{\n      proxy_pass http://127.0.0.1:{origin};\n      \
               proxy_cache one;\n      proxy_cache_key \"v1fixture$request_uri\";\n      \
               {valid}\n      \
               add_header X-Cache $upstream_cache_status always;\n    }}\n  }}\n}}\n"
    )
}

fn get_obj(port: u16, path: &str) -> Resp {
    raw(
        port,
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

fn cache_status(r: &Resp) -> &str {
    r.header("X-Cache").unwrap_or("")
}

/// `DIR/<last>/<two before>/<md5>` for `levels=1:2`.
fn entry_path(cache: &Path, key: &str) -> PathBuf {
    let out = std::process::Command::new("md5sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(key.as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    let h = String::from_utf8_lossy(&out.stdout)[..32].to_string();
    cache.join(&h[31..]).join(&h[29..31]).join(&h)
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The body offset an entry file declares (its header length, bytes 12..16).
fn body_offset(path: &Path) -> u64 {
    let b = std::fs::read(path).unwrap();
    u64::from(u32::from_le_bytes(b[12..16].try_into().unwrap()))
}

/// Writes `bytes` over the file at `at`, in place (same inode, as a disk
/// would damage it).
fn overwrite(path: &Path, at: u64, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(at)).unwrap();
    f.write_all(bytes).unwrap();
}

fn flip(path: &Path, at: u64) {
    let b = std::fs::read(path).unwrap();
    overwrite(path, at, &[b[at as usize] ^ 0x20]);
}

/// An origin serving `body` at every path, a porter in front of it, and
/// the entry of `path` filled by a MISS.
fn filled(body: &[u8], path: &str) -> (Origin, Server, PathBuf) {
    let b = body.to_vec();
    let origin = Origin::start(move |_| Reply::ok(&b));
    let srv = Server::start(&conf(origin.port));
    let a = get_obj(srv.port, path);
    assert_eq!((a.status, cache_status(&a)), (200, "MISS"));
    assert_eq!(a.body, body);
    let entry = entry_path(
        &srv.prefix.path().join("cache"),
        &format!("v1fixture{path}"),
    );
    wait_for("the entry file", || entry.exists());
    (origin, srv, entry)
}

/// After damage: the next request is fetched again (MISS, the right
/// bytes), one `crit` line names the file, and then the new entry hits.
fn refetched(srv: &Server, origin: &Origin, path: &str, body: &[u8], why: &str) {
    let before = origin.count();
    let r = get_obj(srv.port, path);
    assert_eq!(r.status, 200);
    assert_eq!(cache_status(&r), "MISS", "damaged entry served as a hit");
    assert!(r.body == body, "wrong body after damage");
    assert_eq!(origin.count(), before + 1);
    let log = srv.wait_log("logs/error.log", why, Duration::from_secs(5));
    assert!(
        log.contains("[crit]") && log.contains(why),
        "no crit line `{why}`:\n{log}"
    );
    let entry = entry_path(
        &srv.prefix.path().join("cache"),
        &format!("v1fixture{path}"),
    );
    wait_for("the new entry", || entry.exists());
    let h = get_obj(srv.port, path);
    assert_eq!(cache_status(&h), "HIT");
    assert!(h.body == body, "the new entry's body");
}

#[test]
fn a_flipped_byte_in_a_small_body_is_fetched_again_not_a_hit() {
    let body = pattern(100_000, 3);
    let (origin, srv, entry) = filled(&body, "/small");
    flip(&entry, body_offset(&entry) + 54_321);
    refetched(&srv, &origin, "/small", &body, "has bad body checksum");
}

#[test]
fn a_zeroed_tail_is_fetched_again_not_a_hit() {
    // A power loss after the rename: size right, last page zeroed.
    let body = pattern(200_000, 4);
    let (origin, srv, entry) = filled(&body, "/zeroed");
    let size = std::fs::metadata(&entry).unwrap().len();
    overwrite(&entry, size - 4096, &[0u8; 4096]);
    refetched(&srv, &origin, "/zeroed", &body, "has bad body checksum");
}

#[test]
fn a_truncated_entry_is_fetched_again_not_a_hit() {
    let body = pattern(150_000, 5);
    let (origin, srv, entry) = filled(&body, "/short");
    let size = std::fs::metadata(&entry).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&entry)
        .unwrap()
        .set_len(size - 1000)
        .unwrap();
    refetched(&srv, &origin, "/short", &body, "has wrong size");
}

#[test]
fn a_damaged_header_is_fetched_again_not_a_hit() {
    // The body's checksum field itself (bytes 62..66) included.
    for (path, at) in [("/h1", 62u64), ("/h2", 100)] {
        let body = pattern(20_000, 6);
        let (origin, srv, entry) = filled(&body, path);
        flip(&entry, at);
        refetched(&srv, &origin, path, &body, "has bad header checksum");
    }
}

/// GET `path` and read to the end of the connection: the head, the
/// `Content-Length` it announced, and the body bytes that came.
fn get_to_eof(port: u16, path: &str) -> (String, u64, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut all = Vec::new();
    let _ = s.read_to_end(&mut all);
    let end = find(&all, b"\r\n\r\n").expect("a head") + 4;
    let head = String::from_utf8_lossy(&all[..end]).to_string();
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|v| v.trim().parse().ok())
        .expect("Content-Length");
    (head, len, all[end..].to_vec())
}

#[test]
fn a_flipped_byte_in_a_large_body_never_arrives_as_a_whole_response() {
    let body = pattern(3 << 20, 7);
    let (origin, srv, entry) = filled(&body, "/large");
    // Intact: a whole, checked HIT.
    let (head, len, got) = get_to_eof(srv.port, "/large");
    assert!(head.contains("X-Cache: HIT"), "{head}");
    assert_eq!((len, got.len() as u64), (body.len() as u64, len));
    assert!(got == body);
    // Damaged in its first half: the HIT's head goes out, the body stops
    // short of its Content-Length, the entry is removed.
    flip(&entry, body_offset(&entry) + 1_000_000);
    let (head, len, got) = get_to_eof(srv.port, "/large");
    assert!(head.contains("X-Cache: HIT"), "{head}");
    assert_eq!(len, body.len() as u64);
    assert!(
        (got.len() as u64) < len,
        "a complete response with a damaged body ({} bytes)",
        got.len()
    );
    assert!(
        got.len() as u64 >= len - 128 * 1024,
        "only the last piece is held back ({} bytes)",
        got.len()
    );
    wait_for("the damaged entry removed", || !entry.exists());
    refetched(&srv, &origin, "/large", &body, "has bad body checksum");
}

#[test]
fn a_byte_flipped_after_a_checked_hit_is_still_found() {
    // A large body checked whole once is sent unchecked (by `sendfile`)
    // while its file is unchanged; a change in place must end that.
    let body = pattern(3 << 20, 9);
    let b = body.clone();
    let origin = Origin::start(move |_| Reply::ok(&b));
    // One worker: the proof its first check leaves answers every later hit.
    let srv = Server::start(&conf(origin.port).replace("worker_processes 2", "worker_processes 1"));
    assert_eq!(cache_status(&get_obj(srv.port, "/proven")), "MISS");
    let entry = entry_path(&srv.prefix.path().join("cache"), "v1fixture/proven");
    wait_for("the entry file", || entry.exists());
    // Older than `verify::SETTLED`: the first hit's check is remembered.
    std::thread::sleep(Duration::from_millis(1300));
    for i in 0..3 {
        let (head, len, got) = get_to_eof(srv.port, "/proven");
        assert!(head.contains("X-Cache: HIT"), "{i}: {head}");
        assert_eq!(len, body.len() as u64);
        assert!(got == body, "hit {i}");
    }
    flip(&entry, body_offset(&entry) + 2_500_000);
    let (head, len, got) = get_to_eof(srv.port, "/proven");
    assert!(head.contains("X-Cache: HIT"), "{head}");
    assert!(
        (got.len() as u64) < len,
        "a complete response with a damaged body after a checked hit"
    );
    wait_for("the damaged entry removed", || !entry.exists());
    refetched(&srv, &origin, "/proven", &body, "has bad body checksum");
}

#[test]
fn a_version_1_entry_is_still_served() {
    // tests/common/cache_v1_entry: written by porter before the body
    // checksum (format version 1), key `v1fixture/v1.txt`, a 5200-byte body
    // valid for ten years.
    let want: Vec<u8> = (0..200)
        .flat_map(|i| format!("porter v1 entry line {i:04}\n").into_bytes())
        .collect();
    serves_old_entry("cache_v1_entry", "/v1.txt", &want);
}

#[test]
fn a_version_2_entry_is_still_served() {
    // tests/common/cache_v2_entry: written by porter before the stale
    // windows (format version 2, 2026-11-28), key `v1fixture/v2.txt`, a
    // 5200-byte body, `Cache-Control: max-age=315360000`.
    let want: Vec<u8> = (0..200)
        .flat_map(|i| format!("porter v2 entry line {i:04}\n").into_bytes())
        .collect();
    serves_old_entry("cache_v2_entry", "/v2.txt", &want);
}

/// The fixture entry `name` (in tests/common/) for `uri` answers three
/// times as a HIT with `want`, the origin never asked.
fn serves_old_entry(name: &str, uri: &str, want: &[u8]) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/common")
        .join(name);
    let origin = Origin::start(|_| Reply::ok(b"from the origin"));
    let prefix = TempDir::new("old");
    let entry = entry_path(&prefix.path().join("cache"), &format!("v1fixture{uri}"));
    std::fs::create_dir_all(entry.parent().unwrap()).unwrap();
    std::fs::copy(&fixture, &entry).unwrap();
    // Run as root, porter's workers are `nobody`: the cache tree is theirs.
    let ok = std::process::Command::new("chown")
        .arg("-R")
        .arg("nobody:")
        .arg(prefix.path().join("cache"))
        .status();
    assert!(ok.unwrap().success());
    let srv = Server::start_in(prefix, &conf(origin.port), &[]);
    for _ in 0..3 {
        let r = get_obj(srv.port, uri);
        assert_eq!((r.status, cache_status(&r)), (200, "HIT"));
        assert!(r.body == want);
    }
    assert_eq!(origin.count(), 0);
}

#[test]
fn a_revalidation_does_not_store_a_damaged_body_again() {
    // An expired 3 MiB entry, damaged, revalidated by a 304 that makes it
    // fresh for ten minutes: the copy of its body into the refreshed entry
    // is checked, so nothing damaged is stored under a new checksum.
    let body = pattern(3 << 20, 8);
    let b = body.clone();
    let origin = Origin::start(move |r| {
        if r.header("If-None-Match") == Some("\"v1\"") {
            return Reply::ok(b"")
                .status(304)
                .header("ETag", "\"v1\"")
                .header("Cache-Control", "max-age=600");
        }
        Reply::ok(&b).header("ETag", "\"v1\"")
    });
    let srv = Server::start(&conf_valid(
        origin.port,
        "proxy_cache_valid 200 1s; proxy_cache_revalidate on;",
    ));
    let a = get_obj(srv.port, "/reval");
    assert_eq!(cache_status(&a), "MISS");
    let entry = entry_path(&srv.prefix.path().join("cache"), "v1fixture/reval");
    wait_for("the entry file", || entry.exists());
    std::thread::sleep(Duration::from_millis(2200));
    flip(&entry, body_offset(&entry) + 2_000_000);
    let (head, len, got) = get_to_eof(srv.port, "/reval");
    assert!(head.contains("X-Cache: REVALIDATED"), "{head}");
    assert!((got.len() as u64) < len, "a damaged body sent whole");
    // Whatever comes next is the right body.
    let (head, len, got) = get_to_eof(srv.port, "/reval");
    assert_eq!(len, body.len() as u64, "{head}");
    assert!(got == body, "damaged body stored again ({head})");
}
