//! A location's own `error_log` gets every line its requests log: a
//! denied request, an autoindex refusal, a `rewrite_log` line, a
//! `gzip_static` failure and a damaged cache file, as nginx 1.22 writes
//! them (run beside porter on the same configuration); and a cache hit
//! whose body cannot be read names the cache file it read.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::{
    get, get_with, one_server_conf, one_worker_conf, Nginx, Server, TempDir, NGINX,
};

/// An upstream answering every request with `hello`, closing after each.
fn origin() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = s.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
            );
        }
    });
    port
}

/// The document root: a file to rewrite to, a directory to list, and a
/// `.gz` that is a FIFO (not a regular file).
fn site() -> TempDir {
    let site = TempDir::new("errlog-site");
    site.write("r.txt", "r\n");
    site.write("list/a.txt", "a\n");
    site.write("gz/a.txt", "a\n");
    let fifo = site.path().join("gz/a.txt.gz");
    let st = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(st.success(), "mkfifo {}", fifo.display());
    site
}

/// The `http { }` body both servers run: each location logs to
/// `dir/loc.log`, caches live in `dir/cache` and `dir/small`.
fn http_body(site: &Path, dir: &Path, origin: u16) -> String {
    let (s, d) = (site.display(), dir.display());
    let own = format!("error_log {d}/loc.log info;");
    format!(
        "  proxy_cache_path {d}/cache keys_zone=z:1m;\n  \
         proxy_cache_path {d}/small keys_zone=k:1m;\n  \
         server {{\n    listen 127.0.0.1:{{PORT}};\n    server_name localhost;\n    \
         root {s};\n    \
         location /denied/ {{ {own} deny all; }}\n    \
         location /list/ {{ {own} autoindex on; autoindex_format jsonp; }}\n    \
         location /rw/ {{ {own} rewrite_log on; rewrite ^ /r.txt break; }}\n    \
         location /gz/ {{ {own} gzip_static on; }}\n    \
         location /c/ {{ {own} proxy_pass http://127.0.0.1:{origin}; \
         proxy_cache z; proxy_cache_valid 200 1h; }}\n    \
         location /k/ {{ {own} proxy_pass http://127.0.0.1:{origin}; \
         proxy_cache k; proxy_cache_valid 200 1h; }}\n  }}"
    )
}

