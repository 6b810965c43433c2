//! realip and the PROXY protocol against the real binary: the client's
//! address from `X-Forwarded-For` (recursive or not, trusted and untrusted
//! hops), `X-Real-IP` and any header, compared with Debian's nginx;
//! `allow`/`deny` and the logs seeing the real address; `listen ...
//! proxy_protocol` with version 1 and hand-built version 2 headers, over
//! plain TCP and before a TLS handshake, and malformed ones (the
//! connection closes, NGINX's line is logged); `real_ip_header
//! proxy_protocol`; and `proxy_protocol on` toward a test origin that
//! checks the header each of its connections starts with.

use crate::common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::*;

const SHOW: &str = r#"return 200 "$remote_addr|$remote_port|$realip_remote_addr\n";"#;
const SHOW_PP: &str = r#"return 200 "$remote_addr|$remote_port|$realip_remote_addr|$proxy_protocol_addr|$proxy_protocol_port|$proxy_protocol_server_addr|$proxy_protocol_server_port\n";"#;

/// Sends `bytes` on a new connection: the body of the answer, `None` when
/// the server closes without one.
fn ask(port: u16, bytes: &[u8]) -> Option<String> {
    try_raw(port, bytes).map(|r| r.text())
}

fn get_h(port: u16, path: &str, headers: &str) -> String {
    let req =
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{headers}\r\n");
    ask(port, req.as_bytes()).expect("an answer")
}

/// Three servers: on `{PORT}` trusting 127.0.0.1 and 10.0.0.0/8 to name
/// the client in `X-Forwarded-For` with `real_ip_recursive off`; on `on`
/// the same with it on, and locations reading other headers; on `loc`
/// trusting 10.0.0.0/8 only, and 127.0.0.1 in a location whose `return`
/// runs before the location's realip (NGINX's rewrite phase comes first).
fn xff_servers(on: u16, loc: u16) -> String {
    format!(
        "server {{ listen 127.0.0.1:{{PORT}}; server_name localhost;\n\
           set_real_ip_from 127.0.0.1; set_real_ip_from 10.0.0.0/8;\n\
           real_ip_header X-Forwarded-For;\n\
           location / {{ {SHOW} }}\n\
         }}\n\
         server {{ listen 127.0.0.1:{on}; server_name localhost;\n\
           set_real_ip_from 127.0.0.1; set_real_ip_from 10.0.0.0/8;\n\
           real_ip_header X-Forwarded-For; real_ip_recursive on;\n\
           location / {{ {SHOW} }}\n\
           location /xri {{ real_ip_header X-Real-IP; {SHOW} }}\n\
           location /cf {{ real_ip_header CF-Connecting-IP; {SHOW} }}\n\
         }}\n\
         server {{ listen 127.0.0.1:{loc}; server_name localhost;\n\
           set_real_ip_from 10.0.0.0/8; real_ip_header X-Forwarded-For;\n\
           location / {{ {SHOW} }}\n\
           location /loc {{ set_real_ip_from 127.0.0.1; {SHOW} }}\n\
         }}\n"
    )
}

/// (header lines, path).
const XFF_CASES: &[(&str, &str)] = &[
    ("X-Forwarded-For: 1.1.1.1, 10.0.0.2\r\n", "/"),
    ("X-Forwarded-For: 9.9.9.9, 1.1.1.1\r\n", "/"),
    (
        "X-Forwarded-For: 9.9.9.9, 1.1.1.1, 10.0.0.2,10.0.0.3 \r\n",
        "/",
    ),
    ("X-Forwarded-For: 10.0.0.9, 10.0.0.2\r\n", "/"),
    (
        "X-Forwarded-For: 5.5.5.5\r\nX-Forwarded-For: 10.0.0.7\r\n",
        "/",
    ),
    ("X-Forwarded-For: bogus\r\n", "/"),
    ("X-Forwarded-For: bogus, 10.0.0.5\r\n", "/"),
    ("X-Forwarded-For: 1.2.3.4:5678\r\n", "/"),
    ("X-Forwarded-For: [2001:db8::1]:80\r\n", "/"),
    ("X-Forwarded-For: 2001:db8::2\r\n", "/"),
    ("", "/"),
    (
        "X-Real-IP: 203.0.113.9\r\nX-Forwarded-For: 1.1.1.1\r\n",
        "/xri",
    ),
    ("CF-Connecting-IP: 198.51.100.1\r\n", "/cf"),
    (
        "cf-connecting-ip: 198.51.100.2\r\nCF-Connecting-IP: 198.51.100.3\r\n",
        "/cf",
    ),
    ("X-Forwarded-For: 1.1.1.1\r\n", "/loc"),
];

