//! The reverse proxy over real sockets: porter between a test client and
//! in-test origin servers (threads speaking HTTP/1.1 on loopback) whose
//! replies each test scripts — headers, bodies, framing, delays, faults.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::origin::*;
use crate::common::*;

fn conf(http_extra: &str, server_body: &str) -> String {
    format!(
        "daemon off;\nworker_processes 2;\npid {{PREFIX}}/porter.pid;\nerror_log {{PREFIX}}/logs/error.log info;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n  access_log {{PREFIX}}/logs/access.log;\n{http_extra}\n\
           server {{\n    listen 127.0.0.1:{{PORT}};\n    server_name localhost;\n{server_body}\n  }}\n}}\n"
    )
}

fn request(port: u16, raw: &[u8]) -> Resp {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(raw).unwrap();
    let mut buf = Vec::new();
    read_response(&mut s, &mut buf, raw.starts_with(b"HEAD ")).expect("response")
}

fn get1(port: u16, path: &str) -> Resp {
    request(
        port,
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

fn echo(r: &Req) -> Reply {
    Reply::ok(&r.body)
        .header("X-Method", &r.method)
        .header("X-Target", &r.target)
}

#[test]
fn get_head_post_round_trip_byte_exact() {
    let big = pattern(3 * 1024 * 1024 + 17, 0);
    let big2 = big.clone();
    let o = Origin::start(move |r| match r.target.as_str() {
        "/big" => Reply::ok(&big2),
        "/chunked" => Reply::ok(&big2).framing(Framing::Chunked),
        "/close" => Reply::ok(b"until close").framing(Framing::Close),
        _ => echo(r),
    });
    let s = Server::start(&conf(
        "",
        &format!(
            "    client_max_body_size 10m;\n    location / {{ proxy_pass http://127.0.0.1:{}; }}",
            o.port
        ),
    ));
    let r = get1(s.port, "/big");
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("Content-Length"),
        Some(big.len().to_string().as_str())
    );
    assert!(r.body == big, "big body differs");
    // Chunked from the origin: chunked to an HTTP/1.1 client...
    let r = get1(s.port, "/chunked");
    assert_eq!(r.header("Transfer-Encoding"), Some("chunked"));
    assert!(r.body == big);
    // ...and close-delimited to an HTTP/1.0 one.
    let r = request(s.port, b"GET /chunked HTTP/1.0\r\nHost: localhost\r\n\r\n");
    assert_eq!(r.header("Transfer-Encoding"), None);
    assert_eq!(r.header("Connection"), Some("close"));
    assert!(r.body == big);
    let r = get1(s.port, "/close");
    assert_eq!(r.body, b"until close");
    // HEAD: the origin's length, no body.
    let r = request(
        s.port,
        b"HEAD /big HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("Content-Length"),
        Some(big.len().to_string().as_str())
    );
    assert!(r.body.is_empty());
    assert_eq!(o.requests().last().unwrap().method, "HEAD");
    // POST with Content-Length (multi-MB) and chunked bodies.
    let mut req = format!(
        "POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        big.len()
    )
    .into_bytes();
    req.extend_from_slice(&big);
    let r = request(s.port, &req);
    assert_eq!(r.status, 200);
    assert!(r.body == big, "echoed POST body differs");
    let mut req =
        b"POST /echo HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            .to_vec();
    for c in big[..200_000].chunks(7000) {
        req.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        req.extend_from_slice(c);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    let r = request(s.port, &req);
    assert_eq!(r.status, 200);
    assert!(r.body == big[..200_000]);
    // HTTP/1.0 upstream: the chunked body went with a Content-Length.
    let last = o.requests().last().unwrap().clone();
    assert_eq!(last.header("Content-Length"), Some("200000"));
    assert_eq!(last.header("Transfer-Encoding"), None);
}

#[test]
fn uri_replacement_follows_nginx() {
    let o = Origin::start(echo);
    let p = o.port;
    let s = Server::start(&conf(
        "",
        &format!(
            "    location /a/ {{ proxy_pass http://127.0.0.1:{p}/b/; }}\n\
             location /plain/ {{ proxy_pass http://127.0.0.1:{p}; }}\n\
             location /c {{ proxy_pass http://127.0.0.1:{p}/d; }}\n\
             location = /exact {{ proxy_pass http://127.0.0.1:{p}/other; }}\n\
             location /var/ {{ proxy_pass http://127.0.0.1:{p}/fixed$is_args$args; }}\n\
             location /novar/ {{ proxy_pass http://$server_addr:{p}; }}"
        ),
    ));
    let target = |path: &str| get1(s.port, path).header("X-Target").unwrap().to_string();
    assert_eq!(target("/a/x/y?q=1"), "/b/x/y?q=1");
    assert_eq!(target("/a/sp%20ace"), "/b/sp%20ace");
    // Without a URI part: the request target exactly as sent.
    assert_eq!(target("/plain/x%2Fy/../z?q=%41"), "/plain/x%2Fy/../z?q=%41");
    assert_eq!(target("/cx"), "/dx");
    assert_eq!(target("/exact?k=v"), "/other?k=v");
    // Variables with a URI part: sent as rendered, nothing appended.
    assert_eq!(target("/var/zzz?k=v"), "/fixed?k=v");
    // Variables without one: the client's target.
    assert_eq!(target("/novar/p?x"), "/novar/p?x");
}

#[test]
fn request_and_response_headers() {
    let o = Origin::start(|r| {
        echo(r)
            .header("Server", "origin")
            .header("Date", "Thu, 01 Jan 1970 00:00:00 GMT")
            .header("X-Accel-Redirect", "/x")
            .header("X-Secret", "s")
            .header("X-Kept", "k")
            .header("Set-Cookie", "a=1")
            .header("Set-Cookie", "b=2")
    });
    let p = o.port;
    let s = Server::start(&conf(
        "",
        &format!(
            "    location / {{ proxy_pass http://127.0.0.1:{p}; proxy_hide_header X-Secret;\n\
               proxy_ignore_headers X-Accel-Redirect; }}\n\
             location /set/ {{\n\
               proxy_pass http://127.0.0.1:{p};\n\
               proxy_ignore_headers X-Accel-Redirect;\n\
               proxy_set_header X-Real-IP $remote_addr;\n\
               proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;\n\
               proxy_set_header User-Agent \"\";\n\
               proxy_pass_header X-Accel-Redirect;\n\
             }}"
        ),
    ));
    let r = request(
        s.port,
        b"GET /x HTTP/1.1\r\nHost: localhost\r\nUser-Agent: t\r\nConnection: close\r\n\r\n",
    );
    let req = o.requests().last().unwrap().clone();
    assert_eq!(req.line, "GET /x HTTP/1.0");
    let names: Vec<&str> = req.headers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["Host", "Connection", "User-Agent"]);
    assert_eq!(req.header("Host"), Some(format!("127.0.0.1:{p}").as_str()));
    assert_eq!(req.header("Connection"), Some("close"));
    assert_eq!(
        r.header("Server"),
        Some(concat!("porter/", env!("CARGO_PKG_VERSION")))
    );
    assert_ne!(r.header("Date"), Some("Thu, 01 Jan 1970 00:00:00 GMT"));
    assert_eq!(r.header("X-Accel-Redirect"), None);
    assert_eq!(r.header("X-Secret"), None);
    assert_eq!(r.header("X-Kept"), Some("k"));
    let cookies: Vec<&str> = r
        .headers
        .iter()
        .filter(|(n, _)| n == "Set-Cookie")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(cookies, ["a=1", "b=2"]);
    let r = request(
        s.port,
        b"GET /set/ HTTP/1.1\r\nHost: localhost\r\nUser-Agent: t\r\nX-Forwarded-For: 10.0.0.1\r\nConnection: close\r\n\r\n",
    );
    let req = o.requests().last().unwrap().clone();
    let names: Vec<&str> = req.headers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["X-Real-IP", "X-Forwarded-For", "Host", "Connection"]
    );
    assert_eq!(req.header("X-Forwarded-For"), Some("10.0.0.1, 127.0.0.1"));
    assert_eq!(r.header("X-Accel-Redirect"), Some("/x"));
    assert_eq!(r.header("X-Secret"), Some("s"));
}

