//! The `ssl_*` lines stock NGINX configurations carry (issue 26 item 4),
//! against the real binary: `ssl_protocols` with versions rustls lacks
//! (one `[warn]`), `ssl_dhparam`, `ssl_ecdh_curve` (a client that offers
//! only a group the server left out fails), OCSP stapling from
//! `ssl_stapling_file` (the bytes reach a client that asks),
//! `ssl_session_ticket_key` (a session made on one porter resumes on
//! another given the same key file, not on one with a different key),
//! `ssl_buffer_size` (record sizes on the wire), `ssl_password_file`
//! (encrypted keys), `ssl_reject_handshake` (alert `unrecognized_name`),
//! `ssl_conf_command`, `ssl_trusted_certificate`, and their errors with
//! file:line.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::tls::{self as t, Alg, Ca, ClientOpts};
use crate::common::{Server, TempDir};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};

fn conf(servers: &str) -> String {
    format!(
        "daemon off;\nworker_processes 2;\npid {{PREFIX}}/porter.pid;\nerror_log {{PREFIX}}/logs/error.log info;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n  default_type application/octet-stream;\n  access_log off;\n{servers}\n}}\n"
    )
}

const PAIR: &str = "ssl_certificate {PREFIX}/a.crt; ssl_certificate_key {PREFIX}/a.key;";

fn prefix(ca: &Ca) -> TempDir {
    let dir = TempDir::new("tlsdir");
    ca.leaf(&["a.test"], Alg::Ecdsa).write(dir.path(), "a");
    std::fs::create_dir_all(dir.path().join("logs")).unwrap();
    dir
}

/// `porter -t` on a TLS server whose body is `body` (its first line is
/// t.conf:10): success and stderr.
fn test_config(dir: &TempDir, body: &str) -> (bool, String) {
    let text = common::config_text(
        &conf(&format!("server {{ listen 127.0.0.1:8443 ssl;\n{body}\n}}")),
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

fn lines_with<'a>(out: &'a str, what: &str) -> Vec<&'a str> {
    out.lines().filter(|l| l.contains(what)).collect()
}

/// RFC 7919's ffdhe2048 as `openssl genpkey -genparam` writes it.
const FFDHE2048: &str = "-----BEGIN DH PARAMETERS-----\nMIIBCAKCAQEA//////////+t+FRYortKmq/cViAnPTzx2LnFg84tNpWp4TZBFGQz\n+8yTnc4kmz75fS/jY2MMddj2gbICrsRhetPfHtXV/WVhJDP1H18GbtCFY2VVPe0a\n87VXE15/V8k1mE8McODmi3fipona8+/och3xWKE2rec1MKzKT0g6eXq8CrGCsyT7\nYdEIqUuyyOP7uWrat2DX9GgdT0Kj3jlN9K5W7edjcrsZCwenyO4KbXCeAvzhzffi\n7MA0BM0oNC9hkXL+nOmFg/+OTxIy7vKBg8P+OxtMb61zO7X8vC7CIAXFjvGDfRaD\nssbzSibBsu/6iGtCOGEoXJf//////////wIBAg==\n-----END DH PARAMETERS-----\n";

