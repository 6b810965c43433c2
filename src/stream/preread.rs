//! `ssl_preread on`: the client's first TLS records read before the
//! content phase (NGINX's `ngx_stream_ssl_preread_module`), without
//! terminating TLS, for `$ssl_preread_server_name` (the SNI),
//! `$ssl_preread_protocol` (the highest version offered, from
//! `supported_versions` when the ClientHello has it) and
//! `$ssl_preread_alpn_protocols` (comma-separated). The bytes read stay
//! the session's: the relay sends them to the upstream first. A record
//! that is not a handshake, or an SSL version other than 3, ends the
//! preread with nothing found; an SSLv2-compatible ClientHello gives its
//! version only (`0x0002` is `SSLv2`); a TLS 1.3 draft version in
//! `supported_versions` counts as TLS 1.3. Written by hand: a ClientHello's few fields, read
//! without a TLS library, as NGINX reads them.

/// What the ClientHello said.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Hello {
    /// The `server_name` extension's host name.
    pub server_name: String,
    /// The highest version offered (`[3, 4]` is TLS 1.3).
    pub version: Option<[u8; 2]>,
    /// The ALPN protocols, comma-separated.
    pub alpn: String,
}

impl Hello {
    /// `$ssl_preread_protocol`'s text for the version.
    pub fn protocol(&self) -> &'static str {
        match self.version {
            Some([3, 0]) => "SSLv3",
            Some([3, 1]) => "TLSv1",
            Some([3, 2]) => "TLSv1.1",
            Some([3, 3]) => "TLSv1.2",
            Some([3, 4]) => "TLSv1.3",
            Some([0, 2]) => "SSLv2",
            _ => "",
        }
    }
}

/// What the bytes read so far make.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A record or the ClientHello is not whole yet.
    More,
    /// Done: the ClientHello's fields, or `None` for no TLS handshake.
    Done(Option<Hello>),
}

/// Parses the start of a client's bytes.
pub fn parse(data: &[u8]) -> Parsed {
    let mut hs = Vec::new();
    let mut p = data;
    while p.len() >= 5 {
        if p[0] & 0x80 != 0 && p[2] == 1 && (p[3] == 0 || p[3] == 3) {
            return Parsed::Done(Some(Hello {
                version: Some([p[3], p[4]]),
                ..Hello::default()
            }));
        }
        if p[0] != 0x16 || p[1] != 3 {
            return Parsed::Done(None);
        }
        let len = usize::from(p[3]) << 8 | usize::from(p[4]);
        if p.len() < 5 + len {
            return Parsed::More;
        }
        hs.extend_from_slice(&p[5..5 + len]);
        p = &p[5 + len..];
        if hs.len() >= 4 {
            if hs[0] != 1 {
                return Parsed::Done(None);
            }
            let msg = (usize::from(hs[1]) << 16) | (usize::from(hs[2]) << 8) | usize::from(hs[3]);
            if hs.len() >= 4 + msg {
                return Parsed::Done(client_hello(&hs[4..4 + msg]));
            }
        }
    }
    Parsed::More
}

/// Reads a length-prefixed field of `n` length bytes off the front; one
/// longer than what is left is cut to it, as NGINX's byte-by-byte parser
/// reads what the message holds (nginx-tests sends a `supported_versions`
/// whose length overruns the ClientHello).
fn field<'a>(p: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if p.len() < n {
        return None;
    }
    let len = p[..n].iter().fold(0usize, |a, b| a << 8 | usize::from(*b));
    let rest = &p[n..];
    let len = len.min(rest.len());
    *p = &rest[len..];
    Some(&rest[..len])
}

