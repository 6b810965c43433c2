//! `ssl_ciphers`: an OpenSSL cipher string (`HIGH:!aNULL:!MD5`,
//! `ECDHE+AESGCM:ECDHE+CHACHA20`, a list of suite names) mapped onto the
//! TLS 1.2 suites rustls offers, with OpenSSL's operators (`!` removes for
//! good, `-` removes, `+` moves to the end, `A+B` is both). As with NGINX
//! on OpenSSL, the string governs TLS 1.2 only; TLS 1.3's three suites are
//! always offered. Hand-written because no crate maps OpenSSL's names:
//! the table below is OpenSSL 3's list, so a name OpenSSL knows but rustls
//! does not implement (CBC, DHE, PSK, CAMELLIA...) selects nothing, and a
//! name OpenSSL does not know is refused (OpenSSL would skip it silently).

use rustls::crypto::ring::cipher_suite as cs;
use rustls::{CipherSuite, SupportedCipherSuite};

/// The TLS 1.2 suites rustls offers, in OpenSSL's `HIGH` order, with
/// their OpenSSL name and the aliases that select them.
const OFFERED: [(&str, &[&str]); 6] = [
    (
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        &["aECDSA", "ECDSA", "AESGCM", "AES", "AES256", "SHA384"],
    ),
    (
        "ECDHE-RSA-AES256-GCM-SHA384",
        &["aRSA", "AESGCM", "AES", "AES256", "SHA384"],
    ),
    (
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        &["aECDSA", "ECDSA", "CHACHA20", "SHA256"],
    ),
    (
        "ECDHE-RSA-CHACHA20-POLY1305",
        &["aRSA", "CHACHA20", "SHA256"],
    ),
    (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        &["aECDSA", "ECDSA", "AESGCM", "AES", "AES128", "SHA256"],
    ),
    (
        "ECDHE-RSA-AES128-GCM-SHA256",
        &["aRSA", "AESGCM", "AES", "AES128", "SHA256"],
    ),
];

/// Aliases every offered suite has.
const COMMON: &[&str] = &[
    "ALL", "DEFAULT", "HIGH", "ECDHE", "EECDH", "kECDHE", "kEECDH", "ECDH", "TLSv1.2", "SSLv3",
    "AEAD",
];

