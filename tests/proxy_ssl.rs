//! `proxy_pass https://`: the real binary proxying over real TLS to an
//! origin with a certificate made in the test (porter's own TLS listener,
//! and Debian's nginx with OpenSSL): verification off by default and on
//! with `proxy_ssl_trusted_certificate`, the name checked and sent as SNI
//! (`proxy_ssl_name`, `proxy_ssl_server_name`), NGINX's log lines when
//! the handshake fails, keep-alive connections reused over TLS, a large
//! body, client certificates (`proxy_ssl_certificate`) to origins that
//! require them, and the config errors.

use crate::common;

use std::time::Duration;

use crate::common::tls::{Alg, Ca};
use crate::common::{Nginx, Server, TempDir};

/// The origin answers with what it saw of the TLS connection.
const ECHO: &str = r#"return 200 "sni=$ssl_server_name proto=$ssl_protocol reused=$ssl_session_reused conn=$connection\n";"#;

/// porter with a TLS origin server block on `origin` (certificate for
/// `origin.test` and 127.0.0.1, signed by `ca`) and a plain front on
/// `{PORT}` with `locations`.
fn start(ca: &Ca, origin: u16, locations: &str, http_extra: &str) -> Server {
    let dir = TempDir::new("pssl");
    ca.leaf(&["origin.test", "127.0.0.1"], Alg::Ecdsa)
        .write(dir.path(), "origin");
    dir.write("ca.pem", ca.pem());
    dir.write("other-ca.pem", Ca::new().pem());
    dir.write("big.bin", big_body());
    let conf = format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n  access_log off;\n  default_type application/octet-stream;\n{http_extra}\n\
         server {{ listen 127.0.0.1:{origin} ssl; server_name origin.test;\n\
           ssl_certificate {{PREFIX}}/origin.crt; ssl_certificate_key {{PREFIX}}/origin.key;\n\
           location / {{ {ECHO} }}\n\
           location = /big.bin {{ root {{PREFIX}}; }} }}\n\
         server {{ listen 127.0.0.1:{{PORT}};\n{locations}\n}}\n}}\n"
    );
    Server::start_in(dir, &conf, &[])
}

fn big_body() -> Vec<u8> {
    (0..5_000_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect()
}

fn field<'a>(body: &'a str, name: &str) -> &'a str {
    body.split_whitespace()
        .find_map(|f| f.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {name} in {body:?}"))
}

#[test]
fn proxies_over_tls_without_verification_or_sni_by_default() {
    let ca = Ca::new();
    let origin = common::free_port();
    let s = start(
        &ca,
        origin,
        &format!("location /o/ {{ proxy_pass https://127.0.0.1:{origin}/; }}"),
        "",
    );
    let r = common::get(s.port, "/o/x");
    assert_eq!(r.status, 200, "{}", s.read("logs/error.log"));
    let body = r.text();
    assert_eq!(field(&body, "proto"), "TLSv1.3");
    // NGINX sends no SNI unless proxy_ssl_server_name is on.
    assert_eq!(field(&body, "sni"), "");
}

