//! `gzip`: NGINX's gzip filter (`gzip_static`, a content step, is
//! `gzip_static.rs`).
//!
//! The header filter ([`header_filter`], in the chain after the charset
//! filter and before the range filter, as NGINX orders them) decides as
//! `ngx_http_gzip_header_filter` does: statuses 200, 403 and 404, no
//! `Content-Encoding` yet, a known length not under `gzip_min_length`, a
//! type in `gzip_types` (HEAD too: NGINX marks a HEAD `header_only` in
//! its last header filter); then the client's side as
//! `ngx_http_gzip_ok` ([`gzip_ok`]: `Accept-Encoding` with its `q`,
//! `gzip_disable`, `gzip_http_version`, `gzip_proxied` for requests with
//! `Via`). A compressed response loses `Content-Length` (chunked to an
//! HTTP/1.1 client, closed after for 1.0) and ranges, and its ETag is
//! weakened (`W/"…"`; a non-quoted one removed). `gzip_vary` sends
//! `Vary: Accept-Encoding` where NGINX's header writer puts it, right
//! after `Connection`/`Keep-Alive`.
//!
//! The body ([`GzipStream`]) is compressed piece by piece (64 KiB of the
//! file, read through the disk layer; or a proxied body's pieces as they
//! come), never whole in memory. A body of at most [`INLINE_BODY`] bytes
//! is compressed on the loop (a few tens of microseconds at level 1);
//! larger ones on the capped [`crate::util::cpu_pool`], one piece in
//! flight per response, so a large body never stalls the loop's other
//! connections. The deflate state travels with the piece (flate2's raw
//! deflate; the gzip header and CRC trailer are written here, with
//! NGINX's header bytes).

use std::io;

use flate2::{Compress, Compression, FlushCompress, Status};
use tokio::sync::oneshot;

use super::body_source::PieceSource;
use crate::config::{
    GZIP_PROXIED_ANY, GZIP_PROXIED_AUTH, GZIP_PROXIED_EXPIRED, GZIP_PROXIED_NO_CACHE,
    GZIP_PROXIED_NO_ETAG, GZIP_PROXIED_NO_LM, GZIP_PROXIED_NO_STORE, GZIP_PROXIED_OFF,
    GZIP_PROXIED_PRIVATE,
};
use crate::http::context::RequestCtx;
use crate::http::request::Version;
use crate::http::response::{Body, BodyStream, ChunkFuture, Response, StreamBody};
use crate::util::cpu_pool;

/// Bodies of at most this many bytes are compressed on the event loop.
pub const INLINE_BODY: u64 = 32 * 1024;

/// Pieces of at most this size (the last bytes of a stream) are
/// compressed on the loop whatever the body's size.
const INLINE_PIECE: usize = 4 * 1024;

/// NGINX's gzip header: no name, no mtime, OS "Unix".
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3];

/// The gzip header filter: compresses `resp` when NGINX would. `Vary`
/// goes on any response of a request `gzip_static on` marked
/// (`ctx.gzip_vary`, NGINX's `r->gzip_vary`) when `gzip_vary` is on.
pub fn header_filter(ctx: &RequestCtx, resp: &mut Response) {
    let s = &ctx.loc.s;
    if ctx.gzip_vary && s.gzip_vary {
        add_vary(resp);
    }
    let encoded = resp
        .header("content-encoding")
        .is_some_and(|v| !v.is_empty());
    if !s.gzip
        || !matches!(resp.status, 200 | 403 | 404)
        || encoded
        || resp.content_length.is_some_and(|l| l < s.gzip_min_length)
        || !type_matches(&s.gzip_types, resp.content_type.as_deref())
    {
        return;
    }
    if s.gzip_vary {
        add_vary(resp);
    }
    if !gzip_ok(ctx, Some(resp)) {
        return;
    }
    resp.headers
        .push(("Content-Encoding".into(), "gzip".into()));
    resp.content_length = None;
    resp.allow_ranges = false;
    resp.accept_ranges = false;
    // A proxied `Accept-Ranges` goes too (NGINX's
    // `ngx_http_clear_accept_ranges`).
    resp.headers
        .retain(|(n, _)| !n.eq_ignore_ascii_case("accept-ranges"));
    weaken_etag(resp);
    if ctx.is_head() {
        // No body, so no framing (NGINX's chunked filter skips HEAD).
        resp.body = Body::Empty;
        return;
    }
    super::body_source::frame_unknown_length(ctx, resp);
    let body = std::mem::replace(&mut resp.body, Body::Empty);
    resp.body = Body::Stream(StreamBody::new(Box::new(GzipStream::new(
        body,
        s.gzip_comp_level,
    ))));
}

