//! The entry file format: a porter header followed by the body.
//!
//! ```text
//! offset  size  field
//!      0     8  magic "PORTERC\n"
//!      8     4  format version (3; 1 and 2 are still read), little
//!               endian like every number here
//!     12     4  header length = body offset
//!     16     4  CRC-32 of the whole header with this field zeroed
//!     20     8  body length
//!     28     8  valid until (unix seconds; the entry is fresh before it)
//!     36     8  Date of the response (unix seconds)
//!     44     8  Last-Modified (unix seconds, -1 = none)
//!     52     8  time the entry was stored (unix seconds)
//!     60     2  status
//!     62     4  CRC-32C of the body (versions 2 and 3; see `verify.rs`)
//!     66     8  seconds past "valid until" the entry may be served while
//!               it is refreshed (version 3; NGINX's `updating_sec`, from
//!               `Cache-Control: stale-while-revalidate=N`)
//!     74     8  seconds past "valid until" the entry may be served when
//!               the upstream fails (version 3; NGINX's `error_sec`, from
//!               `stale-while-revalidate=N` or `stale-if-error=N`)
//!     82     …  key (u32 length + bytes), ETag (u16 + bytes, empty = none),
//!               Vary: u16 count, then name (u16 + bytes) and the storing
//!               request's value (u32 + bytes, absent header = empty),
//!               stored headers: u16 count, then name (u16) and value (u32)
//!      …        body (body length bytes), at the header length
//! ```
//!
//! Every field has a fixed place or a length, so the writer lays the header
//! down before the body, with body length 0, and rewrites it in place with
//! the real length (and checksum) when the body is complete. A reader
//! trusts nothing: magic, version, checksum, its own key (an MD5 collision
//! is a different key in the file) and the file size (header + body) are
//! all checked, and any mismatch is a [`FormatError`]. The body's own
//! checksum is checked by [`super::verify`], on open or while sending.
//!
//! Version 2 (porter before the two windows) is the same without the
//! sixteen bytes at 66, and version 1 (before the body checksum) without
//! the four at 62 as well: such entries are still read and served, with
//! no stale windows (as NGINX's entries without the directives) and, for
//! version 1, every check above but the body's ([`EntryHeader::body_crc`]
//! is `None`); a refill writes version 3.

/// The magic bytes every entry starts with.
pub const MAGIC: &[u8; 8] = b"PORTERC\n";
/// The format version this code writes.
pub const VERSION: u32 = 3;
/// An older version still read (no stale windows).
pub const VERSION_2: u32 = 2;
/// The oldest version still read (no body checksum, no stale windows).
pub const VERSION_1: u32 = 1;
/// Bytes of the fixed part (version 3).
pub const FIXED: usize = 82;
/// Bytes of the fixed part of a version 2 header.
const FIXED_V2: usize = 66;
/// Bytes of the fixed part of a version 1 header.
const FIXED_V1: usize = 62;
/// A reader's first read: enough for nearly every header.
pub const FIRST_READ: usize = 4096;
/// Longest header accepted (a corrupt length must not make us allocate
/// gigabytes).
pub const MAX_HEADER: usize = 1 << 20;

const CHECKSUM_AT: usize = 16;
const BODY_LEN_AT: usize = 20;
const BODY_CRC_AT: usize = 62;

/// What an entry records about the response besides its body.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EntryMeta {
    /// The cache key as rendered (`proxy_cache_key`).
    pub key: String,
    /// Response status.
    pub status: u16,
    /// Fresh until this unix time.
    pub valid_until: i64,
    /// `Date` (unix seconds).
    pub date: i64,
    /// `Last-Modified` (unix seconds), if any.
    pub last_modified: Option<i64>,
    /// When it was stored (unix seconds).
    pub stored: i64,
    /// Seconds past `valid_until` it may be served stale while it is
    /// refreshed (`Cache-Control: stale-while-revalidate`; NGINX's
    /// `updating_sec`).
    pub updating_secs: i64,
    /// Seconds past `valid_until` it may be served stale when the
    /// upstream fails (`stale-if-error`, `stale-while-revalidate`;
    /// NGINX's `error_sec`).
    pub error_secs: i64,
    /// `ETag`, if any.
    pub etag: Option<String>,
    /// `Vary` header names (lowercase) and the storing request's values.
    pub vary: Vec<(String, String)>,
    /// The response headers to send on a hit (name, value), in order.
    pub headers: Vec<(String, String)>,
}