/// Every case on every server; the ephemeral port of the connection's own
/// peer is masked.
fn xff_answers(ports: [u16; 3]) -> Vec<String> {
    let mut out = Vec::new();
    for (headers, path) in XFF_CASES {
        for (i, p) in ports.iter().enumerate() {
            let body = get_h(*p, path, headers);
            let masked: Vec<String> = body
                .trim_end()
                .split('|')
                .map(|f| match f.parse::<u32>() {
                    Ok(n) if n > 10000 => "EPHEMERAL".into(),
                    _ => f.to_string(),
                })
                .collect();
            out.push(format!(
                "server {i} {path} {headers:?} => {}",
                masked.join("|")
            ));
        }
    }
    out
}

fn two_ports() -> (u16, u16) {
    loop {
        let (a, b) = (free_port(), free_port());
        if a != b {
            return (a, b);
        }
    }
}

#[test]
fn forwarded_addresses_are_read_as_nginx_reads_them() {
    let (on, loc) = two_ports();
    let s = Server::start(&one_worker_conf(&xff_servers(on, loc)));
    assert!(wait_port(on, Duration::from_secs(5)) && wait_port(loc, Duration::from_secs(5)));
    let ours = xff_answers([s.port, on, loc]);
    let line = |i: usize| ours[i].rsplit("=> ").next().unwrap().to_string();
    // recursive off: the last entry; on: the last untrusted one.
    assert_eq!(line(0), "10.0.0.2||127.0.0.1");
    assert_eq!(line(1), "1.1.1.1||127.0.0.1");
    // Untrusted peer (server 2): nothing changes.
    assert_eq!(line(2), "127.0.0.1|EPHEMERAL|127.0.0.1");
    assert_eq!(line(7), "1.1.1.1||127.0.0.1");
    let (on2, loc2) = two_ports();
    let Some(n) = Nginx::start(&xff_servers(on2, loc2)) else {
        eprintln!("skipped the comparison: no nginx at {NGINX}");
        return;
    };
    assert!(wait_port(on2, Duration::from_secs(5)) && wait_port(loc2, Duration::from_secs(5)));
    let theirs = xff_answers([n.port, on2, loc2]);
    for (a, b) in ours.iter().zip(&theirs) {
        assert_eq!(a, b, "porter (left) and nginx (right) differ");
    }
}