fn named_origin(name: &'static str) -> Origin {
    Origin::start(move |r| echo(r).header("X-Origin", name))
}

#[test]
fn weighted_round_robin_spreads_like_nginx() {
    let a = named_origin("a");
    let b = named_origin("b");
    let s = Server::start(&conf(
        &format!(
            "upstream u {{ server 127.0.0.1:{} weight=3; server 127.0.0.1:{}; }}",
            a.port, b.port
        ),
        "    location / { proxy_pass http://u; }",
    ));
    let seq: String = (0..8)
        .map(|_| get1(s.port, "/").header("X-Origin").unwrap().to_string())
        .collect();
    // Smooth weighted round-robin: a a b a, twice.
    assert_eq!(seq, "aabaaaba");
}

#[test]
fn failed_peer_is_skipped_and_backup_answers() {
    let a = named_origin("a");
    let backup = named_origin("backup");
    let dead = free_port();
    let s = Server::start(&conf(
        &format!(
            "upstream u {{ server 127.0.0.1:{dead} max_fails=1 fail_timeout=30s; server 127.0.0.1:{} ; }}\n\
             upstream only_dead {{ server 127.0.0.1:{dead}; server 127.0.0.1:{dead} backup; server 127.0.0.1:{} backup; }}",
            a.port, backup.port
        ),
        "    location / { proxy_pass http://u; }\n    location /b/ { proxy_pass http://only_dead; }",
    ));
    for _ in 0..6 {
        let r = get1(s.port, "/");
        assert_eq!(r.status, 200);
        assert_eq!(r.header("X-Origin"), Some("a"));
    }
    let log = s.wait_log("logs/error.log", "connect() failed", Duration::from_secs(5));
    // Tried once, then skipped for fail_timeout.
    assert_eq!(log.matches("connect() failed").count(), 1, "{log}");
    let r = get1(s.port, "/b/x");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("X-Origin"), Some("backup"));
}

