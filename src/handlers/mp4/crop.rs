//! The sample tables of one track cut to the requested span, step for
//! step as NGINX's `ngx_http_mp4_update_*_atom` and `crop_*_data` do it:
//! `stts` finds the first and last sample (and, with
//! `mp4_start_key_frame`, the key frame before the start: the samples
//! between become the `elst` prefix), `stss` and `ctts` follow the
//! samples, `stsc` turns them into chunks (adding an entry for a chunk cut
//! in the middle), `stsz` sizes the cut part of the first and last chunk,
//! and `stco`/`co64` give the byte range the track keeps. Integer widths
//! and wrapping follow NGINX's C.

use super::trak::{Mp4Error, Span, Trak};

fn err(text: String) -> Mp4Error {
    Mp4Error::new(text)
}

/// `stts`: the start (and the end), in samples.
pub fn stts(trak: &mut Trak, span: &Span, path: &str) -> Result<(), Mp4Error> {
    if trak.stts.is_none() {
        return Err(err(format!("no mp4 stts atoms were found in \"{path}\"")));
    }
    crop_stts(trak, span, true, path)?;
    crop_stts(trak, span, false, path)?;
    let t = trak.stts.as_mut().expect("checked");
    let n = t.entries;
    t.head[4..8].copy_from_slice(&n.to_be_bytes());
    Ok(())
}

fn crop_stts(trak: &mut Trak, span: &Span, start: bool, path: &str) -> Result<(), Mp4Error> {
    let sec = if start {
        span.start
    } else if span.length != 0 {
        span.length
    } else {
        return Ok(());
    };
    let mut start_time = sec * u64::from(trak.timescale) / 1000 + trak.prefix;
    let t = trak.stts.as_ref().expect("checked");
    let mut entries = t.entries;
    let mut start_sample: u64 = 0;
    let mut i = t.pos;
    let (mut count, mut duration, mut rest);
    loop {
        if i >= t.last {
            if start {
                return Err(err(format!(
                    "start time is out mp4 stts samples in \"{path}\""
                )));
            }
            trak.end_sample = trak.start_sample + start_sample;
            return Ok(());
        }
        [count, duration] = t.rows[i];
        if start_time < u64::from(count) * u64::from(duration) {
            start_sample += start_time / u64::from(duration);
            rest = (start_time / u64::from(duration)) as u32;
            break;
        }
        start_sample += u64::from(count);
        start_time -= u64::from(count) * u64::from(duration);
        entries = entries.wrapping_sub(1);
        i += 1;
    }
    if !start {
        let t = trak.stts.as_mut().expect("checked");
        t.rows[i][0] = rest;
        t.last = i + 1;
        t.entries = t.entries.wrapping_sub(entries.wrapping_sub(1));
        trak.end_sample = trak.start_sample + start_sample;
        return Ok(());
    }
    let mut key_prefix = seek_key_frame(trak, span, start_sample as u32, path)?;
    start_sample -= u64::from(key_prefix);
    let t = trak.stts.as_mut().expect("checked");
    while rest < key_prefix {
        trak.prefix += u64::from(rest.wrapping_mul(duration));
        key_prefix -= rest;
        if i == 0 {
            return Err(err(format!(
                "start time is out mp4 stts samples in \"{path}\""
            )));
        }
        i -= 1;
        entries = entries.wrapping_add(1);
        [count, duration] = t.rows[i];
        rest = count;
    }
    trak.prefix += u64::from(key_prefix.wrapping_mul(duration));
    trak.duration += trak.prefix;
    rest -= key_prefix;
    t.rows[i][0] = count.wrapping_sub(rest);
    t.pos = i;
    t.entries = entries;
    trak.start_sample = start_sample;
    Ok(())
}

/// With `mp4_start_key_frame`: how many samples before `start_sample`
/// (from 0) the last sync sample at or before it lies.
fn seek_key_frame(
    trak: &Trak,
    span: &Span,
    start_sample: u32,
    path: &str,
) -> Result<u32, Mp4Error> {
    let Some(stss) = trak.stss.as_ref().filter(|_| span.start_key_frame) else {
        return Ok(0);
    };
    let start_sample = start_sample.wrapping_add(1);
    let mut key_prefix = 0;
    for &sample in stss.kept() {
        if sample == 0 {
            return Err(err(format!("zero sync sample in \"{path}\"")));
        }
        if sample > start_sample {
            break;
        }
        key_prefix = start_sample - sample;
    }
    Ok(key_prefix)
}

