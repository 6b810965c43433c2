//! Start-up notices (issue 30 item 5): once, at `notice`, the disk route
//! of the static-file locations, one line per distinct route naming its
//! locations, not one line per location.

use crate::common;

use std::time::Duration;

use crate::common::Server;

#[test]
fn disk_routes_are_logged_once_grouped_by_route() {
    let s = Server::start(
        "daemon off; pid {PREFIX}/porter.pid; error_log {PREFIX}/logs/error.log notice;\n\
         events {}\nhttp { access_log off; aio threads;\n\
           server { listen 127.0.0.1:{PORT}; root {PREFIX};\n\
             location /a/ {} location /b/ {} location /c/ { aio off; }\n\
             location /d/ { aio threads; aio_fast_path off; }\n\
             location /p/ { proxy_pass http://127.0.0.1:1; } } }",
    );
    let log = s.wait_log("logs/error.log", "started", Duration::from_secs(5));
    let routes: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("disk route of"))
        .collect();
    assert_eq!(routes.len(), 3, "{log}");
    let line = |what: &str| {
        routes
            .iter()
            .find(|l| l.contains(what))
            .unwrap_or_else(|| panic!("no {what} in {log}"))
            .to_string()
    };
    let threads = line("3 locations (\"/a/\", \"/b/\", server): aio threads=default, ");
    assert!(threads.contains("[notice]"), "{threads}");
    assert!(threads.contains("misses to the pool"), "{threads}");
    line("1 location (\"/c/\"): aio off: the event loop opens, reads");
    line("1 location (\"/d/\"): aio threads=default, no fast path (aio_fast_path off)");
    // The proxied location has no disk route.
    assert!(!log.contains("\"/p/\""), "{log}");
    // Once: a reload does not repeat them.
    s.signal(1);
    let log = s.wait_log("logs/error.log", "reconfigured", Duration::from_secs(5));
    assert_eq!(log.matches("disk route of").count(), 3, "{log}");
}

/// Whether this kernel refuses `cachestat` on files the caller neither
/// owns nor may write (Linux 6.14 and later).
fn cachestat_checks_ownership() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut v = release
        .trim()
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    (v.next().unwrap(), v.next().unwrap()) >= (6, 14)
}

#[test]
fn files_the_workers_do_not_own_are_named_once_with_the_fix() {
    assert!(
        is_root(),
        "this test starts porter as root with workers as nobody"
    );
    let prefix = common::TempDir::new("notowned");
    // root's files (written by this test, as root) and nobody's.
    prefix.write("site/index.html", "root's\n");
    prefix.write("site/img/a.png", "png");
    prefix.write("own/b.txt", "nobody's\n");
    let own = prefix.path().join("own");
    for p in [own.clone(), own.join("b.txt")] {
        std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
    }
    let s = Server::start_in(
        prefix,
        "daemon off; user nobody; pid {PREFIX}/porter.pid;\n\
         error_log {PREFIX}/logs/error.log notice;\n\
         events {}\nhttp { access_log off; aio threads; sendfile on;\n\
           server { listen 127.0.0.1:{PORT}; root {PREFIX}/site;\n\
             location / {} location /img/ {}\n\
             location /own/ { alias {PREFIX}/own/; } } }",
        &[],
    );
    let log = s.wait_log("logs/error.log", "started", Duration::from_secs(5));
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("cachestat() is refused"))
        .collect();
    if !cachestat_checks_ownership() {
        assert!(lines.is_empty(), "{log}");
        return;
    }
    assert_eq!(lines.len(), 1, "{log}");
    let line = lines[0];
    let site = format!("{}/site", s.prefix.path().display());
    assert!(line.contains("[notice]"), "{line}");
    assert!(
        line.contains(&format!(
            "files under \"{site}\" of 3 locations (\"/\", \"/img/\", server) are neither owned \
             nor writable by the workers' user \"nobody\""
        )),
        "{line}"
    );
    assert!(
        line.contains("instead of sent by zero-copy sendfile()"),
        "{line}"
    );
    assert!(
        line.contains(&format!(
            "fix: chown -R nobody {site} and keep it read-only"
        )),
        "{line}"
    );
    let own = format!("files under \"{}/own", s.prefix.path().display());
    assert!(!log.contains(&own), "nobody's files are not named: {log}");
    // Once: a reload does not repeat it.
    s.signal(1);
    let log = s.wait_log("logs/error.log", "reconfigured", Duration::from_secs(5));
    assert_eq!(log.matches("cachestat() is refused").count(), 1, "{log}");
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .is_some_and(|ids| ids.split_whitespace().nth(1) == Some("0"))
}
