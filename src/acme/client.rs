//! The ACME protocol for one certificate, over `instant-acme`: the
//! account (an existing key, or a new one registered with the issuer's
//! contacts and terms), then an order for the names, each pending
//! authorization proven by HTTP-01 or TLS-ALPN-01 (the token or the
//! validation certificate is served by the workers while the issuer
//! validates), finalization with a CSR for a key made
//! here, and the chain's download. Every wait here is on the ACME
//! thread's runtime.

use std::time::Duration;

use bytes::Bytes;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;
use instant_acme::{
    Account, AuthorizationStatus, BodyWrapper, CertificateIdentifier, ChallengeType,
    ExternalAccountKey, Identifier, NewAccount, NewOrder, OrderStatus, RetryPolicy,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

use super::{challenge, tls_alpn, AccountKey, Certificate, ChallengeKind, Issuer, KeyKind};

/// How long the issuer may take to validate or to sign before the
/// attempt counts as failed (and is retried after the backoff).
const ORDER_TIMEOUT: Duration = Duration::from_secs(120);

/// A failed step: what was being done and the issuer's (or the
/// network's) reason.
#[derive(Debug)]
pub struct AcmeError {
    /// What porter was doing (`new order`, `finalize`, …).
    pub step: &'static str,
    /// Why it failed.
    pub reason: String,
    /// The issuer said `rateLimited`: wait longer before the next try.
    pub rate_limited: bool,
}

impl std::fmt::Display for AcmeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} failed ({})", self.step, self.reason)
    }
}

