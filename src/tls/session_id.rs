//! `$ssl_session_id`: what OpenSSL's `SSL_SESSION_get_id` gives NGINX.
//! rustls does not expose a session ID, so the server's first flight is
//! watched as it goes out ([`Tee`]) and the ID read from its ServerHello
//! ([`from_server_hello`]): for TLS 1.2 that is the session's ID (new,
//! resumed, or the client's echoed when a ticket resumes it). A TLS 1.3
//! ServerHello only echoes the client's legacy field; OpenSSL then gives
//! each connection's session a fresh random ID, and so does porter
//! ([`random`]).

use std::io::{self, Write};

/// Bytes of the first flight needed to reach the end of a ServerHello's
/// session ID: record header (5), handshake header (4), version (2),
/// random (32), length (1), ID (up to 32).
pub const HELLO_PREFIX: usize = 5 + 4 + 2 + 32 + 1 + 32;

/// A writer that keeps a copy of the first [`HELLO_PREFIX`] bytes that
/// `inner` accepted.
pub struct Tee<'a, W: Write> {
    inner: &'a mut W,
    seen: &'a mut Vec<u8>,
}

impl<'a, W: Write> Tee<'a, W> {
    /// Copies what `inner` takes into `seen`.
    pub fn new(inner: &'a mut W, seen: &'a mut Vec<u8>) -> Tee<'a, W> {
        Tee { inner, seen }
    }
}

impl<W: Write> Write for Tee<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        let room = HELLO_PREFIX.saturating_sub(self.seen.len());
        self.seen.extend_from_slice(&buf[..n.min(room)]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A session ID (at most 32 bytes), kept inline: one lives as long as
/// its connection, and a heap copy of it (or of its hex) cost every TLS
/// connection two allocations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionId {
    len: u8,
    bytes: [u8; 32],
}

impl SessionId {
    /// The ID's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// No ID.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends it in lower-case hex, as NGINX prints it.
    pub fn append_hex(&self, out: &mut String) {
        for b in self.as_bytes() {
            out.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
            out.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
        }
    }

    fn of(id: &[u8]) -> SessionId {
        let mut s = SessionId::default();
        let n = id.len().min(32);
        s.bytes[..n].copy_from_slice(&id[..n]);
        s.len = n as u8;
        s
    }
}

/// The session ID of the ServerHello at the start of `flight` (empty when
/// it carries none or `flight` does not start with one).
pub fn from_server_hello(flight: &[u8]) -> SessionId {
    // Handshake record, ServerHello message.
    if flight.len() < 44 || flight[0] != 0x16 || flight[5] != 0x02 {
        return SessionId::default();
    }
    let len = usize::from(flight[43]);
    flight
        .get(44..44 + len)
        .filter(|_| len <= 32)
        .map_or_else(SessionId::default, SessionId::of)
}

/// A fresh random 32-byte ID (TLS 1.3).
pub fn random() -> SessionId {
    let mut id = [0u8; 32];
    if super::provider().secure_random.fill(&mut id).is_err() {
        return SessionId::default();
    }
    SessionId::of(&id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_is_read_from_a_server_hello() {
        let mut hello = vec![0x16, 3, 3, 0, 80, 0x02, 0, 0, 76, 3, 3];
        hello.extend_from_slice(&[7; 32]);
        hello.push(4);
        hello.extend_from_slice(&[0xab, 0xcd, 0xef, 0x01]);
        let mut hex = String::new();
        from_server_hello(&hello).append_hex(&mut hex);
        assert_eq!(hex, "abcdef01");
        hello[43] = 0;
        assert!(from_server_hello(&hello).is_empty());
        assert!(from_server_hello(&[0x17; 60]).is_empty());
    }

    #[test]
    fn the_tee_keeps_only_the_prefix() {
        let (mut out, mut seen) = (Vec::new(), Vec::new());
        let mut t = Tee::new(&mut out, &mut seen);
        t.write_all(&[1; 200]).unwrap();
        assert_eq!(out.len(), 200);
        assert_eq!(seen.len(), HELLO_PREFIX);
    }
}
