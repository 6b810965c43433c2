//! The body checksum of a cache entry: a body damaged on disk (a flipped
//! byte, a zeroed or torn page) is never sent as a HIT. NGINX checks only
//! its header; porter also checks the body, at a cost measured in
//! docs/design.md ("Proxy cache store").
//!
//! - **Written** while the body is: [`CacheWriter`](super::CacheWriter)
//!   folds each piece into a CRC-32C as it writes it (no second pass over
//!   the body) and `finish` stores the sum in the header (format version 2,
//!   `format.rs`).
//! - **Bodies up to [`CHECK_ON_OPEN`]** (1 MiB) are checked when the entry
//!   is opened, by [`check_on_open`], from the reads that fetched the
//!   header (a small entry is one `pread`), through the request's disk
//!   route. A mismatch is a bad file as any other: one `crit` line
//!   (`cache file "…" has bad body checksum`), the file removed, a MISS.
//!   An entry a worker keeps open between hits is opened and checked again
//!   after `open_entries::RECHECK`, so damage that reaches the page cache
//!   later is found within that time.
//! - **Larger bodies** are checked while they are sent: [`BodyCheck`]
//!   reads the body in [`PIECE`]s through the disk layer, folds each into
//!   the sum and hands it on, but holds back the last piece until the sum
//!   matches. On a mismatch the entry is removed with the same `crit`
//!   line and the stream fails ([`is_damaged`]): the connection closes
//!   short of its `Content-Length`, so the client sees a truncated
//!   response, never a complete one with wrong bytes. Such bodies go out
//!   through user space instead of `sendfile`.
//! - **A large body checked once** is remembered by this worker (a
//!   *proof*: the file's device, inode, size and status change time,
//!   `ctime`, when it was opened for the check), and later whole HITs on
//!   the same file go out by `sendfile`, unchecked, while a `fstat` of
//!   the newly opened entry shows the same four facts, for at most
//!   [`RECHECK`] after the check; then the next whole HIT checks it again
//!   ([`check_on_send`]). Any change made through the file system — a
//!   write, a truncation, a replacement, even a `touch` — moves `ctime`
//!   (which user space cannot set back) or the inode, and the next HIT is
//!   checked again. A proof is only kept for a file whose `ctime` was at
//!   least [`SETTLED`] old when the check began, so a change within the
//!   same clock tick as the one before it cannot hide (git's "racily
//!   clean" rule). What a proof does not see is damage below the file
//!   system (a disk returning other bytes for a page not in memory):
//!   found at the next check, within [`RECHECK`] — the bound the kept-open
//!   small entries have (`open_entries::RECHECK`).
//! - **A truncated file** is found before anything is sent: the file size
//!   must be header + body length (`format::decode`).
//!
//! Not checked: a byte range of a body larger than [`CHECK_ON_OPEN`] (a
//! range would cost a read of the whole body; the full response checks
//! it), and version 1 entries, which have no body checksum.
//!
//! CRC-32C (the `crc32c` crate): the SSE 4.2 / ARMv8 `crc32` instruction,
//! found at run time with a software fallback, sums several GB/s, so the
//! sum is taken on the event loop. It detects damage; it is no defence
//! against someone who can write the cache directory.

use std::cell::RefCell;
use std::io;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use lru::LruCache;

use super::format::{EntryHeader, FormatError, HeaderError};
use super::{CacheZone, Entry, KeyHash};
use crate::disk::{FileMeta, Io, OpenFile};
use crate::log::RequestLog;

/// Bodies up to this size are checked when their entry is opened; larger
/// ones while they are sent.
pub const CHECK_ON_OPEN: u64 = 1 << 20;

/// The read size of a body checked while it is sent; the last piece is
/// held back until the sum matches.
pub const PIECE: usize = 128 * 1024;

/// The CRC-32C of `data` continued from `crc` (0 to start).
pub fn append(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
}