fn fail(step: &'static str) -> impl FnOnce(instant_acme::Error) -> AcmeError {
    move |e| AcmeError {
        step,
        rate_limited: matches!(&e, instant_acme::Error::Api(p)
            if p.r#type.as_deref() == Some("urn:ietf:params:acme:error:rateLimited")),
        reason: e.to_string(),
    }
}

fn other(step: &'static str, reason: impl std::fmt::Display) -> AcmeError {
    AcmeError {
        step,
        reason: reason.to_string(),
        rate_limited: false,
    }
}

/// The HTTPS client for the issuer's directory (its `ssl_*` settings).
fn http(issuer: &Issuer) -> Box<dyn instant_acme::HttpClient> {
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config((*issuer.tls).clone())
        .https_only()
        .enable_http1()
        .build();
    Box::new(HyperClient::builder(TokioExecutor::new()).build::<_, BodyWrapper<Bytes>>(connector))
}

/// The issuer's account: from the kept key (`account_key`, or the state
/// path's), else a new registration whose key is returned as PEM to be
/// kept. With `external_account_key` a kept key is only looked up
/// (instant-acme binds an external account only to a key it makes): an
/// issuer that does not know it gets a new account bound to the external
/// one, unless the key is the configured `account_key` file.
pub async fn account(
    issuer: &Issuer,
    key_pem: Option<&[u8]>,
) -> Result<(Account, Option<String>), AcmeError> {
    if let Some(pem) = key_pem {
        let der = PrivatePkcs8KeyDer::from_pem_slice(pem)
            .map_err(|e| other("account key", format!("not a PKCS#8 PEM key: {e:?}")))?;
        let key =
            instant_acme::Key::from_pkcs8_der(der.clone_key()).map_err(fail("account key"))?;
        let builder = Account::builder_with_http(http(issuer));
        let key = (key, PrivateKeyDer::Pkcs8(der));
        let found = match issuer.external_account {
            None => builder.create_from_key(key, issuer.uri.clone()).await,
            Some(_) => builder.from_key(key, issuer.uri.clone()).await,
        };
        match found {
            Ok((account, _)) => return Ok((account, None)),
            Err(instant_acme::Error::Api(p))
                if issuer.external_account.is_some()
                    && p.r#type.as_deref()
                        == Some("urn:ietf:params:acme:error:accountDoesNotExist") =>
            {
                if let AccountKey::File(f) = &issuer.account_key {
                    return Err(other(
                        "account",
                        format!(
                            "the issuer has no account for the key \"{}\", and porter binds an \
                             external account only to a key it makes: remove \"account_key\"",
                            f.display()
                        ),
                    ));
                }
            }
            Err(e) => return Err(fail("account")(e)),
        }
    }
    let contacts: Vec<&str> = issuer.contacts.iter().map(String::as_str).collect();
    let new = NewAccount {
        contact: &contacts,
        terms_of_service_agreed: issuer.accept_tos,
        only_return_existing: false,
    };
    let eab = issuer
        .external_account
        .as_ref()
        .map(|e| ExternalAccountKey::new(e.kid.clone(), &e.mac));
    let (account, creds) = Account::builder_with_http(http(issuer))
        .create(&new, issuer.uri.clone(), eab.as_ref())
        .await
        .map_err(fail("new account"))?;
    let pem = rcgen14::KeyPair::try_from(creds.private_key())
        .map_err(|e| other("new account", e))?
        .serialize_pem();
    Ok((account, Some(pem)))
}

/// Orders `cert`'s names, proves each by the issuer's challenge, finalizes and
/// downloads: the chain and its key, both PEM;
/// `replaces` names the certificate this one renews (ARI).
pub async fn issue(
    account: &Account,
    cert: &Certificate,
    replaces: Option<CertificateIdentifier<'static>>,
) -> Result<(String, String), AcmeError> {
    let ids: Vec<Identifier> = cert.names.iter().cloned().map(Identifier::Dns).collect();
    let mut new = NewOrder::new(&ids);
    if let Some(r) = replaces {
        new = new.replaces(r);
    }
    let mut order = account.new_order(&new).await.map_err(fail("new order"))?;
    let mut tokens = Vec::new();
    let mut authzs = order.authorizations();
    while let Some(a) = authzs.next().await {
        let mut a = a.map_err(fail("authorization"))?;
        match a.status {
            AuthorizationStatus::Valid => continue,
            AuthorizationStatus::Pending => {}
            s => return Err(other("authorization", format!("status {s:?}"))),
        }
        let name = match &a.identifier().identifier {
            Identifier::Dns(n) => n.clone(),
            i => {
                return Err(other(
                    "authorization",
                    format!("unexpected identifier {i:?}"),
                ))
            }
        };
        let kind = cert.issuer.challenge;
        let wanted = match kind {
            ChallengeKind::Http01 => ChallengeType::Http01,
            ChallengeKind::TlsAlpn01 => ChallengeType::TlsAlpn01,
        };
        let mut ch = a.challenge(wanted).ok_or_else(|| {
            other(
                "authorization",
                format!("the issuer offers no {} challenge", kind.name()),
            )
        })?;
        let key_authorization = ch.key_authorization();
        tokens.push(match kind {
            ChallengeKind::Http01 => challenge::register(&ch.token, key_authorization.as_str()),
            ChallengeKind::TlsAlpn01 => {
                tls_alpn::register(&name, key_authorization.digest().as_ref())
                    .map_err(|e| other("validation certificate", e))?
            }
        });
        ch.set_ready().await.map_err(fail("challenge"))?;
    }
    let retries = RetryPolicy::new().timeout(ORDER_TIMEOUT);
    let status = order
        .poll_ready(&retries)
        .await
        .map_err(fail("validation"))?;
    drop(tokens);
    if status != OrderStatus::Ready {
        return Err(other("validation", invalid_reason(&mut order).await));
    }
    let (names, kind) = (cert.names.clone(), cert.key);
    let (csr, key_pem) = tokio::task::spawn_blocking(move || csr(&names, kind))
        .await
        .map_err(|e| other("CSR", e))?
        .map_err(|e| other("CSR", e))?;
    order.finalize_csr(&csr).await.map_err(fail("finalize"))?;
    let chain = order
        .poll_certificate(&retries)
        .await
        .map_err(fail("certificate download"))?;
    Ok((chain, key_pem))
}

/// Why an order is invalid: the failed challenges' problems.
async fn invalid_reason(order: &mut instant_acme::Order) -> String {
    let mut why = Vec::new();
    let mut authzs = order.authorizations();
    while let Some(Ok(a)) = authzs.next().await {
        for c in &a.challenges {
            if let Some(p) = &c.error {
                why.push(format!("{}: {p}", a.identifier()));
            }
        }
    }
    match why.is_empty() {
        true => "the order is invalid".into(),
        false => why.join("; "),
    }
}

/// A new key of `kind` and a CSR for `names` signed by it (DER, and the
/// key as PEM). RSA keys take seconds to make: the caller runs this on a
/// blocking thread.
pub fn csr(names: &[String], kind: KeyKind) -> Result<(Vec<u8>, String), String> {
    let key = new_key(kind)?;
    let mut params = rcgen14::CertificateParams::new(names.to_vec()).map_err(|e| e.to_string())?;
    params.distinguished_name = rcgen14::DistinguishedName::new();
    let csr = params.serialize_request(&key).map_err(|e| e.to_string())?;
    Ok((csr.der().to_vec(), key.serialize_pem()))
}

/// A new private key of `kind`: ECDSA by ring (through rcgen), RSA by
/// the `rsa` crate (ring cannot generate RSA keys; it signs with them).
fn new_key(kind: KeyKind) -> Result<rcgen14::KeyPair, String> {
    let bits = match kind {
        KeyKind::EcdsaP256 => {
            return rcgen14::KeyPair::generate_for(&rcgen14::PKCS_ECDSA_P256_SHA256)
                .map_err(|e| e.to_string())
        }
        KeyKind::EcdsaP384 => {
            return rcgen14::KeyPair::generate_for(&rcgen14::PKCS_ECDSA_P384_SHA384)
                .map_err(|e| e.to_string())
        }
        KeyKind::Rsa2048 => 2048,
        KeyKind::Rsa3072 => 3072,
        KeyKind::Rsa4096 => 4096,
    };
    use rsa::pkcs8::EncodePrivateKey;
    let key = rsa::RsaPrivateKey::new(&mut rsa::rand_core::OsRng, bits)
        .map_err(|e| format!("RSA key generation failed ({e})"))?;
    let der = key
        .to_pkcs8_der()
        .map_err(|e| format!("RSA key encoding failed ({e})"))?;
    let der = rustls_pki_types::PrivatePkcs8KeyDer::from(der.as_bytes());
    rcgen14::KeyPair::from_pkcs8_der_and_sign_algo(&der, &rcgen14::PKCS_RSA_SHA256)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    use x509_parser::prelude::FromDer;

    #[test]
    fn an_rsa_key_of_the_size_asked_signs_the_csr() {
        let (csr, key_pem) = csr(&["a.test".into()], KeyKind::Rsa2048).unwrap();
        assert!(key_pem.contains("BEGIN PRIVATE KEY"), "{key_pem}");
        let (_, req) =
            x509_parser::certification_request::X509CertificationRequest::from_der(&csr).unwrap();
        let spki = &req.certification_request_info.subject_pki;
        assert_eq!(
            spki.algorithm.algorithm.to_id_string(),
            "1.2.840.113549.1.1.1"
        );
        match spki.parsed().unwrap() {
            x509_parser::public_key::PublicKey::RSA(k) => assert_eq!(k.key_size(), 2048),
            k => panic!("{k:?}"),
        }
        // sha256WithRSAEncryption: signed by the RSA key (ring signs).
        assert_eq!(
            req.signature_algorithm.algorithm.to_id_string(),
            "1.2.840.113549.1.1.11"
        );
    }
}
