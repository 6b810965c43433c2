//! A cgroup v1 blkio throttle on the disk holding a test's files, and the
//! cgroup's own counters of the reads it let through: how tests put the
//! server on a slow disk (`disk_queue.rs`, `readahead.rs`). Needs root and
//! the blkio controller; `Throttle::new` says why not otherwise.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

const BLKIO: &str = "/sys/fs/cgroup/blkio";

/// A blkio cgroup of this test, removed when dropped (after the server).
pub struct Throttle {
    dir: PathBuf,
    /// The throttled device, `MAJ:MIN` of the whole disk.
    disk: String,
}

impl Throttle {
    /// A cgroup throttling reads from the disk holding `dir` to
    /// `bytes_per_s` and, when given, `reads_per_s`; or why it cannot.
    pub fn new(dir: &Path, bytes_per_s: u64, reads_per_s: Option<u64>) -> Result<Throttle, String> {
        if !rustix::process::geteuid().is_root() {
            return Err("not root".into());
        }
        if !Path::new(BLKIO)
            .join("blkio.throttle.read_bps_device")
            .exists()
        {
            return Err(format!("no cgroup v1 blkio controller at {BLKIO}"));
        }
        let dev = std::fs::metadata(dir).unwrap().dev();
        let (major, minor) = (libc::major(dev), libc::minor(dev));
        // A partition is throttled through its whole disk.
        let sys = format!("/sys/dev/block/{major}:{minor}");
        let disk = if Path::new(&sys).join("partition").exists() {
            std::fs::read_to_string(Path::new(&sys).join("../dev"))
                .map_err(|e| format!("{sys}/../dev: {e}"))?
                .trim()
                .to_string()
        } else if Path::new(&sys).exists() {
            format!("{major}:{minor}")
        } else {
            return Err(format!("{} is not on a block device", dir.display()));
        };
        let cg = Path::new(BLKIO).join(format!(
            "porter-test-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&cg).map_err(|e| e.to_string())?;
        let t = Throttle { dir: cg, disk };
        t.set("blkio.throttle.read_bps_device", bytes_per_s)?;
        if let Some(n) = reads_per_s {
            t.set("blkio.throttle.read_iops_device", n)?;
        }
        Ok(t)
    }

    fn set(&self, file: &str, value: u64) -> Result<(), String> {
        std::fs::write(self.dir.join(file), format!("{} {value}", self.disk))
            .map_err(|e| format!("{file} {}: {e}", self.disk))
    }

    /// Moves process `pid` (every thread of it) into the cgroup.
    pub fn enter(&self, pid: u32) {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string()).unwrap();
    }

    /// Reads from the disk by the cgroup's processes so far: (requests,
    /// bytes), as the throttle counted them (`blkio.throttle.io_serviced`,
    /// `io_service_bytes`: one request per bio it let through).
    pub fn reads(&self) -> (u64, u64) {
        let count = |file: &str| {
            let text = std::fs::read_to_string(self.dir.join(file)).unwrap();
            let want = format!("{} Read ", self.disk);
            text.lines()
                .find_map(|l| l.strip_prefix(&want))
                .map_or(0, |n| n.trim().parse().unwrap())
        };
        (
            count("blkio.throttle.io_serviced"),
            count("blkio.throttle.io_service_bytes"),
        )
    }
}

impl Drop for Throttle {
    fn drop(&mut self) {
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