/// OpenSSL keywords that select none of the offered suites.
const NONE_OFFERED: &str = "aNULL eNULL NULL COMPLEMENTOFALL COMPLEMENTOFDEFAULT LOW MEDIUM \
    EXPORT EXP EXPORT40 EXPORT56 MD5 SHA1 SHA RC4 RC2 DES 3DES IDEA SEED CAMELLIA CAMELLIA128 \
    CAMELLIA256 ARIA ARIA128 ARIA256 ARIAGCM AESCCM AESCCM8 CCM CCM8 CBC PSK kPSK aPSK kRSAPSK \
    kDHEPSK kECDHEPSK SRP kSRP aSRP DSS aDSS DH DHE EDH kDHE kEDH kDH kDHr kDHd ADH AECDH \
    aECDH kRSA RSA aGOST aGOST01 kGOST GOST94 GOST89MAC SUITEB128 SUITEB128ONLY SUITEB192 \
    TLSv1 TLSv1.0 SSLv2 ECCdraft CHACHA20-POLY1305 \
    DES-CBC3-SHA ECDHE-RSA-DES-CBC3-SHA ECDHE-ECDSA-DES-CBC3-SHA EDH-RSA-DES-CBC3-SHA \
    EDH-DSS-DES-CBC3-SHA DHE-RSA-DES-CBC3-SHA RC4-SHA RC4-MD5 ECDHE-RSA-RC4-SHA \
    ECDHE-ECDSA-RC4-SHA EDH-RSA-DES-CBC-SHA DES-CBC-SHA IDEA-CBC-SHA SEED-SHA DHE-RSA-SEED-SHA \
    EXP-RC4-MD5 EXP-DES-CBC-SHA \
    ECDHE-ECDSA-AES256-GCM-SHA384 ECDHE-RSA-AES256-GCM-SHA384 \
    DHE-DSS-AES256-GCM-SHA384 DHE-RSA-AES256-GCM-SHA384 ECDHE-ECDSA-CHACHA20-POLY1305 \
    ECDHE-RSA-CHACHA20-POLY1305 DHE-RSA-CHACHA20-POLY1305 ECDHE-ECDSA-AES256-CCM8 \
    ECDHE-ECDSA-AES256-CCM DHE-RSA-AES256-CCM8 DHE-RSA-AES256-CCM \
    ECDHE-ECDSA-ARIA256-GCM-SHA384 ECDHE-ARIA256-GCM-SHA384 DHE-DSS-ARIA256-GCM-SHA384 \
    DHE-RSA-ARIA256-GCM-SHA384 ADH-AES256-GCM-SHA384 ECDHE-ECDSA-AES128-GCM-SHA256 \
    ECDHE-RSA-AES128-GCM-SHA256 DHE-DSS-AES128-GCM-SHA256 DHE-RSA-AES128-GCM-SHA256 \
    ECDHE-ECDSA-AES128-CCM8 ECDHE-ECDSA-AES128-CCM DHE-RSA-AES128-CCM8 \
    DHE-RSA-AES128-CCM ECDHE-ECDSA-ARIA128-GCM-SHA256 ECDHE-ARIA128-GCM-SHA256 \
    DHE-DSS-ARIA128-GCM-SHA256 DHE-RSA-ARIA128-GCM-SHA256 ADH-AES128-GCM-SHA256 \
    ECDHE-ECDSA-AES256-SHA384 ECDHE-RSA-AES256-SHA384 DHE-RSA-AES256-SHA256 \
    DHE-DSS-AES256-SHA256 ECDHE-ECDSA-CAMELLIA256-SHA384 ECDHE-RSA-CAMELLIA256-SHA384 \
    DHE-RSA-CAMELLIA256-SHA256 DHE-DSS-CAMELLIA256-SHA256 ADH-AES256-SHA256 \
    ADH-CAMELLIA256-SHA256 ECDHE-ECDSA-AES128-SHA256 ECDHE-RSA-AES128-SHA256 \
    DHE-RSA-AES128-SHA256 DHE-DSS-AES128-SHA256 ECDHE-ECDSA-CAMELLIA128-SHA256 \
    ECDHE-RSA-CAMELLIA128-SHA256 DHE-RSA-CAMELLIA128-SHA256 DHE-DSS-CAMELLIA128-SHA256 \
    ADH-AES128-SHA256 ADH-CAMELLIA128-SHA256 ECDHE-ECDSA-AES256-SHA ECDHE-RSA-AES256-SHA \
    DHE-RSA-AES256-SHA DHE-DSS-AES256-SHA DHE-RSA-CAMELLIA256-SHA DHE-DSS-CAMELLIA256-SHA \
    AECDH-AES256-SHA ADH-AES256-SHA ADH-CAMELLIA256-SHA ECDHE-ECDSA-AES128-SHA \
    ECDHE-RSA-AES128-SHA DHE-RSA-AES128-SHA DHE-DSS-AES128-SHA DHE-RSA-CAMELLIA128-SHA \
    DHE-DSS-CAMELLIA128-SHA AECDH-AES128-SHA ADH-AES128-SHA ADH-CAMELLIA128-SHA \
    RSA-PSK-AES256-GCM-SHA384 DHE-PSK-AES256-GCM-SHA384 RSA-PSK-CHACHA20-POLY1305 \
    DHE-PSK-CHACHA20-POLY1305 ECDHE-PSK-CHACHA20-POLY1305 DHE-PSK-AES256-CCM8 \
    DHE-PSK-AES256-CCM RSA-PSK-ARIA256-GCM-SHA384 DHE-PSK-ARIA256-GCM-SHA384 \
    AES256-GCM-SHA384 AES256-CCM8 AES256-CCM ARIA256-GCM-SHA384 PSK-AES256-GCM-SHA384 \
    PSK-CHACHA20-POLY1305 PSK-AES256-CCM8 PSK-AES256-CCM PSK-ARIA256-GCM-SHA384 \
    RSA-PSK-AES128-GCM-SHA256 DHE-PSK-AES128-GCM-SHA256 DHE-PSK-AES128-CCM8 \
    DHE-PSK-AES128-CCM RSA-PSK-ARIA128-GCM-SHA256 DHE-PSK-ARIA128-GCM-SHA256 \
    AES128-GCM-SHA256 AES128-CCM8 AES128-CCM ARIA128-GCM-SHA256 PSK-AES128-GCM-SHA256 \
    PSK-AES128-CCM8 PSK-AES128-CCM PSK-ARIA128-GCM-SHA256 AES256-SHA256 CAMELLIA256-SHA256 \
    AES128-SHA256 CAMELLIA128-SHA256 ECDHE-PSK-AES256-CBC-SHA384 ECDHE-PSK-AES256-CBC-SHA \
    SRP-DSS-AES-256-CBC-SHA SRP-RSA-AES-256-CBC-SHA SRP-AES-256-CBC-SHA \
    RSA-PSK-AES256-CBC-SHA384 DHE-PSK-AES256-CBC-SHA384 RSA-PSK-AES256-CBC-SHA \
    DHE-PSK-AES256-CBC-SHA ECDHE-PSK-CAMELLIA256-SHA384 RSA-PSK-CAMELLIA256-SHA384 \
    DHE-PSK-CAMELLIA256-SHA384 AES256-SHA CAMELLIA256-SHA PSK-AES256-CBC-SHA384 \
    PSK-AES256-CBC-SHA PSK-CAMELLIA256-SHA384 ECDHE-PSK-AES128-CBC-SHA256 \
    ECDHE-PSK-AES128-CBC-SHA SRP-DSS-AES-128-CBC-SHA SRP-RSA-AES-128-CBC-SHA \
    SRP-AES-128-CBC-SHA RSA-PSK-AES128-CBC-SHA256 DHE-PSK-AES128-CBC-SHA256 \
    RSA-PSK-AES128-CBC-SHA DHE-PSK-AES128-CBC-SHA ECDHE-PSK-CAMELLIA128-SHA256 \
    RSA-PSK-CAMELLIA128-SHA256 DHE-PSK-CAMELLIA128-SHA256 AES128-SHA CAMELLIA128-SHA \
    PSK-AES128-CBC-SHA256 PSK-AES128-CBC-SHA PSK-CAMELLIA128-SHA256 ECDHE-ECDSA-NULL-SHA \
    ECDHE-RSA-NULL-SHA AECDH-NULL-SHA NULL-SHA256 ECDHE-PSK-NULL-SHA384 ECDHE-PSK-NULL-SHA256 \
    ECDHE-PSK-NULL-SHA RSA-PSK-NULL-SHA384 RSA-PSK-NULL-SHA256 DHE-PSK-NULL-SHA384 \
    DHE-PSK-NULL-SHA256 RSA-PSK-NULL-SHA DHE-PSK-NULL-SHA NULL-SHA NULL-MD5 PSK-NULL-SHA384 \
    PSK-NULL-SHA256 PSK-NULL-SHA";

