//! A raw HTTP/3 client for the hostile-client tests: quinn streams on
//! which the test writes HTTP/3 frames and QPACK bytes itself (varints,
//! prefix integers, literals), so it can send what no well-behaved client
//! sends — a HEADERS frame that never ends, reserved frames, references
//! into a QPACK table the server never allowed, resets at any moment.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::h3client;
use super::tls::Ca;

/// HTTP/3 frame types (RFC 9114 §7.2).
pub const DATA: u64 = 0x0;
pub const HEADERS: u64 = 0x1;
pub const SETTINGS: u64 = 0x4;

/// A QUIC variable-length integer (RFC 9000 §16).
pub fn varint(v: u64, out: &mut Vec<u8>) {
    if v < 1 << 6 {
        out.push(v as u8);
    } else if v < 1 << 14 {
        out.extend_from_slice(&((v as u16) | 0x4000).to_be_bytes());
    } else if v < 1 << 30 {
        out.extend_from_slice(&((v as u32) | 0x8000_0000).to_be_bytes());
    } else {
        out.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes());
    }
}

/// A frame's type and length, the payload to follow.
pub fn frame_head(ty: u64, len: u64) -> Vec<u8> {
    let mut out = Vec::new();
    varint(ty, &mut out);
    varint(len, &mut out);
    out
}

/// A whole frame.
pub fn frame(ty: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = frame_head(ty, payload.len() as u64);
    out.extend_from_slice(payload);
    out
}

/// A QPACK prefix integer (RFC 7541 §5.1) with `flags` in the bits above
/// the `bits`-bit prefix.
pub fn prefix_int(flags: u8, bits: u8, v: usize, out: &mut Vec<u8>) {
    let max = (1usize << bits) - 1;
    if v < max {
        out.push(flags | v as u8);
        return;
    }
    out.push(flags | max as u8);
    let mut rest = v - max;
    while rest >= 128 {
        out.push((rest % 128) as u8 | 0x80);
        rest /= 128;
    }
    out.push(rest as u8);
}

/// A QPACK string literal without Huffman coding.
fn string(s: &[u8], out: &mut Vec<u8>) {
    prefix_int(0, 7, s.len(), out);
    out.extend_from_slice(s);
}

/// The field section of `GET path` for `localhost` with `extra` fields,
/// static table references and literals only (no dynamic table).
pub fn get_fields(path: &str, extra: &[(&str, &[u8])]) -> Vec<u8> {
    // Required insert count 0, base 0.
    let mut out = vec![0, 0];
    prefix_int(0xc0, 6, 17, &mut out); // :method GET
    prefix_int(0xc0, 6, 23, &mut out); // :scheme https
    prefix_int(0x50, 4, 0, &mut out); // :authority
    string(b"localhost", &mut out);
    prefix_int(0x50, 4, 1, &mut out); // :path
    string(path.as_bytes(), &mut out);
    for (name, value) in extra {
        prefix_int(0x20, 3, name.len(), &mut out);
        out.extend_from_slice(name.as_bytes());
        string(value, &mut out);
    }
    out
}

/// A HEADERS frame for `GET path`.
pub fn get(path: &str) -> Vec<u8> {
    frame(HEADERS, &get_fields(path, &[]))
}

/// The control stream's opening: its type and an empty SETTINGS frame.
pub fn control_opening() -> Vec<u8> {
    let mut out = vec![0x00];
    out.extend(frame(SETTINGS, &[]));
    out
}

/// One QUIC connection with ALPN `h3` and nothing HTTP/3 sent yet.
pub struct Raw {
    pub rt: tokio::runtime::Runtime,
    pub conn: quinn::Connection,
    _endpoint: quinn::Endpoint,
}

impl Raw {
    /// Connects to 127.0.0.1:`port`.
    pub fn connect(port: u16, ca: &Ca) -> Raw {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let tls = h3client::tls(ca);
        let (conn, endpoint) = rt.block_on(async move {
            let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
            let mut cfg = quinn::ClientConfig::new(tls);
            let mut t = quinn::TransportConfig::default();
            t.max_idle_timeout(Some(Duration::from_secs(30).try_into().unwrap()));
            cfg.transport_config(Arc::new(t));
            ep.set_default_client_config(cfg);
            let to: SocketAddr = ([127, 0, 0, 1], port).into();
            let conn = ep.connect(to, "localhost").unwrap().await.unwrap();
            (conn, ep)
        });
        Raw {
            rt,
            conn,
            _endpoint: endpoint,
        }
    }

    /// Opens the control stream (type, empty SETTINGS).
    pub fn open_control(&self) -> quinn::SendStream {
        let conn = self.conn.clone();
        self.rt.block_on(async move {
            let mut s = conn.open_uni().await.unwrap();
            s.write_all(&control_opening()).await.unwrap();
            s
        })
    }

