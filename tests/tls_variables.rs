//! The `$ssl_*` variables of a client certificate and of the session
//! (`$ssl_client_s_dn`, `_i_dn`, `_serial`, `_fingerprint`, `_cert`,
//! `_escaped_cert`, `_raw_cert`, `_v_start`, `_v_end`, `_v_remain`,
//! `$ssl_curve`, `$ssl_early_data`, `$ssl_session_id`), and
//! `ssl_verify_depth`'s bound on the client's chain: porter and
//! Debian's nginx (OpenSSL) given the same certificates and the same
//! client answer the same bytes; without nginx the values are checked
//! against what the test knows of the certificate.

use std::sync::Arc;

use crate::common::tls::{self as t, Alg, Ca};
use crate::common::{Nginx, Server, TempDir};
use rcgen::{CertificateParams, DnType, SerialNumber};
use rustls::ClientConfig;

/// One variable a line, `name=value`, in a fixed order.
const VARS: &[&str] = &[
    "ssl_client_verify",
    "ssl_client_s_dn",
    "ssl_client_i_dn",
    "ssl_client_serial",
    "ssl_client_fingerprint",
    "ssl_client_v_start",
    "ssl_client_v_end",
    "ssl_client_v_remain",
    "ssl_curve",
    "ssl_early_data",
    "ssl_protocol",
];

fn echo(vars: &[&str]) -> String {
    let body: String = vars.iter().map(|v| format!("{v}=${v}\\n")).collect();
    format!("return 200 \"{body}\";")
}

/// The same server block for porter and nginx: TLS on `{PORT}` with the
/// certificate of `dir`, client certificates asked for and checked
/// against the test CA; `/` echoes [`VARS`], `/cert` the PEM forms,
/// `/session` the session ID.
fn server_block(dir: &std::path::Path) -> String {
    let d = dir.display();
    format!(
        "server {{ listen 127.0.0.1:{{PORT}} ssl; server_name s.test;\n\
           ssl_protocols TLSv1.2 TLSv1.3;\n\
           ssl_certificate {d}/s.crt; ssl_certificate_key {d}/s.key;\n\
           ssl_verify_client optional; ssl_client_certificate {d}/ca.pem;\n\
           location / {{ {} }}\n\
           location = /raw {{ return 200 \"$ssl_client_raw_cert\"; }}\n\
           location = /cert {{ return 200 \"$ssl_client_cert\"; }}\n\
           location = /escaped {{ return 200 \"$ssl_client_escaped_cert\"; }}\n\
           location = /session {{ return 200 \"$ssl_session_id\"; }} }}",
        echo(VARS)
    )
}

/// A client certificate whose subject needs RFC 2253's escapes and
/// OpenSSL's `\XX` for non-ASCII bytes, with a set serial and validity.
fn client_leaf(ca: &Ca) -> t::Leaf {
    let mut p = CertificateParams::new(vec!["client.test".to_string()]).unwrap();
    p.distinguished_name.push(DnType::CountryName, "FR");
    p.distinguished_name
        .push(DnType::OrganizationName, "Acme, Inc.");
    p.distinguished_name
        .push(DnType::OrganizationalUnitName, "R+D <lab>; \"x\"");
    p.distinguished_name.push(DnType::CommonName, " Zoé #1 ");
    p.serial_number = Some(SerialNumber::from(vec![0x00, 0x9a, 0x01, 0xff, 0x10]));
    p.not_before = rcgen::date_time_ymd(2024, 1, 5);
    p.not_after = rcgen::date_time_ymd(2099, 12, 31);
    ca.leaf_from(p)
}

struct Setup {
    ca: Ca,
    client: t::Leaf,
    certs: TempDir,
}

fn setup() -> Setup {
    let ca = Ca::new();
    let certs = TempDir::new("tlsvars");
    ca.leaf(&["s.test"], Alg::Ecdsa).write(certs.path(), "s");
    certs.write("ca.pem", ca.pem());
    let client = client_leaf(&ca);
    Setup { ca, client, certs }
}

fn porter(s: &Setup) -> Server {
    let conf = format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n  access_log off;\n{}\n}}\n",
        server_block(s.certs.path())
    );
    Server::start_in(TempDir::new("tlsvars-p"), &conf, &[])
}

