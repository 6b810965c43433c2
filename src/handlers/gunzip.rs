//! `gunzip`: NGINX's gunzip filter (`ngx_http_gunzip_filter_module`),
//! in the chain after the userid filter and before sub_filter, charset,
//! SSI and gzip, as NGINX orders them, so those filters see the plain
//! body.
//!
//! The header filter ([`header_filter`]) decides as
//! `ngx_http_gunzip_header_filter`: in a location with `gunzip on`, a
//! response whose `Content-Encoding` is `gzip` marks the request for
//! `Vary: Accept-Encoding` (`ctx.gzip_vary`, which the gzip filter sends
//! under `gzip_vary on`) and, unless the client takes gzip
//! (`gzip::gzip_ok`; a subrequest never does, as NGINX's
//! `ngx_http_gzip_ok` declines them), loses its `Content-Encoding`,
//! `Content-Length` and ranges, and has its ETag weakened; the body is
//! then inflated while it is sent (chunked, or a close on HTTP/1.0). HEAD
//! gets those headers and no body. Subrequests pass it too (an SSI
//! include of a gzipped answer is inflated), as NGINX runs it for them.
//!
//! The body ([`GunzipStream`]) reads the same piece source as the other
//! body filters and inflates with flate2's multi-member gzip decoder
//! (several gzip members in a row make one body, as NGINX's
//! `inflateReset` loop). Input goes in small slices and a read returns
//! once `gunzip_buffers` (number × size) of output is at hand, so a
//! small piece that inflates to a great deal never sits whole in memory.
//! Inflating costs a fraction of deflating and the output per read is
//! bounded, so it runs on the loop (the gzip filter sends large bodies
//! to the CPU pool).

use std::io::{self, Write};

use flate2::write::MultiGzDecoder;

use super::body_source::PieceSource;
use super::gzip::{gzip_ok, weaken_etag};
use crate::http::context::RequestCtx;
use crate::http::response::{Body, BodyStream, ChunkFuture, Response, StreamBody};

/// How much compressed input goes to the decoder at a time: the most one
/// slice can inflate to (deflate's ratio is at most about 1032:1) stays
/// near a megabyte whatever `gunzip_buffers` says.
const INPUT_SLICE: usize = 1024;

/// The gunzip header filter (see the module header).
pub fn header_filter(ctx: &mut RequestCtx, resp: &mut Response) {
    let s = &ctx.loc.s;
    if !s.gunzip
        || !resp
            .header("content-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("gzip"))
    {
        return;
    }
    ctx.gzip_vary = true;
    if !ctx.subrequest && gzip_ok(ctx, Some(resp)) {
        return;
    }
    let cap = (s.gunzip_buffers.0 * s.gunzip_buffers.1) as usize;
    resp.headers.retain(|(n, _)| {
        !n.eq_ignore_ascii_case("content-encoding") && !n.eq_ignore_ascii_case("accept-ranges")
    });
    resp.content_length = None;
    resp.allow_ranges = false;
    resp.accept_ranges = false;
    weaken_etag(resp);
    if ctx.is_head() || matches!(resp.body, Body::Empty) {
        resp.body = Body::Empty;
        return;
    }
    super::body_source::frame_unknown_length(ctx, resp);
    let body = std::mem::replace(&mut resp.body, Body::Empty);
    resp.body = Body::Stream(StreamBody::new(Box::new(GunzipStream::new(body, cap))));
}

/// A gzip body inflated while it is sent (see the module header).
/// Cancel-safe: a piece read is kept until the decoder has all of it.
pub struct GunzipStream {
    source: PieceSource,
    decoder: MultiGzDecoder<Vec<u8>>,
    /// Input read and not yet given to the decoder.
    input: Vec<u8>,
    /// How far into `input` the decoder has read.
    at: usize,
    /// The source's last piece has been read.
    last: bool,
    /// The end was reached and checked.
    done: bool,
    /// Output held before a read returns it.
    cap: usize,
}

impl GunzipStream {
    fn new(body: Body, cap: usize) -> GunzipStream {
        GunzipStream {
            source: PieceSource::of(body),
            decoder: MultiGzDecoder::new(Vec::new()),
            input: Vec::new(),
            at: 0,
            last: false,
            done: false,
            cap: cap.max(INPUT_SLICE),
        }
    }

    /// Inflates what input is at hand until `cap` bytes of output are
    /// ready, then moves them to `out`.
    fn inflate(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        while self.at < self.input.len() && self.decoder.get_ref().len() < self.cap {
            let end = (self.at + INPUT_SLICE).min(self.input.len());
            self.decoder
                .write_all(&self.input[self.at..end])
                .map_err(inflate_failed)?;
            self.at = end;
            self.decoder.flush().map_err(inflate_failed)?;
        }
        if self.at == self.input.len() {
            self.input.clear();
            self.at = 0;
        }
        out.append(self.decoder.get_mut());
        Ok(())
    }
}

/// NGINX's `inflate() failed` as the error the writer logs.
fn inflate_failed(e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("inflate() failed: {e}"))
}

impl BodyStream for GunzipStream {
    fn read_chunk<'a>(&'a mut self, out: &'a mut Vec<u8>) -> ChunkFuture<'a> {
        Box::pin(async move {
            loop {
                if self.done {
                    return Ok(false);
                }
                self.inflate(out)?;
                if !out.is_empty() {
                    return Ok(true);
                }
                if !self.input.is_empty() {
                    continue;
                }
                if self.last {
                    self.decoder.try_finish().map_err(|e| {
                        io::Error::new(e.kind(), format!("inflate() returned {e} on response end"))
                    })?;
                    self.done = true;
                    out.append(self.decoder.get_mut());
                    return Ok(!out.is_empty());
                }
                let (piece, last) = self.source.next().await?;
                self.input = piece;
                self.last = last;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::GzEncoder;
    use flate2::Compression;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn run(body: Vec<u8>, cap: usize) -> io::Result<Vec<u8>> {
        let mut s = GunzipStream::new(Body::Bytes(body), cap);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut all = Vec::new();
            loop {
                let mut out = Vec::new();
                let more = s.read_chunk(&mut out).await?;
                assert!(out.len() <= cap + 1024 * 1100, "a read held {}", out.len());
                all.extend_from_slice(&out);
                if !more {
                    return Ok(all);
                }
            }
        })
    }

    #[test]
    fn members_in_a_row_make_one_body() {
        let mut two = gz(b"X000XXXXXX");
        two.extend(gz(b"X001XXXXXX"));
        assert_eq!(run(two, 4096).unwrap(), b"X000XXXXXXX001XXXXXX");
    }

    #[test]
    fn a_large_body_comes_out_in_bounded_reads() {
        let data = vec![b'a'; 3 << 20];
        assert_eq!(run(gz(&data), 128 * 1024).unwrap(), data);
    }

    #[test]
    fn an_empty_member_is_an_empty_body_and_garbage_an_error() {
        assert_eq!(run(gz(b""), 4096).unwrap(), b"");
        assert!(run(b"not gzip at all".to_vec(), 4096).is_err());
    }
}
