//! HTTPS: the real binary over real TLS sockets, with certificates made in
//! the test (rcgen) and rustls as the client. Handshakes per protocol
//! version, SNI choosing certificate and server block, several pairs per
//! server picked by the client's signature algorithms, resumption across
//! connections (and so across workers), plain HTTP to the TLS port,
//! reloads with a new and with a bad certificate, files over TLS through
//! the disk layer (cold, `aio threads`, ranges), config errors with
//! file:line, hostile handshakes, and outside clients (curl, openssl).

use crate::common;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::tls::{self as t, Alg, Ca, ClientOpts};
use crate::common::{Server, TempDir};
use rustls::SignatureScheme;

const VARS: &str =
    r#"return 200 "$scheme $https $ssl_protocol $ssl_cipher $ssl_server_name $server_name\n";"#;

/// A config around `servers` (whole `server { }` blocks) with logs in the prefix.
fn conf(servers: &str) -> String {
    format!(
        "daemon off;\nworker_processes 2;\npid {{PREFIX}}/porter.pid;\nerror_log {{PREFIX}}/logs/error.log info;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n  default_type application/octet-stream;\n  access_log {{PREFIX}}/logs/access.log;\n\
         log_format tls '$ssl_protocol $ssl_session_reused $status';\n{servers}\n}}\n"
    )
}

/// A prefix holding certificates for `a.test` (ECDSA) and `b.test` (RSA).
fn prefix_with_certs(ca: &Ca) -> (TempDir, t::Leaf, t::Leaf) {
    let dir = TempDir::new("tls");
    let a = ca.leaf(&["a.test"], Alg::Ecdsa);
    let b = ca.leaf(&["b.test"], Alg::Rsa);
    a.write(dir.path(), "a");
    b.write(dir.path(), "b");
    (dir, a, b)
}

fn text(r: &common::Resp) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

#[test]
fn handshakes_over_tls12_and_tls13_and_refuses_a_version_not_enabled() {
    let ca = Ca::new();
    let (dir, _, _) = prefix_with_certs(&ca);
    let only13 = common::free_port();
    let body = format!(
        "server {{ listen 127.0.0.1:{{PORT}} ssl; server_name a.test;\n\
           ssl_certificate {{PREFIX}}/a.crt; ssl_certificate_key {{PREFIX}}/a.key;\n\
           location / {{ {VARS} }} }}\n\
         server {{ listen 127.0.0.1:{only13} ssl; server_name a.test;\n\
           ssl_protocols TLSv1.3;\n\
           ssl_certificate {{PREFIX}}/a.crt; ssl_certificate_key {{PREFIX}}/a.key;\n\
           location / {{ {VARS} }} }}\n"
    );
    let s = Server::start_in(dir, &conf(&body), &[]);
    let v12 = t::client(
        &ca,
        ClientOpts {
            versions: vec![&rustls::version::TLS12],
            schemes: None,
        },
    );
    let v13 = t::client(
        &ca,
        ClientOpts {
            versions: vec![&rustls::version::TLS13],
            schemes: None,
        },
    );

    let r = t::get(s.port, &v12, "a.test", "/");
    assert_eq!(r.status, 200);
    assert_eq!(
        text(&r),
        "https on TLSv1.2 ECDHE-ECDSA-AES256-GCM-SHA384 a.test a.test\n"
    );
    let r = t::get(s.port, &v13, "a.test", "/");
    assert_eq!(
        text(&r),
        "https on TLSv1.3 TLS_AES_256_GCM_SHA384 a.test a.test\n"
    );

    assert!(t::Conn::open(only13, &v13, "a.test").is_ok());
    // ALPN: HTTP/1.1 is chosen from what a browser offers.
    let mut alpn = (*v13).clone();
    alpn.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let conn = t::Conn::open(s.port, &std::sync::Arc::new(alpn), "a.test").unwrap();
    assert_eq!(conn.tls.conn.alpn_protocol(), Some(&b"http/1.1"[..]));
    let refused = t::Conn::open(only13, &v12, "a.test");
    assert!(
        refused.is_err(),
        "TLS 1.2 accepted where only TLSv1.3 is enabled"
    );
    let log = s.wait_log(
        "logs/error.log",
        "while SSL handshaking",
        Duration::from_secs(5),
    );
    assert!(
        log.contains("[info]") && log.contains("SSL_do_handshake() failed"),
        "{log}"
    );
}

#[test]
fn sni_picks_the_certificate_and_the_server_block() {
    let ca = Ca::new();
    let (dir, a, b) = prefix_with_certs(&ca);
    let body = format!(
        "server {{ listen 127.0.0.1:{{PORT}} ssl default_server; server_name a.test;\n\
           ssl_certificate {{PREFIX}}/a.crt; ssl_certificate_key {{PREFIX}}/a.key;\n\
           location / {{ {VARS} }} }}\n\
         server {{ listen 127.0.0.1:{{PORT}} ssl; server_name b.test *.b.test;\n\
           ssl_certificate {{PREFIX}}/b.crt; ssl_certificate_key {{PREFIX}}/b.key;\n\
           location / {{ {VARS} }} }}\n"
    );
    let s = Server::start_in(dir, &conf(&body), &[]);
    let c = t::client(&ca, ClientOpts::default());

    let mut conn = t::Conn::open(s.port, &c, "b.test").unwrap();
    assert_eq!(
        conn.peer_cert(),
        b.der,
        "SNI b.test must get b's certificate"
    );
    let r = conn
        .request(
            "GET / HTTP/1.1\r\nHost: b.test\r\nConnection: close\r\n\r\n",
            false,
        )
        .unwrap();
    assert_eq!(
        text(&r),
        "https on TLSv1.3 TLS_AES_256_GCM_SHA384 b.test b.test\n"
    );

    let conn = t::Conn::open(s.port, &c, "a.test").unwrap();
    assert_eq!(conn.peer_cert(), a.der);
}

