//! A genuinely slow disk for integration tests: mounts `slowfs.py` (a
//! FUSE passthrough whose lookup, stat, open and read each sleep) over a
//! backing directory, and unmounts it when the guard drops, panics
//! included.
//!
//! Mounting needs root, `/dev/fuse`, `fusermount` and Python's fusepy;
//! [`unavailable`] says which is missing so a test can skip. Setting
//! `PORTER_REQUIRE_FUSE=1` (CI does) turns such a skip into a failure.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::wait_child;

static SEQ: AtomicU32 = AtomicU32::new(0);

/// How slow the mount is, in milliseconds per operation.
#[derive(Debug, Clone, Default)]
pub struct SlowFsOptions {
    /// Delay of every operation unless overridden below.
    pub delay_ms: u64,
    /// Delay of a lookup or stat (the kernel asks for both on a path walk).
    pub getattr_ms: Option<u64>,
    /// Delay of an open.
    pub open_ms: Option<u64>,
    /// Delay of each read request (at most 128 KiB each under direct_io).
    pub read_ms: Option<u64>,
    /// Reads of these mount-relative paths touching this byte offset or
    /// later fail with EIO.
    pub eio: Vec<(String, u64)>,
    /// Use the page cache (dropped on each open) instead of direct_io.
    pub page_cache: bool,
    /// The mount's readahead in bytes (`Some(0)`: only the pages read).
    pub max_readahead: Option<u32>,
}

impl SlowFsOptions {
    /// Every operation takes `ms`.
    pub fn uniform(ms: u64) -> SlowFsOptions {
        SlowFsOptions {
            delay_ms: ms,
            ..Default::default()
        }
    }
}

/// The Python interpreter that can import fusepy, if any.
fn python_with_fusepy() -> Option<&'static str> {
    ["/usr/bin/python3", "python3"].into_iter().find(|py| {
        Command::new(py)
            .args(["-c", "import fusepy"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    })
}

fn have_command(name: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
        .unwrap_or(false)
}

/// Why a slow FUSE disk cannot be mounted here, or `None` if it can.
pub fn unavailable() -> Option<String> {
    if unsafe { libc::geteuid() } != 0 {
        return Some("not running as root (mounting FUSE with allow_other needs it)".into());
    }
    if let Err(e) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
    {
        return Some(format!("cannot open /dev/fuse: {e}"));
    }
    if !have_command("fusermount") && !have_command("fusermount3") {
        return Some("no fusermount (package fuse3)".into());
    }
    if python_with_fusepy().is_none() {
        return Some("python3 cannot import fusepy (packages python3-fusepy, libfuse2)".into());
    }
    None
}

/// Whether a slow FUSE disk can be mounted here; when not, says that the
/// `what` test skips and why, or fails the test if `PORTER_REQUIRE_FUSE`
/// is set (CI sets it).
pub fn usable(what: &str) -> bool {
    let Some(why) = unavailable() else {
        return true;
    };
    if std::env::var_os("PORTER_REQUIRE_FUSE").is_some() {
        panic!("PORTER_REQUIRE_FUSE is set but FUSE is unavailable: {why}");
    }
    eprintln!("skipping {what} test: {why}");
    false
}

/// A mounted slow file system; unmounted on drop.
pub struct SlowFs {
    child: Option<Child>,
    dir: PathBuf,
    mnt: PathBuf,
}

fn is_mounted(mnt: &Path) -> bool {
    let want = mnt.to_str().unwrap();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(want))
}

impl SlowFs {
    /// Mounts a slow view of `backing` and waits until it is mounted.
    pub fn mount(backing: &Path, opts: &SlowFsOptions) -> SlowFs {
        let py = python_with_fusepy().expect("python3 with fusepy");
        let dir = std::env::temp_dir().join(format!(
            "porter-slowfs-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let mnt = dir.join("mnt");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&mnt).unwrap();
        for p in [&dir, &mnt] {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let mut cmd = Command::new(py);
        cmd.arg(super::support("slowfs.py"))
            .arg(backing)
            .arg(&mnt)
            .arg(format!("--delay-ms={}", opts.delay_ms))
            .arg(format!("--trace={}", dir.join("trace.log").display()));
        for (flag, v) in [
            ("getattr", opts.getattr_ms),
            ("open", opts.open_ms),
            ("read", opts.read_ms),
        ] {
            if let Some(ms) = v {
                cmd.arg(format!("--{flag}-ms={ms}"));
            }
        }
        for (rel, off) in &opts.eio {
            cmd.arg(format!("--eio={rel}:{off}"));
        }
        if opts.page_cache {
            cmd.arg("--page-cache");
        }
        if let Some(ra) = opts.max_readahead {
            cmd.arg(format!("--max-readahead={ra}"));
        }
        let err = std::fs::File::create(dir.join("slowfs.err")).unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .unwrap();
        let mut fs = SlowFs {
            child: Some(child),
            dir,
            mnt,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !is_mounted(&fs.mnt) {
            let exited = fs.child.as_mut().unwrap().try_wait().unwrap();
            if exited.is_some() || Instant::now() > deadline {
                let err = std::fs::read_to_string(fs.dir.join("slowfs.err")).unwrap_or_default();
                panic!("slowfs did not mount ({exited:?}): {err}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        fs
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        &self.mnt
    }

    /// One line per operation served so far: `time op path [offset+size]`.
    pub fn trace(&self) -> String {
        std::fs::read_to_string(self.dir.join("trace.log")).unwrap_or_default()
    }

    /// The daemon's stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.join("slowfs.err")).unwrap_or_default()
    }
}

impl Drop for SlowFs {
    fn drop(&mut self) {
        // Lazy unmount first: it succeeds even while files are open (a
        // porter still holding an fd), and it ends the daemon's loop.
        let mnt = self.mnt.to_str().unwrap();
        for cmd in [
            &["fusermount", "-u", "-z", mnt][..],
            &["fusermount3", "-u", "-z", mnt][..],
            &["umount", "-l", mnt][..],
        ] {
            if !is_mounted(&self.mnt) {
                break;
            }
            let _ = Command::new(cmd[0])
                .args(&cmd[1..])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        if let Some(mut child) = self.child.take() {
            // The unmount ends the daemon; if it does not, SIGTERM (libfuse
            // unmounts and exits), then SIGKILL.
            if !wait_child(&mut child, Duration::from_secs(1)) {
                unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
                if !wait_child(&mut child, Duration::from_secs(2)) {
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
        }
        if !is_mounted(&self.mnt) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