/// Whether the body of `header` is checked while it is sent (a version 2
/// entry larger than [`CHECK_ON_OPEN`]) rather than on open.
pub fn checked_on_send(header: &EntryHeader) -> bool {
    header.body_crc.is_some() && header.body_len > CHECK_ON_OPEN
}

/// How long a proof lets a large body go out unchecked.
pub const RECHECK: Duration = super::open_entries::RECHECK;

/// How old a file's last change must be when its check begins for the
/// check to be remembered.
pub const SETTLED: Duration = Duration::from_secs(1);

/// Proofs kept per worker (the least recently used go first).
const PROOFS: usize = 4096;

/// A large body checked whole: the file's facts when it was opened for
/// the check, and when.
#[derive(Clone, Copy)]
struct Proof {
    size: u64,
    changed: (i64, i64),
    at: Instant,
}

thread_local! {
    /// This worker's proofs, by (device, inode).
    static PROOFS_KEPT: RefCell<LruCache<(u64, u64), Proof>> =
        RefCell::new(LruCache::new(NonZeroUsize::new(PROOFS).expect("non-zero")));
}

/// Whether a whole response from an entry (`header`, opened with `meta`)
/// must be checked while it is sent: a body checked on send with no
/// proof for this very file younger than [`RECHECK`].
pub fn check_on_send(header: &EntryHeader, meta: &FileMeta) -> bool {
    checked_on_send(header) && !proven(meta, Instant::now())
}

fn proven(meta: &FileMeta, now: Instant) -> bool {
    PROOFS_KEPT.with_borrow_mut(|c| match c.get(&meta.id) {
        Some(p) => {
            let same = p.size == meta.size && p.changed == meta.changed;
            let fresh = now.saturating_duration_since(p.at) < RECHECK;
            if !(same && fresh) {
                c.pop(&meta.id);
            }
            same && fresh
        }
        None => false,
    })
}

/// Remembers that the file opened with `meta` was checked whole, the
/// check having begun at `began` (wall clock) — unless its last change
/// was less than [`SETTLED`] before that.
fn remember(meta: &FileMeta, began: SystemTime, now: Instant) {
    let (secs, nanos) = meta.changed;
    let changed = match (u64::try_from(secs), u32::try_from(nanos)) {
        (Ok(s), Ok(n)) => SystemTime::UNIX_EPOCH + Duration::new(s, n.min(999_999_999)),
        _ => return,
    };
    if began.duration_since(changed).is_ok_and(|d| d >= SETTLED) {
        let proof = Proof {
            size: meta.size,
            changed: meta.changed,
            at: now,
        };
        PROOFS_KEPT.with_borrow_mut(|c| c.put(meta.id, proof));
    }
}

/// Checks the body of a version 2 entry of at most [`CHECK_ON_OPEN`]
/// bytes against its header. `have` holds the file's first bytes, as read
/// for its header; the rest of the body is read through the file's route.
pub(crate) async fn check_on_open(
    file: &OpenFile,
    header: &EntryHeader,
    have: &[u8],
) -> Result<(), HeaderError> {
    let Some(want) = header.body_crc else {
        return Ok(());
    };
    if header.body_len > CHECK_ON_OPEN {
        return Ok(());
    }
    let start = header.body_offset as usize;
    let end = start + header.body_len as usize;
    let in_hand = have.get(start..end.min(have.len())).unwrap_or(&[]);
    let mut crc = append(0, in_hand);
    let at = start + in_hand.len();
    if at < end {
        let mut rest = vec![0u8; end - at];
        let n = file
            .read_at(&mut rest, at as u64)
            .await
            .map_err(HeaderError::Io)?;
        if n < rest.len() {
            return Err(HeaderError::Format(FormatError::Truncated));
        }
        crc = append(crc, &rest);
    }
    if crc != want {
        return Err(HeaderError::Format(FormatError::BodyChecksum));
    }
    Ok(())
}