#[test]
fn errors_give_nginx_statuses_and_log_lines() {
    let slow = Origin::start(|r| echo(r).delay(Duration::from_secs(3)));
    let bad = Origin::start(|r| match r.target.as_str() {
        "/invalid" => Reply::ok(b"").framing(Framing::Raw(
            b"HTTP/1.1 200 OK\r\nBad Header\r\n\r\n".to_vec(),
        )),
        "/nohead" => Reply::ok(b"").framing(Framing::Raw(b"HTTP/1.1 200 OK\r\nX-A: b".to_vec())),
        "/big" => Reply::ok(b"").header("X-Big", &"b".repeat(5000)),
        _ => Reply::ok(b""),
    });
    let dead = free_port();
    let s = Server::start(&conf(
        "",
        &format!(
            "    location / {{ proxy_pass http://127.0.0.1:{dead}; }}\n\
             location /slow {{ proxy_pass http://127.0.0.1:{}; proxy_read_timeout 1s; }}\n\
             location /invalid {{ proxy_pass http://127.0.0.1:{b}; }}\n\
             location /nohead {{ proxy_pass http://127.0.0.1:{b}; }}\n\
             location /big {{ proxy_pass http://127.0.0.1:{b}; }}",
            slow.port,
            b = bad.port
        ),
    ));
    let r = get1(s.port, "/x");
    assert_eq!(r.status, 502);
    let log = s.wait_log("logs/error.log", "while connecting", Duration::from_secs(5));
    assert!(
        log.contains(&format!(
            "connect() failed (111: Connection refused) while connecting to upstream, client: 127.0.0.1, server: localhost, request: \"GET /x HTTP/1.1\", upstream: \"http://127.0.0.1:{dead}/x\", host: \"localhost\""
        )),
        "{log}"
    );
    let t = Instant::now();
    let r = get1(s.port, "/slow");
    assert_eq!(r.status, 504);
    assert!(t.elapsed() < Duration::from_millis(2900));
    let log = s.wait_log("logs/error.log", "timed out", Duration::from_secs(5));
    assert!(
        log.contains("upstream timed out (110: Connection timed out) while reading response header from upstream, client: 127.0.0.1"),
        "{log}"
    );
    assert_eq!(get1(s.port, "/invalid").status, 502);
    let log = s.wait_log("logs/error.log", "invalid header", Duration::from_secs(5));
    assert!(
        log.contains("upstream sent invalid header: \"Bad\\x20...\" while reading response header from upstream"),
        "{log}"
    );
    assert_eq!(get1(s.port, "/nohead").status, 502);
    let log = s.wait_log("logs/error.log", "prematurely", Duration::from_secs(5));
    assert!(
        log.contains(
            "upstream prematurely closed connection while reading response header from upstream"
        ),
        "{log}"
    );
    assert_eq!(get1(s.port, "/big").status, 502);
    let log = s.wait_log("logs/error.log", "too big", Duration::from_secs(5));
    assert!(
        log.contains("upstream sent too big header while reading response header from upstream"),
        "{log}"
    );
}

