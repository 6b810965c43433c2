//! One HTTP/3 response: the head as a HEADERS frame (the HTTP/2 field
//! list, `http2::send::head`: NGINX's order, lowercase names, no
//! connection-specific fields), then the body as DATA frames, then FIN.
//!
//! **The stream's send window is the backpressure.** Each DATA frame is
//! handed to h3 and awaited until quinn took it, which it does only
//! within the client's stream and connection windows and porter's send
//! window; only then is the next piece read — a file through the disk
//! layer (`OpenFile::read_at`: the fast path inline when the pages are
//! cached, else the thread pool or io_uring; never a blocking read on the
//! loop), a proxied body from its upstream. So a stream holds at most one
//! piece of `http3_stream_buffer_size` (beside what quinn keeps for
//! retransmission), a whole file never, and a stream waiting on the disk
//! or its window is a parked task. Each wait is bounded by `send_timeout`.

use std::io;
use std::time::Duration;

use bytes::{Buf, Bytes};
use h3::server::RequestStream;

use crate::disk::OpenFile;
use crate::http::response::{Body, Response, StreamBody};

/// The sending half of a request stream.
pub type SendHalf = RequestStream<h3_quinn::SendStream<Bytes>, Bytes>;

/// The body side of one stream.
pub struct Out {
    send: SendHalf,
    /// The most one read takes (`http3_stream_buffer_size`).
    piece: usize,
    /// `send_timeout`: the longest wait for the client's window.
    timeout: Duration,
    /// Body bytes sent.
    pub sent: u64,
}

/// An h3 stream error as an I/O error: `ConnectionReset` when the client
/// stopped the stream or the connection went.
pub fn stream_error(e: h3::error::StreamError) -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionReset, e.to_string())
}

impl Out {
    /// The sending half `send`, whose head is still to go.
    pub fn new(send: SendHalf, piece: usize, timeout: Duration) -> Out {
        Out {
            send,
            piece: piece.max(1024),
            timeout,
            sent: 0,
        }
    }

    /// Sends the head (`http2::send::head`'s fields).
    pub async fn head(&mut self, head: http::Response<()>) -> io::Result<()> {
        let send = self.send.send_response(head);
        match tokio::time::timeout(self.timeout, send).await {
            Ok(r) => r.map_err(stream_error),
            Err(_) => Err(io::Error::from_raw_os_error(libc::ETIMEDOUT)),
        }
    }

    /// Sends the body of `resp` and ends the stream.
    pub async fn body(&mut self, resp: &mut Response) -> io::Result<()> {
        match &mut resp.body {
            Body::Empty => {}
            Body::Bytes(b) => self.data(Bytes::from(std::mem::take(b))).await?,
            Body::File {
                file, start, len, ..
            } => self.file(file, *start, *len).await?,
            Body::Spliced {
                lead,
                file,
                start,
                len,
                ..
            } => {
                self.data(Bytes::copy_from_slice(lead)).await?;
                self.file(file, *start, *len).await?
            }
            Body::Multipart { file, parts } => {
                for (hdr, range) in &parts.parts {
                    self.data(Bytes::copy_from_slice(hdr.as_bytes())).await?;
                    self.file(file, range.start, range.end - range.start)
                        .await?;
                }
                self.data(Bytes::copy_from_slice(parts.trailer.as_bytes()))
                    .await?;
            }
            Body::Stream(s) => return self.stream(s).await,
        }
        self.finish().await
    }

    /// One DATA frame, once quinn took it (within `send_timeout`).
    async fn data(&mut self, b: Bytes) -> io::Result<()> {
        if b.is_empty() {
            return Ok(());
        }
        let n = b.len() as u64;
        match tokio::time::timeout(self.timeout, self.send.send_data(b)).await {
            Ok(r) => r.map_err(stream_error)?,
            Err(_) => return Err(io::Error::from_raw_os_error(libc::ETIMEDOUT)),
        }
        self.sent += n;
        Ok(())
    }

