//! TLS 1.3 early data (0-RTT) over TCP with `ssl_early_data on`, sent by a
//! real client (OpenSSL's `s_client -sess_in … -early_data`) to porter and
//! to Debian's nginx on the same server block: the GET in early data is
//! answered before the handshake finishes with `$ssl_early_data` `1`, as
//! nginx answers it; a POST in early data gets porter's 425 (nginx serves
//! it and leaves the check to the config); without `ssl_early_data` the
//! session allows no early data.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::tls::{Alg, Ca};
use crate::common::{Nginx, Server, TempDir};

/// The server block for porter and nginx (`{PORT}`, certificates in `dir`).
fn server_block(dir: &Path, early: &str) -> String {
    let d = dir.display();
    format!(
        "server {{ listen 127.0.0.1:{{PORT}} ssl; server_name localhost;\n\
           ssl_protocols TLSv1.3; {early}\n\
           ssl_certificate {d}/cert.crt; ssl_certificate_key {d}/cert.key;\n\
           location / {{ return 200 \"early=$ssl_early_data proto=$ssl_protocol\\n\"; }} }}\n"
    )
}

/// Runs `openssl s_client` to `port`: with `sess_out` it saves the
/// session after a first request; with `early` it resumes `sess` and sends
/// `early` as early data. Its output.
fn s_client(port: u16, sess: &Path, early: Option<&str>, dir: &Path) -> String {
    let mut cmd = Command::new("openssl");
    cmd.args(["s_client", "-connect", &format!("127.0.0.1:{port}")])
        .args(["-servername", "localhost", "-tls1_3", "-ign_eof"]);
    let input = match early {
        Some(req) => {
            let f = dir.join("early.txt");
            std::fs::write(&f, req).unwrap();
            cmd.arg("-sess_in").arg(sess).arg("-early_data").arg(f);
            String::new()
        }
        None => {
            cmd.arg("-sess_out").arg(sess);
            "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".to_string()
        }
    };
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("openssl");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        let _ = stdin.write_all(input.as_bytes());
        // Left open a moment: s_client reads the answer until the server
        // closes (`Connection: close`).
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let out = child.wait_with_output().unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

const GET: &str = "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
const POST: &str =
    "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/// Saves a session from `port`, then sends `req` in early data with it.
fn resume_with(port: u16, req: &str, tmp: &TempDir, tag: &str) -> String {
    let sess = tmp.path().join(format!("{tag}.sess"));
    let first = s_client(port, &sess, None, tmp.path());
    assert!(first.contains("early= proto=TLSv1.3"), "{first}");
    s_client(port, &sess, Some(req), tmp.path())
}

fn porter(certs: &TempDir, early: &str) -> Server {
    let conf = format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\nevents {{ worker_connections 64; }}\n\
         http {{\n  access_log off;\n{}}}\n",
        server_block(certs.path(), early)
    );
    Server::start_in(TempDir::new("early-p"), &conf, &[])
}

#[test]
fn a_get_in_early_data_is_served_before_the_handshake_ends_as_nginx_serves_it() {
    let ca = Ca::new();
    let certs = TempDir::new("early-c");
    ca.leaf(&["localhost"], Alg::Ecdsa)
        .write(certs.path(), "cert");
    let s = porter(&certs, "ssl_early_data on;");
    let tmp = TempDir::new("early-s");

    let got = resume_with(s.port, GET, &tmp, "p");
    assert!(got.contains("Early data was accepted"), "{got}");
    assert!(
        got.contains("early=1 proto=TLSv1.3"),
        "{got}\n{}",
        s.read("logs/error.log")
    );
    let post = resume_with(s.port, POST, &tmp, "p2");
    assert!(post.contains("HTTP/1.1 425 "), "{post}");
    let log = s.read("logs/error.log");
    assert!(
        log.contains("client sent \"POST\" request in TLS early data"),
        "{log}"
    );

    if let Some(n) = Nginx::start(&server_block(certs.path(), "ssl_early_data on;")) {
        let theirs = resume_with(n.port, GET, &tmp, "n");
        assert!(theirs.contains("early=1 proto=TLSv1.3"), "nginx: {theirs}");
        let body = |t: &str| {
            t.lines()
                .find(|l| l.starts_with("early="))
                .map(str::to_string)
        };
        assert_eq!(body(&got), body(&theirs));
    } else {
        eprintln!("nginx not installed: porter's answers checked alone");
    }
}

#[test]
fn without_ssl_early_data_early_data_is_refused() {
    let ca = Ca::new();
    let certs = TempDir::new("early-c");
    ca.leaf(&["localhost"], Alg::Ecdsa)
        .write(certs.path(), "cert");
    let s = porter(&certs, "client_header_timeout 1s;");
    let tmp = TempDir::new("early-s");
    let got = resume_with(s.port, GET, &tmp, "p");
    // The session allows none (its ticket says 0), so none is sent.
    assert!(got.contains("Max Early Data: 0"), "{got}");
    assert!(got.contains("Early data was not sent"), "{got}");
    assert!(!got.contains("early=1"), "{got}");
}
