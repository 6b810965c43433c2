//! Access and error logs.
//!
//! Event loops never write to a log file themselves: they format a line and
//! hand it to the log writer thread through a bounded channel. When the
//! channel is full (the disk is slow or full), the line is dropped and
//! counted rather than stalling requests. The writer batches whatever is
//! queued into one `write` per file, so a busy server costs few syscalls.
//!
//! Error lines use NGINX's format so users' tooling keeps working:
//! `2026/11/22 08:00:00 [error] PID#TID: *CONN message, client: ...`;
//! a request's lines go through its [`RequestLog`] (`request.rs`).
//! A `syslog:` destination sends its lines as datagrams at once
//! (`syslog.rs`), never through the writer thread.
//! An access log with `gzip` has each batch written as one gzip member,
//! as NGINX compresses each buffer it flushes; one whose path has
//! variables is written by `by_path.rs`'s thread.

pub mod by_path;
pub mod file;
pub mod format;
pub mod request;
pub mod syslog;

use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;

pub use by_path::OpenLogCache;
pub use file::{LogFile, LogFiles};
pub use format::{AccessLog, LogFormat};
pub use request::{RequestLog, Subject};

/// Error log severity, NGINX's names and order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// `emerg`.
    Emerg = 0,
    /// `alert`.
    Alert,
    /// `crit`.
    Crit,
    /// `error`.
    Error,
    /// `warn`.
    Warn,
    /// `notice`.
    Notice,
    /// `info`.
    Info,
    /// `debug`.
    Debug,
}

impl Level {
    /// Parses NGINX's level names.
    pub fn parse(s: &str) -> Option<Level> {
        Some(match s {
            "emerg" => Level::Emerg,
            "alert" => Level::Alert,
            "crit" => Level::Crit,
            "error" => Level::Error,
            "warn" => Level::Warn,
            "notice" => Level::Notice,
            "info" => Level::Info,
            "debug" => Level::Debug,
            _ => return None,
        })
    }

