//! `ssl_ecdh_curve`: OpenSSL's group list (`auto`, or names joined by `:`
//! as `SSL_CTX_set1_curves_list` takes them, case-insensitive) mapped onto
//! the key-exchange groups porter offers (ring's X25519, P-256 and P-384,
//! and P-521 from [`super::p521`]). A name OpenSSL knows that porter lacks
//! (X448, the FFDHE groups, the post-quantum hybrids…) is left out and
//! reported; a name OpenSSL does not know is an error, as NGINX's
//! `SSL_CTX_set1_curves_list() failed`; so is a list left empty.

use rustls::crypto::SupportedKxGroup;

/// The groups porter offers with their OpenSSL names and aliases: ring's
/// three, then P-521 ([`super::p521`]), which `auto` leaves out as
/// OpenSSL's default list puts it last and no client needs it.
fn offered() -> [(&'static [&'static str], &'static dyn SupportedKxGroup); 4] {
    use rustls::crypto::ring::kx_group;
    [
        (&["X25519"], kx_group::X25519),
        (&["prime256v1", "P-256", "secp256r1"], kx_group::SECP256R1),
        (&["secp384r1", "P-384"], kx_group::SECP384R1),
        (&["secp521r1", "P-521"], super::p521::SECP521R1),
    ]
}

/// Groups OpenSSL (3.0 to 3.5) knows that the provider does not offer.
const NOT_OFFERED: &[&str] = &[
    "X448",
    "secp224r1",
    "P-224",
    "secp192r1",
    "prime192v1",
    "P-192",
    "secp256k1",
    "brainpoolP256r1",
    "brainpoolP384r1",
    "brainpoolP512r1",
    "brainpoolP256r1tls13",
    "brainpoolP384r1tls13",
    "brainpoolP512r1tls13",
    "ffdhe2048",
    "ffdhe3072",
    "ffdhe4096",
    "ffdhe6144",
    "ffdhe8192",
    "X25519MLKEM768",
    "SecP256r1MLKEM768",
    "SecP384r1MLKEM1024",
    "MLKEM512",
    "MLKEM768",
    "MLKEM1024",
    "X25519Kyber768Draft00",
];

/// OpenSSL's name of a group (`SSL_get_negotiated_group`, then
/// `OBJ_nid2sn`): the first of [`offered`]'s names.
pub fn openssl_name(group: rustls::NamedGroup) -> &'static str {
    offered()
        .into_iter()
        .find(|(_, g)| g.name() == group)
        .map_or("", |(names, _)| names[0])
}

/// What `ssl_ecdh_curve` selects.
#[derive(Debug)]
pub struct Groups {
    /// In the list's order (`auto`: the provider's default order).
    pub groups: Vec<&'static dyn SupportedKxGroup>,
    /// Names OpenSSL knows that were left out, as written.
    pub left_out: Vec<String>,
}

/// The groups `spec` names. `Err`: OpenSSL's failure, e.g.
/// `group 'bogus' cannot be set`.
pub fn select(spec: &str) -> Result<Groups, String> {
    if spec == "auto" {
        return Ok(Groups {
            groups: offered()[..3].iter().map(|(_, g)| *g).collect(),
            left_out: Vec::new(),
        });
    }
    let mut groups: Vec<&'static dyn SupportedKxGroup> = Vec::new();
    let mut left_out = Vec::new();
    for name in spec.split(':') {
        let found = offered()
            .into_iter()
            .find(|(names, _)| names.iter().any(|n| n.eq_ignore_ascii_case(name)));
        match found {
            Some((_, g)) => {
                if !groups.iter().any(|x| x.name() == g.name()) {
                    groups.push(g);
                }
            }
            None if NOT_OFFERED.iter().any(|n| n.eq_ignore_ascii_case(name)) => {
                left_out.push(name.to_string())
            }
            None => return Err(format!("group '{name}' cannot be set")),
        }
    }
    if groups.is_empty() {
        return Err(format!(
            "no group offered: porter's TLS offers X25519, prime256v1, secp384r1 and secp521r1; {} cannot be set",
            left_out.join(", ")
        ));
    }
    Ok(Groups { groups, left_out })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::NamedGroup;

    fn names(g: &Groups) -> Vec<NamedGroup> {
        g.groups.iter().map(|g| g.name()).collect()
    }

    #[test]
    fn openssl_names_map_onto_the_provider_s_groups() {
        let g = select("auto").unwrap();
        assert_eq!(
            names(&g),
            [
                NamedGroup::X25519,
                NamedGroup::secp256r1,
                NamedGroup::secp384r1
            ]
        );
        let g = select("secp384r1:x25519:P-256:prime256v1").unwrap();
        assert_eq!(
            names(&g),
            [
                NamedGroup::secp384r1,
                NamedGroup::X25519,
                NamedGroup::secp256r1
            ]
        );
        let g = select("X25519MLKEM768:X25519:secp521r1:X448").unwrap();
        assert_eq!(names(&g), [NamedGroup::X25519, NamedGroup::secp521r1]);
        assert_eq!(g.left_out, ["X25519MLKEM768", "X448"]);
        let g = select("secp521r1").unwrap();
        assert_eq!(names(&g), [NamedGroup::secp521r1]);
        assert_eq!(
            select("X25519:bogus").unwrap_err(),
            "group 'bogus' cannot be set"
        );
        assert!(
            select("X25519:auto").is_err(),
            "auto only alone, as OpenSSL"
        );
        assert!(select("X448:ffdhe2048")
            .unwrap_err()
            .contains("no group offered"));
        assert!(select("").is_err());
    }
}
