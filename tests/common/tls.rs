//! TLS helpers for integration tests: certificates made in the test with
//! rcgen (a CA, leaf certificates for names, ECDSA P-256 or the RSA key in
//! `tests/common/rsa2048.key`), and a rustls client that speaks HTTP/1.1
//! to porter or nginx and reports what the handshake settled.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme};

use super::{find, Resp};

/// The RSA key the tests use (generating RSA keys is slow and rcgen's ring
/// backend cannot).
pub const RSA_KEY: &str = include_str!("rsa2048.key");

/// Key types for leaf certificates.
#[derive(Clone, Copy, Debug)]
pub enum Alg {
    /// ECDSA P-256.
    Ecdsa,
    /// RSA 2048.
    Rsa,
}

/// A test CA.
pub struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

/// A leaf certificate and key, as PEM and DER.
pub struct Leaf {
    /// Certificate PEM.
    pub cert_pem: String,
    /// Key PEM.
    pub key_pem: String,
    /// Certificate DER (to compare with what a client saw).
    pub der: Vec<u8>,
}

impl Ca {
    /// A fresh CA.
    pub fn new() -> Ca {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name
            .push(DnType::CommonName, "porter test CA");
        let cert = p.self_signed(&key).unwrap();
        Ca { cert, key }
    }

    /// The CA certificate, PEM.
    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    /// The CA certificate, DER.
    pub fn der(&self) -> CertificateDer<'static> {
        self.cert.der().clone()
    }

    /// A leaf for `names`, signed by this CA.
    pub fn leaf(&self, names: &[&str], alg: Alg) -> Leaf {
        let key = match alg {
            Alg::Ecdsa => KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap(),
            Alg::Rsa => KeyPair::from_pem_and_sign_algo(RSA_KEY, &rcgen::PKCS_RSA_SHA256).unwrap(),
        };
        let mut p = CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .unwrap();
        p.distinguished_name.push(DnType::CommonName, names[0]);
        let cert = p.signed_by(&key, &self.cert, &self.key).unwrap();
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().to_vec(),
        }
    }
}

impl Ca {
    /// A leaf made from `params` (subject, serial, validity as the test
    /// wants them) with a fresh ECDSA P-256 key, signed by this CA.
    pub fn leaf_from(&self, params: CertificateParams) -> Leaf {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().to_vec(),
        }
    }
}

impl Ca {
    /// A revocation list (PEM) of this CA revoking the certificates with
    /// these serial numbers.
    pub fn crl(&self, serials: &[u64]) -> String {
        let revoked = serials
            .iter()
            .map(|n| rcgen::RevokedCertParams {
                serial_number: rcgen::SerialNumber::from(*n),
                revocation_time: rcgen::date_time_ymd(2024, 1, 1),
                reason_code: Some(rcgen::RevocationReason::KeyCompromise),
                invalidity_date: None,
            })
            .collect();
        let p = rcgen::CertificateRevocationListParams {
            this_update: rcgen::date_time_ymd(2024, 1, 1),
            next_update: rcgen::date_time_ymd(2099, 1, 1),
            crl_number: rcgen::SerialNumber::from(1u64),
            issuing_distribution_point: None,
            revoked_certs: revoked,
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        };
        p.signed_by(&self.cert, &self.key).unwrap().pem().unwrap()
    }

    /// An intermediate CA signed by this one.
    pub fn intermediate(&self, name: &str) -> Ca {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        let cert = p.signed_by(&key, &self.cert, &self.key).unwrap();
        Ca { cert, key }
    }
}

/// A client trusting `ca` that presents `chain` (leaf first) with the
/// key `key_pem`.
pub fn client_with_chain(ca: &Ca, chain: &[Vec<u8>], key_pem: &str) -> Arc<ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der()).unwrap();
    let chain = chain
        .iter()
        .map(|c| CertificateDer::from(c.clone()))
        .collect();
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).unwrap();
    let cfg =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .unwrap();
    Arc::new(cfg)
}

/// A client trusting `ca`, offering only `versions`, that presents `cert`.
pub fn client_with_cert_versions(
    ca: &Ca,
    cert: &Leaf,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Arc<ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der()).unwrap();
    let chain = vec![CertificateDer::from(cert.der.clone())];
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(cert.key_pem.as_bytes()).unwrap();
    let cfg =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(versions)
            .unwrap()
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .unwrap();
    Arc::new(cfg)
}

impl Leaf {
    /// Writes `NAME.crt` and `NAME.key` into `dir`; returns their paths.
    pub fn write(&self, dir: &Path, name: &str) -> (PathBuf, PathBuf) {
        let c = dir.join(format!("{name}.crt"));
        let k = dir.join(format!("{name}.key"));
        std::fs::write(&c, &self.cert_pem).unwrap();
        std::fs::write(&k, &self.key_pem).unwrap();
        (c, k)
    }
}

