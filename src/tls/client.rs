//! porter as a TLS client of its upstreams (`proxy_pass https://`): the
//! `proxy_ssl_*` settings turned into a rustls `ClientConfig`.
//!
//! As in NGINX, the upstream's certificate is not checked unless
//! `proxy_ssl_verify on`, and then only against the CAs of
//! `proxy_ssl_trusted_certificate` (no system store: NGINX does not load
//! OpenSSL's default paths either, so a config that verifies without
//! naming CAs fails the same way in both). With verification off the
//! handshake's signatures are still checked (the peer must hold the key
//! of the certificate it sent); only the chain and the name are not.
//!
//! Configurations are built on first use and kept per distinct set of
//! settings, so every connection of a location shares one config and
//! with it rustls's in-memory session store (`proxy_ssl_session_reuse`).
//! A client certificate (`proxy_ssl_certificate`) is loaded with the
//! configuration (`tls::load_pair`) and is part of the settings' key.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ResolvesClientCert, Resumption, WebPkiServerVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer, ServerName, UnixTime};
use rustls::sign::CertifiedKey;
use rustls::{
    ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme, SupportedCipherSuite,
};
use rustls_pki_types::pem::PemObject;

/// `proxy_ssl_trusted_certificate`, read when the configuration loads.
#[derive(Debug)]
pub struct TrustedCerts {
    /// The file, for messages.
    pub path: String,
    /// The CAs it holds.
    pub roots: Arc<RootCertStore>,
    /// The certificates as read (`subject_cn`: a trusted certificate
    /// webpki cannot parse is recognised by its bytes).
    pub certs: Vec<CertificateDer<'static>>,
}

