//! `Transfer-Encoding: chunked` (RFC 9112 §7.1) both ways. The decoder
//! reads request bodies (and upstream bodies, through `upstream::wire`):
//! chunk sizes in hex with optional extensions, CRLF after each chunk, a
//! final zero chunk and optional trailers, on any split of the input, byte
//! by byte included. The encoder frames what porter sends chunked (a
//! streamed response to a client, a request body to an upstream): a size
//! line in lowercase hex, the data, CRLF, and [`LAST_CHUNK`] at the end,
//! without extensions or trailers.

/// A malformed chunked body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkError(pub &'static str);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Size,
    SizeLf,
    Ext,
    Data(u64),
    DataCr,
    DataLf,
    TrailerStart,
    Trailer,
    TrailerLf,
    EndLf,
    Done,
}

/// Decoder state for one body.
#[derive(Debug, Clone)]
pub struct ChunkedDecoder {
    state: State,
    size: u64,
    digits: usize,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl ChunkedDecoder {
    /// A decoder at the start of a body.
    pub fn new() -> ChunkedDecoder {
        ChunkedDecoder {
            state: State::Size,
            size: 0,
            digits: 0,
        }
    }

    /// Consumes `input`, appending body bytes to `out` when given. Returns
    /// the bytes consumed and whether the body (trailers included) ended;
    /// bytes after the end are not consumed.
    pub fn feed(
        &mut self,
        input: &[u8],
        mut out: Option<&mut Vec<u8>>,
    ) -> Result<(usize, bool), ChunkError> {
        let mut i = 0;
        while i < input.len() {
            let c = input[i];
            match self.state {
                State::Done => return Ok((i, true)),
                State::Size | State::Ext | State::SizeLf => self.size_line(c)?,
                State::Data(left) => {
                    let take = ((input.len() - i) as u64).min(left) as usize;
                    if let Some(o) = out.as_deref_mut() {
                        o.extend_from_slice(&input[i..i + take]);
                    }
                    i += take;
                    let left = left - take as u64;
                    self.state = if left == 0 {
                        State::DataCr
                    } else {
                        State::Data(left)
                    };
                    continue;
                }
                State::DataCr | State::DataLf => self.data_end(c)?,
                State::TrailerStart | State::Trailer | State::TrailerLf | State::EndLf => {
                    if self.trailer(c)? {
                        return Ok((i + 1, true));
                    }
                }
            }
            i += 1;
        }
        Ok((i, self.state == State::Done))
    }

    /// One byte of a size line: the hex size, extensions, its line end.
    fn size_line(&mut self, c: u8) -> Result<(), ChunkError> {
        match self.state {
            State::Size => match c {
                b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                    let v = (c as char).to_digit(16).unwrap() as u64;
                    self.digits += 1;
                    if self.digits > 15 {
                        return Err(ChunkError("chunk size too large"));
                    }
                    self.size = self.size * 16 + v;
                }
                b';' | b' ' | b'\t' if self.digits > 0 => self.state = State::Ext,
                b'\r' if self.digits > 0 => self.state = State::SizeLf,
                b'\n' if self.digits > 0 => self.chunk_start(),
                _ => return Err(ChunkError("invalid chunk size")),
            },
            State::Ext => match c {
                b'\r' => self.state = State::SizeLf,
                b'\n' => self.chunk_start(),
                _ => {}
            },
            _ => {
                if c != b'\n' {
                    return Err(ChunkError("expected LF after chunk size"));
                }
                self.chunk_start();
            }
        }
        Ok(())
    }

    /// One byte of the line end after a chunk's data.
    fn data_end(&mut self, c: u8) -> Result<(), ChunkError> {
        match self.state {
            State::DataCr => match c {
                b'\r' => self.state = State::DataLf,
                b'\n' => self.state = State::Size,
                _ => return Err(ChunkError("expected CRLF after chunk data")),
            },
            _ => {
                if c != b'\n' {
                    return Err(ChunkError("expected LF after chunk data"));
                }
                self.state = State::Size;
            }
        }
        Ok(())
    }

