//! A response being saved as a file (`proxy_store`, `fastcgi_store`,
//! `uwsgi_store`, `scgi_store`): [`StoreFile`] is a temp file under the
//! module's temp path, appended to while the response passes, then moved
//! into place as NGINX's `ngx_ext_rename_file` does — mode set to
//! `*_store_access`, modification time to the upstream's `Last-Modified`,
//! `rename()`, and on `ENOENT` the missing directories made
//! (`ngx_create_full_path`, each with the access plus `x` where there is
//! `r`) and the rename tried again. A file given up, failed or dropped
//! unfinished is unlinked: no partial file is ever left, in place or in
//! the temp directory. Every call runs on the route's pool (a dropped
//! one's unlink too, not awaited), so no event loop waits on the disk.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{Mode, OFlags};

use super::io::Io;
use super::pool::Lane;

/// A store's temp file and what has been written to it.
#[derive(Debug)]
pub struct StoreFile {
    io: Io,
    file: Arc<File>,
    temp: PathBuf,
    len: u64,
    /// Moved into place or unlinked: nothing left to clean.
    settled: bool,
}

impl StoreFile {
    /// Creates `temp` (`O_CREAT|O_EXCL`, mode 0600, its directory made
    /// when missing). `AlreadyExists` when another request has the name.
    pub async fn create(io: &Io, temp: &Path) -> io::Result<StoreFile> {
        let p = temp.to_path_buf();
        let file = io
            .run(Lane::Short, move || {
                let fd = super::spool::create_new(&p, OFlags::WRONLY)?;
                Ok(Arc::new(File::from(fd)))
            })
            .await?;
        Ok(StoreFile {
            io: io.clone(),
            file,
            temp: temp.to_path_buf(),
            len: 0,
            settled: false,
        })
    }

    /// Appends `data`.
    pub async fn append(&mut self, data: Vec<u8>) -> io::Result<()> {
        let (file, at, n) = (self.file.clone(), self.len, data.len() as u64);
        self.io
            .run(Lane::Bulk, move || file.write_all_at(&data, at))
            .await?;
        self.len += n;
        Ok(())
    }

    /// Bytes written.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Nothing written yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The temp file's name.
    pub fn temp_path(&self) -> &Path {
        &self.temp
    }

    /// Moves the file to `to` with mode `access` and, when given, the
    /// modification time `mtime` (seconds since the epoch). On failure
    /// the temp file is unlinked and the error is NGINX's crit line
    /// (`rename() "/t/0000000001" to "/srv/a" failed (13: Permission
    /// denied)`).
    pub async fn commit(
        mut self,
        to: &Path,
        access: u32,
        mtime: Option<i64>,
    ) -> Result<(), String> {
        self.settled = true;
        let (file, temp, to) = (self.file.clone(), self.temp.clone(), to.to_path_buf());
        let r = self
            .io
            .run(Lane::Short, move || {
                Ok(rename_into_place(&file, &temp, &to, access, mtime))
            })
            .await;
        match r {
            Ok(r) => r,
            Err(e) => {
                self.settled = false;
                Err(format!(
                    "store of \"{}\" failed {}",
                    self.temp.display(),
                    crate::util::errno_text(&e)
                ))
            }
        }
    }

    /// Moves the file to `to` as `how` says (WebDAV's PUT: its
    /// `dav_access`, `create_full_put_path`, the `Date` it was sent
    /// with); the error is NGINX's crit line.
    pub async fn commit_with(mut self, to: &Path, how: Rename) -> Result<(), String> {
        self.settled = true;
        let (file, temp, to) = (self.file.clone(), self.temp.clone(), to.to_path_buf());
        let r = self
            .io
            .run(Lane::Short, move || {
                Ok(ext_rename(&temp, Some(&file), &to, &how))
            })
            .await;
        r.unwrap_or_else(|e| {
            self.settled = false;
            Err(format!("rename() failed {}", crate::util::errno_text(&e)))
        })
    }

    /// Gives the file up: unlinked now.
    pub async fn abort(mut self) {
        self.settled = true;
        let temp = self.temp.clone();
        let _ = self
            .io
            .run(Lane::Short, move || std::fs::remove_file(&temp))
            .await;
    }
}

/// How a file is moved into place (NGINX's `ngx_ext_rename_file_t`).
#[derive(Debug, Clone, Copy)]
pub struct Rename {
    /// The mode set before the move (0: left as it is).
    pub access: u32,
    /// The mode of directories made on the way (`x` added where `r` is).
    pub path_access: u32,
    /// The modification time set before the move (seconds since the epoch).
    pub mtime: Option<i64>,
    /// Make the missing directories of the target (`create_path`).
    pub create_path: bool,
    /// Unlink the source when the move fails (`delete_file`).
    pub delete_src: bool,
}

/// `ngx_ext_rename_file` with `create_path` and `delete_file` set.
fn rename_into_place(
    file: &File,
    temp: &Path,
    to: &Path,
    access: u32,
    mtime: Option<i64>,
) -> Result<(), String> {
    let r = Rename {
        access,
        path_access: access,
        mtime,
        create_path: true,
        delete_src: true,
    };
    ext_rename(temp, Some(file), to, &r)
}

