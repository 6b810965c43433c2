//! `mp4`: NGINX's `ngx_http_mp4_module` as a location's handler. Without
//! `?start=`/`?end=` (seconds, three decimals kept) a file is sent whole;
//! with them the `moov` atom is read through the disk layer (never on the
//! event loop unless the location's `aio` says reads are inline), each
//! track's sample tables are cut to the span and a new `ftyp` + `moov` +
//! `mdat` header is built in memory, then sent before the `mdat` range of
//! the file as a [`Body::Spliced`] — so the media itself goes through the
//! normal file-send path (`sendfile`, the fast path, the pool). Ranges
//! apply to the whole new body, one range at most (NGINX's
//! `single_range`). A file that cannot be cut answers 500 with NGINX's
//! `error` line; a moov longer than `mp4_buffer_size` and
//! `mp4_max_buffer_size` too. A `moov` before the `mdat` with a start of
//! 0 and no end sends the file as it is.
//!
//! Written by hand, on purpose: the `mp4` and `mp4parse` crates (and
//! `mp4-atom`) parse a whole file into their own types and write it back
//! in their own layout, where this module must give NGINX's bytes exactly
//! (it keeps a fixed set of atoms in a fixed order, rewrites a few fields,
//! drops the rest) and must not hold the media in memory; what it needs
//! is a few big-endian tables.
//!
//! | File | What |
//! |---|---|
//! | `trak.rs` | the span asked for, a track and its sample tables, the error, byte helpers |
//! | `moov.rs` | reading a `moov` held in memory: the atoms kept, durations cut |
//! | `crop.rs` | each sample table cut to the span (`stts` … `stco`/`co64`) |
//! | `rewrite.rs` | the new `ftyp` + `moov` + `mdat` header and the file range after it |

mod crop;
mod moov;
mod rewrite;
mod trak;

use std::io;
use std::rc::Rc;

use super::disk_io::failed;
use super::file::content_type;
use super::flv::{arg, open_media};
use super::outcome::{Content, Env, Outcome};
use crate::disk::OpenFile;
use crate::http::conditional;
use crate::http::context::RequestCtx;
use crate::http::response::{Body, Response};
use crate::log::Level;
use trak::{be32, Moov, Mp4Error, Span};

/// NGINX's `ngx_http_mp4_atofp(value, 3)`: a decimal with at most one dot,
/// in thousandths (digits past the third decimal are ignored); -1 when it
/// does not parse.
fn atofp(v: &str) -> i64 {
    const CUTOFF: i64 = i64::MAX / 10;
    const CUTLIM: i64 = i64::MAX % 10;
    if v.is_empty() {
        return -1;
    }
    let (mut value, mut dot, mut point) = (0i64, false, 3u32);
    for b in v.bytes() {
        if b == b'.' {
            if dot {
                return -1;
            }
            dot = true;
            continue;
        }
        if !b.is_ascii_digit() {
            return -1;
        }
        if point == 0 {
            continue;
        }
        let d = i64::from(b - b'0');
        if value >= CUTOFF && (value > CUTOFF || d > CUTLIM) {
            return -1;
        }
        value = value * 10 + d;
        point -= u32::from(dot);
    }
    for _ in 0..point {
        if value > CUTOFF {
            return -1;
        }
        value *= 10;
    }
    value
}

/// The span `?start=` and `?end=` ask for, as NGINX reads them: an end
/// alone starts at 0; an end not after the start is ignored.
fn span_of(ctx: &RequestCtx) -> Option<(u64, u64)> {
    let mut start = arg(ctx, "start").map_or(-1, atofp);
    let mut length = 0;
    if let Some(end) = arg(ctx, "end").map(atofp).filter(|&e| e > 0) {
        if start < 0 {
            start = 0;
        }
        if end > start {
            length = end - start;
        }
    }
    (start >= 0).then_some((start as u64, length as u64))
}