#[test]
fn several_pairs_per_server_are_picked_by_the_clients_signature_algorithms() {
    let ca = Ca::new();
    let (dir, a, _) = prefix_with_certs(&ca);
    let rsa = ca.leaf(&["a.test"], Alg::Rsa);
    rsa.write(dir.path(), "a-rsa");
    let body = "server { listen 127.0.0.1:{PORT} ssl; server_name a.test;\n\
           ssl_certificate {PREFIX}/a-rsa.crt; ssl_certificate_key {PREFIX}/a-rsa.key;\n\
           ssl_certificate {PREFIX}/a.crt; ssl_certificate_key {PREFIX}/a.key;\n\
           location / { return 200 ok; } }\n";
    let s = Server::start_in(dir, &conf(body), &[]);

    let any = t::client(&ca, ClientOpts::default());
    assert_eq!(
        t::Conn::open(s.port, &any, "a.test").unwrap().peer_cert(),
        a.der,
        "ECDSA first for a client that prefers it"
    );
    for versions in [vec![&rustls::version::TLS13], vec![&rustls::version::TLS12]] {
        let rsa_only = t::client(
            &ca,
            ClientOpts {
                versions,
                schemes: Some(vec![
                    SignatureScheme::RSA_PSS_SHA256,
                    SignatureScheme::RSA_PKCS1_SHA256,
                ]),
            },
        );
        let conn = t::Conn::open(s.port, &rsa_only, "a.test").unwrap();
        assert_eq!(
            conn.peer_cert(),
            rsa.der,
            "a client that verifies only RSA gets the RSA pair"
        );
    }
}

#[test]
fn sessions_resume_across_connections_and_workers() {
    let ca = Ca::new();
    let (dir, _, _) = prefix_with_certs(&ca);
    // TLS 1.3 with tickets (the default); TLS 1.2 with tickets off and a
    // shared session cache.
    let p12 = common::free_port();
    let body = format!(
        "server {{ listen 127.0.0.1:{{PORT}} ssl; server_name a.test;\n\
           ssl_certificate {{PREFIX}}/a.crt; ssl_certificate_key {{PREFIX}}/a.key;\n\
           access_log {{PREFIX}}/logs/tls.log tls; location / {{ return 200 ok; }} }}\n\
         server {{ listen 127.0.0.1:{p12} ssl; server_name a.test;\n\
           ssl_protocols TLSv1.2; ssl_session_tickets off; ssl_session_cache shared:SSL:1m;\n\
           ssl_certificate {{PREFIX}}/a.crt; ssl_certificate_key {{PREFIX}}/a.key;\n\
           access_log {{PREFIX}}/logs/tls.log tls; location / {{ return 200 ok; }} }}\n"
    );
    let s = Server::start_in(dir, &conf(&body), &[]);
    for (port, versions) in [
        (s.port, vec![&rustls::version::TLS13]),
        (p12, vec![&rustls::version::TLS12]),
    ] {
        let c = t::client(
            &ca,
            ClientOpts {
                versions,
                schemes: None,
            },
        );
        let mut first = t::Conn::open(port, &c, "a.test").unwrap();
        assert!(!first.resumed());
        // TLS 1.3 tickets arrive after the handshake: read a response first.
        first
            .request("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", false)
            .unwrap();
        // Two workers: eight connections land on both.
        for i in 0..8 {
            let mut again = t::Conn::open(port, &c, "a.test").unwrap();
            assert!(again.resumed(), "connection {i} to {port} was not resumed");
            let r = again
                .request("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", false)
                .unwrap();
            assert_eq!(r.status, 200);
        }
    }
    let log = s.wait_log("logs/tls.log", "TLSv1.2 r 200", Duration::from_secs(5));
    assert!(
        log.contains("TLSv1.3 . 200") && log.contains("TLSv1.3 r 200"),
        "{log}"
    );
}

#[test]
fn expired_sessions_are_not_resumed() {
    let ca = Ca::new();
    let (dir, _, _) = prefix_with_certs(&ca);
    let body =
        "server { listen 127.0.0.1:{PORT} ssl; server_name a.test; ssl_session_timeout 1s;\n\
           ssl_certificate {PREFIX}/a.crt; ssl_certificate_key {PREFIX}/a.key;\n\
           location / { return 200 ok; } }\n";
    let s = Server::start_in(dir, &conf(body), &[]);
    let c = t::client(&ca, ClientOpts::default());
    let mut first = t::Conn::open(s.port, &c, "a.test").unwrap();
    first
        .request("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", false)
        .unwrap();
    std::thread::sleep(Duration::from_millis(2200));
    assert!(!t::Conn::open(s.port, &c, "a.test").unwrap().resumed());
}

#[test]
fn plain_http_to_the_tls_port_gets_nginx_400_page_and_a_close() {
    let ca = Ca::new();
    let (dir, _, _) = prefix_with_certs(&ca);
    let body = "server { listen 127.0.0.1:{PORT} ssl; server_name a.test;\n\
           ssl_certificate {PREFIX}/a.crt; ssl_certificate_key {PREFIX}/a.key; root {PREFIX}; } \n";
    let s = Server::start_in(dir, &conf(body), &[]);
    let r = common::get(s.port, "/");
    assert_eq!(r.status, 400);
    assert_eq!(r.header("Connection"), Some("close"));
    assert_eq!(
        r.text(),
        "<html>\r\n<head><title>400 The plain HTTP request was sent to HTTPS port</title></head>\r\n<body>\r\n\
         <center><h1>400 Bad Request</h1></center>\r\n<center>The plain HTTP request was sent to HTTPS port</center>\r\n\
         <hr><center>porter/0.1.0</center>\r\n</body>\r\n</html>\r\n"
    );
    let log = s.wait_log("logs/error.log", "plain HTTP", Duration::from_secs(5));
    assert!(
        log.contains("[info]")
            && log.contains(
                "client sent plain HTTP request to HTTPS port while reading client request headers"
            ),
        "{log}"
    );
    // The log thread writes the access line a moment after the response.
    let access = s.wait_log("logs/access.log", "\" 400 ", Duration::from_secs(5));
    assert!(access.contains("\"GET / HTTP/1.1\" 400 "), "{access}");
}

