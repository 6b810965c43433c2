//! A corpus of real NGINX configurations (`tests/configs/NAME/`), each run
//! by porter and by Debian's nginx side by side on the same files and asked
//! the same requests; every answer must agree (status, header fields other
//! than `Date`, `Server` and `ETag`, body, and for TLS the negotiated
//! version and cipher suite) unless the difference is listed in
//! `tests/configs/NAME/expected-differences.txt` (and in
//! `docs/differences.md`). Issue 26 item 9.
//!
//! Each config directory holds `etc/` (the config tree, verbatim but for
//! the rewrites below; `etc/nginx.conf` is the main file), `requests.txt`,
//! optionally `www/` (the document roots), `setup.txt`,
//! `expected-differences.txt` and `blocked.txt`, and the source's licence.
//!
//! Rewrites (only paths and ports; applied to every file of `etc/`, once for
//! porter's copy and once for nginx's, each in its own prefix `P`; `W` is
//! the one `www/` both serve):
//! - `/etc/nginx/` -> `P/etc/`; `/etc/letsencrypt/` -> `P/letsencrypt/`;
//!   `/var/log/nginx/` -> `P/log/`; `/run/nginx.pid` and
//!   `/var/run/nginx.pid` -> `P/run/nginx.pid`; `/var/run/php/` ->
//!   `P/php/`; `/var/cache/nginx` -> `P/cache`; `/var/www/` -> `W/`;
//!   `/path/to/` (the Mozilla generator's placeholders) -> `P/certs/`;
//!   and each `path FROM TO` of `setup.txt`.
//! - `listen PORT` and `listen *:PORT` / `0.0.0.0:PORT` -> `listen
//!   127.0.0.1:NEW`, `listen [::]:PORT` -> `listen [::1]:NEW`: each port
//!   number gets a free port of its own per server (both families the same).
//! - `127.0.0.1:90NN` (upstream servers) -> a backend the test starts
//!   (shared by both servers); `127.0.0.1:99NN` -> a port nothing listens on.
//!
//! `setup.txt` lines: `link PATH TARGET` (a symlink in the prefix; `{WWW}`
//! in TARGET is `W`, `{FPM}` the php-fpm socket), `cert CRT KEY` (a test
//! CA's leaf for every host the requests name, written at those
//! prefix-relative paths), `path FROM TO` (a path rewrite; `{PREFIX}` and
//! `{WWW}` in TO are `P` and `W`), `backend PORT` (`127.0.0.1:PORT` is a
//! backend the test starts, as `90NN` are), `fpm` (start Debian's php-fpm,
//! `tests/common/php.rs`, shared by both servers).
//!
//! `requests.txt` lines: `[tls|tls12|ws] METHOD TARGET | Header: value |
//! ...`; `tls` speaks TLS (SNI = Host), `tls12` offers only TLS 1.2, `ws`
//! sends a WebSocket upgrade and, after the 101, echoes a message through
//! the backend. `{LAST_MODIFIED}` is the files' fixed mtime.
//!
//! `expected-differences.txt` lines: `REQUEST :: WHAT :: REASON` (WHAT is
//! `status`, `header NAME`, `body` or `tls`); a listed difference that no
//! longer occurs fails too, as does a REASON missing from
//! `docs/differences.md`.
//!
//! `blocked.txt` (one line `DIRECTIVE :: PORTER'S ERROR :: issue 26 item
//! N`): porter rejects the config today; the test asserts `porter -t` still
//! fails with exactly that error (the path in it relative to the prefix),
//! and fails once the fix lands, asking for `blocked.txt` to be deleted.
//!
//! Both servers start from `/` as working directory, as systemd starts
//! them. Without `/usr/sbin/nginx` the comparison is skipped (saying so);
//! the `-t` checks still run. `PORTER_CORPUS_SURVEY=1` instead comments out
//! each line porter rejects (a block whole) and prints every difference
//! without failing: the survey of issue 26.
//!
//! Run: `cargo test --release --test area_process config_corpus:: -- --nocapture`.

use crate::common;

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use crate::common::tls::{Alg, Ca, ClientOpts, Conn};
use crate::common::{free_port, read_head, read_response, Resp, TempDir, BIN, NGINX};

/// The fixed mtime of every served file: Sun, 13 Sep 2020 12:26:40 GMT.
const MTIME: u64 = 1_600_000_000;
const LAST_MODIFIED: &str = "Sun, 13 Sep 2020 12:26:40 GMT";

/// Header fields not compared.
const IGNORED: &[&str] = &["date", "server", "etag"];

