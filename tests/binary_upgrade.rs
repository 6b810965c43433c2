//! Binary upgrade on the fly (issue 30 item 3), NGINX's sequence: SIGUSR2
//! starts the new binary on the inherited listening sockets (`.oldbin` pid
//! file), SIGWINCH stops the old one's workers, SIGQUIT retires it; or
//! SIGHUP to the old one and SIGQUIT to the new one roll back. Keep-alive
//! load runs through both with no failed request; a new binary that cannot
//! start leaves the old one serving with its pid file back.
//!
//! The load's clients behave as HTTP clients do with keep-alive: a request
//! on a reused connection that the server closed while it was idle (the
//! graceful stop closes idle connections) is sent again once on a new
//! connection. A request fails when a fresh connection is refused or
//! answers anything but 200.

use crate::common;

use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::common::{free_port, get, read_response, TempDir, BIN};

fn kill(pid: i32, sig: i32) -> bool {
    extern "C" {
        fn kill(pid: i32, sig: i32) -> i32;
    }
    // SAFETY: plain kill(2) on a pid this test started.
    unsafe { kill(pid, sig) == 0 }
}

/// Running, not a zombie.
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit(") ").next().is_some_and(|r| !r.starts_with('Z')))
}

/// Worker threads of `pid` (named `porter-wN`).
fn workers(pid: i32) -> usize {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    dir.filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|c| c.starts_with("porter-w"))
        .count()
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(20));
    }
}

/// porter as a daemon (`daemon on`: SIGWINCH is obeyed only then, as
/// NGINX), started from its own copy of the binary so that the test can
/// replace it the way a package upgrade does.
struct Daemon {
    prefix: TempDir,
    port: u16,
    /// Every master pid seen, stopped on drop.
    pids: Vec<i32>,
}

impl Daemon {
    fn start() -> Daemon {
        let prefix = TempDir::new("upgrade");
        let port = free_port();
        let p = prefix.path().display().to_string();
        prefix.write("site/f.txt", "hello\n");
        prefix.write(
            "porter.conf",
            format!(
                "pid {p}/porter.pid;\nworker_processes 2;\nerror_log {p}/error.log notice;\n\
                 events {{}}\nhttp {{\n  keepalive_requests 1000000;\n\
                 log_format bypid \"$pid $request\";\n  access_log {p}/access.log bypid;\n\
                 server {{ listen 127.0.0.1:{port}; root {p}/site; }}\n}}\n"
            ),
        );
        std::fs::create_dir_all(prefix.path().join("sbin")).unwrap();
        let mut d = Daemon {
            prefix,
            port,
            pids: Vec::new(),
        };
        d.install_binary(Path::new(BIN));
        // Another test thread forking while this one wrote the copy can
        // hold it open for writing until its child execs: ETXTBSY, retried.
        let mut tries = 0;
        let st = loop {
            let r = Command::new(d.bin())
                .arg("-p")
                .arg(d.prefix.path())
                .args(["-c", "porter.conf"])
                .status();
            match r {
                Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                r => break r.unwrap(),
            }
        };
        assert!(st.success(), "{}", d.error_log());
        wait_for("the pid file", || d.pid().is_some());
        let pid = d.pid().unwrap();
        d.pids.push(pid);
        assert!(common::wait_port(port, Duration::from_secs(10)));
        d
    }

    fn bin(&self) -> PathBuf {
        self.prefix.path().join("sbin/porter")
    }

    /// Puts `src` at `sbin/porter` as dpkg does: a new file renamed over
    /// the old one (whose inode the running binary keeps).
    fn install_binary(&self, src: &Path) {
        let tmp = self.prefix.path().join("sbin/porter.dpkg-new");
        std::fs::copy(src, &tmp).unwrap();
        std::fs::rename(&tmp, self.bin()).unwrap();
    }

    fn read_pid(&self, name: &str) -> Option<i32> {
        let t = std::fs::read_to_string(self.prefix.path().join(name)).ok()?;
        t.strip_suffix('\n')?.parse().ok()
    }

    fn pid(&self) -> Option<i32> {
        self.read_pid("porter.pid")
    }

    fn oldbin(&self) -> Option<i32> {
        self.read_pid("porter.pid.oldbin")
    }

