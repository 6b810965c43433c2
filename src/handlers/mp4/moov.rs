//! Reading a `moov` atom held in memory into what NGINX's mp4 module keeps
//! of it: `mvhd`, and per track `tkhd`, `mdhd`, `hdlr`, `vmhd`/`smhd`,
//! `dinf`, `stsd` whole, and the sample tables (`stts`, `stss`, `ctts`,
//! `stsc`, `stsz`, `stco`/`co64`) as entries to crop. Every other atom is
//! dropped, as NGINX drops it. Durations in `mvhd`, `tkhd` and `mdhd` are
//! cut to the requested span as they are read; a track that ends before
//! the start is left out. Pure: no I/O, errors carry NGINX's log text.

use super::trak::{atom, be32, be64, put32, put64, Moov, Mp4Error, Span, Stsc, Table, Trak};

/// How a walk over a container ended.
enum Walk {
    Done,
    /// A track ends before the start: leave it out.
    Declined,
}

/// One atom's header at `off` of `buf`: (size, header length), with
/// NGINX's checks against `end` (`ngx_http_mp4_read_atom`); `None` for a
/// size of 0, which ends the walk.
pub(super) fn header(
    buf: &[u8],
    off: usize,
    end: u64,
    path: &str,
) -> Result<Option<(u64, usize)>, Mp4Error> {
    let truncated = || Mp4Error::new(format!("\"{path}\" mp4 file truncated"));
    if buf.len() < off + 8 {
        return Err(truncated());
    }
    let mut size = u64::from(be32(buf, off));
    let mut hdr = 8;
    if size == 0 {
        return Ok(None);
    }
    if size < 8 {
        if size != 1 {
            return Err(Mp4Error::new(format!(
                "\"{path}\" mp4 atom is too small:{size}"
            )));
        }
        if buf.len() < off + 16 {
            return Err(truncated());
        }
        size = be64(buf, off + 8);
        hdr = 16;
        if size < 16 {
            return Err(Mp4Error::new(format!(
                "\"{path}\" mp4 atom is too small:{size}"
            )));
        }
    }
    if size > end {
        return Err(Mp4Error::new(format!(
            "\"{path}\" mp4 atom too large:{size}"
        )));
    }
    Ok(Some((size, hdr)))
}

/// What a walk calls with each atom's name and data.
type Visit<'a> = dyn FnMut(&[u8; 4], &[u8]) -> Result<Walk, Mp4Error> + 'a;

/// Walks the atoms of `data`, calling `f` with each one's name and data.
fn walk(data: &[u8], path: &str, f: &mut Visit<'_>) -> Result<Walk, Mp4Error> {
    let mut off = 0;
    while off < data.len() {
        let Some((size, hdr)) = header(data, off, (data.len() - off) as u64, path)? else {
            return Ok(Walk::Done);
        };
        let size = size as usize;
        let name: [u8; 4] = data[off + 4..off + 8].try_into().expect("4 bytes");
        if let Walk::Declined = f(&name, &data[off + hdr..off + size])? {
            return Ok(Walk::Declined);
        }
        off += size;
    }
    Ok(Walk::Done)
}

fn dup(what: &str, path: &str) -> Mp4Error {
    Mp4Error::new(format!("duplicate mp4 {what} atom in \"{path}\""))
}

fn too_small(what: &str, path: &str) -> Mp4Error {
    Mp4Error::new(format!("\"{path}\" mp4 {what} atom too small"))
}

/// Reads the data of a `moov` atom.
pub fn read(data: &[u8], span: &Span, path: &str) -> Result<Moov, Mp4Error> {
    let mut moov = Moov::default();
    walk(data, path, &mut |name, body| {
        match name {
            b"mvhd" => read_mvhd(&mut moov, body, span, path)?,
            b"trak" => {
                let mut trak = Trak::default();
                let ts = moov.timescale;
                if let Walk::Done = walk(body, path, &mut |n, b| {
                    trak_atom(&mut trak, n, b, ts, span, path)
                })? {
                    moov.traks.push(trak);
                }
            }
            b"cmov" => {
                return Err(Mp4Error::new(format!(
                    "\"{path}\" mp4 compressed moov atom (cmov) is not supported"
                )))
            }
            _ => {}
        }
        Ok(Walk::Done)
    })?;
    Ok(moov)
}

