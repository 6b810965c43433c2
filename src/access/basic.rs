//! Basic credentials (`Authorization: Basic ...`) as NGINX reads them, and
//! NGINX's base64. The codec is written here rather than taken from a
//! crate because NGINX's decoder is its own: it stops at the first `=`,
//! accepts missing padding, and refuses any other byte outside the
//! alphabet; `$remote_user` and `{SSHA}` must accept exactly what NGINX
//! accepts.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn value(c: u8) -> Option<u8> {
    ALPHABET.iter().position(|&a| a == c).map(|p| p as u8)
}

/// NGINX's `ngx_decode_base64`: `None` where NGINX gives `NGX_ERROR`.
pub fn decode(src: &[u8]) -> Option<Vec<u8>> {
    let end = src.iter().position(|&c| c == b'=').unwrap_or(src.len());
    let vals: Vec<u8> = src[..end]
        .iter()
        .map(|&c| value(c))
        .collect::<Option<_>>()?;
    if vals.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(vals.len() * 3 / 4);
    for q in vals.chunks(4) {
        out.push(q[0] << 2 | q[1] >> 4);
        if q.len() > 2 {
            out.push(q[1] << 4 | q[2] >> 2);
        }
        if q.len() > 3 {
            out.push(q[2] << 6 | q[3]);
        }
    }
    Some(out)
}

/// NGINX's `ngx_decode_base64url`: the URL alphabet (`-`, `_`), padding
/// optional.
pub fn decode_url(src: &[u8]) -> Option<Vec<u8>> {
    let end = src.iter().position(|&c| c == b'=').unwrap_or(src.len());
    if src[..end].iter().any(|&c| c == b'+' || c == b'/') {
        return None;
    }
    let mapped: Vec<u8> = src[..end]
        .iter()
        .map(|&c| match c {
            b'-' => b'+',
            b'_' => b'/',
            c => c,
        })
        .collect();
    decode(&mapped)
}

/// Standard base64 with padding (`ngx_encode_base64`).
pub fn encode(src: &[u8]) -> String {
    let mut out = String::with_capacity(src.len().div_ceil(3) * 4);
    for c in src.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// User and password from an `Authorization` value, as NGINX's
/// `ngx_http_auth_basic_user` takes them: `Basic` (any case) and spaces,
/// base64, then `user:password` with a non-empty user. `None` where NGINX
/// declines (no credentials: a 401).
pub fn credentials(authorization: Option<&str>) -> Option<(Vec<u8>, Vec<u8>)> {
    let v = authorization?.as_bytes();
    if v.len() < 6 || !v[..6].eq_ignore_ascii_case(b"Basic ") {
        return None;
    }
    let encoded = &v[6..];
    let start = encoded.iter().position(|&c| c != b' ')?;
    let auth = decode(&encoded[start..])?;
    let colon = auth.iter().position(|&c| c == b':')?;
    if colon == 0 {
        return None;
    }
    Some((auth[..colon].to_vec(), auth[colon + 1..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codec_round_trips_and_is_as_lenient_as_nginx() {
        for s in [&b""[..], b"a", b"ab", b"abc", b"user:pass word"] {
            assert_eq!(decode(encode(s).as_bytes()).unwrap(), s);
        }
        assert_eq!(encode(b"ab"), "YWI=");
        assert_eq!(decode(b"YWI").unwrap(), b"ab");
        assert_eq!(decode(b"YWI=garbage").unwrap(), b"ab");
        assert!(decode(b"YWI*").is_none());
        assert!(decode(b"Y").is_none());
    }

    #[test]
    fn credentials_as_nginx_reads_them() {
        let h = format!("basic   {}", encode(b"alice:se:cret"));
        assert_eq!(
            credentials(Some(&h)),
            Some((b"alice".to_vec(), b"se:cret".to_vec()))
        );
        assert_eq!(credentials(Some(&format!("Basic {}", encode(b":x")))), None);
        assert_eq!(
            credentials(Some(&format!("Basic {}", encode(b"nocolon")))),
            None
        );
        assert_eq!(credentials(Some("Bearer abc")), None);
        assert_eq!(credentials(Some("Basic ")), None);
        assert_eq!(credentials(None), None);
    }
}
