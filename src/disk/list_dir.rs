//! `Io::list_dir`: a directory's entries with the `stat` facts a listing
//! shows (`autoindex`), read in one task on the route's pool (short lane:
//! metadata only) or inline for `aio off` — never a directory read on an
//! event loop that has a pool.
//!
//! As NGINX's `ngx_read_dir` and `ngx_de_info`: names starting with `.`
//! are left out; kind, size and mtime come from `stat` through a link
//! (a link to a directory is listed as a directory), or from `lstat` when
//! the link is dangling or loops (then neither file nor directory); an entry `stat` may not
//! read (`EACCES`) is left out.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::io::Io;
use super::pool::Lane;

/// What a directory entry is, after following a symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A directory.
    Dir,
    /// A regular file.
    File,
    /// Anything else (a symlink, a device, a FIFO).
    Other,
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The name's bytes (not necessarily UTF-8).
    pub name: Vec<u8>,
    /// Its kind.
    pub kind: EntryKind,
    /// Size in bytes (of the link's target for a symlink).
    pub size: u64,
    /// Modification time, seconds since the epoch.
    pub mtime: i64,
}

/// What a listing found: the entries, and the entries `stat` was refused
/// for (NGINX logs each at `crit` and leaves it out).
#[derive(Debug, Default)]
pub struct Listing {
    /// The entries, in directory order.
    pub entries: Vec<DirEntry>,
    /// `(path, error)` for the entries left out.
    pub refused: Vec<(PathBuf, io::Error)>,
}

impl Io {
    /// The entries of directory `path` (see the module header). Errors
    /// are `opendir`'s or `readdir`'s, or a `stat` failure other than a
    /// missing, looping or refused entry.
    pub async fn list_dir(&self, path: &Path) -> io::Result<Listing> {
        let path = path.to_path_buf();
        self.run(Lane::Short, move || list(&path)).await
    }
}

fn list(path: &Path) -> io::Result<Listing> {
    let mut out = Listing::default();
    for e in std::fs::read_dir(path)? {
        let e = e?;
        let name = e.file_name();
        if name.as_bytes().first() == Some(&b'.') {
            continue;
        }
        let full = path.join(OsStr::from_bytes(name.as_bytes()));
        let meta = match std::fs::metadata(&full) {
            Ok(m) => m,
            Err(err) => match err.raw_os_error() {
                Some(libc::ENOENT | libc::ELOOP) => std::fs::symlink_metadata(&full)?,
                Some(libc::EACCES) => {
                    out.refused.push((full, err));
                    continue;
                }
                _ => return Err(err),
            },
        };
        let ft = meta.file_type();
        let kind = if ft.is_dir() {
            EntryKind::Dir
        } else if ft.is_file() {
            EntryKind::File
        } else {
            EntryKind::Other
        };
        out.entries.push(DirEntry {
            name: name.as_bytes().to_vec(),
            kind,
            size: meta.size(),
            mtime: meta.mtime(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_names_are_left_out_and_links_keep_their_kind() {
        let d = std::env::temp_dir().join(format!("porter-listdir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("sub")).unwrap();
        std::fs::write(d.join("a.txt"), b"hello").unwrap();
        std::fs::write(d.join(".hidden"), b"x").unwrap();
        std::os::unix::fs::symlink(d.join("sub"), d.join("link")).unwrap();
        std::os::unix::fs::symlink(d.join("gone"), d.join("dangling")).unwrap();
        let mut l = list(&d).unwrap().entries;
        l.sort_by(|a, b| a.name.cmp(&b.name));
        let names: Vec<_> = l.iter().map(|e| (e.name.clone(), e.kind)).collect();
        assert_eq!(
            names,
            vec![
                (b"a.txt".to_vec(), EntryKind::File),
                (b"dangling".to_vec(), EntryKind::Other),
                (b"link".to_vec(), EntryKind::Dir),
                (b"sub".to_vec(), EntryKind::Dir),
            ]
        );
        assert_eq!(l[0].size, 5);
        let _ = std::fs::remove_dir_all(&d);
    }
}
