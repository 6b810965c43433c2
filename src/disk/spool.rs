//! A request body kept on disk while it goes upstream (NGINX's
//! `client_body_temp_path`): [`Spool`] is a temp file unlinked the moment
//! it is created, as NGINX's `ngx_open_tempfile` does for a file that is
//! not persistent, so it never outlives its descriptor whatever becomes of
//! the request or the process. It is written by appending and read back in
//! pieces as often as the body is sent (once per upstream tried). Every
//! call runs on the route's pool: [`super::Disk::offloaded`] gives a route
//! that has one, so no event loop waits on the disk.
//!
//! `client_body_in_file_only on|clean` wants the file to keep its name
//! (`$request_body_file` names it): [`Spool::create_kept`] leaves it in
//! place, and for `clean` unlinks it when the spool is dropped (the
//! request is over), the unlink handed to the pool without waiting.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::OFlags;

use super::io::Io;
use super::pool::Lane;

/// A body's temp file: its descriptor (the name is gone), its length.
#[derive(Debug)]
pub struct Spool {
    io: Io,
    file: Arc<File>,
    len: u64,
    /// The name it had, for the log (NGINX names it in its warning).
    path: PathBuf,
    /// Unlink `path` when dropped (`client_body_in_file_only clean`).
    clean: bool,
}

impl Spool {
    /// Creates `path` (`O_CREAT|O_EXCL`, mode 0600, its directory made
    /// when missing) and unlinks it at once. `AlreadyExists` when another
    /// request has the name (try the next one).
    pub async fn create(io: &Io, path: &Path) -> io::Result<Spool> {
        Spool::open(io, path, false).await
    }

    /// As [`create`](Self::create), the file keeping its name; removed
    /// when the spool is dropped if `clean`.
    pub async fn create_kept(io: &Io, path: &Path, clean: bool) -> io::Result<Spool> {
        let mut s = Spool::open(io, path, true).await?;
        s.clean = clean;
        Ok(s)
    }

    async fn open(io: &Io, path: &Path, kept: bool) -> io::Result<Spool> {
        let p = path.to_path_buf();
        let file = io
            .run(Lane::Short, move || {
                let fd = create_new(&p, OFlags::RDWR)?;
                if !kept {
                    std::fs::remove_file(&p)?;
                }
                Ok(Arc::new(File::from(fd)))
            })
            .await?;
        Ok(Spool {
            io: io.clone(),
            file,
            len: 0,
            path: path.to_path_buf(),
            clean: false,
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

    /// Up to `max` bytes from `offset` (fewer only at the end).
    pub async fn read_at(&self, offset: u64, max: usize) -> io::Result<Vec<u8>> {
        let n = max.min(self.len.saturating_sub(offset) as usize);
        let file = self.file.clone();
        self.io
            .run(Lane::Bulk, move || {
                let mut buf = vec![0; n];
                file.read_exact_at(&mut buf, offset)?;
                Ok(buf)
            })
            .await
    }

    /// Bytes written.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Nothing written yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The name the file had.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        if !self.clean {
            return;
        }
        let path = std::mem::take(&mut self.path);
        let unlink = move || std::fs::remove_file(&path);
        match &self.io.pool {
            // Not awaited: the request is over, nothing waits for it.
            Some(p) => drop(p.submit_in(Lane::Short, unlink)),
            None => drop(unlink()),
        }
    }
}

/// Creates the file `p` for `access` (`O_CREAT|O_EXCL`, mode 0600),
/// making its directory (0700, NGINX's temp-path rule) when missing.
/// Blocking: run on a disk pool thread. Shared by spools and
/// `proxy_store`'s temp files (`store.rs`).
pub(super) fn create_new(p: &Path, access: OFlags) -> io::Result<std::os::fd::OwnedFd> {
    let open = || {
        rustix::fs::open(
            p,
            access | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC,
            rustix::fs::Mode::from_raw_mode(0o600),
        )
    };
    match open() {
        Err(rustix::io::Errno::NOENT) => {
            if let Some(dir) = p.parent() {
                use std::os::unix::fs::DirBuilderExt;
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)?;
            }
            Ok(open()?)
        }
        r => Ok(r?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn spool_is_unlinked_at_once_and_reads_back_what_was_appended() {
        let dir = std::env::temp_dir().join(format!("porter-spool-{}", std::process::id()));
        let path = dir.join("1/0000000001");
        let mut s = Spool::create(&Io::inline(), &path).await.unwrap();
        assert!(!path.exists(), "unlinked once open");
        s.append(b"hello ".to_vec()).await.unwrap();
        s.append(b"world".to_vec()).await.unwrap();
        assert_eq!(s.len(), 11);
        assert_eq!(s.read_at(0, 64).await.unwrap(), b"hello world");
        assert_eq!(s.read_at(6, 3).await.unwrap(), b"wor");
        assert_eq!(s.read_at(11, 3).await.unwrap(), b"");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn kept_spool_keeps_its_name_and_a_clean_one_goes_when_dropped() {
        let dir = std::env::temp_dir().join(format!("porter-kept-{}", std::process::id()));
        let (on, clean) = (dir.join("0000000001"), dir.join("0000000002"));
        let mut s = Spool::create_kept(&Io::inline(), &on, false).await.unwrap();
        s.append(b"body".to_vec()).await.unwrap();
        drop(s);
        assert_eq!(std::fs::read(&on).unwrap(), b"body");
        let s = Spool::create_kept(&Io::inline(), &clean, true)
            .await
            .unwrap();
        assert!(clean.exists());
        drop(s);
        assert!(!clean.exists(), "clean: removed with the request");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