/// A verifier that checks the chain with webpki but offers only
/// `schemes` as signature algorithms (to see which certificate the
/// server picks for a client that can verify only RSA, say).
#[derive(Debug)]
struct OnlySchemes {
    inner: Arc<dyn ServerCertVerifier>,
    schemes: Vec<SignatureScheme>,
}

impl ServerCertVerifier for OnlySchemes {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.schemes.clone()
    }
}

/// Client settings.
pub struct ClientOpts {
    /// Offered versions.
    pub versions: Vec<&'static rustls::SupportedProtocolVersion>,
    /// Offer only these signature schemes (`None`: rustls's default).
    pub schemes: Option<Vec<SignatureScheme>>,
}

impl Default for ClientOpts {
    fn default() -> Self {
        ClientOpts {
            versions: vec![&rustls::version::TLS13, &rustls::version::TLS12],
            schemes: None,
        }
    }
}

/// A client configuration trusting `ca` (it keeps sessions for resumption).
pub fn client(ca: &Ca, opts: ClientOpts) -> Arc<ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der()).unwrap();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&opts.versions)
        .unwrap();
    let cfg = match opts.schemes {
        None => builder.with_root_certificates(roots).with_no_client_auth(),
        Some(schemes) => {
            let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .unwrap();
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(OnlySchemes { inner, schemes }))
                .with_no_client_auth()
        }
    };
    Arc::new(cfg)
}

/// One TLS connection to 127.0.0.1:`port` with SNI `sni`.
pub struct Conn {
    /// The stream.
    pub tls: rustls::StreamOwned<ClientConnection, TcpStream>,
    buf: Vec<u8>,
}

impl Conn {
    /// Connects and completes the handshake (`Err`: the handshake failed).
    pub fn open(port: u16, cfg: &Arc<ClientConfig>, sni: &str) -> Result<Conn, std::io::Error> {
        let tcp = TcpStream::connect(("127.0.0.1", port))?;
        tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
        let name = ServerName::try_from(sni.to_string()).unwrap();
        let conn = ClientConnection::new(cfg.clone(), name).unwrap();
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        while tls.conn.is_handshaking() {
            tls.conn.complete_io(&mut tls.sock)?;
        }
        Ok(Conn {
            tls,
            buf: Vec::new(),
        })
    }

    /// The server's end-entity certificate.
    pub fn peer_cert(&self) -> Vec<u8> {
        self.tls.conn.peer_certificates().unwrap()[0].to_vec()
    }

    /// Whether the session was resumed.
    pub fn resumed(&self) -> bool {
        self.tls.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed)
    }

    /// Sends `req` and reads one response (`head_only` for HEAD).
    pub fn request(&mut self, req: &str, head_only: bool) -> Option<Resp> {
        self.tls.write_all(req.as_bytes()).ok()?;
        self.tls.flush().ok()?;
        let end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i + 4;
            }
            self.fill()?;
        };
        let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
        self.buf.drain(..end);
        let mut lines = head.split("\r\n");
        let status_line = lines.next()?.to_string();
        let headers: Vec<(String, String)> = lines
            .filter(|l| !l.is_empty())
            .filter_map(|l| l.split_once(": ").map(|(a, b)| (a.into(), b.into())))
            .collect();
        let status: u16 = status_line.split(' ').nth(1)?.parse().ok()?;
        let len = super::header_in(&headers, "content-length").and_then(|v| v.parse().ok());
        let body = if head_only || status == 304 {
            Vec::new()
        } else if let Some(len) = len {
            while self.buf.len() < len {
                self.fill()?;
            }
            self.buf.drain(..len).collect()
        } else {
            while self.fill().is_some() {}
            std::mem::take(&mut self.buf)
        };
        Some(Resp {
            status,
            status_line,
            headers,
            body,
        })
    }

    fn fill(&mut self) -> Option<()> {
        let mut tmp = vec![0u8; 65536];
        // EINTR is retried, as in `common::fill`.
        let r = loop {
            match self.tls.read(&mut tmp) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => break r,
            }
        };
        match r {
            Ok(0) | Err(_) => None,
            Ok(n) => {
                self.buf.extend_from_slice(&tmp[..n]);
                Some(())
            }
        }
    }
}

/// GET `path` with Host `host` on a new connection (SNI `host`).
pub fn get(port: u16, cfg: &Arc<ClientConfig>, host: &str, path: &str) -> Resp {
    let mut c = Conn::open(port, cfg, host).expect("handshake");
    c.request(
        &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
        false,
    )
    .expect("response")
}

/// A client trusting `ca` that presents `cert` (mutual TLS).
pub fn client_with_cert(ca: &Ca, cert: &Leaf) -> Arc<ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der()).unwrap();
    let chain = vec![CertificateDer::from(cert.der.clone())];
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(cert.key_pem.as_bytes()).unwrap();
    let cfg =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .unwrap();
    Arc::new(cfg)
}
