//! `add_trailer` (NGINX's headers filter and chunked filter together):
//! when a trailer applies — the status is one of 200, 201, 204, 206, 301,
//! 302, 303, 307, 308, or the line says `always` — NGINX sets
//! `expect_trailers`, and its chunked filter then sends the body chunked
//! even when its length is known (`Content-Length` goes away), on
//! HTTP/1.1 only, never for HEAD, 204, 304 or 1xx. The trailer values are
//! rendered after the body (`http::trailers`, when the connection writes
//! the last chunk); an empty value is not sent.
//!
//! A body known whole (bytes, a file range) is turned into a stream read
//! a piece at a time through [`PieceSource`] (the disk layer for a file),
//! as the gzip filter does; a `multipart/byteranges` body keeps its
//! Content-Length and gets no trailers (see docs/differences.md).

use crate::http::context::RequestCtx;
use crate::http::request::Version;
use crate::http::response::{Body, BodyStream, ChunkFuture, Response, StreamBody};
use crate::http::trailers::safe_status;

use super::body_source::PieceSource;

/// The header filter: marks `resp` as ending with trailers and frames it
/// chunked, when a trailer applies and NGINX's chunked filter would.
pub fn header_filter(ctx: &RequestCtx, resp: &mut Response) {
    let lines = &ctx.loc.s.add_trailers;
    let safe = safe_status(resp.status);
    if !lines.iter().any(|t| safe || t.always) {
        return;
    }
    let chunkable = ctx.head.version == Version::Http11
        && !ctx.is_head()
        && resp.status >= 200
        && !matches!(resp.status, 204 | 304);
    if !chunkable || matches!(resp.body, Body::Multipart { .. }) {
        return;
    }
    resp.content_length = None;
    resp.chunked = true;
    resp.trailers = true;
    if !matches!(resp.body, Body::Stream(_)) {
        let body = std::mem::replace(&mut resp.body, Body::Empty);
        resp.body = Body::Stream(StreamBody::new(Box::new(Pieces {
            source: PieceSource::of(body),
            done: false,
        })));
    }
}

/// A body known whole, read as a stream.
struct Pieces {
    source: PieceSource,
    done: bool,
}

impl BodyStream for Pieces {
    fn read_chunk<'a>(&'a mut self, out: &'a mut Vec<u8>) -> ChunkFuture<'a> {
        Box::pin(async move {
            if self.done {
                return Ok(false);
            }
            let (piece, last) = self.source.next().await?;
            self.done = last;
            out.extend_from_slice(&piece);
            Ok(!piece.is_empty() || !last)
        })
    }
}
