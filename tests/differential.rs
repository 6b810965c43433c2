//! Differential test: porter and Debian's nginx serve the same docroot with
//! equivalent configurations and answer the same corpus of raw requests;
//! every response must agree (status line, the headers that matter, body),
//! after normalising what legitimately differs (the `Server` header and
//! `Date`, the product/version string in built-in pages, the listening port
//! in `Location`, multipart boundaries). Deliberate differences (porter is
//! stricter on some malformed input) are listed in the corpus as
//! `Expect::PorterStricter` with a reason, and in `docs/differences.md`.
//!
//! Skips itself (saying so) when `/usr/sbin/nginx` is not installed.
//!
//! Run: `cargo test --release --test differential -- --nocapture`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const NGINX: &str = "/usr/sbin/nginx";
const PORTER: &str = env!("CARGO_BIN_EXE_porter");
const PORTER_VERSION: &str = concat!("porter/", env!("CARGO_PKG_VERSION"));
/// nginx's version string when `nginx -v` cannot be parsed.
const NGINX_VERSION_FALLBACK: &str = "nginx/1.22.1";

/// The fixed mtime of every file: Sun, 13 Sep 2020 12:26:40 GMT.
const MTIME: u64 = 1_600_000_000;
const LAST_MODIFIED: &str = "Sun, 13 Sep 2020 12:26:40 GMT";
const EARLIER: &str = "Sat, 12 Sep 2020 12:26:40 GMT";
const LATER: &str = "Mon, 14 Sep 2020 12:26:40 GMT";

/// Placeholders that normalised responses use.
const VERSION_PH: &str = "<SERVER/VERSION>";
const PORT_PH: &str = ":<PORT>";
const BOUNDARY_PH: &str = "<BOUNDARY>";

/// Headers compared when present in either response (lowercase); every
/// `x-*` header (the add_header'd ones) is compared too.
const COMPARED: &[&str] = &[
    "content-type",
    "content-length",
    "last-modified",
    "etag",
    "accept-ranges",
    "location",
    "content-range",
    "connection",
    "keep-alive",
    "transfer-encoding",
    "allow",
];

