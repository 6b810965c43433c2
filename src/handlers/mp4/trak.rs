//! The mp4 module's data: the span a request asks for ([`Span`]), a track
//! as NGINX keeps it ([`Trak`]) with its sample tables ([`Table`], whose
//! entries are cropped in place between `pos` and `last`, as NGINX moves a
//! buffer's `pos` and `last`), the `moov` ([`Moov`]), the error that
//! carries NGINX's log text ([`Mp4Error`]), and big-endian helpers.

/// A failure to process a file: NGINX's log line (at `error`), answered
/// with 500.
#[derive(Debug)]
pub struct Mp4Error(pub String);

impl Mp4Error {
    /// The error with NGINX's text.
    pub fn new(text: String) -> Mp4Error {
        Mp4Error(text)
    }
}

/// One entry of a sample table, as stored (big-endian words).
pub trait Row: Copy {
    /// Bytes per entry.
    const WIDTH: usize;
    /// The entry at the start of `b`.
    fn read(b: &[u8]) -> Self;
    /// Appends the entry.
    fn write(&self, out: &mut Vec<u8>);
}

impl Row for u32 {
    const WIDTH: usize = 4;
    fn read(b: &[u8]) -> u32 {
        be32(b, 0)
    }
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_be_bytes());
    }
}

impl Row for u64 {
    const WIDTH: usize = 8;
    fn read(b: &[u8]) -> u64 {
        be64(b, 0)
    }
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_be_bytes());
    }
}

impl<const N: usize> Row for [u32; N] {
    const WIDTH: usize = 4 * N;
    fn read(b: &[u8]) -> [u32; N] {
        std::array::from_fn(|i| be32(b, 4 * i))
    }
    fn write(&self, out: &mut Vec<u8>) {
        for v in self {
            out.extend_from_slice(&v.to_be_bytes());
        }
    }
}

/// A sample table: the atom's data before its entries (version, flags,
/// `stsz`'s uniform size, the count), its entries, the part kept
/// (`pos..last`) and the count NGINX writes back (kept apart, as NGINX
/// keeps it).
#[derive(Debug, Clone)]
pub struct Table<T> {
    /// The data before the entries.
    pub head: Vec<u8>,
    /// Every entry (none for an `stsz` of uniform size: `has_rows` false).
    pub rows: Vec<T>,
    /// The table has entries to send.
    pub has_rows: bool,
    /// First entry kept.
    pub pos: usize,
    /// One past the last entry kept.
    pub last: usize,
    /// The count written in the head.
    pub entries: u32,
}

impl<T: Row> Table<T> {
    /// The table of `entries` rows in `rows`.
    pub fn read(head: &[u8], entries: u32, rows: &[u8], has_rows: bool) -> Table<T> {
        let rows: Vec<T> = if has_rows {
            rows.chunks_exact(T::WIDTH).map(T::read).collect()
        } else {
            Vec::new()
        };
        Table {
            head: head.to_vec(),
            last: rows.len(),
            rows,
            has_rows,
            pos: 0,
            entries,
        }
    }

    /// The rows kept.
    pub fn kept(&self) -> &[T] {
        &self.rows[self.pos.min(self.last)..self.last]
    }

    /// The rows kept, to change.
    pub fn kept_mut(&mut self) -> &mut [T] {
        let from = self.pos.min(self.last);
        &mut self.rows[from..self.last]
    }
}

/// `stts`: (count, duration).
pub type Stts = Table<[u32; 2]>;
/// `stss`: sync sample numbers (from 1).
pub type Stss = Table<u32>;
/// `ctts`: (count, offset).
pub type Ctts = Table<[u32; 2]>;
/// `stsz`: sample sizes.
pub type Stsz = Table<u32>;
/// `stco`: chunk offsets.
pub type Stco = Table<u32>;
/// `co64`: chunk offsets.
pub type Co64 = Table<u64>;

/// `stsc`: (first chunk, samples per chunk, description id), and the
/// entries NGINX adds for a first or last chunk cut in the middle.
#[derive(Debug, Clone)]
pub struct Stsc {
    /// The table.
    pub t: Table<[u32; 3]>,
    /// The entry before the table (`NGX_HTTP_MP4_STSC_START`).
    pub start: Option<[u32; 3]>,
    /// The entry after it (`NGX_HTTP_MP4_STSC_END`).
    pub end: Option<[u32; 3]>,
}