/// `duration` less the start, at most the length, in `timescale` units;
/// `None` when it ends at or before the start (`strict`) or before it.
fn cut(duration: u64, timescale: u32, span: &Span, strict: bool) -> Option<u64> {
    let start = span.start * u64::from(timescale) / 1000;
    if duration < start || (strict && duration == start) {
        return None;
    }
    let mut d = duration - start;
    if span.length != 0 {
        d = d.min(span.length * u64::from(timescale) / 1000);
    }
    Some(d)
}

/// `mvhd`: the movie's timescale; its duration cut.
fn read_mvhd(moov: &mut Moov, body: &[u8], span: &Span, path: &str) -> Result<(), Mp4Error> {
    if moov.mvhd.is_some() {
        return Err(dup("mvhd", path));
    }
    // version, flags, times, timescale, duration, …: 100 bytes (v0), 112 (v1).
    let v1 = body.first().is_some_and(|&v| v != 0);
    if body.len() < 100 || (v1 && body.len() < 112) {
        return Err(too_small("mvhd", path));
    }
    let (ts_at, d_at) = if v1 { (20, 24) } else { (12, 16) };
    let timescale = be32(body, ts_at);
    let duration = if v1 {
        be64(body, d_at)
    } else {
        u64::from(be32(body, d_at))
    };
    moov.timescale = timescale;
    let Some(d) = cut(duration, timescale, span, false) else {
        return Err(Mp4Error::new(format!(
            "\"{path}\" mp4 start time exceeds file duration"
        )));
    };
    let mut a = atom(b"mvhd", body);
    if v1 {
        put64(&mut a, 8 + d_at, d);
    } else {
        put32(&mut a, 8 + d_at, d as u32);
    }
    moov.mvhd = Some(a);
    Ok(())
}

/// One atom of a `trak` (or of its `mdia`, `minf`, `stbl`).
fn trak_atom(
    trak: &mut Trak,
    name: &[u8; 4],
    body: &[u8],
    movie_ts: u32,
    span: &Span,
    path: &str,
) -> Result<Walk, Mp4Error> {
    let container = |trak: &mut Trak, i: usize, what: &str| {
        if trak.seen[i] {
            return Err(dup(what, path));
        }
        trak.seen[i] = true;
        Ok(())
    };
    let whole = |slot: &mut Option<Vec<u8>>, what: &str| {
        if slot.is_some() {
            return Err(dup(what, path));
        }
        *slot = Some(atom(name, body));
        Ok(Walk::Done)
    };
    match name {
        b"tkhd" => read_tkhd(trak, body, movie_ts, span, path),
        b"mdia" | b"minf" | b"stbl" => {
            let i = match name {
                b"mdia" => 0,
                b"minf" => 1,
                _ => 2,
            };
            container(trak, i, std::str::from_utf8(name).unwrap_or("?"))?;
            walk(body, path, &mut |n, b| {
                trak_atom(trak, n, b, movie_ts, span, path)
            })
        }
        b"mdhd" => read_mdhd(trak, body, span, path),
        b"hdlr" => whole(&mut trak.hdlr, "hdlr"),
        b"vmhd" | b"smhd" if trak.vmhd.is_some() || trak.smhd.is_some() => {
            Err(dup("vmhd/smhd", path))
        }
        b"vmhd" => whole(&mut trak.vmhd, "vmhd"),
        b"smhd" => whole(&mut trak.smhd, "smhd"),
        b"dinf" => whole(&mut trak.dinf, "dinf"),
        b"stsd" => {
            if body.len() < 16 {
                return Err(too_small("stsd", path));
            }
            whole(&mut trak.stsd, "stsd")
        }
        b"stts" | b"stss" | b"ctts" | b"stsc" | b"stsz" | b"stco" | b"co64" => {
            read_table(trak, name, body, path).map(|()| Walk::Done)
        }
        _ => Ok(Walk::Done),
    }
}