    fn error_log(&self) -> String {
        std::fs::read_to_string(self.prefix.path().join("error.log")).unwrap_or_default()
    }

    /// SIGUSR2 to `old`; waits for the new master's pid file and start.
    fn upgrade(&mut self, old: i32) -> i32 {
        assert!(kill(old, 12));
        wait_for("the new pid file", || {
            self.oldbin() == Some(old) && self.pid().is_some_and(|p| p != old)
        });
        let new = self.pid().unwrap();
        self.pids.push(new);
        wait_for("the new binary's start", || {
            self.error_log().contains(&format!("{new}#{new}: porter/"))
        });
        new
    }

    /// Requests in the access log answered by `pid`.
    fn served_by(&self, pid: i32) -> usize {
        let log = std::fs::read_to_string(self.prefix.path().join("access.log")).unwrap();
        log.lines()
            .filter(|l| l.starts_with(&format!("{pid} ")))
            .count()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        for &pid in &self.pids {
            if alive(pid) {
                kill(pid, 15);
            }
        }
    }
}

/// Keep-alive clients asking until stopped.
struct Load {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    resent: Arc<AtomicU64>,
    threads: Vec<JoinHandle<Vec<String>>>,
}

impl Load {
    fn start(port: u16, clients: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicU64::new(0));
        let resent = Arc::new(AtomicU64::new(0));
        let threads = (0..clients)
            .map(|_| {
                let (stop, ok, resent) = (stop.clone(), ok.clone(), resent.clone());
                thread::spawn(move || client(port, &stop, &ok, &resent))
            })
            .collect();
        Load {
            stop,
            ok,
            resent,
            threads,
        }
    }

    /// Stops the clients: (answered 200, sent again, failures).
    fn finish(self) -> (u64, u64, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        let failed = self
            .threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        (
            self.ok.load(Ordering::Relaxed),
            self.resent.load(Ordering::Relaxed),
            failed,
        )
    }
}

fn client(port: u16, stop: &AtomicBool, ok: &AtomicU64, resent: &AtomicU64) -> Vec<String> {
    let mut failed = Vec::new();
    let mut conn: Option<TcpStream> = None;
    let mut buf = Vec::new();
    let req = b"GET /f.txt HTTP/1.1\r\nHost: t\r\n\r\n";
    while !stop.load(Ordering::Relaxed) {
        let reused = conn.is_some();
        if conn.is_none() {
            match TcpStream::connect(("127.0.0.1", port)) {
                Ok(s) => conn = Some(s),
                Err(e) => {
                    failed.push(format!("connect: {e}"));
                    continue;
                }
            }
            buf.clear();
        }
        let s = conn.as_mut().unwrap();
        let answer = s
            .write_all(req)
            .ok()
            .and_then(|_| read_response(s, &mut buf, false));
        match answer {
            Some(r) if r.status == 200 && r.body == b"hello\n" => {
                ok.fetch_add(1, Ordering::Relaxed);
                if r.headers
                    .iter()
                    .any(|(k, v)| k.eq_ignore_ascii_case("connection") && v == "close")
                {
                    conn = None;
                }
            }
            Some(r) => {
                failed.push(format!("status {}", r.status));
                conn = None;
            }
            // Closed while idle: sent again on a new connection.
            None if reused => {
                resent.fetch_add(1, Ordering::Relaxed);
                conn = None;
            }
            None => {
                failed.push("no answer on a new connection".into());
                conn = None;
            }
        }
    }
    failed
}

fn pause() {
    thread::sleep(Duration::from_millis(400));
}

#[test]
fn upgrade_under_keepalive_load_fails_no_request() {
    let mut d = Daemon::start();
    let old = d.pid().unwrap();
    let load = Load::start(d.port, 16);
    pause();
    d.install_binary(Path::new(BIN));
    let new = d.upgrade(old);
    pause();
    // The old binary's workers stop; its master stays.
    assert!(kill(old, 28));
    wait_for("the old workers to stop", || workers(old) == 0);
    assert!(alive(old));
    pause();
    assert!(kill(old, 3));
    wait_for("the old master to exit", || !alive(old));
    pause();
    let (ok, resent, failed) = load.finish();
    assert!(
        failed.is_empty(),
        "{} failed: {:?}",
        failed.len(),
        &failed[..failed.len().min(5)]
    );
    eprintln!("upgrade: {ok} requests answered, {resent} sent again after an idle close");
    assert_eq!(d.pid(), Some(new));
    assert_eq!(d.oldbin(), None, "the old binary removes its .oldbin");
    assert!(workers(new) == 2);
    let log = d.error_log();
    assert!(log.contains("using inherited sockets from \""), "{log}");
    assert!(
        log.contains("(SIGWINCH) received, stop accepting connections"),
        "{log}"
    );
    // Both served a share of the load.
    assert!(d.served_by(old) > 0 && d.served_by(new) > 0);
    assert_eq!(get(d.port, "/f.txt").status, 200);
}

