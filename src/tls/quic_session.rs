//! What a QUIC connection's TLS handshake settled ([`Settled`]): the
//! suite (`$ssl_cipher`), the key-exchange group (`$ssl_curve`), whether
//! a session was resumed (`$ssl_session_reused`), whether 0-RTT was
//! accepted, and whether the handshake is finished (a request read before
//! then came in early data: `$ssl_early_data`, `Early-Data: 1`, 425).
//!
//! quinn's rustls session says only the ALPN and the SNI name
//! (`HandshakeData`) and keeps the rustls connection to itself, so
//! porter hands quinn a [`Watched`] server configuration whose sessions
//! pass every call on to quinn's and read the server's handshake
//! messages as they go out (plain TLS messages: QUIC's CRYPTO frames are
//! encrypted per packet): the ServerHello's cipher suite, `key_share`
//! group and `pre_shared_key`, and EncryptedExtensions' `early_data` — as
//! `session_id.rs` reads the ServerHello of a TCP handshake.

use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use quinn::crypto::{
    self, ExportKeyingMaterialError, HeaderKey, KeyPair, Keys, PacketKey, UnsupportedVersion,
};
use quinn::{ConnectionId, Side};
use quinn_proto::transport_parameters::TransportParameters;
use quinn_proto::TransportError;
use rustls::{CipherSuite, NamedGroup};

/// The ServerHello's `random` that makes it a HelloRetryRequest
/// (RFC 8446 4.1.3).
const HRR_RANDOM: [u8; 32] = [
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
    0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
];
const SERVER_HELLO: u8 = 2;
const ENCRYPTED_EXTENSIONS: u8 = 8;
const EXT_PRE_SHARED_KEY: u16 = 41;
const EXT_EARLY_DATA: u16 = 42;
const EXT_KEY_SHARE: u16 = 51;

/// What a ServerHello chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    /// The cipher suite.
    pub suite: CipherSuite,
    /// The `key_share` group (`None`: a resumption without one).
    pub group: Option<NamedGroup>,
    /// A `pre_shared_key` was accepted: the session was resumed.
    pub resumed: bool,
}

/// What one connection's handshake has settled so far, shared between
/// its TLS session (which writes it) and the HTTP/3 connection (which
/// reads it).
#[derive(Debug, Default)]
pub struct Settled {
    hello: OnceLock<Hello>,
    early_accepted: AtomicBool,
    done: AtomicBool,
}

impl Settled {
    /// The ServerHello's choices, once it was written.
    pub fn hello(&self) -> Option<Hello> {
        self.hello.get().copied()
    }

    /// `$ssl_cipher`, as OpenSSL names the suite.
    pub fn cipher(&self) -> &'static str {
        self.hello()
            .map_or("", |h| super::ciphers::openssl_name(h.suite))
    }

    /// `$ssl_curve`, as OpenSSL names the group.
    pub fn curve(&self) -> &'static str {
        self.hello()
            .and_then(|h| h.group)
            .map_or("", super::groups::openssl_name)
    }

    /// `$ssl_session_reused`.
    pub fn resumed(&self) -> bool {
        self.hello().is_some_and(|h| h.resumed)
    }

    /// The server accepted the client's 0-RTT data.
    pub fn early_accepted(&self) -> bool {
        self.early_accepted.load(Ordering::Relaxed)
    }

    /// The client's Finished was read: what arrives from now on is not
    /// early data.
    pub fn done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Reads the handshake messages in `out` (whole messages; a part is
    /// left alone).
    fn scan(&self, mut out: &[u8]) {
        while out.len() >= 4 {
            let len = usize::from(out[1]) << 16 | usize::from(out[2]) << 8 | usize::from(out[3]);
            let Some(body) = out.get(4..4 + len) else {
                return;
            };
            match out[0] {
                SERVER_HELLO => {
                    if let Some(h) = server_hello(body) {
                        let _ = self.hello.set(h);
                    }
                }
                ENCRYPTED_EXTENSIONS => {
                    let exts = body.get(2..).unwrap_or_default();
                    if extensions(exts).any(|(t, _)| t == EXT_EARLY_DATA) {
                        self.early_accepted.store(true, Ordering::Relaxed);
                    }
                }
                _ => {}
            }
            out = &out[4 + len..];
        }
    }
}

