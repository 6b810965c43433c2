//! TLS for client connections, with rustls (no OpenSSL): what the
//! `ssl_*` directives turn into. The configuration layer reads the
//! directives and calls [`load_pair`] and [`server_config`] while the
//! config loads (so a bad certificate is `porter -t`'s error and a reload
//! with one keeps the old configuration); the connection loop drives one
//! connection with [`conn`]. This folder imports nothing else of porter's.
//!
//! | File | What it holds |
//! |---|---|
//! | `conn.rs` | the handshake (ClientHello first, for SNI; early data) and record I/O over the worker's socket; the client handshake to an upstream |
//! | `sock.rs` | the socket as rustls's reader and writer (whole records for kTLS), plaintext and early data taken out of rustls |
//! | `client.rs` | `proxy_ssl_*`: porter's client configuration for `proxy_pass https://` |
//! | `subject_cn.rs` | an upstream's certificate without a DNS subjectAltName matched by its common name, and a trusted X.509 v1 one, as OpenSSL |
//! | `client_auth.rs` | `ssl_client_certificate` / `ssl_verify_client`: mutual TLS, judged per request as NGINX does |
//! | `ciphers.rs` | `ssl_ciphers`: OpenSSL's cipher strings onto rustls's suites |
//! | `groups.rs` | `ssl_ecdh_curve`: OpenSSL's group names onto rustls's key exchanges |
//! | `p521.rs` | P-521 ECDH as a rustls key exchange (ring has none), with RustCrypto's `p521` |
//! | `tickets.rs` | `ssl_session_ticket_key`: NGINX's key files, NGINX's ticket format |
//! | `keys.rs` | private keys, plain or encrypted (`ssl_password_file`); OCSP responses and trusted certificates read |
//! | `peer.rs` | a client certificate's fields as `$ssl_client_*` print them (OpenSSL's forms) |
//! | `session_id.rs` | `$ssl_session_id`: the ID read from the ServerHello as it goes out |
//! | `session.rs` | `ssl_session_cache` / `ssl_session_tickets` shared by all workers, `ssl_session_timeout` |
//! | `ktls.rs` | kernel TLS: the start-up probe, handing rustls's secrets to the kernel, record I/O on a kTLS socket |

pub mod ciphers;
pub mod client;
pub mod client_auth;
pub mod conn;
pub mod groups;
pub mod keys;
pub mod ktls;
pub mod p521;
pub mod peer;
pub mod quic;
pub mod quic_session;
pub mod session;
pub mod session_id;
mod sock;
pub mod subject_cn;
pub mod tickets;

pub use quic::{fill_random, quic_server_config};

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::crypto::{CryptoProvider, SupportedKxGroup};
use rustls::server::{ClientHello, ProducesTickets, ResolvesServerCert, StoresServerSessions};
use rustls::sign::CertifiedKey;
use rustls::{ServerConfig, SupportedCipherSuite};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;

/// The crypto provider porter uses (ring's).
pub fn provider() -> CryptoProvider {
    rustls::crypto::ring::default_provider()
}

/// A server block's TLS: its rustls configuration and how long a
/// handshake may take.
#[derive(Debug)]
pub struct ServerTls {
    /// What the handshake offers (certificates, versions, suites, sessions).
    pub config: Arc<ServerConfig>,
    /// `ssl_handshake_timeout`.
    pub handshake_timeout: Duration,
    /// `ssl_verify_client`.
    pub verify_client: client_auth::VerifyClient,
    /// `ssl_client_certificate`: the CAs client certificates are checked
    /// against (when `ssl_verify_client` is not `off`).
    pub client_auth: Option<Arc<client_auth::ClientAuth>>,
    /// `ssl_ktls`: move connections to kernel TLS where the kernel offers it.
    pub ktls: bool,
    /// `ssl_reject_handshake on`: a handshake that chooses this server is
    /// refused with the alert `unrecognized_name`.
    pub reject: bool,
    /// `ssl_early_data on`: 0-RTT requests are taken (safe methods only),
    /// over TCP and QUIC.
    pub early_data: bool,
    /// With `ssl_early_data on`: the sessions resumed with 0-RTT
    /// (stateful, each used once; tickets allow no early data).
    pub early_sessions: Option<Arc<dyn StoresServerSessions>>,
}

