//! Automatic HTTPS: ACME (RFC 8555) with nginx-acme's directives
//! (`acme_issuer`, `acme_certificate`, `ssl_certificate
//! $acme_certificate`). The configuration layer builds an [`Issuer`] per
//! `acme_issuer` block and a [`Certificate`] per `acme_certificate`; the
//! master hands the live set to [`manager::apply`] after each start or
//! reload. One dedicated thread runs a tokio current-thread runtime (the
//! event loop every ACME network wait is on): it keeps each certificate
//! valid — order, HTTP-01 or TLS-ALPN-01 challenge, finalize, download, install into
//! the certificate's [`slot::CertSlot`] (the server's rustls resolver,
//! swapped without a restart or a dropped connection), renewal ahead of
//! expiry, backoff on errors. State files go through the disk layer
//! (`disk::state_file`) on the runtime's blocking threads.
//!
//! The protocol is `instant-acme`'s (maintained, tokio and hyper, rustls
//! with the `ring` provider porter already uses; no aws-lc-rs): JWS
//! signing, nonces, the order state machine and problem documents are
//! what it is made for, and writing them again over porter's upstream
//! client (built for proxying, per worker) would be a second HTTP client
//! with nothing gained. Keys and CSRs are `rcgen`'s, but for RSA keys
//! (`key=rsa:N`), which ring cannot generate: those are made by the
//! `rsa` crate (RustCrypto's, maintained; used for generation only, every
//! signature stays ring's) and handed to `rcgen` as PKCS#8.
//!
//! | File | What it holds |
//! |---|---|
//! | `slot.rs` | [`slot::CertSlot`]: what one certificate serves now; the registry that keeps it across reloads |
//! | `challenge.rs` | challenges being validated; HTTP-01 tokens, answered by the workers before location matching |
//! | `tls_alpn.rs` | TLS-ALPN-01: validation certificates, answered in the handshake of any TLS listener |
//! | `state.rs` | the state path: account key, certificates and keys on disk |
//! | `client.rs` | the protocol: account, order, challenge, finalize, download |
//! | `renewal.rs` | when to renew: ARI's window where the issuer offers it, else two thirds of the lifetime |
//! | `manager.rs` | the ACME thread: when to issue and renew, backoff, logging |

pub mod challenge;
pub mod client;
pub mod manager;
pub mod renewal;
pub mod slot;
pub mod state;
pub mod tls_alpn;

use std::path::PathBuf;
use std::sync::Arc;

/// The challenge an issuer's orders are proven with (`challenge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChallengeKind {
    /// `http-01`: a token served at `/.well-known/acme-challenge/` on port 80.
    Http01,
    /// `tls-alpn-01` (RFC 8737): a validation certificate served to a
    /// handshake offering ALPN `acme-tls/1` on port 443.
    TlsAlpn01,
}

impl ChallengeKind {
    /// As written in `challenge`.
    pub fn name(self) -> &'static str {
        match self {
            ChallengeKind::Http01 => "http-01",
            ChallengeKind::TlsAlpn01 => "tls-alpn-01",
        }
    }
}

/// Where the account key comes from (`account_key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccountKey {
    /// Generated (ECDSA P-256) and kept under the state path.
    Generate,
    /// This PEM file (PKCS#8 ECDSA P-256).
    File(PathBuf),
}

/// The private key type of a certificate (`acme_certificate … key=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// `ecdsa:256` (the default).
    EcdsaP256,
    /// `ecdsa:384`.
    EcdsaP384,
    /// `rsa:2048` (also `rsa`).
    Rsa2048,
    /// `rsa:3072`.
    Rsa3072,
    /// `rsa:4096`.
    Rsa4096,
}

impl KeyKind {
    /// As written in `key=`.
    pub fn name(self) -> &'static str {
        match self {
            KeyKind::EcdsaP256 => "ecdsa:256",
            KeyKind::EcdsaP384 => "ecdsa:384",
            KeyKind::Rsa2048 => "rsa:2048",
            KeyKind::Rsa3072 => "rsa:3072",
            KeyKind::Rsa4096 => "rsa:4096",
        }
    }
}

/// One `acme_issuer NAME { }` block.
#[derive(Debug)]
pub struct Issuer {
    /// The block's name.
    pub name: String,
    /// `uri`: the ACME directory URL.
    pub uri: String,
    /// `contact`: URLs (`mailto:` added where no scheme is given).
    pub contacts: Vec<String>,
    /// `account_key`.
    pub account_key: AccountKey,
    /// `challenge`.
    pub challenge: ChallengeKind,
    /// `state_path` (`None`: `off`, nothing kept on disk).
    pub state_path: Option<PathBuf>,
    /// `accept_terms_of_service`.
    pub accept_tos: bool,
    /// `external_account_key`: binds a new account to one the issuer
    /// knows (RFC 8555 7.3.4).
    pub external_account: Option<ExternalAccount>,
    /// The HTTPS client configuration for the directory
    /// (`ssl_trusted_certificate`, `ssl_verify`).
    pub tls: Arc<rustls::ClientConfig>,
    /// What `tls` was built from (`ssl_trusted_certificate`,
    /// `ssl_verify`), to tell whether a reload changed it.
    pub tls_settings: String,
}

/// `external_account_key KID KEY`: the issuer's key identifier and the
/// HMAC key (decoded) that signs the binding with HS256.
#[derive(Clone, PartialEq, Eq)]
pub struct ExternalAccount {
    /// The key identifier the issuer gave.
    pub kid: String,
    /// The MAC key.
    pub mac: Vec<u8>,
}

impl std::fmt::Debug for ExternalAccount {
    /// The key identifier and a hash of the key: what tells a reload that
    /// the binding changed, and nothing that would leak the key to a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {:08x}", self.kid, crc32fast::hash(&self.mac))
    }
}

/// One `acme_certificate` of a server.
#[derive(Debug)]
pub struct Certificate {
    /// Its issuer.
    pub issuer: Arc<Issuer>,
    /// The DNS names requested, lowercased, in order.
    pub names: Vec<String>,
    /// `key=`.
    pub key: KeyKind,
    /// What it serves now.
    pub slot: Arc<slot::CertSlot>,
    /// Stable across reloads and restarts: the registry key of its slot
    /// and the stem of its files under the state path.
    pub id: String,
}

/// The identity of a certificate: its first name and a hash of what
/// makes it this certificate (issuer's name and directory, names, key
/// type), so two certificates of one name with different lists keep
/// different files.
pub fn certificate_id(issuer: &str, uri: &str, names: &[String], key: KeyKind) -> String {
    let mut h = crc32fast::Hasher::new();
    for part in [issuer, uri, key.name()] {
        h.update(part.as_bytes());
        h.update(b"\0");
    }
    for n in names {
        h.update(n.as_bytes());
        h.update(b"\0");
    }
    format!(
        "{}-{:08x}",
        names.first().map_or("", String::as_str),
        h.finalize()
    )
}