#[test]
fn allow_deny_limits_and_logs_see_the_real_address() {
    let conf = one_worker_conf(
        "  log_format addrs '$remote_addr $realip_remote_addr $proxy_add_x_forwarded_for';\n\
         limit_req_zone $binary_remote_addr zone=per_client:1m rate=1r/m;\n\
         server { listen 127.0.0.1:{PORT}; server_name localhost;\n\
           access_log {PREFIX}/logs/addrs.log addrs;\n\
           set_real_ip_from 127.0.0.1;\n\
           root {PREFIX};\n\
           location / { deny 203.0.113.5; allow all; }\n\
           location /limited { limit_req zone=per_client; }\n\
           location /late { set_real_ip_from 127.0.0.1; real_ip_header X-Client;\n\
             deny 192.0.2.77; allow all; return 204; }\n\
           location /late-static { set_real_ip_from 127.0.0.1;\n\
             real_ip_header X-Client; deny 192.0.2.77; allow all; }\n\
         }",
    );
    let prefix = TempDir::new("realip");
    prefix.write("ok", "ok");
    prefix.write("limited", "ok");
    let s = Server::start_in(prefix, &conf, &[]);
    let status = |path: &str, h: &str| {
        raw(
            s.port,
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{h}\r\n")
                .as_bytes(),
        )
        .status
    };
    assert_eq!(status("/ok", "X-Real-IP: 203.0.113.5\r\n"), 403);
    assert_eq!(status("/ok", "X-Real-IP: 203.0.113.6\r\n"), 200);
    assert_eq!(status("/ok", ""), 200);
    // One request a minute per real client: two clients behind the same
    // proxy each get their first.
    assert_eq!(status("/limited", "X-Real-IP: 198.51.100.1\r\n"), 200);
    assert_eq!(status("/limited", "X-Real-IP: 198.51.100.2\r\n"), 200);
    assert_eq!(status("/limited", "X-Real-IP: 198.51.100.1\r\n"), 503);
    // Location-level realip runs before the access phase, after `return`.
    assert_eq!(status("/late", "X-Client: 192.0.2.77\r\n"), 204);
    assert_eq!(status("/late-static", "X-Client: 192.0.2.77\r\n"), 403);
    assert_eq!(status("/late-static", "X-Client: 192.0.2.78\r\n"), 404);
    let log = s.wait_log(
        "logs/error.log",
        "access forbidden by rule, client: 192.0.2.77",
        Duration::from_secs(5),
    );
    assert!(
        log.contains("access forbidden by rule, client: 203.0.113.5,"),
        "{log}"
    );
    assert!(
        log.contains("by zone \"per_client\", client: 198.51.100.1,"),
        "{log}"
    );
    let access = s.wait_log("logs/addrs.log", "192.0.2.78", Duration::from_secs(5));
    assert!(
        access.contains("203.0.113.5 127.0.0.1 203.0.113.5\n"),
        "{access}"
    );
    assert!(
        access.contains("127.0.0.1 127.0.0.1 127.0.0.1\n"),
        "{access}"
    );
    assert!(
        access.contains("192.0.2.78 127.0.0.1 192.0.2.78\n"),
        "{access}"
    );
}

/// A hand-built PROXY protocol version 2 header.
fn v2(command: u8, family: u8, body: &[u8]) -> Vec<u8> {
    let mut h = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    h.push(0x20 | command);
    h.push(family);
    h.extend_from_slice(&(body.len() as u16).to_be_bytes());
    h.extend_from_slice(body);
    h
}

fn v2_tcp4() -> Vec<u8> {
    let mut body = vec![192, 0, 2, 10, 192, 0, 2, 20, 0x30, 0x39, 0x01, 0xbb];
    // An ALPN TLV and a NOOP TLV, both skipped.
    body.extend_from_slice(&[0x01, 0, 2, b'h', b'2', 0x04, 0, 3, 0, 0, 0]);
    v2(1, 0x11, &body)
}