#[test]
fn stock_nginx_ssl_lines_load_with_one_warn_or_notice_naming_file_and_line() {
    let ca = Ca::new();
    let dir = prefix(&ca);
    dir.write("dh.pem", FFDHE2048);
    dir.write("ticket.key", [7u8; 80]);
    dir.write("ca.pem", ca.pem());
    dir.write("resp.der", [0x30, 0x03, 0x0a, 0x01, 0x00]);
    let body = format!(
        "{PAIR}\n\
         ssl_protocols TLSv1 TLSv1.1 TLSv1.2 TLSv1.3;\n\
         ssl_prefer_server_ciphers on;\n\
         ssl_dhparam {{PREFIX}}/dh.pem;\n\
         ssl_ecdh_curve X25519:prime256v1:secp384r1:X448;\n\
         ssl_stapling on; ssl_stapling_verify on;\n\
         ssl_stapling_responder http://ocsp.example/;\n\
         ssl_trusted_certificate {{PREFIX}}/ca.pem;\n\
         ssl_session_ticket_key {{PREFIX}}/ticket.key;\n\
         ssl_buffer_size 4k; ssl_verify_depth 2;\n\
         ssl_conf_command Options KTLS;\n\
         ssl_early_data on;\n"
    )
    .replace("{PREFIX}", dir.path().to_str().unwrap());
    let (ok, out) = test_config(&dir, &body);
    assert!(ok, "{out}");
    let warns = lines_with(&out, "[warn]");
    let want = [
        (
            "\"TLSv1\", \"TLSv1.1\" in \"ssl_protocols\" left out",
            "t.conf:11",
        ),
        ("\"X448\" in \"ssl_ecdh_curve\" left out", "t.conf:14"),
        ("\"ssl_conf_command Options\" is ignored", "t.conf:20"),
    ];
    assert_eq!(warns.len(), want.len(), "{out}");
    for (w, at) in want {
        let l = lines_with(&out, w);
        assert_eq!(l.len(), 1, "{w}: {out}");
        assert!(
            l[0].starts_with("porter: [warn] ") && l[0].ends_with(at),
            "{out}"
        );
    }
    let notices = lines_with(&out, "[notice]");
    assert_eq!(notices.len(), 2, "{out}");
    assert!(
        notices[0].contains("\"ssl_dhparam\" is not used") && notices[0].ends_with("t.conf:13")
    );
    assert!(notices[1].contains("porter does not fetch OCSP") && notices[1].ends_with("t.conf:15"));

    // nginx takes the same lines (where it is installed).
    if std::path::Path::new("/usr/sbin/nginx").exists() {
        let ng = body.replace("ssl_ktls", "#");
        let text = format!(
            "error_log stderr;\nevents {{}}\nhttp {{ server {{ listen 127.0.0.1:8443 ssl;\n{ng}\n}} }}\n"
        );
        let p = dir.write("ng.conf", text);
        let out = std::process::Command::new("/usr/sbin/nginx")
            .args([
                "-t",
                "-p",
                dir.path().to_str().unwrap(),
                "-c",
                p.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "nginx: {err}");
    }
}

/// Bad `ssl_*` lines (`{PREFIX}` the server's prefix), the `[emerg]`
/// message each gets and where (`:LINE` of `t.conf`).
const BAD_SSL_LINES: &[(&str, &str, &str)] = &[
    (
        "ssl_protocols TLSv1 TLSv1.1;",
        "no protocol porter offers in \"ssl_protocols\"",
        ":11",
    ),
    ("ssl_protocols TLSv1.4;", "invalid value \"TLSv1.4\"", ":11"),
    ("ssl_dhparam {PREFIX}/nope.pem;", "BIO_new_file(", ":11"),
    (
        "ssl_dhparam {PREFIX}/garbage.pem;",
        "PEM_read_bio_DHparams(",
        ":11",
    ),
    (
        "ssl_ecdh_curve X25519:bogus;",
        "SSL_CTX_set1_curves_list(\"X25519:bogus\") failed (group 'bogus' cannot be set)",
        ":11",
    ),
    (
        "ssl_ecdh_curve X448;",
        "SSL_CTX_set1_curves_list(\"X448\") failed",
        ":11",
    ),
    (
        "ssl_session_ticket_key {PREFIX}/short.key;",
        "must be 48 or 80 bytes",
        ":11",
    ),
    (
        "ssl_session_ticket_key {PREFIX}/nope.key;",
        "open() \"",
        ":11",
    ),
    (
        "ssl_password_file {PREFIX}/nope;",
        "(2: No such file or directory)",
        ":11",
    ),
    ("ssl_password_file {PREFIX}/empty;", "empty file", ":11"),
    (
        "ssl_trusted_certificate {PREFIX}/garbage.pem;",
        "SSL_CTX_load_verify_locations(",
        ":11",
    ),
    (
        "ssl_stapling on;\nssl_stapling_file {PREFIX}/garbage.pem;",
        "d2i_OCSP_RESPONSE_bio(",
        ":12",
    ),
    (
        "ssl_stapling_responder ldap://x;",
        "invalid URL prefix",
        ":11",
    ),
];

#[test]
fn bad_ssl_lines_are_emerg_with_file_and_line() {
    let ca = Ca::new();
    let dir = prefix(&ca);
    dir.write("short.key", [1u8; 47]);
    dir.write("garbage.pem", "garbage\n");
    dir.write("empty", "");
    dir.write(
        "baddh.pem",
        "-----BEGIN DH PARAMETERS-----\nMIIBCAKCAQEA//8=\n-----END DH PARAMETERS-----\n",
    );
    for &(line, want, at) in BAD_SSL_LINES {
        let body = format!("{PAIR}\n{line}").replace("{PREFIX}", dir.path().to_str().unwrap());
        let (ok, out) = test_config(&dir, &body);
        assert!(!ok, "accepted: {line}");
        assert!(
            out.contains("[emerg]") && out.contains(want),
            "{line}\n=> {out}"
        );
        assert!(out.contains(&format!("t.conf{at}")), "{line}\n=> {out}");
    }
    // ssl_stapling_file is not read while stapling is off (as NGINX).
    let body = format!(
        "{PAIR}\nssl_stapling_file {}/nope.der;",
        dir.path().display()
    );
    let (ok, out) = test_config(&dir, &body);
    assert!(ok, "{out}");
}

/// A client offering only `groups` for key exchange.
fn client_with_groups(
    ca: &Ca,
    groups: Vec<&'static dyn rustls::crypto::SupportedKxGroup>,
) -> Arc<ClientConfig> {
    let mut provider = rustls::crypto::ring::default_provider();
    provider.kx_groups = groups;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der()).unwrap();
    Arc::new(
        ClientConfig::builder_with_provider(Arc::new(provider))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

#[test]
fn ecdh_curve_limits_the_key_exchange_groups() {
    use rustls::crypto::ring::kx_group;
    let ca = Ca::new();
    let s = Server::start_in(
        prefix(&ca),
        &conf(&format!(
            "server {{ listen 127.0.0.1:{{PORT}} ssl; {PAIR}\n ssl_ecdh_curve X25519;\n location / {{ return 200 ok; }} }}"
        )),
        &[],
    );
    let x25519 = client_with_groups(&ca, vec![kx_group::X25519]);
    assert_eq!(t::get(s.port, &x25519, "a.test", "/").status, 200);
    for versions in [&rustls::version::TLS13, &rustls::version::TLS12] {
        let mut provider = rustls::crypto::ring::default_provider();
        provider.kx_groups = vec![kx_group::SECP384R1];
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.der()).unwrap();
        let p384 = Arc::new(
            ClientConfig::builder_with_provider(Arc::new(provider))
                .with_protocol_versions(&[versions])
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth(),
        );
        let err = t::Conn::open(s.port, &p384, "a.test")
            .err()
            .expect("P-384 only must fail");
        assert!(
            err.to_string().contains("HandshakeFailure"),
            "{versions:?}: {err}"
        );
    }
}

/// Checks the chain with webpki and keeps the OCSP response the server stapled.
#[derive(Debug)]
struct KeepOcsp {
    inner: Arc<dyn ServerCertVerifier>,
    got: Mutex<Option<Vec<u8>>>,
}

impl ServerCertVerifier for KeepOcsp {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        *self.got.lock().unwrap() = Some(ocsp.to_vec());
        self.inner
            .verify_server_cert(end_entity, intermediates, server_name, &[], now)
    }

    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(m, c, d)
    }

    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(m, c, d)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[test]