#[test]
fn stalled_and_garbage_handshakes_close_with_one_info_line() {
    let ca = Ca::new();
    let (dir, _, _) = prefix_with_certs(&ca);
    let body =
        "server { listen 127.0.0.1:{PORT} ssl; server_name a.test; ssl_handshake_timeout 1s;\n\
           ssl_certificate {PREFIX}/a.crt; ssl_certificate_key {PREFIX}/a.key;\n\
           location / { return 200 ok; } }\n";
    let s = Server::start_in(dir, &conf(body), &[]);
    // A TLS record header, then nothing.
    let mut stalled = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    stalled.write_all(&[0x16, 0x03, 0x01]).unwrap();
    let started = Instant::now();
    let got = common::read_all(&mut stalled);
    assert!(got.is_empty());
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(4),
        "{waited:?}"
    );
    let log = s.wait_log("logs/error.log", "client timed out", Duration::from_secs(5));
    assert!(
        log.contains(
            "client timed out (110: Connection timed out) while SSL handshaking, client: 127.0.0.1"
        ),
        "{log}"
    );

    // A handshake record full of garbage: an alert and a close, not a panic.
    let mut junk = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    let mut rec = vec![0x16, 0x03, 0x01, 0x00, 0x40];
    rec.extend(std::iter::repeat_n(0xAB, 0x40));
    junk.write_all(&rec).unwrap();
    let got = common::read_all(&mut junk);
    assert!(
        got.is_empty() || got[0] == 0x15,
        "expected an alert: {got:?}"
    );
    let c = t::client(&ca, ClientOpts::default());
    assert_eq!(
        t::get(s.port, &c, "a.test", "/").status,
        200,
        "the server still serves"
    );

    // After a good handshake and request: a forged application-data record.
    let mut conn = t::Conn::open(s.port, &c, "a.test").unwrap();
    let r = conn
        .request("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", false)
        .unwrap();
    assert_eq!(r.status, 200);
    let mut forged = vec![0x17, 0x03, 0x03, 0x00, 0x40];
    forged.extend(std::iter::repeat_n(0x5A, 0x40));
    conn.tls.sock.write_all(&forged).unwrap();
    let log = s.wait_log(
        "logs/error.log",
        "SSL_read() failed",
        Duration::from_secs(5),
    );
    assert!(
        log.contains("[info]") && log.contains("while waiting for request, client: 127.0.0.1"),
        "{log}"
    );
    assert!(
        conn.request("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", false)
            .is_none(),
        "the connection was closed"
    );
    assert_eq!(
        t::get(s.port, &c, "a.test", "/").status,
        200,
        "and the server still serves"
    );
    assert!(!s.read("logs/error.log").contains("panicked"));
}

