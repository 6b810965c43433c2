//! Flood detection: frames that make the server work without asking for
//! anything. The `h2` crate answers every PING and SETTINGS frame, and
//! accepts empty DATA frames, PRIORITY and WINDOW_UPDATE frames without
//! end; a client sending nothing else can keep a worker busy at the price
//! of its own bandwidth. NGINX counts such frames and closes the
//! connection past a limit ("http2 flood detected"); porter does the same
//! here, reading the 9-byte frame headers as the bytes go by (before
//! `h2` parses them), so it needs no hook in the crate.
//!
//! The score: each idle frame adds one; each HEADERS frame (a request)
//! takes off [`HEADERS_CREDIT`] and each [`WRITE_CREDIT_BYTES`] written
//! take off one (a client downloading a large file sends WINDOW_UPDATEs
//! in proportion to what it receives). Past [`FLOOD_LIMIT`] the
//! connection is told to calm down (GOAWAY ENHANCE_YOUR_CALM).

use std::cell::Cell;

use tokio::sync::Notify;

/// The score beyond which a connection is a flood.
pub const FLOOD_LIMIT: u32 = 10_000;
/// What one request (HEADERS frame) takes off the score.
const HEADERS_CREDIT: u32 = 100;
/// Bytes written per point taken off the score.
const WRITE_CREDIT_BYTES: usize = 4096;

/// The client connection preface (RFC 9113 3.4), before any frame.
const PREFACE_LEN: u32 = 24;

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const END_STREAM: u8 = 1;

/// Reads frame headers from the bytes a connection receives.
pub struct FrameMeter {
    /// Preface bytes still to skip.
    preface_left: Cell<u32>,
    /// Payload bytes of the current frame still to skip.
    payload_left: Cell<u32>,
    /// The header being read (bytes so far, count).
    header: Cell<([u8; 9], usize)>,
    score: Cell<u32>,
    written: Cell<usize>,
    /// Set once, when the score passes the limit.
    flooded: Cell<bool>,
    /// Wakes the connection task when `flooded` is set.
    pub alarm: Notify,
}

impl FrameMeter {
    /// A meter at the start of a connection (the preface comes first).
    pub fn new() -> FrameMeter {
        FrameMeter {
            preface_left: Cell::new(PREFACE_LEN),
            payload_left: Cell::new(0),
            header: Cell::new(([0; 9], 0)),
            score: Cell::new(0),
            written: Cell::new(0),
            flooded: Cell::new(false),
            alarm: Notify::new(),
        }
    }

    /// Whether the connection flooded.
    pub fn flooded(&self) -> bool {
        self.flooded.get()
    }

    /// Counts the frames in `bytes`, the next bytes received.
    pub fn saw(&self, mut bytes: &[u8]) {
        let skip = (self.preface_left.get() as usize).min(bytes.len());
        self.preface_left.set(self.preface_left.get() - skip as u32);
        bytes = &bytes[skip..];
        while !bytes.is_empty() {
            let left = self.payload_left.get() as usize;
            if left > 0 {
                let n = left.min(bytes.len());
                self.payload_left.set((left - n) as u32);
                bytes = &bytes[n..];
                continue;
            }
            let (mut h, mut got) = self.header.get();
            let n = (9 - got).min(bytes.len());
            h[got..got + n].copy_from_slice(&bytes[..n]);
            got += n;
            bytes = &bytes[n..];
            if got < 9 {
                self.header.set((h, got));
                return;
            }
            self.header.set(([0; 9], 0));
            let len = u32::from_be_bytes([0, h[0], h[1], h[2]]);
            self.payload_left.set(len);
            self.frame(h[3], h[4], len);
        }
    }

    /// One frame header: type, flags, payload length.
    fn frame(&self, kind: u8, flags: u8, len: u32) {
        let score = self.score.get();
        let score = match kind {
            HEADERS if len > 0 => score.saturating_sub(HEADERS_CREDIT),
            DATA if len > 0 || flags & END_STREAM != 0 => score,
            // SETTINGS, PING, PRIORITY, RST_STREAM, WINDOW_UPDATE,
            // CONTINUATION, empty DATA or HEADERS, unknown types.
            _ => score + 1,
        };
        self.score.set(score);
        if score > FLOOD_LIMIT && !self.flooded.get() {
            self.flooded.set(true);
            self.alarm.notify_one();
        }
    }

    /// Counts `n` bytes written to the client.
    pub fn wrote(&self, n: usize) {
        let w = self.written.get() + n;
        let credit = (w / WRITE_CREDIT_BYTES) as u32;
        self.written.set(w % WRITE_CREDIT_BYTES);
        if credit > 0 {
            self.score.set(self.score.get().saturating_sub(credit));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
        let len = payload.len() as u32;
        let mut f = len.to_be_bytes()[1..].to_vec();
        f.extend_from_slice(&[kind, flags, 0, 0, 0, 1]);
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn pings_past_the_limit_flood_even_split_across_reads() {
        let m = FrameMeter::new();
        m.saw(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        let ping = frame(6, 0, &[0; 8]);
        for _ in 0..FLOOD_LIMIT {
            for b in &ping {
                m.saw(std::slice::from_ref(b));
            }
        }
        assert!(!m.flooded());
        m.saw(&ping);
        assert!(m.flooded());
    }

    #[test]
    fn requests_and_data_are_not_a_flood() {
        let m = FrameMeter::new();
        m.saw(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        for _ in 0..100_000 {
            m.saw(&frame(1, 5, &[0x82; 20]));
            m.saw(&frame(0, 0, &[1; 100]));
            m.saw(&frame(8, 0, &[0, 0, 1, 0]));
        }
        assert!(!m.flooded());
    }

    #[test]
    fn empty_data_frames_flood_and_written_bytes_pay_for_window_updates() {
        let m = FrameMeter::new();
        let wu = frame(8, 0, &[0, 0, 1, 0]);
        for _ in 0..5 * FLOOD_LIMIT {
            m.saw(&wu);
            m.wrote(64 * 1024);
        }
        assert!(!m.flooded());
        let empty = frame(0, 0, &[]);
        let mut all = Vec::new();
        for _ in 0..=FLOOD_LIMIT {
            all.extend_from_slice(&empty);
        }
        m.saw(&all);
        assert!(m.flooded());
    }
}
