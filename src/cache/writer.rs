//! Storing a response: [`CacheZone::begin`] creates the temp file and
//! writes a header, [`CacheWriter::write`] appends each body piece as it
//! arrives, [`CacheWriter::finish`] completes the header and renames the
//! file over the entry's name — the commit point — before the index learns
//! of it; [`CacheWriter::abort`] (or a writer dropped unfinished) removes
//! the temp file. Every call takes the writer's own I/O route.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::{disk_size, enoent, format, verify, CacheZone, EntryMeta, KeyHash, TempPath};
use crate::disk::Io;
use crate::log::{Level, RequestLog};

/// Temp file names: `.<hex>.<run>.<seq>`, unique per process run, so the
/// loader removes leftovers of an earlier run and never a file a writer of
/// this run is filling.
static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

fn run_id() -> u64 {
    static RUN: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *RUN.get_or_init(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        (u64::from(std::process::id()) << 32) ^ t.as_nanos() as u64
    })
}

/// The run a temp file name belongs to, if it is one of ours.
pub(crate) fn temp_run(name: &str) -> Option<u64> {
    let rest = name.strip_prefix('.')?;
    let mut parts = rest.split('.');
    let (_hex, run, _seq) = (parts.next()?, parts.next()?, parts.next()?);
    u64::from_str_radix(run, 16).ok()
}

pub(crate) fn is_own_temp(name: &str) -> bool {
    temp_run(name) == Some(run_id())
}

impl CacheZone {
    /// Starts storing a response under `meta.key`: creates the temp file
    /// (in the entry's level directory with `use_temp_path=off` or when
    /// `temp` is `None`, else under `temp`) and writes the header. Write
    /// the body with [`CacheWriter::write`], then [`CacheWriter::finish`]
    /// or [`CacheWriter::abort`].
    pub async fn begin(
        self: &Arc<Self>,
        io: &Io,
        temp: Option<&TempPath>,
        meta: EntryMeta,
        log: RequestLog,
    ) -> io::Result<CacheWriter> {
        let hash = KeyHash::of(meta.key.as_bytes());
        let hex = hash.hex();
        let seq = TEMP_SEQ.fetch_add(1, Ordering::Relaxed);
        let use_temp = self.spec.lock().unwrap().use_temp_path;
        let temp_path = match temp.filter(|_| use_temp) {
            Some(t) => {
                let name = format!("{seq:010}");
                t.levels
                    .dir_of(&t.path, &name)
                    .join(format!(".{hex}.{:x}.{seq}", run_id()))
            }
            None => self
                .levels
                .dir_of(&self.path, &hex)
                .join(format!(".{hex}.{:x}.{seq}", run_id())),
        };
        let header = format::encode(&meta, 0, 0);
        let mut w = CacheWriter {
            zone: self.clone(),
            hash,
            io: io.clone(),
            temp: temp_path,
            file: None,
            header,
            valid_until: meta.valid_until,
            body_len: 0,
            body_crc: 0,
            log,
            done: false,
            failed: false,
        };
        let file = match io.create(&w.temp).await {
            Err(e) if enoent(&e) => {
                let dir = w.temp.parent().unwrap_or(Path::new("/")).to_path_buf();
                match io.mkdir_all(&dir).await {
                    Ok(()) => io.create(&w.temp).await,
                    Err(e) => Err(w.fail("mkdir", &dir, e)),
                }
            }
            r => r,
        };
        let file = match file {
            Ok(f) => f,
            Err(e) => {
                w.done = true;
                if w.failed {
                    return Err(e);
                }
                let p = w.temp.clone();
                return Err(w.fail("open", &p, e));
            }
        };
        w.file = Some(file);
        let header: Arc<[u8]> = Arc::from(&w.header[..]);
        if let Err(e) = w.write_raw(header, 0).await {
            w.remove_temp().await;
            w.done = true;
            return Err(e);
        }
        Ok(w)
    }
}

/// Stores one response: header and body into a temp file, then renamed
/// into place. Memory stays bounded: each chunk is written as it arrives.
///
/// A writer dropped without `finish` or `abort` hands its temp file to the
/// zone's manager thread for removal.
pub struct CacheWriter {
    zone: Arc<CacheZone>,
    hash: KeyHash,
    io: Io,
    temp: PathBuf,
    file: Option<Arc<std::fs::File>>,
    header: Vec<u8>,
    valid_until: i64,
    body_len: u64,
    /// CRC-32C of the body written so far (`verify.rs`).
    body_crc: u32,
    log: RequestLog,
    done: bool,
    failed: bool,
}

impl std::fmt::Debug for CacheWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheWriter")
            .field("temp", &self.temp)
            .field("body_len", &self.body_len)
            .finish()
    }
}