fn client_hello(mut p: &[u8]) -> Option<Hello> {
    if p.len() < 34 {
        return None;
    }
    let mut hello = Hello {
        version: Some([p[0], p[1]]),
        ..Hello::default()
    };
    p = &p[34..];
    field(&mut p, 1)?; // session id
    field(&mut p, 2)?; // cipher suites
    field(&mut p, 1)?; // compression methods
    let Some(mut exts) = field(&mut p, 2) else {
        return Some(hello);
    };
    while exts.len() >= 4 {
        let ty = u16::from_be_bytes([exts[0], exts[1]]);
        exts = &exts[2..];
        let mut data = field(&mut exts, 2)?;
        match ty {
            0 => {
                let mut list = field(&mut data, 2)?;
                while list.len() >= 3 {
                    let kind = list[0];
                    list = &list[1..];
                    let name = field(&mut list, 2)?;
                    if kind == 0 {
                        hello.server_name = String::from_utf8_lossy(name).into_owned();
                        break;
                    }
                }
            }
            16 => {
                let mut list = field(&mut data, 2)?;
                let mut names = Vec::new();
                while !list.is_empty() {
                    names.push(String::from_utf8_lossy(field(&mut list, 1)?).into_owned());
                }
                hello.alpn = names.join(",");
            }
            43 => {
                let list = field(&mut data, 1)?;
                for v in list.chunks_exact(2) {
                    // GREASE values (0x?a?a) are no version.
                    let grease = v[0] & 0x0f == 0x0a && v[1] & 0x0f == 0x0a;
                    // A TLS 1.3 draft (0x7fNN) is TLS 1.3.
                    if v[0] == 0x7f {
                        hello.version = Some([3, 4]);
                    } else if v[0] == 3 && !grease && hello.version.is_none_or(|h| v[1] > h[1]) {
                        hello.version = Some([3, v[1]]);
                    }
                }
            }
            _ => {}
        }
    }
    Some(hello)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ClientHello record with `exts`, split into records of `split`
    /// bytes of handshake each.
    fn hello(exts: &[u8], split: usize) -> Vec<u8> {
        let mut body = vec![3, 3];
        body.extend([0u8; 32]);
        body.extend([0, 0, 2, 0x13, 0x01, 1, 0]);
        body.extend((exts.len() as u16).to_be_bytes());
        body.extend(exts);
        let mut hs = vec![1, 0];
        hs.extend((body.len() as u16).to_be_bytes());
        hs.extend(body);
        let mut out = Vec::new();
        for c in hs.chunks(split) {
            out.extend([0x16, 3, 1]);
            out.extend((c.len() as u16).to_be_bytes());
            out.extend(c);
        }
        out
    }

    fn sni(name: &str) -> Vec<u8> {
        let n = name.len() as u16;
        let mut e = vec![0, 0];
        e.extend((n + 5).to_be_bytes());
        e.extend((n + 3).to_be_bytes());
        e.push(0);
        e.extend(n.to_be_bytes());
        e.extend(name.as_bytes());
        e
    }

    #[test]
    fn reads_sni_alpn_and_the_highest_version() {
        let mut exts = sni("foo.example");
        exts.extend([
            0, 16, 0, 11, 0, 9, 2, b'h', b'2', 5, b'h', b't', b't', b'p', b'1',
        ]);
        exts.extend([0, 43, 0, 5, 4, 0x0a, 0x0a, 3, 4]);
        let Parsed::Done(Some(h)) = parse(&hello(&exts, 1000)) else {
            panic!("not parsed")
        };
        assert_eq!(h.server_name, "foo.example");
        assert_eq!(h.alpn, "h2,http1");
        assert_eq!(h.protocol(), "TLSv1.3");
    }

    #[test]
    fn a_hello_over_several_records_waits_for_the_last() {
        let all = hello(&sni("a.b"), 10);
        assert_eq!(parse(&all[..all.len() - 3]), Parsed::More);
        let Parsed::Done(Some(h)) = parse(&all) else {
            panic!("not parsed")
        };
        assert_eq!((h.server_name.as_str(), h.protocol()), ("a.b", "TLSv1.2"));
    }

    #[test]
    fn plain_bytes_are_no_handshake() {
        assert_eq!(parse(b"GET / HTTP/1.0\r\n"), Parsed::Done(None));
        assert_eq!(parse(b"\x16\x03"), Parsed::More);
    }
}