/// Reads a PEM file of CA certificates; the error is NGINX's wording.
pub fn load_trusted(path: &Path) -> Result<Arc<TrustedCerts>, String> {
    let fail = |why: String| {
        format!(
            "SSL_CTX_load_verify_locations(\"{}\") failed ({why})",
            path.display()
        )
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .and_then(|i| i.collect::<Result<Vec<_>, _>>())
        .map_err(|e| fail(super::pem_error(&e)))?;
    if certs.is_empty() {
        return Err(fail("no certificate found".into()));
    }
    let mut roots = RootCertStore::empty();
    for c in &certs {
        roots.add(c.clone()).map_err(|e| fail(e.to_string()))?;
    }
    Ok(Arc::new(TrustedCerts {
        path: path.display().to_string(),
        roots: Arc::new(roots),
        certs,
    }))
}

/// `grpc_ssl_crl`, read when the configuration loads: certificates the
/// upstream's chain must not hold (checked with `*_ssl_verify on`).
#[derive(Debug)]
pub struct Crls {
    /// The file, for messages.
    pub path: String,
    /// The lists it holds.
    pub lists: Vec<CertificateRevocationListDer<'static>>,
}

/// Reads a PEM file of revocation lists; the error is NGINX's wording.
pub fn load_crls(path: &Path) -> Result<Arc<Crls>, String> {
    let fail = |why: String| {
        format!(
            "X509_LOOKUP_load_file(\"{}\") failed ({why})",
            path.display()
        )
    };
    let lists: Vec<CertificateRevocationListDer<'static>> =
        CertificateRevocationListDer::pem_file_iter(path)
            .and_then(|i| i.collect::<Result<Vec<_>, _>>())
            .map_err(|e| fail(super::pem_error(&e)))?;
    if lists.is_empty() {
        return Err(fail("no certificate or crl found".into()));
    }
    Ok(Arc::new(Crls {
        path: path.display().to_string(),
        lists,
    }))
}

/// The merged `proxy_ssl_*` settings of one location.
#[derive(Debug, Clone)]
pub struct ClientSpec {
    /// `proxy_ssl_verify`.
    pub verify: bool,
    /// `proxy_ssl_trusted_certificate`.
    pub trusted: Option<Arc<TrustedCerts>>,
    /// `grpc_ssl_crl`: revoked certificates.
    pub crls: Option<Arc<Crls>>,
    /// `proxy_ssl_verify_depth`: the most intermediate CAs between the
    /// upstream's certificate and a trusted one.
    pub verify_depth: usize,
    /// `proxy_ssl_server_name`: send the name as SNI.
    pub server_name: bool,
    /// `proxy_ssl_protocols`: TLSv1.2 offered.
    pub tls12: bool,
    /// `proxy_ssl_protocols`: TLSv1.3 offered.
    pub tls13: bool,
    /// `proxy_ssl_ciphers`, resolved (TLS 1.2 suites), as text and suites.
    pub ciphers: Arc<(String, Vec<SupportedCipherSuite>)>,
    /// `proxy_ssl_session_reuse`.
    pub session_reuse: bool,
    /// `proxy_ssl_certificate` and its key, loaded: presented when the
    /// upstream asks for a certificate.
    pub cert: Option<Arc<CertifiedKey>>,
    /// Offer `h2` by ALPN (`grpc_pass grpcs://`, whose upstream speaks
    /// HTTP/2); nothing for `proxy_pass https://` (HTTP/1.x).
    pub alpn_h2: bool,
}

impl ClientSpec {
    fn key(&self) -> String {
        format!(
            "{}|{}|{:?}|{:?}|{:?}|{}|{}|{}|{}|{}|{}",
            self.verify,
            self.verify_depth,
            self.trusted.as_ref().map(|t| Arc::as_ptr(t) as usize),
            self.crls.as_ref().map(|c| Arc::as_ptr(c) as usize),
            self.cert.as_ref().map(|c| Arc::as_ptr(c) as usize),
            self.server_name,
            self.tls12,
            self.tls13,
            self.ciphers.0,
            self.session_reuse,
            self.alpn_h2
        )
    }
}

/// Built configurations by settings. A reload makes new `TrustedCerts`,
/// so old keys go stale: the map is emptied when it grows past this.
const MAX_CONFIGS: usize = 64;

static CONFIGS: Mutex<Option<HashMap<String, Arc<ClientConfig>>>> = Mutex::new(None);

/// The client configuration for `spec`, built once.
pub fn config(spec: &ClientSpec) -> Result<Arc<ClientConfig>, String> {
    let key = spec.key();
    let mut map = CONFIGS.lock().unwrap_or_else(|e| e.into_inner());
    let map = map.get_or_insert_with(HashMap::new);
    if let Some(c) = map.get(&key) {
        return Ok(Arc::clone(c));
    }
    let c = build(spec)?;
    if map.len() >= MAX_CONFIGS {
        map.clear();
    }
    map.insert(key, Arc::clone(&c));
    Ok(c)
}

fn build(spec: &ClientSpec) -> Result<Arc<ClientConfig>, String> {
    let mut provider = super::provider();
    provider.cipher_suites.retain(|c| match c {
        SupportedCipherSuite::Tls13(_) => spec.tls13,
        SupportedCipherSuite::Tls12(_) => spec.tls12 && spec.ciphers.1.contains(c),
    });
    let mut versions = Vec::new();
    if spec.tls13 {
        versions.push(&rustls::version::TLS13);
    }
    if spec.tls12 {
        versions.push(&rustls::version::TLS12);
    }
    let algorithms = provider.signature_verification_algorithms;
    let builder = ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&versions)
        .map_err(|e| format!("SSL_CTX_new() failed ({e})"))?;
    let builder = if spec.verify {
        match &spec.trusted {
            Some(t) => {
                let crls = spec
                    .crls
                    .as_ref()
                    .map_or_else(Vec::new, |c| c.lists.clone());
                let inner = WebPkiServerVerifier::builder_with_provider(
                    Arc::clone(&t.roots),
                    Arc::clone(builder.crypto_provider()),
                )
                .with_crls(crls)
                .build()
                .map_err(|e| {
                    format!("SSL_CTX_load_verify_locations(\"{}\") failed ({e})", t.path)
                })?;
                let depth = spec.verify_depth;
                let verifier = Depth {
                    inner,
                    depth,
                    trusted: Arc::clone(t),
                    algorithms,
                };
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(verifier))
            }
            // Nothing trusted: every handshake fails, as NGINX's.
            None => builder.with_root_certificates(Arc::new(RootCertStore::empty())),
        }
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(algorithms)))
    };
    let mut config = match &spec.cert {
        Some(c) => builder.with_client_cert_resolver(Arc::new(OwnCertificate(Arc::clone(c)))),
        None => builder.with_no_client_auth(),
    };
    config.enable_sni = spec.server_name;
    config.resumption = if spec.session_reuse {
        Resumption::default()
    } else {
        Resumption::disabled()
    };
    // `proxy_pass` upstreams speak HTTP/1.x; gRPC ones HTTP/2.
    config.alpn_protocols = match spec.alpn_h2 {
        true => vec![b"h2".to_vec()],
        false => Vec::new(),
    };
    Ok(Arc::new(config))
}

/// The name a connection checks the certificate against and sends as
/// SNI: `proxy_ssl_name` as rendered, without a port (as NGINX strips
/// it). An IP address is checked against the certificate's IP entries
/// and never sent as SNI.
pub fn server_name(rendered: &str) -> Result<ServerName<'static>, String> {
    let host = match rendered.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(v6),
        None => rendered.rsplit_once(':').map_or(rendered, |(h, _)| h),
    };
    ServerName::try_from(host.to_string())
        .map_err(|_| format!("invalid server name \"{rendered}\" for the upstream's certificate"))
}

/// `proxy_ssl_certificate`: sent whenever the upstream asks, whatever
/// CAs it names (as OpenSSL sends the one certificate it has); rustls
/// still requires the key to sign with a scheme the upstream accepts.
#[derive(Debug)]
struct OwnCertificate(Arc<CertifiedKey>);

