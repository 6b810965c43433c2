//! Log reopening (issue 30 item 2): SIGUSR1 and `porter -s reopen` open
//! every access and error log again under its name, as logrotate expects
//! after renaming them. Under load, every request is logged exactly once
//! across the renamed and the new files, each holding whole lines.

use crate::common;

use std::collections::HashMap;
use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::{read_response, Server, BIN};

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc_geteuid() == 0 }
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

/// With root, the workers run as `nobody` so that reopened files are
/// checked to be handed to them, as NGINX does.
fn conf() -> String {
    let user = if is_root() { "user nobody;\n" } else { "" };
    format!(
        "{user}daemon off;\npid {{PREFIX}}/porter.pid;\nworker_processes 2;\n\
         error_log {{PREFIX}}/logs/error.log notice;\nevents {{}}\n\
         http {{ access_log {{PREFIX}}/logs/access.log; keepalive_requests 10000000;\n\
           server {{ listen 127.0.0.1:{{PORT}}; root {{PREFIX}}/site; }} }}\n"
    )
}

/// One keep-alive client asking `/f.txt?id=C-N` until `stop`; returns the
/// ids answered 200.
fn client(port: u16, c: usize, stop: Arc<AtomicBool>) -> Vec<String> {
    let mut done = Vec::new();
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut buf = Vec::new();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let id = format!("{c}-{n}");
        n += 1;
        let req = format!("GET /f.txt?id={id} HTTP/1.1\r\nHost: t\r\n\r\n");
        s.write_all(req.as_bytes()).unwrap();
        let r = read_response(&mut s, &mut buf, false).expect("a response");
        assert_eq!(r.status, 200);
        done.push(id);
    }
    done
}

/// The id of each access line, checking the line is whole.
fn ids_in(path: &Path, seen: &mut HashMap<String, usize>) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "{path:?} ends mid-line"
    );
    let mut n = 0;
    for line in text.lines() {
        assert!(
            line.starts_with("127.0.0.1 - - [") && line.ends_with(" \"-\" \"-\""),
            "not a whole combined line in {path:?}: {line}"
        );
        let id = line
            .split_once("?id=")
            .and_then(|(_, r)| r.split_once(' '))
            .map(|(id, _)| id.to_string())
            .unwrap_or_else(|| panic!("no id: {line}"));
        *seen.entry(id).or_default() += 1;
        n += 1;
    }
    n
}

/// `porter -s reopen` on the server in `prefix`.
fn signal_reopen(prefix: &std::path::Path) {
    let out = Command::new(BIN)
        .arg("-p")
        .arg(prefix)
        .args(["-c", "porter.conf", "-s", "reopen"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn rotation_under_load_loses_and_repeats_no_line() {
    let s = Server::start(&conf());
    let prefix = s.prefix.path().to_path_buf();
    s.prefix.write("site/f.txt", "x\n");
    let logs = prefix.join("logs");
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..6)
        .map(|c| {
            let stop = stop.clone();
            let port = s.port;
            thread::spawn(move || client(port, c, stop))
        })
        .collect();
    let pause = || thread::sleep(Duration::from_millis(400));
    pause();
    // logrotate's way: rename, then signal.
    std::fs::rename(logs.join("access.log"), logs.join("access.log.2")).unwrap();
    std::fs::rename(logs.join("error.log"), logs.join("error.log.2")).unwrap();
    s.signal(10);
    pause();
    std::fs::rename(logs.join("access.log"), logs.join("access.log.1")).unwrap();
    signal_reopen(&prefix);
    pause();
    stop.store(true, Ordering::Relaxed);
    let answered: Vec<String> = clients
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    // A line about no request, to the reopened error log.
    assert_eq!(common::get(s.port, "/missing?id=missing").status, 404);
    let mut s = s;
    s.signal(3);
    assert!(s.wait_exit(Duration::from_secs(10)).is_some());

    let mut seen = HashMap::new();
    let per_file: Vec<usize> = ["access.log.2", "access.log.1", "access.log"]
        .iter()
        .map(|f| ids_in(&logs.join(f), &mut seen))
        .collect();
    // Each of the three files got a share of the load.
    assert!(per_file.iter().all(|&n| n > 0), "{per_file:?}");
    let twice: Vec<_> = seen.iter().filter(|(_, &n)| n > 1).collect();
    assert!(twice.is_empty(), "logged more than once: {twice:?}");
    let lost: Vec<_> = answered
        .iter()
        .filter(|id| !seen.contains_key(*id))
        .collect();
    assert!(lost.is_empty(), "{} of {} lost", lost.len(), answered.len());
    assert_eq!(seen.len(), answered.len() + 1, "{per_file:?}");
    eprintln!(
        "{} requests logged across 3 files: {per_file:?}",
        answered.len()
    );

    let old_err = std::fs::read_to_string(logs.join("error.log.2")).unwrap();
    assert!(
        old_err.contains("signal 10 (SIGUSR1) received, reopening logs"),
        "{old_err}"
    );
    let new_err = std::fs::read_to_string(logs.join("error.log")).unwrap();
    assert!(
        new_err.contains("/missing\" failed (2: No such file"),
        "{new_err}"
    );
    assert_eq!(seen.get("missing"), Some(&1));
    assert!(
        new_err.contains("[notice]") && new_err.contains(": exit\n"),
        "{new_err}"
    );
    if is_root() {
        use std::os::unix::fs::MetadataExt;
        let nobody = std::fs::metadata(logs.join("access.log")).unwrap().uid();
        assert_ne!(nobody, 0, "a reopened log belongs to the workers' user");
    }
}

#[test]
fn a_log_that_cannot_be_reopened_keeps_its_old_file() {
    let s = Server::start(&conf());
    s.prefix.write("site/f.txt", "x\n");
    let logs = s.prefix.path().join("logs");
    std::fs::rename(logs.join("access.log"), logs.join("access.log.1")).unwrap();
    // A directory where the new file would go: open() fails.
    std::fs::create_dir(logs.join("access.log")).unwrap();
    s.signal(10);
    let err = s.wait_log(
        "logs/error.log",
        "access.log\" failed",
        Duration::from_secs(5),
    );
    assert!(err.contains("[emerg]"), "{err}");
    assert!(err.contains("(21: Is a directory)"), "{err}");
    assert_eq!(common::get(s.port, "/f.txt?after").status, 200);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut old = String::new();
    while !old.contains("?after") && Instant::now() < deadline {
        old = std::fs::read_to_string(logs.join("access.log.1")).unwrap();
        thread::sleep(Duration::from_millis(20));
    }
    assert!(old.contains("GET /f.txt?after "), "{old}");
}
