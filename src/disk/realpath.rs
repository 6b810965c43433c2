//! `$realpath_root`: a path with every symbolic link resolved. A variable
//! renders synchronously, on the event loop, so the walk is tried with
//! `RESOLVE_CACHED` first (the dentries of a document root in use are in
//! memory) and the name read back from `/proc/self/fd` (no disk); only a
//! path not walked lately costs a blocking walk, as NGINX's `realpath()`
//! always may.

use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

use rustix::fs::{OFlags, ResolveFlags};

use super::fastpath;

/// The canonical form of `path` (absolute, no symbolic link, no `.`/`..`).
pub fn realpath_now(path: &str) -> io::Result<String> {
    let flags = OFlags::PATH | OFlags::CLOEXEC;
    let cwd = rustix::fs::CWD;
    let p = Path::new(path);
    let fd = match fastpath::openat2(cwd, p, flags, ResolveFlags::empty(), true) {
        Err(e)
            if e.kind() == io::ErrorKind::WouldBlock || e.raw_os_error() == Some(libc::ENOSYS) =>
        {
            rustix::fs::open(p, flags, rustix::fs::Mode::empty())?
        }
        r => r?,
    };
    let real = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
    real.into_os_string()
        .into_string()
        .map_err(|_| io::ErrorKind::InvalidData.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_and_dot_dots_resolve() {
        let dir = std::env::temp_dir().join(format!("porter-realpath-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("a/b")).unwrap();
        let _ = std::fs::remove_file(dir.join("l"));
        std::os::unix::fs::symlink(dir.join("a/b"), dir.join("l")).unwrap();
        let real = std::fs::canonicalize(dir.join("a/b")).unwrap();
        let want = real.to_str().unwrap();
        for p in [dir.join("l"), dir.join("a/./b/../b"), dir.join("l/")] {
            assert_eq!(realpath_now(p.to_str().unwrap()).unwrap(), want);
        }
        assert!(realpath_now(dir.join("none").to_str().unwrap()).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
