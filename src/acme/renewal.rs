//! When to renew a certificate. With ACME Renewal Information (RFC 9773,
//! ARI) where the issuer's directory offers `renewalInfo`: a point
//! spread over the issuer's suggested window, checked again every six
//! hours (the window may move, for a revocation), and the new order
//! names the certificate it `replaces`. Without it: two thirds into the
//! certificate's lifetime ([`Installed::renew_at`]).

use std::time::{Duration, SystemTime};

use instant_acme::{Account, CertificateIdentifier};
use rustls_pki_types::Der;
use x509_parser::extensions::ParsedExtension;

use super::slot::Installed;

/// How often an ARI window is asked again while waiting for it.
const ARI_RECHECK: Duration = Duration::from_secs(6 * 3600);

/// The plan for one certificate.
pub struct Renewal {
    /// When to order the next certificate.
    pub at: SystemTime,
    /// Ask again after this long (ARI), instead of waiting for `at`.
    pub recheck: Option<Duration>,
    /// The certificate being replaced, for the new order (ARI).
    pub replaces: Option<CertificateIdentifier<'static>>,
    /// Where `at` came from, for the log.
    pub source: &'static str,
}

/// The renewal plan of `current`, asking the issuer (through `account`)
/// for its window when it can.
pub async fn plan(account: Option<&Account>, current: &Installed) -> Renewal {
    let fallback = Renewal {
        at: current.renew_at(),
        recheck: None,
        replaces: None,
        source: "two thirds of its lifetime",
    };
    let (Some(account), Some(id)) = (account, ari_id(current)) else {
        return fallback;
    };
    let Ok((info, retry_after)) = account.renewal_info(&id).await else {
        return fallback;
    };
    let start = SystemTime::from(info.suggested_window.start);
    let end = SystemTime::from(info.suggested_window.end);
    let span = end.duration_since(start).unwrap_or(Duration::ZERO);
    // Spread over the window (RFC 9773 §4.2) so that many servers do not
    // ask at its first second.
    let spread = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos()) as f64
        / 1e9;
    Renewal {
        at: start + span.mul_f64(spread),
        recheck: Some(retry_after.clamp(Duration::from_secs(60), ARI_RECHECK)),
        replaces: Some(id),
        source: "the issuer's renewal window (ARI)",
    }
}

/// The ARI identifier of the served leaf: its authority key identifier
/// and its serial number, as RFC 9773 §4.1 builds it.
pub fn ari_id(current: &Installed) -> Option<CertificateIdentifier<'static>> {
    let leaf = current.key.cert.first()?;
    let (_, cert) = x509_parser::parse_x509_certificate(leaf).ok()?;
    let aki = cert
        .iter_extensions()
        .find_map(|e| match e.parsed_extension() {
            ParsedExtension::AuthorityKeyIdentifier(a) => a.key_identifier.as_ref().map(|k| k.0),
            _ => None,
        })?;
    let serial = cert.tbs_certificate.raw_serial();
    Some(CertificateIdentifier::new(Der::from_slice(aki), Der::from_slice(serial)).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ari_id_is_the_authority_key_id_and_serial_in_base64url() {
        let ca_key = rcgen14::KeyPair::generate().unwrap();
        let mut ca = rcgen14::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen14::IsCa::Ca(rcgen14::BasicConstraints::Unconstrained);
        ca.key_identifier_method = rcgen14::KeyIdMethod::PreSpecified(vec![0xAB; 20]);
        let issuer = rcgen14::Issuer::new(ca, &ca_key);
        let key = rcgen14::KeyPair::generate().unwrap();
        let mut leaf = rcgen14::CertificateParams::new(vec!["a.test".into()]).unwrap();
        leaf.use_authority_key_identifier_extension = true;
        leaf.serial_number = Some(vec![0x01, 0x02, 0x03].into());
        let cert = leaf.signed_by(&key, &issuer).unwrap();
        let installed = Installed::from_pem(&cert.pem(), &key.serialize_pem()).unwrap();
        let id = ari_id(&installed).unwrap();
        // base64url(0xAB × 20) and base64url(01 02 03).
        assert_eq!(id.authority_key_identifier, "q6urq6urq6urq6urq6urq6urq6s");
        assert_eq!(id.serial, "AQID");
    }
}