#[test]
fn sends_sni_and_verifies_against_the_trusted_ca() {
    let ca = Ca::new();
    let origin = common::free_port();
    let locs = format!(
        "proxy_ssl_trusted_certificate {{PREFIX}}/ca.pem;\n\
         location /sni/ {{ proxy_pass https://127.0.0.1:{origin}/;\n\
           proxy_ssl_server_name on; proxy_ssl_name origin.test; proxy_ssl_verify on; }}\n\
         location /ip/ {{ proxy_pass https://127.0.0.1:{origin}/; proxy_ssl_verify on; }}\n\
         location /wrongname/ {{ proxy_pass https://127.0.0.1:{origin}/;\n\
           proxy_ssl_name wrong.test; proxy_ssl_verify on; }}\n\
         location /otherca/ {{ proxy_pass https://127.0.0.1:{origin}/; proxy_ssl_verify on;\n\
           proxy_ssl_trusted_certificate {{PREFIX}}/other-ca.pem; }}\n\
         location /noca/ {{ proxy_pass https://127.0.0.1:{origin}/; proxy_ssl_verify on;\n\
           proxy_ssl_trusted_certificate {{PREFIX}}/ca.pem; proxy_ssl_name origin.test; }}"
    );
    let s = start(&ca, origin, &locs, "");
    let r = common::get(s.port, "/sni/x");
    assert_eq!(r.status, 200, "{}", s.read("logs/error.log"));
    assert_eq!(field(&r.text(), "sni"), "origin.test");
    // $proxy_host is an IP address here: checked against the certificate's
    // IP entry, and never sent as SNI.
    let r = common::get(s.port, "/ip/x");
    assert_eq!(r.status, 200, "{}", s.read("logs/error.log"));
    assert_eq!(field(&r.text(), "sni"), "");
    assert_eq!(common::get(s.port, "/noca/x").status, 200);

    assert_eq!(common::get(s.port, "/wrongname/x").status, 502);
    let log = s.wait_log(
        "logs/error.log",
        "upstream SSL certificate does not match \"wrong.test\" while SSL handshaking to upstream",
        Duration::from_secs(5),
    );
    assert!(
        log.contains(&format!("upstream: \"https://127.0.0.1:{origin}/x\"")),
        "{log}"
    );
    assert_eq!(common::get(s.port, "/otherca/x").status, 502);
    // The other CA has the same name as the right one: OpenSSL's and
    // rustls's chain building both find it and fail on its signature.
    let log = s.wait_log(
        "logs/error.log",
        "upstream SSL certificate verify error: (7:certificate signature failure) while SSL handshaking to upstream",
        Duration::from_secs(5),
    );
    assert!(log.contains("(7:certificate signature failure)"), "{log}");
}

#[test]
fn keepalive_connections_are_reused_over_tls_and_sessions_resumed() {
    let ca = Ca::new();
    let origin = common::free_port();
    let http = format!("upstream tls_up {{ server 127.0.0.1:{origin}; keepalive 4; }}");
    let locs = "location /k/ { proxy_pass https://tls_up/; proxy_http_version 1.1;\n\
                  proxy_set_header Connection \"\"; }\n\
                location /c/ { proxy_pass https://tls_up/; }";
    let s = start(&ca, origin, locs, &http);
    let a = common::get(s.port, "/k/1").text();
    let b = common::get(s.port, "/k/2").text();
    assert_eq!(
        field(&a, "conn"),
        field(&b, "conn"),
        "one TLS connection: {a} {b}"
    );
    // New connections each time (no keepalive): the second resumes the
    // session the first one got.
    let c1 = common::get(s.port, "/c/1").text();
    let c2 = common::get(s.port, "/c/2").text();
    assert_ne!(field(&c1, "conn"), field(&c2, "conn"));
    assert_eq!(field(&c2, "reused"), "r", "{c1} {c2}");
}

#[test]
fn a_large_body_comes_through_intact() {
    let ca = Ca::new();
    let origin = common::free_port();
    let s = start(
        &ca,
        origin,
        &format!("location / {{ proxy_pass https://127.0.0.1:{origin}; }}"),
        "",
    );
    let r = common::get(s.port, "/big.bin");
    assert_eq!(r.status, 200);
    assert!(
        r.body == big_body(),
        "body differs ({} bytes)",
        r.body.len()
    );
}

#[test]
fn a_peer_that_does_not_speak_tls_is_502_with_nginx_s_line() {
    let ca = Ca::new();
    let origin = common::free_port();
    // The front itself is plain HTTP: an https:// proxy_pass to it fails
    // its handshake.
    let s = start(
        &ca,
        origin,
        "location /self/ { proxy_pass https://127.0.0.1:{PORT}/; proxy_connect_timeout 2s; }\n\
         location / { return 200 \"plain\\n\"; }",
        "",
    );
    assert_eq!(common::get(s.port, "/self/x").status, 502);
    let log = s.wait_log(
        "logs/error.log",
        "while SSL handshaking to upstream",
        Duration::from_secs(5),
    );
    assert!(
        log.lines()
            .any(|l| l.contains("[error]") && l.contains("while SSL handshaking to upstream")),
        "{log}"
    );
}