/// The merged `ssl_*` settings of one server block.
pub struct TlsSettings {
    /// `ssl_certificate` / `ssl_certificate_key` pairs, loaded.
    pub keys: Vec<Arc<CertifiedKey>>,
    /// `ssl_protocols`: TLSv1.2 offered.
    pub tls12: bool,
    /// `ssl_protocols`: TLSv1.3 offered.
    pub tls13: bool,
    /// `ssl_ciphers`, resolved (TLS 1.2 suites).
    pub ciphers: Vec<SupportedCipherSuite>,
    /// `ssl_prefer_server_ciphers`.
    pub prefer_server_ciphers: bool,
    /// `ssl_session_cache` (already wrapped for `ssl_session_timeout`).
    pub sessions: Arc<dyn StoresServerSessions>,
    /// `ssl_session_tickets on`: the generation's ticket keys.
    pub tickets: Option<Arc<dyn ProducesTickets>>,
    /// Ask for client certificates (`ssl_verify_client` not `off`).
    pub client_auth: Option<Arc<client_auth::ClientAuth>>,
    /// HTTP/2 on this server (`http2 on`): ALPN offers `h2` first.
    pub h2: bool,
    /// `ssl_ktls on`: rustls may export its secrets (for the kernel).
    pub ktls: bool,
    /// `ssl_ecdh_curve`, resolved (`None`: the provider's default).
    pub kx_groups: Option<Vec<&'static dyn SupportedKxGroup>>,
    /// `ssl_buffer_size`: the most plaintext in one record.
    pub buffer_size: Option<usize>,
    /// Where certificates come from instead of `keys` (ACME's slot, whose
    /// certificate is replaced while the configuration lives).
    pub resolver: Option<Arc<dyn ResolvesServerCert>>,
    /// `ssl_early_data on`: the store sessions resume from with early
    /// data (no tickets then).
    pub early: Option<Arc<dyn StoresServerSessions>>,
}

/// The most early data taken on a TCP connection: NGINX's
/// `SSL_CTX_set_max_early_data(NGX_SSL_BUFSIZE)`.
pub const MAX_EARLY_DATA: u32 = 16384;

/// Reads a PEM certificate chain and its private key (RSA, ECDSA or
/// Ed25519; PKCS#8, PKCS#1 or SEC1; encrypted ones opened with the first
/// of `passwords` that fits) and checks that they belong together.
/// The error is NGINX's wording.
pub fn load_pair(
    cert: &Path,
    key: &Path,
    passwords: &[String],
) -> Result<Arc<CertifiedKey>, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|i| i.collect::<Result<Vec<_>, _>>())
        .map_err(|e| {
            format!(
                "cannot load certificate \"{}\": PEM_read_bio_X509_AUX() failed ({})",
                cert.display(),
                pem_error(&e)
            )
        })?;
    if chain.is_empty() {
        return Err(format!(
            "cannot load certificate \"{}\": PEM_read_bio_X509_AUX() failed (no certificate found)",
            cert.display()
        ));
    }
    let der = keys::read_key(key, passwords)?;
    let provider = provider();
    let pair = match CertifiedKey::from_der(chain.clone(), der.clone_key(), &provider) {
        // The key is compared with the certificate's by parsing the
        // certificate with webpki, which refuses what OpenSSL loads (an
        // X.509 v1 certificate, as `openssl req -x509` makes without
        // extensions). Such a certificate is served unchecked, as OpenSSL
        // would serve it; a real mismatch stays an error.
        Err(rustls::Error::InvalidCertificate(_)) => provider
            .key_provider
            .load_private_key(der)
            .map(|signer| CertifiedKey::new(chain, signer)),
        r => r,
    };
    pair.map(Arc::new).map_err(|e| {
        format!(
            "SSL_CTX_use_PrivateKey(\"{}\") failed ({})",
            key.display(),
            match e {
                rustls::Error::InconsistentKeys(_) => "key values mismatch".to_string(),
                e => e.to_string(),
            }
        )
    })
}