    /// Sends `bytes` on a new request stream, FIN after them if `fin`,
    /// and returns what comes back within `wait` (the stream's bytes, or
    /// how it ended).
    pub fn exchange(&self, bytes: &[u8], fin: bool, wait: Duration) -> Result<Vec<u8>, String> {
        let conn = self.conn.clone();
        let bytes = bytes.to_vec();
        self.rt.block_on(async move {
            let (mut send, mut recv) = conn.open_bi().await.map_err(|e| e.to_string())?;
            send.write_all(&bytes).await.map_err(|e| e.to_string())?;
            if fin {
                let _ = send.finish();
            }
            match tokio::time::timeout(wait, recv.read_to_end(1 << 26)).await {
                Ok(r) => r.map_err(|e| e.to_string()),
                Err(_) => Err("no answer".into()),
            }
        })
    }

    /// How the connection was closed, waiting up to `wait`.
    pub fn closed(&self, wait: Duration) -> Option<quinn::ConnectionError> {
        let conn = self.conn.clone();
        self.rt
            .block_on(async move { tokio::time::timeout(wait, conn.closed()).await.ok() })
    }
}

/// The HTTP/3 application error code a connection was closed with.
pub fn app_code(e: &quinn::ConnectionError) -> Option<u64> {
    match e {
        quinn::ConnectionError::ApplicationClosed(c) => Some(c.error_code.into_inner()),
        _ => None,
    }
}

/// The status of the first HEADERS frame of a response stream (`bytes`),
/// read from its literal `:status` value (porter's h3 encodes without a
/// dynamic table; a status of the static table is an index).
pub fn status(bytes: &[u8]) -> Option<u16> {
    const STATIC: [(usize, u16); 14] = [
        (24, 103),
        (25, 200),
        (26, 304),
        (27, 404),
        (28, 503),
        (63, 100),
        (64, 204),
        (65, 206),
        (66, 302),
        (67, 400),
        (68, 403),
        (69, 421),
        (70, 425),
        (71, 500),
    ];
    // Frame type 1, a one- or two-byte length, then the section prefix.
    let len_bytes = if bytes.get(1)? & 0x40 != 0 { 2 } else { 1 };
    let f = &bytes[1 + len_bytes + 2..];
    let first = *f.first()?;
    if first & 0xc0 == 0xc0 {
        let idx = match first & 0x3f {
            63 => 63 + *f.get(1)? as usize,
            i => i as usize,
        };
        return STATIC.iter().find(|(i, _)| *i == idx).map(|(_, s)| *s);
    }
    // A literal with a static name reference (`:status`, index 24):
    // the value's length byte, then three digits, Huffman-coded or not.
    let at = if first & 0x0f == 0x0f { 2 } else { 1 };
    let len = *f.get(at)?;
    let value = f.get(at + 1..at + 1 + (len & 0x7f) as usize)?;
    let digits = if len & 0x80 != 0 {
        huffman_digits(value)
    } else {
        value.to_vec()
    };
    std::str::from_utf8(&digits).ok()?.parse().ok()
}

/// Decodes HPACK Huffman codes of the digits (RFC 7541 Appendix B: 0-2
/// in five bits, 3-9 in six), the padding ignored.
fn huffman_digits(bytes: &[u8]) -> Vec<u8> {
    let bits: Vec<u8> = bytes
        .iter()
        .flat_map(|b| (0..8).rev().map(move |i| (b >> i) & 1))
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    let code = |from: usize, n: usize| {
        bits.get(from..from + n)
            .map(|b| b.iter().fold(0u8, |a, x| a << 1 | x))
    };
    while let Some(c5) = code(i, 5) {
        if c5 <= 2 {
            out.push(b'0' + c5);
            i += 5;
            continue;
        }
        match code(i, 6) {
            Some(c6 @ 0x19..=0x1f) => out.push(b'3' + c6 - 0x19),
            _ => break,
        }
        i += 6;
    }
    out
}

/// Reads a QUIC varint at the start of `b`: the value and its length.
fn read_varint(b: &[u8]) -> Option<(u64, usize)> {
    let first = *b.first()?;
    let n = 1usize << (first >> 6);
    let mut v = u64::from(first & 0x3f);
    for x in b.get(1..n)? {
        v = v << 8 | u64::from(*x);
    }
    Some((v, n))
}

/// The DATA frames' payloads of a response stream, joined (`None` if a
/// frame is cut short).
pub fn data_payload(mut bytes: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let (ty, a) = read_varint(bytes)?;
        let (len, b) = read_varint(&bytes[a..])?;
        let payload = bytes.get(a + b..a + b + len as usize)?;
        if ty == DATA {
            out.extend_from_slice(payload);
        }
        bytes = &bytes[a + b + len as usize..];
    }
    Some(out)
}