/// `Vary: Accept-Encoding`, once, first among the header lines (after
/// `Connection`/`Keep-Alive`, where NGINX's header writer puts it); a
/// file's ETag, which porter writes before the header lines, moves after
/// it, as NGINX has it in its list.
fn add_vary(resp: &mut Response) {
    if resp
        .headers
        .first()
        .is_some_and(|(n, v)| n == "Vary" && v == "Accept-Encoding")
    {
        return;
    }
    resp.headers
        .insert(0, ("Vary".into(), "Accept-Encoding".into()));
    if let Some(e) = resp.etag.take() {
        resp.headers.insert(1, ("ETag".into(), e));
    }
}

/// NGINX's `ngx_http_weak_etag`: `"x"` becomes `W/"x"`; one not quoted
/// is dropped.
pub(super) fn weaken_etag(resp: &mut Response) {
    let weak = |e: &str| -> Option<String> {
        if e.len() > 2 && e.starts_with("W/") {
            Some(e.to_string())
        } else if e.starts_with('"') {
            Some(format!("W/{e}"))
        } else {
            None
        }
    };
    if let Some(e) = resp.etag.take() {
        resp.etag = weak(&e);
        return;
    }
    if let Some(i) = resp.headers.iter().rposition(|(n, _)| n == "ETag") {
        match weak(&resp.headers[i].1) {
            Some(w) => resp.headers[i].1 = w,
            None => {
                resp.headers.remove(i);
            }
        }
    }
}

/// Whether `ct` (parameters and case ignored) is in `types`.
fn type_matches(types: &[String], ct: Option<&str>) -> bool {
    let Some(ct) = ct else {
        return false;
    };
    let base = ct.split(';').next().unwrap_or("").trim();
    types
        .iter()
        .any(|t| t == "*" || t.eq_ignore_ascii_case(base))
}

/// NGINX's `ngx_http_gzip_ok`: whether the client takes gzip, after
/// `gzip_disable`, `gzip_http_version` and, for a request with `Via`,
/// `gzip_proxied` against the response's headers (`resp`; `None` before
/// there is a response, as for `gzip_static`).
pub fn gzip_ok(ctx: &RequestCtx, resp: Option<&Response>) -> bool {
    let s = &ctx.loc.s;
    let Some(ae) = ctx.header("accept-encoding") else {
        return false;
    };
    if ae.len() < 4 || (!ae.starts_with("gzip,") && !accepts_gzip(ae.as_bytes())) {
        return false;
    }
    let ua = ctx.header("user-agent");
    if let Some(d) = &s.gzip_disable {
        if d.msie6 && ua.is_some_and(is_msie6) {
            return false;
        }
    }
    if ctx.head.version == Version::Http10 && !s.gzip_http10 {
        return false;
    }
    if ctx.header("via").is_some() && !proxied_ok(ctx, resp) {
        return false;
    }
    match (&s.gzip_disable, ua) {
        (Some(d), Some(ua)) => !d.patterns.iter().any(|r| r.is_match(ua)),
        _ => true,
    }
}