impl CacheWriter {
    /// The temp file being written.
    pub fn temp_path(&self) -> &Path {
        &self.temp
    }

    /// Body bytes written so far.
    pub fn body_len(&self) -> u64 {
        self.body_len
    }

    /// CRC-32C of the body written so far.
    pub fn body_crc(&self) -> u32 {
        self.body_crc
    }

    /// Logs the first failure (one line per fill, whatever follows) and
    /// marks the writer failed.
    fn fail(&mut self, op: &str, path: &Path, e: io::Error) -> io::Error {
        if !self.failed {
            self.failed = true;
            let text = match crate::disk::disk_error(&e) {
                Some(d) => d.to_string(),
                None => crate::util::errno_text(&e),
            };
            self.log.line(
                Level::Crit,
                format_args!("{op}() \"{}\" failed {text}", path.display()),
            );
            // Is the zone's directory still usable? The manager looks.
            self.zone.suspect();
        }
        e
    }

    async fn write_raw(&mut self, data: Arc<[u8]>, at: u64) -> io::Result<()> {
        if self.failed {
            return Err(io::Error::other("cache write already failed"));
        }
        let file = self.file.clone().expect("open");
        match self.io.write_at(&file, data, at).await {
            Ok(()) => Ok(()),
            Err(e) => {
                let p = self.temp.clone();
                Err(self.fail("pwrite", &p, e))
            }
        }
    }

    /// Appends a body chunk, folding it into the body's checksum on the
    /// way (no second pass over the body). On error (ENOSPC…) one line is
    /// logged and the caller should [`abort`](Self::abort).
    pub async fn write(&mut self, chunk: Arc<[u8]>) -> io::Result<()> {
        let at = self.header.len() as u64 + self.body_len;
        let n = chunk.len() as u64;
        let crc = verify::append(self.body_crc, &chunk);
        self.write_raw(chunk, at).await?;
        self.body_len += n;
        self.body_crc = crc;
        Ok(())
    }

    /// Completes the entry: rewrites the header with the body length and
    /// checksum, renames the temp file over the entry (creating level
    /// directories as needed) and only then inserts it into the index. Concurrent
    /// writers of one key never mix: each has its own temp file and the
    /// last complete rename wins. On error the temp file is removed.
    pub async fn finish(mut self) -> io::Result<()> {
        let r = self.finish_inner().await;
        if r.is_err() {
            self.remove_temp().await;
        }
        self.done = true;
        r
    }

    async fn finish_inner(&mut self) -> io::Result<()> {
        format::complete(&mut self.header, self.body_len, self.body_crc);
        let header: Arc<[u8]> = Arc::from(&self.header[..]);
        self.write_raw(header, 0).await?;
        let dst = self.zone.entry_path(&self.hash);
        let r = match self.io.rename(&self.temp, &dst).await {
            Err(e) if enoent(&e) => {
                let dir = dst.parent().unwrap_or(Path::new("/")).to_path_buf();
                match self.io.mkdir_all(&dir).await {
                    Ok(()) => self.io.rename(&self.temp, &dst).await,
                    Err(e) => return Err(self.fail("mkdir", &dir, e)),
                }
            }
            r => r,
        };
        if let Err(e) = r {
            let what = format!("{}\" to \"{}", self.temp.display(), dst.display());
            return Err(self.fail("rename", Path::new(&what), e));
        }
        let size = disk_size(self.header.len() as u64 + self.body_len);
        let mut ev = Vec::new();
        self.zone
            .index
            .stored(self.hash, size, self.valid_until, Instant::now(), &mut ev);
        self.zone.discard(ev);
        Ok(())
    }

    /// Gives the entry up (client or upstream failure, ENOSPC): the temp
    /// file is removed and nothing becomes visible.
    pub async fn abort(mut self) {
        self.remove_temp().await;
        self.done = true;
    }

    async fn remove_temp(&mut self) {
        self.file = None;
        match self.io.unlink(&self.temp).await {
            Ok(()) => {}
            Err(e) if enoent(&e) => {}
            // The pool refused: leave it to the manager thread.
            Err(_) => self.zone.discard_path(self.temp.clone()),
        }
    }
}

impl Drop for CacheWriter {
    fn drop(&mut self) {
        if !self.done {
            self.zone.discard_path(std::mem::take(&mut self.temp));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_carry_the_run() {
        let me = format!(".{}.{:x}.7", KeyHash::of(b"k").hex(), run_id());
        assert!(is_own_temp(&me));
        let other = format!(".{}.{:x}.7", KeyHash::of(b"k").hex(), run_id() ^ 1);
        assert!(!is_own_temp(&other));
        assert!(temp_run(&other).is_some());
        assert_eq!(temp_run(&KeyHash::of(b"k").hex()), None);
    }
}