#[test]
fn large_files_over_tls_are_byte_exact_through_the_disk_layer() {
    let ca = Ca::new();
    let (dir, _, _) = prefix_with_certs(&ca);
    let data: Vec<u8> = (0..24_000_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let file = dir.write("www/big.bin", &data);
    let body = "server { listen 127.0.0.1:{PORT} ssl; server_name a.test;\n\
           ssl_certificate {PREFIX}/a.crt; ssl_certificate_key {PREFIX}/a.key;\n\
           root {PREFIX}/www; aio threads; sendfile on;\n\
           location = /metrics { porter_metrics; } }\n";
    let s = Server::start_in(dir, &conf(body), &[]);
    // Cold: out of the page cache before the request.
    let f = std::fs::File::open(&file).unwrap();
    f.sync_all().unwrap();
    // SAFETY: a valid descriptor; advice only.
    unsafe {
        libc::posix_fadvise(
            std::os::fd::AsRawFd::as_raw_fd(&f),
            0,
            0,
            libc::POSIX_FADV_DONTNEED,
        )
    };
    let c = t::client(&ca, ClientOpts::default());
    let r = t::get(s.port, &c, "a.test", "/big.bin");
    assert_eq!(r.status, 200);
    assert!(
        r.body == data,
        "cold file differs over TLS ({} bytes)",
        r.body.len()
    );
    // Warm, twice on one connection.
    let mut conn = t::Conn::open(s.port, &c, "a.test").unwrap();
    for _ in 0..2 {
        let r = conn
            .request("GET /big.bin HTTP/1.1\r\nHost: a.test\r\n\r\n", false)
            .unwrap();
        assert!(r.body == data);
    }
    let m = t::get(s.port, &c, "a.test", "/metrics");
    let m = text(&m);
    let read = |result: &str| {
        m.lines()
            .find(|l| {
                l.starts_with("porter_fastpath_total")
                    && l.contains("op=\"read\"")
                    && l.contains(&format!("result=\"{result}\""))
            })
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    assert!(read("miss") >= 1.0, "the cold read went to the pool:\n{m}");
    assert!(read("hit") >= 1.0, "warm reads were served inline:\n{m}");
    assert!(
        !m.lines().any(|l| l.starts_with("porter_fastpath_total")
            && l.contains("op=\"sendfile\"")
            && !l.ends_with(" 0")),
        "sendfile used on a TLS connection:\n{m}"
    );
}

/// `porter_disk_send_bytes_total` per route, from the server's `/metrics`
/// on `port` (plain HTTP).
fn route_bytes(port: u16) -> [f64; 5] {
    let m = common::metrics::Metrics::fetch(port);
    ["sendfile", "copy", "pool", "uring", "read"]
        .map(|r| m.must("porter_disk_send_bytes_total", &[("route", r)]))
}

/// What each route sent between two readings, named, for messages.
fn route_delta(a: [f64; 5], b: [f64; 5]) -> Vec<(&'static str, f64)> {
    ["sendfile", "copy", "pool", "uring", "read"]
        .into_iter()
        .zip(a.iter().zip(b).map(|(a, b)| b - a))
        .collect()
}

#[test]
fn user_space_tls_never_sendfiles_a_cached_file_and_plain_http_does() {
    let ca = Ca::new();
    let (dir, _, _) = prefix_with_certs(&ca);
    let data: Vec<u8> = (0..1_000_003u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 11) as u8)
        .collect();
    let file = dir.write("www/f.bin", &data);
    // Owned by the worker user (`nobody` when the tests run as root), so
    // that `cachestat` answers and the fast path may `sendfile` inline.
    // SAFETY: no arguments.
    if unsafe { libc::geteuid() } == 0 {
        std::os::unix::fs::chown(&file, Some(65534), Some(65534)).unwrap();
    }
    let plain = common::free_port();
    let locations = "location = /metrics { porter_metrics; }\n\
           location /pool/ { alias {PREFIX}/www/; aio threads; }\n\
           location /ring/ { alias {PREFIX}/www/; aio on; }\n";
    let body = format!(
        "server {{ listen 127.0.0.1:{{PORT}} ssl; server_name a.test; ssl_ktls off;\n\
           ssl_certificate {{PREFIX}}/a.crt; ssl_certificate_key {{PREFIX}}/a.key;\n\
           root {{PREFIX}}/www; sendfile on;\n{locations} }}\n\
         server {{ listen 127.0.0.1:{plain}; server_name a.test; root {{PREFIX}}/www;\n\
           sendfile on;\n{locations} }}\n"
    );
    let s = Server::start_in(dir, &conf(&body), &[]);
    assert!(common::wait_port(plain, Duration::from_secs(10)));
    // In the page cache.
    assert_eq!(std::fs::read(&file).unwrap(), data);
    let log = s.read("logs/error.log");
    let cachestat = !log.contains("cachestat() is not");
    let uring = !log.contains("falls back to \"aio threads\"");
    let c = t::client(&ca, ClientOpts::default());
    let len = data.len() as f64;
    // Plain HTTP: the loop's zero-copy `sendfile` (`aio off`, or the fast
    // path under `aio threads` finding every page cached), the ring's
    // read and `send` under `aio on` (index of the route in `route_bytes`;
    // `None` where this kernel lacks what the route needs).
    let plain_routes = [
        ("/f.bin", Some(0)),
        ("/pool/f.bin", cachestat.then_some(0)),
        ("/ring/f.bin", uring.then_some(3)),
    ];
    for (path, route) in plain_routes {
        let before = route_bytes(plain);
        let r = common::get(plain, path);
        let d = route_delta(before, route_bytes(plain));
        assert!(r.body == data, "{path} over plain HTTP differs");
        if let Some(i) = route {
            let mut want = [0.0; 5];
            want[i] = len;
            assert_eq!(
                d,
                route_delta([0.0; 5], want),
                "{path} over plain HTTP: all by one route"
            );
        } else {
            eprintln!("{path}: this kernel lacks the fast route; plain HTTP sent it by {d:?}");
        }
        // User-space TLS: never `sendfile` (plain pages into the socket
        // under rustls's records), never the disk layer's copy `send`:
        // read, encrypted and written by the stream. The counters are read
        // before the body is judged, so that a build sending plain bytes
        // on the TLS socket fails here, whatever the client made of them.
        let before = route_bytes(plain);
        let mut conn = t::Conn::open(s.port, &c, "a.test").unwrap();
        let r = conn.request(
            &format!("GET {path} HTTP/1.1\r\nHost: a.test\r\n\r\n"),
            false,
        );
        let d = route_delta(before, route_bytes(plain));
        assert_eq!(
            d,
            route_delta([0.0; 5], [0.0, 0.0, 0.0, 0.0, len]),
            "{path} over user-space TLS: all read and written by the stream"
        );
        let r = r.unwrap_or_else(|| panic!("{path} over TLS: no response"));
        assert!(r.body == data, "{path} over TLS differs");
    }
}

#[test]
fn ranges_over_tls() {
    let ca = Ca::new();
    let (dir, _, _) = prefix_with_certs(&ca);
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    dir.write("www/r.bin", &data);
    let body = "server { listen 127.0.0.1:{PORT} ssl; server_name a.test;\n\
           ssl_certificate {PREFIX}/a.crt; ssl_certificate_key {PREFIX}/a.key; root {PREFIX}/www; }\n";
    let s = Server::start_in(dir, &conf(body), &[]);
    let c = t::client(&ca, ClientOpts::default());
    let mut conn = t::Conn::open(s.port, &c, "a.test").unwrap();
    let r = conn
        .request(
            "GET /r.bin HTTP/1.1\r\nHost: a.test\r\nRange: bytes=1000-200999\r\n\r\n",
            false,
        )
        .unwrap();
    assert_eq!(r.status, 206);
    assert_eq!(r.header("Content-Range"), Some("bytes 1000-200999/300000"));
    assert!(r.body == data[1000..201000]);
    let r = conn
        .request(
            "GET /r.bin HTTP/1.1\r\nHost: a.test\r\nRange: bytes=0-9,-10\r\n\r\n",
            false,
        )
        .unwrap();
    assert_eq!(r.status, 206);
    let body = text(&r);
    assert!(
        body.contains("Content-Range: bytes 0-9/300000")
            && body.contains("Content-Range: bytes 299990-299999/300000"),
        "{body}"
    );
}

#[test]
fn a_directory_redirect_over_tls_says_https() {
    let ca = Ca::new();
    let (dir, _, _) = prefix_with_certs(&ca);
    dir.write("www/sub/index.html", "x");
    let body = "server { listen 127.0.0.1:{PORT} ssl; server_name a.test;\n\
           ssl_certificate {PREFIX}/a.crt; ssl_certificate_key {PREFIX}/a.key; root {PREFIX}/www; }\n";
    let s = Server::start_in(dir, &conf(body), &[]);
    let c = t::client(&ca, ClientOpts::default());
    let r = t::get(s.port, &c, "a.test", "/sub");
    assert_eq!(r.status, 301);
    assert_eq!(
        r.header("Location"),
        Some(format!("https://a.test:{}/sub/", s.port).as_str())
    );
}

/// A prefix with a.test's pair and a config using it, for reload tests.
fn reload_setup(ca: &Ca) -> (Server, t::Leaf) {
    let (dir, a, _) = prefix_with_certs(ca);
    let data: Vec<u8> = (0..40_000_000u32).map(|i| (i % 253) as u8).collect();
    dir.write("www/big.bin", &data);
    let body = "server { listen 127.0.0.1:{PORT} ssl; server_name a.test;\n\
           ssl_certificate {PREFIX}/a.crt; ssl_certificate_key {PREFIX}/a.key; root {PREFIX}/www;\n\
           location = /v { return 200 v1; } }\n";
    (Server::start_in(dir, &conf(body), &[]), a)
}

#[test]
fn reload_with_a_new_certificate_swaps_it_without_dropping_a_transfer() {
    let ca = Ca::new();
    let (s, old) = reload_setup(&ca);
    let c = t::client(&ca, ClientOpts::default());
    // A 40 MB response in flight across the reload, read slowly.
    let mut busy = t::Conn::open(s.port, &c, "a.test").unwrap();
    assert_eq!(busy.peer_cert(), old.der);
    busy.tls
        .write_all(b"GET /big.bin HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n")
        .unwrap();
    let new = ca.leaf(&["a.test"], Alg::Rsa);
    new.write(s.prefix.path(), "a");
    let conf_text = s
        .read("porter.conf")
        .replace("return 200 v1", "return 200 v2");
    std::fs::write(s.prefix.path().join("porter.conf"), conf_text).unwrap();
    s.signal(1);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = t::get(s.port, &c, "a.test", "/v");
        if text(&r) == "v2" {
            break;
        }
        assert!(Instant::now() < deadline, "reload not seen");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        t::Conn::open(s.port, &c, "a.test").unwrap().peer_cert(),
        new.der
    );
    let r = busy.request("", false).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(
        r.body.len(),
        40_000_000,
        "the transfer begun before the reload completes"
    );
    assert!(r
        .body
        .iter()
        .enumerate()
        .all(|(i, b)| *b == (i % 253) as u8));
}