/// The error [`BodyCheck`] fails with once it has removed a damaged entry
/// and logged why.
#[derive(Debug)]
struct Damaged;

impl std::fmt::Display for Damaged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("cache entry body damaged (logged)")
    }
}

impl std::error::Error for Damaged {}

/// Whether `e` is [`BodyCheck`]'s failure on a damaged body (already
/// logged).
pub fn is_damaged(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|r| r.is::<Damaged>())
}

/// The body of a large entry, read piece by piece and checked against its
/// header's CRC-32C, the last piece withheld until the sum matches.
/// Cancel-safe: its state changes only once a read has completed.
pub struct BodyCheck {
    zone: Arc<CacheZone>,
    io: Io,
    log: RequestLog,
    file: OpenFile,
    hash: KeyHash,
    at: u64,
    end: u64,
    crc: u32,
    want: u32,
    started: bool,
    began: SystemTime,
}

impl BodyCheck {
    /// Reads `entry`'s body (a version 2 entry) through `io`; a damaged
    /// body is removed from `zone` and logged to `log`.
    pub fn new(zone: Arc<CacheZone>, io: Io, entry: &Entry, log: RequestLog) -> BodyCheck {
        let h = &entry.header;
        BodyCheck {
            zone,
            io,
            log,
            file: entry.file.clone(),
            hash: KeyHash::of(h.meta.key.as_bytes()),
            at: h.body_offset,
            end: h.body_offset + h.body_len,
            crc: 0,
            want: h.body_crc.unwrap_or(0),
            started: false,
            began: SystemTime::now(),
        }
    }

