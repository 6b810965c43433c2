//! `PieceSource`: a response body read one bounded piece at a time, for
//! the body filters that rewrite it while it is sent (gzip, charset): a
//! body in memory, a file range read 64 KiB at a time through the disk
//! layer, or a streamed (proxied) body's own pieces. Cancel-safe: the
//! file position moves only once a piece has been read. Also the framing
//! every such filter asks for ([`frame_unknown_length`]).

use std::io;
use std::rc::Rc;

use crate::disk::OpenFile;
use crate::http::context::RequestCtx;
use crate::http::response::{Body, BodyStream, Response};

/// How much of a file one piece reads.
const FILE_PIECE: u64 = 64 * 1024;

/// For a body filter that changes the body's length (gzip, charset to or
/// from UTF-8, sub_filter): NGINX's chunked filter frames such a body as
/// chunks on HTTP/1.1 and closes the connection after it on HTTP/1.0.
pub fn frame_unknown_length(ctx: &RequestCtx, resp: &mut Response) {
    if ctx.head.version == crate::http::request::Version::Http11 {
        resp.chunked = true;
    } else {
        resp.close = true;
    }
}

/// Where a filtered body's bytes come from.
pub enum PieceSource {
    /// A body in memory (taken whole at the first piece).
    Bytes(Vec<u8>),
    /// Bytes in memory (a spliced body's lead, maybe none), then a file
    /// range.
    File {
        /// The bytes before the file's (taken whole at the first piece).
        lead: Vec<u8>,
        /// The open file.
        file: Rc<OpenFile>,
        /// The next byte to read.
        pos: u64,
        /// The end of the range.
        end: u64,
    },
    /// A streamed body's pieces.
    Stream(Box<dyn BodyStream>),
}

impl PieceSource {
    /// The source of `body` (a spliced body reads its lead first; a
    /// multipart body never reaches a body filter: ranges come after them; it and an empty body read as
    /// empty).
    pub fn of(body: Body) -> PieceSource {
        match body {
            Body::Bytes(b) => PieceSource::Bytes(b),
            Body::File {
                file, start, len, ..
            } => PieceSource::File {
                lead: Vec::new(),
                file,
                pos: start,
                end: start + len,
            },
            Body::Spliced {
                lead,
                file,
                start,
                len,
                ..
            } => PieceSource::File {
                lead: lead.to_vec(),
                file,
                pos: start,
                end: start + len,
            },
            Body::Stream(s) => PieceSource::Stream(s.into_inner()),
            Body::Empty | Body::Multipart { .. } => PieceSource::Bytes(Vec::new()),
        }
    }

    /// Whether the pieces come from a stream (a proxied body).
    pub fn is_stream(&self) -> bool {
        matches!(self, PieceSource::Stream(_))
    }

    /// The next piece, and whether it is the last.
    pub async fn next(&mut self) -> io::Result<(Vec<u8>, bool)> {
        match self {
            PieceSource::Bytes(b) => Ok((std::mem::take(b), true)),
            PieceSource::File {
                lead,
                file,
                pos,
                end,
            } => {
                if !lead.is_empty() {
                    return Ok((std::mem::take(lead), *pos >= *end));
                }
                let want = (*end - *pos).min(FILE_PIECE) as usize;
                let mut buf = vec![0u8; want];
                let n = file.read_at(&mut buf, *pos).await?;
                if n < want {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "file was truncated",
                    ));
                }
                *pos += n as u64;
                Ok((buf, *pos >= *end))
            }
            PieceSource::Stream(s) => {
                let mut piece = Vec::new();
                let more = s.read_chunk(&mut piece).await?;
                Ok((piece, !more))
            }
        }
    }
}