#[test]
fn reload_with_a_mismatched_key_keeps_the_old_certificate() {
    let ca = Ca::new();
    let (s, old) = reload_setup(&ca);
    let c = t::client(&ca, ClientOpts::default());
    // A new certificate whose key is not the one on disk.
    let other = ca.leaf(&["a.test"], Alg::Ecdsa);
    std::fs::write(s.prefix.path().join("a.crt"), &other.cert_pem).unwrap();
    s.signal(1);
    let log = s.wait_log(
        "logs/error.log",
        "key values mismatch",
        Duration::from_secs(10),
    );
    assert!(
        log.contains(&format!(
            "SSL_CTX_use_PrivateKey(\"{}/a.key\") failed (key values mismatch) in {}/porter.conf:11",
            s.prefix.path().display(),
            s.prefix.path().display()
        )),
        "{log}"
    );
    let r = t::get(s.port, &c, "a.test", "/v");
    assert_eq!(text(&r), "v1");
    assert_eq!(
        t::Conn::open(s.port, &c, "a.test").unwrap().peer_cert(),
        old.der
    );
}

/// `porter -t` on a config made of `server_body` inside a TLS server.
fn test_config(dir: &TempDir, server_body: &str) -> (bool, String) {
    let text = common::config_text(
        &conf(&format!(
            "server {{ listen 127.0.0.1:8443 ssl;\n{server_body}\n}}"
        )),
        8443,
        dir.path(),
    );
    let path = dir.write("t.conf", text);
    let out = common::run(&[
        "-t",
        "-p",
        dir.path().to_str().unwrap(),
        "-c",
        path.to_str().unwrap(),
    ]);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_tls_settings_are_emerg_with_file_and_line() {
    let ca = Ca::new();
    let (dir, _, _) = prefix_with_certs(&ca);
    std::fs::create_dir_all(dir.path().join("logs")).unwrap();
    let pair = "ssl_certificate {PREFIX}/a.crt; ssl_certificate_key {PREFIX}/a.key;";
    let (ok, out) = test_config(&dir, pair);
    assert!(ok, "{out}");
    let cases = [
        (
            format!("{pair}\nssl_protocols TLSv1 TLSv1.1;"),
            "[emerg] no protocol porter offers in \"ssl_protocols\": \"TLSv1\", \"TLSv1.1\" not supported (rustls offers TLSv1.2 and TLSv1.3 only) in",
            ":12",
        ),
        (
            format!("{pair}\nssl_ciphers HIGH:FOO-SHA;"),
            "[emerg] unknown cipher \"FOO-SHA\" in \"ssl_ciphers\"",
            ":12",
        ),
        (
            format!("{pair}\nssl_ciphers AES128-SHA:DES-CBC3-SHA;"),
            "no cipher match",
            ":12",
        ),
        (
            "ssl_certificate {PREFIX}/a.crt; ssl_certificate_key {PREFIX}/b.key;".to_string(),
            "(key values mismatch) in",
            ":11",
        ),
        (
            "ssl_certificate {PREFIX}/nope.crt; ssl_certificate_key {PREFIX}/a.key;".to_string(),
            "cannot load certificate",
            ":11",
        ),
        ("root /tmp;".to_string(), "no \"ssl_certificate\" is defined for the \"listen ... ssl\" directive in", ":10"),
    ];
    for (body, want, line) in cases {
        let body = body.replace("{PREFIX}", dir.path().to_str().unwrap());
        let (ok, out) = test_config(&dir, &body);
        assert!(!ok, "accepted: {body}");
        assert!(out.contains(want), "{body}\n=> {out}");
        assert!(out.contains(&format!("t.conf{line}")), "{body}\n=> {out}");
    }
}

/// A docroot and certificates shared by porter and nginx.
fn shared_site(ca: &Ca) -> TempDir {
    let (dir, _, _) = prefix_with_certs(ca);
    std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
    dir.write("www/index.html", "<p>hello over TLS</p>\n");
    dir.write("www/sub/index.html", "sub\n");
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 241) as u8).collect();
    dir.write("www/r.bin", &data);
    dir
}

fn site_server(dir: &Path) -> String {
    let d = dir.display();
    format!(
        "server {{ listen 127.0.0.1:{{PORT}} ssl; server_name a.test;\n\
           ssl_protocols TLSv1.2 TLSv1.3; default_type application/octet-stream;\n\
           ssl_certificate {d}/a.crt; ssl_certificate_key {d}/a.key; root {d}/www;\n\
           location = /vars {{ return 200 \"$scheme $https $ssl_protocol $ssl_cipher $ssl_server_name\\n\"; }} }}\n"
    )
}

use std::path::Path;

/// What must agree between porter and nginx in a response.
fn comparable(r: &common::Resp, port: u16) -> String {
    let mut s = format!("{}\n", r.status_line);
    for (n, v) in &r.headers {
        let n = n.to_ascii_lowercase();
        if matches!(n.as_str(), "server" | "date") {
            continue;
        }
        s.push_str(&format!(
            "{n}: {}\n",
            v.replace(&format!(":{port}"), ":<PORT>")
        ));
    }
    if std::str::from_utf8(&r.body).is_err() {
        // Binary: its length and a hash, not the bytes.
        let h = r.body.iter().fold(0xcbf29ce484222325u64, |h, b| {
            (h ^ *b as u64).wrapping_mul(0x100000001b3)
        });
        return s + &format!("<{} bytes, fnv {h:x}>", r.body.len());
    }
    let body = String::from_utf8_lossy(&r.body)
        .replace(concat!("porter/", env!("CARGO_PKG_VERSION")), "<VERSION>")
        .replace("nginx/1.22.1", "<VERSION>");
    s + &body
}

#[test]
fn behaves_as_nginx_over_tls() {
    let ca = Ca::new();
    let dir = shared_site(&ca);
    let server = site_server(dir.path());
    let Some(nginx) = common::Nginx::start(&server) else {
        eprintln!("SKIP: nginx not installed");
        return;
    };
    let porter = Server::start(&conf(&server));
    let requests = [
        "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n",
        "HEAD /index.html HTTP/1.1\r\nHost: a.test\r\n\r\n",
        "GET /missing HTTP/1.1\r\nHost: a.test\r\n\r\n",
        "GET /sub HTTP/1.1\r\nHost: a.test\r\n\r\n",
        "GET /r.bin HTTP/1.1\r\nHost: a.test\r\nRange: bytes=100-4099\r\n\r\n",
        "GET /r.bin HTTP/1.1\r\nHost: a.test\r\nRange: bytes=200000-\r\n\r\n",
        "GET /vars HTTP/1.1\r\nHost: a.test\r\n\r\n",
        "GET /r.bin HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n",
    ];
    for versions in [vec![&rustls::version::TLS13], vec![&rustls::version::TLS12]] {
        let c = t::client(
            &ca,
            ClientOpts {
                versions,
                schemes: None,
            },
        );
        let mut pc = t::Conn::open(porter.port, &c, "a.test").unwrap();
        let mut nc = t::Conn::open(nginx.port, &c, "a.test").unwrap();
        for req in requests {
            let head = req.starts_with("HEAD");
            let p = pc.request(req, head).expect("porter answered");
            let n = nc.request(req, head).expect("nginx answered");
            assert_eq!(
                comparable(&p, porter.port),
                comparable(&n, nginx.port),
                "{req}"
            );
        }
    }
    // Plain HTTP to the TLS port.
    let p = common::get(porter.port, "/");
    let n = common::get(nginx.port, "/");
    assert_eq!(comparable(&p, porter.port), comparable(&n, nginx.port));
}

