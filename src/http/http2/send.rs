//! Writing one response on an HTTP/2 stream: the head as a HEADERS frame
//! (NGINX's field order, lowercase names, without the connection-specific
//! fields HTTP/2 forbids), then the body as DATA frames of at most
//! `http2_chunk_size`.
//!
//! **Flow control is the backpressure.** Before each frame the stream
//! asks `h2` for capacity (`reserve_capacity`/`poll_capacity`): the
//! client's stream and connection windows and the stream's send buffer
//! (`max_send_buffer_size`) all bound it. Only once capacity is granted is
//! the next piece read — through the disk layer for a file
//! (`OpenFile::read_at`: the fast path inline when the pages are cached,
//! else the thread pool or io_uring; never a blocking read on the loop) or
//! from the proxied body — so a stream whose client does not read holds
//! at most one chunk, a whole file is never in memory, and a stream
//! waiting on the disk or on its window holds no loop time. Each wait for
//! capacity is bounded by `send_timeout`, and ends early when the client
//! resets the stream.

use std::future::poll_fn;
use std::io;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use h2::SendStream;
use http::header::{HeaderName, HeaderValue};

use crate::disk::OpenFile;
use crate::http::response::{Body, Response, StreamBody};

/// The most a file body reads at once (then sent as `http2_chunk_size`
/// frames); the stream's send buffer holds two such pieces.
pub const READ_PIECE: usize = 32 * 1024;

/// Response fields HTTP/2 forbids (RFC 9113 8.2.2): a proxied response's
/// are dropped, as NGINX drops them.
const CONNECTION_SPECIFIC: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// The head of `r` as HTTP/2 sends it, in NGINX's order (`server`,
/// `date`, `content-type`, `content-length`, `last-modified`, `location`,
/// `etag`, the other fields, `accept-ranges`); the bytes it adds to
/// `$bytes_sent` (names, values, four bytes each as HPACK's estimate).
/// The fields porter writes itself go in by their known names, `server`
/// and `date` as shared values (the date made once a second), so that a
/// small response's head costs few allocations.
pub fn head(r: &Response, server_tokens: bool) -> (http::Response<()>, u64) {
    use http::header;
    let mut out = http::Response::new(());
    *out.status_mut() = http::StatusCode::from_u16(r.status).unwrap_or(http::StatusCode::OK);
    let mut size = 9u64;
    let h = out.headers_mut();
    // Room for every field at once: a map grown field by field allocates
    // its tables again as it passes 6, 12... fields (8 known ones at most).
    h.reserve(8 + r.headers.len());
    let mut known = |name: HeaderName, value: Option<HeaderValue>| {
        if let Some(v) = value {
            size += (name.as_str().len() + v.len() + 4) as u64;
            h.append(name, v);
        }
    };
    if r.own_server {
        let server = if server_tokens {
            concat!("porter/", env!("CARGO_PKG_VERSION"))
        } else {
            "porter"
        };
        known(header::SERVER, Some(HeaderValue::from_static(server)));
    }
    if r.own_date {
        known(header::DATE, date_value());
    }
    let text = |v: &str| HeaderValue::from_str(v).ok();
    known(
        header::CONTENT_TYPE,
        r.content_type.as_deref().and_then(text),
    );
    known(
        header::CONTENT_LENGTH,
        r.content_length.and_then(length_value),
    );
    if let (Some(lm), false) = (r.last_modified, r.last_modified_inline) {
        known(
            header::LAST_MODIFIED,
            text(&crate::util::time::http_date(lm)),
        );
    }
    known(header::LOCATION, r.location.as_deref().and_then(text));
    known(header::ETAG, r.etag.as_deref().and_then(text));
    for (n, v) in &r.headers {
        // `HeaderName` lowercases (and knows the standard names without
        // allocating).
        let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(n.as_bytes()),
            HeaderValue::from_bytes(v.as_bytes()),
        ) else {
            continue;
        };
        if !CONNECTION_SPECIFIC.contains(&n.as_str()) {
            known(n, Some(v));
        }
    }
    if r.accept_ranges {
        known(
            header::ACCEPT_RANGES,
            Some(HeaderValue::from_static("bytes")),
        );
    }
    (out, size)
}

