//! HTTP/2: the real binary, real sockets. ALPN (`h2` then `http/1.1`) on
//! TLS addresses, h2c with prior knowledge on plain `http2 on` addresses
//! (HTTP/1.1 still served there), static files through the same handlers
//! (many streams on one connection, ranges, conditional 304, HEAD, a large
//! file under a small window in `http2_chunk_size` frames), `$http2` and
//! `$server_protocol`, the idle timeout, and the directives. Clients: the
//! `h2` crate, `curl --http2`, `curl --http2-prior-knowledge`, `nghttp`.

use crate::common;

use std::time::{Duration, Instant};

use crate::common::h2client::{self as c, rt};
use crate::common::tls::{Alg, Ca};
use crate::common::{Server, TempDir};

/// A 1 MiB file whose bytes depend on their offset.
fn big() -> Vec<u8> {
    (0..1024 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

/// Three servers: TLS with `http2 on` ({PORT}), plain with `http2 on`
/// (`h2c`), plain without HTTP/2 (`plain`); each serves `html/`.
fn start(extra_http: &str) -> (Server, u16, u16) {
    let ca = Ca::new();
    let dir = TempDir::new("h2");
    ca.leaf(&["localhost"], Alg::Ecdsa).write(dir.path(), "a");
    dir.write("html/index.html", "hello\n");
    dir.write("html/big.bin", big());
    for i in 0..100 {
        dir.write(
            &format!("html/f/{i}.txt"),
            format!("file {i}\n").repeat(i + 1),
        );
    }
    let h2c = common::free_port();
    let plain = common::free_port();
    let vars = r#"location = /vars { return 200 "$http2|$server_protocol|$request|$https\n"; }"#;
    let conf = format!(
        "daemon off;\nworker_processes 2;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n  default_type application/octet-stream;\n\
           log_format h2 '$request $status $body_bytes_sent \"$http2\" $server_protocol';\n\
           access_log {{PREFIX}}/logs/access.log h2;\n{extra_http}\n\
           server {{ listen 127.0.0.1:{{PORT}} ssl; http2 on;\n\
             ssl_certificate {{PREFIX}}/a.crt; ssl_certificate_key {{PREFIX}}/a.key;\n\
             root {{PREFIX}}/html; {vars} }}\n\
           server {{ listen 127.0.0.1:{h2c}; http2 on; root {{PREFIX}}/html; {vars} }}\n\
           server {{ listen 127.0.0.1:{plain}; root {{PREFIX}}/html; {vars} }}\n\
         }}\n"
    );
    let s = Server::start_in(dir, &conf, &[]);
    assert!(common::wait_port(h2c, Duration::from_secs(5)));
    (s, h2c, plain)
}

#[test]
fn alpn_picks_h2_on_tls_and_http11_when_the_client_asks_for_it() {
    let (s, _, _) = start("");
    let url = format!("https://localhost:{}/vars", s.port);
    let resolve = format!("localhost:{}:127.0.0.1", s.port);
    let (out, err, ok) = c::curl(&[
        "-k",
        "--http2",
        "--resolve",
        &resolve,
        "-w",
        "%{http_version}",
        &url,
    ]);
    assert!(ok, "{err}");
    assert_eq!(
        String::from_utf8_lossy(&out),
        "h2|HTTP/2.0|GET /vars HTTP/2.0|on\n2"
    );
    let (out, err, ok) = c::curl(&[
        "-k",
        "--http1.1",
        "--resolve",
        &resolve,
        "-w",
        "%{http_version}",
        &url,
    ]);
    assert!(ok, "{err}");
    assert_eq!(
        String::from_utf8_lossy(&out),
        "|HTTP/1.1|GET /vars HTTP/1.1|on\n1.1"
    );
    // nghttp speaks only h2: ALPN must give it h2.
    let (out, ok) = c::nghttp(&["-v", &format!("https://127.0.0.1:{}/index.html", s.port)]);
    assert!(ok, "{out}");
    assert!(out.contains("The negotiated protocol: h2"), "{out}");
    assert!(out.contains("hello"), "{out}");
}

#[test]
fn h2c_with_prior_knowledge_beside_http11_on_an_http2_address() {
    let (_s, h2c, plain) = start("");
    rt().block_on(async {
        let send = c::connect(h2c).await;
        let r = c::get(&send, "/vars").await;
        assert_eq!(r.status, 200);
        assert_eq!(
            String::from_utf8_lossy(&r.body),
            "h2c|HTTP/2.0|GET /vars HTTP/2.0|\n"
        );
    });
    // HTTP/1.1 on the same address.
    let r = common::get(h2c, "/vars");
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "|HTTP/1.1|GET /vars HTTP/1.1|\n");
    // A preface trickled a byte at a time is still recognised.
    rt().block_on(async {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", h2c))
            .await
            .unwrap();
        let slow = Trickle(tcp, 0);
        let (send, conn) = h2::client::handshake(slow).await.unwrap();
        tokio::spawn(conn);
        let r = c::get(&send.ready().await.unwrap(), "/index.html").await;
        assert_eq!(r.body, b"hello\n");
    });
    // curl's prior knowledge, and no HTTP/2 where `http2` is off.
    let (out, err, ok) = c::curl(&[
        "--http2-prior-knowledge",
        &format!("http://127.0.0.1:{h2c}/index.html"),
    ]);
    assert!(ok, "{err}");
    assert_eq!(out, b"hello\n");
    let (_, _, ok) = c::curl(&[
        "--http2-prior-knowledge",
        &format!("http://127.0.0.1:{plain}/index.html"),
    ]);
    assert!(!ok, "HTTP/2 served where http2 is off");
}

/// A stream that writes at most 3 bytes at a time, with a pause.
struct Trickle(tokio::net::TcpStream, u32);

impl tokio::io::AsyncRead for Trickle {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Trickle {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        // Only the preface is trickled; then full speed.
        if self.1 < 24 {
            std::thread::sleep(Duration::from_millis(5));
            let n = buf.len().min(3).min(24 - self.1 as usize);
            let r = std::pin::Pin::new(&mut self.0).poll_write(cx, &buf[..n]);
            if let std::task::Poll::Ready(Ok(k)) = &r {
                self.1 += *k as u32;
            }
            return r;
        }
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

#[test]
fn a_hundred_concurrent_streams_on_one_connection_are_byte_exact() {
    let (s, h2c, _) = start("");
    rt().block_on(async {
        let send = c::connect(h2c).await;
        let mut tasks = Vec::new();
        for i in 0..100usize {
            let send = send.clone();
            tasks.push(tokio::spawn(async move {
                let path = if i % 10 == 0 {
                    "/big.bin".to_string()
                } else {
                    format!("/f/{i}.txt")
                };
                (i, c::get(&send, &path).await)
            }));
        }
        let big = big();
        for t in tasks {
            let (i, r) = t.await.unwrap();
            assert_eq!(r.status, 200, "stream {i}");
            if i % 10 == 0 {
                assert!(r.body == big, "stream {i}: big.bin differs");
            } else {
                assert_eq!(r.body, format!("file {i}\n").repeat(i + 1).into_bytes());
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut log = s.read("logs/access.log");
    while log.matches("\"h2c\" HTTP/2.0").count() < 100 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        log = s.read("logs/access.log");
    }
    assert_eq!(log.matches("\"h2c\" HTTP/2.0").count(), 100, "{log}");
}

#[test]
fn ranges_conditionals_and_head_over_h2() {
    let (_s, h2c, _) = start("");
    rt().block_on(async {
        let send = c::connect(h2c).await;
        let r = c::request(&send, "GET", "/big.bin", &[("range", "bytes=10-19")], None)
            .await
            .unwrap();
        assert_eq!(r.status, 206);
        assert_eq!(r.header("content-range"), Some("bytes 10-19/1048576"));
        assert_eq!(r.body, big()[10..20]);
        let r = c::request(
            &send,
            "GET",
            "/big.bin",
            &[("range", "bytes=0-1,5-6")],
            None,
        )
        .await
        .unwrap();
        assert_eq!(r.status, 206);
        assert!(r
            .header("content-type")
            .unwrap()
            .starts_with("multipart/byteranges"));
        assert_eq!(
            r.body.len() as u64,
            r.header("content-length").unwrap().parse::<u64>().unwrap()
        );
        let etag = c::get(&send, "/index.html")
            .await
            .header("etag")
            .unwrap()
            .to_string();
        let r = c::request(
            &send,
            "GET",
            "/index.html",
            &[("if-none-match", &etag)],
            None,
        )
        .await
        .unwrap();
        assert_eq!(r.status, 304);
        assert!(r.body.is_empty());
        assert_eq!(r.header("content-length"), None);
        let r = c::request(&send, "HEAD", "/big.bin", &[], None)
            .await
            .unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-length"), Some("1048576"));
        assert!(r.body.is_empty());
        let r = c::get(&send, "/missing").await;
        assert_eq!(r.status, 404);
        assert!(String::from_utf8_lossy(&r.body).contains("404 Not Found"));
        // HTTP/2 responses carry no connection-specific fields.
        assert!(r.header("connection").is_none());
    });
}

#[test]
fn a_large_file_under_a_small_window_arrives_whole_in_chunk_sized_frames() {
    let (s, h2c, _) = start("http2_chunk_size 4k;");
    rt().block_on(async {
        let mut b = h2::client::Builder::new();
        b.initial_window_size(3000)
            .initial_connection_window_size(3000);
        let send = c::connect_with(h2c, b).await;
        let started = Instant::now();
        let r = c::get(&send, "/big.bin").await;
        assert!(r.body == big(), "body differs ({} bytes)", r.body.len());
        assert!(started.elapsed() < Duration::from_secs(20));
    });
    let (out, ok) = c::nghttp(&["-v", "-n", &format!("http://127.0.0.1:{h2c}/big.bin")]);
    assert!(ok);
    let sizes: Vec<usize> = out
        .lines()
        .filter(|l| l.contains("recv DATA frame"))
        .filter_map(|l| l.split("length=").nth(1)?.split(',').next()?.parse().ok())
        .collect();
    assert_eq!(sizes.iter().sum::<usize>(), 1024 * 1024);
    assert_eq!(sizes.iter().max(), Some(&4096), "{sizes:?}");
    drop(s);
}

#[test]
fn the_keepalive_timeout_closes_an_idle_connection_with_goaway() {
    let (_s, h2c, _) = start("keepalive_timeout 1s;");
    rt().block_on(async {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", h2c))
            .await
            .unwrap();
        let (send, conn) = h2::client::handshake(tcp).await.unwrap();
        let driver = tokio::spawn(conn);
        // The client keeps its handle: only the server may end the
        // connection.
        let send = send.ready().await.unwrap();
        let r = c::get(&send, "/index.html").await;
        assert_eq!(r.status, 200);
        let started = Instant::now();
        let end = tokio::time::timeout(Duration::from_secs(5), driver)
            .await
            .expect("connection still open after keepalive_timeout");
        assert!(end.unwrap().is_ok(), "not a graceful GOAWAY");
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(800), "{waited:?}");
        drop(send);
    });
}

#[test]
fn listen_http2_is_accepted_with_nginx_warning_and_obsolete_directives_warn() {
    let dir = TempDir::new("h2conf");
    std::fs::create_dir_all(dir.path().join("logs")).unwrap();
    let conf = "events {}\nhttp {\n  http2_idle_timeout 10s;\n  server {\n    listen 127.0.0.1:1 http2;\n  }\n}\n";
    dir.write("porter.conf", conf);
    let out = common::run(&[
        "-t",
        "-p",
        dir.path().to_str().unwrap(),
        "-c",
        "porter.conf",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("[warn] the \"listen ... http2\" directive is deprecated, use the \"http2\" directive instead in"),
        "{err}"
    );
    assert!(
        err.contains("[warn] the \"http2_idle_timeout\" directive is obsolete, use the \"keepalive_timeout\" directive instead in"),
        "{err}"
    );
    dir.write("porter.conf", "events {}\nhttp { http2 maybe; }\n");
    let out = common::run(&[
        "-t",
        "-p",
        dir.path().to_str().unwrap(),
        "-c",
        "porter.conf",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains(
            "invalid value \"maybe\" in \"http2\" directive, it must be \"on\" or \"off\""
        ),
        "{err}"
    );
}

/// A body sent to a static file (POST to a missing one: 404; PUT: 405)
/// is read and dropped after the answer, as NGINX discards it, so the
/// stream ends cleanly: dropped unread, the stream was reset with CANCEL
/// and curl reported a framing error instead of the answer.
#[test]
fn a_body_sent_to_a_static_file_gets_its_answer_not_a_reset() {
    let (s, h2c, _) = start("");
    let body = s.prefix.write("body.bin", vec![b'x'; 300_000]);
    let data = format!("@{}", body.display());
    for (method, path, want) in [
        ("POST", "/missing", "404"),
        ("POST", "/index.html", "405"),
        ("PUT", "/missing", "405"),
    ] {
        let url = format!("http://127.0.0.1:{h2c}{path}");
        let (out, err, ok) = c::curl(&[
            "--http2-prior-knowledge",
            "-X",
            method,
            "--data-binary",
            &data,
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            &url,
        ]);
        assert!(ok, "{method} {path}: {err}");
        assert_eq!(String::from_utf8_lossy(&out), want, "{method} {path}");
    }
}