#[test]
fn curl_and_openssl_speak_to_porter() {
    let ca = Ca::new();
    let dir = shared_site(&ca);
    let server = site_server(dir.path());
    let s = Server::start(&conf(&server));
    let ca_file = dir.path().join("ca.pem");
    let ca_file = ca_file.to_str().unwrap();
    let resolve = format!("a.test:{}:127.0.0.1", s.port);
    let url = format!("https://a.test:{}/vars", s.port);
    match std::process::Command::new("curl")
        .args(["-sS", "--cacert", ca_file, "--resolve", &resolve, &url])
        .output()
    {
        Ok(out) => {
            let body = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "curl: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                body.starts_with("https on TLSv1.3 ") && body.ends_with(" a.test\n"),
                "{body}"
            );
        }
        Err(_) => eprintln!("SKIP: curl not installed"),
    }
    let s_client = |version: &str| {
        std::process::Command::new("openssl")
            .args([
                "s_client",
                "-connect",
                &format!("127.0.0.1:{}", s.port),
                "-servername",
                "a.test",
            ])
            .args(["-CAfile", ca_file, version])
            .stdin(std::process::Stdio::null())
            .output()
    };
    match s_client("-tls1_2") {
        Ok(out) => {
            let o = String::from_utf8_lossy(&out.stdout);
            assert!(
                o.contains("Protocol  : TLSv1.2") || o.contains("Protocol: TLSv1.2"),
                "{o}"
            );
            assert!(o.contains("Verify return code: 0 (ok)"), "{o}");
            let o = String::from_utf8_lossy(&s_client("-tls1_3").unwrap().stdout).into_owned();
            assert!(
                o.contains("TLSv1.3") && o.contains("Verify return code: 0 (ok)"),
                "{o}"
            );
            // TLS 1.1 is not offered (OpenSSL 3 may refuse to try it at all).
            let old = s_client("-tls1_1").unwrap();
            let o = String::from_utf8_lossy(&old.stdout);
            assert!(
                !old.status.success() || !o.contains("Protocol  : TLSv1.1"),
                "{o}"
            );
        }
        Err(_) => eprintln!("SKIP: openssl not installed"),
    }
}

#[test]
fn mutual_tls_accepts_good_client_certificates_and_refuses_others_as_nginx() {
    let ca = Ca::new();
    let dir = shared_site(&ca);
    let other_ca = Ca::new();
    let good = ca.leaf(&["client.test"], Alg::Ecdsa);
    let bad = other_ca.leaf(&["client.test"], Alg::Ecdsa);
    let d = dir.path().display();
    let optional = common::free_port();
    let servers = format!(
        "server {{ listen 127.0.0.1:{{PORT}} ssl; server_name a.test; ssl_protocols TLSv1.2 TLSv1.3; default_type application/octet-stream;\n\
           ssl_certificate {d}/a.crt; ssl_certificate_key {d}/a.key;\n\
           ssl_client_certificate {d}/ca.pem; ssl_verify_client on;\n\
           location / {{ return 200 \"$ssl_client_verify\\n\"; }} }}\n\
         server {{ listen 127.0.0.1:OPTIONAL ssl; server_name a.test; ssl_protocols TLSv1.2 TLSv1.3; default_type application/octet-stream;\n\
           ssl_certificate {d}/a.crt; ssl_certificate_key {d}/a.key;\n\
           ssl_client_certificate {d}/ca.pem; ssl_verify_client optional;\n\
           location / {{ return 200 \"$ssl_client_verify\\n\"; }} }}\n"
    );
    let porter = Server::start(&conf(&servers.replace("OPTIONAL", &optional.to_string())));
    let with_good = t::client_with_cert(&ca, &good);
    let with_bad = t::client_with_cert(&ca, &bad);
    let without = t::client(&ca, ClientOpts::default());

    let ask = |port: u16, c: &std::sync::Arc<rustls::ClientConfig>| -> (u16, String) {
        let r = t::get(port, c, "a.test", "/");
        (r.status, text(&r))
    };
    assert_eq!(ask(porter.port, &with_good), (200, "SUCCESS\n".into()));
    let (st, body) = ask(porter.port, &without);
    assert_eq!(st, 400);
    assert!(
        body.contains("<title>400 No required SSL certificate was sent</title>"),
        "{body}"
    );
    let (st, body) = ask(porter.port, &with_bad);
    assert_eq!(st, 400);
    assert!(
        body.contains("<title>400 The SSL certificate error</title>"),
        "{body}"
    );
    assert_eq!(ask(optional, &without), (200, "NONE\n".into()));
    assert_eq!(ask(optional, &with_good), (200, "SUCCESS\n".into()));
    assert_eq!(ask(optional, &with_bad).0, 400);
    let log = porter.wait_log("logs/error.log", "verify error", Duration::from_secs(5));
    assert!(
        log.contains(
            "client sent no required SSL certificate while reading client request headers"
        ),
        "{log}"
    );
    assert!(
        log.contains("client SSL certificate verify error: ("),
        "{log}"
    );

    // The same answers from nginx (statuses and bodies).
    let nginx_optional = common::free_port();
    let Some(nginx) =
        common::Nginx::start(&servers.replace("OPTIONAL", &nginx_optional.to_string()))
    else {
        eprintln!("SKIP: nginx not installed");
        return;
    };
    for (c, port_p, port_n) in [
        (&with_good, porter.port, nginx.port),
        (&without, porter.port, nginx.port),
        (&with_bad, porter.port, nginx.port),
        (&without, optional, nginx_optional),
        (&with_good, optional, nginx_optional),
        (&with_bad, optional, nginx_optional),
    ] {
        let p = t::get(port_p, c, "a.test", "/");
        let n = t::get(port_n, c, "a.test", "/");
        assert_eq!(comparable(&p, port_p), comparable(&n, port_n));
    }
}

