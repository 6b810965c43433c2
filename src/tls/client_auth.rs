//! Mutual TLS: `ssl_client_certificate` + `ssl_verify_client` (and
//! `ssl_trusted_certificate`, `ssl_crl`). NGINX lets
//! the handshake finish whatever the client sends and judges the
//! certificate per request (`$ssl_client_verify`; 495 or 496 pages when
//! verification is required), so this verifier accepts any chain during
//! the handshake — it still checks the client's signature with the
//! certificate's key, so the client holds that key — and [`verify`]
//! checks the chain against the CAs once the handshake is done.

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use rustls_pki_types::pem::PemObject;

/// `ssl_verify_client`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyClient {
    /// `off`: no certificate is asked for.
    Off,
    /// `on`: a request without a valid certificate gets 496 or 495.
    On,
    /// `optional`: asked for; a certificate sent must be valid (495).
    Optional,
    /// `optional_no_ca`: asked for; never refused.
    OptionalNoCa,
}

impl VerifyClient {
    /// Whether this mode refuses a client whose chain got `verdict`
    /// (`$ssl_client_verify`): NGINX's error-log text, and whether the
    /// certificate was missing (HTTP's 496) rather than bad (495).
    /// `on` wants a valid one; `optional` refuses a bad one;
    /// `optional_no_ca` never refuses.
    pub fn refusal(self, verdict: &str) -> Option<(bool, String)> {
        match (self, verdict) {
            (VerifyClient::On, "NONE") => {
                Some((true, "client sent no required SSL certificate".into()))
            }
            (VerifyClient::On | VerifyClient::Optional, v) if v.starts_with("FAILED:") => Some((
                false,
                format!("client SSL certificate verify error: ({})", &v[7..]),
            )),
            _ => None,
        }
    }
}

/// Asks for a client certificate, defers the chain's verdict to
/// [`ClientAuth::verify`].
#[derive(Debug)]
pub struct ClientAuth {
    /// The names of `ssl_client_certificate`'s CAs, sent in the request
    /// for a certificate (none without that file).
    hints: Vec<DistinguishedName>,
    /// The chain's verdict: the CAs of `ssl_client_certificate` and
    /// `ssl_trusted_certificate`, and `ssl_crl`'s lists; `None` when no
    /// CA is named (`optional_no_ca` alone), so every chain fails.
    full: Option<Arc<dyn ClientCertVerifier>>,
    /// The handshake's signature check, without any CA.
    algorithms: WebPkiSupportedAlgorithms,
    /// The trusted certificates as read: a client's X.509 v1 certificate,
    /// which webpki cannot parse, passes when it is one of them
    /// (`subject_cn::trusted_itself`).
    certs: Vec<CertificateDer<'static>>,
    /// `ssl_verify_depth`: the most intermediate CAs between the client's
    /// certificate and a trusted one.
    depth: usize,
}

impl ClientAuth {
    /// Trusts the PEM certificates in `ca_file` (`ssl_client_certificate`,
    /// whose names are sent) and `trusted` (`ssl_trusted_certificate`,
    /// already read), through chains of at most `depth` intermediates
    /// (`ssl_verify_depth`); a certificate `crls` revokes
    /// (`ssl_crl`, already read) fails, as does one whose issuer has no
    /// list when there are lists (NGINX's `X509_V_FLAG_CRL_CHECK_ALL`).
    pub fn load(
        ca_file: Option<&Path>,
        trusted: &[CertificateDer<'static>],
        crls: Vec<CertificateRevocationListDer<'static>>,
        depth: usize,
    ) -> Result<Arc<ClientAuth>, String> {
        let shown = ca_file.map_or_else(String::new, |p| p.display().to_string());
        let fail = |e: String| format!("SSL_load_client_CA_file(\"{shown}\") failed ({e})");
        let mut roots = rustls::RootCertStore::empty();
        let mut certs: Vec<CertificateDer<'static>> = Vec::new();
        if let Some(ca_file) = ca_file {
            certs = CertificateDer::pem_file_iter(ca_file)
                .and_then(|i| i.collect::<Result<Vec<_>, _>>())
                .map_err(|e| fail(format!("{e:?}")))?;
            if certs.is_empty() {
                return Err(fail("no certificate found".into()));
            }
            for c in &certs {
                roots.add(c.clone()).map_err(|e| fail(e.to_string()))?;
            }
        }
        let hints = roots.subjects();
        for c in trusted {
            roots.add(c.clone()).map_err(|e| fail(e.to_string()))?;
        }
        certs.extend(trusted.iter().cloned());
        let provider = Arc::new(super::provider());
        let algorithms = provider.signature_verification_algorithms;
        let full = if roots.is_empty() {
            None
        } else {
            let v = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .with_crls(crls)
            .allow_unauthenticated()
            .build()
            .map_err(|e| fail(e.to_string()))?;
            Some(v)
        };
        Ok(Arc::new(ClientAuth {
            hints,
            full,
            algorithms,
            certs,
            depth,
        }))
    }

    /// `$ssl_client_verify` for the chain a client sent: `NONE`,
    /// `SUCCESS` or `FAILED:reason`.
    ///
    /// webpki bounds no chain's length, so `ssl_verify_depth` is applied
    /// here: a path webpki builds uses only the intermediates the client
    /// sent, so a client that sent at most `depth` passes; one that sent
    /// more passes only if a path through the first `depth` of them (in
    /// the order sent, leaf first, as clients send them) reaches a
    /// trusted CA. OpenSSL stops building at the depth and so fails with
    /// "unable to get local issuer certificate"; so does porter.
    pub fn verify(&self, chain: Option<&[CertificateDer<'static>]>) -> Cow<'static, str> {
        let Some((leaf, rest)) = chain.and_then(|c| c.split_first()) else {
            return Cow::Borrowed("NONE");
        };
        let Some(v) = self.full.as_ref() else {
            return Cow::Borrowed("FAILED:unable to get local issuer certificate");
        };
        let now = UnixTime::now();
        if let Err(e) = v.verify_client_cert(leaf, rest, now) {
            if super::subject_cn::trusted_itself(&e, leaf, &self.certs, now) {
                return Cow::Borrowed("SUCCESS");
            }
            return format!("FAILED:{e}").into();
        }
        if rest.len() > self.depth
            && !(0..=self.depth).any(|k| v.verify_client_cert(leaf, &rest[..k], now).is_ok())
        {
            return Cow::Borrowed("FAILED:unable to get local issuer certificate");
        }
        Cow::Borrowed("SUCCESS")
    }
}

impl ClientCertVerifier for ClientAuth {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.hints
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
            .or_else(|e| super::client::verify_by_key(e, message, cert, dss, &self.algorithms))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
            .or_else(|e| super::client::verify_by_key(e, message, cert, dss, &self.algorithms))
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