/// A `content-length` value in one allocation (`HeaderValue::from(u64)`
/// takes two: a growing buffer, then its freezing).
fn length_value(n: u64) -> Option<HeaderValue> {
    use std::io::Write as _;
    let mut buf = [0u8; 20];
    let mut w = &mut buf[..];
    write!(w, "{n}").ok()?;
    let len = 20 - w.len();
    HeaderValue::from_bytes(&buf[..len]).ok()
}

thread_local! {
    /// The `date` value of the current second.
    static DATE: std::cell::RefCell<(i64, Option<HeaderValue>)> =
        const { std::cell::RefCell::new((i64::MIN, None)) };
}

/// The `date` field's value now, made once a second per worker.
fn date_value() -> Option<HeaderValue> {
    let secs = crate::util::time::now().0;
    DATE.with(|d| {
        let mut d = d.borrow_mut();
        if d.0 != secs {
            let now = crate::util::time::http_date_string();
            *d = (secs, HeaderValue::from_str(&now).ok());
        }
        d.1.clone()
    })
}

/// The body side of one stream.
pub struct Out {
    send: SendStream<Bytes>,
    /// `http2_chunk_size`: the largest DATA frame.
    chunk: usize,
    /// `send_timeout`: the longest wait for capacity.
    timeout: Duration,
    /// Body bytes sent.
    pub sent: u64,
}

/// Why a body stopped: the client reset the stream (or the connection
/// went), as opposed to a failure of the source.
pub fn is_reset(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::ConnectionReset
}

fn reset_error(e: h2::Error) -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionReset, e)
}

impl Out {
    /// The body of a stream whose head went out on `send`.
    pub fn new(send: SendStream<Bytes>, chunk: usize, timeout: Duration) -> Out {
        Out {
            send,
            chunk: chunk.max(1),
            timeout,
            sent: 0,
        }
    }

    /// Sends the body of `resp`, ending the stream (a body in memory is
    /// taken out of `resp` and sent as slices of itself, not copied).
    pub async fn body(&mut self, resp: &mut Response) -> io::Result<()> {
        match &mut resp.body {
            Body::Empty => self.data(Bytes::new(), true),
            Body::Bytes(b) => self.owned(Bytes::from(std::mem::take(b)), true).await,
            Body::File {
                file, start, len, ..
            } => self.file(file, *start, *len, true).await,
            Body::Spliced {
                lead,
                file,
                start,
                len,
                ..
            } => {
                self.bytes(lead, false).await?;
                self.file(file, *start, *len, true).await
            }
            Body::Multipart { file, parts } => {
                for (hdr, range) in &parts.parts {
                    self.bytes(hdr.as_bytes(), false).await?;
                    self.file(file, range.start, range.end - range.start, false)
                        .await?;
                }
                self.bytes(parts.trailer.as_bytes(), true).await
            }
            Body::Stream(s) => self.stream(s).await,
        }
    }

    /// Waits until the stream may send up to `want` bytes: how many (at
    /// least one). The wait ends with `ConnectionReset` when the client
    /// resets the stream, `ETIMEDOUT` after `send_timeout`.
    async fn capacity(&mut self, want: usize) -> io::Result<usize> {
        self.send.reserve_capacity(want);
        let send = &mut self.send;
        let wait = poll_fn(|cx| {
            if let Poll::Ready(r) = send.poll_reset(cx) {
                let e = match r {
                    Ok(reason) => reset_error(h2::Error::from(reason)),
                    Err(e) => reset_error(e),
                };
                return Poll::Ready(Err(e));
            }
            let have = send.capacity();
            if have > 0 {
                return Poll::Ready(Ok(have));
            }
            match send.poll_capacity(cx) {
                Poll::Ready(Some(Ok(_))) => {
                    let have = send.capacity();
                    if have > 0 {
                        Poll::Ready(Ok(have))
                    } else {
                        cx.waker().wake_by_ref();
                        Poll::Pending
                    }
                }
                Poll::Ready(Some(Err(e))) => Poll::Ready(Err(reset_error(e))),
                Poll::Ready(None) => Poll::Ready(Err(io::ErrorKind::ConnectionReset.into())),
                Poll::Pending => Poll::Pending,
            }
        });
        match tokio::time::timeout(self.timeout, wait).await {
            Ok(r) => r.map(|n| n.min(want)),
            Err(_) => Err(io::Error::from_raw_os_error(libc::ETIMEDOUT)),
        }
    }