fn corpus_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/configs")
        .join(name)
}

fn survey() -> bool {
    std::env::var_os("PORTER_CORPUS_SURVEY").is_some_and(|v| v == "1")
}

/// The non-empty, non-comment lines of `NAME/file` (none if absent).
fn lines_of(name: &str, file: &str) -> Vec<String> {
    std::fs::read_to_string(corpus_dir(name).join(file))
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect()
}

// ---------------------------------------------------------------------------
// Rewriting a config tree into a prefix.

/// One server's copy of a config: its prefix and its port map.
struct Tree {
    prefix: TempDir,
    /// Port in the config -> port this copy listens on.
    ports: BTreeMap<u16, u16>,
}

/// Ports shared by both copies: backends (`90NN`) and dead ports (`99NN`).
type Shared = BTreeMap<u16, u16>;

fn rewrite_listen(line: &str, ports: &mut BTreeMap<u16, u16>) -> String {
    let indent = &line[..line.len() - line.trim_start().len()];
    let rest = line.trim_start().strip_prefix("listen").unwrap();
    let rest_trim = rest.trim_start();
    let (addr, tail) =
        rest_trim.split_at(rest_trim.find([' ', '\t', ';']).unwrap_or(rest_trim.len()));
    let (host, port) = match addr.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(':') => (h, p),
        _ => ("", addr),
    };
    let Ok(port) = port.parse::<u16>() else {
        return line.to_string();
    };
    let new = *ports.entry(port).or_insert_with(free_port);
    let host = match host {
        "" | "*" | "0.0.0.0" => "127.0.0.1",
        "[::]" => "[::1]",
        h => h,
    };
    format!("{indent}listen {host}:{new}{tail}")
}

fn rewrite_text(
    text: &str,
    t: &(PathBuf, PathBuf, BTreeMap<u16, u16>),
    tree_ports: &mut BTreeMap<u16, u16>,
    shared: &Shared,
    paths: &[(String, String)],
) -> String {
    let p = t.0.display().to_string();
    let w = t.1.display().to_string();
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        let mut l = line
            .replace("/etc/nginx/", &format!("{p}/etc/"))
            .replace("/etc/letsencrypt/", &format!("{p}/letsencrypt/"))
            .replace("/var/log/nginx/", &format!("{p}/log/"))
            .replace("/var/run/nginx.pid", &format!("{p}/run/nginx.pid"))
            .replace(" /run/nginx.pid", &format!(" {p}/run/nginx.pid"))
            .replace("/var/run/php/", &format!("{p}/php/"))
            .replace("/var/cache/nginx", &format!("{p}/cache"))
            .replace("/var/www/", &format!("{w}/"))
            .replace("/path/to/", &format!("{p}/certs/"));
        for (from, to) in paths {
            l = l.replace(from, &to.replace("{PREFIX}", &p).replace("{WWW}", &w));
        }
        if l.trim_start().starts_with("listen ") || l.trim_start().starts_with("listen\t") {
            let nl = l.ends_with('\n');
            l = rewrite_listen(l.trim_end_matches('\n'), tree_ports) + if nl { "\n" } else { "" };
        }
        for (from, to) in shared {
            l = l.replace(&format!("127.0.0.1:{from}"), &format!("127.0.0.1:{to}"));
        }
        out.push_str(&l);
    }
    out
}

/// Copies `src` into `dst` recursively, rewriting every file.
fn copy_rewritten(
    src: &Path,
    dst: &Path,
    t: &mut (PathBuf, PathBuf, BTreeMap<u16, u16>),
    shared: &Shared,
    paths: &[(String, String)],
) {
    std::fs::create_dir_all(dst).unwrap();
    let mut entries: Vec<_> = std::fs::read_dir(src).unwrap().flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_rewritten(&e.path(), &to, t, shared, paths);
        } else {
            let text = String::from_utf8(std::fs::read(e.path()).unwrap()).unwrap();
            let mut ports = std::mem::take(&mut t.2);
            let out = rewrite_text(&text, t, &mut ports, shared, paths);
            t.2 = ports;
            std::fs::write(&to, out).unwrap();
        }
    }
}

/// The `path FROM TO` lines of `setup.txt`.
fn setup_paths(name: &str) -> Vec<(String, String)> {
    lines_of(name, "setup.txt")
        .iter()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w[..] {
                ["path", from, to] => Some((from.to_string(), to.to_string())),
                _ => None,
            }
        })
        .collect()
}

