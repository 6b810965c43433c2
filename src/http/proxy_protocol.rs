//! The PROXY protocol (`listen ... proxy_protocol`), as NGINX's
//! `ngx_proxy_protocol.c` reads it: a load balancer in front sends, before
//! anything else on the connection (before the TLS handshake on an `ssl`
//! address), the client's and its own addresses — version 1 as one text
//! line (`PROXY TCP4 SRC DST SPORT DPORT\r\n`, at most 107 bytes), version
//! 2 as a binary block (a 12-byte signature, version and command, family
//! and transport, a length, the addresses, TLVs that are skipped).
//!
//! What it names is kept on the connection for `$proxy_protocol_addr`,
//! `$proxy_protocol_port`, `$proxy_protocol_server_addr` and
//! `$proxy_protocol_server_port`, and for `real_ip_header proxy_protocol`;
//! `PROXY UNKNOWN`, a v2 `LOCAL` command and families or transports other
//! than TCP over IPv4/IPv6 are accepted and name nothing, as in NGINX. A
//! version 1 address is kept as sent (NGINX checks its characters only).
//!
//! NGINX parses what its first read returned; porter reads on until the
//! header is whole (never past its end, so the bytes after it stay on the
//! socket for HTTP or TLS), all of it within `client_header_timeout`. A
//! header that cannot be one closes the connection with NGINX's line
//! (`broken header: "..." while reading PROXY protocol`).
//!
//! [`v1_line`] is the header porter sends to an upstream (`proxy_protocol
//! on`), as NGINX's `ngx_proxy_protocol_write`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use super::context::ConnInfo;
use crate::log::{ErrorLog, Level};

/// The longest version 1 header (NGINX's `NGX_PROXY_PROTOCOL_MAX_HEADER`).
pub const V1_MAX: usize = 107;

/// The longest version 2 header porter reads: NGINX reads a plain
/// connection's first bytes into `client_header_buffer_size` (1k).
pub const V2_MAX: usize = 1024;

const V2_SIG: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";

/// The addresses a PROXY header named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyInfo {
    /// `$proxy_protocol_addr`: the client's address.
    pub src_addr: String,
    /// `$proxy_protocol_port`.
    pub src_port: u16,
    /// `$proxy_protocol_server_addr`: the address the client connected to.
    pub dst_addr: String,
    /// `$proxy_protocol_server_port`.
    pub dst_port: u16,
}

impl ProxyInfo {
    /// The client this header names, with its port, when the connection's
    /// peer is a trusted sender (`from`: `set_real_ip_from`) and the
    /// address reads as one — NGINX's realip on the PROXY header, in
    /// `http` (`real_ip_header proxy_protocol`) and in `stream` alike.
    /// `unix`: the peer is a UNIX-domain socket's client, which `unix:`
    /// alone trusts.
    pub fn trusted_client(
        &self,
        peer: SocketAddr,
        unix: bool,
        from: &[crate::util::net::Net],
        recursive: bool,
    ) -> Option<SocketAddr> {
        let values = [self.src_addr.as_str()];
        let mut a = crate::util::net::forwarded_client(peer, unix, &values, from, recursive)?;
        a.set_port(self.src_port);
        Some(a)
    }
}

/// What the bytes read so far make.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Not a whole header yet.
    Incomplete,
    /// A header of this many bytes, naming addresses or not.
    Done(usize, Option<ProxyInfo>),
    /// Not a header: the error-log line (none when NGINX closes silently).
    Broken(Option<String>),
}

/// Parses the start of a connection's bytes as a PROXY header.
pub fn parse(data: &[u8]) -> Parsed {
    let sig = data.len().min(V2_SIG.len());
    if data[..sig] == V2_SIG[..sig] && !data.is_empty() {
        if data.len() < 16 {
            return Parsed::Incomplete;
        }
        return parse_v2(data);
    }
    let pre = data.len().min(6);
    let whole = data.windows(2).any(|w| w == b"\r\n");
    if data[..pre] == b"PROXY "[..pre] && !whole && data.len() < V1_MAX {
        return Parsed::Incomplete;
    }
    parse_v1(&data[..data.len().min(V1_MAX)])
}