    fn data(&mut self, b: Bytes, end: bool) -> io::Result<()> {
        self.sent += b.len() as u64;
        self.send.send_data(b, end).map_err(reset_error)
    }

    /// Sends `b` in frames of at most `chunk`; `end` ends the stream.
    async fn bytes(&mut self, mut b: &[u8], end: bool) -> io::Result<()> {
        if b.is_empty() {
            return if end {
                self.data(Bytes::new(), true)
            } else {
                Ok(())
            };
        }
        while !b.is_empty() {
            let n = self.capacity(b.len().min(self.chunk)).await?;
            let last = n == b.len();
            self.data(Bytes::copy_from_slice(&b[..n]), end && last)?;
            b = &b[n..];
        }
        Ok(())
    }

    /// Sends `b` in frames of at most `chunk`, slices of itself, each
    /// once the peer's windows have room; `end` ends the stream.
    pub async fn owned(&mut self, mut b: Bytes, end: bool) -> io::Result<()> {
        if b.is_empty() {
            return if end { self.data(b, true) } else { Ok(()) };
        }
        while !b.is_empty() {
            let n = self.capacity(b.len().min(self.chunk)).await?;
            let last = n == b.len();
            self.data(b.split_to(n), end && last)?;
        }
        Ok(())
    }

    /// Sends `len` bytes of `file` from `start`, each piece read through
    /// the disk layer once the stream has capacity for it: one read of up
    /// to [`READ_PIECE`] bytes, sent as frames of at most `chunk` (slices
    /// of the one buffer).
    async fn file(&mut self, file: &OpenFile, start: u64, len: u64, end: bool) -> io::Result<()> {
        if len == 0 {
            return if end {
                self.data(Bytes::new(), true)
            } else {
                Ok(())
            };
        }
        let piece = (READ_PIECE / self.chunk).max(1) * self.chunk;
        let mut offset = start;
        let stop = start + len;
        while offset < stop {
            let mut want = ((stop - offset) as usize).min(piece);
            if let Some(a) = file
                .direct_alignment()
                .filter(|a| !offset.is_multiple_of(*a))
            {
                // `directio`: up to the boundary, then aligned reads
                want = want.min((a - offset % a) as usize);
            }
            let n = self.capacity(want).await?;
            let mut buf = vec![0u8; n];
            let got = file.read_at(&mut buf, offset).await?;
            if got == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "file was truncated",
                ));
            }
            buf.truncate(got);
            offset += got as u64;
            let buf = Bytes::from(buf);
            let mut at = 0;
            while at < got {
                let to = (at + self.chunk).min(got);
                self.data(buf.slice(at..to), end && offset == stop && to == got)?;
                at = to;
            }
        }
        Ok(())
    }

    /// Sends a body produced while it is sent (a proxied response): each
    /// piece is asked for only once the previous one was handed to `h2`.
    // One stream sends one response: nothing else borrows the body.
    #[allow(clippy::await_holding_refcell_ref)]
    async fn stream(&mut self, body: &StreamBody) -> io::Result<()> {
        let mut source = body.0.borrow_mut();
        let mut piece = Vec::with_capacity(self.chunk.max(16 * 1024));
        loop {
            piece.clear();
            if !source.read_chunk(&mut piece).await? {
                return match source.trailers() {
                    Some(t) => self.send.send_trailers(t).map_err(reset_error),
                    None => self.data(Bytes::new(), true),
                };
            }
            self.bytes(&piece, false).await?;
        }
    }

    /// Resets the stream (a body that failed half-way: the client must
    /// not take a short body for a whole one).
    pub fn reset(&mut self) {
        self.reset_with(h2::Reason::INTERNAL_ERROR);
    }

    /// Resets the stream with `reason`.
    pub fn reset_with(&mut self, reason: h2::Reason) {
        self.send.send_reset(reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_length_value_reads_as_the_number() {
        for n in [0, 7, 1024, u64::MAX] {
            assert_eq!(length_value(n), Some(HeaderValue::from(n)));
        }
    }
}
