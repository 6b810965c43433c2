//! [`CacheZone::lookup`]: a key → an entry ready to send, or a miss. The
//! keys zone answers first (an unknown key after loading costs no disk
//! call; a kept open entry no system call); then the entry file is opened
//! and its header read and checked through the request's I/O route, and a
//! body of at most 1 MiB checked against its checksum (`verify.rs`; a
//! small entry is one read). A file that fails a check is removed, logged
//! once, and is a miss.

use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use super::format::{self, EntryHeader, FormatError, HeaderError};
use super::index::Node;
use super::{disk_size, enoent, open_entries, verify, CacheZone, Entry, KeyHash, Lookup};
use crate::disk::{Io, OpenFile, PathRules};
use crate::log::{Level, RequestLog};

impl CacheZone {
    /// Looks `key` up: the index first, then (for a key it knows has a
    /// file, or any key while the loader runs) the file, whose header is
    /// read and checked. A file that fails a check is removed, logged
    /// once, and the lookup is a miss. Errors are those of the disk layer
    /// itself (pool overflow, EIO): the caller decides (NGINX logs and
    /// goes to the upstream).
    pub async fn lookup(&self, io: &Io, key: &str, log: &RequestLog) -> io::Result<Lookup> {
        let hash = KeyHash::of(key.as_bytes());
        let mut ev = Vec::new();
        let node = self.index.touch(hash, Instant::now(), &mut ev);
        self.discard(ev);
        if !node.exists && self.loaded() {
            return Ok(Lookup::Miss { uses: node.uses });
        }
        if node.exists {
            if let Some(hit) = self.kept(io, &hash, &node) {
                return Ok(hit);
            }
        }
        let path = self.entry_path(&hash);
        // Entries are replaced by rename: never from `open_file_cache`;
        // and the document root's symlink policy does not apply here.
        let file = match io.open(&path, &PathRules::default()).await {
            Ok(f) => f,
            Err(e) if enoent(&e) => {
                if node.exists {
                    // Removed behind our back (an old manager, by hand).
                    self.index.lost(&hash);
                }
                return Ok(Lookup::Miss {
                    uses: node.uses.max(1),
                });
            }
            Err(e) => return Err(e),
        };
        match read_checked(&file, key).await {
            Ok(header) => Ok(self.opened(&hash, &node, file, header)),
            Err(HeaderError::Io(e)) => Err(e),
            Err(HeaderError::Format(f)) => {
                self.bad_file(io, &hash, &file, f, log).await?;
                Ok(Lookup::Miss {
                    uses: node.uses.max(1),
                })
            }
        }
    }

    /// The hit from an entry this worker keeps open, if it is still the
    /// one the keys zone knows (see `open_entries`).
    fn kept(&self, io: &Io, hash: &KeyHash, node: &Node) -> Option<Lookup> {
        let zone = Arc::as_ptr(&self.index) as usize;
        let k = open_entries::get(zone, hash, node.gen, Instant::now())?;
        Some(Lookup::Hit(Box::new(Entry {
            file: OpenFile::new(k.file, k.meta, io.clone()),
            header: k.header,
            path: k.path,
            updating: node.updating(),
        })))
    }

    /// A checked entry just opened: the index learns its validity (or the
    /// entry, when the loader has not seen it yet), and the worker keeps it
    /// open for the next hits.
    fn opened(&self, hash: &KeyHash, node: &Node, file: OpenFile, header: EntryHeader) -> Lookup {
        let valid = header.meta.valid_until;
        let header = Arc::new(header);
        let path: Rc<str> = Rc::from(self.entry_path(hash).to_string_lossy());
        if node.exists {
            self.index.set_valid(hash, valid);
            let kept = open_entries::Kept::new(
                node.gen,
                file.file.clone(),
                file.meta,
                Arc::clone(&header),
                Rc::clone(&path),
            );
            open_entries::put(Arc::as_ptr(&self.index) as usize, hash, kept);
        } else {
            let mut ev = Vec::new();
            let size = disk_size(file.meta.size);
            self.index
                .stored(*hash, size, valid, Instant::now(), &mut ev);
            self.discard(ev);
        }
        Lookup::Hit(Box::new(Entry {
            file,
            header,
            path,
            updating: self.index.updating(hash),
        }))
    }

    /// An entry file that failed a check: one `crit` line, and the file
    /// is removed — the file read, not one a writer renamed into place
    /// meanwhile (whose node is then right as it is).
    pub(super) async fn bad_file(
        &self,
        io: &Io,
        hash: &KeyHash,
        file: &OpenFile,
        why: FormatError,
        log: &RequestLog,
    ) -> io::Result<()> {
        let path = self.entry_path(hash);
        open_entries::forget(Arc::as_ptr(&self.index) as usize, hash);
        log.line(
            Level::Crit,
            format_args!("cache file \"{}\" {why}", path.display()),
        );
        let same = match io.stat(&path, &PathRules::default()).await {
            Ok(now) => now.id == file.meta.id,
            Err(e) if enoent(&e) => false,
            Err(e) => return Err(e),
        };
        if same {
            self.index.lost(hash);
            match io.unlink(&path).await {
                Ok(()) => {}
                Err(e) if enoent(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Files up to this size are read whole on open: header and a body that
/// is checked on open in one `pread`.
const READ_WHOLE: u64 = verify::CHECK_ON_OPEN + 64 * 1024;

/// Reads and checks the header of an open entry and, for a body checked
/// on open, the body (`verify::check_on_open`).
async fn read_checked(file: &OpenFile, key: &str) -> Result<EntryHeader, HeaderError> {
    let size = file.meta.size;
    let first = if size <= READ_WHOLE {
        size as usize
    } else {
        format::FIRST_READ
    };
    let (header, buf) = read_header_from(file, Some(key), first).await?;
    verify::check_on_open(file, &header, &buf).await?;
    Ok(header)
}

/// Reads and checks the header of an open entry (`key`: the key expected;
/// `None` when the loader does not know it yet).
pub(crate) async fn read_header(
    file: &OpenFile,
    key: Option<&str>,
) -> Result<EntryHeader, HeaderError> {
    Ok(read_header_from(file, key, format::FIRST_READ).await?.0)
}

/// [`read_header`] with a first read of `first` bytes; also returns the
/// bytes read from the file's start (at least the header).
async fn read_header_from(
    file: &OpenFile,
    key: Option<&str>,
    first: usize,
) -> Result<(EntryHeader, Vec<u8>), HeaderError> {
    let size = file.meta.size;
    let first = (first as u64).min(size) as usize;
    let mut buf = vec![0u8; first];
    let n = file.read_at(&mut buf, 0).await.map_err(HeaderError::Io)?;
    buf.truncate(n);
    let len = format::header_len(&buf).map_err(HeaderError::Format)?;
    if len > buf.len() {
        if (len as u64) > size {
            return Err(HeaderError::Format(FormatError::Truncated));
        }
        let have = buf.len();
        buf.resize(len, 0);
        let n = file
            .read_at(&mut buf[have..], have as u64)
            .await
            .map_err(HeaderError::Io)?;
        buf.truncate(have + n);
    }
    let header = format::decode(&buf, key, Some(size)).map_err(HeaderError::Format)?;
    Ok((header, buf))
}
