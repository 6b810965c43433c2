//! Client certificates over HTTP/3: `ssl_verify_client` and
//! `ssl_client_certificate` apply on a `listen ... quic` address as on
//! the TCP listener beside it — the certificate asked for in the QUIC
//! handshake, judged per request (`$ssl_client_verify`, 496 without one
//! under `on`, 495 for one no CA signed), `$ssl_client_s_dn` and the
//! other fields the same bytes over HTTP/3 as over TCP, and a server
//! chosen by SNI that asks while the default server does not.

use std::time::Duration;

use crate::common::h3client::{self, H3};
use crate::common::tls::{self as t, Alg, Ca};
use crate::common::{Server, TempDir};

const VARS: &str = "verify=$ssl_client_verify\\ns_dn=$ssl_client_s_dn\\n\
i_dn=$ssl_client_i_dn\\nserial=$ssl_client_serial\\nfp=$ssl_client_fingerprint\\n\
proto=$server_protocol\\n";

/// Two servers on `{PORT}` over TCP+TLS and QUIC: `localhost` (the
/// default) with `default_verify`, `other.test` with `other_verify`.
fn start(ca: &Ca, default_verify: &str, other_verify: &str) -> Server {
    let dir = TempDir::new("h3cc");
    ca.leaf(&["localhost", "other.test"], Alg::Ecdsa)
        .write(dir.path(), "cert");
    dir.write("ca.pem", ca.pem());
    let server = |name: &str, verify: &str| {
        format!(
            "server {{ listen 127.0.0.1:{{PORT}} ssl; listen 127.0.0.1:{{PORT}} quic;\n\
               server_name {name};\n\
               ssl_certificate {{PREFIX}}/cert.crt; ssl_certificate_key {{PREFIX}}/cert.key;\n\
               {verify}\n\
               location / {{ return 200 \"{VARS}\"; }} }}\n"
        )
    };
    let conf = format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\nevents {{ worker_connections 256; }}\n\
         http {{\n  access_log off;\n{}{}}}\n",
        server("localhost", default_verify),
        server("other.test", other_verify)
    );
    Server::start_in(dir, &conf, &[])
}

fn h3(s: &Server, tls: std::sync::Arc<quinn::crypto::rustls::QuicClientConfig>, sni: &str) -> H3 {
    H3::connect_with(s.port, tls, sni)
        .unwrap_or_else(|e| panic!("HTTP/3: {e}\n{}", s.read("logs/error.log")))
}

#[test]
fn verify_client_on_judges_the_certificate_sent_over_http3_as_over_tcp() {
    let ca = Ca::new();
    let s = start(
        &ca,
        "ssl_verify_client on; ssl_client_certificate {PREFIX}/ca.pem;",
        "",
    );
    let client = ca.leaf(&["client.test"], Alg::Ecdsa);

    let mut c = h3(&s, h3client::tls_with_cert(&ca, &client), "localhost");
    let r = c.get("/");
    assert_eq!(r.status, 200, "{}", s.read("logs/error.log"));
    let over_h3 = r.text();
    assert!(over_h3.contains("verify=SUCCESS\n"), "{over_h3}");
    assert!(over_h3.contains("proto=HTTP/3.0\n"), "{over_h3}");
    let tcp = t::get(s.port, &t::client_with_cert(&ca, &client), "localhost", "/");
    let over_tcp = String::from_utf8_lossy(&tcp.body).replace("HTTP/1.1", "HTTP/3.0");
    assert_eq!(over_h3, over_tcp, "the certificate's fields differ");
    assert!(!over_h3.contains("s_dn=\n"), "{over_h3}");

    // No certificate: 496; one no trusted CA signed: 495 (both sent as
    // 400 with NGINX's page).
    let mut c = h3(&s, h3client::tls(&ca), "localhost");
    let r = c.get("/");
    assert_eq!(r.status, 400);
    assert!(
        r.text().contains("No required SSL certificate was sent"),
        "{}",
        r.text()
    );
    let stranger = Ca::new().leaf(&["client.test"], Alg::Ecdsa);
    let mut c = h3(&s, h3client::tls_with_cert(&ca, &stranger), "localhost");
    let r = c.get("/");
    assert_eq!(r.status, 400);
    assert!(
        r.text().contains("The SSL certificate error"),
        "{}",
        r.text()
    );
    // The stranger's line may follow its answer: wait for it.
    let needle = "client SSL certificate verify error";
    let log = s.wait_log("logs/error.log", needle, Duration::from_secs(5));
    assert!(
        log.contains("client sent no required SSL certificate"),
        "{log}"
    );
    assert!(log.contains(needle), "{log}");
}

#[test]
fn optional_no_ca_serves_a_stranger_and_a_server_chosen_by_sni_asks_too() {
    let ca = Ca::new();
    let s = start(
        &ca,
        "",
        "ssl_verify_client optional_no_ca; ssl_client_certificate {PREFIX}/ca.pem;",
    );
    let stranger = Ca::new().leaf(&["client.test"], Alg::Ecdsa);
    let mut c = h3(&s, h3client::tls_with_cert(&ca, &stranger), "other.test");
    let r = c.get("/");
    assert_eq!(r.status, 200);
    assert!(r.text().contains("verify=FAILED:"), "{}", r.text());
    assert!(!r.text().contains("s_dn=\n"), "{}", r.text());

    let client = ca.leaf(&["client.test"], Alg::Ecdsa);
    let mut c = h3(&s, h3client::tls_with_cert(&ca, &client), "other.test");
    assert!(c.get("/").text().contains("verify=SUCCESS\n"));
    // The default server asks for nothing: a certificate sent to it is
    // not judged.
    let mut c = h3(&s, h3client::tls_with_cert(&ca, &client), "localhost");
    assert!(c.get("/").text().contains("verify=NONE\n"));
}