    /// One byte after the last chunk: trailer lines, then the empty line
    /// that ends the body. `Ok(true)` once that line is complete.
    fn trailer(&mut self, c: u8) -> Result<bool, ChunkError> {
        match self.state {
            State::TrailerStart => match c {
                b'\r' => self.state = State::EndLf,
                b'\n' => {
                    self.state = State::Done;
                    return Ok(true);
                }
                _ => self.state = State::Trailer,
            },
            State::Trailer => {
                if c == b'\r' {
                    self.state = State::TrailerLf;
                } else if c == b'\n' {
                    self.state = State::TrailerStart;
                }
            }
            State::TrailerLf => {
                if c != b'\n' {
                    return Err(ChunkError("expected LF after trailer"));
                }
                self.state = State::TrailerStart;
            }
            _ => {
                if c != b'\n' {
                    return Err(ChunkError("expected LF at end of body"));
                }
                self.state = State::Done;
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn chunk_start(&mut self) {
        self.state = if self.size == 0 {
            State::TrailerStart
        } else {
            State::Data(self.size)
        };
        self.size = 0;
        self.digits = 0;
    }
}

/// The last chunk and the empty line that ends a chunked body (porter
/// sends no trailers).
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// The last chunk with trailer fields (RFC 9112 7.1.2).
pub fn last_chunk_with(trailers: &[(String, String)]) -> Vec<u8> {
    let mut out = b"0\r\n".to_vec();
    for (n, v) in trailers {
        super::header(&mut out, n, v);
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// The line end that closes a chunk's data.
pub const CHUNK_END: &[u8] = b"\r\n";

/// The longest size line: 16 hex digits (any `usize`) and CRLF; what
/// [`begin_chunk`] reserves.
pub const SIZE_LINE_MAX: usize = 18;

/// Appends the size line of a chunk of `len` data bytes (`{len:x}\r\n`)
/// to `out`, for data sent from another buffer right after it and closed
/// by [`CHUNK_END`]. (A `len` of 0 would end the body: end it with
/// [`LAST_CHUNK`].)
pub fn push_size_line(out: &mut Vec<u8>, len: usize) {
    let mut line = [0u8; SIZE_LINE_MAX];
    let at = size_line(len, &mut line);
    out.extend_from_slice(&line[at..]);
}

/// Starts a chunk framed in place: reserves [`SIZE_LINE_MAX`] bytes at
/// the end of `buf` for its size line and returns where its data starts.
/// Append the data, then call [`end_chunk`].
pub fn begin_chunk(buf: &mut Vec<u8>) -> usize {
    buf.extend_from_slice(&[b'0'; SIZE_LINE_MAX - 2]);
    buf.extend_from_slice(CHUNK_END);
    buf.len()
}

/// Ends the chunk whose data starts at `data_start` (from
/// [`begin_chunk`]): writes its size line right-aligned in the reserved
/// room and appends [`CHUNK_END`]. Returns where the framed chunk starts;
/// send `buf[returned..]`.
pub fn end_chunk(buf: &mut Vec<u8>, data_start: usize) -> usize {
    let mut line = [0u8; SIZE_LINE_MAX];
    let at = size_line(buf.len() - data_start, &mut line);
    let from = data_start - (SIZE_LINE_MAX - at);
    buf[from..data_start].copy_from_slice(&line[at..]);
    buf.extend_from_slice(CHUNK_END);
    from
}

/// Writes the size line of `len` right-aligned in `line`; returns where it
/// starts.
fn size_line(mut len: usize, line: &mut [u8; SIZE_LINE_MAX]) -> usize {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut at = SIZE_LINE_MAX - 2;
    line[at..].copy_from_slice(CHUNK_END);
    loop {
        at -= 1;
        line[at] = HEX[len & 0xf];
        len >>= 4;
        if len == 0 {
            return at;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &[u8] = b"5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\nNEXT";

    #[test]
    fn whole_input() {
        let mut d = ChunkedDecoder::new();
        let mut out = Vec::new();
        let (n, done) = d.feed(BODY, Some(&mut out)).unwrap();
        assert!(done);
        assert_eq!(&BODY[n..], b"NEXT");
        assert_eq!(out, b"hello0123456789");
    }

    #[test]
    fn byte_by_byte() {
        let mut d = ChunkedDecoder::new();
        let mut out = Vec::new();
        let mut used = 0;
        for i in 0..BODY.len() {
            let (n, done) = d.feed(&BODY[i..i + 1], Some(&mut out)).unwrap();
            used += n;
            if done {
                break;
            }
        }
        assert_eq!(used, BODY.len() - 4);
        assert_eq!(out, b"hello0123456789");
    }

    #[test]
    fn malformed() {
        assert!(ChunkedDecoder::new().feed(b"x\r\n", None).is_err());
        assert!(ChunkedDecoder::new().feed(b"\r\n", None).is_err());
        assert!(ChunkedDecoder::new().feed(b"1\r\nab\r\n", None).is_err());
        assert!(ChunkedDecoder::new()
            .feed(b"ffffffffffffffffff\r\n", None)
            .is_err());
        assert!(ChunkedDecoder::new().feed(b"1\rx", None).is_err());
    }

    #[test]
    fn size_lines_are_lowercase_hex_with_crlf() {
        for (len, line) in [
            (1usize, &b"1\r\n"[..]),
            (10, b"a\r\n"),
            (255, b"ff\r\n"),
            (65536, b"10000\r\n"),
            (usize::MAX, b"ffffffffffffffff\r\n"),
        ] {
            let mut out = b"HEAD".to_vec();
            push_size_line(&mut out, len);
            assert_eq!(&out[..4], b"HEAD");
            assert_eq!(&out[4..], line, "{len}");
            assert_eq!(&out[4..], format!("{len:x}\r\n").as_bytes());
        }
    }

    #[test]
    fn chunks_framed_in_place_match_the_size_line_form() {
        for data in [&b"x"[..], b"hello", &[7u8; 300], &[0u8; 70000]] {
            let mut buf = Vec::new();
            let start = begin_chunk(&mut buf);
            assert_eq!(start, SIZE_LINE_MAX);
            buf.extend_from_slice(data);
            let from = end_chunk(&mut buf, start);
            let mut expect = Vec::new();
            push_size_line(&mut expect, data.len());
            expect.extend_from_slice(data);
            expect.extend_from_slice(CHUNK_END);
            assert_eq!(&buf[from..], &expect[..]);
        }
    }

    #[test]
    fn encoded_body_decodes_to_what_was_sent() {
        let mut wire = Vec::new();
        for piece in [&b"hello"[..], b" ", b"chunked world"] {
            push_size_line(&mut wire, piece.len());
            wire.extend_from_slice(piece);
            wire.extend_from_slice(CHUNK_END);
        }
        wire.extend_from_slice(LAST_CHUNK);
        assert_eq!(
            wire,
            b"5\r\nhello\r\n1\r\n \r\nd\r\nchunked world\r\n0\r\n\r\n"
        );
        let mut out = Vec::new();
        let (n, done) = ChunkedDecoder::new().feed(&wire, Some(&mut out)).unwrap();
        assert_eq!((n, done), (wire.len(), true));
        assert_eq!(out, b"hello chunked world");
    }
}