/// Polls `path` until it holds `needle`; its text.
fn wait_for(path: &Path, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let s = std::fs::read_to_string(path).unwrap_or_default();
        if s.contains(needle) || Instant::now() >= deadline {
            return s;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The files under `dir`, at any depth.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Waits until a fill stored a file under `dir`; its path.
fn stored(dir: &Path) -> PathBuf {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(f) = files(dir).into_iter().find(|f| {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            !name.contains('.') && f.metadata().is_ok_and(|m| m.len() > 0)
        }) {
            return f;
        }
        assert!(
            Instant::now() < deadline,
            "nothing stored in {}",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One request per case; for each, the line the location's log got.
/// `main` reads the server's main error log.
fn run_cases(port: u16, dir: &Path, main: &dyn Fn() -> String) -> Vec<(u16, String)> {
    let gz = "Accept-Encoding: gzip\r\n";
    let cases: [(&str, &str, &str); 4] = [
        ("/denied/x", "", "access forbidden by rule"),
        (
            "/list/?callback=a-b",
            "",
            "client sent invalid callback name: \"a-b\"",
        ),
        ("/rw/x", "", "rewritten data: \"/r.txt\", args: \"\""),
        ("/gz/a.txt", gz, "a.txt.gz\" is not a regular file"),
    ];
    let mut out = Vec::new();
    for (path, headers, needle) in cases {
        let status = get_with(port, path, headers).status;
        out.push((status, found(dir, main, needle)));
    }
    // A damaged cache file, read by the next lookup.
    let first = get_with(port, "/c/a", "").status;
    let file = stored(&dir.join("cache"));
    let len = file.metadata().unwrap().len() as usize;
    std::fs::write(&file, vec![0u8; len]).unwrap();
    let second = get_with(port, "/c/a", "").status;
    out.push((first * 1000 + second, found(dir, main, "cache file \"")));
    out
}

/// `needle`'s line in `dir/loc.log`; the test fails when it is missing
/// there or also in the main log.
fn found(dir: &Path, main: &dyn Fn() -> String, needle: &str) -> String {
    let loc = wait_for(&dir.join("loc.log"), needle);
    let line = loc.lines().find(|l| l.contains(needle));
    let line = line.unwrap_or_else(|| panic!("no {needle:?} in the location's log:\n{loc}"));
    assert!(
        !main().contains(needle),
        "{needle:?} went to the main error log too"
    );
    needle.to_string() + &line[line.find(", client:").unwrap_or(line.len())..]
}

#[test]
fn a_locations_error_log_gets_its_requests_lines_as_nginx() {
    let site = site();
    let up = origin();
    let ours_dir = TempDir::new("errlog-porter");
    let porter = Server::start(&one_worker_conf(&http_body(
        site.path(),
        ours_dir.path(),
        up,
    )));
    let main = || porter.read("logs/error.log");
    let ours = run_cases(porter.port, ours_dir.path(), &main);
    let theirs_dir = TempDir::new("errlog-nginx");
    let Some(nginx) = Nginx::start(&http_body(site.path(), theirs_dir.path(), up)) else {
        eprintln!("SKIPPED the nginx half: {NGINX} is not installed");
        return;
    };
    let main = || nginx.error_log();
    let theirs = run_cases(nginx.port, theirs_dir.path(), &main);
    let ours: Vec<_> = ours
        .iter()
        .map(|(s, l)| (*s, l.replace(&porter.port.to_string(), "P")))
        .collect();
    let theirs: Vec<_> = theirs
        .iter()
        .map(|(s, l)| (*s, l.replace(&nginx.port.to_string(), "P")))
        .collect();
    assert_eq!(ours, theirs, "porter (left) and nginx (right) differ");
}

#[test]
fn a_cache_hit_whose_body_fails_to_read_names_its_cache_file() {
    let site = site();
    let up = origin();
    let dir = TempDir::new("errlog-hit");
    let porter = Server::start(&one_worker_conf(&http_body(site.path(), dir.path(), up)));
    assert_eq!(get_with(porter.port, "/k/a", "").status, 200);
    let file = stored(&dir.path().join("small"));
    // The second lookup opens the entry and keeps it open; the file then
    // loses its body under the kept descriptor.
    assert_eq!(get_with(porter.port, "/k/a", "").text(), "hello");
    let len = file.metadata().unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(len - 5)
        .unwrap();
    assert_eq!(get_with(porter.port, "/k/a", "").status, 500);
    let want = format!("pread() read only 0 of 5 from \"{}\"", file.display());
    let loc = wait_for(&dir.path().join("loc.log"), &want);
    assert!(loc.contains(&want), "no {want:?} in:\n{loc}");
}

#[test]
fn error_log_in_a_location_gets_its_requests_lines() {
    let p = Server::start(&one_server_conf(
        "",
        "root {PREFIX}/html;\nlocation /own/ { error_log {PREFIX}/logs/own.log info; }\nlocation / { }",
    ));
    assert_eq!(get(p.port, "/own/missing.txt").status, 404);
    assert_eq!(get(p.port, "/other/missing.txt").status, 404);
    let own = p.wait_log("logs/own.log", "missing.txt", Duration::from_secs(5));
    assert!(
        own.contains("/own/missing.txt") && own.contains("open()"),
        "{own}"
    );
    assert!(!own.contains("/other/"), "{own}");
    let main = p.wait_log(
        "logs/error.log",
        "/other/missing.txt",
        Duration::from_secs(5),
    );
    assert!(main.contains("/other/missing.txt"), "{main}");
    assert!(!main.contains("/own/missing.txt"), "{main}");
}
