//! Interoperability over HTTP/3 with an independent implementation:
//! aioquic (Python, its own QUIC, TLS and QPACK) as the client
//! (`tests/h3_aioquic_client.py`), against the real binary with
//! `listen ... quic`. A small and a 1 MB file byte-exact, a range (206 with
//! `Content-Range`), a 404, a POST with a body through the proxy, and 40
//! requests at once on one connection — the answers porter's own HTTP/3
//! tests (quinn + h3) expect.
//!
//! aioquic comes from PyPI into /opt/porter-aioquic (`.ci/run` installs
//! it there, away from Debian's Python packages); without it the test
//! fails.

use crate::common;

use std::io::Write;
use std::process::{Command, Stdio};

use crate::common::origin::{Origin, Reply};
use crate::common::tls::{Alg, Ca};
use crate::common::{Server, TempDir};
use sha2::{Digest, Sha256};

const AIOQUIC: &str = "/opt/porter-aioquic";

/// One response as the client printed it.
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    len: usize,
    sha256: String,
    body: Option<String>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Runs the aioquic client against `port` with `reqs` (JSON).
fn aioquic(port: u16, ca_file: &std::path::Path, reqs: &serde_json::Value) -> Vec<Resp> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/h3_aioquic_client.py");
    let mut child = Command::new("/usr/bin/python3")
        .arg(script)
        .arg(port.to_string())
        .arg(ca_file)
        .env("PYTHONPATH", AIOQUIC)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run /usr/bin/python3");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(reqs.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "aioquic client failed (is aioquic in {AIOQUIC}? .ci/run installs it):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            Resp {
                status: v["status"].as_u64().unwrap() as u16,
                headers: v["headers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|h| {
                        (
                            h[0].as_str().unwrap().to_string(),
                            h[1].as_str().unwrap().to_string(),
                        )
                    })
                    .collect(),
                len: v["len"].as_u64().unwrap() as usize,
                sha256: v["sha256"].as_str().unwrap().to_string(),
                body: v["body"].as_str().map(str::to_string),
            }
        })
        .collect()
}

fn sha256_hex(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

#[test]
fn aioquic_gets_files_a_range_a_404_a_proxied_post_and_many_streams() {
    let ca = Ca::new();
    let origin = Origin::start(|req| {
        Reply::ok(
            format!(
                "{} {} {}",
                req.method,
                req.target,
                String::from_utf8_lossy(&req.body)
            )
            .as_bytes(),
        )
    });
    let dir = TempDir::new("h3aioquic");
    ca.leaf(&["localhost"], Alg::Ecdsa)
        .write(dir.path(), "cert");
    let ca_file = dir.write("ca.pem", ca.pem());
    dir.write("html/small.txt", "hello over quic\n");
    let big = common::origin::pattern(1024 * 1024 + 7, 5);
    dir.write("html/big.bin", &big);
    let conf = format!(
        "daemon off;\nworker_processes 2;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\nevents {{ worker_connections 256; }}\n\
         http {{\n  default_type application/octet-stream;\n\
           server {{\n    listen 127.0.0.1:{{PORT}} ssl;\n    listen 127.0.0.1:{{PORT}} quic reuseport;\n\
             server_name localhost;\n\
             ssl_certificate {{PREFIX}}/cert.crt; ssl_certificate_key {{PREFIX}}/cert.key;\n\
             root {{PREFIX}}/html;\n\
             location /api/ {{ proxy_pass http://127.0.0.1:{}; }}\n  }}\n}}\n",
        origin.port
    );
    let s = Server::start_in(dir, &conf, &[]);

    let mut reqs = vec![
        serde_json::json!({"method": "GET", "path": "/small.txt"}),
        serde_json::json!({"method": "GET", "path": "/big.bin"}),
        serde_json::json!({"method": "GET", "path": "/big.bin", "headers": [["range", "bytes=1000-1999"]]}),
        serde_json::json!({"method": "GET", "path": "/missing"}),
        serde_json::json!({"method": "POST", "path": "/api/up", "headers": [["content-length", "11"]], "body": "hello world"}),
    ];
    for i in 0..40 {
        reqs.push(serde_json::json!({"method": "GET", "path": format!("/small.txt?n={i}")}));
    }
    let r = aioquic(s.port, &ca_file, &serde_json::Value::Array(reqs));
    assert_eq!(r.len(), 45, "{}", s.read("logs/error.log"));

    assert_eq!(r[0].status, 200);
    assert_eq!(r[0].body.as_deref(), Some("hello over quic\n"));
    assert_eq!(r[0].header("content-length"), Some("16"));

    assert_eq!(r[1].status, 200);
    assert_eq!(r[1].len, big.len());
    assert_eq!(r[1].sha256, sha256_hex(&big));

    assert_eq!(r[2].status, 206);
    assert_eq!(
        r[2].header("content-range"),
        Some(&*format!("bytes 1000-1999/{}", big.len()))
    );
    assert_eq!(r[2].sha256, sha256_hex(&big[1000..2000]));

    assert_eq!(r[3].status, 404);

    assert_eq!(r[4].status, 200);
    assert_eq!(r[4].body.as_deref(), Some("POST /api/up hello world"));

    for x in &r[5..] {
        assert_eq!(x.status, 200);
        assert_eq!(x.body.as_deref(), Some("hello over quic\n"));
    }
}
