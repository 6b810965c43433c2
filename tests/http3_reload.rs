//! QUIC connections across a reload (SIGHUP): the new generation's
//! endpoint reads each worker's socket and hands the old generation's
//! datagrams to the old endpoint (`http3/handover.rs`), so a download
//! under way when the reload comes arrives whole and the old connection
//! then closes with H3_NO_ERROR, as a TCP keep-alive connection drains,
//! while new connections get the new configuration. Before, the new
//! endpoint answered the old connection's datagrams with stateless
//! resets and the download died.

use crate::common;

use std::time::{Duration, Instant};

use crate::common::h3client::H3;
use crate::common::h3raw::{self, Raw};
use crate::common::tls::{Alg, Ca};
use crate::common::{Server, TempDir};

const BIG: usize = 12 * 1024 * 1024 + 5;

fn start(ca: &Ca) -> Server {
    let dir = TempDir::new("h3reload");
    ca.leaf(&["localhost"], Alg::Ecdsa)
        .write(dir.path(), "cert");
    dir.write("html/big.bin", common::origin::pattern(BIG, 7));
    // The same stateless-reset key in both generations (as a fleet
    // configures it): a reset from the new one would end the old
    // connection (with a key of its own it is ignored, as loss).
    dir.write("quic.key", [7u8; 32]);
    let conf = "daemon off;\nworker_processes 2;\npid {PREFIX}/porter.pid;\n\
         error_log {PREFIX}/logs/error.log info;\nevents { worker_connections 256; }\n\
         http {\n  access_log off;\n\
           server {\n    listen 127.0.0.1:{PORT} ssl;\n    listen 127.0.0.1:{PORT} quic;\n\
             server_name localhost;\n\
             ssl_certificate {PREFIX}/cert.crt; ssl_certificate_key {PREFIX}/cert.key;\n\
             quic_host_key {PREFIX}/quic.key;\n             root {PREFIX}/html;\n    location = /v { return 200 v1; }\n  }\n}\n";
    Server::start_in(dir, conf, &[])
}

/// Waits (up to 10 s) until a new HTTP/3 connection is answered by the
/// configuration that says `want` at `/v`.
fn wait_for_v(port: u16, want: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Some(ca) = CA.get() {
            if let Ok(mut c) = H3::connect(port, ca, "localhost") {
                if c.request("GET", "/v", &[], b"")
                    .is_ok_and(|r| r.text() == want)
                {
                    return true;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

static CA: std::sync::OnceLock<Ca> = std::sync::OnceLock::new();

#[test]
fn a_download_under_way_across_a_reload_arrives_whole_then_drains() {
    let ca = CA.get_or_init(Ca::new);
    let s = start(ca);
    let raw = Raw::connect(s.port, ca);
    let _control = raw.open_control();
    let conn = raw.conn.clone();
    let port = s.port;
    let conf = s
        .read("porter.conf")
        .replace("return 200 v1", "return 200 v2");
    std::fs::write(s.prefix.path().join("porter.conf"), conf).unwrap();
    let pid = s.child.id() as i32;
    let (body, reloaded) = raw.rt.block_on(async move {
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        send.write_all(&h3raw::get("/big.bin")).await.unwrap();
        send.finish().unwrap();
        let mut got = vec![0u8; 256 << 10];
        recv.read_exact(&mut got).await.unwrap();
        // SIGHUP with the download under way; the rest is read once the
        // new generation serves new connections (read on its own thread:
        // this runtime is the old connection's).
        // SAFETY: a signal to the server this test started.
        unsafe { libc::kill(pid, libc::SIGHUP) };
        let reloaded = std::thread::spawn(move || wait_for_v(port, "v2"))
            .join()
            .unwrap();
        match recv.read_to_end(64 << 20).await {
            Ok(rest) => got.extend(rest),
            Err(e) => panic!("the download died after {} bytes: {e}", got.len()),
        }
        (got, reloaded)
    });
    assert!(reloaded, "the reload was not seen");
    let data = h3raw::data_payload(&body).expect("whole frames");
    assert!(
        data == common::origin::pattern(BIG, 7),
        "{} of {BIG} bytes",
        data.len()
    );
    // The old generation told the connection to go away and closed it
    // without an error once it was done.
    let closed = raw.closed(Duration::from_secs(10));
    assert_eq!(closed.as_ref().and_then(h3raw::app_code), Some(0x100));
    // And the new generation keeps serving.
    let mut c = H3::connect(s.port, ca, "localhost").unwrap();
    assert_eq!(c.get("/v").text(), "v2");
}
