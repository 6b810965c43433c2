//! The first minute (issue 30 item 6): `porter` with no configuration file
//! serves a directory the way `python3 -m http.server` does — it lists
//! directories, logs each request to the terminal in NGINX's combined
//! format and says on its start-up line which URL to open.

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{free_port, get, get_with, TempDir, BIN};

/// porter on the embedded configuration, serving `dir`; stdout and
/// stderr go to files in `out` (pipes nobody reads could fill up).
struct Embedded {
    child: Child,
    out: TempDir,
}

impl Embedded {
    fn start(dir: &Path, listen: &str) -> Embedded {
        let out = TempDir::new("fm-out");
        let stdout = std::fs::File::create(out.path().join("stdout")).unwrap();
        let stderr = std::fs::File::create(out.path().join("stderr")).unwrap();
        let child = Command::new(BIN)
            .current_dir(dir)
            .args(["-l", listen])
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .unwrap();
        Embedded { child, out }
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.out.path().join(name)).unwrap_or_default()
    }

    /// Polls `stdout` or `stderr` until a line satisfies `want`.
    fn wait_line(&self, name: &str, want: impl Fn(&str) -> bool) -> Option<String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(l) = self.read(name).lines().find(|l| want(l)) {
                return Some(l.to_string());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `"GET /path HTTP/1.1" 200 N "referer" "agent"` after
/// `127.0.0.1 - - [dd/Mon/yyyy:hh:mm:ss +zzzz] `: NGINX's combined format.
fn is_combined(line: &str, request: &str, status: u16, referer: &str, agent: &str) -> bool {
    let Some(rest) = line.strip_prefix("127.0.0.1 - - [") else {
        return false;
    };
    let Some((time, rest)) = rest.split_once("] ") else {
        return false;
    };
    let time_ok = time.len() == 26
        && time.as_bytes()[2] == b'/'
        && time.as_bytes()[6] == b'/'
        && time.as_bytes()[11] == b':'
        && (time.contains(" +") || time.contains(" -"));
    let Some(rest) = rest.strip_prefix(&format!("\"{request}\" {status} ")) else {
        return false;
    };
    let Some((bytes, rest)) = rest.split_once(' ') else {
        return false;
    };
    time_ok && bytes.parse::<u64>().is_ok() && rest == format!("\"{referer}\" \"{agent}\"")
}

#[test]
fn no_config_lists_the_directory_logs_requests_and_says_the_url() {
    let site = TempDir::new("fm-site");
    site.write("notes.txt", "hello\n");
    site.write("photos/cat.jpg", "jpeg");
    let port = free_port();
    let p = Embedded::start(site.path(), &port.to_string());

    // The start-up line names the directory and the URL to open.
    let url = format!("http://127.0.0.1:{port}/");
    let started = p.wait_line("stderr", |l| l.contains("started"));
    let started = started.unwrap_or_else(|| panic!("no start-up line: {}", p.read("stderr")));
    let root = site.path().canonicalize().unwrap();
    assert!(
        started.contains(&format!("serving {} at {url}", root.display())),
        "{started}"
    );
    assert!(common::wait_port(port, Duration::from_secs(10)));

    // `/` has no index.html: the directory is listed, not refused.
    let r = get(port, "/");
    assert_eq!(r.status, 200, "{}", r.text());
    let page = r.text();
    assert!(page.contains("<title>Index of /</title>"), "{page}");
    assert!(
        page.contains("<a href=\"notes.txt\">notes.txt</a>"),
        "{page}"
    );
    assert!(page.contains("<a href=\"photos/\">photos/</a>"), "{page}");
    assert_eq!(get(port, "/photos/").status, 200);

    // Each request shows on the terminal (stdout) in the combined format.
    let r = get_with(
        port,
        "/notes.txt",
        "Referer: http://example.test/\r\nUser-Agent: first-minute/1.0\r\n",
    );
    assert_eq!(r.body, b"hello\n");
    let line = p.wait_line("stdout", |l| l.contains("/notes.txt"));
    let line = line.unwrap_or_else(|| panic!("no access line: {}", p.read("stdout")));
    assert!(
        is_combined(
            &line,
            "GET /notes.txt HTTP/1.1",
            200,
            "http://example.test/",
            "first-minute/1.0"
        ),
        "{line}"
    );
    let first = p.wait_line("stdout", |l| l.contains("\"GET / HTTP/1.1\" 200 "));
    assert!(first.is_some(), "{}", p.read("stdout"));
    // The error log stays on stderr, apart from the requests.
    assert!(!p.read("stderr").contains("GET /"), "{}", p.read("stderr"));
}

#[test]
fn a_missing_file_is_logged_as_404_and_the_listing_escapes_names() {
    let site = TempDir::new("fm-404");
    site.write("a&b <c>.txt", "x");
    let port = free_port();
    let p = Embedded::start(site.path(), &format!("127.0.0.1:{port}"));
    assert!(common::wait_port(port, Duration::from_secs(10)));
    let page = get(port, "/").text();
    assert!(page.contains("a&amp;b &lt;c&gt;.txt"), "{page}");
    assert_eq!(get(port, "/nothing-here").status, 404);
    let line = p.wait_line("stdout", |l| l.contains("/nothing-here"));
    let line = line.unwrap_or_else(|| panic!("no access line: {}", p.read("stdout")));
    assert!(
        is_combined(&line, "GET /nothing-here HTTP/1.1", 404, "-", "-"),
        "{line}"
    );
}

#[test]
fn a_config_file_keeps_its_own_logging_and_no_listing() {
    // Only the embedded default lists and logs to the terminal: the same
    // site through a config file answers 403 at `/` as NGINX does.
    let s = common::Server::start(
        "daemon off; events {} http { server { listen 127.0.0.1:{PORT}; root {PREFIX}/site; } }",
    );
    std::fs::create_dir_all(s.prefix.path().join("site")).unwrap();
    assert_eq!(get(s.port, "/").status, 403);
}

#[test]
fn dump_shows_the_embedded_defaults() {
    let out = Command::new(BIN)
        .args(["-T", "-r", "/tmp", "-l", "[::1]:9001"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let o = String::from_utf8_lossy(&out.stdout);
    for want in [
        "listen [::1]:9001;",
        "pid /tmp/porter-9001.pid;",
        "autoindex on;",
        "access_log /dev/stdout combined;",
    ] {
        assert!(o.contains(want), "{want} not in {o}");
    }
    let bad = Command::new(BIN)
        .args(["-l", "nope", "-t"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
    let e = String::from_utf8_lossy(&bad.stderr);
    assert!(e.contains("invalid address \"nope\" of \"-l\""), "{e}");
}
