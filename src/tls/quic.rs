//! The TLS of a `listen ... quic` address: QUIC carries TLS 1.3 inside
//! its own packets (quinn drives rustls's QUIC interface), so what the
//! TCP listener's servers offer is reused: the certificate the client's
//! SNI chooses among the address's servers (no SNI or no match: the
//! default server's), the default server's session cache and ticket keys
//! (so a session from the TCP listener resumes here too), with ALPN `h3`
//! only, and 0-RTT when a server of the address has `ssl_early_data on`
//! (which requests it may serve is the HTTP/3 stream's decision). Each
//! session is watched (`quic_session.rs`) for what rustls settles and
//! quinn does not say.

use std::fmt;
use std::sync::Arc;

use quinn::crypto::rustls::QuicServerConfig;
use quinn::crypto::ServerConfig as QuicTls;
use rustls::server::{ClientHello, ProducesTickets, ResolvesServerCert, StoresServerSessions};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;

/// The TLS configuration of the server a client's SNI names (`None`:
/// that server refuses handshakes or has no TLS).
pub type PickServer = Box<dyn Fn(Option<&str>) -> Option<Arc<ServerConfig>> + Send + Sync>;

/// The QUIC TLS configuration of an address whose default server's TLS is
/// `base`; `pick` finds the server of a client's SNI; with `early`, 0-RTT
/// is accepted on sessions resumed from that store (no tickets then:
/// rustls takes early data on stateful sessions only); with `ask`, client
/// certificates are asked for by that verifier (another server's
/// `ssl_verify_client` when the default server has none: one rustls
/// configuration serves every SNI of the address).
pub fn quic_server_config(
    base: &ServerConfig,
    pick: PickServer,
    early: Option<Arc<dyn StoresServerSessions>>,
    ask: Option<Arc<super::client_auth::ClientAuth>>,
) -> Result<Arc<dyn QuicTls>, String> {
    if !super::offers_tls13(base) {
        return Err("QUIC needs TLSv1.3".into());
    }
    let mut c = match ask {
        Some(v) => with_verifier(base, v)?,
        None => base.clone(),
    };
    c.cert_resolver = Arc::new(BySni { pick });
    c.alpn_protocols = vec![b"h3".to_vec()];
    // quinn takes 0 (no 0-RTT) or u32::MAX (QUIC's flow control bounds it).
    c.max_early_data_size = 0;
    if let Some(sessions) = early {
        c.max_early_data_size = u32::MAX;
        c.session_storage = sessions;
        c.ticketer = Arc::new(NoTickets);
    }
    c.enable_secret_extraction = false;
    c.max_fragment_size = None;
    let quic = QuicServerConfig::try_from(Arc::new(c)).map_err(|e| format!("QUIC TLS: {e}"))?;
    Ok(Arc::new(super::quic_session::Watched(Arc::new(quic))))
}

/// `base` asking for client certificates with `verifier` (rustls sets the
/// verifier only as a configuration is built).
fn with_verifier(
    base: &ServerConfig,
    verifier: Arc<super::client_auth::ClientAuth>,
) -> Result<ServerConfig, String> {
    let mut c = ServerConfig::builder_with_provider(Arc::clone(base.crypto_provider()))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| format!("QUIC TLS: {e}"))?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(Arc::clone(&base.cert_resolver));
    c.ignore_client_order = base.ignore_client_order;
    c.session_storage = Arc::clone(&base.session_storage);
    c.ticketer = Arc::clone(&base.ticketer);
    Ok(c)
}

/// Session tickets off: sessions resume from the server's store.
#[derive(Debug)]
pub(super) struct NoTickets;

impl ProducesTickets for NoTickets {
    fn enabled(&self) -> bool {
        false
    }

    fn lifetime(&self) -> u32 {
        0
    }

    fn encrypt(&self, _: &[u8]) -> Option<Vec<u8>> {
        None
    }

    fn decrypt(&self, _: &[u8]) -> Option<Vec<u8>> {
        None
    }
}

/// The certificate of the server a client's SNI chooses, by that server's
/// own picker (its RSA or ECDSA pair).
struct BySni {
    pick: PickServer,
}

impl fmt::Debug for BySni {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BySni")
    }
}

impl ResolvesServerCert for BySni {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let config = (self.pick)(hello.server_name())?;
        config.cert_resolver.resolve(hello)
    }
}

/// Fills `buf` with random bytes from the crypto provider.
pub fn fill_random(buf: &mut [u8]) {
    // ring's system random does not fail on Linux (getrandom).
    let _ = super::provider().secure_random.fill(buf);
}