fn get(port: u16, cfg: &Arc<ClientConfig>, path: &str) -> String {
    let r = t::get(port, cfg, "s.test", path);
    assert_eq!(r.status, 200, "{path}");
    r.text()
}

fn value<'a>(body: &'a str, name: &str) -> &'a str {
    body.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {name} in {body:?}"))
}

#[test]
fn client_certificate_variables_are_openssl_s_forms() {
    let s = setup();
    let p = porter(&s);
    let cfg = t::client_with_cert(&s.ca, &s.client);
    let body = get(p.port, &cfg, "/");
    assert_eq!(value(&body, "ssl_client_verify"), "SUCCESS", "{body}");
    assert_eq!(
        value(&body, "ssl_client_s_dn"),
        "OU=R\\+D \\<lab\\>\\; \\\"x\\\",O=Acme\\, Inc.,C=FR,CN=\\ Zo\\C3\\A9 #1\\ "
    );
    assert_eq!(value(&body, "ssl_client_i_dn"), "CN=porter test CA");
    assert_eq!(value(&body, "ssl_client_serial"), "9A01FF10");
    let sha1 = {
        use sha1::Digest;
        sha1::Sha1::digest(&s.client.der)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    assert_eq!(value(&body, "ssl_client_fingerprint"), sha1);
    assert_eq!(
        value(&body, "ssl_client_v_start"),
        "Jan  5 00:00:00 2024 GMT"
    );
    assert_eq!(value(&body, "ssl_client_v_end"), "Dec 31 00:00:00 2099 GMT");
    let remain: u64 = value(&body, "ssl_client_v_remain").parse().unwrap();
    assert!((20_000..30_000).contains(&remain), "{remain}");
    assert_eq!(value(&body, "ssl_curve"), "X25519");
    assert_eq!(value(&body, "ssl_early_data"), "");
    // rcgen writes CN first: RFC 2253 puts the last RDN first.
    // The PEM forms: as written, with tabs, urlencoded.
    let raw = get(p.port, &cfg, "/raw");
    assert_eq!(raw, s.client.cert_pem.replace("\r\n", "\n"));
    let tabbed = get(p.port, &cfg, "/cert");
    assert_eq!(tabbed, raw.trim_end_matches('\n').replace('\n', "\n\t"));
    let escaped = get(p.port, &cfg, "/escaped");
    assert!(
        escaped.starts_with("-----BEGIN%20CERTIFICATE-----%0A"),
        "{escaped}"
    );
    assert!(!escaped.contains(['+', '/', '=', '\n']), "{escaped}");
    // Without a certificate (or on plain HTTP) they are empty.
    let anon = get(p.port, &t::client(&s.ca, Default::default()), "/");
    assert_eq!(value(&anon, "ssl_client_verify"), "NONE");
    assert_eq!(value(&anon, "ssl_client_s_dn"), "");
    assert_eq!(value(&anon, "ssl_client_serial"), "");
    assert_eq!(value(&anon, "ssl_curve"), "X25519");
}

#[test]
fn porter_and_nginx_give_the_same_bytes() {
    let s = setup();
    let Some(n) = Nginx::start(&server_block(s.certs.path())) else {
        eprintln!("skipped: nginx is not installed");
        return;
    };
    let p = porter(&s);
    for versions in [vec![&rustls::version::TLS13], vec![&rustls::version::TLS12]] {
        let cfg = t::client_with_cert_versions(&s.ca, &s.client, &versions);
        for path in ["/", "/raw", "/cert", "/escaped"] {
            let ours = get(p.port, &cfg, path);
            let theirs = get(n.port, &cfg, path);
            assert_eq!(ours, theirs, "{path} over {versions:?}");
        }
    }
}

/// `$ssl_session_id` twice on one connection (resumed or not).
fn session_ids(port: u16, cfg: &Arc<ClientConfig>) -> (bool, String, String) {
    let mut c = t::Conn::open(port, cfg, "s.test").unwrap();
    let mut ask = |close: &str| {
        let req = format!("GET /session HTTP/1.1\r\nHost: s.test\r\n{close}\r\n");
        c.request(&req, false).unwrap().text()
    };
    let (a, b) = (ask(""), ask("Connection: close\r\n"));
    (c.resumed(), a, b)
}

fn is_hex64(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

#[test]
fn session_ids_take_openssl_s_forms() {
    let s = setup();
    let p = porter(&s);
    let nginx = Nginx::start(&server_block(s.certs.path()));
    if nginx.is_none() {
        eprintln!("nginx is not installed: porter's forms only");
    }
    for versions in [vec![&rustls::version::TLS13], vec![&rustls::version::TLS12]] {
        let tls13 = versions[0] == &rustls::version::TLS13;
        for port in std::iter::once(p.port).chain(nginx.as_ref().map(|n| n.port)) {
            let cfg = t::client_with_cert_versions(&s.ca, &s.client, &versions);
            let (resumed, first, again) = session_ids(port, &cfg);
            assert!(!resumed);
            assert_eq!(first, again, "stable within a connection");
            // A full TLS 1.2 handshake issuing a ticket (no session
            // cache): the ServerHello carries no ID. TLS 1.3: a fresh
            // random one per connection.
            assert_eq!(is_hex64(&first), tls13, "{first:?} {versions:?} :{port}");
            let (resumed, second, _) = session_ids(port, &cfg);
            assert!(resumed, "{versions:?} :{port}");
            // Resumed by ticket, TLS 1.2 echoes the client's ID.
            assert!(is_hex64(&second), "{second:?} {versions:?} :{port}");
            assert_ne!(first, second);
        }
    }
}

/// `ssl_verify_depth` (NGINX's default 1) on chains of 0, 1 and 2
/// intermediate CAs between the client's certificate and the
/// `ssl_client_certificate` root: what OpenSSL answers in
/// `$ssl_client_verify`, and porter the same.
#[test]
fn ssl_verify_depth_bounds_the_client_chain() {
    let s = setup();
    let i1 = s.ca.intermediate("porter test intermediate 1");
    let i2 = i1.intermediate("porter test intermediate 2");
    let direct = s.ca.leaf(&["direct.test"], Alg::Ecdsa);
    let one = i1.leaf(&["one.test"], Alg::Ecdsa);
    let two = i2.leaf(&["two.test"], Alg::Ecdsa);
    let i1_der = i1.der().to_vec();
    let i2_der = i2.der().to_vec();
    let clients = [
        (
            "direct",
            t::client_with_chain(&s.ca, std::slice::from_ref(&direct.der), &direct.key_pem),
        ),
        (
            "one",
            t::client_with_chain(&s.ca, &[one.der.clone(), i1_der.clone()], &one.key_pem),
        ),
        (
            "two",
            t::client_with_chain(&s.ca, &[two.der.clone(), i2_der, i1_der], &two.key_pem),
        ),
    ];
    let block = |depth: &str| {
        server_block(s.certs.path()).replace(
            "ssl_verify_client optional;",
            &format!("ssl_verify_client optional_no_ca; {depth}"),
        )
    };
    let mut seen = Vec::new();
    for depth in ["", "ssl_verify_depth 0;", "ssl_verify_depth 2;"] {
        let n = Nginx::start(&block(depth));
        let conf = format!(
            "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
             error_log {{PREFIX}}/logs/error.log info;\n\
             events {{ worker_connections 256; }}\n\
             http {{\n  access_log off;\n{}\n}}\n",
            block(depth)
        );
        let p = Server::start_in(TempDir::new("tlsvars-depth"), &conf, &[]);
        for (name, cfg) in &clients {
            let ours = get(p.port, cfg, "/");
            let ours = value(&ours, "ssl_client_verify").to_string();
            if let Some(n) = &n {
                let theirs = get(n.port, cfg, "/");
                assert_eq!(ours, value(&theirs, "ssl_client_verify"), "{name} {depth}");
            }
            seen.push(format!("{depth} {name}: {ours}"));
        }
    }
    // OpenSSL's count: `depth` intermediates at most (NGINX's default 1).
    let no = "FAILED:unable to get local issuer certificate";
    let want = [
        (" direct", "SUCCESS"),
        (" one", "SUCCESS"),
        (" two", no),
        ("ssl_verify_depth 0; direct", "SUCCESS"),
        ("ssl_verify_depth 0; one", no),
        ("ssl_verify_depth 0; two", no),
        ("ssl_verify_depth 2; direct", "SUCCESS"),
        ("ssl_verify_depth 2; one", "SUCCESS"),
        ("ssl_verify_depth 2; two", "SUCCESS"),
    ]
    .map(|(k, v)| format!("{k}: {v}"));
    assert_eq!(seen, want);
}