/// The choices of a ServerHello's body (`None` for a HelloRetryRequest
/// or a malformed one).
fn server_hello(body: &[u8]) -> Option<Hello> {
    let random = body.get(2..34)?;
    if random == HRR_RANDOM {
        return None;
    }
    let id_len = usize::from(*body.get(34)?);
    let at = 35 + id_len;
    let suite = u16::from_be_bytes([*body.get(at)?, *body.get(at + 1)?]);
    // Then the compression method (1) and the extensions' length (2).
    let exts = body.get(at + 5..)?;
    let mut hello = Hello {
        suite: CipherSuite::from(suite),
        group: None,
        resumed: false,
    };
    for (t, data) in extensions(exts) {
        match t {
            EXT_KEY_SHARE if data.len() >= 2 => {
                hello.group = Some(NamedGroup::from(u16::from_be_bytes([data[0], data[1]])))
            }
            EXT_PRE_SHARED_KEY => hello.resumed = true,
            _ => {}
        }
    }
    Some(hello)
}

/// The (type, data) of each whole extension in `exts`.
fn extensions(mut exts: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let t = u16::from_be_bytes([*exts.first()?, *exts.get(1)?]);
        let len = usize::from(u16::from_be_bytes([*exts.get(2)?, *exts.get(3)?]));
        let data = exts.get(4..4 + len)?;
        exts = &exts[4 + len..];
        Some((t, data))
    })
}

/// What `quinn::Connection::handshake_data` gives on a porter endpoint.
pub struct Handshake {
    /// The SNI name the client sent.
    pub server_name: Option<String>,
    /// What the handshake settled, as it settles.
    pub settled: Arc<Settled>,
}

/// A QUIC server TLS configuration whose sessions are watched.
pub struct Watched(pub Arc<quinn::crypto::rustls::QuicServerConfig>);

impl crypto::ServerConfig for Watched {
    fn initial_keys(
        &self,
        version: u32,
        dst_cid: &ConnectionId,
    ) -> Result<Keys, UnsupportedVersion> {
        self.0.initial_keys(version, dst_cid)
    }

    fn retry_tag(&self, version: u32, orig_dst_cid: &ConnectionId, packet: &[u8]) -> [u8; 16] {
        self.0.retry_tag(version, orig_dst_cid, packet)
    }

    fn start_session(
        self: Arc<Self>,
        version: u32,
        params: &TransportParameters,
    ) -> Box<dyn crypto::Session> {
        let inner = Arc::clone(&self.0).start_session(version, params);
        Box::new(WatchedSession {
            inner,
            settled: Arc::default(),
        })
    }
}

/// quinn's session, its outgoing handshake read into `settled`.
struct WatchedSession {
    inner: Box<dyn crypto::Session>,
    settled: Arc<Settled>,
}

impl crypto::Session for WatchedSession {
    fn initial_keys(&self, dst_cid: &ConnectionId, side: Side) -> Keys {
        self.inner.initial_keys(dst_cid, side)
    }

    fn handshake_data(&self) -> Option<Box<dyn Any>> {
        let data = self.inner.handshake_data()?;
        let server_name = data
            .downcast::<quinn::crypto::rustls::HandshakeData>()
            .ok()
            .and_then(|d| d.server_name);
        Some(Box::new(Handshake {
            server_name,
            settled: Arc::clone(&self.settled),
        }))
    }

    fn peer_identity(&self) -> Option<Box<dyn Any>> {
        self.inner.peer_identity()
    }

    fn early_crypto(&self) -> Option<(Box<dyn HeaderKey>, Box<dyn PacketKey>)> {
        self.inner.early_crypto()
    }

    fn early_data_accepted(&self) -> Option<bool> {
        self.inner.early_data_accepted()
    }