/// NGINX's version 1 reader, on bytes that hold a CRLF or cannot.
fn parse_v1(buf: &[u8]) -> Parsed {
    let broken = || {
        let end = buf
            .iter()
            .position(|&c| c == b'\r' || c == b'\n')
            .unwrap_or(buf.len());
        let text = String::from_utf8_lossy(&buf[..end]);
        Parsed::Broken(Some(format!("broken header: \"{text}\"")))
    };
    if buf.len() < 8 || !buf.starts_with(b"PROXY ") {
        return broken();
    }
    let p = &buf[6..];
    if let Some(rest) = p.strip_prefix(b"UNKNOWN") {
        return match rest.windows(2).position(|w| w == b"\r\n") {
            Some(i) => Parsed::Done(6 + 7 + i + 2, None),
            None => broken(),
        };
    }
    if p.len() < 5 || !p.starts_with(b"TCP") || !matches!(p[3], b'4' | b'6') || p[4] != b' ' {
        return broken();
    }
    let mut at = 11;
    let mut field = |ok: &dyn Fn(u8) -> bool, sep: u8| -> Option<String> {
        let start = at;
        loop {
            let c = *buf.get(at)?;
            at += 1;
            if c == sep {
                return Some(String::from_utf8_lossy(&buf[start..at - 1]).into_owned());
            }
            if !ok(c) {
                return None;
            }
        }
    };
    let addr_char = |c: u8| c == b':' || c == b'.' || c.is_ascii_hexdigit();
    let any = |_: u8| true;
    let fields = (|| {
        let src = field(&addr_char, b' ')?;
        let dst = field(&addr_char, b' ')?;
        let sport = port(&field(&any, b' ')?)?;
        let dport = port(&field(&any, b'\r')?)?;
        Some((src, dst, sport, dport))
    })();
    match (fields, buf.get(at)) {
        (Some((src_addr, dst_addr, src_port, dst_port)), Some(b'\n')) => Parsed::Done(
            at + 1,
            Some(ProxyInfo {
                src_addr,
                src_port,
                dst_addr,
                dst_port,
            }),
        ),
        _ => broken(),
    }
}

