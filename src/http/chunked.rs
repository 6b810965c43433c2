//! A streaming decoder for `Transfer-Encoding: chunked` request bodies
//! (RFC 9112 §7.1): chunk sizes in hex with optional extensions, CRLF after
//! each chunk, a final zero chunk and optional trailers. It works on any
//! split of the input, byte by byte included.

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
                State::SizeLf => {
                    if c != b'\n' {
                        return Err(ChunkError("expected LF after chunk size"));
                    }
                    self.chunk_start();
                }
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
                State::DataCr => match c {
                    b'\r' => self.state = State::DataLf,
                    b'\n' => self.state = State::Size,
                    _ => return Err(ChunkError("expected CRLF after chunk data")),
                },
                State::DataLf => {
                    if c != b'\n' {
                        return Err(ChunkError("expected LF after chunk data"));
                    }
                    self.state = State::Size;
                }
                State::TrailerStart => match c {
                    b'\r' => self.state = State::EndLf,
                    b'\n' => {
                        self.state = State::Done;
                        return Ok((i + 1, true));
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
                State::EndLf => {
                    if c != b'\n' {
                        return Err(ChunkError("expected LF at end of body"));
                    }
                    self.state = State::Done;
                    return Ok((i + 1, true));
                }
            }
            i += 1;
        }
        Ok((i, self.state == State::Done))
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
}