/// The `mp4` handler.
pub async fn serve(ctx: &mut RequestCtx, env: &Env<'_>) -> Content {
    let (file, path) = match open_media(ctx, env).await {
        Ok(found) => found,
        Err(c) => return c,
    };
    let meta = file.meta;
    let (file, path) = (Rc::new(file), Rc::<str>::from(path));
    let whole = Body::File {
        file: Rc::clone(&file),
        start: 0,
        len: meta.size,
        path: Rc::clone(&path),
    };
    let body = match span_of(ctx) {
        None => whole,
        Some((start, length)) => {
            let s = &ctx.loc.s;
            let span = Span {
                start,
                length,
                start_key_frame: s.mp4_start_key_frame,
                file_end: meta.size,
            };
            let sizes = (s.mp4_buffer_size as usize, s.mp4_max_buffer_size);
            match cut(&file, &span, sizes, &path).await {
                Ok(None) => whole,
                Ok(Some(rw)) => Body::Spliced {
                    lead: rw.head.into(),
                    file,
                    start: rw.start,
                    len: rw.end - rw.start,
                    path,
                },
                Err(f) => return Content::Answered(fail(ctx, env, f, &path)),
            }
        }
    };
    let s = &ctx.loc.s;
    let mut resp = Response::new(200);
    resp.content_type = Some(content_type(&s.types, &s.default_type, &ctx.uri));
    resp.last_modified = Some(meta.mtime);
    resp.allow_ranges = true;
    // NGINX's ETag is of the length sent (`content_length_n` is set first).
    let sent = body.len();
    resp.content_length = Some(sent);
    resp.etag = s.etag.then(|| conditional::etag(meta.mtime, sent));
    resp.body = body;
    Content::Answered(Outcome::Send(resp))
}

/// Why a file could not be cut.
enum Fail {
    /// NGINX's `error` line.
    Mp4(Mp4Error),
    /// A failed read.
    Io(io::Error),
    /// A read that came back short (`crit`).
    Short(String),
}

impl From<Mp4Error> for Fail {
    fn from(e: Mp4Error) -> Fail {
        Fail::Mp4(e)
    }
}

/// The 500 for `f`, with its line.
fn fail(ctx: &RequestCtx, env: &Env<'_>, f: Fail, path: &str) -> Outcome {
    match f {
        Fail::Mp4(e) => ctx.log(env.log).error(format_args!("{}", e.0)),
        Fail::Short(line) => ctx.log(env.log).line(Level::Crit, format_args!("{line}")),
        Fail::Io(e) => return failed(ctx, env, &e, "pread", path),
    }
    Outcome::Status(500)
}

/// NGINX's read buffer over the file (`ngx_http_mp4_read`): bytes are read
/// `size` at a time, at least what is asked for, through the disk layer.
struct Reader<'a> {
    file: &'a OpenFile,
    buf: Vec<u8>,
    at: u64,
    size: usize,
    end: u64,
    path: &'a str,
}

impl Reader<'_> {
    /// `n` bytes at `offset`.
    async fn get(&mut self, offset: u64, n: usize) -> Result<&[u8], Fail> {
        let cached = offset >= self.at && offset + n as u64 <= self.at + self.buf.len() as u64;
        if !cached {
            let want = (self.size.max(n) as u64).min(self.end - offset) as usize;
            if want < n {
                return Err(Mp4Error::new(format!("\"{}\" mp4 file truncated", self.path)).into());
            }
            let mut buf = vec![0u8; want];
            let got = self
                .file
                .read_at(&mut buf, offset)
                .await
                .map_err(Fail::Io)?;
            if got != want {
                let path = self.path;
                return Err(Fail::Short(format!(
                    "pread() read only {got} of {want} from \"{path}\""
                )));
            }
            (self.buf, self.at) = (buf, offset);
        }
        let from = (offset - self.at) as usize;
        Ok(&self.buf[from..from + n])
    }
}

/// The `ftyp` atom whose `size` bytes of data start at `at`.
async fn read_ftyp(r: &mut Reader<'_>, at: u64, size: u64) -> Result<Vec<u8>, Fail> {
    if size > 1024 {
        let path = r.path;
        return Err(Mp4Error::new(format!("\"{path}\" mp4 ftyp atom is too large:{size}")).into());
    }
    let data = r.get(at, size as usize).await?;
    Ok(trak::atom(b"ftyp", data))
}