/// A decoded header: the metadata and where the body is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryHeader {
    /// The metadata.
    pub meta: EntryMeta,
    /// Offset of the body in the file (= header length).
    pub body_offset: u64,
    /// Body length in bytes.
    pub body_len: u64,
    /// CRC-32C of the body (`None`: a version 1 entry, not checked).
    pub body_crc: Option<u32>,
}

/// Why an entry's header could not be read: the disk failed, or the
/// file is not a valid entry.
#[derive(Debug)]
pub(crate) enum HeaderError {
    /// The read failed.
    Io(std::io::Error),
    /// The bytes are not a valid entry.
    Format(FormatError),
}

/// Why a file is not a valid entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// Not a porter entry (or overwritten).
    #[error("has bad magic")]
    Magic,
    /// Written by another format version.
    #[error("version mismatch ({0}, expected {VERSION})")]
    Version(u32),
    /// The body does not match the checksum in the header.
    #[error("has bad body checksum")]
    BodyChecksum,
    /// The header does not match its checksum.
    #[error("has bad header checksum")]
    Checksum,
    /// Shorter than its header says, or a field runs past it.
    #[error("has truncated header")]
    Truncated,
    /// The header is longer than [`MAX_HEADER`].
    #[error("has too long header")]
    TooLong,
    /// The key in the file is not the key looked up (an MD5 collision).
    #[error("has md5 collision")]
    Collision,
    /// File size ≠ header + body length.
    #[error("has wrong size {actual}, expected {expected}")]
    Size {
        /// Size on disk.
        actual: u64,
        /// Header length plus body length.
        expected: u64,
    },
}

fn put_str16(out: &mut Vec<u8>, s: &str) {
    let b = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
    out.extend_from_slice(&(b.len() as u16).to_le_bytes());
    out.extend_from_slice(b);
}

fn put_str32(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// Encodes a header for `meta` with `body_len` and the body's CRC-32C
/// `body_crc` (a writer lays it down with 0 and 0, then
/// [`complete`]s it).
pub fn encode(meta: &EntryMeta, body_len: u64, body_crc: u32) -> Vec<u8> {
    encode_version(VERSION, meta, body_len, body_crc)
}

/// Encodes a header of `version`: [`VERSION`], or what older porter
/// wrote ([`VERSION_2`]: no stale windows; [`VERSION_1`]: no body
/// checksum either), kept for tests of old entries.
pub fn encode_version(version: u32, meta: &EntryMeta, body_len: u64, body_crc: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes()); // header length, below
    out.extend_from_slice(&0u32.to_le_bytes()); // checksum, below
    out.extend_from_slice(&body_len.to_le_bytes());
    out.extend_from_slice(&meta.valid_until.to_le_bytes());
    out.extend_from_slice(&meta.date.to_le_bytes());
    out.extend_from_slice(&meta.last_modified.unwrap_or(-1).to_le_bytes());
    out.extend_from_slice(&meta.stored.to_le_bytes());
    out.extend_from_slice(&meta.status.to_le_bytes());
    if version != VERSION_1 {
        out.extend_from_slice(&body_crc.to_le_bytes());
    }
    if version == VERSION {
        out.extend_from_slice(&meta.updating_secs.to_le_bytes());
        out.extend_from_slice(&meta.error_secs.to_le_bytes());
    }
    debug_assert_eq!(out.len(), fixed_len(version));
    put_str32(&mut out, &meta.key);
    put_str16(&mut out, meta.etag.as_deref().unwrap_or(""));
    out.extend_from_slice(&(meta.vary.len().min(u16::MAX as usize) as u16).to_le_bytes());
    for (n, v) in meta.vary.iter().take(u16::MAX as usize) {
        put_str16(&mut out, n);
        put_str32(&mut out, v);
    }
    out.extend_from_slice(&(meta.headers.len().min(u16::MAX as usize) as u16).to_le_bytes());
    for (n, v) in meta.headers.iter().take(u16::MAX as usize) {
        put_str16(&mut out, n);
        put_str32(&mut out, v);
    }
    let len = out.len() as u32;
    out[12..16].copy_from_slice(&len.to_le_bytes());
    seal(&mut out);
    out
}