/// Sequential keep-alive GETs of `path` for `for_how_long`: (requests per
/// second, the slowest request).
fn hot_rate(
    port: u16,
    c: &std::sync::Arc<rustls::ClientConfig>,
    path: &str,
    for_how_long: Duration,
) -> (f64, Duration) {
    let mut conn = t::Conn::open(port, c, "a.test").unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: a.test\r\n\r\n");
    let start = Instant::now();
    let (mut n, mut slowest) = (0u32, Duration::ZERO);
    while start.elapsed() < for_how_long {
        let t0 = Instant::now();
        let r = conn.request(&req, false).unwrap();
        assert_eq!(r.status, 200);
        if r.header("Connection") == Some("close") {
            // `keepalive_requests` (1000) reached.
            conn = t::Conn::open(port, c, "a.test").unwrap();
        }
        slowest = slowest.max(t0.elapsed());
        n += 1;
    }
    (n as f64 / start.elapsed().as_secs_f64(), slowest)
}

#[test]
fn a_thousand_stalled_handshakes_do_not_slow_a_hot_file() {
    let ca = Ca::new();
    let (dir, _, _) = prefix_with_certs(&ca);
    dir.write("www/hot.bin", vec![7u8; 64 * 1024]);
    let body = "server { listen 127.0.0.1:{PORT} ssl; server_name a.test;\n\
           ssl_certificate {PREFIX}/a.crt; ssl_certificate_key {PREFIX}/a.key; root {PREFIX}/www; }\n";
    let text = conf(body).replace("worker_connections 256", "worker_connections 4096");
    let s = Server::start_in(dir, &text, &[]);
    let c = t::client(&ca, ClientOpts::default());
    let (alone, alone_max) = hot_rate(s.port, &c, "/hot.bin", Duration::from_secs(2));

    // A real ClientHello on each of 1000 connections, then silence: the
    // server answers each and waits for the client's Finished.
    let mut hello_conn =
        rustls::ClientConnection::new(c.clone(), "a.test".try_into().unwrap()).unwrap();
    let mut hello = Vec::new();
    hello_conn.write_tls(&mut hello).unwrap();
    let stalled: Vec<TcpStream> = (0..1000)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
            s.write_all(&hello).unwrap();
            s
        })
        .collect();
    // Measure once the server has answered every ClientHello: the burst of
    // 1000 handshake replies (a key exchange and a signature each) is work
    // done, not the stalled connections' cost, and on a loaded machine it
    // can outlast a fixed pause.
    let answered = |stalled: &[TcpStream]| {
        let mut probe = [0u8; 1];
        stalled
            .iter()
            .filter(|s| {
                s.set_nonblocking(true).unwrap();
                matches!(s.peek(&mut probe), Ok(n) if n > 0)
            })
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while answered(&stalled) < 990 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    let (during, during_max) = hot_rate(s.port, &c, "/hot.bin", Duration::from_secs(2));
    let ratio = during / alone;
    eprintln!(
        "hot 64 KB over TLS 1.3, one keep-alive connection: alone {alone:.0} req/s (slowest {alone_max:?}), \
         with 1000 stalled handshakes {during:.0} req/s (slowest {during_max:?}), ratio {ratio:.2}"
    );
    assert!(
        ratio > 0.5,
        "stalled handshakes slowed the hot file to {ratio:.2} of its rate"
    );
    assert!(
        during_max < Duration::from_millis(500),
        "a request took {during_max:?}"
    );
    // They are still open: nothing pinned a worker or was dropped early.
    let open = answered(&stalled);
    assert!(
        open >= 990,
        "only {open} stalled handshakes still have the server's answer waiting"
    );
}

/// The hardening's body rules over TLS (the connection's lingering paths
/// take the TLS stream): a body no handler reads is answered at once,
/// drained after the response, and the connection serves the next request.
#[test]
fn an_unread_body_over_tls_is_answered_at_once_and_the_connection_kept() {
    let ca = Ca::new();
    let (dir, _, _) = prefix_with_certs(&ca);
    dir.write("www/f.txt", "file\n");
    let body = "server { listen 127.0.0.1:{PORT} ssl; server_name a.test;\n\
           ssl_certificate {PREFIX}/a.crt; ssl_certificate_key {PREFIX}/a.key; root {PREFIX}/www; }\n";
    let s = Server::start_in(dir, &conf(body), &[]);
    let c = t::client(&ca, ClientOpts::default());
    let mut conn = t::Conn::open(s.port, &c, "a.test").unwrap();
    let junk = "x".repeat(40_000);
    let post = format!(
        "POST /f.txt HTTP/1.1\r\nHost: a.test\r\nContent-Length: {}\r\n\r\n{junk}",
        junk.len()
    );
    assert_eq!(conn.request(&post, false).unwrap().status, 405);
    let r = conn
        .request("GET /f.txt HTTP/1.1\r\nHost: a.test\r\n\r\n", false)
        .expect("the connection was not kept after the discarded body");
    assert_eq!((r.status, text(&r).as_str()), (200, "file\n"));
    // Ten bytes of a 100,000-byte body, the rest held back.
    let mut slow = t::Conn::open(s.port, &c, "a.test").unwrap();
    let t0 = Instant::now();
    let r = slow
        .request(
            "POST /f.txt HTTP/1.1\r\nHost: a.test\r\nContent-Length: 100000\r\n\r\nxxxxxxxxxx",
            false,
        )
        .expect("no answer while the body is held back");
    assert_eq!(r.status, 405);
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
}

/// The length of a whole response (head and `Content-Length` body) at the
/// start of `plain`, once its head is there.
fn response_len(plain: &[u8]) -> Option<usize> {
    let end = plain.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&plain[..end]).to_ascii_lowercase();
    let len = head
        .split("content-length: ")
        .nth(1)?
        .split("\r\n")
        .next()?;
    Some(end + len.parse::<usize>().ok()?)
}