/// `tkhd`: the track's movie duration, cut (a track that ends at or
/// before the start is left out).
fn read_tkhd(
    trak: &mut Trak,
    body: &[u8],
    movie_ts: u32,
    span: &Span,
    path: &str,
) -> Result<Walk, Mp4Error> {
    let v1 = body.first().is_some_and(|&v| v != 0);
    if body.len() < 84 || (v1 && body.len() < 96) {
        return Err(too_small("tkhd", path));
    }
    let d_at = if v1 { 28 } else { 20 };
    let duration = if v1 {
        be64(body, d_at)
    } else {
        u64::from(be32(body, d_at))
    };
    let Some(d) = cut(duration, movie_ts, span, true) else {
        return Ok(Walk::Declined);
    };
    if trak.tkhd.is_some() {
        return Err(dup("tkhd", path));
    }
    trak.movie_duration = d;
    let mut a = atom(b"tkhd", body);
    if v1 {
        put64(&mut a, 8 + d_at, d);
    } else {
        put32(&mut a, 8 + d_at, d as u32);
    }
    trak.tkhd = Some(a);
    Ok(Walk::Done)
}

/// `mdhd`: the media timescale and duration, cut; the atom's duration is
/// written when the track is rebuilt (the key frame may add a prefix).
fn read_mdhd(trak: &mut Trak, body: &[u8], span: &Span, path: &str) -> Result<Walk, Mp4Error> {
    let v1 = body.first().is_some_and(|&v| v != 0);
    if body.len() < 24 || (v1 && body.len() < 36) {
        return Err(too_small("mdhd", path));
    }
    let (ts_at, d_at) = if v1 { (20, 24) } else { (12, 16) };
    let timescale = be32(body, ts_at);
    let duration = if v1 {
        be64(body, d_at)
    } else {
        u64::from(be32(body, d_at))
    };
    let Some(d) = cut(duration, timescale, span, true) else {
        return Ok(Walk::Declined);
    };
    if trak.mdhd.is_some() {
        return Err(dup("mdhd", path));
    }
    trak.timescale = timescale;
    trak.duration = d;
    trak.mdhd = Some(atom(b"mdhd", body));
    Ok(Walk::Done)
}

/// Writes the track's media duration into its `mdhd`.
pub fn set_mdhd_duration(trak: &mut Trak) {
    let d = trak.duration;
    if let Some(a) = &mut trak.mdhd {
        if a[8] == 0 {
            put32(a, 8 + 16, d as u32);
        } else {
            put64(a, 8 + 24, d);
        }
    }
}

/// A sample table: its header (version, flags, …) and its entries.
fn read_table(trak: &mut Trak, name: &[u8; 4], body: &[u8], path: &str) -> Result<(), Mp4Error> {
    let what = std::str::from_utf8(name).unwrap_or("?");
    // `stsz` has its uniform size before the count.
    let head = if name == b"stsz" { 12 } else { 8 };
    if body.len() < head {
        return Err(too_small(what, path));
    }
    let entries = be32(body, head - 4);
    let width: u64 = match name {
        b"stts" | b"ctts" => 8,
        b"stsc" => 12,
        b"co64" => 8,
        b"stsz" if be32(body, 4) != 0 => 0,
        _ => 4,
    };
    if head as u64 + u64::from(entries) * width > body.len() as u64 {
        return Err(too_small(what, path));
    }
    let rows = &body[head..head + (u64::from(entries) * width) as usize];
    let h = &body[..head];
    let dup_of = |t: bool, w: &str| if t { Err(dup(w, path)) } else { Ok(()) };
    match name {
        b"stts" => {
            dup_of(trak.stts.is_some(), what)?;
            trak.stts = Some(Table::read(h, entries, rows, true));
        }
        b"stss" => {
            dup_of(trak.stss.is_some(), what)?;
            trak.stss = Some(Table::read(h, entries, rows, true));
        }
        b"ctts" => {
            dup_of(trak.ctts.is_some(), what)?;
            trak.ctts = Some(Table::read(h, entries, rows, true));
        }
        b"stsc" => {
            dup_of(trak.stsc.is_some(), what)?;
            trak.stsc = Some(Stsc::new(Table::read(h, entries, rows, true)));
        }
        b"stsz" => {
            dup_of(trak.stsz.is_some(), what)?;
            trak.stsz = Some(Table::read(h, entries, rows, width != 0));
        }
        _ => {
            dup_of(trak.stco.is_some() || trak.co64.is_some(), "stco/co64")?;
            trak.chunks = u64::from(entries);
            if name == b"stco" {
                trak.stco = Some(Table::read(h, entries, rows, true));
            } else {
                trak.co64 = Some(Table::read(h, entries, rows, true));
            }
        }
    }
    Ok(())
}