/// Why a cipher string was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum CipherError {
    /// A name OpenSSL does not know.
    Unknown(String),
    /// Nothing the string selects is offered.
    NoMatch,
}

/// The TLS 1.2 suites `spec` selects, in its order.
pub fn select(spec: &str) -> Result<Vec<SupportedCipherSuite>, CipherError> {
    let mut list: Vec<usize> = Vec::new();
    let mut banned = [false; OFFERED.len()];
    for item in spec
        .split([':', ',', ' '])
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        if item.starts_with('@') {
            continue; // @STRENGTH, @SECLEVEL=n: the order is already by strength
        }
        let (op, expr) = match item.as_bytes()[0] {
            b'!' | b'-' | b'+' => (item.as_bytes()[0], &item[1..]),
            _ => (0, item),
        };
        let hits = matching(expr)?;
        match op {
            b'!' => {
                for &i in &hits {
                    banned[i] = true;
                }
                list.retain(|i| !hits.contains(i));
            }
            b'-' => list.retain(|i| !hits.contains(i)),
            b'+' => {
                let (moved, kept): (Vec<usize>, Vec<usize>) =
                    list.iter().partition(|i| hits.contains(i));
                list = kept;
                list.extend(moved);
            }
            _ => {
                for i in hits {
                    if !banned[i] && !list.contains(&i) {
                        list.push(i);
                    }
                }
            }
        }
    }
    if list.is_empty() {
        return Err(CipherError::NoMatch);
    }
    Ok(list.into_iter().map(suite).collect())
}