    /// Appends the next piece to `out`; `Ok(false)` at the end. The first
    /// call returns at once with nothing, so a caller that polls once to
    /// see whether a piece is at hand starts no read it would drop.
    pub async fn next(&mut self, out: &mut Vec<u8>) -> io::Result<bool> {
        if !self.started {
            self.started = true;
            return Ok(true);
        }
        if self.at >= self.end {
            return Ok(false);
        }
        let want = ((self.end - self.at) as usize).min(PIECE);
        let from = out.len();
        out.resize(from + want, 0);
        let n = match self.file.read_at(&mut out[from..], self.at).await {
            Ok(n) => n,
            Err(e) => {
                out.truncate(from);
                return Err(e);
            }
        };
        out.truncate(from + n);
        if n == 0 {
            // Shrunk since it was opened: the writer reports a truncation.
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "file was truncated",
            ));
        }
        self.crc = append(self.crc, &out[from..]);
        self.at += n as u64;
        if self.at >= self.end && self.crc != self.want {
            out.truncate(from);
            let _ = self
                .zone
                .bad_file(
                    &self.io,
                    &self.hash,
                    &self.file,
                    FormatError::BodyChecksum,
                    &self.log,
                )
                .await;
            return Err(io::Error::other(Damaged));
        }
        if self.at >= self.end {
            remember(&self.file.meta, self.began, Instant::now());
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::format::{self, EntryMeta};

    #[test]
    fn the_sum_is_crc32c_and_continues_across_pieces() {
        // RFC 3720's check value for "123456789".
        assert_eq!(append(0, b"123456789"), 0xe306_9283);
        let whole = append(0, b"hello, world");
        assert_eq!(append(append(0, b"hello"), b", world"), whole);
    }

    fn entry_bytes(body: &[u8]) -> (Vec<u8>, EntryHeader) {
        let meta = EntryMeta {
            key: "k".into(),
            ..Default::default()
        };
        let mut h = format::encode(&meta, 0, 0);
        format::complete(&mut h, body.len() as u64, append(0, body));
        let size = (h.len() + body.len()) as u64;
        let header = format::decode(&h, Some("k"), Some(size)).unwrap();
        h.extend_from_slice(body);
        (h, header)
    }

    fn open_with(bytes: &[u8]) -> OpenFile {
        let dir = std::env::temp_dir().join(format!("porter-verify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(format!("{}", append(0, bytes)));
        std::fs::write(&p, bytes).unwrap();
        let f = std::fs::File::open(&p).unwrap();
        let meta = crate::disk::FileMeta {
            size: bytes.len() as u64,
            mtime: 0,
            kind: crate::disk::FileKind::Regular,
            id: (0, 0),
            exec: false,
            changed: (0, 0),
        };
        let _ = std::fs::remove_file(&p);
        OpenFile::new(Arc::new(f), meta, Io::inline())
    }

    fn check(file: &OpenFile, header: &EntryHeader, have: &[u8]) -> Result<(), FormatError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        match rt.block_on(check_on_open(file, header, have)) {
            Ok(()) => Ok(()),
            Err(HeaderError::Format(f)) => Err(f),
            Err(HeaderError::Io(e)) => panic!("{e}"),
        }
    }

    #[test]
    fn a_small_body_is_checked_from_what_was_read_and_the_rest() {
        let body: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
        let (bytes, header) = entry_bytes(&body);
        let f = open_with(&bytes);
        // All in hand, part in hand, none in hand.
        for have in [bytes.len(), 300, 0] {
            assert_eq!(check(&f, &header, &bytes[..have]), Ok(()), "{have}");
        }
        for at in [header.body_offset as usize, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[at] ^= 0x01;
            let g = open_with(&bad);
            for have in [bad.len(), 0] {
                assert_eq!(
                    check(&g, &header, &bad[..have]),
                    Err(FormatError::BodyChecksum),
                    "byte {at}, {have} in hand"
                );
            }
        }
    }

    fn meta(id: u64, size: u64, changed: (i64, i64)) -> FileMeta {
        FileMeta {
            size,
            mtime: 0,
            kind: crate::disk::FileKind::Regular,
            id: (7, id),
            exec: false,
            changed,
        }
    }

    #[test]
    fn a_proof_holds_for_the_same_settled_file_for_recheck_only() {
        let now = Instant::now();
        let began = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        // Changed 5 s before the check: remembered.
        let m = meta(1, 10, (995, 0));
        remember(&m, began, now);
        assert!(proven(&m, now + Duration::from_secs(1)));
        // Another size, another ctime: checked again (and forgotten).
        assert!(!proven(&meta(1, 11, (995, 0)), now));
        remember(&m, began, now);
        assert!(!proven(&meta(1, 10, (995, 1)), now));
        assert!(!proven(&m, now), "forgotten once it differed");
        // No longer than RECHECK.
        remember(&m, began, now);
        assert!(!proven(&m, now + RECHECK));
        // Changed less than SETTLED before the check: not remembered.
        let racy = meta(2, 10, (999, 500_000_000));
        remember(&racy, began, now);
        assert!(!proven(&racy, now));
        // A header that is not checked on send needs no proof; one that is
        // needs it.
        let (_, mut header) = entry_bytes(b"abc");
        assert!(!check_on_send(&header, &racy));
        header.body_len = CHECK_ON_OPEN + 1;
        assert!(check_on_send(&header, &racy));
    }

    #[test]
    fn version_1_and_large_bodies_are_not_checked_on_open() {
        let (bytes, mut header) = entry_bytes(b"abc");
        let mut bad = bytes.clone();
        *bad.last_mut().unwrap() ^= 1;
        let f = open_with(&bad);
        assert_eq!(check(&f, &header, &bad), Err(FormatError::BodyChecksum));
        assert!(!checked_on_send(&header));
        header.body_crc = None;
        assert_eq!(check(&f, &header, &bad), Ok(()));
        header.body_crc = Some(0);
        header.body_len = CHECK_ON_OPEN + 1;
        assert!(checked_on_send(&header));
        assert_eq!(check(&f, &header, &bad), Ok(()));
    }
}
