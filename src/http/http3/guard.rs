//! What h3 may buffer from a client: h3 0.0.8 holds a frame other than
//! DATA in memory until its last byte has come (a HEADERS frame, a
//! SETTINGS frame, a reserved type it then skips), and reading it frees
//! QUIC flow control, so a frame that announces a gigabyte is a gigabyte
//! of porter's memory, sent at wire speed. h3 has no limit to set, so
//! porter's connection type ([`Guarded`], between quinn and h3) reads the
//! frame headers going past ([`FrameScan`]: type and length, the payload
//! skipped, never copied) and stops a frame that is too long when its
//! header arrives: on a request stream any frame but DATA longer than the
//! field-section limit (`large_client_header_buffers`) plus room for
//! QPACK's encoding, and the stream is reset with H3_EXCESSIVE_LOAD, as
//! NGINX resets a stream whose field is too large; on the client's control
//! stream any frame over [`CONTROL_FRAME_MAX`], and the connection is
//! closed with H3_EXCESSIVE_LOAD. QPACK's encoder and decoder streams are
//! never read by h3 (porter allows no dynamic table), so they hold at most
//! their flow-control window and are passed through unscanned.

use std::task::{Context, Poll};

use bytes::Bytes;
use h3::quic::{self, ConnectionErrorIncoming, StreamErrorIncoming, StreamId, WriteBuf};

/// H3_EXCESSIVE_LOAD (RFC 9114 §8.1).
pub const EXCESSIVE_LOAD: u64 = 0x107;
/// The longest frame on the control stream (SETTINGS, GOAWAY, reserved).
pub const CONTROL_FRAME_MAX: u64 = 16 * 1024;
/// QPACK's overhead over the decoded field section it is held to: the
/// section prefix, and a Huffman code may be up to 30/8 of its text for
/// the rarest bytes, so a section within the limit may encode longer.
const QPACK_ROOM: u64 = 4;

/// The longest non-DATA frame on a request stream for a decoded field
/// section limit of `max_head` bytes.
pub fn request_frame_max(max_head: usize) -> u64 {
    (max_head as u64).saturating_mul(QPACK_ROOM) + 64
}

/// HTTP/3 frame type DATA, whose payload h3 streams and never holds whole.
const DATA: u64 = 0x0;
/// The unidirectional stream type of the control stream.
const CONTROL: u64 = 0x0;

/// A QUIC variable-length integer arriving byte by byte.
#[derive(Clone, Copy, Debug, Default)]
struct Varint {
    value: u64,
    have: u8,
    need: u8,
}

impl Varint {
    /// Takes one byte; the value once it is whole.
    fn push(&mut self, b: u8) -> Option<u64> {
        if self.have == 0 {
            self.need = 1 << (b >> 6);
            self.value = u64::from(b & 0x3f);
        } else {
            self.value = self.value << 8 | u64::from(b);
        }
        self.have += 1;
        (self.have == self.need).then_some(self.value)
    }
}

#[derive(Clone, Copy, Debug)]
enum State {
    /// A unidirectional stream's type.
    StreamType(Varint),
    /// A frame's type.
    Type(Varint),
    /// A frame's length.
    Len(u64, Varint),
    /// Payload bytes still to go by.
    Payload(u64),
    /// Not frames (QPACK instructions, unknown streams): not looked at.
    Opaque,
}

/// A frame too long for its stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooLong {
    /// Its type.
    pub ty: u64,
    /// The length it announced.
    pub len: u64,
}

/// Follows the frame headers of one stream's bytes (RFC 9114 §7.1).
#[derive(Clone, Debug)]
pub struct FrameScan {
    state: State,
    max: u64,
}

impl FrameScan {
    /// A request stream's frames, none but DATA longer than `max`.
    pub fn request(max: u64) -> FrameScan {
        FrameScan {
            state: State::Type(Varint::default()),
            max,
        }
    }

    /// A unidirectional stream: its type first; if it is the control
    /// stream, its frames, none longer than `max`.
    pub fn unidirectional(max: u64) -> FrameScan {
        FrameScan {
            state: State::StreamType(Varint::default()),
            max,
        }
    }

