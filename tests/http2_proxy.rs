//! The proxy and its cache over HTTP/2: a stream goes through the same
//! `proxy_pass` and `proxy_cache` handlers (upstreams stay HTTP/1.1).
//! Streamed (chunked) upstream bodies become DATA frames without the
//! HTTP/1 framing headers; request bodies stream upstream, with a
//! Content-Length when the client gave one and chunked when it did not;
//! MISS then HIT; `proxy_cache_lock` collapses concurrent streams on one
//! key into one upstream request; stale answers, purge, `porter_metrics`
//! and `stub_status` work on streams as on HTTP/1.1 connections.

use std::time::Duration;

use crate::common::h2client::{self as c, rt};
use crate::common::origin::{pattern, Framing, Origin, Reply};
use crate::common::{Server, TempDir};

fn conf(origin: u16) -> String {
    format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\n\
         events {{ worker_connections 512; }}\n\
         http {{\n  log_format p '$request $status $upstream_cache_status $http2';\n  \
           access_log {{PREFIX}}/logs/access.log p;\n  \
           proxy_cache_path {{PREFIX}}/cache levels=1:2 keys_zone=one:1m;\n  \
           server {{ listen 127.0.0.1:{{PORT}}; http2 on; http2_body_preread_size 16k;\n    \
             client_max_body_size 64m;\n    \
             location / {{ proxy_pass http://127.0.0.1:{origin}; }}\n    \
             location /cached/ {{ proxy_pass http://127.0.0.1:{origin}; proxy_cache one;\n      \
               proxy_cache_valid 200 1m; proxy_cache_lock on;\n      \
               add_header X-Cache $upstream_cache_status always; }}\n  }}\n}}\n"
    )
}

fn origin() -> Origin {
    Origin::start(|r| match r.target.as_str() {
        "/chunked" => Reply::ok(&pattern(300_000, 1))
            .framing(Framing::Chunked)
            .header("Connection", "keep-alive")
            .paced(10_000, Duration::from_millis(1)),
        "/upload" => Reply::ok(format!("got {} bytes\n", r.body.len()).as_bytes()),
        t if t.starts_with("/cached/") => Reply::ok(&pattern(100_000, 3))
            .header("Cache-Control", "max-age=60")
            .delay(Duration::from_millis(300)),
        _ => Reply::ok(b"origin\n"),
    })
}

#[test]
fn a_proxied_chunked_body_arrives_whole_without_http1_framing_fields() {
    let o = origin();
    let s = Server::start(&conf(o.port));
    rt().block_on(async {
        let send = c::connect(s.port).await;
        let r = c::get(&send, "/chunked").await;
        assert_eq!(r.status, 200);
        assert!(r.body == pattern(300_000, 1), "{} bytes", r.body.len());
        assert!(r.header("transfer-encoding").is_none());
        assert!(r.header("connection").is_none());
        assert_eq!(r.header("content-type"), Some("text/plain"));
    });
    let req = &o.requests()[0];
    assert_eq!(req.line, "GET /chunked HTTP/1.0");
    assert_eq!(req.header("host"), Some(&*format!("127.0.0.1:{}", o.port)));
}

#[test]
fn request_bodies_stream_upstream_with_and_without_a_length() {
    let o = origin();
    let s = Server::start(&conf(o.port));
    let body = pattern(3 << 20, 7);
    rt().block_on(async {
        let send = c::connect(s.port).await;
        let len = body.len().to_string();
        let r = c::request(
            &send,
            "POST",
            "/upload",
            &[("content-length", &len)],
            Some(body.clone()),
        )
        .await
        .unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.body, format!("got {} bytes\n", body.len()).into_bytes());
        let r = c::request(&send, "POST", "/upload", &[], Some(body.clone()))
            .await
            .unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.body, format!("got {} bytes\n", body.len()).into_bytes());
    });
    let reqs = o.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].header("content-length"), Some("3145728"));
    assert!(reqs[0].body == body);
    // No length from the client: a body HTTP/1.0 upstreams (the default
    // `proxy_http_version`) get read whole and sent with its length, as
    // NGINX does with a chunked HTTP/1.1 body.
    assert!(reqs[1].body == body);
    assert_eq!(reqs[1].header("content-length"), Some("3145728"));
}