impl Stsc {
    /// The table, with no entries added.
    pub fn new(t: Table<[u32; 3]>) -> Stsc {
        Stsc {
            t,
            start: None,
            end: None,
        }
    }
}

/// What the request asks for, in milliseconds, and the file's size.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    /// `?start=` (0 when only `end` was given).
    pub start: u64,
    /// `end - start`, 0 when no end applies.
    pub length: u64,
    /// `mp4_start_key_frame`.
    pub start_key_frame: bool,
    /// The file's size.
    pub file_end: u64,
}

/// A track as kept.
#[derive(Debug, Default)]
pub struct Trak {
    /// Whole atoms, each with an 8-byte header.
    pub tkhd: Option<Vec<u8>>,
    /// See `tkhd`.
    pub mdhd: Option<Vec<u8>>,
    /// See `tkhd`.
    pub hdlr: Option<Vec<u8>>,
    /// See `tkhd` (`vmhd` or `smhd`, at most one).
    pub vmhd: Option<Vec<u8>>,
    /// See `tkhd`.
    pub smhd: Option<Vec<u8>>,
    /// See `tkhd`.
    pub dinf: Option<Vec<u8>>,
    /// See `tkhd`.
    pub stsd: Option<Vec<u8>>,
    /// The sample tables.
    pub stts: Option<Stts>,
    /// See `stts`.
    pub stss: Option<Stss>,
    /// See `stts`.
    pub ctts: Option<Ctts>,
    /// See `stts`.
    pub stsc: Option<Stsc>,
    /// See `stts`.
    pub stsz: Option<Stsz>,
    /// See `stts`.
    pub stco: Option<Stco>,
    /// See `stts`.
    pub co64: Option<Co64>,
    /// `mdhd`'s timescale.
    pub timescale: u32,
    /// The media duration left (`mdhd`).
    pub duration: u64,
    /// The movie duration left (`tkhd`).
    pub movie_duration: u64,
    /// Media time before the start kept for the key frame (`elst`).
    pub prefix: u64,
    /// Where the crops leave the track: samples and chunks.
    pub start_sample: u64,
    /// See `start_sample`.
    pub end_sample: u64,
    /// See `start_sample`.
    pub start_chunk: u64,
    /// See `start_sample`.
    pub end_chunk: u64,
    /// Samples of the first chunk before the start.
    pub start_chunk_samples: u64,
    /// Samples of the last chunk kept.
    pub end_chunk_samples: u64,
    /// Bytes of `start_chunk_samples`.
    pub start_chunk_samples_size: u64,
    /// Bytes of `end_chunk_samples`.
    pub end_chunk_samples_size: u64,
    /// The track's first and last byte kept in the file.
    pub start_offset: u64,
    /// See `start_offset`.
    pub end_offset: u64,
    /// Chunks in `stco`/`co64`.
    pub chunks: u64,
    /// A container met (`mdia`, `minf`, `stbl`), to tell duplicates.
    pub seen: [bool; 3],
}

/// The `moov` as kept.
#[derive(Debug, Default)]
pub struct Moov {
    /// `mvhd`, duration cut.
    pub mvhd: Option<Vec<u8>>,
    /// The tracks kept.
    pub traks: Vec<Trak>,
    /// `mvhd`'s timescale.
    pub timescale: u32,
}

/// The big-endian `u32` at `at`.
pub fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The big-endian `u64` at `at`.
pub fn be64(b: &[u8], at: usize) -> u64 {
    (u64::from(be32(b, at)) << 32) | u64::from(be32(b, at + 4))
}

/// Writes `v` big-endian at `at`.
pub fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// Writes `v` big-endian at `at`.
pub fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_be_bytes());
}

/// `name` with `data` behind an 8-byte header (NGINX rewrites every atom
/// it keeps so, a 64-bit header included).
pub fn atom(name: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(8 + data.len());
    v.extend_from_slice(&((8 + data.len()) as u32).to_be_bytes());
    v.extend_from_slice(name);
    v.extend_from_slice(data);
    v
}