impl ResolvesClientCert for OwnCertificate {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        self.0
            .key
            .choose_scheme(sigschemes)
            .is_some()
            .then(|| Arc::clone(&self.0))
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// `proxy_ssl_verify on`: webpki's verdict, then `proxy_ssl_verify_depth`,
/// which webpki does not bound: an upstream that sent more than `depth`
/// intermediates passes only if a path through the first `depth` of them
/// (in the order sent) verifies; else OpenSSL's verdict when it stops
/// building at the depth, "unable to get local issuer certificate".
#[derive(Debug)]
struct Depth {
    inner: Arc<WebPkiServerVerifier>,
    depth: usize,
    /// `proxy_ssl_trusted_certificate`, for what `subject_cn` accepts.
    trusted: Arc<TrustedCerts>,
    /// The handshake's signature check for a certificate webpki cannot
    /// parse.
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Depth {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // OpenSSL's name and v1 rules where webpki has none (`subject_cn`).
        let verify = |i: &[CertificateDer<'_>]| {
            self.inner
                .verify_server_cert(end_entity, i, server_name, ocsp_response, now)
                .or_else(|e| {
                    let trusted = &self.trusted.certs;
                    match super::subject_cn::overrules(&e, end_entity, trusted, server_name, now) {
                        true => Ok(ServerCertVerified::assertion()),
                        false => Err(e),
                    }
                })
        };
        let ok = verify(intermediates)?;
        if intermediates.len() <= self.depth
            || (0..=self.depth).any(|k| verify(&intermediates[..k]).is_ok())
        {
            return Ok(ok);
        }
        Err(rustls::Error::InvalidCertificate(
            rustls::CertificateError::UnknownIssuer,
        ))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner
            .verify_tls12_signature(message, cert, dss)
            .or_else(|e| verify_by_key(e, message, cert, dss, &self.algorithms))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner
            .verify_tls13_signature(message, cert, dss)
            .or_else(|e| verify_by_key(e, message, cert, dss, &self.algorithms))
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// `proxy_ssl_verify off`: any certificate chain and name are accepted,
/// but the handshake's signatures must still be the certificate key's.
#[derive(Debug)]
struct AnyCertificate(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.0)
            .or_else(|e| verify_by_key(e, message, cert, dss, &self.0))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.0)
            .or_else(|e| verify_by_key(e, message, cert, dss, &self.0))
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

/// The handshake signature checked with the public key of a certificate
/// webpki refuses to parse (an X.509 v1 certificate, which OpenSSL accepts
/// and `openssl req -x509` makes): with `proxy_ssl_verify off` NGINX talks
/// to such an upstream, so porter reads the key with x509-parser and tries
/// the signature scheme's algorithms on it. Any other error stands.
pub(super) fn verify_by_key(
    e: rustls::Error,
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
    algs: &WebPkiSupportedAlgorithms,
) -> Result<HandshakeSignatureValid, rustls::Error> {
    use x509_parser::prelude::{FromDer, X509Certificate};
    if !matches!(
        e,
        rustls::Error::InvalidCertificate(rustls::CertificateError::Other(_))
    ) {
        return Err(e);
    }
    let Ok((_, parsed)) = X509Certificate::from_der(cert.as_ref()) else {
        return Err(e);
    };
    let key = parsed
        .tbs_certificate
        .subject_pki
        .subject_public_key
        .data
        .as_ref();
    let fits = algs
        .mapping
        .iter()
        .filter(|(scheme, _)| *scheme == dss.scheme)
        .flat_map(|(_, candidates)| candidates.iter())
        .any(|alg| alg.verify_signature(key, message, dss.signature()).is_ok());
    if fits {
        Ok(HandshakeSignatureValid::assertion())
    } else {
        Err(rustls::Error::InvalidCertificate(
            rustls::CertificateError::BadSignature,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_lose_their_port() {
        assert_eq!(
            server_name("origin.test:8443").unwrap(),
            ServerName::try_from("origin.test").unwrap()
        );
        assert_eq!(
            server_name("127.0.0.1:443").unwrap(),
            ServerName::try_from("127.0.0.1").unwrap()
        );
        assert_eq!(
            server_name("[::1]:443").unwrap(),
            ServerName::try_from("::1").unwrap()
        );
        assert!(server_name("bad name").is_err());
    }

    fn spec(verify: bool) -> ClientSpec {
        ClientSpec {
            verify,
            trusted: None,
            crls: None,
            verify_depth: 1,
            server_name: false,
            tls12: true,
            tls13: true,
            ciphers: Arc::new(("HIGH".into(), crate::tls::ciphers::select("HIGH").unwrap())),
            session_reuse: true,
            cert: None,
            alpn_h2: false,
        }
    }

    #[test]
    fn configs_are_shared_per_settings() {
        let a = config(&spec(false)).unwrap();
        let b = config(&spec(false)).unwrap();
        let c = config(&spec(true)).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert!(!a.enable_sni);
    }

    #[test]
    fn a_missing_ca_file_is_nginx_s_error() {
        let e = load_trusted(Path::new("/nonexistent/ca.pem")).unwrap_err();
        assert!(
            e.starts_with("SSL_CTX_load_verify_locations(\"/nonexistent/ca.pem\") failed"),
            "{e}"
        );
    }
}
