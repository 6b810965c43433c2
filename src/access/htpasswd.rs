//! The htpasswd file as NGINX reads it (`auth_basic_user_file`): lines of
//! `user:hash[:comment]`, `#` comments, the first line naming the user
//! wins; and the hash formats NGINX's `ngx_crypt` knows: `$apr1$`
//! (Apache's MD5), `{PLAIN}`, `{SHA}`, `{SSHA}`, and anything else through
//! the system's `crypt()` ([`super::crypt`]). A password matches when the
//! hash recomputed with the stored salt equals the stored string, compared
//! in constant time.
//!
//! apr1 is written here from NGINX's `ngx_crypt_apr1` over the `md-5`
//! crate: no crate gives Apache's variant with NGINX's reading of the salt
//! (at most 8 bytes, up to the first `$`).

use md5::{Digest, Md5};
use sha1::Sha1;
use subtle::ConstantTimeEq;

use super::basic;

/// How costly checking a hash is, so the caller knows where to run it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cost {
    /// One SHA-1 at most (`{PLAIN}`, `{SHA}`, `{SSHA}`): on the loop.
    Cheap,
    /// Many rounds (`$apr1$`'s 1000 MD5s, `crypt()`): on the hasher pool.
    Slow,
}

/// The cost of checking a password against `hash`.
pub fn cost(hash: &[u8]) -> Cost {
    if hash.starts_with(b"{PLAIN}") || hash.starts_with(b"{SHA}") || hash.starts_with(b"{SSHA}") {
        Cost::Cheap
    } else {
        Cost::Slow
    }
}

/// The stored hash for `user` in the file's `content`, read as NGINX's
/// state machine does: a line matches when it starts with `user:`; the
/// hash ends at CR, LF, `:` or the end of the file; lines starting with
/// `#` or CR are skipped.
pub fn find_user<'a>(content: &'a [u8], user: &[u8]) -> Option<&'a [u8]> {
    for line in content.split(|&c| c == b'\n') {
        if line.first().is_some_and(|&c| c == b'#' || c == b'\r') {
            continue;
        }
        let Some(rest) = line.strip_prefix(user).and_then(|r| r.strip_prefix(b":")) else {
            continue;
        };
        let end = rest
            .iter()
            .position(|&c| c == b'\r' || c == b':')
            .unwrap_or(rest.len());
        return Some(&rest[..end]);
    }
    None
}

/// Whether `password` matches the stored `hash` (NGINX's `ngx_crypt`, then
/// a comparison with the stored string). Slow for `$apr1$` and `crypt()`.
pub fn verify(password: &[u8], hash: &[u8]) -> bool {
    let password = cut_at_nul(password);
    let hash = cut_at_nul(hash);
    let computed = if hash.starts_with(b"$apr1$") {
        Some(apr1(password, hash).into_bytes())
    } else if hash.starts_with(b"{PLAIN}") {
        Some([&b"{PLAIN}"[..], password].concat())
    } else if hash.starts_with(b"{SHA}") {
        Some(format!("{{SHA}}{}", basic::encode(&Sha1::digest(password))).into_bytes())
    } else if let Some(rest) = hash.strip_prefix(b"{SSHA}") {
        ssha(password, rest)
    } else {
        super::crypt::crypt(password, hash)
    };
    computed.is_some_and(|c| c.len() == hash.len() && bool::from(c.ct_eq(hash)))
}

fn cut_at_nul(b: &[u8]) -> &[u8] {
    &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())]
}

/// `{SSHA}`: base64 of SHA-1(password + salt) followed by the salt.
fn ssha(password: &[u8], encoded: &[u8]) -> Option<Vec<u8>> {
    let decoded = basic::decode(encoded)?;
    if decoded.len() < 20 {
        return None;
    }
    let salt = &decoded[20..];
    let mut h = Sha1::new();
    h.update(password);
    h.update(salt);
    let mut out = h.finalize().to_vec();
    out.extend_from_slice(salt);
    Some(format!("{{SSHA}}{}", basic::encode(&out)).into_bytes())
}

const ITOA64: &[u8; 64] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

fn to64(out: &mut String, mut v: u32, n: usize) {
    for _ in 0..n {
        out.push(ITOA64[(v & 0x3f) as usize] as char);
        v >>= 6;
    }
}

