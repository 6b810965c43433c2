//! `secure_link`, `secure_link_md5` and `secure_link_secret`: the checks
//! behind `$secure_link` and `$secure_link_expires`, as NGINX's secure
//! link module makes them.
//!
//! `secure_link HASH[,EXPIRES]` with `secure_link_md5 STRING`: HASH is the
//! MD5 of STRING in base64url (padding optional, at most 24 characters);
//! `$secure_link` is `1` when it matches, `0` when it matches but EXPIRES
//! (seconds since the epoch, above 0) has passed, else empty. EXPIRES, as
//! written, is `$secure_link_expires` once `$secure_link` has been read,
//! whether the hash matched or not (NGINX keeps it in the module's request
//! context before it checks the hash).
//!
//! `secure_link_secret WORD` (the older form): the request URI is
//! `/PREFIX/HEX32/LINK` and HEX32 the hex MD5 of LINK followed by WORD;
//! `$secure_link` is then LINK (with the query string, as NGINX reads the
//! unparsed URI), else empty.

use md5::{Digest, Md5};

/// What `$secure_link` found for `secure_link`/`secure_link_md5`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// `$secure_link`: `"1"`, `"0"` (expired) or `""`.
    pub value: &'static str,
    /// `$secure_link_expires`, when the link named a valid expiry.
    pub expires: Option<String>,
}

/// `$secure_link_expires` for a `secure_link` value: the text after its
/// comma when that is a time above 0. Known before the hash is checked, so
/// `secure_link_md5` may use it.
pub fn expires(link: &str) -> Option<&str> {
    let (_, e) = link.split_once(',')?;
    atotm(e).filter(|&t| t > 0).map(|_| e)
}

/// Checks `link` (`secure_link`'s value) against `md5_input`
/// (`secure_link_md5`'s value, rendered only when needed) at `now`.
pub fn check(link: &str, md5_input: impl FnOnce() -> String, now: i64) -> Checked {
    let mut out = Checked {
        value: "",
        expires: None,
    };
    let (hash, expires) = match link.split_once(',') {
        Some((h, e)) => {
            let Some(at) = atotm(e).filter(|&t| t > 0) else {
                return out;
            };
            out.expires = Some(e.to_string());
            (h, at)
        }
        None => (link, 0),
    };
    if hash.len() > 24 {
        return out;
    }
    let Some(want) = super::basic::decode_url(hash.as_bytes()).filter(|h| h.len() == 16) else {
        return out;
    };
    let got = Md5::digest(md5_input().as_bytes());
    // Constant time, as NGINX compares.
    let diff = want
        .iter()
        .zip(got.iter())
        .fold(0u8, |d, (a, b)| d | (a ^ b));
    if diff == 0 {
        out.value = if expires != 0 && expires < now {
            "0"
        } else {
            "1"
        };
    }
    out
}

/// NGINX's `ngx_atotm`: digits only, no overflow.
fn atotm(s: &str) -> Option<i64> {
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `secure_link_secret`: the LINK of `/PREFIX/HEX32/LINK` in the raw
/// request URI when its hash is right, else `None`.
pub fn check_secret<'a>(request_uri: &'a str, secret: &str) -> Option<&'a str> {
    let rest = request_uri.get(1..)?;
    let (_, rest) = rest.split_once('/')?;
    let (hex, link) = rest.split_once('/')?;
    if hex.len() != 32 || link.is_empty() {
        return None;
    }
    let mut md5 = Md5::new();
    md5.update(link.as_bytes());
    md5.update(secret.as_bytes());
    let got = md5.finalize();
    let mut diff = 0u8;
    for (i, g) in got.iter().enumerate() {
        let n = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
        diff |= n ^ g;
    }
    (diff == 0).then_some(link)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64url(s: &str) -> String {
        let d = Md5::digest(s.as_bytes());
        super::super::basic::encode(&d)
            .trim_end_matches('=')
            .replace('+', "-")
            .replace('/', "_")
    }

    #[test]
    fn hashes_and_expiry_as_nginx() {
        let h = b64url("2147483647/s/link secret");
        let input = || "2147483647/s/link secret".to_string();
        assert_eq!(check(&format!("{h},2147483647"), input, 100).value, "1");
        assert_eq!(check(&format!("{h},50"), input, 100).value, "0");
        let h50 = b64url("50/s/link secret");
        let c = check(&format!("{h50},50"), || "50/s/link secret".into(), 100);
        assert_eq!(c.value, "0");
        assert_eq!(c.expires.as_deref(), Some("50"));
        assert_eq!(check(&format!("{h},0"), input, 100).expires, None);
        assert_eq!(check(&format!("{h}=="), input, 1).value, "1");
        assert_eq!(check("x", input, 1).value, "");
    }

    #[test]
    fn the_old_form_checks_the_hex_hash_of_link_and_secret() {
        let d = Md5::digest(b"a/b.txtsecret");
        let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
        let uri = format!("/p/{hex}/a/b.txt");
        assert_eq!(check_secret(&uri, "secret"), Some("a/b.txt"));
        assert_eq!(check_secret(&uri, "other"), None);
        assert_eq!(check_secret("/p/short/a", "secret"), None);
    }
}