fn the_stapling_file_reaches_clients_over_tls12_and_tls13() {
    let ca = Ca::new();
    let dir = prefix(&ca);
    // A DER structure standing for an OCSP response (porter staples the
    // file's bytes as they are, as NGINX does).
    let resp: Vec<u8> = [vec![0x30, 0x82, 0x01, 0x00], vec![0xab; 256]].concat();
    dir.write("resp.der", &resp);
    let s = Server::start_in(
        dir,
        &conf(&format!(
            "server {{ listen 127.0.0.1:{{PORT}} ssl; {PAIR}\n ssl_stapling on; ssl_stapling_file {{PREFIX}}/resp.der;\n location / {{ return 200 ok; }} }}"
        )),
        &[],
    );
    for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.der()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .unwrap();
        let keep = Arc::new(KeepOcsp {
            inner,
            got: Mutex::new(None),
        });
        let cfg = Arc::new(
            ClientConfig::builder_with_provider(provider)
                .with_protocol_versions(&[version])
                .unwrap()
                .dangerous()
                .with_custom_certificate_verifier(keep.clone())
                .with_no_client_auth(),
        );
        assert_eq!(t::get(s.port, &cfg, "a.test", "/").status, 200);
        assert_eq!(
            keep.got.lock().unwrap().as_deref(),
            Some(&resp[..]),
            "{version:?}"
        );
    }
    // openssl s_client -status sees a response (it cannot parse this one).
    let out = std::process::Command::new("openssl")
        .args([
            "s_client",
            "-status",
            "-connect",
            &format!("127.0.0.1:{}", s.port),
            "-servername",
            "a.test",
        ])
        .stdin(std::process::Stdio::null())
        .output();
    if let Ok(out) = out {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!text.contains("OCSP response: no response sent"), "{text}");
    }
}

