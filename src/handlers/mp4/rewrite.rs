//! The new file head for a span of an mp4: each track's tables cropped
//! (`crop.rs`), the atoms NGINX keeps laid out in its order — `ftyp`,
//! `moov` (`mvhd`, then per track `trak`, `tkhd`, an `edts`/`elst` for a
//! key-frame prefix, `mdia`, `mdhd`, `hdlr`, `minf`, `vmhd`/`smhd`,
//! `dinf`, `stbl`, `stsd`, `stts`, `stss`, `ctts`, `stsc`, `stsz`,
//! `stco`/`co64`) — then the `mdat` header; the chunk offsets moved to
//! where the samples land in the new file (`ngx_http_mp4_process`).

use super::crop;
use super::trak::{Moov, Mp4Error, Row, Span, Table, Trak};

/// What is sent: `head` from memory, then `start..end` of the file.
#[derive(Debug)]
pub struct Rewritten {
    /// `ftyp`, `moov` and the `mdat` header.
    pub head: Vec<u8>,
    /// The first byte of the file sent after it.
    pub start: u64,
    /// One past the last.
    pub end: u64,
}

/// Crops every track, lays the head out and moves the chunk offsets.
/// `mdat_end` is where the file's `mdat` ends (`None`: it has none).
pub fn process(
    ftyp: Option<&[u8]>,
    mut moov: Moov,
    mdat_end: Option<u64>,
    span: &Span,
    path: &str,
) -> Result<Rewritten, Mp4Error> {
    if moov.traks.is_empty() {
        return Err(Mp4Error::new(format!(
            "no mp4 trak atoms were found in \"{path}\""
        )));
    }
    let Some(mdat_end) = mdat_end else {
        return Err(Mp4Error::new(format!(
            "no mp4 mdat atom was found in \"{path}\""
        )));
    };
    let (mut start_offset, mut end_offset) = (span.file_end, 0);
    for trak in &mut moov.traks {
        crop::stts(trak, span, path)?;
        crop::stss(trak, span);
        crop::ctts(trak, span);
        crop::stsc(trak, span, path)?;
        crop::stsz(trak, span, path)?;
        crop::chunk_offsets(trak, span, mdat_end, path)?;
        super::moov::set_mdhd_duration(trak);
        start_offset = start_offset.min(trak.start_offset);
        end_offset = end_offset.max(trak.end_offset);
    }
    if end_offset <= start_offset {
        return Err(Mp4Error::new(format!(
            "no data between start time and end time in \"{path}\""
        )));
    }
    if start_offset >= mdat_end {
        return Err(Mp4Error::new(format!(
            "start time is out mp4 mdat atom in \"{path}\""
        )));
    }
    // The sizes are known before the offsets are moved: lay out once to
    // measure, move, lay out again.
    let ftyp_len = ftyp.map_or(0, <[u8]>::len);
    let moov_len = layout_moov(&moov).len();
    let mdat = mdat_header(end_offset - start_offset);
    let adjustment = (ftyp_len + moov_len + mdat.len()) as i64 - start_offset as i64;
    for trak in &mut moov.traks {
        crop::adjust(trak, adjustment);
    }
    let mut head = Vec::with_capacity(ftyp_len + moov_len + mdat.len());
    head.extend_from_slice(ftyp.unwrap_or_default());
    head.extend_from_slice(&layout_moov(&moov));
    head.extend_from_slice(&mdat);
    Ok(Rewritten {
        head,
        start: start_offset,
        end: end_offset,
    })
}

/// The `mdat` header for `size` bytes of data: 8 bytes, or 16 with a
/// 64-bit size when it would not fit.
fn mdat_header(size: u64) -> Vec<u8> {
    let mut h = Vec::with_capacity(16);
    if size > u64::from(u32::MAX) - 8 {
        h.extend_from_slice(&1u32.to_be_bytes());
        h.extend_from_slice(b"mdat");
        h.extend_from_slice(&(16 + size).to_be_bytes());
    } else {
        h.extend_from_slice(&((8 + size) as u32).to_be_bytes());
        h.extend_from_slice(b"mdat");
    }
    h
}

/// `name` around `children`.
fn boxed(name: &[u8; 4], children: &[u8]) -> Vec<u8> {
    super::trak::atom(name, children)
}

