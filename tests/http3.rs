//! HTTP/3 over QUIC: the real binary with `listen ... quic` beside
//! `listen ... ssl` on the same port, a self-signed CA made in the test
//! (rcgen), and a real HTTP/3 client (quinn + h3, `common/h3client.rs`).
//! Files byte-exact (small and large, through the disk layer), HEAD,
//! ranges, 404 with its page, 304, the proxy to a backend with a request
//! body, many concurrent streams on one connection, connections spread
//! over two workers, `Alt-Svc` on the TCP listener, `$http3`/`$quic` in
//! the access log, `quic_retry on`, `keepalive_requests` (GOAWAY, then
//! the close), a download under way when a graceful stop comes, and the
//! config errors NGINX gives.

use crate::common;

use std::time::Duration;

use crate::common::h3client::H3;
use crate::common::origin::{Origin, Reply};
use crate::common::tls::{Alg, Ca};
use crate::common::{Server, TempDir};

/// A prefix with a certificate for `localhost`, an `html/` docroot with
/// a small and a large file.
fn prefix(ca: &Ca) -> (TempDir, Vec<u8>) {
    let dir = TempDir::new("h3");
    ca.leaf(&["localhost"], Alg::Ecdsa)
        .write(dir.path(), "cert");
    dir.write("html/small.txt", "hello over quic\n");
    let big = common::origin::pattern(5 * 1024 * 1024 + 17, 3);
    dir.write("html/big.bin", &big);
    (dir, big)
}

/// A config with one server on `{PORT}` over TCP+TLS and QUIC; `extra`
/// at the server level, `http_extra` at the http level.
fn conf(http_extra: &str, extra: &str) -> String {
    format!(
        "daemon off;\nworker_processes 2;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\nevents {{ worker_connections 256; }}\n\
         http {{\n  default_type application/octet-stream;\n\
           log_format h3 '$request $status $body_bytes_sent \"$http3\" \"$quic\" $server_protocol';\n\
           access_log {{PREFIX}}/logs/access.log h3;\n{http_extra}\n\
           server {{\n    listen 127.0.0.1:{{PORT}} ssl;\n    listen 127.0.0.1:{{PORT}} quic reuseport;\n\
             server_name localhost;\n\
             ssl_certificate {{PREFIX}}/cert.crt; ssl_certificate_key {{PREFIX}}/cert.key;\n\
             root {{PREFIX}}/html;\n\
             add_header Alt-Svc 'h3=\":{{PORT}}\"; ma=86400';\n{extra}\n  }}\n}}\n"
    )
}

fn start(ca: &Ca, http_extra: &str, extra: &str) -> (Server, Vec<u8>) {
    let (dir, big) = prefix(ca);
    (Server::start_in(dir, &conf(http_extra, extra), &[]), big)
}

fn connect(s: &Server, ca: &Ca) -> H3 {
    H3::connect(s.port, ca, "localhost").unwrap_or_else(|e| {
        panic!(
            "HTTP/3 connection failed: {e}\n{}",
            s.read("logs/error.log")
        )
    })
}

#[test]
fn files_arrive_byte_exact_with_head_range_404_and_304() {
    let ca = Ca::new();
    let (s, big) = start(
        &ca,
        "",
        "error_page 404 /404.html; location = /404.html { return 404 'gone\\n'; }",
    );
    let mut c = connect(&s, &ca);

    let r = c.get("/small.txt");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"hello over quic\n");
    assert_eq!(r.header("content-length"), Some("16"));
    assert_eq!(
        r.header("alt-svc"),
        Some(&*format!("h3=\":{}\"; ma=86400", s.port))
    );
    assert!(r.header("connection").is_none());

    let r = c.get("/big.bin");
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), big.len());
    assert!(r.body == big, "large file differs");

    let r = c.request("HEAD", "/big.bin", &[], b"").unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some(&*big.len().to_string()));
    assert!(r.body.is_empty());

    let r = c
        .request("GET", "/big.bin", &[("range", "bytes=1000-1999")], b"")
        .unwrap();
    assert_eq!(r.status, 206);
    assert_eq!(
        r.header("content-range"),
        Some(&*format!("bytes 1000-1999/{}", big.len()))
    );
    assert_eq!(r.body, &big[1000..2000]);

    let r = c.get("/missing");
    assert_eq!(r.status, 404);
    assert_eq!(r.body, b"gone\n");

    let etag = c.get("/small.txt").header("etag").unwrap().to_string();
    let r = c
        .request("GET", "/small.txt", &[("if-none-match", &etag)], b"")
        .unwrap();
    assert_eq!(r.status, 304);
    assert!(r.body.is_empty());

    let log = s.wait_log(
        "logs/access.log",
        "GET /missing HTTP/3.0 404",
        Duration::from_secs(5),
    );
    assert!(
        log.contains(&format!(
            "GET /big.bin HTTP/3.0 200 {} \"h3\" \"quic\" HTTP/3.0",
            big.len()
        )),
        "{log}"
    );
}