/// `stss`: the sync samples kept, renumbered from the start.
pub fn stss(trak: &mut Trak, span: &Span) {
    if trak.stss.is_none() {
        return;
    }
    crop_stss(trak, span, true);
    crop_stss(trak, span, false);
    let first = trak.start_sample as u32;
    let t = trak.stss.as_mut().expect("checked");
    if t.entries != 0 {
        for s in t.kept_mut() {
            *s = s.wrapping_sub(first);
        }
    } else {
        t.has_rows = false;
    }
    let n = t.entries;
    t.head[4..8].copy_from_slice(&n.to_be_bytes());
}

fn crop_stss(trak: &mut Trak, span: &Span, start: bool) {
    let start_sample = if start {
        trak.start_sample + 1
    } else if span.length != 0 {
        trak.end_sample + 1
    } else {
        return;
    } as u32;
    let t = trak.stss.as_mut().expect("checked");
    let mut entries = t.entries;
    let mut i = t.pos;
    while i < t.last && t.rows[i] < start_sample {
        entries = entries.wrapping_sub(1);
        i += 1;
    }
    if start {
        t.pos = i;
        t.entries = entries;
    } else {
        t.last = i;
        t.entries = t.entries.wrapping_sub(entries);
    }
}

/// `ctts`: the composition offsets of the samples kept; the atom goes
/// when none is left.
pub fn ctts(trak: &mut Trak, span: &Span) {
    if trak.ctts.is_none() {
        return;
    }
    crop_ctts(trak, span, true);
    crop_ctts(trak, span, false);
    let t = trak.ctts.as_mut().expect("checked");
    if t.entries == 0 {
        trak.ctts = None;
        return;
    }
    let n = t.entries;
    t.head[4..8].copy_from_slice(&n.to_be_bytes());
}

fn crop_ctts(trak: &mut Trak, span: &Span, start: bool) {
    let mut start_sample = if start {
        trak.start_sample + 1
    } else if span.length != 0 {
        trak.end_sample - trak.start_sample + 1
    } else {
        return;
    } as u32;
    let t = trak.ctts.as_mut().expect("checked");
    let mut entries = t.entries;
    let mut i = t.pos;
    while i < t.last {
        let count = t.rows[i][0];
        if start_sample <= count {
            let rest = start_sample - 1;
            if start {
                t.rows[i][0] = count - rest;
                t.pos = i;
                t.entries = entries;
            } else {
                t.rows[i][0] = rest;
                t.last = i + 1;
                t.entries = t.entries.wrapping_sub(entries.wrapping_sub(1));
            }
            return;
        }
        start_sample -= count;
        entries = entries.wrapping_sub(1);
        i += 1;
    }
    if start {
        t.pos = t.last;
        t.entries = 0;
    }
}

/// `stsz`: the sizes of the samples kept, and the bytes of the first and
/// last chunk's samples outside the span.
pub fn stsz(trak: &mut Trak, span: &Span, path: &str) -> Result<(), Mp4Error> {
    let Some(t) = trak.stsz.as_mut().filter(|t| t.has_rows) else {
        return Ok(());
    };
    let mut entries = u64::from(t.entries);
    if trak.start_sample >= entries {
        return Err(err(format!(
            "start time is out mp4 stsz samples in \"{path}\""
        )));
    }
    entries -= trak.start_sample;
    t.pos += trak.start_sample as usize;
    let sum = |rows: &[u32], end: usize, n: u64| -> u64 {
        let from = end.saturating_sub(n as usize);
        rows[from.min(end)..end.min(rows.len())]
            .iter()
            .map(|&s| u64::from(s))
            .sum()
    };
    trak.start_chunk_samples_size = sum(&t.rows, t.pos, trak.start_chunk_samples);
    if trak.start_chunk_samples_size > span.file_end {
        return Err(err(format!(
            "too large mp4 start samples size in \"{path}\""
        )));
    }
    if span.length != 0 {
        let want = trak.end_sample.wrapping_sub(trak.start_sample);
        if want > entries {
            return Err(err(format!(
                "end time is out mp4 stsz samples in \"{path}\""
            )));
        }
        entries = want;
        t.last = t.pos + entries as usize;
        trak.end_chunk_samples_size = sum(&t.rows, t.last, trak.end_chunk_samples);
        if trak.end_chunk_samples_size > span.file_end {
            return Err(err(format!("too large mp4 end samples size in \"{path}\"")));
        }
    }
    t.entries = entries as u32;
    t.head[8..12].copy_from_slice(&(entries as u32).to_be_bytes());
    Ok(())
}

