//! porter and Debian's nginx side by side, for the tests that compare
//! them on a corpus of raw requests (`tests/static_files.rs`,
//! `locations.rs`, `conditional_requests.rs`, `ranges.rs`,
//! `uri_normalisation.rs`, `keepalive.rs`, `bad_input.rs`): both serve
//! the same docroot with the same `http { }` body and answer the same
//! requests, and every response must agree (status line, the headers that
//! matter, body) after normalising what legitimately differs (the `Server`
//! header and `Date`, the product/version string in built-in pages, the
//! listening port in `Location`, multipart boundaries). Deliberate
//! differences (porter is stricter on some malformed input) are cases made
//! with [`Cases::stricter`] and listed in `docs/differences.md`.
//!
//! A comparison skips itself (saying so) when `/usr/sbin/nginx` is not
//! installed.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{one_worker_conf, read_response, set_mode, Nginx, Resp, Server, TempDir, NGINX};

const PORTER_VERSION: &str = concat!("porter/", env!("CARGO_PKG_VERSION"));
/// nginx's version string when `nginx -v` cannot be parsed.
const NGINX_VERSION_FALLBACK: &str = "nginx/1.22.1";

/// The fixed mtime of every file: Sun, 13 Sep 2020 12:26:40 GMT.
const MTIME: u64 = 1_600_000_000;
/// The docroot files' `Last-Modified`.
pub const LAST_MODIFIED: &str = "Sun, 13 Sep 2020 12:26:40 GMT";
/// A day before [`LAST_MODIFIED`].
pub const EARLIER: &str = "Sat, 12 Sep 2020 12:26:40 GMT";
/// A day after [`LAST_MODIFIED`].
pub const LATER: &str = "Mon, 14 Sep 2020 12:26:40 GMT";

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
// The docroot and the two servers.

/// Writes `rel` in `d` (mode 0644, parents 0755) with the fixed mtime.
fn file(d: &TempDir, rel: &str, data: impl AsRef<[u8]>) {
    let p = d.write(rel, data);
    set_mode(&p, 0o644);
    let f = std::fs::File::options().write(true).open(&p).unwrap();
    f.set_modified(UNIX_EPOCH + Duration::from_secs(MTIME))
        .unwrap();
    let mut up = p.parent();
    while let Some(parent) = up.filter(|u| u.starts_with(d.path())) {
        set_mode(parent, 0o755);
        up = parent.parent();
    }
}

/// Creates directory `rel` in `d` (mode 0755).
fn dir(d: &TempDir, rel: &str) {
    let p = d.path().join(rel);
    std::fs::create_dir_all(&p).unwrap();
    set_mode(&p, 0o755);
}

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
    let d = TempDir::new("diff-root");
    file(&d, "index.html", "<html><body>home</body></html>\n");
    file(&d, "custom404.html", "<p>custom not found page</p>\n");
    file(&d, "txt/a.txt", "abcdefghijklmnopqrstuvwxyz\n");
    file(&d, "txt/b.txt", "second text file\nwith two lines\n");
    file(&d, "one.txt", "x");
    file(&d, "empty.txt", "");
    file(&d, "bin/data.bin", binary_100k());
    file(&d, "files/style.css", "body { color: red; }\n");
    file(&d, "files/app.js", "console.log('hi');\n");
    file(&d, "files/data.json", "{\"a\": 1}\n");
    file(
        &d,
        "files/img.png",
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR fake png",
    );
    file(
        &d,
        "files/photo.jpg",
        b"\xff\xd8\xff\xe0\0\x10JFIF fake jpeg",
    );
    file(&d, "files/anim.gif", "GIF89a fake gif");
    file(&d, "files/notes.txt", "plain notes\n");
    file(&d, "files/page.html", "<p>page</p>\n");
    file(&d, "files/feed.xml", "<?xml version=\"1.0\"?><feed/>\n");
    file(
        &d,
        "files/logo.svg",
        "<svg xmlns=\"http://www.w3.org/2000/svg\"/>\n",
    );
    file(&d, "files/doc.pdf", "%PDF-1.4 fake\n");
    file(&d, "files/thing.unknownext", "unknown extension\n");
    file(&d, "files/UPPERCASE.TXT", "upper case extension\n");
    file(&d, "files/noext", "no extension\n");
    file(&d, "sub/index.html", "<p>sub index</p>\n");
    file(&d, "sub/page.html", "<p>sub page</p>\n");
    file(&d, "noindex/file.txt", "in a directory without index\n");
    file(&d, "space name.txt", "file with a space\n");
    file(&d, "nested/a/index.html", "<p>nested a index</p>\n");
    file(&d, "nested/a/b/c/deep.txt", "deep file\n");
    file(&d, "static/s.css", "p { margin: 0; }\n");
    file(&d, "static/sdir/index.html", "<p>static sdir</p>\n");
    file(&d, "ranges/r.txt", "0123456789abcdefghij\n");
    file(&d, "noetag/n.txt", "no etag here\n");
    file(&d, "ims/i.txt", "if_modified_since before\n");
    file(&d, "tf/t.txt", "try_files target\n");
    file(&d, "tf/dir/index.html", "<p>tf dir index</p>\n");
    dir(&d, "tf/nodir");
    file(&d, "e200/real.txt", "real file under e200\n");
    d
}