#[test]
fn a_cold_file_is_read_by_the_pool_and_a_warm_one_inline() {
    let ca = Ca::new();
    let (dir, big) = prefix(&ca);
    let file = dir.path().join("html/big.bin");
    let text = conf("", "aio threads; location = /metrics { porter_metrics; }");
    let s = Server::start_in(dir, &text, &[]);
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
    let mut c = connect(&s, &ca);
    let r = c.get("/big.bin");
    assert!(r.body == big, "cold file differs ({} bytes)", r.body.len());
    let r = c.get("/big.bin");
    assert!(r.body == big, "warm file differs ({} bytes)", r.body.len());
    let m = common::metrics::Metrics(c.get("/metrics").text());
    let read = |result: &str| {
        m.get(
            "porter_fastpath_total",
            &[("op", "read"), ("result", result)],
        )
        .unwrap_or(0.0)
    };
    assert!(
        read("miss") >= 1.0,
        "the cold read went to the pool:\n{}",
        m.0
    );
    assert!(
        read("hit") >= 1.0,
        "warm reads were served inline:\n{}",
        m.0
    );
}

#[test]
fn alt_svc_is_sent_on_the_tcp_listener_and_variables_are_empty_there() {
    let ca = Ca::new();
    let (s, _) = start(&ca, "", "");
    let cfg = common::tls::client(&ca, Default::default());
    let r = common::tls::get(s.port, &cfg, "localhost", "/small.txt");
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("alt-svc"),
        Some(&*format!("h3=\":{}\"; ma=86400", s.port))
    );
    let log = s.wait_log(
        "logs/access.log",
        "GET /small.txt HTTP/1.1",
        Duration::from_secs(5),
    );
    // Empty there, logged as "-" (as `$http2` is on HTTP/1.1).
    assert!(
        log.contains("GET /small.txt HTTP/1.1 200 16 \"-\" \"-\" HTTP/1.1"),
        "{log}"
    );
}

#[test]
fn many_concurrent_streams_on_one_connection_and_many_connections() {
    let ca = Ca::new();
    let (s, big) = start(&ca, "", "http3_max_concurrent_streams 32;");
    let mut c = connect(&s, &ca);
    // More than the stream limit: the client waits for credit, none fails.
    let mut paths: Vec<String> = (0..100).map(|i| format!("/small.txt?{i}")).collect();
    paths.extend((0..4).map(|i| format!("/big.bin?{i}")));
    for r in c.get_many(&paths) {
        let r = r.unwrap();
        assert_eq!(r.status, 200);
        assert!(r.body == b"hello over quic\n" || r.body == big);
    }
    // Connections from many source ports, spread over both workers, each
    // kept whole by its connection IDs.
    for _ in 0..8 {
        let mut c = connect(&s, &ca);
        assert_eq!(c.get("/small.txt").status, 200);
    }
}

#[test]
fn a_client_that_changes_address_stays_on_its_worker() {
    // Four workers: without steering by connection ID each new source
    // port would land on the connection's own worker one time in four,
    // and the others would answer with a stateless reset.
    let ca = Ca::new();
    let (dir, _) = prefix(&ca);
    let text = conf("", "").replace("worker_processes 2;", "worker_processes 4;");
    let s = Server::start_in(dir, &text, &[]);
    let mut c = connect(&s, &ca);
    assert_eq!(c.get("/small.txt").status, 200);
    for i in 0..6 {
        c.rebind();
        let r = c.request("GET", "/small.txt", &[], b"");
        assert_eq!(r.map(|r| r.status), Ok(200), "after rebinding {i}");
    }
    assert!(c.quic().close_reason().is_none());
}

#[test]
fn the_proxy_answers_over_http3_with_the_request_body() {
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
        .header("x-origin", "yes")
    });
    let extra = format!(
        "location /api/ {{ proxy_pass http://127.0.0.1:{}; }}",
        origin.port
    );
    let (s, _) = start(&ca, "", &extra);
    let mut c = connect(&s, &ca);
    let r = c.get("/api/x?y=1");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"GET /api/x?y=1 ");
    assert_eq!(r.header("x-origin"), Some("yes"));
    let r = c
        .request(
            "POST",
            "/api/up",
            &[("content-length", "11")],
            b"hello world",
        )
        .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"POST /api/up hello world");
    // Without a length: the body is streamed (chunked upstream).
    let r = c.request("POST", "/api/up2", &[], b"streamed").unwrap();
    assert_eq!(r.body, b"POST /api/up2 streamed");
    let reqs = origin.requests();
    assert_eq!(
        reqs[0].header("host"),
        Some(&*format!("127.0.0.1:{}", origin.port))
    );
}

