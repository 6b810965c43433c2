//! An upstream's certificate judged where OpenSSL (NGINX's
//! `proxy_ssl_verify on`) accepts what webpki refuses, for `tls::client`'s
//! verifier: a certificate without a DNS subjectAltName is matched by its
//! subject's common name (OpenSSL's `X509_check_host`; webpki reads
//! subjectAltName only), and an X.509 v1 certificate (`openssl req -x509`
//! without extensions, which webpki cannot parse) is trusted when it is
//! itself one of `proxy_ssl_trusted_certificate`'s, as OpenSSL takes a
//! self-signed trusted certificate for its own issuer (a client's too, for
//! `ssl_verify_client`: `tls::client_auth`). Written by hand:
//! webpki has no option for either, and these few rules are OpenSSL's.

use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::CertificateError;
use x509_parser::prelude::{FromDer, X509Certificate};
use x509_parser::time::ASN1Time;

/// Whether webpki's refusal `err` of `end_entity` for `name` is one
/// OpenSSL would not make: the chain is good (webpki checks the name
/// last) or the certificate is a trusted one webpki cannot parse, and
/// the name is the subject's common name of a certificate that has no
/// DNS subjectAltName.
pub fn overrules(
    err: &rustls::Error,
    end_entity: &CertificateDer<'_>,
    trusted: &[CertificateDer<'static>],
    name: &ServerName<'_>,
    now: UnixTime,
) -> bool {
    let rustls::Error::InvalidCertificate(c) = err else {
        return false;
    };
    // (The time is webpki's to check, or `trusted_itself`'s.)
    let chain_good = matches!(
        c,
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. }
    ) || trusted_itself(err, end_entity, trusted, now);
    let ServerName::DnsName(dns) = name else {
        return false;
    };
    let Ok((_, cert)) = X509Certificate::from_der(end_entity.as_ref()) else {
        return false;
    };
    chain_good && !has_dns_names(&cert) && cn_matches(&cert, dns.as_ref())
}

/// Whether `end_entity`, which webpki refused to read (`err`: an X.509
/// v1 certificate), is one of the `trusted` certificates, byte for byte,
/// and valid at `now`: OpenSSL finds a self-signed trusted certificate
/// its own issuer (an upstream's, or a client's for `ssl_verify_client`).
pub fn trusted_itself(
    err: &rustls::Error,
    end_entity: &CertificateDer<'_>,
    trusted: &[CertificateDer<'static>],
    now: UnixTime,
) -> bool {
    let unreadable = matches!(
        err,
        rustls::Error::InvalidCertificate(
            CertificateError::BadEncoding | CertificateError::Other(_)
        )
    );
    if !unreadable || !trusted.iter().any(|t| t.as_ref() == end_entity.as_ref()) {
        return false;
    }
    let Ok((_, cert)) = X509Certificate::from_der(end_entity.as_ref()) else {
        return false;
    };
    ASN1Time::from_timestamp(now.as_secs() as i64).is_ok_and(|t| cert.validity().is_valid_at(t))
}

/// Whether the certificate names any host in a subjectAltName (then its
/// common name is not read, as OpenSSL).
fn has_dns_names(cert: &X509Certificate<'_>) -> bool {
    use x509_parser::extensions::GeneralName;
    match cert.subject_alternative_name() {
        Ok(Some(san)) => san
            .value
            .general_names
            .iter()
            .any(|g| matches!(g, GeneralName::DNSName(_))),
        Ok(None) => false,
        // A malformed extension: nothing is taken from the subject.
        Err(_) => true,
    }
}

/// Whether one of the subject's common names matches `host`: equal but
/// for case, or a `*` leftmost label standing for one label.
fn cn_matches(cert: &X509Certificate<'_>, host: &str) -> bool {
    cert.subject()
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok())
        .any(|cn| host_matches(cn, host))
}

fn host_matches(pattern: &str, host: &str) -> bool {
    if pattern.eq_ignore_ascii_case(host) {
        return true;
    }
    let (Some(rest), Some((label, host_rest))) = (pattern.strip_prefix("*."), host.split_once('.'))
    else {
        return false;
    };
    // `*.com` is too wide (OpenSSL wants two labels after the wildcard).
    !label.is_empty() && rest.contains('.') && rest.eq_ignore_ascii_case(host_rest)
}

#[cfg(test)]
mod tests {
    use super::host_matches;

    #[test]
    fn common_names_match_as_openssl_s() {
        assert!(host_matches("2.example.com", "2.Example.com"));
        assert!(!host_matches("2.example.com", "bad.example.com"));
        assert!(host_matches("*.example.com", "foo.example.com"));
        assert!(!host_matches("*.example.com", "a.foo.example.com"));
        assert!(!host_matches("*.com", "example.com"));
    }
}