/// Offered suites matching `A+B+...` (every part), by index into [`OFFERED`].
fn matching(expr: &str) -> Result<Vec<usize>, CipherError> {
    let mut hits: Vec<usize> = (0..OFFERED.len()).collect();
    for part in expr.split('+') {
        if !known(part) {
            return Err(CipherError::Unknown(part.to_string()));
        }
        hits.retain(|&i| {
            let (name, tags) = OFFERED[i];
            part == name || tags.contains(&part) || COMMON.contains(&part)
        });
    }
    Ok(hits)
}

fn known(part: &str) -> bool {
    OFFERED
        .iter()
        .any(|(n, tags)| *n == part || tags.contains(&part))
        || COMMON.contains(&part)
        || NONE_OFFERED.split_ascii_whitespace().any(|n| n == part)
        || part.starts_with("TLS_")
}

fn suite(i: usize) -> SupportedCipherSuite {
    [
        cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ][i]
}

/// A suite's name as OpenSSL prints it (`$ssl_cipher`).
pub fn openssl_name(s: CipherSuite) -> &'static str {
    let tls13 = [
        (
            CipherSuite::TLS13_AES_128_GCM_SHA256,
            "TLS_AES_128_GCM_SHA256",
        ),
        (
            CipherSuite::TLS13_AES_256_GCM_SHA384,
            "TLS_AES_256_GCM_SHA384",
        ),
        (
            CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
            "TLS_CHACHA20_POLY1305_SHA256",
        ),
    ];
    if let Some((_, n)) = tls13.iter().find(|(c, _)| *c == s) {
        return n;
    }
    (0..OFFERED.len())
        .find(|&i| suite(i).suite() == s)
        .map(|i| OFFERED[i].0)
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(spec: &str) -> Vec<&'static str> {
        select(spec)
            .unwrap()
            .into_iter()
            .map(|s| openssl_name(s.suite()))
            .collect()
    }

    #[test]
    fn nginx_default_selects_every_offered_suite() {
        assert_eq!(names("HIGH:!aNULL:!MD5").len(), 6);
    }

    #[test]
    fn a_list_of_names_keeps_its_order_and_skips_unoffered_ones() {
        assert_eq!(
            names("ECDHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384"),
            ["ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384"]
        );
    }

    #[test]
    fn combinations_and_removals_follow_openssl() {
        assert_eq!(
            names("ECDHE+AESGCM:ECDHE+CHACHA20:!aECDSA"),
            [
                "ECDHE-RSA-AES256-GCM-SHA384",
                "ECDHE-RSA-AES128-GCM-SHA256",
                "ECDHE-RSA-CHACHA20-POLY1305"
            ]
        );
        assert_eq!(
            names("AES128:-aRSA:aRSA+AES128"),
            [
                "ECDHE-ECDSA-AES128-GCM-SHA256",
                "ECDHE-RSA-AES128-GCM-SHA256"
            ]
        );
        assert_eq!(
            names("AESGCM:+AES256")[2..],
            [
                "ECDHE-ECDSA-AES256-GCM-SHA384",
                "ECDHE-RSA-AES256-GCM-SHA384"
            ]
        );
    }

    #[test]
    fn unknown_names_and_empty_selections_are_refused() {
        assert_eq!(
            select("HIGH:FOO-BAR"),
            Err(CipherError::Unknown("FOO-BAR".into()))
        );
        assert_eq!(select("AES128-SHA:DES-CBC3-SHA"), Err(CipherError::NoMatch));
        assert_eq!(select("HIGH:!HIGH"), Err(CipherError::NoMatch));
    }
}