    /// FIN: the response is complete.
    async fn finish(&mut self) -> io::Result<()> {
        match tokio::time::timeout(self.timeout, self.send.finish()).await {
            Ok(r) => r.map_err(stream_error),
            Err(_) => Err(io::Error::from_raw_os_error(libc::ETIMEDOUT)),
        }
    }

    /// Sends `len` bytes of `file` from `start`, a piece at a time, each
    /// read through the disk layer after the previous one was taken.
    async fn file(&mut self, file: &OpenFile, start: u64, len: u64) -> io::Result<()> {
        let mut offset = start;
        let stop = start + len;
        while offset < stop {
            let mut want = ((stop - offset) as usize).min(self.piece);
            if let Some(a) = file
                .direct_alignment()
                .filter(|a| !offset.is_multiple_of(*a))
            {
                // `directio`: up to the boundary, then aligned reads
                want = want.min((a - offset % a) as usize);
            }
            let mut buf = vec![0u8; want];
            let got = file.read_at(&mut buf, offset).await?;
            if got == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "file was truncated",
                ));
            }
            buf.truncate(got);
            offset += got as u64;
            self.data(Bytes::from(buf)).await?;
        }
        Ok(())
    }

    /// Sends a body produced while it is sent (a proxied response), then
    /// its trailers if it has any, and ends the stream.
    // One stream sends one response: nothing else borrows the body.
    #[allow(clippy::await_holding_refcell_ref)]
    async fn stream(&mut self, body: &StreamBody) -> io::Result<()> {
        let mut source = body.0.borrow_mut();
        let mut piece = Vec::with_capacity(self.piece.min(64 * 1024));
        loop {
            piece.clear();
            if !source.read_chunk(&mut piece).await? {
                break;
            }
            self.data(Bytes::copy_from_slice(&piece)).await?;
        }
        if let Some(t) = source.trailers() {
            let send = self.send.send_trailers(t);
            return match tokio::time::timeout(self.timeout, send).await {
                Ok(r) => r.map_err(stream_error),
                Err(_) => Err(io::Error::from_raw_os_error(libc::ETIMEDOUT)),
            };
        }
        self.finish().await
    }

    /// Resets the stream (a body that failed half-way: the client must
    /// not take a short body for a whole one; `return 444`).
    pub fn reset(&mut self) {
        self.send.stop_stream(h3::error::Code::H3_REQUEST_CANCELLED);
    }
}

/// The receiving half of a request stream, as the request body reads it
/// (`ClientBody::h3`).
pub struct RecvBody {
    recv: RequestStream<super::guard::GuardedRecv, Bytes>,
    /// The stream ended with its HEADERS (no body).
    ended: bool,
    /// A piece read while looking for that end.
    first: Option<Bytes>,
}

impl RecvBody {
    /// The body of a stream whose head was read: looks once, without
    /// waiting, whether the client already ended the stream (a GET sends
    /// HEADERS and FIN together), so a request without a body is not
    /// taken for one of unknown length.
    pub async fn start(mut recv: RequestStream<super::guard::GuardedRecv, Bytes>) -> RecvBody {
        let peek = std::future::poll_fn(|cx| std::task::Poll::Ready(recv.poll_recv_data(cx)));
        let (ended, first) = match peek.await {
            std::task::Poll::Ready(Ok(None)) => (true, None),
            std::task::Poll::Ready(Ok(Some(mut b))) => {
                (false, Some(b.copy_to_bytes(b.remaining())))
            }
            // An error shows at the first read; nothing yet: a body may come.
            _ => (false, None),
        };
        RecvBody { recv, ended, first }
    }

    /// Whether the request has no body.
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// The next piece of the body; `None` at its end.
    pub async fn data(&mut self) -> io::Result<Option<Bytes>> {
        if let Some(b) = self.first.take() {
            return Ok(Some(b));
        }
        if self.ended {
            return Ok(None);
        }
        match self.recv.recv_data().await {
            Ok(Some(mut b)) => Ok(Some(b.copy_to_bytes(b.remaining()))),
            Ok(None) => {
                self.ended = true;
                Ok(None)
            }
            Err(e) => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("HTTP/3 body: {e}"),
            )),
        }
    }
}