    /// Follows `bytes`, the next of the stream; an error at the header
    /// of a frame longer than allowed (the scan stays stopped there).
    pub fn feed(&mut self, mut bytes: &[u8]) -> Result<(), TooLong> {
        while let Some((&b, rest)) = bytes.split_first() {
            match &mut self.state {
                State::Opaque => return Ok(()),
                State::Payload(left) => {
                    let n = (*left).min(bytes.len() as u64);
                    *left -= n;
                    bytes = &bytes[n as usize..];
                    if *left == 0 {
                        self.state = State::Type(Varint::default());
                    }
                    continue;
                }
                State::StreamType(v) => {
                    if let Some(ty) = v.push(b) {
                        self.state = match ty {
                            CONTROL => State::Type(Varint::default()),
                            _ => State::Opaque,
                        };
                    }
                }
                State::Type(v) => {
                    if let Some(ty) = v.push(b) {
                        self.state = State::Len(ty, Varint::default());
                    }
                }
                State::Len(ty, v) => {
                    let ty = *ty;
                    if let Some(len) = v.push(b) {
                        if ty != DATA && len > self.max {
                            return Err(TooLong { ty, len });
                        }
                        self.state = match len {
                            0 => State::Type(Varint::default()),
                            n => State::Payload(n),
                        };
                    }
                }
            }
            bytes = rest;
        }
        Ok(())
    }
}

/// The error h3 sees for a frame too long: the stream ended by porter.
fn stopped() -> StreamErrorIncoming {
    StreamErrorIncoming::StreamTerminated {
        error_code: EXCESSIVE_LOAD,
    }
}

/// A QUIC connection as h3 sees it, its incoming streams scanned.
pub struct Guarded {
    inner: h3_quinn::Connection,
    quic: quinn::Connection,
    request_max: u64,
}

impl Guarded {
    /// `quic`, non-DATA frames of its request streams at most
    /// `request_max` bytes long.
    pub fn new(quic: quinn::Connection, request_max: u64) -> Guarded {
        Guarded {
            inner: h3_quinn::Connection::new(quic.clone()),
            quic,
            request_max,
        }
    }
}

impl quic::Connection<Bytes> for Guarded {
    type RecvStream = GuardedRecv;
    type OpenStreams = GuardedOpen;

    fn poll_accept_recv(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<GuardedRecv, ConnectionErrorIncoming>> {
        let quic = self.quic.clone();
        quic::Connection::<Bytes>::poll_accept_recv(&mut self.inner, cx).map_ok(|inner| {
            GuardedRecv {
                inner,
                scan: FrameScan::unidirectional(CONTROL_FRAME_MAX),
                close: Some(quic),
            }
        })
    }

    fn poll_accept_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<GuardedBidi, ConnectionErrorIncoming>> {
        let max = self.request_max;
        quic::Connection::<Bytes>::poll_accept_bidi(&mut self.inner, cx).map_ok(|inner| {
            GuardedBidi {
                inner,
                scan: FrameScan::request(max),
            }
        })
    }

    fn opener(&self) -> GuardedOpen {
        GuardedOpen {
            inner: quic::Connection::<Bytes>::opener(&self.inner),
            request_max: self.request_max,
        }
    }
}

/// The streams porter opens (h3's control and QPACK streams); a request
/// stream, were one opened, scanned as those the client opens.
pub struct GuardedOpen {
    inner: h3_quinn::OpenStreams,
    request_max: u64,
}

/// `Guarded` and `GuardedOpen` open streams the same way.
macro_rules! open_streams {
    ($ty:ty) => {
        impl quic::OpenStreams<Bytes> for $ty {
            type BidiStream = GuardedBidi;
            type SendStream = h3_quinn::SendStream<Bytes>;

            fn poll_open_bidi(
                &mut self,
                cx: &mut Context<'_>,
            ) -> Poll<Result<GuardedBidi, StreamErrorIncoming>> {
                let max = self.request_max;
                quic::OpenStreams::<Bytes>::poll_open_bidi(&mut self.inner, cx).map_ok(|inner| {
                    GuardedBidi {
                        inner,
                        scan: FrameScan::request(max),
                    }
                })
            }

            fn poll_open_send(
                &mut self,
                cx: &mut Context<'_>,
            ) -> Poll<Result<Self::SendStream, StreamErrorIncoming>> {
                quic::OpenStreams::<Bytes>::poll_open_send(&mut self.inner, cx)
            }

            fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
                quic::OpenStreams::<Bytes>::close(&mut self.inner, code, reason)
            }
        }
    };
}

open_streams!(Guarded);
open_streams!(GuardedOpen);

/// A receiving stream whose frame headers are scanned.
pub struct GuardedRecv {
    inner: h3_quinn::RecvStream,
    scan: FrameScan,
    /// A unidirectional stream's connection, closed on a frame too long
    /// (the control stream is critical); `None` on a request stream.
    close: Option<quinn::Connection>,
}

