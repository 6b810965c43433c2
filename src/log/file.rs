//! Log files: where the writer thread's lines land, and their reopening.
//!
//! A config load opens each path once ([`LogFiles`]); every open file is
//! also remembered in a process-wide list so that SIGUSR1 (`porter -s
//! reopen`) can reopen them all, as NGINX's `ngx_reopen_files`. The master
//! opens the new files (it keeps its privileges; NGINX also gives the file
//! to the workers' user) and hands them to the log thread, which switches
//! between two batches: every line queued before the switch is in the old
//! file, every line after it in the new one, none lost or written twice.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use crate::util::errno_text;

/// Where a log file's lines go.
#[derive(Debug)]
enum Sink {
    /// A file opened for appending; replaced on reopen.
    File(Mutex<File>),
    /// The process's standard error (`stderr`, `/dev/stderr`).
    Stderr,
    /// The process's standard output (`/dev/stdout`): written to the
    /// descriptor rather than opened, which fails on a socket (ENXIO).
    Stdout,
    /// `syslog:...`: datagrams, sent by the thread that logs (`syslog.rs`).
    Syslog(super::syslog::SyslogPeer),
}

/// An open log file (or stderr), written only by the writer thread.
#[derive(Debug)]
pub struct LogFile {
    path: PathBuf,
    sink: Sink,
}

/// Every file opened and still in use, for [`reopen_all`].
static OPEN: Mutex<Vec<Weak<LogFile>>> = Mutex::new(Vec::new());

/// Opens `path` for appending, created 0644 as NGINX does.
pub(super) fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o644)
        .open(path)
}

impl LogFile {
    /// Opens `path` for appending (created 0644 as NGINX does).
    pub fn open(path: &Path) -> io::Result<Arc<LogFile>> {
        let sink = match path.to_str() {
            Some("stderr" | "/dev/stderr") => Sink::Stderr,
            Some("/dev/stdout") => Sink::Stdout,
            _ => Sink::File(Mutex::new(open_append(path)?)),
        };
        let f = Arc::new(LogFile {
            path: path.to_path_buf(),
            sink,
        });
        if matches!(f.sink, Sink::File(_)) {
            let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
            open.retain(|w| w.strong_count() > 0);
            open.push(Arc::downgrade(&f));
        }
        Ok(f)
    }

    /// A `syslog:ARGS` destination (`args` is what follows `syslog:`).
    pub fn syslog(args: &str) -> Result<Arc<LogFile>, String> {
        Ok(Arc::new(LogFile {
            path: PathBuf::from(format!("syslog:{args}")),
            sink: Sink::Syslog(super::syslog::SyslogPeer::parse(args)?),
        }))
    }

    /// The syslog peer, when this is a `syslog:` destination.
    pub fn syslog_peer(&self) -> Option<&super::syslog::SyslogPeer> {
        match &self.sink {
            Sink::Syslog(p) => Some(p),
            _ => None,
        }
    }

    /// The process's standard error.
    pub fn stderr() -> Arc<LogFile> {
        Arc::new(LogFile {
            path: PathBuf::from("stderr"),
            sink: Sink::Stderr,
        })
    }

    /// The path as configured.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True for the standard error.
    pub fn is_stderr(&self) -> bool {
        matches!(self.sink, Sink::Stderr)
    }

    pub(super) fn write_all(&self, buf: &[u8]) -> io::Result<()> {
        match &self.sink {
            Sink::File(f) => (&*f.lock().unwrap_or_else(|e| e.into_inner())).write_all(buf),
            Sink::Stderr => io::stderr().lock().write_all(buf),
            Sink::Stdout => io::stdout().lock().write_all(buf),
            Sink::Syslog(p) => {
                for line in buf.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                    p.send(None, line);
                }
                Ok(())
            }
        }
    }

    /// Puts `file` in place of the open one (the log thread's switch).
    pub(super) fn replace(&self, file: File) {
        if let Sink::File(f) = &self.sink {
            *f.lock().unwrap_or_else(|e| e.into_inner()) = file;
        }
    }
}

/// A file reopened by [`open_again`], waiting for the log thread's switch.
pub type Reopened = (Arc<LogFile>, File);

/// Opens every log file again under its path (after a rotation renamed
/// it), as the master does on SIGUSR1; with `owner`, a file created or
/// found with another owner is given to that user (NGINX's `chown` to the
/// workers' user) and made readable and writable by it. Returns the files
/// to switch to and one message per failure (the old file stays in use).
pub fn open_again(owner: Option<u32>) -> (Vec<Reopened>, Vec<String>) {
    let files: Vec<Arc<LogFile>> = {
        let open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
        open.iter().filter_map(Weak::upgrade).collect()
    };
    let mut done = Vec::new();
    let mut failed = Vec::new();
    for f in files {
        let opened = open_append(&f.path)
            .map_err(|e| format!("open() \"{}\" failed {}", f.path.display(), errno_text(&e)));
        match opened.and_then(|file| give_to(&f.path, file, owner)) {
            Ok(file) => done.push((f, file)),
            Err(e) => failed.push(e),
        }
    }
    (done, failed)
}

fn give_to(path: &Path, file: File, owner: Option<u32>) -> Result<File, String> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let Some(uid) = owner else { return Ok(file) };
    let fail = |call: &str, e: io::Error| {
        format!("{call}(\"{}\") failed {}", path.display(), errno_text(&e))
    };
    let meta = file.metadata().map_err(|e| fail("fstat", e))?;
    if meta.uid() != uid {
        std::os::unix::fs::fchown(&file, Some(uid), None).map_err(|e| fail("chown", e))?;
    }
    let mode = meta.mode();
    if mode & 0o600 != 0o600 {
        file.set_permissions(std::fs::Permissions::from_mode((mode | 0o600) & 0o7777))
            .map_err(|e| fail("chmod", e))?;
    }
    Ok(file)
}

/// Opens log files once per config load, so two directives naming the same
/// path share one file.
#[derive(Default)]
pub struct LogFiles {
    open: HashMap<PathBuf, Arc<LogFile>>,
}

impl LogFiles {
    /// Returns the shared handle for `path` (`stderr` is the standard error).
    pub fn get(&mut self, path: &Path) -> Result<Arc<LogFile>, String> {
        if path == Path::new("stderr") {
            return Ok(LogFile::stderr());
        }
        if let Some(f) = self.open.get(path) {
            return Ok(f.clone());
        }
        let f = LogFile::open(path).map_err(|e| {
            format!(
                "open() \"{}\" failed ({}: {})",
                path.display(),
                e.raw_os_error().unwrap_or(0),
                crate::util::strerror(&e)
            )
        })?;
        self.open.insert(path.to_path_buf(), f.clone());
        Ok(f)
    }
}