/// `gzip_proxied` for a request that came through a proxy.
fn proxied_ok(ctx: &RequestCtx, resp: Option<&Response>) -> bool {
    let p = ctx.loc.s.gzip_proxied;
    if p & GZIP_PROXIED_OFF != 0 {
        return false;
    }
    if p & GZIP_PROXIED_ANY != 0 {
        return true;
    }
    if ctx.header("authorization").is_some() && p & GZIP_PROXIED_AUTH != 0 {
        return true;
    }
    let h = |n: &str| resp.and_then(|r| r.header(n));
    if let Some(e) = h("expires") {
        if p & GZIP_PROXIED_EXPIRED == 0 {
            return false;
        }
        let Ok(expires) = httpdate::parse_http_date(e) else {
            return false;
        };
        let date = match h("date") {
            Some(d) => match httpdate::parse_http_date(d) {
                Ok(d) => d,
                Err(_) => return false,
            },
            None => std::time::SystemTime::now(),
        };
        return expires < date;
    }
    if let Some(cc) = h("cache-control") {
        let has = |tok: &str| {
            cc.split(',')
                .any(|t| t.trim().split('=').next() == Some(tok))
        };
        return (p & GZIP_PROXIED_NO_CACHE != 0 && has("no-cache"))
            || (p & GZIP_PROXIED_NO_STORE != 0 && has("no-store"))
            || (p & GZIP_PROXIED_PRIVATE != 0 && has("private"));
    }
    let last_modified = resp.is_some_and(|r| r.last_modified.is_some());
    if p & GZIP_PROXIED_NO_LM != 0 && last_modified {
        return false;
    }
    let etag = resp.is_some_and(|r| r.etag.is_some() || r.header("etag").is_some());
    !(p & GZIP_PROXIED_NO_ETAG != 0 && etag)
}

/// NGINX's `ngx_http_gzip_accept_encoding`: a `gzip` token (at the start
/// or after `,` or space) not followed by `;q=0`.
fn accepts_gzip(v: &[u8]) -> bool {
    let mut start = 0;
    let at = loop {
        let Some(i) = find_ci(&v[start..], b"gzip").map(|i| i + start) else {
            return false;
        };
        if i == 0 || v[i - 1] == b',' || v[i - 1] == b' ' {
            break i;
        }
        start = i + 4;
    };
    let mut p = at + 4;
    while p < v.len() {
        p += 1;
        match v[p - 1] {
            b',' => return true,
            b';' => return quantity_ok(&v[p..]),
            b' ' => continue,
            _ => return false,
        }
    }
    true
}

/// After `gzip;`: `q=` with a non-zero value (NGINX's
/// `ngx_http_gzip_quantity`), or nothing.
fn quantity_ok(v: &[u8]) -> bool {
    let mut p = 0;
    while p < v.len() {
        p += 1;
        match v[p - 1] {
            b'q' | b'Q' => {
                if p + 2 > v.len() || v[p] != b'=' {
                    return false;
                }
                return quantity(&v[p + 1..]) != 0;
            }
            b' ' => continue,
            _ => return false,
        }
    }
    true
}

fn quantity(v: &[u8]) -> u32 {
    let Some(&c) = v.first() else {
        return 0;
    };
    if c != b'0' && c != b'1' {
        return 0;
    }
    let mut q = u32::from(c - b'0') * 100;
    let Some(&c) = v.get(1) else {
        return q;
    };
    if c == b',' || c == b' ' {
        return q;
    }
    if c != b'.' {
        return 0;
    }
    let mut n = 0;
    for &c in &v[2..] {
        if c == b',' || c == b' ' {
            break;
        }
        if !c.is_ascii_digit() {
            return 0;
        }
        q += u32::from(c - b'0');
        n += 1;
    }
    if q > 100 || n > 3 {
        0
    } else {
        q
    }
}

fn find_ci(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w.eq_ignore_ascii_case(n))
}