/// The `moov` atom whose `size` bytes of data start at `at`, read whole
/// (up to `mp4_max_buffer_size` when larger than `mp4_buffer_size`).
async fn read_moov(
    r: &mut Reader<'_>,
    at: u64,
    size: u64,
    (buffer_size, max_buffer_size): (usize, u64),
    span: &Span,
) -> Result<Moov, Fail> {
    let path = r.path;
    if size > buffer_size as u64 && size > max_buffer_size {
        return Err(Mp4Error::new(format!(
            "\"{path}\" mp4 moov atom is too large:{size}, \
             you may want to increase mp4_max_buffer_size"
        ))
        .into());
    }
    r.size = r.size.max(size as usize);
    let data = r.get(at, size as usize).await?;
    Ok(moov::read(data, span, path)?)
}

/// Reads the file's top-level atoms and builds the new head; `None` when
/// the file goes as it is (its `moov` comes first and the whole file is
/// asked for).
async fn cut(
    file: &OpenFile,
    span: &Span,
    (buffer_size, max_buffer_size): (usize, u64),
    path: &str,
) -> Result<Option<rewrite::Rewritten>, Fail> {
    let end = span.file_end;
    let mut r = Reader {
        file,
        buf: Vec::new(),
        at: 0,
        size: buffer_size,
        end,
        path,
    };
    let (mut ftyp, mut moov, mut mdat): (Option<Vec<u8>>, Option<Moov>, Option<u64>) =
        (None, None, None);
    let dup = |what: &str| Mp4Error::new(format!("duplicate mp4 {what} atom in \"{path}\""));
    let mut off = 0u64;
    while off < end {
        let b = r.get(off, (end - off).min(16) as usize).await?;
        if b.len() < 4 {
            return Err(Mp4Error::new(format!("\"{path}\" mp4 file truncated")).into());
        }
        if be32(b, 0) == 0 {
            break;
        }
        let Some((size, hdr)) = moov::header(b, 0, end - off, path)? else {
            break;
        };
        let name: [u8; 4] = b[4..8].try_into().expect("4 bytes");
        let data_size = size - hdr as u64;
        let data_at = off + hdr as u64;
        match &name {
            b"ftyp" => {
                if ftyp.is_some() {
                    return Err(dup("ftyp").into());
                }
                ftyp = Some(read_ftyp(&mut r, data_at, data_size).await?);
            }
            b"moov" => {
                let no_mdat = mdat.is_none();
                if no_mdat && span.start == 0 && span.length == 0 {
                    return Ok(None);
                }
                if moov.is_some() {
                    return Err(dup("moov").into());
                }
                let sizes = (buffer_size, max_buffer_size);
                moov = Some(read_moov(&mut r, data_at, data_size, sizes, span).await?);
                if !no_mdat {
                    break;
                }
            }
            b"mdat" => {
                if mdat.is_some() {
                    return Err(dup("mdat").into());
                }
                mdat = Some(off + size);
                if moov.as_ref().is_some_and(|m| !m.traks.is_empty()) {
                    break;
                }
            }
            _ => {}
        }
        off += size;
    }
    let moov = moov.unwrap_or_default();
    Ok(Some(rewrite::process(
        ftyp.as_deref(),
        moov,
        mdat,
        span,
        path,
    )?))
}

#[cfg(test)]
mod tests {
    use super::atofp;

    #[test]
    fn start_and_end_are_read_in_thousandths_as_nginx_reads_them() {
        assert_eq!(atofp("0"), 0);
        assert_eq!(atofp("2"), 2000);
        assert_eq!(atofp("7.1"), 7100);
        assert_eq!(atofp("2.7"), 2700);
        // A Flash player's many decimals: the fourth on is ignored.
        assert_eq!(atofp("1.23456789"), 1234);
        assert_eq!(atofp(".5"), 500);
        assert_eq!(atofp("5."), 5000);
        for bad in ["", "-1", "1.2.3", "x", "1e3", "99999999999999999999"] {
            assert_eq!(atofp(bad), -1, "{bad}");
        }
    }
}