impl quic::RecvStream for GuardedRecv {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        let r = self.inner.poll_data(cx);
        if let Poll::Ready(Ok(Some(b))) = &r {
            if self.scan.feed(b).is_err() {
                self.inner.stop_sending(EXCESSIVE_LOAD);
                if let Some(quic) = &self.close {
                    let code = quinn::VarInt::from_u64(EXCESSIVE_LOAD).expect("small");
                    quic.close(code, b"frame too long");
                }
                return Poll::Ready(Err(stopped()));
            }
        }
        r
    }

    fn stop_sending(&mut self, error_code: u64) {
        self.inner.stop_sending(error_code)
    }

    fn recv_id(&self) -> StreamId {
        self.inner.recv_id()
    }
}

/// A request stream whose incoming frame headers are scanned.
pub struct GuardedBidi {
    inner: h3_quinn::BidiStream<Bytes>,
    scan: FrameScan,
}

impl quic::RecvStream for GuardedBidi {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        let r = self.inner.poll_data(cx);
        if let Poll::Ready(Ok(Some(b))) = &r {
            if self.scan.feed(b).is_err() {
                // Both ways: nothing more is read, and no answer comes.
                self.inner.stop_sending(EXCESSIVE_LOAD);
                quic::SendStream::<Bytes>::reset(&mut self.inner, EXCESSIVE_LOAD);
                return Poll::Ready(Err(stopped()));
            }
        }
        r
    }

    fn stop_sending(&mut self, error_code: u64) {
        self.inner.stop_sending(error_code)
    }

    fn recv_id(&self) -> StreamId {
        self.inner.recv_id()
    }
}

impl quic::SendStream<Bytes> for GuardedBidi {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.inner.poll_ready(cx)
    }

    fn send_data<T: Into<WriteBuf<Bytes>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        self.inner.send_data(data)
    }

    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.inner.poll_finish(cx)
    }

    fn reset(&mut self, reset_code: u64) {
        self.inner.reset(reset_code)
    }

    fn send_id(&self) -> StreamId {
        self.inner.send_id()
    }
}

impl quic::BidiStream<Bytes> for GuardedBidi {
    type SendStream = h3_quinn::SendStream<Bytes>;
    type RecvStream = GuardedRecv;

    fn split(self) -> (Self::SendStream, GuardedRecv) {
        let (send, recv) = self.inner.split();
        let recv = GuardedRecv {
            inner: recv,
            scan: self.scan,
            close: None,
        };
        (send, recv)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(ty: u8, len: u16) -> Vec<u8> {
        let mut out = vec![ty];
        out.extend_from_slice(&(len | 0x4000).to_be_bytes());
        out
    }

    #[test]
    fn frames_within_the_limit_pass_byte_by_byte_and_at_once() {
        let mut bytes = frame(0x1, 100);
        bytes.extend(vec![7; 100]);
        bytes.extend(frame(0x0, 5000));
        bytes.extend(vec![0; 5000]);
        bytes.extend(frame(0x21, 0));
        let mut whole = FrameScan::request(100);
        assert_eq!(whole.feed(&bytes), Ok(()));
        let mut one = FrameScan::request(100);
        for b in &bytes {
            assert_eq!(one.feed(&[*b]), Ok(()));
        }
    }

    #[test]
    fn a_long_frame_other_than_data_is_refused_at_its_header() {
        let mut s = FrameScan::request(100);
        let mut bytes = frame(0x0, 3000);
        bytes.extend(vec![1; 3000]);
        assert_eq!(s.feed(&bytes), Ok(()));
        assert_eq!(s.feed(&frame(0x1, 101)), Err(TooLong { ty: 1, len: 101 }));
        // Eight-byte lengths: a gigabyte announced.
        let mut s = FrameScan::request(100);
        let mut big = vec![0x21];
        big.extend_from_slice(&((1u64 << 30) | 0xc000_0000_0000_0000).to_be_bytes());
        assert_eq!(
            s.feed(&big),
            Err(TooLong {
                ty: 0x21,
                len: 1 << 30
            })
        );
    }

    #[test]
    fn only_the_control_stream_of_the_unidirectional_ones_is_scanned() {
        let mut control = FrameScan::unidirectional(10);
        let mut bytes = vec![0x00];
        bytes.extend(frame(0x4, 11));
        assert!(control.feed(&bytes).is_err());
        // The QPACK encoder stream: instructions, not frames.
        let mut encoder = FrameScan::unidirectional(10);
        let mut bytes = vec![0x02];
        bytes.extend(frame(0x4, 11));
        assert_eq!(encoder.feed(&bytes), Ok(()));
    }
}