    /// NGINX's name for the level.
    pub fn name(self) -> &'static str {
        match self {
            Level::Emerg => "emerg",
            Level::Alert => "alert",
            Level::Crit => "crit",
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Notice => "notice",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `error_log FILE [LEVEL]`.
#[derive(Debug, Clone)]
pub struct ErrorLogSpec {
    /// Where lines go.
    pub file: Arc<LogFile>,
    /// Lines above this level are dropped.
    pub level: Level,
}

/// The error log of one config generation.
#[derive(Debug, Clone)]
pub struct ErrorLog {
    targets: Arc<Vec<ErrorLogSpec>>,
    max: Level,
}

impl ErrorLog {
    /// An error log writing to `targets`.
    pub fn new(targets: Vec<ErrorLogSpec>) -> ErrorLog {
        let max = targets
            .iter()
            .map(|t| t.level)
            .max()
            .unwrap_or(Level::Emerg);
        ErrorLog {
            targets: Arc::new(targets),
            max,
        }
    }

    /// Where it writes.
    pub fn targets(&self) -> &[ErrorLogSpec] {
        &self.targets
    }

    /// True when a line at `level` would be written somewhere.
    pub fn enabled(&self, level: Level) -> bool {
        level <= self.max
    }

    /// Logs `msg` without connection context.
    pub fn log(&self, level: Level, msg: fmt::Arguments<'_>) {
        self.log_conn(level, None, msg, "");
    }

    /// Logs `msg` for connection `conn`, followed by `ctx` (NGINX's
    /// `, client: ..., server: ..., request: "..."` tail, may be empty).
    pub fn log_conn(&self, level: Level, conn: Option<u64>, msg: fmt::Arguments<'_>, ctx: &str) {
        if !self.enabled(level) {
            return;
        }
        let mut line = String::with_capacity(128);
        use std::fmt::Write as _;
        let _ = write!(
            line,
            "{} [{}] {}#{}: ",
            crate::util::time::error_log_time(),
            level,
            std::process::id(),
            rustix::thread::gettid().as_raw_nonzero()
        );
        if let Some(c) = conn {
            let _ = write!(line, "*{c} ");
        }
        let _ = write!(line, "{msg}{ctx}");
        line.push('\n');
        for t in self.targets.iter().filter(|t| level <= t.level) {
            match t.file.syslog_peer() {
                Some(p) => p.send(Some(level), line.trim_end().as_bytes()),
                None => submit(&t.file, line.as_bytes()),
            }
        }
    }
}

enum Msg {
    Line(Arc<LogFile>, Vec<u8>),
    /// A line of an access log with `gzip=LEVEL`.
    Gzip(Arc<LogFile>, u32, Vec<u8>),
    Flush(SyncSender<()>),
    /// Switch to the reopened files after the lines queued before.
    Reopen(Vec<file::Reopened>, SyncSender<()>),
}

struct Writer {
    tx: SyncSender<Msg>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

static WRITER: OnceLock<Writer> = OnceLock::new();
static DROPPED: AtomicU64 = AtomicU64::new(0);
static STARTED: AtomicU8 = AtomicU8::new(0);

/// Queue capacity in lines: about a second of a busy server's access log.
const QUEUE_LINES: usize = 64 * 1024;

/// Starts the writer thread. Until it runs, lines are written synchronously
/// (only start-up messages are logged then).
pub fn start_writer() {
    WRITER.get_or_init(|| {
        let (tx, rx) = mpsc::sync_channel(QUEUE_LINES);
        let thread = std::thread::Builder::new()
            .name("porter-log".into())
            .spawn(move || writer_loop(rx))
            .expect("spawn log writer thread");
        STARTED.store(1, Ordering::Release);
        Writer {
            tx,
            thread: Mutex::new(Some(thread)),
        }
    });
}

/// Lines dropped because the queue was full.
pub fn dropped_lines() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Waits until every line queued so far is written.
pub fn flush() {
    if let Some(w) = WRITER.get() {
        let (tx, rx) = mpsc::sync_channel(1);
        if w.tx.send(Msg::Flush(tx)).is_ok() {
            let _ = rx.recv();
        }
    }
}

/// Reopens every log file (SIGUSR1, `porter -s reopen`): the files are
/// opened here, on the caller's thread (the master's, with its
/// privileges; `owner` as in [`file::open_again`]), and the log thread
/// switches to them after the lines queued so far. Returns one message
/// per file that could not be reopened (it keeps its old file).
pub fn reopen(owner: Option<u32>) -> Vec<String> {
    let (files, failed) = file::open_again(owner);
    let (tx, rx) = mpsc::sync_channel(1);
    match WRITER.get() {
        Some(w) if STARTED.load(Ordering::Acquire) == 1 => {
            if w.tx.send(Msg::Reopen(files, tx)).is_ok() {
                let _ = rx.recv();
            }
        }
        _ => files.into_iter().for_each(|(f, new)| f.replace(new)),
    }
    failed
}

/// Flushes and stops the writer (at exit).
pub fn shutdown() {
    flush();
    if let Some(w) = WRITER.get() {
        if let Some(t) = w.thread.lock().unwrap().take() {
            drop(t); // detach: the process exits right after
        }
    }
}

/// Counts lines lost (a full queue, a file that could not be written).
pub(crate) fn count_dropped(n: u64) {
    DROPPED.fetch_add(n, Ordering::Relaxed);
}

/// `data` as one gzip member at `level` (NGINX's `ngx_http_log_gzip`).
pub(crate) fn gzip_member(data: &[u8], level: u32) -> Vec<u8> {
    use std::io::Write as _;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
    let _ = enc.write_all(data);
    enc.finish().unwrap_or_default()
}

/// Hands one line of an access log with `gzip=level` to the writer,
/// which compresses what it writes of it at once.
pub fn submit_gzip(file: &Arc<LogFile>, level: u32, line: &[u8]) {
    match WRITER.get() {
        Some(w) if STARTED.load(Ordering::Acquire) == 1 => {
            if w.tx
                .try_send(Msg::Gzip(file.clone(), level, line.to_vec()))
                .is_err()
            {
                count_dropped(1);
            }
        }
        _ => {
            let _ = file.write_all(&gzip_member(line, level));
        }
    }
}

/// Hands one complete line to the writer (a `syslog:` destination's
/// line is sent at once instead, never queued behind disk writes).
pub fn submit(file: &Arc<LogFile>, line: &[u8]) {
    if file.syslog_peer().is_some() {
        let _ = file.write_all(line);
        return;
    }
    match WRITER.get() {
        Some(w) if STARTED.load(Ordering::Acquire) == 1 => {
            match w.tx.try_send(Msg::Line(file.clone(), line.to_vec())) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                    DROPPED.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        _ => {
            let _ = file.write_all(line);
        }
    }
}

fn writer_loop(rx: Receiver<Msg>) {
    // Batch per file: pointer identity of the Arc is the file identity.
    let mut batch: Vec<(Arc<LogFile>, Vec<u8>)> = Vec::new();
    let mut gz: Vec<(Arc<LogFile>, u32, Vec<u8>)> = Vec::new();
    let mut waiters: Vec<SyncSender<()>> = Vec::new();
    while let Ok(first) = rx.recv() {
        let mut next = Some(first);
        let mut reopen = None;
        while let Some(msg) = next {
            match msg {
                Msg::Line(f, line) => match batch.iter_mut().find(|(g, _)| Arc::ptr_eq(g, &f)) {
                    Some((_, buf)) => buf.extend_from_slice(&line),
                    None => batch.push((f, line)),
                },
                Msg::Gzip(f, level, line) => {
                    match gz
                        .iter_mut()
                        .find(|(g, l, _)| Arc::ptr_eq(g, &f) && *l == level)
                    {
                        Some((_, _, buf)) => buf.extend_from_slice(&line),
                        None => gz.push((f, level, line)),
                    }
                }
                Msg::Flush(w) => waiters.push(w),
                Msg::Reopen(files, w) => {
                    // The batch so far belongs to the old files.
                    reopen = Some((files, w));
                    break;
                }
            }
            if batch.iter().map(|(_, b)| b.len()).sum::<usize>() > 1 << 20 {
                break;
            }
            next = rx.try_recv().ok();
        }
        let packed = gz
            .drain(..)
            .map(|(f, level, buf)| (f, gzip_member(&buf, level)));
        for (f, buf) in batch.drain(..).chain(packed) {
            if f.write_all(&buf).is_err() {
                DROPPED.fetch_add(
                    buf.iter().filter(|&&b| b == b'\n').count() as u64,
                    Ordering::Relaxed,
                );
            }
        }
        if let Some((files, w)) = reopen {
            files.into_iter().for_each(|(f, new)| f.replace(new));
            waiters.push(w);
        }
        for w in waiters.drain(..) {
            let _ = w.send(());
        }
    }
}
