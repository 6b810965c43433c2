//! The file-system work of WebDAV (`handlers/dav/`, NGINX's
//! `ngx_http_dav_module`): `lstat`, a tree deleted (DELETE, an
//! overwritten collection), a directory made (MKCOL), a file or a tree
//! copied with its modes and times (COPY), a file or a tree moved
//! (MOVE). Each call is one task on the route's pool (a walk of a tree
//! included), so no event loop waits on the disk; the handler decides the
//! statuses, these calls do NGINX's system calls in NGINX's order and
//! return the lines NGINX logs on the way ([`DavLine`], [`dav_error`]).
//!
//! Walks go by `lstat`: a symbolic link inside a tree is unlinked by a
//! delete and skipped by a copy, never followed (NGINX's walk treats it
//! as a "special" file). Under `disable_symlinks` every path is first
//! checked to resolve beneath the root without a link on its way
//! ([`beneath`]), and copies open their files with `O_NOFOLLOW`.

use std::fs::{File, Metadata};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::OFlags;

use super::io::Io;
use super::open::{open_path, PathRules, PATH_FLAGS};
use super::pool::Lane;
use super::store::{dir_access, ext_rename, file_times, Rename};

/// A line for the error log, in NGINX's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DavLine {
    /// Logged at `crit` (else `error`).
    pub crit: bool,
    /// The text.
    pub text: String,
}

/// What a call did: the lines logged on the way, and the status it
/// failed with (`None`: done).
#[derive(Debug, Default)]
pub struct DavDone {
    /// Log lines, in order.
    pub lines: Vec<DavLine>,
    /// The failure's status.
    pub failed: Option<u16>,
}

/// What `lstat` found.
#[derive(Debug, Clone, Copy)]
pub struct DavEntry {
    /// A directory.
    pub dir: bool,
    /// The permission bits.
    pub mode: u32,
    /// The modification time.
    pub mtime: i64,
}

impl DavEntry {
    fn of(m: &Metadata) -> DavEntry {
        DavEntry {
            dir: m.is_dir(),
            mode: m.permissions().mode() & 0o7777,
            mtime: m.mtime(),
        }
    }
}

/// NGINX's `ngx_http_dav_error`: the status for a failed call `op` on
/// `path` (`not_found` for a missing path) and its log line.
pub fn dav_error(e: &io::Error, not_found: u16, op: &str, path: &Path) -> (u16, DavLine) {
    let (crit, status) = match e.raw_os_error() {
        Some(libc::ENOENT | libc::ENOTDIR | libc::ENAMETOOLONG) => (false, not_found),
        // A link refused by `disable_symlinks` is a refusal too.
        Some(libc::EACCES | libc::EPERM | libc::ELOOP) => (false, 403),
        Some(libc::EEXIST) => (false, 405),
        Some(libc::ENOSPC) => (true, 507),
        _ => (true, 500),
    };
    let text = format!(
        "{op}() \"{}\" failed {}",
        path.display(),
        crate::util::errno_text(e)
    );
    (status, DavLine { crit, text })
}