#[test]
fn rollback_under_keepalive_load_fails_no_request() {
    let mut d = Daemon::start();
    let old = d.pid().unwrap();
    let load = Load::start(d.port, 16);
    pause();
    let new = d.upgrade(old);
    assert!(kill(old, 28));
    wait_for("the old workers to stop", || workers(old) == 0);
    pause();
    // Rollback: the old workers start again, the new binary quits.
    assert!(kill(old, 1));
    wait_for("the old workers to start again", || workers(old) == 2);
    assert!(kill(new, 3));
    wait_for("the new binary to exit", || !alive(new));
    wait_for("the pid file back", || d.pid() == Some(old));
    pause();
    let (ok, resent, failed) = load.finish();
    assert!(
        failed.is_empty(),
        "{} failed: {:?}",
        failed.len(),
        &failed[..failed.len().min(5)]
    );
    eprintln!("rollback: {ok} requests answered, {resent} sent again after an idle close");
    assert_eq!(d.oldbin(), None);
    let before = d.served_by(old);
    assert_eq!(get(d.port, "/f.txt").status, 200);
    wait_for("the old binary to serve", || d.served_by(old) > before);
    let log = d.error_log();
    assert!(
        log.contains(&format!("new binary process {new} exited with code 0")),
        "{log}"
    );
}

#[test]
fn a_new_binary_that_fails_leaves_the_old_one_serving() {
    let mut d = Daemon::start();
    let old = d.pid().unwrap();
    let conf = d.prefix.path().join("porter.conf");
    let good = std::fs::read_to_string(&conf).unwrap();
    let script = d.prefix.write("exit3.sh", "#!/bin/sh\nexit 3\n");
    common::set_mode(&script, 0o755);
    let expect_exit = |d: &Daemon, needle: &str| {
        assert!(kill(old, 12));
        wait_for(needle, || d.error_log().contains(needle));
        wait_for("the pid file back", || {
            d.pid() == Some(old) && d.oldbin().is_none()
        });
        assert_eq!(get(d.port, "/f.txt").status, 200);
    };
    // A configuration the new binary refuses.
    std::fs::write(&conf, "events {} bogus_directive;\n").unwrap();
    expect_exit(&d, "exited with code 1");
    std::fs::write(&conf, &good).unwrap();
    // A binary that exits at once.
    d.install_binary(&script);
    expect_exit(&d, "exited with code 3");
    // No binary at all: nothing is started.
    std::fs::remove_file(d.bin()).unwrap();
    expect_exit(&d, "execve() failed while executing new binary process");
    assert!(alive(old) && workers(old) == 2);
    // A working binary afterwards still upgrades.
    d.install_binary(Path::new(BIN));
    let new = d.upgrade(old);
    assert!(kill(old, 3));
    wait_for("the old master to exit", || !alive(old));
    assert_eq!(d.pid(), Some(new));
    assert_eq!(get(d.port, "/f.txt").status, 200);
}

#[test]
fn sigwinch_is_ignored_in_the_foreground() {
    let s = common::Server::start(
        "daemon off; pid {PREFIX}/porter.pid; error_log {PREFIX}/logs/error.log notice; events {}\n\
         http { server { listen 127.0.0.1:{PORT}; location / { return 200 ok; } } }",
    );
    s.signal(28);
    let log = s.wait_log("logs/error.log", "SIGWINCH", Duration::from_secs(5));
    assert!(
        log.contains("(SIGWINCH) received, ignoring: not a daemon"),
        "{log}"
    );
    assert_eq!(get(s.port, "/").status, 200);
}