/// Sends `req` on `c` and reads its response raw from the socket, counting
/// the TLS records it came in (TLS 1.2: after the handshake every record
/// is application data): the records and the plaintext.
fn records_for(c: &mut t::Conn, req: &str) -> (usize, Vec<u8>) {
    use std::io::Read;
    c.tls.write_all(req.as_bytes()).unwrap();
    c.tls.flush().unwrap();
    let (mut raw, mut plain, mut records, mut at) = (Vec::new(), Vec::new(), 0, 0);
    while response_len(&plain).is_none_or(|n| plain.len() < n) {
        let mut tmp = [0u8; 65536];
        let n = c.tls.sock.read(&mut tmp).unwrap();
        assert!(n > 0, "closed after {} bytes", plain.len());
        raw.extend_from_slice(&tmp[..n]);
        while raw.len() >= at + 5 {
            let len = u16::from_be_bytes([raw[at + 3], raw[at + 4]]) as usize;
            if raw.len() < at + 5 + len {
                break;
            }
            assert_eq!(raw[at], 0x17, "not application data");
            records += 1;
            at += 5 + len;
        }
        let mut slice = &tmp[..n];
        while !slice.is_empty() {
            c.tls.conn.read_tls(&mut slice).unwrap();
            c.tls.conn.process_new_packets().unwrap();
        }
        let _ = c.tls.conn.reader().read_to_end(&mut plain);
    }
    (records, plain)
}

#[test]
fn a_response_leaves_in_as_few_records_as_it_fills() {
    let ca = Ca::new();
    let (dir, _, _) = prefix_with_certs(&ca);
    std::fs::write(dir.path().join("1k.bin"), vec![b'a'; 1024]).unwrap();
    std::fs::write(dir.path().join("20k.bin"), vec![b'b'; 20 * 1024]).unwrap();
    let body = "server { listen 127.0.0.1:{PORT} ssl; server_name a.test;\n\
           ssl_certificate {PREFIX}/a.crt; ssl_certificate_key {PREFIX}/a.key;\n\
           root {PREFIX}; location = /r { return 200 \"hello\\n\"; } }\n";
    let s = Server::start_in(dir, &conf(body), &[]);
    let v12 = t::client(
        &ca,
        ClientOpts {
            versions: vec![&rustls::version::TLS12],
            schemes: None,
        },
    );
    let mut c = t::Conn::open(s.port, &v12, "a.test").unwrap();
    // Head and body share records (they were a record each, and the head
    // alone was a record): one seal and one send per small response, and
    // full 16 KiB records for larger ones, as NGINX's SSL buffer makes.
    for (path, size, want) in [("/1k.bin", 1024, 1), ("/r", 6, 1), ("/20k.bin", 20480, 2)] {
        let req = format!("GET {path} HTTP/1.1\r\nHost: a.test\r\n\r\n");
        let (records, plain) = records_for(&mut c, &req);
        assert!(plain.starts_with(b"HTTP/1.1 200 OK\r\n"), "{path}");
        assert_eq!(response_len(&plain), Some(plain.len()), "{path}");
        assert!(plain.len() > size && plain.len() < size + 400, "{path}");
        assert_eq!(records, want, "{path}: records");
    }
}

/// Whether the running kernel has the `tls` module.
fn has_module() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    std::path::Path::new("/sys/module/tls").exists()
        || std::fs::read_to_string(format!("/lib/modules/{}/modules.builtin", release.trim()))
            .is_ok_and(|m| m.contains("/tls.ko"))
        || std::fs::read_to_string(format!("/lib/modules/{}/modules.dep", release.trim()))
            .is_ok_and(|m| m.contains("/tls.ko"))
}

#[test]
fn one_notice_says_tls_is_encrypted_in_user_space_without_ktls() {
    let ca = Ca::new();
    let (dir, _, _) = prefix_with_certs(&ca);
    let body = "server { listen 127.0.0.1:{PORT} ssl; server_name a.test;\n\
           ssl_certificate {PREFIX}/a.crt; ssl_certificate_key {PREFIX}/a.key;\n\
           location / { return 200 \"ok\\n\"; } }\n";
    let s = Server::start_in(dir, &conf(body), &[]);
    let needle = "TLS is encrypted in user space: ";
    let needle = if has_module() { "kTLS: " } else { needle };
    let log = s.wait_log("logs/error.log", needle, Duration::from_secs(5));
    // Once per start (the master probes), not once per worker.
    let lines: Vec<&str> = log.lines().filter(|l| l.contains(needle)).collect();
    assert_eq!(lines.len(), 1, "{log}");
    assert!(lines[0].contains("[notice]"), "{log}");
    // This kernel (no CONFIG_TLS) is the case the fallback is for; where
    // the module exists the line says the kernel takes the records
    // (tests/ktls_vm.rs checks that case in a guest).
    let want = if has_module() {
        "the kernel encrypts TLS records"
    } else {
        "the kernel has no \"tls\" module (kTLS)"
    };
    assert!(lines[0].contains(want), "{log}");
    // And the connection works through the user-space path.
    let v13 = t::client(
        &ca,
        ClientOpts {
            versions: vec![&rustls::version::TLS13],
            schemes: None,
        },
    );
    assert_eq!(text(&t::get(s.port, &v13, "a.test", "/")), "ok\n");
}

#[test]
fn a_renegotiation_attempt_is_refused_and_closes_with_one_info_line() {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let ca = Ca::new();
    let (dir, _, _) = prefix_with_certs(&ca);
    std::fs::write(dir.path().join("1k.bin"), vec![b'a'; 1024]).unwrap();
    let body = "server { listen 127.0.0.1:{PORT} ssl; server_name a.test;\n\
           ssl_certificate {PREFIX}/a.crt; ssl_certificate_key {PREFIX}/a.key;\n\
           root {PREFIX}; }\n";
    let s = Server::start_in(dir, &conf(body), &[]);
    // OpenSSL's client renegotiates (TLS 1.2) on a line "R" on its input.
    let child = Command::new("openssl")
        .args(["s_client", "-tls1_2", "-servername", "a.test", "-connect"])
        .arg(format!("127.0.0.1:{}", s.port))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let Ok(mut child) = child else {
        eprintln!("SKIP: openssl not installed");
        return;
    };
    let mut input = child.stdin.take().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    input.write_all(b"R\n").unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = child.try_wait().unwrap();
    let _ = child.kill();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(status.is_some(), "the connection was not closed: {out}");
    assert!(out.contains("RENEGOTIATING"), "{out}");
    assert!(out.contains("no renegotiation"), "{out}");
    let log = s.wait_log(
        "logs/error.log",
        "SSL_read() failed",
        Duration::from_secs(5),
    );
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("SSL_read()")).collect();
    assert_eq!(lines.len(), 1, "{log}");
    assert!(lines[0].contains("[info]"), "{log}");
    assert!(!log.contains("panicked"), "{log}");
    // The worker goes on serving.
    let v12 = t::client(
        &ca,
        ClientOpts {
            versions: vec![&rustls::version::TLS12],
            schemes: None,
        },
    );
    assert_eq!(t::get(s.port, &v12, "a.test", "/1k.bin").status, 200);
}