fn pem_error(e: &rustls_pki_types::pem::Error) -> String {
    match e {
        rustls_pki_types::pem::Error::Io(io) => io.to_string(),
        rustls_pki_types::pem::Error::NoItemsFound => "no PEM data found".into(),
        e => format!("{e:?}"),
    }
}

/// The rustls configuration for `s`.
pub fn server_config(s: TlsSettings) -> Result<Arc<ServerConfig>, String> {
    let mut provider = provider();
    provider.cipher_suites.retain(|c| match c {
        SupportedCipherSuite::Tls13(_) => s.tls13,
        SupportedCipherSuite::Tls12(_) => s.tls12 && s.ciphers.contains(c),
    });
    if let Some(groups) = s.kx_groups {
        provider.kx_groups = groups;
    }
    // Keep `ssl_ciphers`' order for the TLS 1.2 suites.
    provider
        .cipher_suites
        .sort_by_key(|c| s.ciphers.iter().position(|x| x == c).map_or(0, |p| p + 1));
    let mut versions = Vec::new();
    if s.tls13 {
        versions.push(&rustls::version::TLS13);
    }
    if s.tls12 {
        versions.push(&rustls::version::TLS12);
    }
    let builder = ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&versions)
        .map_err(|e| format!("SSL_CTX_new() failed ({e})"))?;
    let builder = match s.client_auth {
        Some(a) => builder.with_client_cert_verifier(a),
        None => builder.with_no_client_auth(),
    };
    let resolver: Arc<dyn ResolvesServerCert> = match s.resolver {
        Some(r) => r,
        None => Arc::new(CertPicker(s.keys)),
    };
    let mut config = builder.with_cert_resolver(resolver);
    config.ignore_client_order = s.prefer_server_ciphers;
    config.session_storage = s.sessions;
    if let Some(t) = s.tickets {
        config.ticketer = t;
    }
    config.max_early_data_size = 0;
    if let Some(store) = s.early {
        // rustls takes early data on stateful sessions only, each once.
        config.max_early_data_size = MAX_EARLY_DATA;
        config.session_storage = store;
        config.ticketer = Arc::new(quic::NoTickets);
        // The answer to a request from early data goes out before the
        // client's Finished (never with client authentication: rustls
        // holds it back then).
        config.send_half_rtt_data = true;
    }
    // rustls counts the 5-byte record header in; it takes 32 to 16389.
    config.max_fragment_size = s
        .buffer_size
        .map(|n| n.saturating_add(5).clamp(32, 16384 + 5));
    config.enable_secret_extraction = s.ktls;
    // As NGINX: ALPN answers `h2` when the server speaks HTTP/2 and the
    // client offers it, else `http/1.1`; a client that offers ALPN with
    // neither is refused (no_application_protocol).
    config.alpn_protocols = if s.h2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(Arc::new(config))
}

/// Whether `config` offers TLS 1.3 (`ssl_protocols`), which QUIC needs.
pub fn offers_tls13(config: &ServerConfig) -> bool {
    config
        .crypto_provider()
        .cipher_suites
        .iter()
        .any(|c| matches!(c, SupportedCipherSuite::Tls13(_)))
}

/// Several certificate pairs for one server (as NGINX allows, typically
/// one RSA and one ECDSA): the client's first signature algorithm that a
/// key can sign with picks it.
#[derive(Debug)]
struct CertPicker(Vec<Arc<CertifiedKey>>);

impl ResolvesServerCert for CertPicker {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let schemes = hello.signature_schemes();
        for scheme in schemes {
            if let Some(k) = self
                .0
                .iter()
                .find(|k| k.key.choose_scheme(&[*scheme]).is_some())
            {
                return Some(Arc::clone(k));
            }
        }
        self.0.first().cloned()
    }
}