/// NGINX's `ngx_atoi` bounded to a port (0 is allowed, as NGINX).
fn port(s: &str) -> Option<u16> {
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// NGINX's version 2 reader, on at least the 16 bytes of its fixed part.
fn parse_v2(data: &[u8]) -> Parsed {
    let version = data[12] >> 4;
    if version != 2 {
        return Parsed::Broken(Some(format!("unknown PROXY protocol version: {version}")));
    }
    let len = u16::from_be_bytes([data[14], data[15]]) as usize;
    let end = 16 + len;
    if end > V2_MAX {
        return Parsed::Broken(Some("header is too large".into()));
    }
    if data.len() < end {
        return Parsed::Incomplete;
    }
    let body = &data[16..end];
    // Only PROXY over STREAM names addresses; LOCAL and the rest are
    // skipped whole.
    if data[12] & 0x0f != 1 || data[13] & 0x0f != 1 {
        return Parsed::Done(end, None);
    }
    let be16 = |b: &[u8]| u16::from_be_bytes([b[0], b[1]]);
    let info = match data[13] >> 4 {
        1 if body.len() >= 12 => {
            let ip = |b: &[u8]| IpAddr::from(Ipv4Addr::new(b[0], b[1], b[2], b[3]));
            (
                ip(&body[0..4]),
                ip(&body[4..8]),
                be16(&body[8..]),
                be16(&body[10..]),
            )
        }
        2 if body.len() >= 36 => {
            let ip = |b: &[u8]| {
                let a: [u8; 16] = b[..16].try_into().expect("16 bytes");
                IpAddr::from(Ipv6Addr::from(a))
            };
            (
                ip(&body[0..16]),
                ip(&body[16..32]),
                be16(&body[32..]),
                be16(&body[34..]),
            )
        }
        // Too short for its family: NGINX closes without a line.
        1 | 2 => return Parsed::Broken(None),
        _ => return Parsed::Done(end, None),
    };
    Parsed::Done(
        end,
        Some(ProxyInfo {
            src_addr: info.0.to_string(),
            dst_addr: info.1.to_string(),
            src_port: info.2,
            dst_port: info.3,
        }),
    )
}

/// How reading the header ended, when it did not give one.
enum Failed {
    /// The client closed or the socket failed.
    Closed,
    /// `client_header_timeout` ran out.
    TimedOut,
    /// Not a PROXY header: NGINX's line, if it logs one.
    Broken(Option<String>),
}

/// Reads the PROXY header at the start of `tcp` (within `timeout`) into
/// `conn`; false when the connection is to close (logged as NGINX does).
pub async fn accept(
    tcp: &mut TcpStream,
    timeout: Duration,
    log: &ErrorLog,
    conn: &mut ConnInfo,
) -> bool {
    let failed = match tokio::time::timeout(timeout, read(tcp)).await {
        Ok(Ok(info)) => {
            conn.proxy_protocol = info.map(std::sync::Arc::new);
            return true;
        }
        Ok(Err(f)) => f,
        Err(_) => Failed::TimedOut,
    };
    let (level, msg) = match failed {
        Failed::Closed | Failed::Broken(None) => return false,
        Failed::TimedOut => (
            Level::Info,
            "client timed out (110: Connection timed out)".into(),
        ),
        Failed::Broken(Some(m)) => (Level::Error, m),
    };
    log.log_conn(
        level,
        Some(conn.id),
        format_args!("{msg} while reading PROXY protocol"),
        &format!(", client: {}, server: {}", conn.peer.ip(), conn.local),
    );
    false
}

/// Peeks at what arrived and takes from the socket only bytes known to be
/// the header's, so what follows stays there for HTTP or TLS.
async fn read(tcp: &mut TcpStream) -> Result<Option<ProxyInfo>, Failed> {
    let mut got: Vec<u8> = Vec::new();
    let mut peeked = [0u8; V2_MAX];
    loop {
        let room = V2_MAX - got.len();
        let n = match tcp.peek(&mut peeked[..room]).await {
            Ok(0) | Err(_) => return Err(Failed::Closed),
            Ok(n) => n,
        };
        let before = got.len();
        got.extend_from_slice(&peeked[..n]);
        let take = match parse(&got) {
            Parsed::Done(len, info) => {
                consume(tcp, len - before).await?;
                return Ok(info);
            }
            Parsed::Broken(m) => return Err(Failed::Broken(m)),
            // All of it belongs to the header: take it, wait for more.
            Parsed::Incomplete => n,
        };
        consume(tcp, take).await?;
    }
}

async fn consume(tcp: &mut TcpStream, n: usize) -> Result<(), Failed> {
    let mut sink = vec![0u8; n];
    tcp.read_exact(&mut sink)
        .await
        .map(drop)
        .map_err(|_| Failed::Closed)
}

/// The version 1 header porter sends first on a new upstream connection
/// for a client at `src` that connected to `dst` (NGINX's
/// `ngx_proxy_protocol_write`; `UNKNOWN` when the two families differ).
pub fn v1_line(src: SocketAddr, dst: SocketAddr) -> String {
    let proto = match (src, dst) {
        (SocketAddr::V4(_), SocketAddr::V4(_)) => "TCP4",
        (SocketAddr::V6(_), SocketAddr::V6(_)) => "TCP6",
        _ => return "PROXY UNKNOWN\r\n".into(),
    };
    format!(
        "PROXY {proto} {} {} {} {}\r\n",
        src.ip(),
        dst.ip(),
        src.port(),
        dst.port()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(s: &str, sp: u16, d: &str, dp: u16) -> Option<ProxyInfo> {
        Some(ProxyInfo {
            src_addr: s.into(),
            src_port: sp,
            dst_addr: d.into(),
            dst_port: dp,
        })
    }

    #[test]
    fn v1_names_both_addresses_and_ends_at_crlf() {
        let h = b"PROXY TCP4 192.0.2.1 192.0.2.2 5555 80\r\nGET / HTTP/1.1\r\n";
        assert_eq!(
            parse(h),
            Parsed::Done(40, info("192.0.2.1", 5555, "192.0.2.2", 80))
        );
        let h6 = b"PROXY TCP6 2001:db8::1 ::1 1 443\r\n";
        assert_eq!(
            parse(h6),
            Parsed::Done(h6.len(), info("2001:db8::1", 1, "::1", 443))
        );
    }

    #[test]
    fn v1_waits_for_the_rest_of_its_line() {
        assert_eq!(parse(b"PRO"), Parsed::Incomplete);
        assert_eq!(parse(b"PROXY TCP4 1.2.3.4 "), Parsed::Incomplete);
    }

    #[test]
    fn v1_unknown_names_nothing() {
        let h = b"PROXY UNKNOWN ffff::1 ::1 1 2\r\nX";
        assert_eq!(parse(h), Parsed::Done(h.len() - 1, None));
    }

    #[test]
    fn broken_v1_headers_log_nginx_line() {
        let b = |s: &str| Parsed::Broken(Some(format!("broken header: \"{s}\"")));
        assert_eq!(parse(b"GET / HTTP/1.1\r\n\r\n"), b("GET / HTTP/1.1"));
        assert_eq!(parse(b"PROXY TCP5 1 2 3 4\r\n"), b("PROXY TCP5 1 2 3 4"));
        assert_eq!(
            parse(b"PROXY TCP4 1.2.3.x 2 3 4\r\n"),
            b("PROXY TCP4 1.2.3.x 2 3 4")
        );
        assert_eq!(
            parse(b"PROXY TCP4 1 2 3 99999\r\n"),
            b("PROXY TCP4 1 2 3 99999")
        );
        let long = format!("PROXY TCP4 {}", "1".repeat(120));
        assert_eq!(parse(long.as_bytes()), b(&long[..V1_MAX]));
    }

    fn v2(cmd: u8, fam: u8, body: &[u8]) -> Vec<u8> {
        let mut h = V2_SIG.to_vec();
        h.push(0x20 | cmd);
        h.push(fam);
        h.extend_from_slice(&(body.len() as u16).to_be_bytes());
        h.extend_from_slice(body);
        h
    }

    #[test]
    fn v2_tcp4_and_tcp6_with_tlvs_skipped() {
        let mut body = vec![10, 0, 0, 1, 10, 0, 0, 2, 0x30, 0x39, 0, 80];
        body.extend_from_slice(&[0x01, 0, 2, b'h', b'2']);
        let h = v2(1, 0x11, &body);
        assert_eq!(
            parse(&h),
            Parsed::Done(h.len(), info("10.0.0.1", 12345, "10.0.0.2", 80))
        );
        let mut b6 = [0u8; 36];
        b6[15] = 1;
        b6[31] = 2;
        b6[33] = 7;
        b6[35] = 8;
        let h6 = v2(1, 0x21, &b6);
        assert_eq!(parse(&h6), Parsed::Done(h6.len(), info("::1", 7, "::2", 8)));
        assert_eq!(parse(&h6[..20]), Parsed::Incomplete);
    }

    #[test]
    fn v2_local_and_unspec_name_nothing() {
        let h = v2(0, 0x11, &[1; 12]);
        assert_eq!(parse(&h), Parsed::Done(h.len(), None));
        let u = v2(1, 0x00, &[]);
        assert_eq!(parse(&u), Parsed::Done(16, None));
    }

    #[test]
    fn v2_wrong_version_or_short_body_closes() {
        let mut h = v2(1, 0x11, &[0; 12]);
        h[12] = 0x31;
        assert_eq!(
            parse(&h),
            Parsed::Broken(Some("unknown PROXY protocol version: 3".into()))
        );
        assert_eq!(parse(&v2(1, 0x11, &[0; 4])), Parsed::Broken(None));
        let big = v2(1, 0x11, &vec![0; 2000]);
        assert_eq!(
            parse(&big),
            Parsed::Broken(Some("header is too large".into()))
        );
    }

    #[test]
    fn v1_line_as_nginx_writes_it() {
        let a: SocketAddr = "192.0.2.1:5555".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:80".parse().unwrap();
        assert_eq!(v1_line(a, b), "PROXY TCP4 192.0.2.1 127.0.0.1 5555 80\r\n");
        let c: SocketAddr = "[::1]:9".parse().unwrap();
        assert_eq!(v1_line(c, b), "PROXY UNKNOWN\r\n");
    }
}