fn moov_children(moov: &Moov) -> Vec<u8> {
    let mut out = Vec::new();
    if let Some(m) = &moov.mvhd {
        out.extend_from_slice(m);
    }
    for t in &moov.traks {
        out.extend_from_slice(&layout_trak(t));
    }
    out
}

fn layout_moov(moov: &Moov) -> Vec<u8> {
    boxed(b"moov", &moov_children(moov))
}

/// A table: its header (8-byte atom header, then its head) and the
/// entries kept; `rows` false leaves the entries out (an `stss` left
/// without any keeps its header only, as NGINX sends it).
fn table<T: Row>(
    name: &[u8; 4],
    t: &Table<T>,
    out: &mut Vec<u8>,
    before: &[[u32; 3]],
    after: &[[u32; 3]],
) {
    let n = if t.has_rows { t.kept().len() } else { 0 };
    let extra = (before.len() + after.len()) * 12;
    let size = 8 + t.head.len() + n * T::WIDTH + extra;
    out.extend_from_slice(&(size as u32).to_be_bytes());
    out.extend_from_slice(name);
    out.extend_from_slice(&t.head);
    for e in before {
        e.write(out);
    }
    if t.has_rows {
        for r in t.kept() {
            r.write(out);
        }
    }
    for e in after {
        e.write(out);
    }
}

fn layout_stbl(t: &Trak) -> Vec<u8> {
    let mut stbl = Vec::new();
    if let Some(a) = &t.stsd {
        stbl.extend_from_slice(a);
    }
    if let Some(x) = &t.stts {
        table(b"stts", x, &mut stbl, &[], &[]);
    }
    if let Some(x) = &t.stss {
        table(b"stss", x, &mut stbl, &[], &[]);
    }
    if let Some(x) = &t.ctts {
        table(b"ctts", x, &mut stbl, &[], &[]);
    }
    if let Some(x) = &t.stsc {
        let (b, a) = (x.start.as_slice(), x.end.as_slice());
        table(b"stsc", &x.t, &mut stbl, b, a);
    }
    if let Some(x) = &t.stsz {
        table(b"stsz", x, &mut stbl, &[], &[]);
    }
    if let Some(x) = &t.co64 {
        table(b"co64", x, &mut stbl, &[], &[]);
    } else if let Some(x) = &t.stco {
        table(b"stco", x, &mut stbl, &[], &[]);
    }
    boxed(b"stbl", &stbl)
}

fn layout_trak(t: &Trak) -> Vec<u8> {
    let mut minf = Vec::new();
    for a in [&t.vmhd, &t.smhd, &t.dinf].into_iter().flatten() {
        minf.extend_from_slice(a);
    }
    minf.extend_from_slice(&layout_stbl(t));
    let mut mdia = Vec::new();
    for a in [&t.mdhd, &t.hdlr].into_iter().flatten() {
        mdia.extend_from_slice(a);
    }
    mdia.extend_from_slice(&boxed(b"minf", &minf));
    let mut trak = Vec::new();
    if let Some(a) = &t.tkhd {
        trak.extend_from_slice(a);
    }
    if t.prefix != 0 {
        trak.extend_from_slice(&edts(t));
    }
    trak.extend_from_slice(&boxed(b"mdia", &mdia));
    boxed(b"trak", &trak)
}

/// NGINX's `edts` with one `elst` entry (version 1): the movie duration
/// kept, starting `prefix` into the media (the samples from the key frame
/// to the start are decoded, not shown).
fn edts(t: &Trak) -> Vec<u8> {
    let mut elst = Vec::with_capacity(36);
    elst.extend_from_slice(&[1, 0, 0, 0]);
    elst.extend_from_slice(&1u32.to_be_bytes());
    elst.extend_from_slice(&t.movie_duration.to_be_bytes());
    elst.extend_from_slice(&t.prefix.to_be_bytes());
    elst.extend_from_slice(&1u16.to_be_bytes());
    elst.extend_from_slice(&0u16.to_be_bytes());
    boxed(b"edts", &boxed(b"elst", &elst))
}

#[cfg(test)]
mod tests {
    use super::mdat_header;

    #[test]
    fn an_mdat_too_large_for_32_bits_gets_a_64_bit_header() {
        assert_eq!(mdat_header(100), b"\x00\x00\x00\x6cmdat");
        let h = mdat_header(u64::from(u32::MAX));
        assert_eq!(&h[..8], b"\x00\x00\x00\x01mdat");
        assert_eq!(h[8..], (u64::from(u32::MAX) + 16).to_be_bytes());
    }
}