/// NGINX's `msie6` test on `User-Agent`: MSIE 4 or 5, or 6 without `SV1`.
fn is_msie6(ua: &str) -> bool {
    let Some(i) = ua.find("MSIE ") else {
        return false;
    };
    let m = &ua.as_bytes()[i..];
    if i + 7 >= ua.len() || m[6] != b'.' {
        return false;
    }
    match m[5] {
        b'4' | b'5' => true,
        b'6' => !ua[i + 8..].contains("SV1"),
        _ => false,
    }
}

/// The gzip stream's state: raw deflate, the CRC and length of the input
/// for the trailer.
struct Encoder {
    deflate: Compress,
    crc: crc32fast::Hasher,
    len: u32,
    header_sent: bool,
}

/// Where a piece stands in the body it compresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece {
    /// More follows; deflate may keep bytes back.
    More,
    /// More follows, but what came goes out now (a proxied piece goes out
    /// as it came: deflate's buffer is emptied).
    Flushed,
    /// The body's last piece: the stream and the gzip trailer end here.
    Last,
}

impl Piece {
    /// The kind of a piece that is `last` or not, from a source that is a
    /// `stream` (flushed) or not.
    fn of(last: bool, stream: bool) -> Piece {
        match (last, stream) {
            (true, _) => Piece::Last,
            (false, true) => Piece::Flushed,
            (false, false) => Piece::More,
        }
    }
}

impl Encoder {
    fn new(level: u32) -> Box<Encoder> {
        Box::new(Encoder {
            deflate: Compress::new(Compression::new(level), false),
            crc: crc32fast::Hasher::new(),
            len: 0,
            header_sent: false,
        })
    }

    /// Compresses `input` onto `out`: the header first, the trailer after
    /// the [`Piece::Last`].
    fn encode(&mut self, input: &[u8], piece: Piece, out: &mut Vec<u8>) -> io::Result<()> {
        if !self.header_sent {
            out.extend_from_slice(&GZIP_HEADER);
            self.header_sent = true;
        }
        self.crc.update(input);
        self.len = self.len.wrapping_add(input.len() as u32);
        let mode = match piece {
            Piece::Last => FlushCompress::Finish,
            Piece::Flushed => FlushCompress::Sync,
            Piece::More => FlushCompress::None,
        };
        deflate(&mut self.deflate, input, mode, out)?;
        if piece == Piece::Last {
            out.extend_from_slice(&self.crc.clone().finalize().to_le_bytes());
            out.extend_from_slice(&self.len.to_le_bytes());
        }
        Ok(())
    }
}

/// Runs deflate over all of `input` with `mode`, growing `out` as needed.
fn deflate(
    c: &mut Compress,
    mut input: &[u8],
    mode: FlushCompress,
    out: &mut Vec<u8>,
) -> io::Result<()> {
    loop {
        if out.capacity() - out.len() < 1024 {
            out.reserve(input.len() / 2 + 4096);
        }
        let before = c.total_in();
        let status = c.compress_vec(input, out, mode).map_err(io::Error::other)?;
        input = &input[(c.total_in() - before) as usize..];
        let room_left = out.len() < out.capacity();
        match (mode, status) {
            (FlushCompress::Finish, Status::StreamEnd) => return Ok(()),
            (FlushCompress::Finish, _) => {}
            _ if input.is_empty() && room_left => return Ok(()),
            _ => {}
        }
    }
}

/// A piece being compressed on the pool: the encoder comes back with it.
type Pending = oneshot::Receiver<(Box<Encoder>, io::Result<Vec<u8>>)>;

/// A body compressed while it is sent (see the module header).
/// Cancel-safe: the input position moves only once a piece is read, and a
/// piece on the pool is kept and awaited again.
pub struct GzipStream {
    source: PieceSource,
    enc: Option<Box<Encoder>>,
    /// The whole body is small: every piece is compressed on the loop.
    inline: bool,
    pending: Option<(Pending, bool)>,
    done: bool,
}