/// Apache's `$apr1$` hash of `key` with the salt of `setting`, as NGINX's
/// `ngx_crypt_apr1` computes it.
pub fn apr1(key: &[u8], setting: &[u8]) -> String {
    let s = &setting[6..];
    let salt_len = s.iter().take(8).take_while(|&&c| c != b'$').count();
    let salt = &s[..salt_len];
    let mut md5 = Md5::new();
    md5.update(key);
    md5.update(b"$apr1$");
    md5.update(salt);
    let alt = Md5::new()
        .chain_update(key)
        .chain_update(salt)
        .chain_update(key)
        .finalize();
    let mut n = key.len();
    while n > 0 {
        md5.update(&alt[..n.min(16)]);
        n = n.saturating_sub(16);
    }
    let mut i = key.len();
    while i != 0 {
        if i & 1 == 1 {
            md5.update([0u8]);
        } else {
            md5.update(&key[..1]);
        }
        i >>= 1;
    }
    let mut fin = md5.finalize();
    for i in 0..1000 {
        let mut c = Md5::new();
        if i & 1 == 1 {
            c.update(key);
        } else {
            c.update(fin);
        }
        if i % 3 != 0 {
            c.update(salt);
        }
        if i % 7 != 0 {
            c.update(key);
        }
        if i & 1 == 1 {
            c.update(fin);
        } else {
            c.update(key);
        }
        fin = c.finalize();
    }
    let f = |i: usize| fin[i] as u32;
    let mut out = String::with_capacity(6 + salt_len + 23);
    out.push_str("$apr1$");
    out.push_str(&String::from_utf8_lossy(salt));
    out.push('$');
    to64(&mut out, f(0) << 16 | f(6) << 8 | f(12), 4);
    to64(&mut out, f(1) << 16 | f(7) << 8 | f(13), 4);
    to64(&mut out, f(2) << 16 | f(8) << 8 | f(14), 4);
    to64(&mut out, f(3) << 16 | f(9) << 8 | f(15), 4);
    to64(&mut out, f(4) << 16 | f(10) << 8 | f(5), 4);
    to64(&mut out, f(11), 2);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_nginx_reads() {
        // `openssl passwd -apr1 -salt abcdefgh secret`
        let apr1 = b"$apr1$abcdefgh$h9FWgUz3n9YxylKLlR5SQ/";
        assert!(verify(b"secret", apr1));
        assert!(!verify(b"secreT", apr1));
        assert!(verify(b"secret", b"{PLAIN}secret"));
        assert!(!verify(b"secre", b"{PLAIN}secret"));
        // `printf secret | openssl dgst -sha1 -binary | base64`
        assert!(verify(b"secret", b"{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ="));
        assert!(!verify(b"Secret", b"{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ="));
        let mut raw = Sha1::new()
            .chain_update(b"secret")
            .chain_update(b"salt")
            .finalize()
            .to_vec();
        raw.extend_from_slice(b"salt");
        let ssha = format!("{{SSHA}}{}", basic::encode(&raw));
        assert!(verify(b"secret", ssha.as_bytes()));
        assert!(!verify(b"secrex", ssha.as_bytes()));
        assert!(verify(b"secret", b"$1$saltsalt$9xy1btjgzLYfb7hivXtC//"));
        assert_eq!(cost(apr1), Cost::Slow);
        assert_eq!(cost(b"{SHA}x"), Cost::Cheap);
    }

    #[test]
    fn the_first_line_naming_the_user_wins() {
        let file =
            b"# alice:{PLAIN}no\nbob:{PLAIN}b\r\nalice:{PLAIN}a:comment\nalice:{PLAIN}second\n";
        assert_eq!(find_user(file, b"alice"), Some(&b"{PLAIN}a"[..]));
        assert_eq!(find_user(file, b"bob"), Some(&b"{PLAIN}b"[..]));
        assert_eq!(find_user(file, b"ali"), None);
        assert_eq!(
            find_user(b"carol:{PLAIN}c", b"carol"),
            Some(&b"{PLAIN}c"[..])
        );
        assert_eq!(find_user(b"", b"carol"), None);
    }
}