/// `stco` or `co64`: the chunks kept, the track's byte range in the file,
/// the first chunk's offset moved past the samples before the start.
pub fn chunk_offsets(
    trak: &mut Trak,
    span: &Span,
    mdat_end: u64,
    path: &str,
) -> Result<(), Mp4Error> {
    let wide = trak.co64.is_some();
    let name = if wide { "co64" } else { "stco" };
    // Both tables as u64 offsets, written back below.
    let rows: Vec<u64> = match (&trak.co64, &trak.stco) {
        (Some(t), _) => t.rows.clone(),
        (None, Some(t)) => t.rows.iter().map(|&o| u64::from(o)).collect(),
        (None, None) => {
            return Err(err(format!("no mp4 {name} atoms were found in \"{path}\"")));
        }
    };
    if trak.start_chunk >= trak.chunks {
        return Err(err(format!(
            "start time is out mp4 {name} chunks in \"{path}\""
        )));
    }
    let too_large = || err(format!("too large chunk offset in \"{path}\""));
    let fits = |offset: u64, size: u64| {
        offset <= span.file_end.wrapping_sub(size) && (wide || offset + size <= u64::from(u32::MAX))
    };
    let pos = trak.start_chunk as usize;
    let (mut offset, size) = (rows[pos], trak.start_chunk_samples_size);
    if !fits(offset, size) {
        return Err(too_large());
    }
    offset += size;
    trak.start_offset = offset;
    let (last, entries) = if span.length != 0 {
        if trak.end_chunk > trak.chunks {
            return Err(err(format!(
                "end time is out mp4 {name} chunks in \"{path}\""
            )));
        }
        let entries = trak.end_chunk.saturating_sub(trak.start_chunk);
        let last = pos + entries as usize;
        if entries != 0 {
            let o = if last - 1 == pos {
                offset
            } else {
                rows[last - 1]
            };
            if !fits(o, trak.end_chunk_samples_size) {
                return Err(too_large());
            }
            trak.end_offset = o + trak.end_chunk_samples_size;
        }
        (last, entries)
    } else {
        trak.end_offset = mdat_end;
        (rows.len(), trak.chunks - trak.start_chunk)
    };
    if entries == 0 {
        trak.start_offset = span.file_end;
        trak.end_offset = 0;
    }
    if let Some(t) = &mut trak.co64 {
        t.rows[pos] = offset;
        (t.pos, t.last, t.entries) = (pos, last, entries as u32);
        t.head[4..8].copy_from_slice(&(entries as u32).to_be_bytes());
    } else if let Some(t) = &mut trak.stco {
        t.rows[pos] = offset as u32;
        (t.pos, t.last, t.entries) = (pos, last, entries as u32);
        t.head[4..8].copy_from_slice(&(entries as u32).to_be_bytes());
    }
    Ok(())
}

/// Moves every chunk offset kept by `adjustment` (the new header's size
/// less the bytes dropped before the first sample sent).
pub fn adjust(trak: &mut Trak, adjustment: i64) {
    if let Some(t) = &mut trak.co64 {
        for o in t.kept_mut() {
            *o = o.wrapping_add(adjustment as u64);
        }
    } else if let Some(t) = &mut trak.stco {
        for o in t.kept_mut() {
            *o = o.wrapping_add(adjustment as i32 as u32);
        }
    }
}

/// `stsc`: the samples kept as chunks (`start_chunk`, `end_chunk` and the
/// samples of those chunks outside the span), renumbered from the start.
pub fn stsc(trak: &mut Trak, span: &Span, path: &str) -> Result<(), Mp4Error> {
    let Some(s) = &trak.stsc else {
        return Err(err(format!("no mp4 stsc atoms were found in \"{path}\"")));
    };
    if s.t.entries == 0 {
        return Err(err(format!(
            "zero number of entries in stsc atom in \"{path}\""
        )));
    }
    crop_stsc(trak, span, true, path)?;
    crop_stsc(trak, span, false, path)?;
    let first = trak.start_chunk as u32;
    let s = trak.stsc.as_mut().expect("checked");
    for e in s.t.kept_mut() {
        e[0] = e[0].wrapping_sub(first);
    }
    let n = s.t.entries;
    s.t.head[4..8].copy_from_slice(&n.to_be_bytes());
    Ok(())
}

/// Where a sample falls in `stsc`: the entry, its first chunk, samples
/// per chunk and id, the samples left into it, the chunk after its run,
/// the samples per chunk of the run before, and the entries from it on.
struct StscHit {
    i: usize,
    chunk: u32,
    samples: u32,
    id: u32,
    start_sample: u32,
    next_chunk: u32,
    prev_samples: u32,
    entries: u32,
}