#[test]
fn next_upstream_retries_only_listed_conditions() {
    let failing = Origin::start(|r| echo(r).status(502).header("X-Origin", "f"));
    let good = named_origin("g");
    let s = Server::start(&conf(
        // One group per location: a 502 that counts as a failure takes the
        // peer out of its group for fail_timeout.
        &format!(
            "upstream u {{ server 127.0.0.1:{f}; server 127.0.0.1:{g}; }}\n\
             upstream u2 {{ server 127.0.0.1:{f}; server 127.0.0.1:{g}; }}\n\
             upstream u3 {{ server 127.0.0.1:{f}; server 127.0.0.1:{g}; }}\n\
             upstream u4 {{ server 127.0.0.1:{f}; server 127.0.0.1:{g}; }}\n\
             upstream u5 {{ server 127.0.0.1:{dead}; server 127.0.0.1:{g}; }}",
            f = failing.port,
            g = good.port,
            dead = free_port()
        ),
        "    location /retry/ { proxy_pass http://u; proxy_next_upstream error http_502; }\n\
             location /plain/ { proxy_pass http://u2; }\n\
             location /post/ { proxy_pass http://u3; proxy_next_upstream error http_502; }\n\
             location /put/ { proxy_pass http://u4; proxy_next_upstream error http_502; }\n\
             location /postdead/ { proxy_pass http://u5; }",
    ));
    for _ in 0..4 {
        let r = get1(s.port, "/retry/");
        assert_eq!((r.status, r.header("X-Origin")), (200, Some("g")));
    }
    // A small body is kept, so an idempotent request with one is retried
    // with its body (the fresh group asks the failing peer first).
    let before = failing.requests().len();
    let r = request(
        s.port,
        b"PUT /put/ HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc",
    );
    assert_eq!((r.status, r.body.as_slice()), (200, &b"abc"[..]));
    assert_eq!(r.header("X-Origin"), Some("g"));
    let tried = failing.requests();
    assert_eq!(tried.len(), before + 1);
    assert_eq!(tried.last().unwrap().body, b"abc");
    // Without http_502, the 502 is the answer (on whichever turn).
    let statuses: Vec<u16> = (0..4).map(|_| get1(s.port, "/plain/").status).collect();
    assert!(statuses.contains(&502), "{statuses:?}");
    // POST is not idempotent: not retried.
    let posts: Vec<u16> = (0..4)
        .map(|_| {
            request(
                s.port,
                b"POST /post/ HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            )
            .status
        })
        .collect();
    assert!(posts.contains(&502), "{posts:?}");
    // A POST that never reached a peer (connect refused) does go on.
    let r = request(
        s.port,
        b"POST /postdead/ HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi",
    );
    assert_eq!((r.status, r.header("X-Origin")), (200, Some("g")));
}

#[test]
fn keepalive_reuses_upstream_connections() {
    let o = Origin::start(echo);
    let p = o.port;
    let s = Server::start(&conf(
        &format!("upstream ka {{ server 127.0.0.1:{p}; keepalive 4; }}\nupstream noka {{ server 127.0.0.1:{p}; }}"),
        "    location /ka/ { proxy_pass http://ka; proxy_http_version 1.1; proxy_set_header Connection \"\"; }\n\
             location /noka/ { proxy_pass http://noka; }",
    ));
    for i in 0..20 {
        let r = get1(s.port, &format!("/ka/{i}"));
        assert_eq!(r.status, 200);
        assert_eq!(r.header("X-Target"), Some(format!("/ka/{i}").as_str()));
    }
    // Two workers: at most one new connection each (plus one spare).
    let ka = o.conns();
    assert!(ka <= 3, "{ka} connections for 20 keep-alive requests");
    assert!(o.requests().iter().all(|r| r.line.ends_with("HTTP/1.1")));
    for _ in 0..5 {
        assert_eq!(get1(s.port, "/noka/").status, 200);
    }
    assert_eq!(o.conns(), ka + 5);
}

#[test]
fn truncated_upstream_body_truncates_and_closes_client() {
    let body = pattern(100_000, 0);
    let o = Origin::start(move |_| Reply::ok(&body).framing(Framing::Truncate(30_000)));
    let s = Server::start(&conf(
        "",
        &format!(
            "    location / {{ proxy_pass http://127.0.0.1:{}; }}",
            o.port
        ),
    ));
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    // Keep-alive was asked for, yet the connection closes after the
    // partial body.
    let all = read_all(&mut c);
    let head_end = find(&all, b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&all[..head_end]);
    assert!(head.contains("Content-Length: 100000"), "{head}");
    assert_eq!(all.len() - head_end, 30_000);
    let log = s.wait_log(
        "logs/error.log",
        "while reading upstream",
        Duration::from_secs(5),
    );
    assert!(
        log.contains(
            "upstream prematurely closed connection while reading upstream, client: 127.0.0.1"
        ),
        "{log}"
    );
}

/// An upstream that sends its header and closes before any of the body:
/// the client still gets the header (NGINX sends it before it reads the
/// body), then the close; `add_after_body` adds nothing to it.
#[test]
fn upstream_closed_after_header_still_sends_the_head() {
    let o = Origin::start(|_| Reply::ok(&[b'x'; 100]).framing(Framing::Truncate(0)));
    let s = Server::start(&conf(
        "",
        &format!(
            "    location / {{ proxy_pass http://127.0.0.1:{0}; }}
    location /after/ {{ proxy_pass http://127.0.0.1:{0}; add_after_body /tail; }}
    location /unbuf/ {{ proxy_pass http://127.0.0.1:{0}; proxy_buffering off; add_after_body /tail; }}
    location = /tail {{ return 200 \":after\"; }}",
            o.port
        ),
    ));
    // The race is whether the close is seen before the body is first
    // asked for: a few rounds of each make both orders likely.
    for round in 0..8 {
        for path in ["/", "/after/", "/unbuf/"] {
            let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
            c.write_all(b"GET ").unwrap();
            c.write_all(path.as_bytes()).unwrap();
            c.write_all(b" HTTP/1.0\r\nHost: localhost\r\n\r\n")
                .unwrap();
            let all = String::from_utf8_lossy(&read_all(&mut c)).into_owned();
            assert!(
                all.starts_with("HTTP/1.1 200 ") && all.ends_with("\r\n\r\n"),
                "round {round} {path}: {all:?}"
            );
        }
    }
}

#[test]
fn slow_client_holds_back_the_origin() {
    const LEN: u64 = 200 * 1024 * 1024;
    let o = Origin::start(|_| Reply::ok(b"").framing(Framing::Generated(LEN)));
    let s = Server::start(&conf(
        "",
        &format!(
            "    location / {{ proxy_pass http://127.0.0.1:{}; }}",
            o.port
        ),
    ));
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut first = [0u8; 1024];
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let got = c.read(&mut first).unwrap();
    // The client stops reading: porter must stop reading the origin.
    std::thread::sleep(Duration::from_secs(2));
    let stalled = o.written.load(Ordering::SeqCst);
    assert!(
        stalled < 40 * 1024 * 1024,
        "origin wrote {stalled} bytes to a stalled client's proxy"
    );
    let rss = rss_kib(s.child.id());
    assert!(rss < 100 * 1024, "porter RSS {rss} KiB");
    // Now read it all, slowly at first.
    let mut total = got as u64;
    let mut buf = vec![0u8; 256 * 1024];
    let mut peak = rss;
    let mut n_reads = 0u64;
    loop {
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => total += n as u64,
            Err(e) => panic!("read: {e}"),
        }
        n_reads += 1;
        if n_reads.is_multiple_of(200) {
            peak = peak.max(rss_kib(s.child.id()));
        }
    }
    let head_len = find(&first, b"\r\n\r\n").unwrap() as u64 + 4;
    assert_eq!(total - head_len, LEN);
    assert!(peak < 100 * 1024, "porter RSS peaked at {peak} KiB");
}

#[test]
fn upstream_variables_in_access_log() {
    let o = Origin::start(|r| echo(r).header("X-Up", "v"));
    let dead = free_port();
    let s = Server::start(&conf(
        &format!(
            "log_format up '$upstream_addr|$upstream_status|$upstream_http_x_up|$proxy_host|$proxy_port|$upstream_connect_time|$upstream_header_time';\n\
             upstream two {{ server 127.0.0.1:{dead}; server 127.0.0.1:{}; }}",
            o.port
        ),
        &format!(
            "    access_log {{PREFIX}}/logs/up.log up;\n    location / {{ proxy_pass http://127.0.0.1:{}; }}\n\
             location /two/ {{ proxy_pass http://two; }}",
            o.port
        ),
    ));
    assert_eq!(get1(s.port, "/").status, 200);
    let line = s.wait_log("logs/up.log", "|", Duration::from_secs(5));
    let line = line.lines().next().unwrap_or("");
    let parts: Vec<&str> = line.split('|').collect();
    assert_eq!(parts[0], format!("127.0.0.1:{}", o.port));
    assert_eq!(parts[1], "200");
    assert_eq!(parts[2], "v");
    assert_eq!(parts[3], format!("127.0.0.1:{}", o.port));
    assert_eq!(parts[4], o.port.to_string());
    assert!(parts[5].starts_with("0."), "{line}");
    // Two tries: each listed, `-` where the try has no value.
    assert_eq!(get1(s.port, "/two/").status, 200);
    let log = s.wait_log("logs/up.log", "two|", Duration::from_secs(5));
    let line = log.lines().nth(1).unwrap_or("");
    let parts: Vec<&str> = line.split('|').collect();
    assert_eq!(
        parts[0],
        format!("127.0.0.1:{dead}, 127.0.0.1:{}", o.port),
        "{line}"
    );
    assert_eq!(parts[1], "502, 200");
    assert_eq!(parts[3], "two");
    assert_eq!(parts[4], "80");
    assert!(parts[5].starts_with("-, 0."), "{line}");
    assert!(parts[6].starts_with("-, 0."), "{line}");
}

#[test]
fn config_errors_name_file_and_line() {
    let prefix = TempDir::new("proxyconf");
    std::fs::create_dir_all(prefix.path().join("logs")).unwrap();
    let cases = [
        (
            "location / { proxy_pass http://no-such-host.invalid:81/x; }",
            "host not found in upstream \"no-such-host.invalid:81/x\"",
        ),
        (
            "location / { proxy_pass ftp://x; }",
            "invalid URL prefix in \"ftp://x\"",
        ),
        (
            "location / { proxy_pass http://127.0.0.1:1; proxy_http_version 2.0; }",
            "invalid value \"2.0\"",
        ),
        (
            "location / { proxy_pass http://127.0.0.1:1; proxy_next_upstream bogus; }",
            "invalid value \"bogus\"",
        ),
    ];
    for (body, msg) in cases {
        let text = conf("", &format!("    {body}"))
            .replace("{PORT}", "1")
            .replace("{PREFIX}", prefix.path().to_str().unwrap());
        let f = prefix.write("bad.conf", &text);
        let out = run(&["-t", "-c", f.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(err.contains(msg), "{err}");
        assert!(err.contains(&format!("{}:", f.display())), "{err}");
    }
    let text = conf("upstream u { server 127.0.0.1:1 weight=0; }", "")
        .replace("{PORT}", "1")
        .replace("{PREFIX}", prefix.path().to_str().unwrap());
    let f = prefix.write("bad2.conf", &text);
    let err = String::from_utf8_lossy(&run(&["-t", "-c", f.to_str().unwrap()]).stderr).into_owned();
    assert!(err.contains("invalid parameter \"weight=0\""), "{err}");
    let line = text.lines().position(|l| l.contains("weight=0")).unwrap() + 1;
    assert!(err.contains(&format!("bad2.conf:{line}")), "{err}");
}

#[test]
fn hash_balancing_maps_keys_like_nginx() {
    let origins = [
        named_origin("a"),
        named_origin("b"),
        named_origin("c"),
        named_origin("d"),
    ];
    let servers = format!(
        "server 127.0.0.1:{}; server 127.0.0.1:{} weight=2; server 127.0.0.1:{}; server 127.0.0.1:{} weight=3;",
        origins[0].port, origins[1].port, origins[2].port, origins[3].port
    );
    let upstreams = format!(
        "upstream c {{ hash $arg_k consistent; {servers} }}\nupstream h {{ hash $arg_k; {servers} }}"
    );
    let locations =
        "location /c/ { proxy_pass http://c; }\n    location /h/ { proxy_pass http://h; }";
    let Some(ngx) = Nginx::start(&format!(
        "{upstreams}\n  server {{\n    listen 127.0.0.1:{{PORT}};\n    {locations}\n  }}"
    )) else {
        eprintln!("nginx not installed: skipping the hash comparison");
        return;
    };
    let s = Server::start(&conf(&upstreams, &format!("    {locations}")));
    for kind in ["c", "h"] {
        let mut spread = std::collections::HashMap::new();
        for i in 0..200 {
            let path = format!("/{kind}/?k=key{i}");
            let theirs = get1(ngx.port, &path).header("X-Origin").map(str::to_string);
            let ours = get1(s.port, &path).header("X-Origin").map(str::to_string);
            assert!(theirs.is_some(), "nginx answered {path} without an origin");
            assert_eq!(ours, theirs, "{path}");
            *spread.entry(ours.unwrap()).or_insert(0) += 1;
        }
        // Every server got some keys (the comparison is not vacuous).
        assert_eq!(spread.len(), 4, "{kind}: {spread:?}");
    }
}

#[test]
fn continue_heads_and_upstream_connection_close() {
    let o = Origin::start(|r| match r.target.as_str() {
        "/1xx" => Reply::ok(b"").framing(Framing::Raw(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec(),
        )),
        "/closing" => {
            let mut r = echo(r);
            r.close = true;
            r
        }
        _ => echo(r),
    });
    let p = o.port;
    let s = Server::start(&conf(
        &format!("upstream ka {{ server 127.0.0.1:{p}; keepalive 8; }}"),
        &format!(
            "    location / {{ proxy_pass http://127.0.0.1:{p}; }}\n\
             location /closing {{ proxy_pass http://ka; proxy_http_version 1.1; proxy_set_header Connection \"\"; }}"
        ),
    ));
    // A 100 Continue from the upstream is skipped.
    let r = get1(s.port, "/1xx");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"ok"[..]));
    // The client's Expect: 100-continue is answered by porter before it
    // reads the body; the upstream never sees the Expect header.
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.write_all(b"POST /e HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: 5\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut interim = [0u8; 25];
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.read_exact(&mut interim).unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    c.write_all(b"hello").unwrap();
    let mut buf = Vec::new();
    let r = read_response(&mut c, &mut buf, false).unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"hello"[..]));
    let req = o.requests().last().unwrap().clone();
    assert_eq!(req.header("Expect"), None);
    // An upstream answering `Connection: close` is not pooled.
    let before = o.conns();
    for _ in 0..4 {
        assert_eq!(get1(s.port, "/closing").status, 200);
    }
    assert_eq!(o.conns(), before + 4);
}

#[test]
fn idle_upstream_connections_close_after_keepalive_timeout() {
    let o = Origin::start(echo);
    let s = Server::start(&conf(
        &format!(
            "upstream ka {{ server 127.0.0.1:{}; keepalive 4; keepalive_timeout 1s; }}",
            o.port
        ),
        "    location / { proxy_pass http://ka; proxy_http_version 1.1; proxy_set_header Connection \"\"; }",
    ));
    assert_eq!(get1(s.port, "/").status, 200);
    assert_eq!(o.conns(), 1);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        o.closed.load(Ordering::SeqCst),
        0,
        "closed before keepalive_timeout"
    );
    let deadline = Instant::now() + Duration::from_secs(3);
    while o.closed.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        o.closed.load(Ordering::SeqCst),
        1,
        "idle connection outlived keepalive_timeout"
    );
}

#[test]
fn idle_upstream_connection_closed_by_peer_is_dropped() {
    // The origin closes each connection right after answering, without
    // saying so: porter must drop it from the pool (its watcher sees the
    // close) and use a new one, with no error.
    let o = Origin::start(|r| {
        let mut reply = echo(r);
        reply.framing = Framing::Raw(
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nX-Target: {}\r\n\r\n",
                0, r.target
            )
            .into_bytes(),
        );
        reply
    });
    let s = Server::start(&conf(
        &format!("upstream ka {{ server 127.0.0.1:{}; keepalive 4; }}", o.port),
        "    location / { proxy_pass http://ka; proxy_http_version 1.1; proxy_set_header Connection \"\"; }",
    ));
    for i in 0..3 {
        let r = get1(s.port, &format!("/{i}"));
        assert_eq!(r.status, 200, "request {i}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(o.conns(), 3);
    let log = s.read("logs/error.log");
    assert!(!log.contains("[error]"), "{log}");
}

/// The same requests through nginx and porter to one origin: the origin
/// must receive the same request line and header lines from both, and the
/// client the same status and upstream headers.
#[test]
fn upstream_requests_match_nginx() {
    let o = redirecting_origin();
    let p = o.port;
    // A server-level proxy_set_header reaches every location without its
    // own lines (all-or-nothing inheritance): /set/ does not get it.
    let locations = format!(
        "proxy_set_header X-Srv 1;\n\
         location /a/ {{ proxy_pass http://127.0.0.1:{p}/b/; }}\n\
         location /plain/ {{ proxy_pass http://127.0.0.1:{p}; }}\n\
         location /c {{ proxy_pass http://127.0.0.1:{p}/d; }}\n\
         location /set/ {{ proxy_pass http://127.0.0.1:{p}; proxy_set_header X-Real-IP $remote_addr; \
           proxy_set_header X-FF $proxy_add_x_forwarded_for; proxy_set_header User-Agent \"\"; \
           proxy_set_header X-Host $proxy_host:$proxy_port; }}\n\
         location /var/ {{ proxy_pass http://127.0.0.1:{p}/fixed$is_args$args; }}\n\
         location /h11/ {{ proxy_pass http://127.0.0.1:{p}; proxy_http_version 1.1; proxy_hide_header X-Up; }}\n\
         location /red/ {{ proxy_pass http://127.0.0.1:{p}/b/; proxy_redirect http://127.0.0.1:{p}/elsewhere /moved; proxy_redirect default; }}\n\
         location /off/ {{ proxy_pass http://127.0.0.1:{p}/b/; proxy_redirect off; }}\n\
         location /srv/ {{ proxy_pass http://127.0.0.1:{p}; proxy_pass_header Server; proxy_pass_header X-Accel-Expires; }}"
    );
    let Some(ngx) = Nginx::start(&format!(
        "server {{\n listen 127.0.0.1:{{PORT}};\n server_name localhost;\n {locations}\n }}"
    )) else {
        eprintln!("nginx not installed: skipping");
        return;
    };
    let s = Server::start(&conf("", &locations));
    for raw in &upstream_cases() {
        same_upstream_request(&o, ngx.port, s.port, raw);
    }
}

/// An origin that echoes, marks its answers and redirects on `r1`..`r4`
/// in the shapes backends send.
fn redirecting_origin() -> Origin {
    let port = Arc::new(AtomicUsize::new(0));
    let port2 = port.clone();
    let o = Origin::start(move |r| {
        let p = port2.load(Ordering::SeqCst);
        let reply = echo(r)
            .header("X-Accel-Expires", "10")
            .header("X-Up", "1")
            .header("Server", "origin");
        // Redirects in the shapes backends send them.
        match r.target.rsplit('/').next().unwrap_or("") {
            "r1" => reply
                .status(302)
                .header("Location", &format!("http://127.0.0.1:{p}/b/next")),
            "r2" => reply
                .status(301)
                .header("Location", &format!("http://127.0.0.1:{p}/elsewhere")),
            "r3" => reply.status(302).header("Location", "/rel/path"),
            "r4" => reply
                .status(302)
                .header("Location", "https://other.example/x"),
            _ => reply,
        }
    });
    port.store(o.port as usize, Ordering::SeqCst);
    o
}

/// The requests of [`upstream_requests_match_nginx`].
fn upstream_cases() -> Vec<Vec<u8>> {
    [
        "GET /a/x%20y?q=1 HTTP/1.1",
        "GET /a/%7Efoo/%3F HTTP/1.1",
        "GET /a/caf%C3%A9/./x/../y HTTP/1.1",
        "GET /plain/x%2Fy/../z?q=%41 HTTP/1.1",
        "GET /plain//double HTTP/1.0",
        "GET /cx?k HTTP/1.1",
        "GET /set/ HTTP/1.1",
        "GET /var/zzz?k=v HTTP/1.1",
        "GET /var/zzz HTTP/1.1",
        "HEAD /h11/ HTTP/1.1",
        "DELETE /plain/item HTTP/1.1",
        "GET /a/r1 HTTP/1.1",
        "GET /plain/r1 HTTP/1.1",
        "GET /red/r1 HTTP/1.1",
        "GET /red/r2 HTTP/1.1",
        "GET /red/r3 HTTP/1.1",
        "GET /red/r4 HTTP/1.1",
        "GET /off/r1 HTTP/1.1",
        "GET /srv/ HTTP/1.1",
    ]
    .iter()
    .map(|l| {
        format!(
            "{l}\r\nHost: localhost\r\nUser-Agent: t/1\r\nAccept: */*\r\nX-Forwarded-For: 10.1.1.1\r\nConnection: close\r\n\r\n"
        )
        .into_bytes()
    })
    .chain([
        b"POST /plain/form HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello".to_vec(),
        b"PUT /h11/up HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc".to_vec(),
    ])
    .collect()
}

/// `raw` through nginx then porter: the origin gets the same request
/// from both, the client the same answer.
fn same_upstream_request(o: &Origin, ngx: u16, porter: u16, raw: &[u8]) {
    let shown =
        String::from_utf8_lossy(&raw[..raw.iter().position(|&c| c == b'\r').unwrap()]).into_owned();
    let n0 = o.requests().len();
    let theirs = request(ngx, raw);
    let n1 = o.requests().len();
    let ours = request(porter, raw);
    let reqs = o.requests();
    assert_eq!(reqs.len(), n1 + 1, "{shown}");
    let (a, b) = (&reqs[n0..n1], &reqs[n1]);
    assert_eq!(a.len(), 1, "{shown}");
    let a = &a[0];
    assert_eq!(b.line, a.line, "{shown}: request line");
    assert_eq!(
        a.header("X-Srv").is_some(),
        !shown.contains("/set/"),
        "{shown}: inheritance"
    );
    assert_eq!(b.headers, a.headers, "{shown}: request headers");
    assert_eq!(b.body, a.body, "{shown}: request body");
    assert_eq!(ours.status, theirs.status, "{shown}: status");
    // Server and Date: by name and place only, and the upstream's
    // Server where it is passed.
    let names = |r: &Resp| -> Vec<String> {
        r.headers
            .iter()
            .map(|(n, v)| match n.as_str() {
                "Server" if v == "origin" => "Server: origin".to_string(),
                _ => n.clone(),
            })
            .collect()
    };
    assert_eq!(
        names(&ours),
        names(&theirs),
        "{shown}: response header names"
    );
    assert_eq!(ours.body, theirs.body, "{shown}: body");
}

#[test]
fn dead_pooled_connection_is_retried_on_a_fresh_one() {
    // Each connection answers once; a second request on it is met with a
    // close, as when a keep-alive timeout on the origin races a reuse.
    let o = Origin::start(|r| {
        if r.nth > 0 {
            Reply::ok(b"").framing(Framing::Raw(Vec::new()))
        } else {
            echo(r)
        }
    });
    let s = Server::start(&conf(
        &format!("upstream ka {{ server 127.0.0.1:{}; keepalive 4; }}", o.port),
        "    location / { proxy_pass http://ka; proxy_http_version 1.1; proxy_set_header Connection \"\"; }",
    ));
    for i in 0..4 {
        let r = get1(s.port, &format!("/{i}"));
        assert_eq!(
            (r.status, r.header("X-Target")),
            (200, Some(format!("/{i}").as_str()))
        );
    }
    // Every reuse was tried, failed before a byte came back, and went on
    // to a new connection: no request failed.
    let reused = o.requests().iter().filter(|r| r.nth > 0).count();
    assert!(reused > 0, "no pooled connection was reused");
    assert_eq!(o.requests().iter().filter(|r| r.nth == 0).count(), 4);
    assert_eq!(o.conns(), 4);
}

#[test]
fn tries_intercept_errors_and_body_limits() {
    let o = Origin::start(|r| match r.target.as_str() {
        "/ie/missing" => echo(r).status(404),
        _ => echo(r),
    });
    let p = o.port;
    let dead1 = free_port();
    let dead2 = free_port();
    let root = TempDir::new("ie");
    root.write("404.html", "custom page\n");
    let s = Server::start(&conf(
        &format!(
            "upstream t1 {{ server 127.0.0.1:{dead1}; server 127.0.0.1:{dead2}; server 127.0.0.1:{p}; }}\n\
             upstream t3 {{ server 127.0.0.1:{dead1}; server 127.0.0.1:{dead2}; server 127.0.0.1:{p}; }}"
        ),
        &format!(
            "    root {};\n    error_page 404 /404.html;\n\
             location /tries1/ {{ proxy_pass http://t1; proxy_next_upstream_tries 1; }}\n\
             location /tries3/ {{ proxy_pass http://t3; proxy_next_upstream_tries 3; }}\n\
             location /ie/ {{ proxy_pass http://127.0.0.1:{p}; proxy_intercept_errors on; }}\n\
             location /pass404/ {{ proxy_pass http://127.0.0.1:{p}/ie/; }}\n\
             location /limit/ {{ proxy_pass http://127.0.0.1:{p}; proxy_http_version 1.1; client_max_body_size 1k; }}\n\
             location /nohdr/ {{ proxy_pass http://127.0.0.1:{p}; proxy_pass_request_headers off; proxy_pass_request_body off; }}",
            root.path().display()
        ),
    ));
    // One try allowed: the first (dead) server's failure is the answer.
    assert_eq!(get1(s.port, "/tries1/").status, 502);
    // Three: past both dead servers to the live one.
    assert_eq!(get1(s.port, "/tries3/").status, 200);
    // proxy_intercept_errors: the upstream's 404 goes through error_page.
    let r = get1(s.port, "/ie/missing");
    assert_eq!((r.status, r.text()), (404, "custom page\n".to_string()));
    // Without it, the upstream's own 404 passes.
    let r = get1(s.port, "/pass404/missing");
    assert_eq!(r.status, 404);
    assert_eq!(r.header("X-Target"), Some("/ie/missing"));
    // A chunked body over client_max_body_size: 413.
    let mut req =
        b"POST /limit/ HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..3 {
        req.extend_from_slice(b"400\r\n");
        req.extend_from_slice(&[b'x'; 0x400]);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    assert_eq!(request(s.port, &req).status, 413);
    let log = s.wait_log("logs/error.log", "too large", Duration::from_secs(5));
    assert!(
        log.contains("client intended to send too large chunked body"),
        "{log}"
    );
    // proxy_pass_request_headers/body off.
    let n = o.requests().len();
    let r = request(
        s.port,
        b"POST /nohdr/ HTTP/1.1\r\nHost: localhost\r\nX-Client: 1\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc",
    );
    assert_eq!(r.status, 200);
    let req = o.requests()[n].clone();
    let names: Vec<&str> = req.headers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["Host", "Connection"]);
    assert!(req.body.is_empty());
}

#[test]
fn client_leaving_mid_body_closes_the_upstream() {
    const LEN: u64 = 64 * 1024 * 1024;
    let o = Origin::start(|_| Reply::ok(b"").framing(Framing::Generated(LEN)));
    let s = Server::start(&conf(
        "",
        &format!(
            "    location / {{ proxy_pass http://127.0.0.1:{}; }}",
            o.port
        ),
    ));
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut some = [0u8; 4096];
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = c.read(&mut some).unwrap();
    drop(c);
    // porter notices when its next write fails and drops the upstream
    // connection: the origin's writes fail and its connection ends.
    let deadline = Instant::now() + Duration::from_secs(10);
    while o.closed.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(o.closed.load(Ordering::SeqCst), 1);
    assert!(o.written.load(Ordering::SeqCst) < LEN);
    // And porter still serves (the whole body, this time).
    let r = get1(s.port, "/");
    assert_eq!((r.status, r.body.len() as u64), (200, LEN));
}

#[test]
fn reload_switches_upstreams_and_timeouts_bound_retries() {
    let a = named_origin("a");
    let b = named_origin("b");
    let ka = |port: u16| {
        conf(
            &format!("upstream u {{ server 127.0.0.1:{port}; keepalive 4; }}"),
            "    location / { proxy_pass http://u; proxy_http_version 1.1; proxy_set_header Connection \"\"; }",
        )
    };
    let s = Server::start(&ka(a.port));
    assert_eq!(get1(s.port, "/").header("X-Origin"), Some("a"));
    // A new generation has new groups: no idle connection to `a` is reused.
    s.prefix.write(
        "porter.conf",
        config_text(&ka(b.port), s.port, s.prefix.path()),
    );
    s.signal(1);
    let deadline = Instant::now() + Duration::from_secs(5);
    while get1(s.port, "/").header("X-Origin") != Some("b") {
        assert!(Instant::now() < deadline, "reload did not apply");
        std::thread::sleep(Duration::from_millis(50));
    }
    for _ in 0..5 {
        assert_eq!(get1(s.port, "/").header("X-Origin"), Some("b"));
    }

    // proxy_next_upstream_timeout: the first try's 1 s timeout used up the
    // 500 ms budget, so the good peer is not asked.
    let slow = Origin::start(|r| echo(r).delay(Duration::from_secs(2)));
    let s = Server::start(&conf(
        &format!(
            "upstream t {{ server 127.0.0.1:{}; server 127.0.0.1:{}; }}\n\
             upstream t2 {{ server 127.0.0.1:{}; server 127.0.0.1:{}; }}",
            slow.port, a.port, slow.port, a.port
        ),
        "    proxy_read_timeout 1s;\n\
             location /budget/ { proxy_pass http://t; proxy_next_upstream_timeout 500ms; }\n\
             location /nobudget/ { proxy_pass http://t2; }",
    ));
    assert_eq!(get1(s.port, "/budget/").status, 504);
    let r = get1(s.port, "/nobudget/");
    assert_eq!((r.status, r.header("X-Origin")), (200, Some("a")));
}