#[test]
fn cache_miss_then_hit_and_the_lock_collapses_concurrent_streams() {
    let o = origin();
    let s = Server::start(&conf(o.port));
    rt().block_on(async {
        let send = c::connect(s.port).await;
        let r = c::get(&send, "/cached/a").await;
        assert_eq!(r.header("x-cache"), Some("MISS"));
        assert!(r.body == pattern(100_000, 3));
        let r = c::get(&send, "/cached/a").await;
        assert_eq!(r.header("x-cache"), Some("HIT"));
        assert!(r.body == pattern(100_000, 3));
        // Twenty streams at once on a cold key: one goes upstream.
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let send = send.clone();
                tokio::spawn(async move { c::get(&send, "/cached/b").await })
            })
            .collect();
        for t in tasks {
            let r = t.await.unwrap();
            assert_eq!(r.status, 200);
            assert!(r.body == pattern(100_000, 3));
        }
    });
    let to_b = o
        .requests()
        .iter()
        .filter(|r| r.target == "/cached/b")
        .count();
    assert_eq!(to_b, 1, "proxy_cache_lock let {to_b} streams upstream");
    let log = s.wait_log("logs/access.log", "HIT h2c", Duration::from_secs(3));
    assert!(log.contains("GET /cached/a HTTP/2.0 200 MISS h2c"), "{log}");
}

#[test]
fn expect_100_continue_gets_no_interim_response_over_h2_as_in_nginx() {
    // NGINX's ngx_http_test_expect returns at once for an HTTP/2 stream and
    // ngx_http_v2_read_request_body sends no 100: the client's window lets
    // it send the body at once. The body still reaches the upstream whole,
    // without the Expect field.
    let o = origin();
    let s = Server::start(&conf(o.port));
    let dir = TempDir::new("h2expect");
    let body = dir.path().join("body");
    std::fs::write(&body, pattern(40_000, 5)).unwrap();
    let (out, ok) = c::nghttp(&[
        "-v",
        "-H",
        "expect: 100-continue",
        "-d",
        body.to_str().unwrap(),
        &format!("http://127.0.0.1:{}/upload", s.port),
    ]);
    assert!(ok, "{out}");
    assert!(!out.contains(":status: 100"), "{out}");
    assert!(out.contains(":status: 200"), "{out}");
    assert!(out.contains("got 40000 bytes"), "{out}");
    let seen = o.requests();
    let up = seen.iter().find(|r| r.target == "/upload").expect("upload");
    assert!(up.header("expect").is_none(), "{:?}", up.headers);
}

/// The rest of the request model over HTTP/2: a stale answer when the
/// origin fails (`proxy_cache_use_stale`), `proxy_cache_purge`, and the
/// `porter_metrics` and `stub_status` handlers, each on streams of one
/// h2c connection.
#[test]
fn stale_purge_metrics_and_stub_status_over_h2() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let broken = Arc::new(AtomicBool::new(false));
    let b = broken.clone();
    let o = Origin::start(move |_| {
        if b.load(Ordering::SeqCst) {
            Reply::ok(b"origin broke\n").status(500)
        } else {
            Reply::ok(b"fresh\n")
        }
    });
    let conf = format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\n\
         events {{ worker_connections 64; }}\n\
         http {{\n  access_log off;\n  \
           proxy_cache_path {{PREFIX}}/cache levels=1:2 keys_zone=one:1m;\n  \
           server {{ listen 127.0.0.1:{{PORT}}; http2 on;\n    \
             location = /metrics {{ porter_metrics; }}\n    \
             location = /status {{ stub_status; }}\n    \
             location / {{ proxy_pass http://127.0.0.1:{}; proxy_cache one;\n      \
               proxy_cache_valid 200 1s; proxy_cache_use_stale error http_500;\n      \
               proxy_cache_purge PURGE from 127.0.0.1;\n      \
               add_header X-Cache $upstream_cache_status always; }}\n  }}\n}}\n",
        o.port
    );
    let s = Server::start(&conf);
    rt().block_on(async {
        let send = c::connect(s.port).await;
        let r = c::get(&send, "/k").await;
        assert_eq!((r.status, r.header("x-cache")), (200, Some("MISS")));
        assert_eq!(r.body, b"fresh\n");
        // Expired, and the origin now answers 500: the stale copy.
        broken.store(true, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(2200)).await;
        let r = c::get(&send, "/k").await;
        assert_eq!((r.status, r.header("x-cache")), (200, Some("STALE")));
        assert_eq!(r.body, b"fresh\n");
        // Purged: nothing stale is left to hide the origin's 500.
        let r = c::request(&send, "PURGE", "/k", &[], None).await.unwrap();
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let r = c::get(&send, "/k").await;
        assert_eq!(r.status, 500);
        assert_eq!(r.body, b"origin broke\n");
        let m = c::get(&send, "/metrics").await;
        assert_eq!(m.status, 200);
        let text = String::from_utf8_lossy(&m.body);
        assert!(text.contains("porter_requests_total"), "{text}");
        let st = c::get(&send, "/status").await;
        assert_eq!(st.status, 200);
        let text = String::from_utf8_lossy(&st.body);
        assert!(text.starts_with("Active connections: "), "{text}");
        assert!(text.contains("server accepts handled requests"), "{text}");
    });
}