impl GzipStream {
    fn new(body: Body, level: u32) -> GzipStream {
        let inline = match &body {
            Body::Bytes(b) => b.len() as u64 <= INLINE_BODY,
            Body::File { len, .. } => *len <= INLINE_BODY,
            Body::Spliced { .. } => body.len() <= INLINE_BODY,
            Body::Stream(_) => false,
            Body::Empty | Body::Multipart { .. } => true,
        };
        let source = PieceSource::of(body);
        GzipStream {
            source,
            enc: Some(Encoder::new(level)),
            inline,
            pending: None,
            done: false,
        }
    }
}

impl BodyStream for GzipStream {
    fn read_chunk<'a>(&'a mut self, out: &'a mut Vec<u8>) -> ChunkFuture<'a> {
        Box::pin(async move {
            loop {
                if let Some((rx, last)) = &mut self.pending {
                    let last = *last;
                    let got = rx.await;
                    self.pending = None;
                    let (enc, piece) = got.map_err(|_| io::Error::other("gzip task lost"))?;
                    self.enc = Some(enc);
                    out.extend_from_slice(&piece?);
                    self.done = last;
                    if !out.is_empty() {
                        return Ok(true);
                    }
                    continue;
                }
                if self.done {
                    return Ok(false);
                }
                let (input, last) = self.source.next().await?;
                let kind = Piece::of(last, self.source.is_stream());
                let Some(mut enc) = self.enc.take() else {
                    return Err(io::Error::other("gzip stream reused"));
                };
                if self.inline || input.len() <= INLINE_PIECE {
                    let r = enc.encode(&input, kind, out);
                    self.enc = Some(enc);
                    r?;
                    self.done = last;
                    if !out.is_empty() {
                        return Ok(true);
                    }
                    continue;
                }
                let rx = cpu_pool::submit(move || {
                    let mut piece = Vec::with_capacity(input.len() / 3 + 64);
                    let r = enc.encode(&input, kind, &mut piece);
                    (enc, r.map(|()| piece))
                });
                self.pending = Some((rx, last));
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn gunzip(b: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(b)
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    #[test]
    fn pieces_make_one_gzip_stream() {
        let mut enc = Encoder::new(1);
        let mut out = Vec::new();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let (a, b) = data.split_at(70_000);
        enc.encode(a, Piece::More, &mut out).unwrap();
        enc.encode(b, Piece::Flushed, &mut out).unwrap();
        enc.encode(&[], Piece::Last, &mut out).unwrap();
        assert_eq!(&out[..10], &GZIP_HEADER);
        assert_eq!(gunzip(&out), data);
    }

    #[test]
    fn accept_encoding_as_nginx_reads_it() {
        for (v, ok) in [
            ("gzip", true),
            ("deflate, gzip", true),
            ("br;q=1, gzip;q=0.5", true),
            ("gzip;q=0", false),
            ("gzip; q=0.000", false),
            ("GZIP", true),
            ("x-gzip", false),
            ("gzipx", false),
            ("identity", false),
            ("gzip;q=1.5", false),
        ] {
            assert_eq!(accepts_gzip(v.as_bytes()), ok, "{v}");
        }
    }

    #[test]
    fn msie6_is_4_to_6_without_sv1() {
        assert!(is_msie6(
            "Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)"
        ));
        assert!(is_msie6("Mozilla/4.0 (compatible; MSIE 5.5; Windows 98)"));
        assert!(!is_msie6(
            "Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1; SV1)"
        ));
        assert!(!is_msie6(
            "Mozilla/4.0 (compatible; MSIE 7.0; Windows NT 6.0)"
        ));
        assert!(!is_msie6("curl/8"));
    }

    #[test]
    fn etags_weaken_as_nginx_weakens_them() {
        let mut r = Response::new(200);
        r.etag = Some("\"5f5e-10\"".into());
        weaken_etag(&mut r);
        assert_eq!(r.etag.as_deref(), Some("W/\"5f5e-10\""));
        weaken_etag(&mut r);
        assert_eq!(r.etag.as_deref(), Some("W/\"5f5e-10\""));
        r.etag = Some("bare".into());
        weaken_etag(&mut r);
        assert_eq!(r.etag, None);
    }
}