/// NGINX's `ngx_ext_rename_file`: mode and time set on `src` (through
/// `file` when open), `rename()`, on `ENOENT` the missing directories
/// made (when `create_path`) and the rename tried again, across file
/// systems (`EXDEV`) a copy beside the target renamed over it. The error
/// is NGINX's crit line. Blocking: a disk pool thread runs it.
pub(super) fn ext_rename(
    src: &Path,
    file: Option<&File>,
    to: &Path,
    r: &Rename,
) -> Result<(), String> {
    let text = crate::util::errno_text;
    let failed = |line: String| {
        if r.delete_src {
            let _ = std::fs::remove_file(src);
        }
        Err(line)
    };
    if r.access != 0 {
        let done = match file {
            Some(f) => rustix::fs::fchmod(f, Mode::from_raw_mode(r.access)),
            None => rustix::fs::chmod(src, Mode::from_raw_mode(r.access)),
        };
        if let Err(e) = done {
            let e = io::Error::from(e);
            return failed(format!("chmod() \"{}\" failed {}", src.display(), text(&e)));
        }
    }
    if let (Some(t), Some(f)) = (r.mtime, file) {
        if let Err(e) = f.set_times(file_times(t)) {
            return failed(format!(
                "utimes() \"{}\" failed {}",
                src.display(),
                text(&e)
            ));
        }
    }
    let mut done = std::fs::rename(src, to);
    if matches!(&done, Err(e) if e.kind() == io::ErrorKind::NotFound) && r.create_path {
        if let Err(e) = create_full_path(to, dir_access(r.path_access)) {
            return failed(format!("mkdir() \"{}\" failed {}", to.display(), text(&e)));
        }
        done = std::fs::rename(src, to);
    }
    if matches!(&done, Err(e) if e.raw_os_error() == Some(libc::EXDEV)) {
        done = copy_across(src, to, r);
    }
    match done {
        Ok(()) => Ok(()),
        Err(e) => failed(format!(
            "rename() \"{}\" to \"{}\" failed {}",
            src.display(),
            to.display(),
            text(&e)
        )),
    }
}

/// `ext_rename` across file systems: `src` copied to `TO.NNNNNNNNNN`
/// (its mode and time), that renamed over `to`, then `src` unlinked.
fn copy_across(src: &Path, to: &Path, r: &Rename) -> io::Result<()> {
    let suffix = src.file_name().map(|n| n.to_string_lossy().into_owned());
    let mut side = to.as_os_str().to_owned();
    side.push(format!(".{}", suffix.unwrap_or_default()));
    let side = PathBuf::from(side);
    let copied = copy_beside(src, &side, to, r);
    if copied.is_err() {
        let _ = std::fs::remove_file(&side);
        return copied;
    }
    std::fs::remove_file(src)
}

/// `src` copied to `side` (mode and time as `r` says), then renamed
/// over `to`.
fn copy_beside(src: &Path, side: &Path, to: &Path, r: &Rename) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut from = File::open(src)?;
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(if r.access != 0 { r.access } else { 0o600 })
        .open(side)?;
    std::io::copy(&mut from, &mut out)?;
    if let Some(t) = r.mtime {
        out.set_times(file_times(t))?;
    }
    std::fs::rename(side, to)
}

/// Access and modification times both `t` (NGINX's `ngx_set_file_time`).
pub(super) fn file_times(t: i64) -> std::fs::FileTimes {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(t.max(0) as u64);
    std::fs::FileTimes::new().set_accessed(at).set_modified(at)
}

/// NGINX's `ngx_dir_access`: `x` added where `r` is.
pub(super) fn dir_access(a: u32) -> u32 {
    a | (a & 0o444) >> 2
}

/// NGINX's `ngx_create_full_path`: every directory of `to`'s path
/// (not `to` itself) made with `mode`; one that exists, or one the
/// process may not look at (`EACCES`, a parent it cannot read), is
/// passed over.
pub(super) fn create_full_path(to: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = to.as_os_str().as_bytes();
    for (i, _) in bytes.iter().enumerate().skip(1).filter(|(_, &c)| c == b'/') {
        let dir = Path::new(std::ffi::OsStr::from_bytes(&bytes[..i]));
        match rustix::fs::mkdir(dir, Mode::from_raw_mode(mode)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) | Err(rustix::io::Errno::ACCESS) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

impl Drop for StoreFile {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let temp = std::mem::take(&mut self.temp);
        let unlink = move || std::fs::remove_file(&temp);
        match &self.io.pool {
            // Not awaited: the response is over, nothing waits for it.
            Some(p) => drop(p.submit_in(Lane::Short, unlink)),
            None => drop(unlink()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn dir(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("porter-store-{name}-{}", std::process::id()))
    }

    #[tokio::test(flavor = "current_thread")]
    async fn committed_file_lands_whole_with_its_mode_time_and_directories() {
        let d = dir("commit");
        let temp = d.join("proxy_temp/0000000001");
        let mut f = StoreFile::create(&Io::inline(), &temp).await.unwrap();
        f.append(b"hello ".to_vec()).await.unwrap();
        f.append(b"world".to_vec()).await.unwrap();
        let to = d.join("a/b/c.html");
        f.commit(&to, 0o644, Some(1_000_000_000)).await.unwrap();
        assert_eq!(std::fs::read(&to).unwrap(), b"hello world");
        let m = std::fs::metadata(&to).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o644);
        assert_eq!(m.mtime(), 1_000_000_000);
        assert!(!temp.exists());
        let dm = std::fs::metadata(d.join("a/b"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dm & 0o700, 0o700, "directories get x where r is");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn dropped_or_aborted_file_leaves_nothing() {
        let d = dir("drop");
        let t1 = d.join("0000000001");
        let mut f = StoreFile::create(&Io::inline(), &t1).await.unwrap();
        f.append(b"part".to_vec()).await.unwrap();
        drop(f);
        assert!(!t1.exists());
        let t2 = d.join("0000000002");
        StoreFile::create(&Io::inline(), &t2)
            .await
            .unwrap()
            .abort()
            .await;
        assert!(!t2.exists());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn dir_access_adds_x_where_r_is() {
        assert_eq!(dir_access(0o600), 0o700);
        assert_eq!(dir_access(0o664), 0o775);
    }
}