/// The backend ports (`90NN`) and dead ports (`99NN`) a config names.
fn shared_ports(name: &str) -> Shared {
    let re = regex::Regex::new(r"127\.0\.0\.1:(9[09]\d\d)\b").unwrap();
    let mut m = Shared::new();
    let mut walk = vec![corpus_dir(name).join("etc")];
    while let Some(d) = walk.pop() {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                walk.push(e.path());
            } else if let Ok(t) = std::fs::read_to_string(e.path()) {
                for c in re.captures_iter(&t) {
                    m.insert(c[1].parse().unwrap(), 0);
                }
            }
        }
    }
    for l in lines_of(name, "setup.txt") {
        if let Some(port) = l.strip_prefix("backend ") {
            m.insert(port.trim().parse().unwrap(), 0);
        }
    }
    m
}

/// A prefix with the rewritten tree, `setup.txt` applied and the dirs the
/// configs write to.
fn make_tree(
    name: &str,
    www: &Path,
    shared: &Shared,
    leaf: &common::tls::Leaf,
    fpm: Option<&common::php::Fpm>,
) -> Tree {
    let prefix = TempDir::new(&format!("corpus-{name}"));
    let p = prefix.path().to_path_buf();
    for d in ["run", "log", "logs", "cache", "certs"] {
        std::fs::create_dir_all(p.join(d)).unwrap();
    }
    let mut t = (p.clone(), www.to_path_buf(), BTreeMap::new());
    copy_rewritten(
        &corpus_dir(name).join("etc"),
        &p.join("etc"),
        &mut t,
        shared,
        &setup_paths(name),
    );
    let fpm_sock = fpm
        .map(|f| f.sock.display().to_string())
        .unwrap_or_default();
    for l in lines_of(name, "setup.txt") {
        let w: Vec<&str> = l.split_whitespace().collect();
        match w[..] {
            ["link", path, target] => {
                let at = p.join(path);
                std::fs::create_dir_all(at.parent().unwrap()).unwrap();
                let target = target
                    .replace("{WWW}", www.to_str().unwrap())
                    .replace("{FPM}", &fpm_sock);
                std::os::unix::fs::symlink(target, at).unwrap();
            }
            ["path", ..] | ["backend", _] | ["fpm"] => {}
            ["cert", crt, key] => {
                std::fs::create_dir_all(p.join(crt).parent().unwrap()).unwrap();
                std::fs::write(p.join(crt), &leaf.cert_pem).unwrap();
                std::fs::write(p.join(key), &leaf.key_pem).unwrap();
            }
            _ => panic!("{name}/setup.txt: bad line {l:?}"),
        }
    }
    Tree { prefix, ports: t.2 }
}

/// Copies `NAME/www` into `dst`, every file with the fixed mtime.
fn copy_www(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    common::set_mode(dst, 0o755);
    for e in std::fs::read_dir(src).into_iter().flatten().flatten() {
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_www(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).unwrap();
            common::set_mode(&to, 0o644);
            let f = std::fs::File::options().write(true).open(&to).unwrap();
            f.set_modified(UNIX_EPOCH + Duration::from_secs(MTIME))
                .unwrap();
        }
    }
}

// ---------------------------------------------------------------------------
// `-t`, blocked configs and the survey.