fn start_with_keys(ca: &Ca, keys: &[&[u8]], extra: &str) -> Server {
    let dir = prefix(ca);
    let mut lines = String::new();
    for (i, k) in keys.iter().enumerate() {
        dir.write(&format!("t{i}.key"), k);
        lines.push_str(&format!("ssl_session_ticket_key {{PREFIX}}/t{i}.key;\n"));
    }
    Server::start_in(
        dir,
        &conf(&format!(
            "server {{ listen 127.0.0.1:{{PORT}} ssl; {PAIR}\n{lines}{extra}\n location / {{ return 200 ok; }} }}"
        )),
        &[],
    )
}

/// A session made on `first` offered to `second`: resumed?
fn resumes(
    ca: &Ca,
    version: &'static rustls::SupportedProtocolVersion,
    first: u16,
    second: u16,
) -> bool {
    let c = t::client(
        ca,
        ClientOpts {
            versions: vec![version],
            schemes: None,
        },
    );
    let mut a = t::Conn::open(first, &c, "a.test").unwrap();
    // TLS 1.3 tickets come after the handshake: read a response first.
    a.request("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", false)
        .unwrap();
    let mut b = t::Conn::open(second, &c, "a.test").unwrap();
    let r = b
        .request("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", false)
        .unwrap();
    assert_eq!(r.status, 200);
    b.resumed()
}