    fn is_handshaking(&self) -> bool {
        self.inner.is_handshaking()
    }

    fn read_handshake(&mut self, buf: &[u8]) -> Result<bool, TransportError> {
        let r = self.inner.read_handshake(buf);
        if !self.inner.is_handshaking() {
            self.settled.done.store(true, Ordering::Release);
        }
        r
    }

    fn transport_parameters(&self) -> Result<Option<TransportParameters>, TransportError> {
        self.inner.transport_parameters()
    }

    fn write_handshake(&mut self, buf: &mut Vec<u8>) -> Option<Keys> {
        let from = buf.len();
        let keys = self.inner.write_handshake(buf);
        self.settled.scan(&buf[from..]);
        keys
    }

    fn next_1rtt_keys(&mut self) -> Option<KeyPair<Box<dyn PacketKey>>> {
        self.inner.next_1rtt_keys()
    }

    fn is_valid_retry(&self, orig_dst_cid: &ConnectionId, header: &[u8], payload: &[u8]) -> bool {
        self.inner.is_valid_retry(orig_dst_cid, header, payload)
    }

    fn export_keying_material(
        &self,
        output: &mut [u8],
        label: &[u8],
        context: &[u8],
    ) -> Result<(), ExportKeyingMaterialError> {
        self.inner.export_keying_material(output, label, context)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ServerHello message with `suite` and `exts`.
    fn hello(random: [u8; 32], suite: u16, exts: &[(u16, &[u8])]) -> Vec<u8> {
        let mut e = Vec::new();
        for (t, d) in exts {
            e.extend_from_slice(&t.to_be_bytes());
            e.extend_from_slice(&(d.len() as u16).to_be_bytes());
            e.extend_from_slice(d);
        }
        let mut body = vec![3, 3];
        body.extend_from_slice(&random);
        body.push(0); // no legacy session ID (QUIC)
        body.extend_from_slice(&suite.to_be_bytes());
        body.push(0);
        body.extend_from_slice(&(e.len() as u16).to_be_bytes());
        body.extend_from_slice(&e);
        let mut m = vec![SERVER_HELLO, 0, (body.len() >> 8) as u8, body.len() as u8];
        m.extend_from_slice(&body);
        m
    }

    #[test]
    fn the_suite_group_and_resumption_are_read_from_the_server_hello() {
        let s = Settled::default();
        let mut flight = hello([7; 32], 0x1302, &[(43, &[3, 4]), (51, &[0, 0x1d, 0, 32])]);
        // EncryptedExtensions with early_data, in the same flight.
        flight.extend_from_slice(&[ENCRYPTED_EXTENSIONS, 0, 0, 6, 0, 4, 0, 42, 0, 0]);
        s.scan(&flight);
        assert_eq!(s.cipher(), "TLS_AES_256_GCM_SHA384");
        assert_eq!(s.curve(), "X25519");
        assert!(!s.resumed());
        assert!(s.early_accepted());
        let r = Settled::default();
        r.scan(&hello(
            [9; 32],
            0x1301,
            &[(41, &[0, 0]), (51, &[0, 0x17, 0, 0])],
        ));
        assert_eq!(r.cipher(), "TLS_AES_128_GCM_SHA256");
        assert_eq!(r.curve(), "prime256v1");
        assert!(r.resumed());
        assert!(!r.early_accepted());
    }

    #[test]
    fn a_retry_request_or_a_cut_message_settles_nothing() {
        let s = Settled::default();
        s.scan(&hello(HRR_RANDOM, 0x1301, &[(51, &[0, 0x1d])]));
        assert_eq!(s.hello(), None);
        let whole = hello([1; 32], 0x1303, &[]);
        s.scan(&whole[..whole.len() - 1]);
        assert_eq!(s.hello(), None);
        s.scan(&whole);
        assert_eq!(s.cipher(), "TLS_CHACHA20_POLY1305_SHA256");
        assert_eq!(s.curve(), "");
    }
}