/// The `http { }` body shared by both servers; `{MIME}` and `{ROOT}` are
/// substituted here, `{PORT}` and `{PREFIX}` by [`Server`] and [`Nginx`].
const HTTP_BODY: &str = r#"
    include {MIME};
    default_type application/octet-stream;
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

/// One of the two servers: its port and the product/version string in
/// its built-in pages.
struct Side {
    port: u16,
    version: String,
}

/// nginx and porter serving `root`; `None` when nginx is not installed.
fn start_both(root: &Path) -> Option<(Nginx, Server)> {
    let body = HTTP_BODY.replace("{ROOT}", &root.display().to_string());
    let nginx = Nginx::start(&body.replace("{MIME}", "/etc/nginx/mime.types"))?;
    // Workers drop to nobody (porter's default when root), like nginx's.
    let porter = Server::start(&one_worker_conf(&body.replace("{MIME}", "mime.types")));
    Some((nginx, porter))
}

// ---------------------------------------------------------------------------
// Raw HTTP exchange.

/// One response as read, or what came instead of one.
#[derive(Debug, Clone)]
struct Answer {
    status_line: String,
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// The request was HEAD (no body read).
    head_only: bool,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        super::header_in(&self.headers, name)
    }

    fn from(r: Resp, head_only: bool) -> Answer {
        Answer {
            status_line: r.status_line,
            status: r.status,
            headers: r.headers,
            body: r.body,
            head_only,
        }
    }

    /// What came where a response was due, when it is no HTTP/1.x
    /// response (an HTTP/0.9 answer, a head cut short): compared whole.
    fn unparsed(bytes: Vec<u8>, head_only: bool) -> Answer {
        Answer {
            status_line: "(no complete HTTP/1.x response)".into(),
            status: 0,
            headers: Vec::new(),
            body: bytes,
            head_only,
        }
    }
}

/// What one connection produced: the responses, and how it ended.
#[derive(Debug, Clone)]
struct Exchange {
    resps: Vec<Answer>,
    end: String,
}

