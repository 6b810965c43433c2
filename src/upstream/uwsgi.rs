//! The uwsgi packet NGINX's `uwsgi` module sends, without I/O: a 4-byte
//! header (`modifier1`, the vars' size as 16-bit little-endian,
//! `modifier2`), then the vars as pairs of 16-bit-little-endian
//! length-prefixed names and values; the request body follows as is. The
//! response is an HTTP/1 head (or CGI headers), read by [`super::app_head`],
//! and a body up to its `Content-Length` or the close, as
//! [`super::wire::Framing`] reads a proxied one.
//!
//! Written by hand: the uwsgi crates on crates.io are unmaintained servers
//! with their own I/O; the packet is a dozen lines and NGINX's limits
//! (vars at most 65535 bytes, `uwsgi request is too big`) are the ones to
//! keep.

/// The vars of a packet exceed what its 16-bit size can say; NGINX's
/// `uwsgi request is too big: N`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooBig(pub usize);

impl std::fmt::Display for TooBig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "uwsgi request is too big: {}", self.0)
    }
}

/// Appends the packet header (`modifier1`, `modifier2`), `vars` (name,
/// value) and `extra` (`uwsgi_string`, counted in the packet's size, as
/// NGINX counts it) to `out`.
pub fn packet<'a>(
    out: &mut Vec<u8>,
    (modifier1, modifier2): (u8, u8),
    vars: impl IntoIterator<Item = (&'a [u8], &'a [u8])> + Clone,
    extra: &[u8],
) -> Result<(), TooBig> {
    let size: usize = vars
        .clone()
        .into_iter()
        .map(|(n, v)| 4 + n.len() + v.len())
        .sum::<usize>()
        + extra.len();
    // A name or value over 65535 bytes makes the whole too big as well.
    if size > 65535 {
        return Err(TooBig(size));
    }
    out.reserve(4 + size);
    out.push(modifier1);
    out.extend_from_slice(&(size as u16).to_le_bytes());
    out.push(modifier2);
    for (n, v) in vars {
        out.extend_from_slice(&(n.len() as u16).to_le_bytes());
        out.extend_from_slice(n);
        out.extend_from_slice(&(v.len() as u16).to_le_bytes());
        out.extend_from_slice(v);
    }
    out.extend_from_slice(extra);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs<'a>(
        p: &'a [(&'a str, &'a str)],
    ) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone {
        p.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes()))
    }

    #[test]
    fn header_and_vars_are_little_endian() {
        let mut out = Vec::new();
        packet(
            &mut out,
            (0, 0),
            pairs(&[("REQUEST_METHOD", "GET"), ("QS", "")]),
            b"",
        )
        .unwrap();
        let mut want = vec![0, 27, 0, 0];
        want.extend_from_slice(&[14, 0]);
        want.extend_from_slice(b"REQUEST_METHOD");
        want.extend_from_slice(&[3, 0]);
        want.extend_from_slice(b"GET");
        want.extend_from_slice(&[2, 0]);
        want.extend_from_slice(b"QS");
        want.extend_from_slice(&[0, 0]);
        assert_eq!(out, want);
    }

    #[test]
    fn modifiers_frame_the_size_and_a_long_value_uses_both_bytes() {
        let long = "x".repeat(300);
        let mut out = Vec::new();
        packet(&mut out, (5, 9), pairs(&[("K", &long)]), b"").unwrap();
        assert_eq!(out[0], 5);
        assert_eq!(u16::from_le_bytes([out[1], out[2]]) as usize, 4 + 1 + 300);
        assert_eq!(out[3], 9);
        assert_eq!(&out[7..9], &300u16.to_le_bytes());
        assert_eq!(out.len(), 4 + 305);
    }

    #[test]
    fn vars_over_65535_bytes_are_refused_as_nginx_words_it() {
        let big = "v".repeat(65535);
        let mut out = Vec::new();
        let e = packet(&mut out, (0, 0), pairs(&[("A", &big)]), b"").unwrap_err();
        assert_eq!(e.to_string(), "uwsgi request is too big: 65540");
        assert!(out.is_empty());
        // Exactly 65535 fits.
        let fits = "v".repeat(65535 - 5);
        packet(&mut out, (0, 0), pairs(&[("A", &fits)]), b"").unwrap();
        assert_eq!(&out[1..3], &[0xff, 0xff]);
    }

    #[test]
    fn uwsgi_string_follows_the_vars_inside_the_packet_size() {
        let mut out = Vec::new();
        packet(&mut out, (0, 0), pairs(&[("A", "b")]), b"extra").unwrap();
        assert_eq!(u16::from_le_bytes([out[1], out[2]]) as usize, 6 + 5);
        assert_eq!(&out[out.len() - 5..], b"extra");
        assert_eq!(out.len(), 4 + 6 + 5);
    }
}