#[test]
fn ticket_key_files_let_a_second_instance_resume_and_a_different_key_does_not() {
    let ca = Ca::new();
    let k80: Vec<u8> = (0..80u8).collect();
    let k48: Vec<u8> = (100..148u8).collect();
    let other: Vec<u8> = (0..80u8).map(|b| b ^ 0x5a).collect();
    let a = start_with_keys(&ca, &[&k80], "");
    // The second has a new first key and a's as the second: a's tickets open.
    let b = start_with_keys(&ca, &[&k48, &k80], "");
    let c = start_with_keys(&ca, &[&other], "");
    for v in [&rustls::version::TLS13, &rustls::version::TLS12] {
        assert!(resumes(&ca, v, a.port, b.port), "{v:?}: a -> b");
        assert!(
            resumes(&ca, v, b.port, b.port),
            "{v:?}: b's own (48-byte key)"
        );
        assert!(
            !resumes(&ca, v, a.port, c.port),
            "{v:?}: a -> c (other key)"
        );
        assert!(
            !resumes(&ca, v, b.port, a.port),
            "{v:?}: b seals with a key a lacks"
        );
    }
    // openssl agrees: -sess_out on a, -sess_in on b (TLS 1.2, ticket).
    let dir = TempDir::new("sess");
    let sess = dir.path().join("s.pem");
    let run = |port: u16, arg: &str| {
        let out = std::process::Command::new("openssl")
            .args([
                "s_client",
                "-tls1_2",
                "-connect",
                &format!("127.0.0.1:{port}"),
                "-servername",
                "a.test",
                arg,
                sess.to_str().unwrap(),
            ])
            .stdin(std::process::Stdio::null())
            .output()
            .ok()?;
        Some(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    if run(a.port, "-sess_out").is_some() {
        let again = run(b.port, "-sess_in").unwrap();
        assert!(again.contains("Reused, TLSv1.2"), "{again}");
        let other = run(c.port, "-sess_in").unwrap();
        assert!(other.contains("New, TLSv1.2"), "{other}");
    }
}

/// Sends a request for `path` on a TLS 1.2 connection and counts the
/// application-data records of the answer: (records, largest).
fn records(port: u16, ca: &Ca, path: &str) -> (usize, usize) {
    let c = t::client(
        ca,
        ClientOpts {
            versions: vec![&rustls::version::TLS12],
            schemes: None,
        },
    );
    let mut conn = t::Conn::open(port, &c, "a.test").unwrap();
    conn.tls
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .unwrap();
    conn.tls.flush().unwrap();
    let mut raw = Vec::new();
    conn.tls.sock.read_to_end(&mut raw).unwrap();
    let (mut n, mut largest, mut at) = (0, 0, 0);
    while raw.len() >= at + 5 {
        let len = u16::from_be_bytes([raw[at + 3], raw[at + 4]]) as usize;
        if raw[at] == 0x17 {
            n += 1;
            largest = largest.max(len);
        }
        at += 5 + len;
    }
    (n, largest)
}

#[test]
fn buffer_size_bounds_the_records() {
    let ca = Ca::new();
    let dir = prefix(&ca);
    dir.write("html/20k.bin", vec![b'x'; 20_000]);
    let s = Server::start_in(
        dir,
        &conf(&format!(
            "server {{ listen 127.0.0.1:{{PORT}} ssl; {PAIR}\n ssl_buffer_size 4k; ssl_ktls off;\n root {{PREFIX}}/html; }}"
        )),
        &[],
    );
    let (n, largest) = records(s.port, &ca, "/20k.bin");
    // 4096 bytes of plaintext and the AEAD's nonce and tag.
    assert!(
        n >= 5 && largest <= 4096 + 24,
        "{n} records, largest {largest}"
    );
}

#[test]
fn encrypted_keys_open_with_a_line_of_the_password_file() {
    let ca = Ca::new();
    let dir = prefix(&ca);
    let p = dir.path();
    dir.write("rsa.key", t::RSA_KEY);
    dir.write("pw", "wrong\r\nsecret\n");
    dir.write("badpw", "wrong\n");
    let ossl = |args: &[&str]| {
        std::process::Command::new("openssl")
            .current_dir(p)
            .args(args)
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    };
    // PKCS#8 PBES2 (AES-256-CBC) and traditional PEM (AES-128-CBC).
    if !ossl(&[
        "pkcs8",
        "-topk8",
        "-v2",
        "aes-256-cbc",
        "-in",
        "a.key",
        "-out",
        "enc8.key",
        "-passout",
        "pass:secret",
    ]) || !ossl(&[
        "ec",
        "-aes128",
        "-in",
        "a.key",
        "-out",
        "trad.key",
        "-passout",
        "pass:secret",
    ]) {
        eprintln!("skipped: no openssl");
        return;
    }
    let trad = std::fs::read_to_string(p.join("trad.key")).unwrap();
    assert!(trad.contains("Proc-Type: 4,ENCRYPTED"), "{trad}");
    for key in ["enc8.key", "trad.key"] {
        let body = format!(
            "ssl_certificate {0}/a.crt; ssl_certificate_key {0}/{key};\nssl_password_file {0}/pw;",
            p.display()
        );
        let (ok, out) = test_config(&dir, &body);
        assert!(ok, "{key}: {out}");
        let body = format!("ssl_certificate {0}/a.crt; ssl_certificate_key {0}/{key};\nssl_password_file {0}/badpw;", p.display());
        let (ok, out) = test_config(&dir, &body);
        assert!(
            !ok && out.contains("no password of \"ssl_password_file\" opens it"),
            "{key}: {out}"
        );
        let body = format!(
            "ssl_certificate {0}/a.crt; ssl_certificate_key {0}/{key};",
            p.display()
        );
        let (ok, out) = test_config(&dir, &body);
        assert!(
            !ok && out.contains("encrypted and no \"ssl_password_file\""),
            "{key}: {out}"
        );
    }
    // And it serves.
    let s = Server::start_in(
        dir,
        &conf(
            "server { listen 127.0.0.1:{PORT} ssl; ssl_certificate {PREFIX}/a.crt; ssl_certificate_key {PREFIX}/enc8.key;\n ssl_password_file {PREFIX}/pw; location / { return 200 ok; } }"
        ),
        &[],
    );
    let c = t::client(&ca, ClientOpts::default());
    assert_eq!(t::get(s.port, &c, "a.test", "/").status, 200);
}

#[test]
fn reject_handshake_answers_unrecognized_name_and_serves_the_named_server() {
    let ca = Ca::new();
    let s = Server::start_in(
        prefix(&ca),
        &conf(&format!(
            "server {{ listen 127.0.0.1:{{PORT}} ssl default_server; ssl_reject_handshake on; }}\n\
             server {{ listen 127.0.0.1:{{PORT}} ssl; server_name a.test; {PAIR}\n location / {{ return 200 ok; }} }}"
        )),
        &[],
    );
    let c = t::client(&ca, ClientOpts::default());
    assert_eq!(t::get(s.port, &c, "a.test", "/").status, 200);
    let err = t::Conn::open(s.port, &c, "other.test")
        .err()
        .expect("refused");
    assert!(err.to_string().contains("UnrecognisedName"), "{err}");
    // No SNI at all (an IP address): the default server refuses too.
    let tcp = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let conn = rustls::ClientConnection::new(c.clone(), ServerName::try_from("127.0.0.1").unwrap())
        .unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let err = tls
        .conn
        .complete_io(&mut tls.sock)
        .and_then(|_| tls.conn.complete_io(&mut tls.sock));
    assert!(format!("{err:?}").contains("UnrecognisedName"), "{err:?}");
    s.wait_log(
        "logs/error.log",
        "handshake rejected while SSL handshaking",
        Duration::from_secs(5),
    );
}

/// `ssl_ecdh_curve secp521r1` (old hardening guides, perusio's
/// drupal-with-nginx) loads and a client that offers P-521 gets it over
/// TLS 1.3 and 1.2 (OpenSSL's `s_client` names the group), as from nginx.
#[test]
fn ecdh_curve_secp521r1_is_offered() {
    let ca = Ca::new();
    let s = Server::start_in(
        prefix(&ca),
        &conf(&format!(
            "server {{ listen 127.0.0.1:{{PORT}} ssl; {PAIR}\n ssl_ecdh_curve secp521r1;\n location / {{ return 200 ok; }} }}"
        )),
        &[],
    );
    for version in ["-tls1_3", "-tls1_2"] {
        let out = std::process::Command::new("openssl")
            .args(["s_client", "-connect", &format!("127.0.0.1:{}", s.port)])
            .args(["-servername", "a.test", version, "-groups", "P-521:X25519"])
            .stdin(std::process::Stdio::null())
            .output()
            .expect("openssl");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("ECDH, secp521r1, 521 bits") || text.contains("group: secp521r1"),
            "{version}: {text}"
        );
    }
}
