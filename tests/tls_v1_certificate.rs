//! X.509 v1 certificates (what `openssl req -x509` makes when its config
//! names no extensions, as NGINX's own test suite does): porter loads one
//! as `ssl_certificate` and as `proxy_ssl_certificate` (webpki, which
//! rustls compares the key with, refuses v1; OpenSSL does not), and with
//! `proxy_ssl_verify off` it talks to an upstream that serves one, checking
//! the handshake signature with the certificate's key. nginx answers the
//! same configuration the same.

use std::path::Path;
use std::process::Command;

use crate::common::*;

/// A v1 self-signed certificate and key for `name` in `dir`.
fn v1_certificate(dir: &Path, name: &str) {
    let conf = dir.join("openssl.conf");
    std::fs::write(
        &conf,
        "[ req ]\ndefault_bits = 2048\nencrypt_key = no\n\
         distinguished_name = req_distinguished_name\n[ req_distinguished_name ]\n",
    )
    .unwrap();
    let st = Command::new("openssl")
        .args(["req", "-x509", "-new", "-config"])
        .arg(&conf)
        .args(["-subj", &format!("/CN={name}/"), "-out"])
        .arg(dir.join(format!("{name}.crt")))
        .arg("-keyout")
        .arg(dir.join(format!("{name}.key")))
        .output()
        .expect("openssl runs");
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let text = Command::new("openssl")
        .args(["x509", "-noout", "-text", "-in"])
        .arg(dir.join(format!("{name}.crt")))
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("Version: 1 (0x0)"),
        "not a v1 certificate"
    );
}

/// A TLS server on `{TLS}` with the v1 certificate, and a plain one on
/// `{PORT}` that proxies to it presenting the v1 certificate as its own.
fn http_body(dir: &Path, tls_port: u16) -> String {
    let d = dir.display();
    format!(
        "server {{ listen 127.0.0.1:{tls_port} ssl; server_name localhost;
             ssl_certificate {d}/localhost.crt; ssl_certificate_key {d}/localhost.key;
             location / {{ return 200 \"tls $ssl_server_name\\n\"; }} }}
         server {{ listen 127.0.0.1:{{PORT}}; server_name localhost;
             location / {{ proxy_pass https://127.0.0.1:{tls_port};
                 proxy_ssl_certificate {d}/client.crt; proxy_ssl_certificate_key {d}/client.key; }} }}"
    )
}

#[test]
fn v1_certificates_serve_and_proxy() {
    let dir = TempDir::new("v1cert");
    v1_certificate(dir.path(), "localhost");
    v1_certificate(dir.path(), "client");

    let tls_port = free_port();
    let body = http_body(dir.path(), tls_port);
    let s = Server::start(&format!(
        "daemon off; worker_processes 1; pid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/error.log info; events {{}}\n\
         http {{ access_log off; {body} }}\n"
    ));
    let r = get(s.port, "/");
    assert_eq!(r.status, 200, "{}", s.read("error.log"));
    let porter = r.text();
    drop(s);

    let tls_port = free_port();
    if let Some(n) = Nginx::start(&http_body(dir.path(), tls_port)) {
        let r = get(n.port, "/");
        assert_eq!(r.status, 200, "{}", n.error_log());
        assert_eq!(r.text(), porter);
    }
}