#[test]
fn quic_retry_validates_the_address_first() {
    let ca = Ca::new();
    let metrics = "location = /metrics { porter_metrics; }";
    let (s, _) = start(&ca, "quic_retry on;", metrics);
    let mut c = connect(&s, &ca);
    assert_eq!(c.get("/small.txt").status, 200);
    let mut c2 = connect(&s, &ca);
    let m = common::metrics::Metrics(c2.get("/metrics").text());
    let n = |r: &str| m.get("porter_quic_connections_total", &[("result", r)]);
    // Each client was sent a Retry, then served once it came back with
    // the token.
    assert_eq!(n("retried"), Some(2.0), "{}", m.0);
    assert_eq!(n("accepted"), Some(2.0), "{}", m.0);
    drop(c);
    // Without `quic_retry` no Retry is sent.
    let (s, _) = start(&ca, "", metrics);
    let mut c = connect(&s, &ca);
    let m = common::metrics::Metrics(c.get("/metrics").text());
    assert_eq!(
        m.get("porter_quic_connections_total", &[("result", "retried")]),
        Some(0.0)
    );
    assert_eq!(
        m.get("porter_quic_connections_total", &[("result", "accepted")]),
        Some(1.0)
    );
}

#[test]
fn bad_listen_combinations_name_file_and_line() {
    let err = common::config_error(
        "events {}\nhttp {\n  server {\n    listen 127.0.0.1:8443 quic ssl;\n  }\n}\n",
    );
    assert!(
        err.contains("\"ssl\" parameter is incompatible with \"quic\"")
            && err.contains("porter.conf:4"),
        "{err}"
    );
    let err = common::config_error(
        "events {}\nhttp {\n  server {\n    listen 127.0.0.1:8443 quic;\n  }\n}\n",
    );
    assert!(
        err.contains("no \"ssl_certificate\" is defined for the \"listen ... quic\" directive")
            && err.contains("porter.conf:4"),
        "{err}"
    );
}

#[test]
fn tls12_only_servers_cannot_listen_on_quic() {
    let ca = Ca::new();
    let dir = TempDir::new("h3conf");
    ca.leaf(&["localhost"], Alg::Ecdsa)
        .write(dir.path(), "cert");
    let p = dir.write(
        "porter.conf",
        format!(
            "events {{}}\nhttp {{\n  server {{\n    listen 127.0.0.1:8443 quic;\n    ssl_protocols TLSv1.2;\n    \
             ssl_certificate {0}/cert.crt; ssl_certificate_key {0}/cert.key;\n  }}\n}}\n",
            dir.path().display()
        ),
    );
    let out = common::run(&["-t", "-c", p.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("\"ssl_protocols\" must enable TLSv1.3 for the \"listen ... quic\" directive")
            && err.contains("porter.conf:4"),
        "{err}"
    );
}

#[test]
fn keepalive_requests_ends_the_connection_with_goaway_after_the_last() {
    let ca = Ca::new();
    let (s, _) = start(&ca, "keepalive_requests 3;", "");
    let mut c = connect(&s, &ca);
    for _ in 0..3 {
        assert_eq!(c.get("/small.txt").status, 200);
    }
    // GOAWAY came with the third; the connection closes once it is done
    // (porter waits up to 5 s for this client to close first).
    let reason = c.wait_closed(Duration::from_secs(10));
    assert!(
        matches!(&reason, Some(quinn::ConnectionError::ApplicationClosed(a))
            if a.error_code.into_inner() == 0x100),
        "{reason:?}"
    );
    assert!(c.request("GET", "/small.txt", &[], b"").is_err());
    let mut c = connect(&s, &ca);
    assert_eq!(c.get("/small.txt").status, 200);
}

#[test]
fn a_graceful_stop_lets_a_download_finish_then_closes_with_no_error() {
    let ca = Ca::new();
    let (mut s, big) = start(&ca, "", "");
    let raw = common::h3raw::Raw::connect(s.port, &ca);
    let _control = raw.open_control();
    let conn = raw.conn.clone();
    let pid = s.child.id() as i32;
    let body = raw.rt.block_on(async move {
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        send.write_all(&common::h3raw::get("/big.bin"))
            .await
            .unwrap();
        send.finish().unwrap();
        let mut got = vec![0u8; 64 << 10];
        recv.read_exact(&mut got).await.unwrap();
        // SIGQUIT with the download under way.
        // SAFETY: a signal to the server this test started.
        unsafe { libc::kill(pid, libc::SIGQUIT) };
        got.extend(recv.read_to_end(64 << 20).await.unwrap());
        got
    });
    let data = common::h3raw::data_payload(&body).expect("whole frames");
    assert!(data == big, "{} of {} bytes", data.len(), big.len());
    let closed = raw.closed(Duration::from_secs(10));
    assert_eq!(
        closed.as_ref().and_then(common::h3raw::app_code),
        Some(0x100)
    );
    assert!(
        s.wait_exit(Duration::from_secs(10)).is_some(),
        "porter did not stop"
    );
}