/// Under `disable_symlinks`, whether `path`'s directory (its deepest
/// existing one) resolves beneath the root without a link on the way:
/// `ELOOP` when not. What a call then creates or removes at the end of
/// the path is named by its parent, so no link is followed out of the
/// root. Blocking.
pub(super) fn beneath(path: &Path, rules: &PathRules) -> io::Result<()> {
    if !rules.no_symlinks {
        return Ok(());
    }
    let mut dir = path.parent();
    while let Some(d) = dir {
        match open_path(d, rules, PATH_FLAGS | OFlags::DIRECTORY, false) {
            Ok(_) => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => dir = d.parent(),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn lines_of(done: &mut DavDone, e: &io::Error, not_found: u16, op: &str, path: &Path) {
    let (status, line) = dav_error(e, not_found, op, path);
    done.lines.push(line);
    if not_found != 0 {
        done.failed = Some(status);
    }
}

impl Io {
    /// [`beneath`] on the pool: whether `path` may be made or replaced
    /// under `disable_symlinks`.
    pub async fn dav_beneath(&self, path: &Path, rules: &PathRules) -> io::Result<()> {
        if !rules.no_symlinks {
            return Ok(());
        }
        let (path, rules) = (path.to_path_buf(), rules.clone());
        self.run(Lane::Short, move || beneath(&path, &rules)).await
    }

    /// `lstat(path)` (the path's directory checked by the rules first).
    pub async fn dav_lstat(&self, path: &Path, rules: &PathRules) -> io::Result<DavEntry> {
        let (path, rules) = (path.to_path_buf(), rules.clone());
        self.run(Lane::Short, move || {
            beneath(&path, &rules)?;
            Ok(DavEntry::of(&std::fs::symlink_metadata(&path)?))
        })
        .await
    }

    /// `mkdir(path, mode)`.
    pub async fn dav_mkdir(&self, path: &Path, mode: u32, rules: &PathRules) -> io::Result<()> {
        let (path, rules) = (path.to_path_buf(), rules.clone());
        self.run(Lane::Short, move || {
            beneath(&path, &rules)?;
            rustix::fs::mkdir(&path, rustix::fs::Mode::from_raw_mode(mode))?;
            Ok(())
        })
        .await
    }

    /// Deletes the file `path`, or the directory `path` and all beneath
    /// it (`dir`): NGINX's `ngx_http_dav_delete_path` (a failure inside
    /// the tree is logged and passed over; the top's is the status).
    pub async fn dav_delete(&self, path: &Path, dir: bool, rules: &PathRules) -> DavDone {
        let (path, rules) = (path.to_path_buf(), rules.clone());
        let r = self
            .run(Lane::Short, move || Ok(delete_path(&path, dir, &rules)))
            .await;
        r.unwrap_or_else(pool_failed)
    }

    /// COPY or MOVE (`is_move`) of the directory `src` to `dst`, which
    /// does not exist (any old one deleted first): a MOVE is a rename
    /// when it can be; else `dst` is made with `mode` and the tree
    /// copied (directories with `x` where `r` is, files with their modes,
    /// all with their times), and a MOVE then deletes `src`.
    pub async fn dav_copy_tree(
        &self,
        src: &Path,
        dst: &Path,
        mode: u32,
        is_move: bool,
        rules: &PathRules,
    ) -> DavDone {
        let (src, dst, rules) = (src.to_path_buf(), dst.to_path_buf(), rules.clone());
        let r = self
            .run(Lane::Bulk, move || {
                Ok(copy_tree(&src, &dst, mode, is_move, &rules))
            })
            .await;
        r.unwrap_or_else(pool_failed)
    }

    /// COPY of the file `src` (whose `lstat` is `entry`) over `dst`:
    /// NGINX's `ngx_copy_file` with the source's mode and time.
    pub async fn dav_copy_file(
        &self,
        src: &Path,
        dst: &Path,
        entry: DavEntry,
        rules: &PathRules,
    ) -> DavDone {
        let (src, dst, rules) = (src.to_path_buf(), dst.to_path_buf(), rules.clone());
        let r = self
            .run(Lane::Bulk, move || {
                let mut done = DavDone::default();
                if let Err(e) = beneath(&dst, &rules) {
                    lines_of(&mut done, &e, 404, "open", &dst);
                    return Ok(done);
                }
                if let Err(line) = copy_file(&src, &dst, entry, &rules) {
                    done.lines.push(line);
                    done.failed = Some(500);
                }
                Ok(done)
            })
            .await;
        r.unwrap_or_else(pool_failed)
    }

    /// MOVE of the file `src` to `dst`: NGINX's `ngx_ext_rename_file`
    /// with the missing directories made (`path_access`), the mode and
    /// time kept; `Err` is the crit line.
    pub async fn dav_move_file(
        &self,
        src: &Path,
        dst: &Path,
        path_access: u32,
        rules: &PathRules,
    ) -> Result<(), String> {
        let (src, dst, rules) = (src.to_path_buf(), dst.to_path_buf(), rules.clone());
        let how = Rename {
            access: 0,
            path_access,
            mtime: None,
            create_path: true,
            delete_src: false,
        };
        let r = self
            .run(Lane::Short, move || {
                if let Err(e) = beneath(&dst, &rules) {
                    return Ok(Err(dav_error(&e, 404, "rename", &dst).1.text));
                }
                Ok(ext_rename(&src, None, &dst, &how))
            })
            .await;
        r.unwrap_or_else(|e| Err(format!("rename() failed {}", crate::util::errno_text(&e))))
    }
}

/// A call the pool did not run (full or stopping): 503, or 500.
fn pool_failed(e: io::Error) -> DavDone {
    let f = super::Failure::of(&e, "dav", "");
    DavDone {
        lines: vec![DavLine {
            crit: f.crit,
            text: f.line,
        }],
        failed: Some(f.status),
    }
}

/// `ngx_http_dav_delete_path`. Blocking.
fn delete_path(path: &Path, dir: bool, rules: &PathRules) -> DavDone {
    let mut done = DavDone::default();
    if let Err(e) = beneath(path, rules) {
        lines_of(&mut done, &e, 404, "lstat", path);
        return done;
    }
    if !dir {
        if let Err(e) = std::fs::remove_file(path) {
            lines_of(&mut done, &e, 404, "unlink", path);
        }
        return done;
    }
    if let Err(e) = walk(path, &mut |p, kind| delete_entry(&mut done, p, kind)) {
        lines_of(&mut done, &e, 0, "opendir", path);
        done.failed = Some(500);
        return done;
    }
    if let Err(e) = std::fs::remove_dir(path) {
        lines_of(&mut done, &e, 404, "rmdir", path);
    }
    done
}

/// One entry of a tree being deleted: files and links unlinked,
/// directories removed after their contents.
fn delete_entry(done: &mut DavDone, p: &Path, kind: Visit<'_>) {
    let (r, op) = match kind {
        Visit::File(_) | Visit::Other => (std::fs::remove_file(p), "unlink"),
        Visit::DirStart(_) => return,
        Visit::DirEnd(_) => (std::fs::remove_dir(p), "rmdir"),
    };
    if let Err(e) = r {
        lines_of(done, &e, 0, op, p);
    }
}

/// What a walk meets.
enum Visit<'m> {
    /// A regular file.
    File(&'m Metadata),
    /// A directory, before its entries.
    DirStart(&'m Metadata),
    /// A directory, after its entries.
    DirEnd(&'m Metadata),
    /// A link or any other kind (never followed).
    Other,
}

/// NGINX's `ngx_walk_tree` below `dir` (not `dir` itself), by `lstat`.
/// Blocking.
fn walk(dir: &Path, f: &mut dyn FnMut(&Path, Visit<'_>)) -> io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if m.is_dir() {
            f(&p, Visit::DirStart(&m));
            walk(&p, f)?;
            f(&p, Visit::DirEnd(&m));
        } else if m.is_file() {
            f(&p, Visit::File(&m));
        } else {
            f(&p, Visit::Other);
        }
    }
    Ok(())
}

/// COPY or MOVE of a directory (see [`Io::dav_copy_tree`]). Blocking.
fn copy_tree(src: &Path, dst: &Path, mode: u32, is_move: bool, rules: &PathRules) -> DavDone {
    let mut done = DavDone::default();
    if let Err(e) = beneath(dst, rules).and_then(|_| beneath(src, rules)) {
        lines_of(&mut done, &e, 404, "mkdir", dst);
        return done;
    }
    if is_move && std::fs::rename(src, dst).is_ok() {
        return done;
    }
    if let Err(e) = rustix::fs::mkdir(dst, rustix::fs::Mode::from_raw_mode(mode)) {
        lines_of(&mut done, &e.into(), 404, "mkdir", dst);
        return done;
    }
    let target = |p: &Path| -> PathBuf { dst.join(p.strip_prefix(src).unwrap_or(p)) };
    let walked = walk(src, &mut |p, kind| match kind {
        Visit::DirStart(m) => {
            let to = target(p);
            let a = dir_access(m.permissions().mode() & 0o777);
            if let Err(e) = rustix::fs::mkdir(&to, rustix::fs::Mode::from_raw_mode(a)) {
                lines_of(&mut done, &e.into(), 0, "mkdir", &to);
            }
        }
        Visit::DirEnd(m) => {
            let to = target(p);
            if let Err(e) = File::open(&to).and_then(|f| f.set_times(file_times(m.mtime()))) {
                let text = format!(
                    "utimes() \"{}\" failed {}",
                    to.display(),
                    crate::util::errno_text(&e)
                );
                done.lines.push(DavLine { crit: true, text });
            }
        }
        Visit::File(m) => {
            if let Err(line) = copy_file(p, &target(p), DavEntry::of(m), rules) {
                done.lines.push(line);
            }
        }
        Visit::Other => {}
    });
    if let Err(e) = walked {
        lines_of(&mut done, &e, 0, "opendir", src);
        done.failed = Some(500);
        return done;
    }
    if is_move {
        let d = delete_path(src, true, rules);
        done.lines.extend(d.lines);
        done.failed = d.failed;
    }
    done
}

/// NGINX's `ngx_copy_file`: `dst` truncated (or made with the source's
/// mode), the bytes copied, the time set. Blocking.
fn copy_file(src: &Path, dst: &Path, entry: DavEntry, rules: &PathRules) -> Result<(), DavLine> {
    let crit = |op: &str, p: &Path, e: &io::Error| DavLine {
        crit: true,
        text: format!(
            "{op}() \"{}\" failed {}",
            p.display(),
            crate::util::errno_text(e)
        ),
    };
    let nofollow = if rules.no_symlinks {
        libc::O_NOFOLLOW
    } else {
        0
    };
    let mut from = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nofollow)
        .open(src)
        .map_err(|e| crit("open", src, &e))?;
    let mut to = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(entry.mode)
        .custom_flags(nofollow)
        .open(dst)
        .map_err(|e| crit("open", dst, &e))?;
    std::io::copy(&mut from, &mut to).map_err(|e| crit("write", dst, &e))?;
    to.set_times(file_times(entry.mtime))
        .map_err(|e| crit("utimes", dst, &e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("porter-dav-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_tree_is_copied_and_deleted_without_following_links() {
        let d = dir("tree");
        let outside = d.join("outside");
        std::fs::write(&outside, "keep").unwrap();
        std::fs::create_dir_all(d.join("src/sub")).unwrap();
        std::fs::write(d.join("src/a"), "A").unwrap();
        std::fs::write(d.join("src/sub/b"), "B").unwrap();
        std::fs::set_permissions(d.join("src/a"), std::fs::Permissions::from_mode(0o640)).unwrap();
        std::os::unix::fs::symlink(&outside, d.join("src/link")).unwrap();
        let io = Io::inline();
        let rules = PathRules::default();
        let done = io
            .dav_copy_tree(&d.join("src"), &d.join("dst"), 0o755, false, &rules)
            .await;
        assert_eq!(done.failed, None, "{:?}", done.lines);
        assert_eq!(std::fs::read(d.join("dst/a")).unwrap(), b"A");
        assert_eq!(std::fs::read(d.join("dst/sub/b")).unwrap(), b"B");
        let mode = std::fs::metadata(d.join("dst/a"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o640, "the file's mode is kept");
        assert!(!d.join("dst/link").exists(), "a link is not copied");
        let done = io.dav_delete(&d.join("src"), true, &rules).await;
        assert_eq!(done.failed, None, "{:?}", done.lines);
        assert!(!d.join("src").exists());
        assert_eq!(
            std::fs::read(&outside).unwrap(),
            b"keep",
            "a link's target stays"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn disable_symlinks_refuses_a_path_through_a_link() {
        let d = dir("links");
        std::fs::create_dir_all(d.join("root")).unwrap();
        std::fs::create_dir_all(d.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(d.join("elsewhere"), d.join("root/out")).unwrap();
        let rules = PathRules {
            no_symlinks: true,
            root: Some(d.join("root").display().to_string()),
            ..PathRules::default()
        };
        let io = Io::inline();
        let e = io
            .dav_mkdir(&d.join("root/out/new"), 0o700, &rules)
            .await
            .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
        assert_eq!(dav_error(&e, 404, "mkdir", Path::new("/x")).0, 403);
        assert!(!d.join("elsewhere/new").exists());
        io.dav_mkdir(&d.join("root/in"), 0o700, &rules)
            .await
            .unwrap();
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn errors_map_to_nginx_statuses() {
        let st = |n| {
            dav_error(
                &io::Error::from_raw_os_error(n),
                409,
                "mkdir",
                Path::new("/p"),
            )
            .0
        };
        assert_eq!(st(libc::ENOENT), 409);
        assert_eq!(st(libc::EACCES), 403);
        assert_eq!(st(libc::EEXIST), 405);
        assert_eq!(st(libc::ENOSPC), 507);
        assert_eq!(st(libc::EIO), 500);
    }
}