#[test]
fn proxies_to_nginx_over_tls_with_verification() {
    let ca = Ca::new();
    let certs = TempDir::new("pssl-nginx");
    let (crt, key) = ca
        .leaf(&["origin.test"], Alg::Rsa)
        .write(certs.path(), "origin");
    let Some(n) = Nginx::start(&format!(
        "server {{ listen 127.0.0.1:{{PORT}} ssl; server_name origin.test;\n\
           ssl_certificate {}; ssl_certificate_key {};\n\
           location / {{ return 200 \"nginx sni=$ssl_server_name proto=$ssl_protocol\\n\"; }} }}",
        crt.display(),
        key.display()
    )) else {
        eprintln!("skipped: nginx is not installed");
        return;
    };
    let s = start(
        &ca,
        common::free_port(),
        &format!(
            "location / {{ proxy_pass https://127.0.0.1:{}; proxy_ssl_verify on;\n\
               proxy_ssl_trusted_certificate {{PREFIX}}/ca.pem;\n\
               proxy_ssl_server_name on; proxy_ssl_name origin.test; }}",
            n.port
        ),
        "",
    );
    let r = common::get(s.port, "/");
    assert_eq!(r.status, 200, "{}", s.read("logs/error.log"));
    // nginx 1.22's default ssl_protocols stop at TLSv1.2 (1.23.4 added
    // TLSv1.3): rustls's client speaks 1.2 with OpenSSL here.
    assert_eq!(r.text(), "nginx sni=origin.test proto=TLSv1.2\n");
}

