//! TLS-ALPN-01 (RFC 8737): while an authorization is pending, the ACME
//! thread registers, for the name, a self-signed validation certificate
//! carrying the critical `acmeIdentifier` extension (the SHA-256 of the
//! key authorization) and a rustls configuration that serves it with the
//! single ALPN protocol `acme-tls/1`. Every TLS listener's handshake asks
//! [`answer`] once the ClientHello is read: a client offering
//! `acme-tls/1` for a registered name gets this configuration instead of
//! the server block's (as nginx-acme switches the `SSL_CTX` in its
//! ClientHello callback, on any listener, whatever `ssl_verify_client`
//! or `ssl_reject_handshake` say), and the connection is closed after the
//! handshake. Building happens on the ACME thread; a handshake pays one
//! atomic load while nothing is registered.

use std::sync::Arc;

use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::ServerConfig;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::challenge::{Pending, Registered};

/// The ALPN protocol of the validation handshake.
pub const ACME_TLS: &[u8] = b"acme-tls/1";

static CERTS: Pending<Arc<ServerConfig>> = Pending::new();

/// The configuration to answer a ClientHello with: the validation
/// certificate of `server_name`, when the client offers `acme-tls/1` and
/// the name is being validated.
pub fn answer(server_name: Option<&str>, offers_acme_tls: bool) -> Option<Arc<ServerConfig>> {
    if !offers_acme_tls || !CERTS.any() {
        return None;
    }
    CERTS.get(&server_name?.to_ascii_lowercase())
}

/// Serves the validation certificate of `name` for the key
/// authorization whose SHA-256 is `digest` until the result is dropped.
pub fn register(name: &str, digest: &[u8]) -> Result<Registered, String> {
    Ok(CERTS.register(name, validation_config(name, digest)?))
}

/// A rustls configuration serving [`validation_certificate`] for
/// `name`, ALPN `acme-tls/1` only.
fn validation_config(name: &str, digest: &[u8]) -> Result<Arc<ServerConfig>, String> {
    let (cert, key) = validation_certificate(name, digest)?;
    let provider = Arc::new(crate::tls::provider());
    // Not `with_single_cert`: webpki refuses to parse a certificate with
    // a critical extension it does not know, which `acmeIdentifier` is.
    let signer = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| e.to_string())?;
    let served = SingleCertAndKey::from(CertifiedKey::new(vec![cert], signer));
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(served));
    config.alpn_protocols = vec![ACME_TLS.to_vec()];
    Ok(Arc::new(config))
}

/// A new self-signed certificate for `name` (its only SAN) with the
/// critical `acmeIdentifier` extension holding `digest`, and its key.
fn validation_certificate(
    name: &str,
    digest: &[u8],
) -> Result<(CertificateDer<'static>, PrivateKeyDer<'static>), String> {
    let key = rcgen14::KeyPair::generate().map_err(|e| e.to_string())?;
    let mut params =
        rcgen14::CertificateParams::new(vec![name.to_string()]).map_err(|e| e.to_string())?;
    params.distinguished_name = rcgen14::DistinguishedName::new();
    params
        .custom_extensions
        .push(rcgen14::CustomExtension::new_acme_identifier(digest));
    let cert = params.self_signed(&key).map_err(|e| e.to_string())?;
    let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    Ok((CertificateDer::from(cert.der().to_vec()), der))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_validation_certificate_names_the_identifier_and_the_digest_critically() {
        let digest = [7u8; 32];
        let (cert, _) = validation_certificate("a.test", &digest).unwrap();
        let (_, x) = x509_parser::parse_x509_certificate(&cert).unwrap();
        let ext = x
            .iter_extensions()
            .find(|e| e.oid.to_id_string() == "1.3.6.1.5.5.7.1.31")
            .expect("acmeIdentifier");
        assert!(ext.critical);
        // An OCTET STRING (0x04) of 32 bytes: the digest.
        assert_eq!(&ext.value[..2], &[0x04, 32]);
        assert_eq!(&ext.value[2..], &digest);
        let san = x.subject_alternative_name().unwrap().unwrap();
        assert_eq!(
            format!("{:?}", san.value.general_names),
            "[DNSName(\"a.test\")]"
        );
    }

    #[test]
    fn only_a_registered_name_offered_acme_tls_is_answered() {
        let r = register("alpn.test", &[1u8; 32]).unwrap();
        let config = answer(Some("ALPN.test"), true).expect("registered");
        assert_eq!(config.alpn_protocols, vec![ACME_TLS.to_vec()]);
        assert!(answer(Some("alpn.test"), false).is_none());
        assert!(answer(Some("other.test"), true).is_none());
        assert!(answer(None, true).is_none());
        drop(r);
        assert!(answer(Some("alpn.test"), true).is_none());
    }
}