fn v2_tcp6() -> Vec<u8> {
    let mut body = vec![0u8; 36];
    body[..16].copy_from_slice(
        &"2001:db8::10"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    body[16..32].copy_from_slice(
        &"2001:db8::20"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    body[32..34].copy_from_slice(&4242u16.to_be_bytes());
    body[34..36].copy_from_slice(&8443u16.to_be_bytes());
    v2(1, 0x21, &body)
}

fn with_get(header: &[u8]) -> Vec<u8> {
    let mut v = header.to_vec();
    v.extend_from_slice(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    v
}

/// A `proxy_protocol` address whose server takes the client's address
/// from the PROXY header (`/`), and one that does not (`/own`, in a
/// server on `own`).
fn pp_server(own: u16) -> String {
    format!(
        "server {{ listen 127.0.0.1:{{PORT}} proxy_protocol; server_name localhost;\n\
           set_real_ip_from 127.0.0.1; real_ip_header proxy_protocol;\n\
           location / {{ {SHOW_PP} }}\n\
         }}\n\
         server {{ listen 127.0.0.1:{own} proxy_protocol; server_name localhost;\n\
           location / {{ {SHOW_PP} }}\n\
         }}\n"
    )
}

/// What a PROXY-protocol server answers to each header (ephemeral ports
/// masked), and `None` for a closed connection.
fn pp_answers(ports: [u16; 2]) -> Vec<Option<String>> {
    let cases: Vec<Vec<u8>> = vec![
        b"PROXY TCP4 192.0.2.1 192.0.2.2 5555 80\r\n".to_vec(),
        b"PROXY TCP6 2001:db8::1 2001:db8::2 6666 443\r\n".to_vec(),
        b"PROXY UNKNOWN\r\n".to_vec(),
        b"PROXY UNKNOWN 1.1.1.1 2.2.2.2 1 2\r\n".to_vec(),
        b"PROXY TCP4 1.2.3 192.0.2.2 5555 80\r\n".to_vec(),
        v2_tcp4(),
        v2_tcp6(),
        v2(0, 0x11, &[1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 0, 2]),
        v2(1, 0x00, &[]),
        // Malformed: closed.
        Vec::new(),
        b"PROXY TCP4 192.0.2.1 192.0.2.2 5555\r\n".to_vec(),
        b"PROXY TCP4 192.0.2.1 192.0.2.2 5555 99999\r\n".to_vec(),
        b"PROXY TCP9 192.0.2.1 192.0.2.2 5555 80\r\n".to_vec(),
        v2(1, 0x11, &[192, 0, 2, 1]),
    ];
    let mut out = Vec::new();
    for c in &cases {
        for port in ports {
            let req = with_get(c);
            out.push(ask(port, &req).map(|b| {
                b.trim_end()
                    .split('|')
                    .map(|f| match f.parse::<u32>() {
                        Ok(n) if n > 10000 && n != 12345 => "EPHEMERAL".into(),
                        _ => f.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join("|")
            }));
        }
    }
    out
}

#[test]
fn proxy_protocol_v1_and_v2_headers_name_the_client_as_in_nginx() {
    let own = free_port();
    let s = Server::start(&one_worker_conf(&pp_server(own)));
    assert!(wait_port(own, Duration::from_secs(5)));
    let ours = pp_answers([s.port, own]);
    let got = |i: usize| ours[i].clone();
    let want = [
        (0, "192.0.2.1|5555|127.0.0.1|192.0.2.1|5555|192.0.2.2|80"),
        (
            1,
            "127.0.0.1|EPHEMERAL|127.0.0.1|192.0.2.1|5555|192.0.2.2|80",
        ),
        (
            2,
            "2001:db8::1|6666|127.0.0.1|2001:db8::1|6666|2001:db8::2|443",
        ),
        (4, "127.0.0.1|EPHEMERAL|127.0.0.1||||"),
        (8, "127.0.0.1|EPHEMERAL|127.0.0.1|1.2.3|5555|192.0.2.2|80"),
        (
            10,
            "192.0.2.10|12345|127.0.0.1|192.0.2.10|12345|192.0.2.20|443",
        ),
        (
            12,
            "2001:db8::10|4242|127.0.0.1|2001:db8::10|4242|2001:db8::20|8443",
        ),
        (14, "127.0.0.1|EPHEMERAL|127.0.0.1||||"),
    ];
    for (i, w) in want {
        assert_eq!(got(i).as_deref(), Some(w), "case {i}");
    }
    for i in 18..ours.len() {
        assert_eq!(got(i), None, "case {i}: a malformed header closes");
    }
    let own2 = free_port();
    let Some(n) = Nginx::start(&pp_server(own2)) else {
        eprintln!("skipped the comparison: no nginx at {NGINX}");
        return;
    };
    assert!(wait_port(own2, Duration::from_secs(5)));
    let theirs = pp_answers([n.port, own2]);
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(a, b, "case {i}: porter (left) and nginx (right) differ");
    }
}

#[test]
fn a_broken_proxy_header_closes_with_nginx_line() {
    let s = Server::start(&one_worker_conf(&pp_server(free_port())));
    let n = Nginx::start(&pp_server(free_port()));
    let mut ports = vec![s.port];
    ports.extend(n.as_ref().map(|n| n.port));
    let mut bad_version = v2_tcp4();
    bad_version[12] = 0x31;
    for port in ports {
        assert_eq!(
            ask(port, b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"),
            None
        );
        assert_eq!(ask(port, &with_get(&bad_version)), None);
    }
    let line = format!(
        "broken header: \"GET / HTTP/1.1\" while reading PROXY protocol, client: 127.0.0.1, server: 127.0.0.1:{}",
        s.port
    );
    let log = s.wait_log("logs/error.log", &line, Duration::from_secs(5));
    let logged = log.lines().find(|l| l.contains(&line));
    assert!(logged.is_some_and(|l| l.contains(" [error] ")), "{log}");
    assert!(
        log.contains(
            "unknown PROXY protocol version: 3 while reading PROXY protocol, client: 127.0.0.1"
        ),
        "{log}"
    );
    if let Some(n) = n {
        std::thread::sleep(Duration::from_millis(200));
        let theirs = n.error_log();
        // nginx 1.22 prints the whole first read (newer nginx cuts it at
        // the line's end, as porter does).
        assert!(
            theirs.contains("broken header: \"GET / HTTP/1.1"),
            "{theirs}"
        );
        assert!(
            theirs.contains(
                "unknown PROXY protocol version: 3 while reading PROXY protocol, client: 127.0.0.1"
            ),
            "{theirs}"
        );
    }
}

#[test]
fn a_proxy_header_in_pieces_is_read_whole() {
    let s = Server::start(&one_worker_conf(&pp_server(free_port())));
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    for piece in [&b"PROXY TCP4 19"[..], b"2.0.2.1 192.0.2.2 5555 80\r", b"\n"] {
        c.write_all(piece).unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    c.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    let r = read_response(&mut c, &mut buf, false).expect("an answer");
    assert_eq!(
        r.text(),
        "192.0.2.1|5555|127.0.0.1|192.0.2.1|5555|192.0.2.2|80\n"
    );
    // A v2 header cut in two as well.
    let h = v2_tcp6();
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.write_all(&h[..20]).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    c.write_all(&with_get(&h[20..])).unwrap();
    let mut buf = Vec::new();
    let r = read_response(&mut c, &mut buf, false).expect("an answer");
    assert_eq!(
        r.text(),
        "2001:db8::10|4242|127.0.0.1|2001:db8::10|4242|2001:db8::20|8443\n"
    );
}

#[test]
fn a_proxy_header_comes_before_the_tls_handshake() {
    use common::tls::{self as t, Alg, Ca, ClientOpts};
    let ca = Ca::new();
    let dir = TempDir::new("pptls");
    ca.leaf(&["a.test"], Alg::Ecdsa).write(dir.path(), "a");
    let conf = one_worker_conf(&format!(
        "server {{ listen 127.0.0.1:{{PORT}} ssl proxy_protocol; server_name a.test;\n\
           ssl_certificate {{PREFIX}}/a.crt; ssl_certificate_key {{PREFIX}}/a.key;\n\
           set_real_ip_from 127.0.0.1; real_ip_header proxy_protocol;\n\
           location / {{ {SHOW_PP} }}\n\
         }}\n"
    ));
    let s = Server::start_in(dir, &conf, &[]);
    let cfg = t::client(&ca, ClientOpts::default());
    for header in [
        b"PROXY TCP4 192.0.2.1 192.0.2.2 5555 443\r\n".to_vec(),
        v2_tcp4(),
    ] {
        let mut tcp = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        tcp.write_all(&header).unwrap();
        let name = rustls::pki_types::ServerName::try_from("a.test").unwrap();
        let conn = rustls::ClientConnection::new(cfg.clone(), name).unwrap();
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        tls.write_all(b"GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut out = Vec::new();
        let _ = tls.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out);
        let want = if header.starts_with(b"PROXY") {
            "192.0.2.1|5555|127.0.0.1|192.0.2.1|5555|192.0.2.2|443"
        } else {
            "192.0.2.10|12345|127.0.0.1|192.0.2.10|12345|192.0.2.20|443"
        };
        assert!(text.contains(want), "{text}");
    }
}

/// An origin whose connections start with a PROXY line: it answers each
/// request with that line and the connection's number, and keeps the
/// connection open.
struct PpOrigin {
    port: u16,
    lines: Arc<Mutex<Vec<String>>>,
}

fn pp_origin() -> PpOrigin {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let seen = lines.clone();
    std::thread::spawn(move || {
        for (n, c) in l.incoming().enumerate() {
            let Ok(mut c) = c else { return };
            let seen = seen.clone();
            std::thread::spawn(move || {
                c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut buf = Vec::new();
                let mut first: Option<String> = None;
                let mut chunk = [0u8; 4096];
                loop {
                    if first.is_none() {
                        if let Some(i) = find(&buf, b"\r\n") {
                            let line = String::from_utf8_lossy(&buf[..i]).into_owned();
                            seen.lock().unwrap().push(line.clone());
                            first = Some(line);
                            buf.drain(..i + 2);
                        }
                    }
                    if let (Some(line), Some(i)) = (&first, find(&buf, b"\r\n\r\n")) {
                        buf.drain(..i + 4);
                        let body = format!("{line}|conn {n}\n");
                        let head =
                            format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
                        if c.write_all(format!("{head}{body}").as_bytes()).is_err() {
                            return;
                        }
                        continue;
                    }
                    match c.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(k) => buf.extend_from_slice(&chunk[..k]),
                    }
                }
            });
        }
    });
    PpOrigin { port, lines }
}

#[test]
fn proxy_protocol_on_starts_each_upstream_connection_with_the_client() {
    let o = pp_origin();
    let conf = one_worker_conf(&format!(
        "upstream o {{ server 127.0.0.1:{}; keepalive 8; }}\n\
         server {{ listen 127.0.0.1:{{PORT}}; server_name localhost;\n\
           set_real_ip_from 127.0.0.1;\n\
           location / {{ proxy_pass http://o; proxy_http_version 1.1;\n\
             proxy_set_header Connection \"\"; proxy_protocol on; }}\n\
         }}\n",
        o.port
    ));
    let s = Server::start(&conf);
    // Two requests on one client connection: one upstream connection,
    // one header naming the client's address and port.
    let mut a = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    let a_port = a.local_addr().unwrap().port();
    let mut buf = Vec::new();
    let mut bodies = Vec::new();
    for _ in 0..2 {
        a.write_all(b"GET /x HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .unwrap();
        bodies.push(read_response(&mut a, &mut buf, false).unwrap().text());
    }
    let want = format!("PROXY TCP4 127.0.0.1 127.0.0.1 {a_port} {}", s.port);
    assert!(
        bodies[0].starts_with(&format!("{want}|conn ")),
        "{bodies:?}"
    );
    assert_eq!(bodies[0], bodies[1], "one upstream connection, one header");
    // Another client, named by X-Real-IP: a connection of its own, whose
    // header names the real address (no port: realip read none).
    let b = get_h(s.port, "/x", "X-Real-IP: 198.51.100.7\r\n");
    assert!(
        b.starts_with(&format!(
            "PROXY TCP4 198.51.100.7 127.0.0.1 0 {}|conn ",
            s.port
        )),
        "{b}"
    );
    assert_ne!(b.rsplit('|').next(), bodies[0].rsplit('|').next());
    // The first client again, on a new connection: not its old upstream
    // connection (another client port).
    let c = get_h(s.port, "/x", "");
    assert!(!c.contains(&format!(" {a_port} ")), "{c}");
    assert_eq!(o.lines.lock().unwrap().len(), 3);
}