/// Encrypts `NAME.key` into `NAME-enc.key` with the password `secret`
/// (false: no openssl here).
fn encrypt_key(dir: &TempDir, name: &str) -> bool {
    std::process::Command::new("openssl")
        .current_dir(dir.path())
        .args(["pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in"])
        .arg(format!("{name}.key"))
        .arg("-out")
        .arg(format!("{name}-enc.key"))
        .args(["-passout", "pass:secret"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

const MTLS_ECHO: &str = r#"return 200 "verify=$ssl_client_verify dn=$ssl_client_s_dn\n";"#;

#[test]
fn presents_the_client_certificate_an_origin_requires() {
    let ca = Ca::new();
    let dir = TempDir::new("pssl-mtls");
    let p = dir.path();
    ca.leaf(&["origin.test", "127.0.0.1"], Alg::Ecdsa)
        .write(p, "origin");
    ca.leaf(&["porter-client"], Alg::Ecdsa).write(p, "client");
    dir.write("ca.pem", ca.pem());
    dir.write("pw", "wrong\nsecret\n");
    // The key encrypted, opened with `proxy_ssl_password_file` (both
    // inherited, from http and server, by the locations naming the
    // certificate).
    let key = if encrypt_key(&dir, "client") {
        "client-enc.key"
    } else {
        eprintln!("no openssl: the client key stays unencrypted");
        "client.key"
    };
    let origin = common::free_port();
    let conf = format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n  access_log off;\n  proxy_ssl_password_file {{PREFIX}}/pw;\n\
         server {{ listen 127.0.0.1:{origin} ssl; server_name origin.test;\n\
           ssl_certificate {{PREFIX}}/origin.crt; ssl_certificate_key {{PREFIX}}/origin.key;\n\
           ssl_verify_client on; ssl_client_certificate {{PREFIX}}/ca.pem;\n\
           location / {{ {MTLS_ECHO} }} }}\n\
         server {{ listen 127.0.0.1:{{PORT}};\n\
           proxy_ssl_certificate_key {{PREFIX}}/{key};\n\
           location /with/ {{ proxy_ssl_certificate {{PREFIX}}/client.crt;\n\
             proxy_pass https://127.0.0.1:{origin}/; }}\n\
           location /outer/ {{ proxy_ssl_certificate {{PREFIX}}/client.crt;\n\
             location /outer/inner/ {{ proxy_pass https://127.0.0.1:{origin}/; }} }}\n\
           location /without/ {{ proxy_pass https://127.0.0.1:{origin}/; }}\n\
         }}\n}}\n"
    );
    let s = Server::start_in(dir, &conf, &[]);
    for path in ["/with/x", "/outer/inner/x"] {
        let r = common::get(s.port, path);
        assert_eq!(r.status, 200, "{path}: {}", s.read("logs/error.log"));
        assert_eq!(r.text(), "verify=SUCCESS dn=CN=porter-client\n", "{path}");
    }
    // Without one, the origin's "400 No required SSL certificate was sent".
    let r = common::get(s.port, "/without/x");
    assert_eq!(r.status, 400);
    assert!(
        r.text().contains("No required SSL certificate was sent"),
        "{}",
        r.text()
    );
}

#[test]
fn presents_the_client_certificate_to_nginx() {
    let ca = Ca::new();
    let certs = TempDir::new("pssl-mtls-nginx");
    let (crt, key) = ca
        .leaf(&["origin.test"], Alg::Rsa)
        .write(certs.path(), "origin");
    let (ccrt, ckey) = ca
        .leaf(&["porter-client"], Alg::Ecdsa)
        .write(certs.path(), "client");
    let ca_pem = certs.write("ca.pem", ca.pem());
    let Some(n) = Nginx::start(&format!(
        "server {{ listen 127.0.0.1:{{PORT}} ssl; server_name origin.test;\n\
           ssl_certificate {}; ssl_certificate_key {};\n\
           ssl_verify_client on; ssl_client_certificate {};\n\
           location / {{ {MTLS_ECHO} }} }}",
        crt.display(),
        key.display(),
        ca_pem.display()
    )) else {
        eprintln!("skipped: nginx is not installed");
        return;
    };
    let s = start(
        &ca,
        common::free_port(),
        &format!(
            "location /with/ {{ proxy_pass https://127.0.0.1:{0}/;\n\
               proxy_ssl_certificate {1}; proxy_ssl_certificate_key {2}; }}\n\
             location /without/ {{ proxy_pass https://127.0.0.1:{0}/; }}",
            n.port,
            ccrt.display(),
            ckey.display()
        ),
        "",
    );
    let r = common::get(s.port, "/with/");
    assert_eq!(r.status, 200, "{}", s.read("logs/error.log"));
    assert_eq!(r.text(), "verify=SUCCESS dn=CN=porter-client\n");
    let r = common::get(s.port, "/without/");
    assert_eq!(r.status, 400);
    assert!(r.text().contains("No required SSL certificate was sent"));
}

/// An origin whose certificate hangs below two intermediate CAs (the
/// file sends leaf, then both): NGINX's default `proxy_ssl_verify_depth 1`
/// refuses it with OpenSSL's "unable to get local issuer certificate",
/// depth 2 takes it.
#[test]
fn proxy_ssl_verify_depth_bounds_the_upstream_chain() {
    let ca = Ca::new();
    let i1 = ca.intermediate("porter test intermediate 1");
    let i2 = i1.intermediate("porter test intermediate 2");
    let dir = TempDir::new("pssl-depth");
    let leaf = i2.leaf(&["origin.test", "127.0.0.1"], Alg::Ecdsa);
    dir.write(
        "origin.crt",
        format!("{}{}{}", leaf.cert_pem, i2.pem(), i1.pem()),
    );
    dir.write("origin.key", &leaf.key_pem);
    dir.write("ca.pem", ca.pem());
    let origin = common::free_port();
    let verify = |path: &str, depth: &str| {
        format!(
            "location /{path}/ {{ proxy_pass https://127.0.0.1:{origin}/; proxy_ssl_verify on;\n\
               proxy_ssl_trusted_certificate {{PREFIX}}/ca.pem; {depth} }}\n"
        )
    };
    let conf = format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n  access_log off;\n\
         server {{ listen 127.0.0.1:{origin} ssl; server_name origin.test;\n\
           ssl_certificate {{PREFIX}}/origin.crt; ssl_certificate_key {{PREFIX}}/origin.key;\n\
           location / {{ return 200 \"origin\\n\"; }} }}\n\
         server {{ listen 127.0.0.1:{{PORT}};\n{}{}{}}}\n}}\n",
        verify("d1", ""),
        verify("d2", "proxy_ssl_verify_depth 2;"),
        verify("d0", "proxy_ssl_verify_depth 0;"),
    );
    let s = Server::start_in(dir, &conf, &[]);
    let r = common::get(s.port, "/d2/");
    assert_eq!(r.status, 200, "{}", s.read("logs/error.log"));
    assert_eq!(r.text(), "origin\n");
    for path in ["/d1/", "/d0/"] {
        assert_eq!(common::get(s.port, path).status, 502, "{path}");
    }
    let log = s.read("logs/error.log");
    assert!(
        log.contains(
            "upstream SSL certificate verify error: (20:unable to get local issuer certificate) while SSL handshaking to upstream"
        ),
        "{log}"
    );
}

/// `porter -t` on a config whose one location proxies to https with
/// `settings`: (success, stderr).
fn check_location(dir: &TempDir, name: &str, settings: &str) -> (bool, String) {
    let conf = dir.write(
        name,
        format!(
            "events {{}}\nhttp {{\n  server {{\n    listen 127.0.0.1:1;\n    location / {{ proxy_pass https://127.0.0.1:9;\n      {settings} }}\n  }}\n}}\n"
        ),
    );
    let out = common::run(&[
        "-t",
        "-p",
        dir.path().to_str().unwrap(),
        "-c",
        conf.to_str().unwrap(),
    ]);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_proxy_ssl_settings_are_config_errors_with_file_and_line() {
    let dir = TempDir::new("pssl-bad");
    std::fs::create_dir_all(dir.path().join("logs")).unwrap();
    let (ok, err) = check_location(
        &dir,
        "bad.conf",
        "proxy_ssl_trusted_certificate /nonexistent/ca.pem;",
    );
    assert!(!ok);
    assert!(
        err.contains("SSL_CTX_load_verify_locations(\"/nonexistent/ca.pem\") failed")
            && err.contains("bad.conf:6"),
        "{err}"
    );
    let (ok, err) = check_location(&dir, "old.conf", "proxy_ssl_protocols TLSv1 TLSv1.1;");
    assert!(!ok);
    assert!(
        err.contains("names no protocol porter offers") && err.contains("old.conf:6"),
        "{err}"
    );
    let (ok, err) = check_location(&dir, "nokey.conf", "proxy_ssl_certificate /x/c.crt;");
    assert!(!ok);
    assert!(
        err.contains("no \"proxy_ssl_certificate_key\" is defined for certificate \"/x/c.crt\"")
            && err.contains("nokey.conf:6"),
        "{err}"
    );
    let (ok, err) = check_location(
        &dir,
        "nocert.conf",
        "proxy_ssl_certificate /nonexistent/c.crt; proxy_ssl_certificate_key /nonexistent/c.key;",
    );
    assert!(!ok);
    assert!(
        err.contains("cannot load certificate \"/nonexistent/c.crt\"")
            && err.contains("nocert.conf:6"),
        "{err}"
    );
    let (ok, err) = check_location(
        &dir,
        "nopw.conf",
        "proxy_ssl_password_file /nonexistent/pw;",
    );
    assert!(!ok);
    assert!(
        err.contains("open() \"/nonexistent/pw\" failed") && err.contains("nopw.conf:6"),
        "{err}"
    );
    // NGINX 1.22's default list still names the old versions: accepted.
    let (ok, err) = check_location(
        &dir,
        "ok.conf",
        "proxy_ssl_protocols TLSv1 TLSv1.1 TLSv1.2 TLSv1.3; proxy_ssl_ciphers HIGH:!aNULL:!MD5;",
    );
    assert!(ok, "{err}");
}