// ---------------------------------------------------------------------------
// Temporary directories and processes.

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A temporary directory (mode 0755), removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "porter-diff-{tag}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        mkdir(&p);
        TempDir(p)
    }

    fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `rel` (mode 0644, parents 0755) with the fixed mtime.
    fn file(&self, rel: &str, data: impl AsRef<[u8]>) {
        let p = self.0.join(rel);
        mkdir(p.parent().unwrap());
        std::fs::write(&p, data).unwrap();
        chmod(&p, 0o644);
        let f = std::fs::File::options().write(true).open(&p).unwrap();
        f.set_modified(UNIX_EPOCH + Duration::from_secs(MTIME))
            .unwrap();
    }

    /// Creates directory `rel` (mode 0755).
    fn dir(&self, rel: &str) {
        mkdir(&self.0.join(rel));
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `mkdir -p` with mode 0755 on every directory created.
fn mkdir(p: &Path) {
    if p.is_dir() {
        return;
    }
    if let Some(parent) = p.parent() {
        mkdir(parent);
    }
    std::fs::create_dir(p).unwrap();
    chmod(p, 0o755);
}

fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A loopback port that was free a moment ago.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running server; stopped by PID (SIGTERM, then SIGKILL) on drop, so a
/// failing assertion still cleans up. nginx's master stops its workers on
/// SIGTERM.
struct Proc {
    name: &'static str,
    child: Child,
    port: u16,
    /// Product/version string that appears in its built-in pages.
    version: String,
}

impl Proc {
    /// Starts `cmd` and waits until `port` accepts; panics with the error log.
    fn start(name: &'static str, mut cmd: Command, port: u16, version: String, log: &Path) -> Proc {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let mut p = Proc {
            name,
            child,
            port,
            version,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return p;
            }
            if let Ok(Some(st)) = p.child.try_wait() {
                panic!(
                    "{name} exited ({st}) before listening; error log:\n{}",
                    std::fs::read_to_string(log).unwrap_or_default()
                );
            }
            if Instant::now() > deadline {
                p.stop();
                panic!(
                    "{name} did not listen on port {port}; error log:\n{}",
                    std::fs::read_to_string(log).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: plain kill(2) on our own child's PID.
            unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            eprintln!("{} ignored SIGTERM; sending SIGKILL", self.name);
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}

// ---------------------------------------------------------------------------
// The docroot and the two configurations.

/// 100 KB of deterministic pseudo-random bytes.
fn binary_100k() -> Vec<u8> {
    let mut x: u32 = 0x1234_5678;
    (0..100 * 1024)
        .map(|_| {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (x >> 24) as u8
        })
        .collect()
}

fn make_docroot() -> TempDir {
    let d = TempDir::new("root");
    d.file("index.html", "<html><body>home</body></html>\n");
    d.file("custom404.html", "<p>custom not found page</p>\n");
    d.file("txt/a.txt", "abcdefghijklmnopqrstuvwxyz\n");
    d.file("txt/b.txt", "second text file\nwith two lines\n");
    d.file("one.txt", "x");
    d.file("empty.txt", "");
    d.file("bin/data.bin", binary_100k());
    d.file("files/style.css", "body { color: red; }\n");
    d.file("files/app.js", "console.log('hi');\n");
    d.file("files/data.json", "{\"a\": 1}\n");
    d.file("files/img.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR fake png");
    d.file("files/photo.jpg", b"\xff\xd8\xff\xe0\0\x10JFIF fake jpeg");
    d.file("files/anim.gif", "GIF89a fake gif");
    d.file("files/notes.txt", "plain notes\n");
    d.file("files/page.html", "<p>page</p>\n");
    d.file("files/feed.xml", "<?xml version=\"1.0\"?><feed/>\n");
    d.file(
        "files/logo.svg",
        "<svg xmlns=\"http://www.w3.org/2000/svg\"/>\n",
    );
    d.file("files/doc.pdf", "%PDF-1.4 fake\n");
    d.file("files/thing.unknownext", "unknown extension\n");
    d.file("files/UPPERCASE.TXT", "upper case extension\n");
    d.file("files/noext", "no extension\n");
    d.file("sub/index.html", "<p>sub index</p>\n");
    d.file("sub/page.html", "<p>sub page</p>\n");
    d.file("noindex/file.txt", "in a directory without index\n");
    d.file("space name.txt", "file with a space\n");
    d.file("nested/a/index.html", "<p>nested a index</p>\n");
    d.file("nested/a/b/c/deep.txt", "deep file\n");
    d.file("static/s.css", "p { margin: 0; }\n");
    d.file("static/sdir/index.html", "<p>static sdir</p>\n");
    d.file("ranges/r.txt", "0123456789abcdefghij\n");
    d.file("noetag/n.txt", "no etag here\n");
    d.file("ims/i.txt", "if_modified_since before\n");
    d.file("tf/t.txt", "try_files target\n");
    d.file("tf/dir/index.html", "<p>tf dir index</p>\n");
    d.dir("tf/nodir");
    d.file("e200/real.txt", "real file under e200\n");
    d
}

/// The `http { }` body shared by both servers; `{MIME}`, `{PORT}`,
/// `{ROOT}` and `{PREFIX}` are substituted per server.
const HTTP_BODY: &str = r#"
    include {MIME};
    default_type application/octet-stream;
    access_log {PREFIX}/logs/access.log;
    sendfile on;
    keepalive_timeout 30 25;
    keepalive_requests 3;

    server {
        listen 127.0.0.1:{PORT};
        server_name localhost;
        root {ROOT};
        index index.html;
        add_header X-Srv srv;
        add_header X-Srv-Always yes always;

        location / {
            error_page 404 /custom404.html;
        }
        location = /exact {
            return 200 "exact $uri $arg_x\n";
        }
        location = /ret.json {
            return 200 "json $arg_x\n";
        }
        location ^~ /static/ {
            add_header X-Static yes;
            add_header X-Static-Always yes always;
        }
        location /aliased/ {
            alias {ROOT}/sub/;
        }
        location = /moved {
            return 301 /index.html;
        }
        location = /found {
            return 302 /txt/a.txt;
        }
        location = /gone {
            return 404;
        }
        location /tf/ {
            try_files $uri $uri/ =404;
        }
        location /ranges/ {
            max_ranges 1;
        }
        location /noetag/ {
            etag off;
        }
        location /ims/ {
            if_modified_since before;
        }
        location /e200/ {
            error_page 404 =200 /custom404.html;
        }
    }
"#;

fn nginx_conf(prefix: &Path, root: &Path, port: u16) -> String {
    let p = prefix.display();
    let body = HTTP_BODY
        .replace("{MIME}", "/etc/nginx/mime.types")
        .replace("{PORT}", &port.to_string())
        .replace("{ROOT}", &root.display().to_string())
        .replace("{PREFIX}", &p.to_string());
    // daemon off comes from -g; workers run as nginx's default user
    // (nobody), which can read the 0755/0644 docroot.
    format!(
        "worker_processes 1;\npid {p}/nginx.pid;\nerror_log {p}/logs/error.log info;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n    client_body_temp_path {p}/client_body;\n{body}}}\n"
    )
}

fn porter_conf(prefix: &Path, root: &Path, port: u16) -> String {
    let p = prefix.display();
    let body = HTTP_BODY
        .replace("{MIME}", "mime.types")
        .replace("{PORT}", &port.to_string())
        .replace("{ROOT}", &root.display().to_string())
        .replace("{PREFIX}", &p.to_string());
    // Workers drop to nobody (porter's default when root), like nginx's.
    format!(
        "daemon off;\nworker_processes 1;\npid {p}/porter.pid;\nerror_log {p}/logs/error.log info;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n{body}}}\n"
    )
}

/// "nginx/1.22.1" from `nginx -v`.
fn nginx_version() -> String {
    Command::new(NGINX)
        .arg("-v")
        .output()
        .ok()
        .and_then(|o| {
            let s = String::from_utf8_lossy(&o.stderr).into_owned();
            s.split_whitespace()
                .find(|w| w.starts_with("nginx/"))
                .map(str::to_string)
        })
        .unwrap_or_else(|| NGINX_VERSION_FALLBACK.to_string())
}

// ---------------------------------------------------------------------------
// Raw HTTP exchange.

#[derive(Debug, Clone)]
struct Resp {
    status_line: String,
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// The request was HEAD (no body read).
    head_only: bool,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What one connection produced: the responses, and how it ended.
#[derive(Debug, Clone)]
struct Exchange {
    resps: Vec<Resp>,
    end: String,
}

struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
    eof: bool,
    end: String,
}

impl Conn {
    /// Reads more; false at EOF, error or timeout.
    fn fill(&mut self) -> bool {
        if self.eof {
            return false;
        }
        let mut tmp = [0u8; 65536];
        match self.s.read(&mut tmp) {
            Ok(0) => {
                self.eof = true;
                self.end = "closed".into();
                false
            }
            Ok(n) => {
                self.buf.extend_from_slice(&tmp[..n]);
                true
            }
            Err(e) => {
                self.eof = true;
                self.end = format!("read error: {e}");
                false
            }
        }
    }

    fn read_to_end(&mut self) -> Vec<u8> {
        while self.fill() {}
        std::mem::take(&mut self.buf)
    }

    fn read_exact_len(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n && self.fill() {}
        let n = n.min(self.buf.len());
        self.buf.drain(..n).collect()
    }

    fn read_line(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some(i) = find(&self.buf, b"\r\n") {
                let line = self.buf[..i].to_vec();
                self.buf.drain(..i + 2);
                return Some(line);
            }
            if !self.fill() {
                return None;
            }
        }
    }

    /// Reads one response; None when nothing (more) arrives.
    fn response(&mut self, head_only: bool) -> Option<Resp> {
        while self.buf.is_empty() {
            if !self.fill() {
                return None;
            }
        }
        while self.buf.len() < 5 && self.fill() {}
        if !self.buf.starts_with(b"HTTP/") {
            // An HTTP/0.9 response: the body only, until close.
            let body = self.read_to_end();
            return Some(Resp {
                status_line: "(HTTP/0.9 response: no status line)".into(),
                status: 0,
                headers: Vec::new(),
                body,
                head_only,
            });
        }
        let head_end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i + 4;
            }
            if !self.fill() {
                let partial = String::from_utf8_lossy(&self.buf).into_owned();
                self.buf.clear();
                return Some(Resp {
                    status_line: format!("(incomplete head: {partial:?})"),
                    status: 0,
                    headers: Vec::new(),
                    body: Vec::new(),
                    head_only,
                });
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..head_end]).into_owned();
        self.buf.drain(..head_end);
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or_default().to_string();
        let status = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let headers: Vec<(String, String)> = lines
            .filter(|l| !l.is_empty())
            .map(|l| match l.split_once(':') {
                Some((a, b)) => (a.to_string(), b.trim().to_string()),
                None => (l.to_string(), String::new()),
            })
            .collect();
        let mut r = Resp {
            status_line,
            status,
            headers,
            body: Vec::new(),
            head_only,
        };
        if head_only || status == 304 || status == 204 || (100..200).contains(&status) {
            return Some(r);
        }
        let chunked = r
            .header("transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
        let len = r.header("content-length").and_then(|v| v.parse().ok());
        if chunked {
            while let Some(line) = self.read_line() {
                let line = String::from_utf8_lossy(&line).into_owned();
                let size = line.split(';').next().unwrap_or("").trim();
                let n = usize::from_str_radix(size, 16).unwrap_or(0);
                if n == 0 {
                    // Trailers until the empty line.
                    while let Some(l) = self.read_line() {
                        if l.is_empty() {
                            break;
                        }
                    }
                    break;
                }
                let data = self.read_exact_len(n);
                r.body.extend_from_slice(&data);
                let _ = self.read_line();
            }
        } else if let Some(n) = len {
            r.body = self.read_exact_len(n);
        } else {
            r.body = self.read_to_end();
        }
        Some(r)
    }
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

/// Sends all requests of `case` in one write on a new connection and reads
/// up to one response per request.
fn exchange(port: u16, reqs: &[Vec<u8>]) -> Exchange {
    let s = match TcpStream::connect(("127.0.0.1", port)) {
        Ok(s) => s,
        Err(e) => {
            return Exchange {
                resps: Vec::new(),
                end: format!("connect error: {e}"),
            }
        }
    };
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut c = Conn {
        s,
        buf: Vec::new(),
        eof: false,
        end: "open".into(),
    };
    let all: Vec<u8> = reqs.concat();
    if let Err(e) = c.s.write_all(&all) {
        c.end = format!("write error: {e}");
    }
    let mut resps = Vec::new();
    for r in reqs {
        match c.response(r.starts_with(b"HEAD ")) {
            Some(resp) => resps.push(resp),
            None => break,
        }
    }
    Exchange { resps, end: c.end }
}

// ---------------------------------------------------------------------------
// Normalisation and comparison.

/// A response reduced to what is compared.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Norm {
    status_line: String,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
    head_only: bool,
}

fn replace_bytes(h: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    if from.is_empty() {
        return h.to_vec();
    }
    let mut out = Vec::with_capacity(h.len());
    let mut i = 0;
    while i < h.len() {
        if h[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(h[i]);
            i += 1;
        }
    }
    out
}

fn normalise(r: &Resp, p: &Proc) -> Norm {
    let port = format!(":{}", p.port);
    let boundary = r
        .header("content-type")
        .and_then(|ct| ct.split_once("boundary="))
        .map(|(_, b)| b.trim_matches('"').to_string());
    let fix = |v: &[u8]| -> Vec<u8> {
        let mut v = replace_bytes(v, p.version.as_bytes(), VERSION_PH.as_bytes());
        v = replace_bytes(&v, port.as_bytes(), PORT_PH.as_bytes());
        if let Some(b) = &boundary {
            v = replace_bytes(&v, b.as_bytes(), BOUNDARY_PH.as_bytes());
        }
        v
    };
    let body = fix(&r.body);
    let mut headers = BTreeMap::new();
    for (n, v) in &r.headers {
        let n = n.to_ascii_lowercase();
        if !(COMPARED.contains(&n.as_str()) || n.starts_with("x-")) {
            continue;
        }
        let mut v = String::from_utf8_lossy(&fix(v.as_bytes())).into_owned();
        if n == "content-length" && !r.head_only && v.parse() == Ok(r.body.len()) {
            // The length of the normalised body (version strings and
            // boundaries differ in length between the servers).
            v = body.len().to_string();
        }
        headers
            .entry(n)
            .and_modify(|old: &mut String| {
                old.push('\n');
                old.push_str(&v)
            })
            .or_insert(v);
    }
    Norm {
        status_line: r.status_line.clone(),
        headers,
        body,
        head_only: r.head_only,
    }
}

/// Differences between two normalised responses, one line each.
fn diff(n: &Norm, p: &Norm, version_len_delta: i64) -> Vec<String> {
    let mut out = Vec::new();
    if n.status_line != p.status_line {
        out.push(format!(
            "status line: nginx {:?} / porter {:?}",
            n.status_line, p.status_line
        ));
    }
    let mut names: Vec<&String> = n.headers.keys().chain(p.headers.keys()).collect();
    names.sort();
    names.dedup();
    for name in names {
        let (a, b) = (n.headers.get(name), p.headers.get(name));
        if a == b {
            continue;
        }
        // A HEAD answer to a built-in page: its Content-Length may differ by
        // the difference in length of the two version strings.
        if name == "content-length" && n.head_only && version_len_delta != 0 {
            if let (Some(a), Some(b)) = (a, b) {
                let (a, b): (i64, i64) = (a.parse().unwrap_or(-1), b.parse().unwrap_or(-2));
                if b - a == version_len_delta {
                    continue;
                }
            }
        }
        out.push(format!("header {name}: nginx {a:?} / porter {b:?}"));
    }
    if n.body != p.body {
        out.push(format!(
            "body: nginx {} / porter {}",
            summary(&n.body),
            summary(&p.body)
        ));
    }
    out
}

/// Printable rendering of raw bytes, shortened.
fn escape(b: &[u8], max: usize) -> String {
    let mut s = String::new();
    for &c in b.iter().take(max) {
        match c {
            b'\r' => s.push_str("\\r"),
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(c as char),
            _ => {
                let _ = write!(s, "\\x{c:02x}");
            }
        }
    }
    if b.len() > max {
        let _ = write!(s, "...({} bytes)", b.len());
    }
    s
}

fn summary(b: &[u8]) -> String {
    format!("{} bytes \"{}\"", b.len(), escape(b, 120))
}

fn show_resp(r: &Resp) -> String {
    let mut s = format!("      {}\n", r.status_line);
    for (n, v) in &r.headers {
        let _ = writeln!(s, "      {n}: {v}");
    }
    let _ = writeln!(s, "      [body {}]", summary(&r.body));
    s
}

fn show_exchange(e: &Exchange) -> String {
    let mut s = String::new();
    for (i, r) in e.resps.iter().enumerate() {
        let _ = writeln!(s, "    response {}:", i + 1);
        s.push_str(&show_resp(r));
    }
    let _ = writeln!(s, "    ({} responses; connection {})", e.resps.len(), e.end);
    s
}

// ---------------------------------------------------------------------------
// The corpus.

enum Expect {
    /// Everything compared must agree.
    Same,
    /// porter deliberately refuses with `status` what nginx tolerates.
    PorterStricter { status: u16, reason: &'static str },
}

struct Case {
    name: String,
    reqs: Vec<Vec<u8>>,
    expect: Expect,
}

/// `METHOD target HTTP/1.1`, Host localhost, Connection: close, extra
/// header lines (each ending in CRLF).
fn req(method: &str, target: &str, extra: &str) -> Vec<u8> {
    format!("{method} {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{extra}\r\n")
        .into_bytes()
}

/// Like `req` without `Connection: close`.
fn req_ka(method: &str, target: &str, extra: &str) -> Vec<u8> {
    format!("{method} {target} HTTP/1.1\r\nHost: localhost\r\n{extra}\r\n").into_bytes()
}

fn etag_of(root: &Path, rel: &str) -> String {
    let len = std::fs::metadata(root.join(rel)).unwrap().len();
    format!("\"{MTIME:x}-{len:x}\"")
}

fn corpus(root: &Path) -> Vec<Case> {
    let mut v: Vec<Case> = Vec::new();
    let mut same = |name: &str, reqs: Vec<Vec<u8>>| {
        v.push(Case {
            name: name.to_string(),
            reqs,
            expect: Expect::Same,
        })
    };

    // --- Every file type, GET and HEAD.
    let files = [
        "/",
        "/index.html",
        "/txt/a.txt",
        "/one.txt",
        "/empty.txt",
        "/bin/data.bin",
        "/files/style.css",
        "/files/app.js",
        "/files/data.json",
        "/files/img.png",
        "/files/photo.jpg",
        "/files/anim.gif",
        "/files/notes.txt",
        "/files/page.html",
        "/files/feed.xml",
        "/files/logo.svg",
        "/files/doc.pdf",
        "/files/thing.unknownext",
        "/files/UPPERCASE.TXT",
        "/files/noext",
        "/space%20name.txt",
        "/nested/a/b/c/deep.txt",
    ];
    for f in files {
        same(&format!("GET {f}"), vec![req("GET", f, "")]);
        same(&format!("HEAD {f}"), vec![req("HEAD", f, "")]);
    }

    // --- Directories, index, missing files, error pages.
    for t in [
        "/sub",
        "/sub/",
        "/sub/page.html",
        "/sub?x=1",
        "/noindex",
        "/noindex/",
        "/noindex/file.txt",
        "/nested/a",
        "/nested/a/",
        "/nested/a/b/",
        "/nothere/",
        "/missing.txt",
        "/static/missing.css",
        "/txt/a.txt/",
        "/TXT/A.TXT",
    ] {
        same(&format!("GET {t}"), vec![req("GET", t, "")]);
    }
    same("HEAD /sub", vec![req("HEAD", "/sub", "")]);
    same(
        "HEAD /missing.txt (custom 404)",
        vec![req("HEAD", "/missing.txt", "")],
    );
    same(
        "HEAD /static/missing.css (built-in 404)",
        vec![req("HEAD", "/static/missing.css", "")],
    );
    same(
        "HEAD /noindex/ (built-in 403)",
        vec![req("HEAD", "/noindex/", "")],
    );
    // msie_padding: built-in error pages are padded for MSIE and Chrome.
    let chrome = "User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 \
                  (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36\r\n";
    let firefox = "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 \
                   Firefox/120.0\r\n";
    let msie = "User-Agent: Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)\r\n";
    for (browser, ua) in [("Chrome", chrome), ("Firefox", firefox), ("MSIE", msie)] {
        same(
            &format!("built-in 404 for {browser}"),
            vec![req("GET", "/static/missing.css", ua)],
        );
        same(
            &format!("custom 404 for {browser}"),
            vec![req("GET", "/missing.txt", ua)],
        );
    }
    same(
        "built-in 403 for Chrome",
        vec![req("GET", "/noindex/", chrome)],
    );
    same(
        "301 for Chrome (not padded)",
        vec![req("GET", "/sub", chrome)],
    );

    // --- Locations: exact, ^~, alias, return, try_files, error_page =200.
    for t in [
        "/exact",
        "/exact?x=42",
        "/exact?x=a%20b&y=2",
        "/exact/",
        "/ret.json?x=1",
        "/moved",
        "/moved?a=b",
        "/found",
        "/gone",
        "/static/s.css",
        "/static/sdir",
        "/static/sdir/",
        "/aliased/page.html",
        "/aliased/",
        "/aliased",
        "/tf/t.txt",
        "/tf/dir",
        "/tf/dir/",
        "/tf/nodir",
        "/tf/missing",
        "/tf/",
        "/e200/missing",
        "/e200/real.txt",
        "/e200/",
    ] {
        same(&format!("GET {t}"), vec![req("GET", t, "")]);
    }
    same("HEAD /exact", vec![req("HEAD", "/exact", "")]);
    same("HEAD /e200/missing", vec![req("HEAD", "/e200/missing", "")]);
    same("POST /exact", vec![req("POST", "/exact", "")]);

    // --- Methods.
    same("POST existing", vec![req("POST", "/txt/a.txt", "")]);
    same(
        "POST existing with body",
        vec![req("POST", "/txt/a.txt", "Content-Length: 5\r\n\r\nhello")
            .strip_suffix(b"\r\n")
            .unwrap()
            .to_vec()],
    );
    same("POST missing", vec![req("POST", "/missing.txt", "")]);
    same(
        "POST missing (built-in 404)",
        vec![req("POST", "/static/missing.css", "")],
    );
    same("POST / (index)", vec![req("POST", "/", "")]);
    same("DELETE existing", vec![req("DELETE", "/txt/a.txt", "")]);
    same("DELETE missing", vec![req("DELETE", "/missing.txt", "")]);
    same("DELETE directory", vec![req("DELETE", "/sub", "")]);
    same(
        "PUT with body",
        vec![req("PUT", "/txt/new.txt", "Content-Length: 3\r\n\r\nabc")
            .strip_suffix(b"\r\n")
            .unwrap()
            .to_vec()],
    );
    same("OPTIONS file", vec![req("OPTIONS", "/txt/a.txt", "")]);
    same("OPTIONS *", vec![req("OPTIONS", "*", "")]);
    same("PATCH", vec![req("PATCH", "/txt/a.txt", "")]);
    same("unknown method FOO", vec![req("FOO", "/txt/a.txt", "")]);

    // --- Conditional requests.
    let et = etag_of(root, "txt/a.txt");
    let lm = LAST_MODIFIED;
    let a = "/txt/a.txt";
    let cond: Vec<(&str, String)> = vec![
        ("If-None-Match match", format!("If-None-Match: {et}\r\n")),
        (
            "If-None-Match mismatch",
            "If-None-Match: \"nope\"\r\n".into(),
        ),
        ("If-None-Match *", "If-None-Match: *\r\n".into()),
        (
            "If-None-Match list",
            format!("If-None-Match: \"x\", {et}\r\n"),
        ),
        ("If-None-Match weak", format!("If-None-Match: W/{et}\r\n")),
        (
            "If-Modified-Since exact",
            format!("If-Modified-Since: {lm}\r\n"),
        ),
        (
            "If-Modified-Since earlier",
            format!("If-Modified-Since: {EARLIER}\r\n"),
        ),
        (
            "If-Modified-Since later",
            format!("If-Modified-Since: {LATER}\r\n"),
        ),
        (
            "If-Modified-Since garbage",
            "If-Modified-Since: yesterday\r\n".into(),
        ),
        ("If-Match match", format!("If-Match: {et}\r\n")),
        ("If-Match mismatch", "If-Match: \"nope\"\r\n".into()),
        ("If-Match *", "If-Match: *\r\n".into()),
        ("If-Match weak", format!("If-Match: W/{et}\r\n")),
        (
            "If-Unmodified-Since exact",
            format!("If-Unmodified-Since: {lm}\r\n"),
        ),
        (
            "If-Unmodified-Since earlier",
            format!("If-Unmodified-Since: {EARLIER}\r\n"),
        ),
        (
            "If-Unmodified-Since later",
            format!("If-Unmodified-Since: {LATER}\r\n"),
        ),
        (
            "If-Unmodified-Since garbage",
            "If-Unmodified-Since: whenever\r\n".into(),
        ),
        (
            "INM match + IMS earlier",
            format!("If-None-Match: {et}\r\nIf-Modified-Since: {EARLIER}\r\n"),
        ),
        (
            "INM mismatch + IMS exact",
            format!("If-None-Match: \"nope\"\r\nIf-Modified-Since: {lm}\r\n"),
        ),
        (
            "INM match + IMS exact",
            format!("If-None-Match: {et}\r\nIf-Modified-Since: {lm}\r\n"),
        ),
        (
            "If-Match mismatch + INM match",
            format!("If-Match: \"nope\"\r\nIf-None-Match: {et}\r\n"),
        ),
        (
            "IUS earlier + IMS exact",
            format!("If-Unmodified-Since: {EARLIER}\r\nIf-Modified-Since: {lm}\r\n"),
        ),
        (
            "If-Match match + IMS exact",
            format!("If-Match: {et}\r\nIf-Modified-Since: {lm}\r\n"),
        ),
    ];
    for (label, h) in &cond {
        same(&format!("{label} on {a}"), vec![req("GET", a, h)]);
    }
    same(
        "HEAD If-None-Match match",
        vec![req("HEAD", a, &format!("If-None-Match: {et}\r\n"))],
    );
    same(
        "If-None-Match match on directory index",
        vec![req(
            "GET",
            "/sub/",
            &format!("If-None-Match: {}\r\n", etag_of(root, "sub/index.html")),
        )],
    );
    same(
        "If-None-Match match with add_header (304 gets X-Static)",
        vec![req(
            "GET",
            "/static/s.css",
            &format!("If-None-Match: {}\r\n", etag_of(root, "static/s.css")),
        )],
    );
    same(
        "If-Match mismatch on missing file",
        vec![req("GET", "/static/missing.css", "If-Match: \"nope\"\r\n")],
    );
    same(
        "If-None-Match * on return 200",
        vec![req("GET", "/exact", "If-None-Match: *\r\n")],
    );
    same(
        "if_modified_since before: IMS later",
        vec![req(
            "GET",
            "/ims/i.txt",
            &format!("If-Modified-Since: {LATER}\r\n"),
        )],
    );
    same(
        "if_modified_since before: IMS earlier",
        vec![req(
            "GET",
            "/ims/i.txt",
            &format!("If-Modified-Since: {EARLIER}\r\n"),
        )],
    );
    same(
        "if_modified_since before: IMS exact",
        vec![req(
            "GET",
            "/ims/i.txt",
            &format!("If-Modified-Since: {lm}\r\n"),
        )],
    );
    same("etag off: plain GET", vec![req("GET", "/noetag/n.txt", "")]);
    same(
        "etag off: If-None-Match *",
        vec![req("GET", "/noetag/n.txt", "If-None-Match: *\r\n")],
    );
    same(
        "etag off: If-Match *",
        vec![req("GET", "/noetag/n.txt", "If-Match: *\r\n")],
    );
    same(
        "etag off: If-Modified-Since exact",
        vec![req(
            "GET",
            "/noetag/n.txt",
            &format!("If-Modified-Since: {lm}\r\n"),
        )],
    );
    same(
        "etag off: If-Range with date",
        vec![req(
            "GET",
            "/noetag/n.txt",
            &format!("Range: bytes=0-1\r\nIf-Range: {lm}\r\n"),
        )],
    );

    // --- Ranges.
    let ranges = [
        "bytes=0-9",
        "bytes=10-",
        "bytes=-5",
        "bytes=0-0,5-9",
        "bytes=0-1,3-4,-2",
        "bytes=0-1, 3-4",
        "bytes=0-100",
        "bytes=100-",
        "bytes=5-2",
        "bytes=abc",
        "bytes=0-1,x",
        "bytes=",
        "items=0-1",
        "BYTES=0-1",
        "bytes=0-20,5-26",
        "bytes=-0",
        "bytes=0-0,-1",
    ];
    for r in ranges {
        same(
            &format!("Range {r} on {a}"),
            vec![req("GET", a, &format!("Range: {r}\r\n"))],
        );
    }
    same(
        "HEAD with Range",
        vec![req("HEAD", a, "Range: bytes=0-9\r\n")],
    );
    same(
        "HEAD with multipart Range",
        vec![req("HEAD", a, "Range: bytes=0-1,4-5\r\n")],
    );
    same(
        "If-Range matching ETag",
        vec![req(
            "GET",
            a,
            &format!("Range: bytes=0-4\r\nIf-Range: {et}\r\n"),
        )],
    );
    same(
        "If-Range non-matching ETag",
        vec![req("GET", a, "Range: bytes=0-4\r\nIf-Range: \"nope\"\r\n")],
    );
    same(
        "If-Range matching date",
        vec![req(
            "GET",
            a,
            &format!("Range: bytes=0-4\r\nIf-Range: {lm}\r\n"),
        )],
    );
    same(
        "If-Range non-matching date",
        vec![req(
            "GET",
            a,
            &format!("Range: bytes=0-4\r\nIf-Range: {EARLIER}\r\n"),
        )],
    );
    same(
        "Range + If-None-Match match",
        vec![req(
            "GET",
            a,
            &format!("Range: bytes=0-4\r\nIf-None-Match: {et}\r\n"),
        )],
    );
    same(
        "max_ranges 1: two ranges",
        vec![req("GET", "/ranges/r.txt", "Range: bytes=0-1,3-4\r\n")],
    );
    same(
        "max_ranges 1: one range",
        vec![req("GET", "/ranges/r.txt", "Range: bytes=2-5\r\n")],
    );
    same(
        "Range on empty file",
        vec![req("GET", "/empty.txt", "Range: bytes=0-0\r\n")],
    );
    same(
        "Range bytes=0-0 on 1-byte file",
        vec![req("GET", "/one.txt", "Range: bytes=0-0\r\n")],
    );
    same(
        "Range bytes=1- on 1-byte file",
        vec![req("GET", "/one.txt", "Range: bytes=1-\r\n")],
    );
    same(
        "Range inside 100 KB binary",
        vec![req("GET", "/bin/data.bin", "Range: bytes=50000-50099\r\n")],
    );
    same(
        "multipart Range on 100 KB binary",
        vec![req("GET", "/bin/data.bin", "Range: bytes=0-9,-10\r\n")],
    );
    same(
        "Range on custom 404",
        vec![req("GET", "/missing.txt", "Range: bytes=0-1\r\n")],
    );
    same(
        "Range on return 200",
        vec![req("GET", "/exact", "Range: bytes=0-1\r\n")],
    );
    same(
        "Range on error_page =200",
        vec![req("GET", "/e200/missing", "Range: bytes=0-1\r\n")],
    );

    // --- The filter chain on error pages and generated bodies: conditional
    // requests and ranges apply to any 200 (an error page sent with
    // `=200` included), not to an error page keeping its error status; a
    // 416 keeps the 200's add_header lines and adds its own.
    let page_etag = etag_of(root, "custom404.html");
    same(
        "If-None-Match * on error_page =200",
        vec![req("GET", "/e200/missing", "If-None-Match: *\r\n")],
    );
    same(
        "If-None-Match match on error_page =200",
        vec![req(
            "GET",
            "/e200/missing",
            &format!("If-None-Match: {page_etag}\r\n"),
        )],
    );
    same(
        "If-None-Match match on custom 404",
        vec![req(
            "GET",
            "/missing.txt",
            &format!("If-None-Match: {page_etag}\r\n"),
        )],
    );
    same(
        "If-Match mismatch on custom 404",
        vec![req("GET", "/missing.txt", "If-Match: \"nope\"\r\n")],
    );
    same(
        "Range bytes=100- on error_page =200",
        vec![req("GET", "/e200/missing", "Range: bytes=100-\r\n")],
    );
    same(
        "Range bytes=100- on a directory index",
        vec![req("GET", "/sub/", "Range: bytes=100-\r\n")],
    );
    same(
        "HEAD with unsatisfiable Range",
        vec![req("HEAD", a, "Range: bytes=100-\r\n")],
    );
    same(
        "Range bytes=100- with add_header in the location",
        vec![req("GET", "/static/s.css", "Range: bytes=100-\r\n")],
    );
    same(
        "keep-alive after 416",
        vec![
            req_ka("GET", a, "Range: bytes=100-\r\n"),
            req("GET", "/one.txt", ""),
        ],
    );
    for (label, h) in [
        ("If-Match *", "If-Match: *\r\n".to_string()),
        ("If-Match mismatch", "If-Match: \"nope\"\r\n".to_string()),
        (
            "If-None-Match mismatch",
            "If-None-Match: \"nope\"\r\n".to_string(),
        ),
        ("If-Modified-Since", format!("If-Modified-Since: {lm}\r\n")),
        (
            "If-Unmodified-Since",
            format!("If-Unmodified-Since: {LATER}\r\n"),
        ),
    ] {
        same(
            &format!("{label} on return 200"),
            vec![req("GET", "/exact", &h)],
        );
    }
    same(
        "HEAD If-None-Match * on return 200",
        vec![req("HEAD", "/exact", "If-None-Match: *\r\n")],
    );
    same(
        "try_files directory redirect keeps the arguments",
        vec![req("GET", "/tf/dir?x=1", "")],
    );

    // --- URI normalisation.
    for t in [
        "/txt/%61.txt",
        "/txt/%61%2Etxt",
        "/txt//a.txt",
        "//txt/a.txt",
        "/txt/./a.txt",
        "/nested/a/../../txt/a.txt",
        "/sub/..",
        "/sub/.",
        "/sub/%2e%2e/txt/a.txt",
        "/../etc/passwd",
        "/txt/../../etc/passwd",
        "/%2e%2e/etc/passwd",
        "/txt/%00.txt",
        "/txt/%zz",
        "/txt/%4",
        "/txt/a.txt?x=1&y",
        "/txt/a.txt#frag",
        "/txt/a.txt%3Fx=1",
        "/sub/%69ndex.html",
        "/space name.txt",
    ] {
        same(&format!("URI {t}"), vec![req("GET", t, "")]);
    }
    for t in ["/exact?x=1#frag", "/exact#frag?x=1", "/exact?x=a#b#c"] {
        same(&format!("URI {t}"), vec![req("GET", t, "")]);
    }
    same(
        "absolute-form target",
        vec![
            b"GET http://localhost/txt/a.txt HTTP/1.1\r\nHost: other\r\nConnection: close\r\n\r\n"
                .to_vec(),
        ],
    );
    same(
        "absolute-form directory redirect",
        vec![
            b"GET http://Example.COM/sub HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
                .to_vec(),
        ],
    );
    same(
        "redirect uses the Host header",
        vec![req_ka("GET", "/sub", "Host2: x\r\nConnection: close\r\n")
            .into_iter()
            .collect::<Vec<u8>>()
            .replace_host("www.example.org:8080")],
    );

    // --- HTTP/1.0 and keep-alive.
    same(
        "HTTP/1.0 without Host",
        vec![b"GET /txt/a.txt HTTP/1.0\r\n\r\n".to_vec()],
    );
    same(
        "HTTP/1.0 directory redirect without Host (server_name)",
        vec![b"GET /sub HTTP/1.0\r\n\r\n".to_vec()],
    );
    same(
        "HTTP/1.0 keep-alive then close",
        vec![
            b"GET /txt/a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n".to_vec(),
            b"GET /one.txt HTTP/1.0\r\n\r\n".to_vec(),
            b"GET /one.txt HTTP/1.0\r\n\r\n".to_vec(),
        ],
    );
    same(
        "HTTP/1.0 HEAD",
        vec![b"HEAD /txt/a.txt HTTP/1.0\r\nHost: localhost\r\n\r\n".to_vec()],
    );
    same(
        "HTTP/1.1 keep-alive, second closes",
        vec![req_ka("GET", "/txt/a.txt", ""), req("GET", "/one.txt", "")],
    );
    same(
        "keepalive_requests 3 closes after the third",
        vec![
            req_ka("GET", "/txt/a.txt", ""),
            req_ka("HEAD", "/one.txt", ""),
            req_ka("GET", "/empty.txt", ""),
            req_ka("GET", "/txt/b.txt", ""),
        ],
    );
    same(
        "keep-alive after 404 and 403",
        vec![
            req_ka("GET", "/static/missing.css", ""),
            req_ka("GET", "/noindex/", ""),
            req("GET", "/txt/a.txt", ""),
        ],
    );
    same(
        "keep-alive after 405 with a body",
        vec![
            req_ka("POST", "/txt/a.txt", "Content-Length: 5\r\n\r\nhello")
                .strip_suffix(b"\r\n")
                .unwrap()
                .to_vec(),
            req("GET", "/one.txt", ""),
        ],
    );
    same(
        "keep-alive after 301 and 304",
        vec![
            req_ka("GET", "/sub", ""),
            req_ka("GET", a, &format!("If-None-Match: {et}\r\n")),
            req("GET", "/one.txt", ""),
        ],
    );
    same(
        "keep-alive, then 400 closes",
        vec![
            req_ka("GET", "/one.txt", ""),
            b"get /one.txt HTTP/1.1\r\nHost: localhost\r\n\r\n".to_vec(),
            req("GET", "/one.txt", ""),
        ],
    );
    same(
        "chunked request body on GET, then another request",
        vec![
            req_ka(
                "GET",
                "/one.txt",
                "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n",
            ),
            req("GET", "/txt/a.txt", ""),
        ],
    );
    // Expect: 100-continue is answered when a handler that reads or
    // discards the body runs, not for error pages. Each case sends a second
    // request so that both the interim and the final response are read.
    for (t, extra) in [
        ("/one.txt", ""),
        ("/exact", ""),
        ("/moved", ""),
        ("/missing.txt", ""),
        ("/e200/missing", ""),
        ("/sub", ""),
        ("/sub/", ""),
        ("/one.txt", "Range: bytes=5-\r\n"),
        ("/one.txt", "If-Match: \"x\"\r\n"),
    ] {
        same(
            &format!("Expect: 100-continue on {t} {}", extra.trim_end()),
            vec![
                req_ka("GET", t, &format!("Expect: 100-continue\r\n{extra}")),
                req("GET", "/one.txt", ""),
            ],
        );
    }
    same(
        "Expect: 100-continue on HTTP/1.0",
        vec![
            b"GET /one.txt HTTP/1.0\r\nConnection: keep-alive\r\nExpect: 100-continue\r\n\r\n"
                .to_vec(),
            b"GET /one.txt HTTP/1.0\r\n\r\n".to_vec(),
        ],
    );
    same(
        "Connection: keep-alive on HTTP/1.1 with Range",
        vec![
            req_ka("GET", a, "Range: bytes=0-0,2-2\r\n"),
            req("GET", a, "Range: bytes=-3\r\n"),
        ],
    );

    // --- Malformed requests.
    let raw = |s: &str| vec![s.as_bytes().to_vec()];
    same(
        "lowercase method",
        raw("get /txt/a.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
    );
    same(
        "missing Host on HTTP/1.1",
        raw("GET /txt/a.txt HTTP/1.1\r\nConnection: close\r\n\r\n"),
    );
    same(
        "duplicate Host",
        raw("GET /txt/a.txt HTTP/1.1\r\nHost: localhost\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
    );
    same(
        "empty Host",
        raw("GET /txt/a.txt HTTP/1.1\r\nHost:\r\nConnection: close\r\n\r\n"),
    );
    same(
        "Host with a slash",
        raw("GET /txt/a.txt HTTP/1.1\r\nHost: bad/host\r\nConnection: close\r\n\r\n"),
    );
    same(
        "Content-Length and Transfer-Encoding",
        raw("POST /txt/a.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n"),
    );
    same(
        "invalid Content-Length",
        raw("GET /txt/a.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: abc\r\nConnection: close\r\n\r\n"),
    );
    same(
        "duplicate Content-Length",
        raw("GET /txt/a.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
    );
    same(
        "Transfer-Encoding gzip",
        raw("POST /txt/a.txt HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\nConnection: close\r\n\r\n"),
    );
    same(
        "obs-fold",
        raw("GET /txt/a.txt HTTP/1.1\r\nHost: localhost\r\nX-Folded: a\r\n  b\r\nConnection: close\r\n\r\n"),
    );
    same(
        "NUL in a header value",
        vec![b"GET /txt/a.txt HTTP/1.1\r\nHost: localhost\r\nX-Nul: a\0b\r\nConnection: close\r\n\r\n".to_vec()],
    );
    same(
        "NUL in the request line",
        vec![b"GET /txt/a\0.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".to_vec()],
    );
    same(
        "HTTP/2.0 in the request line",
        raw("GET /txt/a.txt HTTP/2.0\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
    );
    same(
        "HTTP/1.2 (treated as 1.1)",
        raw("GET /txt/a.txt HTTP/1.2\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
    );
    same(
        "garbage version",
        raw("GET /txt/a.txt HTTX/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
    );
    let long_uri = format!("/{}", "a".repeat(9000));
    same("URI over 8k (414)", vec![req("GET", &long_uri, "")]);
    same(
        "header line over 8k",
        vec![req("GET", a, &format!("X-Long: {}\r\n", "b".repeat(9000)))],
    );
    let many: String = (0..8)
        .map(|i| format!("X-Big-{i}: {}\r\n", "c".repeat(5000)))
        .collect();
    same("head over 32k", vec![req("GET", a, &many)]);
    let lots: String = (0..500).map(|i| format!("X-H{i}: v\r\n")).collect();
    same("500 short header lines", vec![req("GET", a, &lots)]);
    same(
        "leading empty lines",
        raw("\r\n\r\nGET /txt/a.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
    );
    same(
        "bare LF line endings",
        raw("GET /txt/a.txt HTTP/1.1\nHost: localhost\nConnection: close\n\n"),
    );
    same(
        "URI not starting with /",
        raw("GET txt/a.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
    );
    same(
        "mixed-case header names",
        raw("GET /txt/a.txt HTTP/1.1\r\nhOsT: localhost\r\nCONNECTION: close\r\n\r\n"),
    );
    same(
        "Host with port",
        raw("GET /sub HTTP/1.1\r\nHost: localhost:1234\r\nConnection: close\r\n\r\n"),
    );
    for host in [
        ".localhost",
        "localhost.",
        "LOCALHOST",
        "a\\b",
        "x:y:z",
        "[::1]:80",
        "a..b",
        "a b",
        ".",
    ] {
        same(
            &format!("Host {host:?}"),
            vec![
                format!("GET /sub HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
                    .into_bytes(),
            ],
        );
    }
    same(
        "empty Host on HTTP/1.0",
        raw("GET /txt/a.txt HTTP/1.0\r\nHost:\r\n\r\n"),
    );
    for v in [
        "HTTP/1.00",
        "HTTP/1.999",
        "HTTP/1.1000",
        "HTTP/01.1",
        "HTTP/0.9",
        "HTTP/1.",
        "HTTP/2",
        "HTTP/10.0",
    ] {
        same(
            &format!("version {v}"),
            vec![
                format!("GET /txt/a.txt {v}\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                    .into_bytes(),
            ],
        );
    }

    // --- Deliberate differences: porter refuses what nginx tolerates.
    let mut stricter = |name: &str, reqs: Vec<Vec<u8>>, reason: &'static str| {
        v.push(Case {
            name: name.to_string(),
            reqs,
            expect: Expect::PorterStricter {
                status: 400,
                reason,
            },
        })
    };
    stricter(
        "header line without a colon",
        raw("GET /txt/a.txt HTTP/1.1\r\nHost: localhost\r\nNoColonHere\r\nConnection: close\r\n\r\n"),
        "a header line without ':' is malformed (RFC 9112 5); nginx silently ignores it",
    );
    stricter(
        "double space in the request line",
        raw("GET  /txt/a.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
        "the request line is method SP target SP version (RFC 9112 3); nginx skips extra spaces",
    );
    stricter(
        "trailing space after the version",
        raw("GET /txt/a.txt HTTP/1.1 \r\nHost: localhost\r\nConnection: close\r\n\r\n"),
        "nothing may follow the version (RFC 9112 3); nginx skips trailing spaces",
    );
    stricter(
        "HTTP/0.9 request",
        raw("GET /txt/a.txt\r\n"),
        "porter does not speak HTTP/0.9; nginx answers with a bare body",
    );
    stricter(
        "URI not UTF-8 after percent-decoding",
        raw("GET /txt/%ff.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
        "porter keeps URIs as UTF-8 text; nginx maps any bytes to a file name",
    );
    stricter(
        "raw non-UTF-8 byte in the URI",
        vec![
            b"GET /txt/\xff.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".to_vec(),
        ],
        "porter keeps URIs as UTF-8 text; nginx maps any bytes to a file name",
    );

    v
}

/// Replaces the Host header of a request built by `req_ka`.
trait ReplaceHost {
    fn replace_host(self, host: &str) -> Vec<u8>;
}

impl ReplaceHost for Vec<u8> {
    fn replace_host(self, host: &str) -> Vec<u8> {
        let s = String::from_utf8(self).unwrap();
        s.replacen(
            "Host: localhost\r\nHost2: x\r\n",
            &format!("Host: {host}\r\n"),
            1,
        )
        .into_bytes()
    }
}

// ---------------------------------------------------------------------------
// The test.

#[test]
fn porter_matches_nginx() {
    if !Path::new(NGINX).exists() {
        eprintln!("nginx not installed: skipping differential test");
        return;
    }
    let started = SystemTime::now();
    let root = make_docroot();

    let ngx_prefix = TempDir::new("nginx");
    mkdir(&ngx_prefix.path().join("logs"));
    let ngx_port = free_port();
    std::fs::write(
        ngx_prefix.path().join("nginx.conf"),
        nginx_conf(ngx_prefix.path(), root.path(), ngx_port),
    )
    .unwrap();
    let mut cmd = Command::new(NGINX);
    cmd.arg("-p")
        .arg(ngx_prefix.path())
        .arg("-e")
        .arg(ngx_prefix.path().join("logs/error.log"))
        .arg("-c")
        .arg(ngx_prefix.path().join("nginx.conf"))
        .arg("-g")
        .arg("daemon off;");
    let nginx = Proc::start(
        "nginx",
        cmd,
        ngx_port,
        nginx_version(),
        &ngx_prefix.path().join("logs/error.log"),
    );

    let por_prefix = TempDir::new("porter");
    mkdir(&por_prefix.path().join("logs"));
    let por_port = free_port();
    std::fs::write(
        por_prefix.path().join("porter.conf"),
        porter_conf(por_prefix.path(), root.path(), por_port),
    )
    .unwrap();
    let mut cmd = Command::new(PORTER);
    cmd.arg("-p")
        .arg(por_prefix.path())
        .arg("-c")
        .arg("porter.conf");
    let porter = Proc::start(
        "porter",
        cmd,
        por_port,
        PORTER_VERSION.to_string(),
        &por_prefix.path().join("logs/error.log"),
    );

    let version_len_delta = porter.version.len() as i64 - nginx.version.len() as i64;
    let cases = corpus(root.path());
    assert!(cases.len() >= 50, "corpus too small: {}", cases.len());

    let mut failures: Vec<String> = Vec::new();
    let mut diverged = 0;
    for (i, case) in cases.iter().enumerate() {
        let en = exchange(nginx.port, &case.reqs);
        let ep = exchange(porter.port, &case.reqs);
        let mut problems: Vec<String> = Vec::new();
        match &case.expect {
            Expect::Same => {
                if en.resps.len() != ep.resps.len() {
                    problems.push(format!(
                        "number of responses: nginx {} / porter {}",
                        en.resps.len(),
                        ep.resps.len()
                    ));
                }
                for (k, (rn, rp)) in en.resps.iter().zip(&ep.resps).enumerate() {
                    let (nn, np) = (normalise(rn, &nginx), normalise(rp, &porter));
                    for d in diff(&nn, &np, version_len_delta) {
                        problems.push(format!("response {}: {d}", k + 1));
                    }
                }
            }
            Expect::PorterStricter { status, reason } => {
                diverged += 1;
                let ns = en.resps.first().map_or(0, |r| r.status);
                eprintln!(
                    "expected divergence #{i} {}: nginx {ns}, porter {:?} (wanted {status}): {reason}",
                    case.name,
                    ep.resps.first().map(|r| r.status)
                );
                if ep.resps.first().map(|r| r.status) != Some(*status) {
                    problems.push(format!(
                        "expected porter to answer {status} ({reason}), got {}",
                        ep.resps
                            .first()
                            .map_or("no response".to_string(), |r| r.status_line.clone())
                    ));
                }
            }
        }
        if !problems.is_empty() {
            let mut s = String::new();
            let _ = writeln!(s, "#{i} {}", case.name);
            for (k, r) in case.reqs.iter().enumerate() {
                let _ = writeln!(s, "  request {}: \"{}\"", k + 1, escape(r, 300));
            }
            for p in &problems {
                let _ = writeln!(s, "  DIFF {p}");
            }
            let _ = write!(s, "  nginx:\n{}", show_exchange(&en));
            let _ = write!(s, "  porter:\n{}", show_exchange(&ep));
            failures.push(s);
        }
    }

    let elapsed = started.elapsed().unwrap_or_default();
    eprintln!(
        "differential: {} cases ({} expected divergences), {} mismatches, {:.1}s",
        cases.len(),
        diverged,
        failures.len(),
        elapsed.as_secs_f64()
    );
    drop(porter);
    drop(nginx);
    if !failures.is_empty() {
        panic!(
            "{} of {} cases differ between nginx and porter:\n\n{}",
            failures.len(),
            cases.len(),
            failures.join("\n")
        );
    }
}