/// Sets the body length and the body's CRC-32C of an encoded version 2
/// header and recomputes the header's checksum.
pub fn complete(header: &mut [u8], body_len: u64, body_crc: u32) {
    header[BODY_LEN_AT..BODY_LEN_AT + 8].copy_from_slice(&body_len.to_le_bytes());
    header[BODY_CRC_AT..BODY_CRC_AT + 4].copy_from_slice(&body_crc.to_le_bytes());
    seal(header);
}

fn fixed_len(version: u32) -> usize {
    match version {
        VERSION_1 => FIXED_V1,
        VERSION_2 => FIXED_V2,
        _ => FIXED,
    }
}

fn checksum(header: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&header[..CHECKSUM_AT]);
    h.update(&[0; 4]);
    h.update(&header[CHECKSUM_AT + 4..]);
    h.finalize()
}

fn seal(header: &mut [u8]) {
    let c = checksum(header);
    header[CHECKSUM_AT..CHECKSUM_AT + 4].copy_from_slice(&c.to_le_bytes());
}

/// The header length a file starting with `prefix` declares (after the
/// magic and version check), so a reader knows how much to read.
pub fn header_len(prefix: &[u8]) -> Result<usize, FormatError> {
    if prefix.len() < 16 {
        return Err(if prefix.len() >= 8 && &prefix[..8] != MAGIC {
            FormatError::Magic
        } else {
            FormatError::Truncated
        });
    }
    if &prefix[..8] != MAGIC {
        return Err(FormatError::Magic);
    }
    let v = u32::from_le_bytes(prefix[8..12].try_into().unwrap());
    if !matches!(v, VERSION | VERSION_2 | VERSION_1) {
        return Err(FormatError::Version(v));
    }
    let len = u32::from_le_bytes(prefix[12..16].try_into().unwrap()) as usize;
    if len > MAX_HEADER {
        return Err(FormatError::TooLong);
    }
    if len < fixed_len(v) {
        return Err(FormatError::Truncated);
    }
    Ok(len)
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], FormatError> {
        let end = self.at.checked_add(n).ok_or(FormatError::Truncated)?;
        let s = self.b.get(self.at..end).ok_or(FormatError::Truncated)?;
        self.at = end;
        Ok(s)
    }
    fn u16(&mut self) -> Result<u16, FormatError> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().unwrap()))
    }
    fn u32(&mut self) -> Result<u32, FormatError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn i64(&mut self) -> Result<i64, FormatError> {
        Ok(i64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn str(&mut self, n: usize) -> Result<String, FormatError> {
        // Stored strings came from valid header text; anything else is
        // corruption the checksum already caught, so be lossy, not strict.
        Ok(String::from_utf8_lossy(self.take(n)?).into_owned())
    }
}

/// Decodes and checks a whole header (`buf` holds at least the header).
/// `key`, when given, must be the key stored; `file_size`, when given, must
/// be header + body length.
pub fn decode(
    buf: &[u8],
    key: Option<&str>,
    file_size: Option<u64>,
) -> Result<EntryHeader, FormatError> {
    let len = header_len(buf)?;
    let h = buf.get(..len).ok_or(FormatError::Truncated)?;
    let stored = u32::from_le_bytes(h[CHECKSUM_AT..CHECKSUM_AT + 4].try_into().unwrap());
    if stored != checksum(h) {
        return Err(FormatError::Checksum);
    }
    let mut r = Reader { b: h, at: 20 };
    let body_len = r.i64()? as u64;
    let valid_until = r.i64()?;
    let date = r.i64()?;
    let lm = r.i64()?;
    let stored_at = r.i64()?;
    let status = r.u16()?;
    let version = u32::from_le_bytes(h[8..12].try_into().unwrap());
    let body_crc = match version {
        VERSION_1 => None,
        _ => Some(r.u32()?),
    };
    let (updating_secs, error_secs) = match version {
        VERSION => (r.i64()?, r.i64()?),
        _ => (0, 0),
    };
    let n = r.u32()? as usize;
    let k = r.str(n)?;
    if let Some(want) = key {
        if want != k {
            return Err(FormatError::Collision);
        }
    }
    let n = r.u16()? as usize;
    let etag = r.str(n)?;
    let mut vary = Vec::new();
    for _ in 0..r.u16()? {
        let n = r.u16()? as usize;
        let name = r.str(n)?;
        let n = r.u32()? as usize;
        vary.push((name, r.str(n)?));
    }
    let mut headers = Vec::new();
    for _ in 0..r.u16()? {
        let n = r.u16()? as usize;
        let name = r.str(n)?;
        let n = r.u32()? as usize;
        headers.push((name, r.str(n)?));
    }
    if r.at != len {
        return Err(FormatError::Truncated);
    }
    if let Some(actual) = file_size {
        let expected = (len as u64).saturating_add(body_len);
        if actual != expected {
            return Err(FormatError::Size { actual, expected });
        }
    }
    Ok(EntryHeader {
        meta: EntryMeta {
            key: k,
            status,
            valid_until,
            date,
            last_modified: (lm >= 0).then_some(lm),
            stored: stored_at,
            updating_secs,
            error_secs,
            etag: (!etag.is_empty()).then_some(etag),
            vary,
            headers,
        },
        body_offset: len as u64,
        body_len,
        body_crc,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> EntryMeta {
        EntryMeta {
            key: "http://origin/a?b".into(),
            status: 200,
            valid_until: 1_800_000_000,
            date: 1_790_000_000,
            last_modified: Some(1_700_000_000),
            stored: 1_790_000_001,
            updating_secs: 10,
            error_secs: 86_400,
            etag: Some("\"abc\"".into()),
            vary: vec![("accept-encoding".into(), "gzip".into())],
            headers: vec![
                ("Content-Type".into(), "text/plain".into()),
                ("X-Long".into(), "v".repeat(5000)),
            ],
        }
    }

    #[test]
    fn round_trip() {
        let mut h = encode(&meta(), 0, 0);
        complete(&mut h, 11, 0xdead_beef);
        let len = h.len() as u64;
        let d = decode(&h, Some("http://origin/a?b"), Some(len + 11)).unwrap();
        assert_eq!(d.meta, meta());
        assert_eq!(d.body_offset, len);
        assert_eq!(d.body_len, 11);
        assert_eq!(d.body_crc, Some(0xdead_beef));
        // No optional fields.
        let m = EntryMeta {
            key: "k".into(),
            ..Default::default()
        };
        let h = encode(&m, 3, 7);
        let d = decode(&h, None, None).unwrap();
        assert_eq!(d.meta.etag, None);
        assert_eq!(d.meta.last_modified, None);
        assert_eq!(d.body_len, 3);
    }

    #[test]
    fn body_len_rewrite_keeps_length() {
        let a = encode(&meta(), 0, 0);
        let mut b = a.clone();
        complete(&mut b, u32::MAX as u64 + 7, 1);
        assert_eq!(a.len(), b.len());
        assert_eq!(
            decode(&b, None, None).unwrap().body_len,
            u32::MAX as u64 + 7
        );
    }

    #[test]
    fn every_corruption_is_caught() {
        let good = encode(&meta(), 5, 0x1234_5678);
        let size = Some(good.len() as u64 + 5);
        let key = Some("http://origin/a?b");

        let mut b = good.clone();
        b[0] = b'X';
        assert_eq!(decode(&b, key, size), Err(FormatError::Magic));

        let mut b = good.clone();
        b[8] = 9;
        assert_eq!(decode(&b, key, size), Err(FormatError::Version(9)));

        // Any flipped byte past the fixed prefix fails the checksum, the
        // body's checksum (62..66) included.
        for i in [20, 30, 61, 62, 65, 70, good.len() - 1] {
            let mut b = good.clone();
            b[i] ^= 0x40;
            assert_eq!(
                decode(&b, key, size),
                Err(FormatError::Checksum),
                "byte {i}"
            );
        }

        assert_eq!(
            decode(&good[..good.len() - 1], key, size),
            Err(FormatError::Truncated)
        );
        assert_eq!(decode(&good[..10], key, size), Err(FormatError::Truncated));
        assert_eq!(decode(&[], key, size), Err(FormatError::Truncated));

        let mut b = good.clone();
        b[12..16].copy_from_slice(&(MAX_HEADER as u32 + 1).to_le_bytes());
        assert_eq!(decode(&b, key, size), Err(FormatError::TooLong));

        assert_eq!(
            decode(&good, Some("http://origin/other"), size),
            Err(FormatError::Collision)
        );
        assert_eq!(
            decode(&good, key, Some(good.len() as u64 + 4)),
            Err(FormatError::Size {
                actual: good.len() as u64 + 4,
                expected: good.len() as u64 + 5
            })
        );
        assert!(decode(&good, key, size).is_ok());
    }

    /// [`meta`] as an older version stores it: no stale windows.
    fn meta_without_windows() -> EntryMeta {
        EntryMeta {
            updating_secs: 0,
            error_secs: 0,
            ..meta()
        }
    }

    #[test]
    fn version_2_entries_are_read_without_stale_windows() {
        let v2 = encode_version(VERSION_2, &meta(), 5, 0x1234_5678);
        assert_eq!(&v2[8..12], &2u32.to_le_bytes());
        assert_eq!(v2.len() + 16, encode(&meta(), 5, 0).len());
        let size = Some(v2.len() as u64 + 5);
        let d = decode(&v2, Some("http://origin/a?b"), size).unwrap();
        assert_eq!(d.meta, meta_without_windows());
        assert_eq!(d.body_crc, Some(0x1234_5678));
        assert_eq!(d.body_offset, v2.len() as u64);
        // `complete` rewrites a version 3 header only; a version 2 one is
        // still checked in every way.
        let mut b = v2.clone();
        b[70] ^= 1;
        assert_eq!(decode(&b, None, size), Err(FormatError::Checksum));
        let mut short = v2.clone();
        short[12..16].copy_from_slice(&65u32.to_le_bytes());
        assert_eq!(header_len(&short), Err(FormatError::Truncated));
    }

    #[test]
    fn version_1_entries_are_read_without_a_body_checksum() {
        let v1 = encode_version(VERSION_1, &meta(), 5, 0);
        assert_eq!(&v1[8..12], &1u32.to_le_bytes());
        assert_eq!(v1.len() + 4 + 16, encode(&meta(), 5, 0).len());
        let size = Some(v1.len() as u64 + 5);
        let d = decode(&v1, Some("http://origin/a?b"), size).unwrap();
        assert_eq!(d.meta, meta_without_windows());
        assert_eq!(d.body_crc, None);
        assert_eq!(d.body_offset, v1.len() as u64);
        // Still checked in every other way.
        let mut b = v1.clone();
        b[62] ^= 1;
        assert_eq!(decode(&b, None, size), Err(FormatError::Checksum));
        assert_eq!(
            decode(&v1, None, Some(v1.len() as u64 + 4)),
            Err(FormatError::Size {
                actual: v1.len() as u64 + 4,
                expected: v1.len() as u64 + 5
            })
        );
        // A version 2 length in a version 1 header: too short a header.
        let mut short = v1.clone();
        short[12..16].copy_from_slice(&61u32.to_le_bytes());
        assert_eq!(header_len(&short), Err(FormatError::Truncated));
    }
}
