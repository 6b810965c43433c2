//! The certificate one `acme_certificate` serves: a slot the TLS
//! handshake reads (it is the server's rustls certificate resolver) and
//! the ACME runtime replaces when a certificate is issued or renewed. A
//! replacement is one pointer swap under a lock held for nanoseconds: a
//! handshake in progress keeps the `Arc` it took, new handshakes get the
//! new certificate, and no connection is touched. Slots outlive
//! configuration generations (a registry keyed by the certificate's
//! identity), so a reload keeps serving what was issued before it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, SystemTime};

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// A certificate ready to serve, with the dates renewal is planned by.
#[derive(Clone, Debug)]
pub struct Installed {
    /// The chain and its signing key.
    pub key: Arc<CertifiedKey>,
    /// The leaf's `notBefore`.
    pub not_before: SystemTime,
    /// The leaf's `notAfter`.
    pub not_after: SystemTime,
    /// The chain as PEM (what the state path keeps).
    pub chain_pem: String,
}

impl Installed {
    /// Parses a PEM chain and its PEM private key; the error says which
    /// part is wrong.
    pub fn from_pem(chain_pem: &str, key_pem: &str) -> Result<Installed, String> {
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(chain_pem.as_bytes())
                .collect::<Result<_, _>>()
                .map_err(|e| format!("bad certificate chain ({e:?})"))?;
        let leaf = chain.first().ok_or("no certificate in the chain")?;
        let (not_before, not_after) = validity(leaf)?;
        let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
            .map_err(|e| format!("bad private key ({e:?})"))?;
        let key = CertifiedKey::from_der(chain, key, &crate::tls::provider())
            .map_err(|e| format!("certificate and key do not match ({e})"))?;
        Ok(Installed {
            key: Arc::new(key),
            not_before,
            not_after,
            chain_pem: chain_pem.to_string(),
        })
    }

    /// When to renew without renewal information from the issuer: at two
    /// thirds of the lifetime (a 90-day certificate 30 days before it
    /// ends, as certbot and nginx-acme do).
    pub fn renew_at(&self) -> SystemTime {
        let life = self
            .not_after
            .duration_since(self.not_before)
            .unwrap_or(Duration::ZERO);
        self.not_before + life * 2 / 3
    }
}

/// The leaf's validity period.
fn validity(leaf: &CertificateDer<'_>) -> Result<(SystemTime, SystemTime), String> {
    let (_, cert) =
        x509_parser::parse_x509_certificate(leaf).map_err(|e| format!("bad certificate ({e})"))?;
    let at = |t: x509_parser::time::ASN1Time| {
        let secs = t.timestamp();
        if secs >= 0 {
            SystemTime::UNIX_EPOCH + Duration::from_secs(secs as u64)
        } else {
            SystemTime::UNIX_EPOCH
        }
    };
    let v = cert.validity();
    Ok((at(v.not_before), at(v.not_after)))
}

/// What one `acme_certificate` serves now (nothing until the first
/// certificate is issued: the handshake is then refused).
#[derive(Debug, Default)]
pub struct CertSlot {
    current: RwLock<Option<Installed>>,
}

impl CertSlot {
    /// Serves `cert` from the next handshake on.
    pub fn install(&self, cert: Installed) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Some(cert);
    }

    /// What is served now.
    pub fn current(&self) -> Option<Installed> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl ResolvesServerCert for CertSlot {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|c| Arc::clone(&c.key))
    }
}

static SLOTS: Mutex<Option<HashMap<String, Weak<CertSlot>>>> = Mutex::new(None);

/// The slot of the certificate identified by `id`: the one a previous
/// configuration generation still holds, else a new empty one (`fresh`
/// true).
pub fn slot(id: &str) -> (Arc<CertSlot>, bool) {
    let mut map = SLOTS.lock().unwrap_or_else(|e| e.into_inner());
    let map = map.get_or_insert_with(HashMap::new);
    map.retain(|_, w| w.strong_count() > 0);
    if let Some(s) = map.get(id).and_then(Weak::upgrade) {
        return (s, false);
    }
    let s = Arc::new(CertSlot::default());
    map.insert(id.to_string(), Arc::downgrade(&s));
    (s, true)
}