fn find_stsc(
    trak: &Trak,
    mut start_sample: u32,
    mut entries: u32,
    start: bool,
    path: &str,
) -> Result<StscHit, Mp4Error> {
    let t = &trak.stsc.as_ref().expect("checked").t;
    let unordered = || err(format!("unordered mp4 stsc chunks in \"{path}\""));
    let mut i = t.pos;
    let [mut chunk, mut samples, mut id] = *t.rows.get(i).ok_or_else(unordered)?;
    let mut prev_samples = 0;
    i += 1;
    let mut next_chunk;
    loop {
        if i >= t.last {
            next_chunk = (trak.chunks as u32).wrapping_add(1);
            if next_chunk < chunk {
                return Err(unordered());
            }
            let n = u64::from(next_chunk - chunk) * u64::from(samples);
            if u64::from(start_sample) > n {
                let which = if start { "start" } else { "end" };
                return Err(err(format!(
                    "{which} time is out mp4 stsc chunks in \"{path}\""
                )));
            }
            break;
        }
        next_chunk = t.rows[i][0];
        if next_chunk < chunk {
            return Err(unordered());
        }
        let n = u64::from(next_chunk - chunk) * u64::from(samples);
        if u64::from(start_sample) < n {
            break;
        }
        start_sample -= n as u32;
        if next_chunk > chunk {
            prev_samples = samples;
        }
        chunk = next_chunk;
        [_, samples, id] = t.rows[i];
        entries = entries.wrapping_sub(1);
        i += 1;
    }
    Ok(StscHit {
        i: i - 1,
        chunk,
        samples,
        id,
        start_sample,
        next_chunk,
        prev_samples,
        entries: entries.wrapping_add(1),
    })
}

fn crop_stsc(trak: &mut Trak, span: &Span, start: bool, path: &str) -> Result<(), Mp4Error> {
    let s = trak.stsc.as_mut().expect("checked");
    let mut entries = s.t.entries.wrapping_sub(1);
    let start_sample = if start {
        trak.start_sample as u32
    } else if span.length != 0 {
        let mut want = trak.end_sample.wrapping_sub(trak.start_sample) as u32;
        if let Some(first) = &mut s.start {
            let mut samples = first[1];
            entries = entries.wrapping_sub(1);
            if samples > want {
                samples = want;
                first[1] = samples;
            }
            want -= samples;
        }
        want
    } else {
        return Ok(());
    };
    let hit = find_stsc(trak, start_sample, entries, start, path)?;
    if hit.samples == 0 {
        return Err(err(format!("zero number of samples in \"{path}\"")));
    }
    if hit.chunk == 0 {
        return Err(err(format!("zero chunk in \"{path}\"")));
    }
    let target_chunk = u64::from(hit.chunk - 1) + u64::from(hit.start_sample / hit.samples);
    let chunk_samples = hit.start_sample % hit.samples;
    let s = trak.stsc.as_mut().expect("checked");
    let (samples, next_chunk);
    if start {
        s.t.pos = hit.i;
        s.t.entries = hit.entries;
        trak.start_chunk = target_chunk;
        trak.start_chunk_samples = u64::from(chunk_samples);
        s.t.rows[hit.i][0] = (target_chunk + 1) as u32;
        samples = hit.samples - chunk_samples;
        next_chunk = hit.next_chunk;
    } else {
        if hit.start_sample != 0 {
            s.t.last = hit.i + 1;
            s.t.entries = s.t.entries.wrapping_sub(hit.entries.wrapping_sub(1));
            trak.end_chunk_samples = u64::from(hit.samples);
        } else {
            s.t.last = hit.i;
            s.t.entries = s.t.entries.wrapping_sub(hit.entries);
            trak.end_chunk_samples = u64::from(hit.prev_samples);
        }
        if chunk_samples != 0 {
            trak.end_chunk = target_chunk + 1;
            trak.end_chunk_samples = u64::from(chunk_samples);
        } else {
            trak.end_chunk = target_chunk;
        }
        samples = chunk_samples;
        next_chunk = hit.chunk.wrapping_add(1);
    }
    if chunk_samples == 0 {
        return Ok(());
    }
    if u64::from(next_chunk).wrapping_sub(target_chunk) == 2 {
        s.t.rows[hit.i][1] = samples;
    } else if start {
        s.start = Some([1, samples, hit.id]);
        s.t.rows[hit.i][0] = (trak.start_chunk + 2) as u32;
        s.t.entries = s.t.entries.wrapping_add(1);
    } else {
        let first = trak.end_chunk.wrapping_sub(trak.start_chunk) as u32;
        s.end = Some([first, samples, hit.id]);
        s.t.entries = s.t.entries.wrapping_add(1);
    }
    Ok(())
}
