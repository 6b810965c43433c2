//! `disable_symlinks if_not_owner`: NGINX's walk of a path one component
//! at a time (`ngx_openat_file_owner`). Each component is opened
//! following links, then compared with the entry itself
//! (`fstatat(AT_SYMLINK_NOFOLLOW)`): a link whose owner is not the owner
//! of what it leads to refuses the path with `ELOOP` (403), as in NGINX.
//! Also a component that was no link is compared, since it may have been
//! one when it was opened.
//!
//! `openat2` has no flag for an owner rule, so this is by hand; but it
//! runs only after `RESOLVE_NO_SYMLINKS` met a link (`Io::open`,
//! `Io::stat`): a path without links costs what `disable_symlinks on`
//! costs. The walk is blocking and always runs where the route runs its
//! blocking calls (the pool's short lane), never on the event loop.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, Mode, OFlags, CWD};

use super::open::{PathRules, PATH_FLAGS};

/// Opens `path` with `flags`, every link on it (beneath `root` with
/// `from=`, else from `/`) owned as its target is.
pub(super) fn open(path: &Path, rules: &PathRules, flags: OFlags) -> io::Result<OwnedFd> {
    let text = path
        .to_str()
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
    let from = rules
        .root
        .as_deref()
        .filter(|_| rules.from)
        .and_then(|r| text.strip_prefix(r).map(|rest| (r, rest)));
    let (mut dir, rest) = match from {
        Some((root, rest)) => (Some(rustix::fs::open(root, search(), Mode::empty())?), rest),
        None => match text.strip_prefix('/') {
            Some(rest) => (Some(rustix::fs::open("/", search(), Mode::empty())?), rest),
            None => (None, text),
        },
    };
    let mut parts = rest.split('/').peekable();
    while let Some(part) = parts.next() {
        if parts.peek().is_none() {
            // The last component; an empty one (a trailing `/`) is the
            // directory reached, opened again with the caller's flags.
            return match part {
                "" => Ok(rustix::fs::openat(at(&dir), ".", flags, Mode::empty())?),
                _ => owned_open(at(&dir), part, flags),
            };
        }
        if part.is_empty() {
            continue;
        }
        dir = Some(owned_open(at(&dir), part, search())?);
    }
    unreachable!("split yields at least one part")
}

/// The directory a walk is at (the working directory for a relative
/// path).
fn at(dir: &Option<OwnedFd>) -> BorrowedFd<'_> {
    dir.as_ref().map_or(CWD, |d| d.as_fd())
}

/// NGINX's `NGX_FILE_SEARCH|NGX_FILE_NONBLOCK` for a directory on the way.
fn search() -> OFlags {
    PATH_FLAGS | OFlags::NONBLOCK
}

/// `name` under `dir` opened following links, refused when the entry and
/// what was opened have different owners.
fn owned_open(dir: BorrowedFd<'_>, name: &str, flags: OFlags) -> io::Result<OwnedFd> {
    let fd = rustix::fs::openat(dir, name, flags, Mode::empty())?;
    let entry = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    let target = rustix::fs::fstat(&fd)?;
    if entry.st_uid != target.st_uid {
        return Err(io::Error::from_raw_os_error(libc::ELOOP));
    }
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn rules(root: &Path, from: bool) -> PathRules {
        PathRules {
            no_symlinks: true,
            if_not_owner: true,
            root: Some(root.to_str().unwrap().to_string()),
            from,
        }
    }

    #[test]
    fn links_owned_as_their_target_are_followed_others_refused() {
        let d = std::env::temp_dir().join(format!("porter-owner-walk-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("sub")).unwrap();
        std::fs::write(d.join("sub/file"), b"x").unwrap();
        symlink(d.join("sub"), d.join("same")).unwrap();
        symlink(d.join("sub/file"), d.join("other")).unwrap();
        let ours = rustix::process::geteuid().as_raw();
        let theirs = if ours == 0 { 65534 } else { ours };
        let chowned = rustix::fs::chownat(
            CWD,
            d.join("other").as_path(),
            Some(rustix::fs::Uid::from_raw(theirs)),
            None,
            AtFlags::SYMLINK_NOFOLLOW,
        )
        .is_ok();
        let r = rules(&d, false);
        assert!(open(&d.join("same/file"), &r, OFlags::RDONLY).is_ok());
        assert!(open(&d.join("sub/"), &r, OFlags::RDONLY).is_ok());
        let e = open(&d.join("nope/file"), &r, OFlags::RDONLY).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
        if chowned && ours == 0 {
            let e = open(&d.join("other"), &r, OFlags::RDONLY).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
        }
        let _ = std::fs::remove_dir_all(&d);
    }
}