/// `porter -t` (or nginx's) on a tree: `Ok` or the `[emerg]` message with
/// the prefix cut from its path.
fn test_config(bin: &str, tree: &Tree) -> Result<(), String> {
    let p = tree.prefix.path();
    let out = Command::new(bin)
        .current_dir("/")
        .arg("-t")
        .arg("-p")
        .arg(p)
        .arg("-c")
        .arg(p.join("etc/nginx.conf"))
        .args(["-e", p.join("logs/stderr.log").to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).replace(&format!("{}/", p.display()), "");
    if out.status.success() {
        return Ok(());
    }
    Err(err
        .lines()
        .find_map(|l| l.split_once("[emerg] ").map(|(_, m)| m.to_string()))
        .unwrap_or(err))
}

/// Comments out the statement (or whole block) at `file:line` of the tree.
fn comment_out(tree: &Tree, file: &str, line: usize) {
    let path = tree.prefix.path().join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.split('\n').map(String::from).collect();
    let ends = |l: &str| {
        let t = l.split('#').next().unwrap().trim_end();
        t.ends_with([';', '{', '}']) || t.is_empty()
    };
    let mut s = line - 1;
    while s > 0 && !ends(&lines[s - 1]) {
        s -= 1;
    }
    let (mut j, mut depth) = (s, 0i32);
    loop {
        let t = lines[j].split('#').next().unwrap().to_string();
        depth += t.matches('{').count() as i32 - t.matches('}').count() as i32;
        if depth <= 0 && (t.contains(';') || t.contains('}')) || j + 1 == lines.len() {
            break;
        }
        j += 1;
    }
    for l in &mut lines[s..=j] {
        *l = format!("#REJECTED# {l}");
    }
    std::fs::write(&path, lines.join("\n")).unwrap();
}

/// Survey mode: comments out what porter rejects until it loads; returns
/// one line per rejected statement.
fn survey_rejections(tree: &Tree) -> Vec<String> {
    let mut out = Vec::new();
    let re = regex::Regex::new(r"^(.*) in (\S+):(\d+)$").unwrap();
    for _ in 0..100 {
        let Err(e) = test_config(BIN, tree) else {
            break;
        };
        let Some(c) = re.captures(e.trim()) else {
            out.push(format!("cannot locate: {e}"));
            break;
        };
        let (file, line): (&str, usize) = (&c[2], c[3].parse().unwrap());
        let text = std::fs::read_to_string(tree.prefix.path().join(file)).unwrap_or_default();
        let src = text.lines().nth(line - 1).unwrap_or("").trim().to_string();
        out.push(format!("{file}:{line}: `{src}`: {}", &c[1]));
        comment_out(tree, file, line);
    }
    out
}

/// Checks `blocked.txt` against porter's answer to `-t`: `true` when the
/// config is blocked (and still fails exactly so).
fn check_blocked(name: &str, porter: &Result<(), String>) -> bool {
    let blocked = lines_of(name, "blocked.txt");
    let Some(entry) = blocked.first() else {
        if let Err(e) = porter {
            panic!("{name}: porter -t rejects the config: {e}\n(a defect: fix it, or list it in tests/configs/{name}/blocked.txt as `DIRECTIVE :: ERROR :: issue 26 item N`)");
        }
        return false;
    };
    let f: Vec<&str> = entry.split(" :: ").collect();
    assert_eq!(
        f.len(),
        3,
        "{name}/blocked.txt: want `DIRECTIVE :: ERROR :: issue 26 item N`"
    );
    assert!(
        f[2].starts_with("issue "),
        "{name}/blocked.txt names no issue"
    );
    match porter {
        Ok(()) => panic!(
            "{name}: porter -t now accepts the config, which blocked.txt says it rejects ({}, {}): delete tests/configs/{name}/blocked.txt",
            f[0], f[2]
        ),
        Err(e) => assert_eq!(
            e.trim(),
            f[1],
            "{name}: porter -t fails otherwise than blocked.txt says ({}); update it or fix the new error",
            f[2]
        ),
    }
    true
}

// ---------------------------------------------------------------------------
// Servers and backends.

/// A running server, stopped by PID (SIGTERM, then SIGKILL) on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's PID.
        unsafe { libc::kill(self.0.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `bin` on a tree from `/` and waits for all its ports.
fn start(bin: &str, tree: &Tree) -> Proc {
    let p = tree.prefix.path();
    let child = Command::new(bin)
        .current_dir("/")
        .arg("-p")
        .arg(p)
        .arg("-c")
        .arg(p.join("etc/nginx.conf"))
        .args(["-e", p.join("logs/stderr.log").to_str().unwrap()])
        .args(["-g", "daemon off;"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut proc = Proc(child);
    for port in tree.ports.values() {
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", *port)).is_err() {
            let exited = proc.0.try_wait().unwrap().is_some();
            assert!(
                !exited && Instant::now() < deadline,
                "{bin} did not listen on {port}; stderr log:\n{}\n{}",
                std::fs::read_to_string(p.join("logs/stderr.log")).unwrap_or_default(),
                std::fs::read_to_string(p.join("log/error.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    proc
}

/// The object the backends serve under `/big/` (3 MiB and a bit).
fn big_body() -> Vec<u8> {
    (0..3 * 1024 * 1024 + 123u32)
        .map(|i| (i % 251) as u8)
        .collect()
}

/// One backend connection: answers requests until the peer closes.
fn backend_conn(mut s: TcpStream, id: u16, big: &[u8]) {
    let mut buf = Vec::new();
    while let Some((line, h)) = read_head(&mut s, &mut buf) {
        let field = |n: &str| common::header_in(&h, n).unwrap_or("").to_string();
        let len: usize = field("content-length").parse().unwrap_or(0);
        if common::read_len(&mut s, &mut buf, len).is_none() {
            return;
        }
        let target = line.split(' ').nth(1).unwrap_or("").to_string();
        if field("upgrade").eq_ignore_ascii_case("websocket") {
            let _ = s.write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n");
            let mut tmp = [0u8; 4096];
            while let Ok(n @ 1..) = std::io::Read::read(&mut s, &mut tmp) {
                let mut echo = format!("backend {id} echoes: ").into_bytes();
                echo.extend_from_slice(&tmp[..n]);
                let _ = s.write_all(&echo);
            }
            return;
        }
        let (status, extra, body) = if target.starts_with("/big/") {
            backend_range(&field("range"), big)
        } else {
            let mut b = format!("backend {id}\n{line}\n");
            for n in [
                "host",
                "x-real-ip",
                "x-forwarded-for",
                "x-forwarded-proto",
                "x-forwarded-host",
                "x-forwarded-port",
                "forwarded",
                "upgrade",
                "connection",
                "range",
            ] {
                b.push_str(&format!("{n}: {}\n", field(n)));
            }
            (
                "200 OK",
                "Content-Type: text/plain\r\n".to_string(),
                b.into_bytes(),
            )
        };
        let head = format!(
            "HTTP/1.1 {status}\r\n{extra}Last-Modified: {LAST_MODIFIED}\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let body: &[u8] = if line.starts_with("HEAD ") {
            &[]
        } else {
            &body
        };
        if s.write_all(head.as_bytes())
            .and_then(|_| s.write_all(body))
            .is_err()
        {
            return;
        }
    }
}

/// A 200 or 206 (one `bytes=A-B` or `bytes=A-` range) of `big`.
fn backend_range(range: &str, big: &[u8]) -> (&'static str, String, Vec<u8>) {
    let ct = "Content-Type: video/mp4\r\n";
    let Some((a, b)) = range.strip_prefix("bytes=").and_then(|r| r.split_once('-')) else {
        return ("200 OK", ct.to_string(), big.to_vec());
    };
    let a: usize = a.parse().unwrap_or(0);
    let b: usize = b.parse().unwrap_or(big.len() - 1).min(big.len() - 1);
    if a >= big.len() {
        let cr = format!("Content-Range: bytes */{}\r\n", big.len());
        return ("416 Range Not Satisfiable", cr, Vec::new());
    }
    let cr = format!("{ct}Content-Range: bytes {a}-{b}/{}\r\n", big.len());
    ("206 Partial Content", cr, big[a..=b].to_vec())
}

/// Starts a backend for each `90NN` port and reserves a dead port for each
/// `99NN`; fills in `shared`.
fn start_backends(shared: &mut Shared) {
    let big: Arc<Vec<u8>> = Arc::new(big_body());
    for (from, to) in shared.iter_mut() {
        if *from >= 9900 {
            *to = free_port();
            continue;
        }
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        *to = l.local_addr().unwrap().port();
        let (id, big) = (*from, big.clone());
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let big = big.clone();
                std::thread::spawn(move || backend_conn(s, id, &big));
            }
        });
    }
}

// ---------------------------------------------------------------------------
// Requests and answers.

/// One request of `requests.txt`.
struct Req {
    mode: String,
    raw: String,
    host: String,
}

fn parse_request(line: &str) -> Req {
    let mut parts = line.split(" | ");
    let first: Vec<&str> = parts.next().unwrap().split_whitespace().collect();
    let (mode, method, target) = match first[..] {
        [m, t] => ("plain", m, t),
        [mode, m, t] => (mode, m, t),
        _ => panic!("bad request line {line:?}"),
    };
    let headers: Vec<String> = parts
        .map(|h| h.replace("{LAST_MODIFIED}", LAST_MODIFIED))
        .collect();
    let host = headers
        .iter()
        .find_map(|h| h.strip_prefix("Host: "))
        .unwrap_or("localhost")
        .to_string();
    let mut raw = format!("{method} {target} HTTP/1.1\r\n");
    for h in &headers {
        raw.push_str(&format!("{h}\r\n"));
    }
    if !headers
        .iter()
        .any(|h| h.to_ascii_lowercase().starts_with("connection:"))
    {
        raw.push_str("Connection: close\r\n");
    }
    raw.push_str("\r\n");
    Req {
        mode: mode.to_string(),
        raw,
        host,
    }
}

/// A synthetic answer for a failed exchange.
fn failed(what: &str) -> Resp {
    Resp {
        status: 0,
        status_line: String::new(),
        headers: Vec::new(),
        body: what.as_bytes().to_vec(),
    }
}

/// Sends `r` to a server (ports by config port: 80 plain, 443 TLS).
fn send(r: &Req, ports: &BTreeMap<u16, u16>, ca: &Ca) -> Resp {
    let head_only = r.raw.starts_with("HEAD ");
    match r.mode.as_str() {
        "plain" | "ws" => {
            let mut s = TcpStream::connect(("127.0.0.1", ports[&80])).unwrap();
            s.write_all(r.raw.as_bytes()).unwrap();
            let mut buf = Vec::new();
            if r.mode == "plain" {
                return read_response(&mut s, &mut buf, head_only)
                    .unwrap_or_else(|| failed("no response"));
            }
            let Some((status_line, headers)) = read_head(&mut s, &mut buf) else {
                return failed("no response");
            };
            let status = status_line
                .split(' ')
                .nth(1)
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            if status == 101 {
                s.write_all(b"hello over the upgraded connection\n")
                    .unwrap();
                s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                while !buf.ends_with(b"\n") && common::fill(&mut s, &mut buf).is_some() {}
            }
            let body = buf;
            Resp {
                status,
                status_line,
                headers,
                body,
            }
        }
        mode => {
            let versions = if mode == "tls12" {
                vec![&rustls::version::TLS12]
            } else {
                ClientOpts::default().versions
            };
            let cfg = common::tls::client(
                ca,
                ClientOpts {
                    versions,
                    schemes: None,
                },
            );
            let mut c = match Conn::open(ports[&443], &cfg, &r.host) {
                Ok(c) => c,
                Err(_) => return failed("TLS handshake failed"),
            };
            let version = format!("{:?}", c.tls.conn.protocol_version());
            let suite = format!(
                "{:?}",
                c.tls.conn.negotiated_cipher_suite().map(|s| s.suite())
            );
            let mut resp = c
                .request(&r.raw, head_only)
                .unwrap_or_else(|| failed("no response"));
            resp.headers
                .push(("tls".into(), format!("{version} {suite}")));
            resp
        }
    }
}

/// Seconds since the epoch of an IMF-fixdate.
fn http_date(s: &str) -> Option<i64> {
    let w: Vec<&str> = s.split([' ', ':']).collect();
    let [_, d, mon, y, h, mi, sec, "GMT"] = w[..] else {
        return None;
    };
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let m = months.iter().position(|x| *x == mon)? as i64 + 1;
    let (y, d): (i64, i64) = (y.parse().ok()?, d.parse().ok()?);
    // Days from civil (Howard Hinnant's algorithm).
    let yy = if m <= 2 { y - 1 } else { y };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    Some(
        days * 86400
            + h.parse::<i64>().ok()? * 3600
            + mi.parse::<i64>().ok()? * 60
            + sec.parse::<i64>().ok()?,
    )
}

/// What of an answer is compared: `status`, each `header NAME` (values in
/// order, ports and times normalised), `body`.
fn normalise(r: &Resp, ports: &BTreeMap<u16, u16>) -> BTreeMap<String, String> {
    let norm = |s: &str| {
        let mut s = s
            .replace("nginx/1.22.1", "<SERVER>")
            .replace(concat!("porter/", env!("CARGO_PKG_VERSION")), "<SERVER>")
            .replace("<center>nginx</center>", "<center><SERVER></center>")
            .replace("<center>porter</center>", "<center><SERVER></center>");
        for (from, to) in ports {
            let re = regex::Regex::new(&format!(r"\b{to}\b")).unwrap();
            s = re.replace_all(&s, format!("<PORT {from}>")).into_owned();
        }
        s
    };
    let date = common::header_in(&r.headers, "date").and_then(http_date);
    let mut m = BTreeMap::new();
    m.insert("status".to_string(), r.status.to_string());
    for (n, v) in &r.headers {
        let n = n.to_ascii_lowercase();
        if IGNORED.contains(&n.as_str()) {
            continue;
        }
        let v = match (n.as_str(), http_date(v), date) {
            ("expires", Some(e), Some(d)) if e > 946_684_800 => format!("Date + {}s", e - d),
            _ => norm(v),
        };
        let e: &mut String = m.entry(format!("header {n}")).or_default();
        if !e.is_empty() {
            e.push_str(" || ");
        }
        e.push_str(&v);
    }
    // Compressors differ byte for byte: compare what a gzip'd body decodes to.
    let gzip = common::header_in(&r.headers, "content-encoding") == Some("gzip");
    let chunked = common::header_in(&r.headers, "transfer-encoding") == Some("chunked");
    let mut body = match chunked {
        true => dechunk(&r.body).unwrap_or_else(|| r.body.clone()),
        false => r.body.clone(),
    };
    if gzip {
        let mut d = Vec::new();
        if std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(&body[..]), &mut d)
            .is_ok()
        {
            body = d;
        }
    }
    let raw_text = String::from_utf8_lossy(&body).into_owned();
    let text = norm(&raw_text);
    // The length of the body as normalised (the server's name differs).
    if let Some(len) = m.get_mut("header content-length") {
        if let (Ok(n), false) = (len.parse::<usize>(), gzip) {
            *len = (n + text.len() - raw_text.len()).to_string();
        }
    }
    m.insert("body".into(), text);
    m
}

/// The payload of a chunked body (the TLS client reads bodies raw), or
/// `None` when it is not well framed.
fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = common::find(b, b"\r\n")?;
        let size = std::str::from_utf8(&b[..eol]).ok()?.split(';').next()?;
        let n = usize::from_str_radix(size.trim(), 16).ok()?;
        b = &b[eol + 2..];
        if n == 0 {
            return Some(out);
        }
        out.extend_from_slice(b.get(..n)?);
        b = b.get(n + 2..)?;
    }
}

/// One difference: request line, what, nginx's and porter's values.
struct Diff {
    req: String,
    what: String,
    nginx: String,
    porter: String,
}

fn short(s: &str) -> String {
    let s = s.escape_debug().to_string();
    if s.chars().count() > if survey() { 600 } else { 160 } {
        format!(
            "{}... ({} bytes)",
            s.chars().take(160).collect::<String>(),
            s.len()
        )
    } else {
        s
    }
}

fn differences(
    req: &str,
    nginx: &BTreeMap<String, String>,
    porter: &BTreeMap<String, String>,
) -> Vec<Diff> {
    let keys: std::collections::BTreeSet<&String> = nginx.keys().chain(porter.keys()).collect();
    let none = String::from("(absent)");
    keys.into_iter()
        .filter(|k| nginx.get(*k) != porter.get(*k))
        .map(|k| Diff {
            req: req.to_string(),
            what: k.clone(),
            nginx: short(nginx.get(k).unwrap_or(&none)),
            porter: short(porter.get(k).unwrap_or(&none)),
        })
        .collect()
}

// ---------------------------------------------------------------------------
// The run.

/// The leaf every TLS config serves: all the names the requests use.
fn leaf(ca: &Ca) -> common::tls::Leaf {
    let names = [
        "localhost",
        "example.com",
        "www.example.com",
        "spa.example.com",
        "secure.server.localhost",
        "www.secure.server.localhost",
    ];
    ca.leaf(&names, Alg::Ecdsa)
}

/// Checks the differences against `expected-differences.txt`.
fn check_expected(name: &str, diffs: &[Diff]) {
    let docs =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/differences.md"))
            .unwrap();
    let mut expected = BTreeMap::new();
    for l in lines_of(name, "expected-differences.txt") {
        let f: Vec<&str> = l.split(" :: ").collect();
        assert_eq!(
            f.len(),
            3,
            "{name}/expected-differences.txt: want `REQUEST :: WHAT :: REASON`: {l}"
        );
        assert!(
            docs.contains(f[2]),
            "{name}: reason not in docs/differences.md: {}",
            f[2]
        );
        expected.insert((f[0].to_string(), f[1].to_string()), false);
    }
    let mut report = String::new();
    for d in diffs {
        match expected.get_mut(&(d.req.clone(), d.what.clone())) {
            Some(seen) => *seen = true,
            None => report.push_str(&format!(
                "  {} :: {}\n    nginx:  {}\n    porter: {}\n",
                d.req, d.what, d.nginx, d.porter
            )),
        }
    }
    for ((req, what), seen) in &expected {
        if !seen {
            report.push_str(&format!(
                "  listed but gone (delete the line): {req} :: {what}\n"
            ));
        }
    }
    assert!(
        report.is_empty(),
        "{name}: porter and nginx answer differently:\n{report}"
    );
}

/// Loads config `name` in both servers, asks its requests, compares.
fn run_config(name: &str) {
    let survey = survey();
    let ca = Ca::new();
    let leaf = leaf(&ca);
    let www_dir = TempDir::new(&format!("corpus-www-{name}"));
    copy_www(&corpus_dir(name).join("www"), www_dir.path());
    let mut shared = shared_ports(name);
    start_backends(&mut shared);
    let fpm = lines_of(name, "setup.txt")
        .iter()
        .any(|l| l == "fpm")
        .then(common::php::Fpm::start);
    let porter_tree = make_tree(name, www_dir.path(), &shared, &leaf, fpm.as_ref());
    let have_nginx = Path::new(NGINX).exists();
    let porter_t = test_config(BIN, &porter_tree);
    if survey {
        for r in survey_rejections(&porter_tree) {
            println!("SURVEY {name}: rejected {r}");
        }
    } else if check_blocked(name, &porter_t) {
        if have_nginx {
            let nginx_tree = make_tree(name, www_dir.path(), &shared, &leaf, fpm.as_ref());
            assert_eq!(test_config(NGINX, &nginx_tree), Ok(()), "{name}: nginx -t");
        }
        eprintln!(
            "{name}: blocked (tests/configs/{name}/blocked.txt); porter -t still fails as listed"
        );
        return;
    }
    if !have_nginx {
        eprintln!("{name}: {NGINX} not installed; comparison with nginx skipped");
        return;
    }
    let nginx_tree = make_tree(name, www_dir.path(), &shared, &leaf, fpm.as_ref());
    assert_eq!(test_config(NGINX, &nginx_tree), Ok(()), "{name}: nginx -t");
    // Debian's nginx keeps its temp files under /var/lib/nginx, which its
    // package gives to www-data; nginx runs as root in other tests leave
    // root-owned directories there that a www-data worker cannot write.
    let _ = Command::new("chown")
        .args(["-R", "www-data", "/var/lib/nginx"])
        .status();
    let nginx = start(NGINX, &nginx_tree);
    let porter = start(BIN, &porter_tree);
    let mut diffs = Vec::new();
    for line in lines_of(name, "requests.txt") {
        let r = parse_request(&line);
        let a = normalise(&send(&r, &nginx_tree.ports, &ca), &nginx_tree.ports);
        let b = normalise(&send(&r, &porter_tree.ports, &ca), &porter_tree.ports);
        diffs.extend(differences(&line, &a, &b));
    }
    drop((nginx, porter));
    if survey {
        for (who, t) in [("nginx", &nginx_tree), ("porter", &porter_tree)] {
            let log = std::fs::read_to_string(t.prefix.path().join("log/error.log"));
            for l in log
                .unwrap_or_default()
                .lines()
                .filter(|l| !l.contains("[notice]"))
                .take(10)
            {
                println!("SURVEY {name}: {who} error.log: {l}");
            }
        }
        for d in &diffs {
            println!(
                "SURVEY {name}: differs {} :: {}\n    nginx:  {}\n    porter: {}",
                d.req, d.what, d.nginx, d.porter
            );
        }
        return;
    }
    check_expected(name, &diffs);
}

#[test]
fn debian() {
    run_config("debian");
}

#[test]
fn h5bp() {
    run_config("h5bp");
}

#[test]
fn mozilla_intermediate() {
    run_config("mozilla-intermediate");
}

#[test]
fn mozilla_modern() {
    run_config("mozilla-modern");
}

#[test]
fn own_websocket() {
    run_config("own-websocket");
}

#[test]
fn own_spa_tls() {
    run_config("own-spa-tls");
}

#[test]
fn own_load_balancer() {
    run_config("own-load-balancer");
}

#[test]
fn own_slice_cache() {
    run_config("own-slice-cache");
}

#[test]
fn nginxconfig_wordpress() {
    run_config("nginxconfig-wordpress");
}

#[test]
fn nginxconfig_django() {
    run_config("nginxconfig-django");
}

#[test]
fn nginxconfig_nodejs() {
    run_config("nginxconfig-nodejs");
}

/// Every directory of the corpus has a test above, a licence and requests.
#[test]
fn corpus_complete() {
    let src = include_str!("config_corpus.rs");
    for e in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/configs"))
        .unwrap()
        .flatten()
    {
        if !e.file_type().unwrap().is_dir() {
            continue;
        }
        let name = e.file_name().into_string().unwrap();
        assert!(
            src.contains(&format!("run_config(\"{name}\")")),
            "tests/configs/{name} has no test"
        );
        assert!(
            !lines_of(&name, "requests.txt").is_empty(),
            "{name}: no requests.txt"
        );
        let licensed = std::fs::read_dir(e.path()).unwrap().flatten().any(|f| {
            let n = f.file_name().into_string().unwrap();
            n.starts_with("LICENSE") || n == "COPYING"
        });
        assert!(
            licensed,
            "tests/configs/{name}: no LICENSE file beside the config"
        );
    }
}
