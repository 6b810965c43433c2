//! Shared helpers for integration tests: start the real `porter` binary on
//! a free loopback port with a config written to a temporary prefix, and
//! speak raw HTTP/1.1 to it.

#![allow(dead_code)]

pub mod apps;
pub mod beside;
pub mod blkio;
pub mod cache;
pub mod differential;
pub mod dns;
pub mod h2client;
pub mod h3client;
pub mod h3raw;
pub mod metrics;
pub mod origin;
pub mod php;
pub mod slowfs;
pub mod stream_beside;
pub mod tls;

/// Held by each test that saturates a disk or times requests against one
/// (`disk_queue`, `miss_scheduling`, `readahead`, `slow_disk`): they share
/// the `area_disk` binary, and two at once would disturb each other's
/// figures.
pub static DISK_SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_porter");

/// A file of Debian's `/etc/nginx` as kept in the corpus (`fastcgi.conf`,
/// `uwsgi_params`, `scgi_params`; BSD-2-Clause, see `LICENSE-copyright`
/// there); `""` for the folder.
pub fn debian_etc(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/configs/debian/etc")
        .join(file)
}

/// A helper program or fixture kept beside this library in `tests/common/`
/// (the Python servers and clients, the PHP app, keys, cache entries).
pub fn support(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/common")
        .join(file)
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A temporary directory (mode 0755, so an unprivileged worker user can
/// read it), removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// Creates a fresh directory under the system temp dir.
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "porter-{tag}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        set_mode(&p, 0o755);
        TempDir(p)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `rel` (creating parents) with `data`.
    pub fn write(&self, rel: &str, data: impl AsRef<[u8]>) -> PathBuf {
        let p = self.0.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&p, data).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A tmpfs of `size` (`256k`, `1m`) mounted on `dir` (created), lazily
/// unmounted on drop; `None` where this process may not mount (not root),
/// for the test to say it skips.
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts it.
    pub fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
            .then(|| Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// The scheduling policy (`SCHED_OTHER` 0, `SCHED_BATCH` 3, `SCHED_IDLE`
/// 5) of each thread of process `pid` whose name starts with `prefix`.
pub fn thread_policies(pid: u32, prefix: &str) -> Vec<i64> {
    thread_stat_field(pid, prefix, 41)
}

/// Field `n` (1-based, as in proc(5): 19 is the nice value, 41 the
/// policy) of `/proc/PID/task/*/stat` for each thread of process `pid`
/// whose name starts with `prefix`.
pub fn thread_stat_field(pid: u32, prefix: &str, n: usize) -> Vec<i64> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in dir.flatten() {
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
            continue;
        };
        let Some((name, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let name = name.split_once('(').map_or("", |n| n.1);
        if name.starts_with(prefix) {
            // `rest` starts with field 3, the state.
            out.push(rest.split(' ').nth(n - 3).unwrap().parse().unwrap());
        }
    }
    out
}

/// The resident memory of process `pid`, KiB (0 when it cannot be read).
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}

/// An error-log line's text after its level (`[error] `), without what
/// differs between runs: the `pid#tid: ` and the `*connection ` number.
pub fn log_message(after_level: &str) -> &str {
    let m = after_level.split_once(": ").map_or(after_level, |(_, m)| m);
    m.split_once(' ')
        .filter(|(c, _)| c.starts_with('*'))
        .map_or(m, |(_, r)| r)
}

/// chmod.
pub fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A loopback port, free for TCP and UDP a moment ago, that no other call
/// in this process has returned.
///
/// The ports come from 20000-31999, below the kernel's ephemeral range
/// (32768-60999): a port taken from `bind(":0")` and closed again is soon
/// handed out once more, to another test's `bind(":0")` or as the local
/// port of an outgoing connection, and porter's later `bind()` then failed
/// with "Address already in use" (seen in CI). Here the kernel never hands
/// these out by itself, a counter keeps this process's tests apart, and
/// the start depends on the pid so two test processes rarely meet.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 20000;
    const SPAN: u32 = 12000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let _ = NEXT.compare_exchange(
        u32::MAX,
        std::process::id().wrapping_mul(7919) % SPAN,
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
    for _ in 0..SPAN {
        let port = (FIRST + NEXT.fetch_add(1, Ordering::SeqCst) % SPAN) as u16;
        let tcp = TcpListener::bind(("127.0.0.1", port));
        let udp = std::net::UdpSocket::bind(("127.0.0.1", port));
        if tcp.is_ok() && udp.is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {FIRST}-{}", FIRST + SPAN - 1);
}

/// Waits until something accepts on `port`.
pub fn wait_port(port: u16, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// A running porter.
pub struct Server {
    /// The child process.
    pub child: Child,
    /// The port it listens on.
    pub port: u16,
    /// The prefix directory (config, logs, pid).
    pub prefix: TempDir,
}

/// Config text with `{PORT}` and `{PREFIX}` substituted; `daemon off`,
/// a pid file, and error/access logs in the prefix unless the body sets them.
pub fn config_text(body: &str, port: u16, prefix: &Path) -> String {
    body.replace("{PORT}", &port.to_string())
        .replace("{PREFIX}", prefix.to_str().unwrap())
}

/// The `pid` file a config names, if any.
fn pid_file(conf: &str) -> Option<PathBuf> {
    conf.split([';', '{', '}'])
        .find_map(|d| d.trim().strip_prefix("pid "))
        .map(|p| PathBuf::from(p.trim()))
}

impl Server {
    /// Starts porter with `conf` (a full config with `{PORT}`/`{PREFIX}`
    /// placeholders) and waits for it to listen.
    pub fn start(conf: &str) -> Server {
        Self::start_in(TempDir::new("srv"), conf, &[])
    }

    /// Starts porter in an existing prefix with extra arguments.
    pub fn start_in(prefix: TempDir, conf: &str, extra: &[&str]) -> Server {
        Self::start_with(prefix, conf, extra, |_| {})
    }

    /// [`Server::start_in`], with `setup` applied to the command first
    /// (such as a `pre_exec` hook).
    pub fn start_with(
        prefix: TempDir,
        conf: &str,
        extra: &[&str],
        setup: impl FnOnce(&mut Command),
    ) -> Server {
        let port = free_port();
        std::fs::create_dir_all(prefix.path().join("logs")).unwrap();
        let text = config_text(conf, port, prefix.path());
        prefix.write("porter.conf", &text);
        let mut cmd = Command::new(BIN);
        cmd.arg("-p")
            .arg(prefix.path())
            .arg("-c")
            .arg("porter.conf")
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        setup(&mut cmd);
        let child = cmd.spawn().unwrap();
        let mut s = Server {
            child,
            port,
            prefix,
        };
        if !wait_port(port, Duration::from_secs(10)) {
            let _ = s.child.kill();
            let out = s.child.wait_with_output_ref();
            panic!("porter did not start listening: {out}");
        }
        // The master binds before it installs its signal handlers and
        // writes the pid file; a test that signals it or reads the pid file
        // must wait for the latter.
        if let Some(pid) = pid_file(&text).map(|p| s.prefix.path().join(p)) {
            let deadline = Instant::now() + Duration::from_secs(10);
            while std::fs::read_to_string(&pid).map_or(true, |t| !t.ends_with('\n'))
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        s
    }

    /// Sends a signal to the server.
    pub fn signal(&self, sig: i32) {
        unsafe { libc_kill(self.child.id() as i32, sig) };
    }

    /// Waits for the process to exit (with a timeout) and returns its status.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(st)) = self.child.try_wait() {
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Contents of a file in the prefix (e.g. `logs/error.log`).
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.prefix.path().join(rel)).unwrap_or_default()
    }

    /// Polls `logs/<name>` until it contains `needle`.
    pub fn wait_log(&self, rel: &str, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let s = self.read(rel);
            if s.contains(needle) || Instant::now() >= deadline {
                return s;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

trait OutputRef {
    fn wait_with_output_ref(&mut self) -> String;
}

impl OutputRef for Child {
    fn wait_with_output_ref(&mut self) -> String {
        let _ = self.wait();
        let mut s = String::new();
        if let Some(e) = self.stderr.as_mut() {
            let _ = e.read_to_string(&mut s);
        }
        s
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        stop_child(&mut self.child, 15);
    }
}

/// Waits up to `timeout` for `child` to exit; true if it did.
pub fn wait_child(child: &mut Child, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return true,
            Ok(None) if Instant::now() > deadline => return false,
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Stops a child process by its PID: `sig` (SIGTERM 15, or php-fpm's
/// graceful SIGQUIT 3), five seconds to exit, then SIGKILL.
pub fn stop_child(child: &mut Child, sig: i32) {
    if let Ok(None) = child.try_wait() {
        unsafe { libc_kill(child.id() as i32, sig) };
        if !wait_child(child, Duration::from_secs(5)) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

/// Debian's nginx, for tests that compare porter with it.
pub const NGINX: &str = "/usr/sbin/nginx";

/// Debian's nginx on a free loopback port, in its own prefix (pid, logs and
/// temp paths there), stopped by PID on drop (SIGTERM, then SIGKILL).
pub struct Nginx {
    /// The nginx master process.
    pub child: Child,
    /// The port `{PORT}` was replaced with.
    pub port: u16,
    prefix: TempDir,
}

impl Nginx {
    /// Starts nginx with `http_body` inside `http { }` (`{PORT}` and
    /// `{PREFIX}` substituted) and waits for it to listen; `None` when
    /// nginx is not installed (the caller says it skips).
    pub fn start(http_body: &str) -> Option<Nginx> {
        if !Path::new(NGINX).exists() {
            return None;
        }
        let prefix = TempDir::new("nginx");
        std::fs::create_dir_all(prefix.path().join("logs")).unwrap();
        let port = free_port();
        let p = prefix.path().display().to_string();
        let text = format!(
            "worker_processes 1;\npid {p}/nginx.pid;\nerror_log {p}/logs/error.log info;\n\
             events {{ worker_connections 256; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path {p}/cb;\n  proxy_temp_path {p}/pt;\n\
             \x20 fastcgi_temp_path {p}/ft;\n  uwsgi_temp_path {p}/ut;\n  scgi_temp_path {p}/st;\n\
             {}\n}}\n",
            config_text(http_body, port, prefix.path())
        );
        let conf = prefix.write("nginx.conf", text);
        let child = Command::new(NGINX)
            .arg("-p")
            .arg(prefix.path())
            .arg("-e")
            .arg(prefix.path().join("logs/error.log"))
            .arg("-c")
            .arg(&conf)
            .arg("-g")
            .arg("daemon off;")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let n = Nginx {
            child,
            port,
            prefix,
        };
        assert!(
            wait_port(port, Duration::from_secs(10)),
            "nginx did not start: {}",
            std::fs::read_to_string(n.prefix.path().join("logs/error.log")).unwrap_or_default()
        );
        Some(n)
    }

    /// Its error log so far.
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.prefix.path().join("logs/error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        stop_child(&mut self.child, 15);
    }
}

/// porter, and nginx when installed, on the same settings: `http_extra`
/// at the `http` level and one server on `{PORT}` named `localhost`
/// around `server_body`.
pub fn both(http_extra: &str, server_body: &str) -> (Server, Option<Nginx>) {
    let p = Server::start(&one_server_conf(http_extra, server_body));
    let n = Nginx::start(&format!(
        "{http_extra}\nserver {{\n    listen 127.0.0.1:{{PORT}};\n    server_name localhost;\n{server_body}\n}}\n"
    ));
    if n.is_none() {
        eprintln!("nginx not installed: comparing with porter's expected answers only");
    }
    (p, n)
}

/// Runs porter with `args` to completion.
pub fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

/// A parsed response.
#[derive(Debug, Clone)]
pub struct Resp {
    /// Status code.
    pub status: u16,
    /// Status line.
    pub status_line: String,
    /// Headers in order.
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: Vec<u8>,
}

impl Resp {
    /// First value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        header_in(&self.headers, name)
    }

    /// Body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Reads one response from `s` (a chunked body decoded); `head_only` for
/// responses to HEAD. An interim (1xx) response has no body: the final
/// one is the next read.
pub fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>, head_only: bool) -> Option<Resp> {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let (status_line, headers) = read_head(s, buf)?;
    let status: u16 = status_line.split(' ').nth(1)?.parse().ok()?;
    let field = |name: &str| header_in(&headers, name);
    let chunked = field("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    let len = field("content-length").and_then(|v| v.parse::<usize>().ok());
    let body = if head_only || status == 304 || status == 204 || (100..200).contains(&status) {
        Vec::new()
    } else if chunked {
        read_chunked(s, buf)?
    } else if let Some(len) = len {
        read_len(s, buf, len)?
    } else {
        // Until close.
        let _ = s.read_to_end(buf);
        std::mem::take(buf)
    };
    Some(Resp {
        status,
        status_line,
        headers,
        body,
    })
}

/// First value of header `name` (case-insensitive) among `headers`.
pub fn header_in<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// Reads more of `s` into `buf`; `None` at end of stream or on error.
///
/// `EINTR` is retried: with a read timeout set (`SO_RCVTIMEO`) the kernel
/// does not restart a blocking `recv` after a signal, and a test process
/// that dropped an io_uring (`aio_on.rs` probes for one) gets the ring's
/// teardown notice as one, some 20 % of the time.
pub fn fill(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<()> {
    let mut tmp = [0u8; 65536];
    let n = loop {
        match s.read(&mut tmp) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => break r.ok()?,
        }
    };
    if n == 0 {
        return None;
    }
    buf.extend_from_slice(&tmp[..n]);
    Some(())
}

/// Reads an HTTP/1.1 head (request or status line, then header fields)
/// from `buf` and `s`, leaving what follows it in `buf`.
pub fn read_head(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(String, Vec<(String, String)>)> {
    let end = loop {
        if let Some(i) = find(buf, b"\r\n\r\n") {
            break i + 4;
        }
        fill(s, buf)?;
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    buf.drain(..end);
    let mut lines = head.split("\r\n");
    let first = lines.next()?.to_string();
    let headers = lines
        .filter(|l| !l.is_empty())
        .filter_map(|l| {
            l.split_once(": ")
                .map(|(a, b)| (a.to_string(), b.to_string()))
        })
        .collect();
    Some((first, headers))
}

/// The next `len` bytes of the body.
pub fn read_len(s: &mut TcpStream, buf: &mut Vec<u8>, len: usize) -> Option<Vec<u8>> {
    while buf.len() < len {
        fill(s, buf)?;
    }
    Some(buf.drain(..len).collect())
}

/// A chunked body, decoded (chunk extensions and trailers dropped).
pub fn read_chunked(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    let line = |s: &mut TcpStream, buf: &mut Vec<u8>| -> Option<String> {
        let end = loop {
            if let Some(i) = find(buf, b"\r\n") {
                break i;
            }
            fill(s, buf)?;
        };
        let l = String::from_utf8_lossy(&buf[..end]).into_owned();
        buf.drain(..end + 2);
        Some(l)
    };
    let mut body = Vec::new();
    loop {
        let size_line = line(s, buf)?;
        let size = usize::from_str_radix(size_line.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            // trailer lines up to the empty one
            while !line(s, buf)?.is_empty() {}
            return Some(body);
        }
        body.extend(read_len(s, buf, size + 2)?.drain(..size));
    }
}

/// Where `n` first occurs in `h`.
pub fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

/// Sends raw bytes on a new connection and reads one response.
pub fn raw(port: u16, req: &[u8]) -> Resp {
    try_raw(port, req).expect("no response")
}

/// Like [`raw`], `None` when the server closes without answering.
pub fn try_raw(port: u16, req: &[u8]) -> Option<Resp> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(req).unwrap();
    let head_only = req.starts_with(b"HEAD ");
    let mut buf = Vec::new();
    read_response(&mut s, &mut buf, head_only)
}

/// GET `path` with Host `localhost` and `Connection: close`.
pub fn get(port: u16, path: &str) -> Resp {
    raw(
        port,
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

/// GET with extra header lines (each ending in `\r\n`).
pub fn get_with(port: u16, path: &str, headers: &str) -> Resp {
    raw(
        port,
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{headers}\r\n")
            .as_bytes(),
    )
}

/// Reads everything until the peer closes (or 5 s pass).
pub fn read_all(s: &mut TcpStream) -> Vec<u8> {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut v = Vec::new();
    let _ = s.read_to_end(&mut v);
    v
}

/// A config of one worker, without an access log, around an `http { }`
/// body (the one the tests that compare with nginx also give nginx).
pub fn one_worker_conf(http_body: &str) -> String {
    format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\nevents {{ worker_connections 256; }}\n\
         http {{\n  access_log off;\n{http_body}\n}}\n"
    )
}

/// [`one_worker_conf`] with one server on `{PORT}` named `localhost`:
/// `http_extra` at the `http` level, `server_body` inside the server.
pub fn one_server_conf(http_extra: &str, server_body: &str) -> String {
    one_worker_conf(&format!(
        "{http_extra}\n  server {{\n    listen 127.0.0.1:{{PORT}};\n    \
         server_name localhost;\n{server_body}\n  }}"
    ))
}

/// `porter -t` on `conf` (its `{PREFIX}` a new directory with `logs/`):
/// fails the test when the config is accepted, else returns what porter
/// printed on stderr.
pub fn config_error(conf: &str) -> String {
    let dir = TempDir::new("conferr");
    std::fs::create_dir_all(dir.path().join("logs")).unwrap();
    let p = dir.write(
        "porter.conf",
        conf.replace("{PREFIX}", dir.path().to_str().unwrap()),
    );
    let out = run(&["-t", "-c", p.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "config accepted: {conf}\n{err}");
    err
}

/// A minimal config around a `server { }` body, with logs in the prefix.
pub fn http_conf(server_body: &str) -> String {
    format!(
        "daemon off;\nworker_processes 2;\npid {{PREFIX}}/porter.pid;\nerror_log {{PREFIX}}/logs/error.log info;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n  include mime.types;\n  default_type application/octet-stream;\n  access_log {{PREFIX}}/logs/access.log;\n\
           server {{\n    listen 127.0.0.1:{{PORT}};\n{server_body}\n  }}\n}}\n"
    )
}
