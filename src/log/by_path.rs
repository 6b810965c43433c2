//! Access logs whose path has variables (`access_log logs/$host.log`).
//!
//! The worker renders the path with the line and hands both to this
//! module's thread, which opens the file there, so an event loop never
//! waits on a disk. It does what NGINX's `ngx_http_log_script_write`
//! does: the request's root is tested first (no such directory: no line,
//! as NGINX does not create logs for a root that is not there), then the
//! file is opened, written and closed — or kept open under
//! `open_log_file_cache`, NGINX's `ngx_open_cached_file` rules: at most
//! `max` files, a file kept open from its `min_uses`-th use, forgotten
//! after `inactive` without one and opened anew after `valid`; a file
//! that cannot be opened is not remembered, and a new file takes the
//! place of the least recently used one. The thread runs as the workers'
//! user (`user`), so a rendered path opens with their rights, not the
//! master's.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use crate::util::thread_user::ThreadUser;

/// `open_log_file_cache max=N [inactive=TIME] [min_uses=N] [valid=TIME]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenLogCache {
    /// `max`: files kept at most.
    pub max: usize,
    /// `inactive` (NGINX's default 10 s).
    pub inactive: Duration,
    /// `min_uses` (default 1): uses within `inactive` before a file
    /// stays open.
    pub min_uses: u32,
    /// `valid` (default 60 s): how long an open file is used before it
    /// is opened again under its name.
    pub valid: Duration,
}

/// One line for a rendered path.
pub(super) struct PathLine {
    /// The rendered path.
    pub path: PathBuf,
    /// The request's `$document_root`, tested first.
    pub root: String,
    /// The line, compressed already when the log says `gzip`.
    pub data: Vec<u8>,
    /// The location's `open_log_file_cache`.
    pub cache: Option<Arc<OpenLogCache>>,
}

/// Lines queued at most: a burst waits here, more are dropped.
const QUEUE_LINES: usize = 16 * 1024;

static TX: OnceLock<SyncSender<PathLine>> = OnceLock::new();

/// Starts the thread (once), switched to `user` when there is one.
pub fn start(user: Option<ThreadUser>) {
    TX.get_or_init(|| {
        let (tx, rx) = mpsc::sync_channel(QUEUE_LINES);
        let spawned = std::thread::Builder::new()
            .name("porter-log-path".into())
            .spawn(move || {
                if let Some(u) = user {
                    if u.switch().is_err() {
                        // Never write with the master's rights.
                        return;
                    }
                }
                run(rx)
            });
        if spawned.is_err() {
            super::count_dropped(1);
        }
        tx
    });
}

/// Queues `line` for the thread; dropped (and counted) when the queue is
/// full or the thread is not running.
pub(super) fn submit(line: PathLine) {
    match TX.get() {
        Some(tx) if tx.try_send(line).is_ok() => {}
        _ => super::count_dropped(1),
    }
}

fn run(rx: Receiver<PathLine>) {
    // One set of open files per `open_log_file_cache` of the loaded
    // configurations; a set goes with its configuration.
    let mut caches: Vec<(Weak<OpenLogCache>, Files)> = Vec::new();
    while let Ok(l) = rx.recv() {
        caches.retain(|(w, _)| w.strong_count() > 0);
        if !std::fs::metadata(&l.root).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        let written = match &l.cache {
            None => super::file::open_append(&l.path).and_then(|mut f| f.write_all(&l.data)),
            Some(c) => {
                let at = match caches
                    .iter()
                    .position(|(w, _)| w.as_ptr() == Arc::as_ptr(c))
                {
                    Some(i) => i,
                    None => {
                        caches.push((Arc::downgrade(c), Files::default()));
                        caches.len() - 1
                    }
                };
                caches[at].1.write(c, &l.path, &l.data, Instant::now())
            }
        };
        if written.is_err() {
            super::count_dropped(1);
        }
    }
}

/// A file `open_log_file_cache` knows.
struct Entry {
    path: PathBuf,
    file: Option<File>,
    uses: u32,
    opened: Instant,
    used: Instant,
}

/// The files of one `open_log_file_cache`, most recently used last.
#[derive(Default)]
struct Files {
    entries: Vec<Entry>,
}

impl Files {
    /// Writes `data` to `path` through the cache `c` at time `now`.
    fn write(
        &mut self,
        c: &OpenLogCache,
        path: &Path,
        data: &[u8],
        now: Instant,
    ) -> std::io::Result<()> {
        self.entries
            .retain(|e| now.duration_since(e.used) <= c.inactive);
        let Some(i) = self.entries.iter().position(|e| e.path == path) else {
            let file = super::file::open_append(path)?;
            if self.entries.len() >= c.max.max(1) {
                self.entries.remove(0);
            }
            let r = (&file).write_all(data);
            self.entries.push(Entry {
                path: path.to_path_buf(),
                file: (c.min_uses <= 1).then_some(file),
                uses: 1,
                opened: now,
                used: now,
            });
            return r;
        };
        let mut e = self.entries.remove(i);
        e.uses += 1;
        e.used = now;
        if e.file.is_some() && now.duration_since(e.opened) >= c.valid {
            e.file = None;
        }
        if e.file.is_none() {
            // A file that cannot be opened is forgotten.
            e.file = Some(super::file::open_append(path)?);
            e.opened = now;
        }
        let r = e.file.as_ref().map_or(Ok(()), |mut f| f.write_all(data));
        if e.uses < c.min_uses {
            e.file = None;
        }
        self.entries.push(e);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache() -> OpenLogCache {
        OpenLogCache {
            max: 3,
            inactive: Duration::from_secs(20),
            min_uses: 2,
            valid: Duration::from_secs(60),
        }
    }

    fn lines(dir: &Path, name: &str) -> usize {
        std::fs::read_to_string(dir.join(name))
            .map(|s| s.lines().count())
            .unwrap_or(0)
    }

    /// access_log.t's cache checks: files kept open from their second
    /// use still take lines once their directory moved away; the least
    /// recently used one was closed to make room and loses them.
    #[test]
    fn kept_files_outlive_a_moved_directory() {
        let top = std::env::temp_dir().join(format!("porter-by-path-{}", std::process::id()));
        let dir = top.join("dir");
        std::fs::create_dir_all(&dir).unwrap();
        let c = cache();
        let mut files = Files::default();
        let now = Instant::now();
        for n in ["lru", "lru", "once", "first", "first", "second", "second"] {
            files.write(&c, &dir.join(n), b"/\n", now).unwrap();
        }
        let moved = top.join("moved");
        std::fs::rename(&dir, &moved).unwrap();
        for n in ["lru", "once", "first", "second"] {
            let _ = files.write(&c, &dir.join(n), b"/\n", now);
        }
        let counts: Vec<usize> = ["lru", "once", "first", "second"]
            .iter()
            .map(|n| lines(&moved, n))
            .collect();
        std::fs::remove_dir_all(&top).unwrap();
        assert_eq!(counts, [2, 1, 3, 3]);
    }
}