/// Sends all requests in one write on a new connection and reads up to
/// one response per request.
fn exchange(port: u16, reqs: &[Vec<u8>]) -> Exchange {
    let mut s = match TcpStream::connect(("127.0.0.1", port)) {
        Ok(s) => s,
        Err(e) => {
            return Exchange {
                resps: Vec::new(),
                end: format!("connect error: {e}"),
            }
        }
    };
    let mut end = "open".to_string();
    if let Err(e) = s.write_all(&reqs.concat()) {
        end = format!("write error: {e}");
    }
    let mut buf = Vec::new();
    let mut resps = Vec::new();
    for r in reqs {
        let head_only = r.starts_with(b"HEAD ");
        match read_response(&mut s, &mut buf, head_only) {
            Some(resp) => resps.push(Answer::from(resp, head_only)),
            None => {
                if !buf.is_empty() {
                    resps.push(Answer::unparsed(std::mem::take(&mut buf), head_only));
                }
                end = "closed, or no complete response".into();
                break;
            }
        }
    }
    Exchange { resps, end }
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

fn normalise(r: &Answer, p: &Side) -> Norm {
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

fn show_resp(r: &Answer) -> String {
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

/// The cases of one comparison.
#[derive(Default)]
pub struct Cases(Vec<Case>);

impl Cases {
    /// Requests both servers must answer alike, sent on one connection.
    pub fn same(&mut self, name: &str, reqs: Vec<Vec<u8>>) {
        self.0.push(Case {
            name: name.to_string(),
            reqs,
            expect: Expect::Same,
        })
    }

    /// Requests porter deliberately refuses with 400 where nginx tolerates
    /// them, for `reason`.
    pub fn stricter(&mut self, name: &str, reqs: Vec<Vec<u8>>, reason: &'static str) {
        self.0.push(Case {
            name: name.to_string(),
            reqs,
            expect: Expect::PorterStricter {
                status: 400,
                reason,
            },
        })
    }
}

/// `METHOD target HTTP/1.1`, Host localhost, Connection: close, extra
/// header lines (each ending in CRLF).
pub fn req(method: &str, target: &str, extra: &str) -> Vec<u8> {
    format!("{method} {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{extra}\r\n")
        .into_bytes()
}

/// Like `req` without `Connection: close`.
pub fn req_ka(method: &str, target: &str, extra: &str) -> Vec<u8> {
    format!("{method} {target} HTTP/1.1\r\nHost: localhost\r\n{extra}\r\n").into_bytes()
}

/// The ETag both servers give the docroot file `rel`.
pub fn etag_of(root: &Path, rel: &str) -> String {
    let len = std::fs::metadata(root.join(rel)).unwrap().len();
    format!("\"{MTIME:x}-{len:x}\"")
}

/// Replaces the Host header of a request built by `req_ka`.
pub trait ReplaceHost {
    /// The request with `Host: localhost\r\nHost2: x` replaced by `Host: host`.
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
// The comparison.

/// Starts nginx and porter on the shared docroot, sends each case that
/// `build` makes (given the docroot) to both, and fails with every
/// difference; `area` names the comparison in its summary line.
pub fn compare(area: &str, build: impl FnOnce(&Path, &mut Cases)) {
    let started = SystemTime::now();
    let root = make_docroot();
    let Some((nginx, porter)) = start_both(root.path()) else {
        eprintln!("nginx not installed: skipping the comparison of {area}");
        return;
    };
    let sides = [
        Side {
            port: nginx.port,
            version: nginx_version(),
        },
        Side {
            port: porter.port,
            version: PORTER_VERSION.to_string(),
        },
    ];
    let mut cases = Cases::default();
    build(root.path(), &mut cases);
    assert!(!cases.0.is_empty(), "no cases for {area}");
    let mut failures = Vec::new();
    for (i, case) in cases.0.iter().enumerate() {
        if let Some(f) = run_case(i, case, &sides) {
            failures.push(f);
        }
    }
    let diverged = cases
        .0
        .iter()
        .filter(|c| matches!(c.expect, Expect::PorterStricter { .. }))
        .count();
    let requests: usize = cases.0.iter().map(|c| c.reqs.len()).sum();
    eprintln!(
        "compared with nginx, {area}: {} cases, {requests} requests ({diverged} expected divergences), {} mismatches, {:.1}s",
        cases.0.len(),
        failures.len(),
        started.elapsed().unwrap_or_default().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} of {} cases differ between nginx and porter:\n\n{}",
        failures.len(),
        cases.0.len(),
        failures.join("\n")
    );
}

/// Sends case `i` to both sides; the report of its differences, if any.
fn run_case(i: usize, case: &Case, [nginx, porter]: &[Side; 2]) -> Option<String> {
    let en = exchange(nginx.port, &case.reqs);
    let ep = exchange(porter.port, &case.reqs);
    let problems = match &case.expect {
        Expect::Same => differences(&en, &ep, nginx, porter),
        Expect::PorterStricter { status, reason } => {
            let (ns, ps) = (
                en.resps.first().map_or(0, |r| r.status),
                ep.resps.first().map(|r| r.status),
            );
            eprintln!(
                "expected divergence #{i} {}: nginx {ns}, porter {ps:?} (wanted {status}): {reason}",
                case.name
            );
            if ps == Some(*status) {
                Vec::new()
            } else {
                vec![format!(
                    "expected porter to answer {status} ({reason}), got {}",
                    ep.resps
                        .first()
                        .map_or("no response".to_string(), |r| r.status_line.clone())
                )]
            }
        }
    };
    if problems.is_empty() {
        return None;
    }
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
    Some(s)
}

/// Every difference between the two exchanges of a case both must answer
/// alike: the number of responses, then each pair normalised.
fn differences(en: &Exchange, ep: &Exchange, nginx: &Side, porter: &Side) -> Vec<String> {
    let mut problems = Vec::new();
    if en.resps.len() != ep.resps.len() {
        problems.push(format!(
            "number of responses: nginx {} / porter {}",
            en.resps.len(),
            ep.resps.len()
        ));
    }
    let version_len_delta = porter.version.len() as i64 - nginx.version.len() as i64;
    for (k, (rn, rp)) in en.resps.iter().zip(&ep.resps).enumerate() {
        let (nn, np) = (normalise(rn, nginx), normalise(rp, porter));
        for d in diff(&nn, &np, version_len_delta) {
            problems.push(format!("response {}: {d}", k + 1));
        }
    }
    problems
}
