//! Record I/O on the worker's non-blocking socket for `conn.rs`: the
//! socket as rustls's `Read`/`Write`, the whole-record reader a handshake
//! that may move to kTLS uses, and the moves of plaintext and early data
//! out of rustls without zero-filling buffers.

use std::cell::Cell;
use std::io::{self, BufRead, IoSlice, Read, Write};

use rustls::Connection;
use tokio::io::Interest;
use tokio::net::TcpStream;

/// The socket as rustls's `Read`/`Write` (non-blocking: `WouldBlock`
/// when empty or full). Writes never raise `SIGPIPE`.
pub(super) struct Sock<'a>(pub(super) &'a TcpStream);

impl Read for Sock<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(rustix::io::read(self.0, buf)?)
    }
}

impl Write for Sock<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(rustix::net::send(
            self.0,
            buf,
            rustix::net::SendFlags::NOSIGNAL,
        )?)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let mut control = rustix::net::SendAncillaryBuffer::default();
        Ok(rustix::net::sendmsg(
            self.0,
            bufs,
            &mut control,
            rustix::net::SendFlags::NOSIGNAL,
        )?)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The socket read one TLS record at a time: `left` is what remains of
/// the record being read (0: at a record's start, whose header is peeked
/// first). rustls is never given a byte past the record it asked for.
pub(super) struct Whole<'a> {
    pub(super) tcp: &'a TcpStream,
    pub(super) left: &'a Cell<usize>,
}

impl Read for Whole<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut left = self.left.get();
        if left == 0 {
            let mut h = [0u8; 5];
            let n = rustix::net::recv(self.tcp, &mut h, rustix::net::RecvFlags::PEEK)?.0;
            if n == 0 {
                return Ok(0);
            }
            if n < h.len() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            left = h.len() + usize::from(u16::from_be_bytes([h[3], h[4]]));
        }
        let want = left.min(buf.len());
        let n = rustix::io::read(self.tcp, &mut buf[..want])?;
        if n > 0 {
            self.left.set(left - n);
        }
        Ok(n)
    }
}

/// Reads records from `tcp` into `read`'s rustls side: whole records
/// only when `whole` is given (kTLS may follow), else what is there.
pub(super) fn read_handshake(
    tcp: &TcpStream,
    whole: Option<&Cell<usize>>,
    read: &mut dyn FnMut(&mut dyn Read) -> io::Result<usize>,
) -> io::Result<usize> {
    match whole {
        Some(left) => tcp.try_io(Interest::READABLE, || read(&mut Whole { tcp, left })),
        None => tcp.try_io(Interest::READABLE, || read(&mut Sock(tcp))),
    }
}

/// Reads what the socket has into `read`'s rustls side; `Ok(0)` at EOF.
pub(super) fn read_records(
    tcp: &TcpStream,
    read: &mut dyn FnMut(&mut Sock<'_>) -> io::Result<usize>,
) -> io::Result<usize> {
    tcp.try_io(Interest::READABLE, || read(&mut Sock(tcp)))
}

/// Appends up to `space` decrypted bytes to `buf`, as `Reader::read`
/// would (`WouldBlock` when none is at hand, `Ok(0)` after the peer's
/// `close_notify`, `UnexpectedEof` after a bare TCP close), but straight
/// from rustls's buffers: no zero-filling of `buf`'s spare room first
/// (which cost a memset of the whole buffer per read).
pub(super) fn take_plaintext(
    c: &mut Connection,
    buf: &mut Vec<u8>,
    space: usize,
) -> io::Result<usize> {
    let mut reader = c.reader();
    let mut n = 0;
    while n < space {
        let chunk = match reader.fill_buf() {
            Ok(chunk) => chunk,
            Err(_) if n > 0 => break,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            break;
        }
        let k = chunk.len().min(space - n);
        buf.extend_from_slice(&chunk[..k]);
        reader.consume(k);
        n += k;
    }
    Ok(n)
}

/// Appends the early data rustls holds (a server's, once accepted) to
/// `into`.
pub(super) fn collect_early(c: &mut Connection, into: &mut Vec<u8>) {
    let Connection::Server(s) = c else { return };
    let Some(mut data) = s.early_data() else {
        return;
    };
    let mut chunk = [0u8; 4096];
    while let Ok(n) = data.read(&mut chunk) {
        if n == 0 {
            break;
        }
        into.extend_from_slice(&chunk[..n]);
    }
}

/// Sends queued records as far as the socket takes them without waiting.
pub(super) fn flush_now(c: &mut Connection, tcp: &TcpStream) -> io::Result<()> {
    while c.wants_write() {
        tcp.try_io(Interest::WRITABLE, || c.write_tls(&mut Sock(tcp)))?;
    }
    Ok(())
}
