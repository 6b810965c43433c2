//! The `X-Accel-*` lines an upstream steers the proxy with, on the real
//! binary beside Debian's nginx 1.22 on the same origin and files:
//! `X-Accel-Redirect` to a file served from disk (an `internal` location),
//! with arguments, percent-encoded, to a named location, back to a proxied
//! location (the method becomes GET, HEAD stays), an unsafe or missing
//! target, the upstream's lines that stay on the answer, `proxy_ignore_headers
//! X-Accel-Redirect`; `X-Accel-Charset`; `X-Accel-Limit-Rate`; `X-Accel-Expires` (seconds,
//! `@` absolute, ignored) and `X-Accel-Buffering: no` with `proxy_cache`.
//!
//! Run: `cargo test --release --test area_proxy x_accel::`.

use std::time::{Duration, Instant};

use crate::common::origin::{Origin, Reply};
use crate::common::{one_worker_conf, raw, Nginx, Resp, Server, TempDir, NGINX};

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn origin() -> Origin {
    Origin::start(|r| {
        let path = r.target.split('?').next().unwrap_or("");
        let to = |target: &str| {
            Reply::ok(b"upstream body, replaced")
                .header("X-Accel-Redirect", target)
                .header("Content-Type", "application/x-custom")
                .header("Set-Cookie", "s=1")
                .header("Content-Disposition", "attachment; filename=\"a.txt\"")
                .header("Cache-Control", "private")
                .header("X-Other", "not kept")
        };
        match path {
            "/app/file" | "/ign/file" | "/c/file" => to("/protected/a.txt"),
            "/app/args" => to("/protected/a.txt?x=1"),
            "/app/encoded" => to("/protected/a%20b.txt"),
            "/app/named" => to("@named"),
            "/app/missing" => to("/protected/none.txt"),
            "/app/unsafe" => to("/protected/../secret.txt"),
            "/app/back" => to("/app/echo?from=accel"),
            "/cs/json" | "/csign/json" => Reply::ok(b"{}")
                .header("Content-Type", "application/json")
                .header("X-Accel-Charset", "utf-8"),
            "/cs/unknown" => Reply::ok(b"{}")
                .header("Content-Type", "application/json")
                .header("X-Accel-Charset", "koi8-r"),
            "/app/rate" => Reply::ok(&vec![b'r'; 40_000]).header("X-Accel-Limit-Rate", "20000"),
            "/c/short" => Reply::ok(b"short")
                .header("X-Accel-Expires", "1")
                .header("Cache-Control", "max-age=100"),
            "/c/at" => Reply::ok(b"at")
                .header("X-Accel-Expires", &format!("@{}", now() + 1))
                .header("Cache-Control", "max-age=100"),
            "/c/zero" => Reply::ok(b"zero")
                .header("X-Accel-Expires", "0")
                .header("Cache-Control", "max-age=100"),
            "/cign/short" => Reply::ok(b"ignored")
                .header("X-Accel-Expires", "1")
                .header("Cache-Control", "max-age=100"),
            "/c/nobuf" => Reply::ok(b"nobuf")
                .header("X-Accel-Buffering", "no")
                .header("Cache-Control", "max-age=100"),
            _ => Reply::ok(format!("echo {} {}\n", r.method, r.target).as_bytes()),
        }
    })
}

fn http(o: u16, files: &str) -> String {
    format!(
        "proxy_cache_path {{PREFIX}}/cache keys_zone=z:1m;\n\
server {{\n  listen 127.0.0.1:{{PORT}};\n  server_name localhost;\n\
  location /app/ {{\n    proxy_pass http://127.0.0.1:{o};\n  }}\n\
  location /ign/ {{\n    proxy_pass http://127.0.0.1:{o};\n    proxy_ignore_headers X-Accel-Redirect;\n  }}\n\
  location /protected/ {{\n    internal;\n    root {files};\n  }}\n\
  location @named {{\n    return 200 \"named $uri $request_method\\n\";\n  }}\n\
  location /cs/ {{\n    proxy_pass http://127.0.0.1:{o};\n    charset utf-8;\n  }}\n\
  location /csign/ {{\n    proxy_pass http://127.0.0.1:{o};\n    charset utf-8;\n\
    proxy_ignore_headers X-Accel-Charset;\n  }}\n\
  location /c/ {{\n    proxy_pass http://127.0.0.1:{o};\n    proxy_cache z;\n\
    add_header X-Cache $upstream_cache_status;\n  }}\n\
  location /cign/ {{\n    proxy_pass http://127.0.0.1:{o};\n    proxy_cache z;\n\
    proxy_ignore_headers X-Accel-Expires;\n    add_header X-Cache $upstream_cache_status;\n  }}\n\
}}\n"
    )
}

fn files() -> TempDir {
    let d = TempDir::new("xaccel-files");
    d.write("protected/a.txt", "the file a\n");
    d.write("protected/a b.txt", "the file with a space\n");
    d.write("secret.txt", "secret\n");
    d
}

fn ask(port: u16, method: &str, target: &str) -> Resp {
    let body = if method == "POST" { "x=1" } else { "" };
    let req = format!(
        "{method} {target} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    raw(port, req.as_bytes())
}

/// Status, the header lines that matter here, and the body.
fn seen(r: &Resp) -> String {
    let mut out = format!("{}\n", r.status);
    for (n, v) in &r.headers {
        let l = n.to_ascii_lowercase();
        let shown = [
            "content-type",
            "content-length",
            "set-cookie",
            "content-disposition",
            "cache-control",
            "x-other",
            "x-cache",
        ];
        if shown.contains(&l.as_str()) || l.starts_with("x-accel") {
            out.push_str(&format!("{l}: {v}\n"));
        }
    }
    if r.status == 200 {
        out.push_str(&r.text());
    }
    out
}

const CASES: &[(&str, &str)] = &[
    ("GET", "/app/file"),
    ("POST", "/app/file"),
    ("HEAD", "/app/file"),
    ("GET", "/app/args"),
    ("GET", "/app/encoded"),
    ("POST", "/app/named"),
    ("GET", "/app/missing"),
    ("GET", "/app/unsafe"),
    ("POST", "/app/back"),
    ("GET", "/ign/file"),
    ("GET", "/protected/a.txt"),
    ("GET", "/cs/json"),
    ("GET", "/cs/unknown"),
    ("GET", "/csign/json"),
];

#[test]
fn x_accel_redirect_is_followed_as_nginx_follows_it() {
    let (o, f) = (origin(), files());
    let conf = http(o.port, f.path().to_str().unwrap());
    let srv = Server::start(&one_worker_conf(&conf));
    let ours: Vec<String> = CASES
        .iter()
        .map(|(m, t)| seen(&ask(srv.port, m, t)))
        .collect();
    assert_eq!(
        ours[0],
        "200\ncontent-type: application/x-custom\ncontent-length: 11\nset-cookie: s=1\n\
         content-disposition: attachment; filename=\"a.txt\"\ncache-control: private\nthe file a\n"
    );
    assert_eq!(ours[1], ours[0], "a POST becomes a GET");
    assert!(ours[4].ends_with("the file with a space\n"), "{}", ours[4]);
    assert!(ours[5].ends_with("named /app/named POST\n"), "{}", ours[5]);
    assert!(ours[6].starts_with("404\n") && ours[7].starts_with("404\n"));
    assert!(
        ours[8].ends_with("echo GET /app/echo?from=accel\n"),
        "{}",
        ours[8]
    );
    // Ignored, and hidden all the same.
    assert!(
        ours[9].ends_with("upstream body, replaced") && !ours[9].contains("x-accel"),
        "{}",
        ours[9]
    );
    assert!(ours[10].starts_with("404\n"), "{}", ours[10]);
    // X-Accel-Charset labels a type outside `charset_types` with a charset
    // the configuration knows.
    assert!(ours[11].contains("content-type: application/json; charset=utf-8\n"));
    assert!(ours[12].contains("content-type: application/json\n"));
    assert!(ours[13].contains("content-type: application/json\n"));
    let log = srv.read("logs/error.log");
    assert!(
        log.contains("unsafe URI \"/protected/../secret.txt\" was detected"),
        "{log}"
    );
    let Some(ngx) = Nginx::start(&conf) else {
        eprintln!("skipping the comparison: {NGINX} is not installed");
        return;
    };
    for (i, c) in CASES.iter().enumerate() {
        assert_eq!(ours[i], seen(&ask(ngx.port, c.0, c.1)), "{c:?}");
    }
    assert!(ngx
        .error_log()
        .contains("unsafe URI \"/protected/../secret.txt\" was detected"));
}

fn timed(port: u16, target: &str) -> (Resp, Duration) {
    let t = Instant::now();
    let r = ask(port, "GET", target);
    (r, t.elapsed())
}

#[test]
fn x_accel_limit_rate_paces_the_body() {
    let (o, f) = (origin(), files());
    let conf = http(o.port, f.path().to_str().unwrap());
    let srv = Server::start(&one_worker_conf(&conf));
    let (r, took) = timed(srv.port, "/app/rate");
    assert_eq!(r.body.len(), 40_000);
    assert!(r.header("x-accel-limit-rate").is_none());
    // 40,000 bytes at 20,000 a second.
    assert!(took >= Duration::from_millis(900), "{took:?}");
    let Some(ngx) = Nginx::start(&conf) else {
        eprintln!("skipping the comparison: {NGINX} is not installed");
        return;
    };
    let (r, theirs) = timed(ngx.port, "/app/rate");
    assert_eq!(r.body.len(), 40_000);
    assert!(theirs >= Duration::from_millis(900), "nginx {theirs:?}");
    assert!(
        took < theirs + Duration::from_millis(600),
        "{took:?} vs {theirs:?}"
    );
}

/// The cache statuses of three requests to `target`: at once, again, and
/// after 2 s.
fn cache_story(port: u16, target: &str) -> Vec<String> {
    let mut out = Vec::new();
    for wait in [0, 0, 2100] {
        std::thread::sleep(Duration::from_millis(wait));
        let r = ask(port, "GET", target);
        out.push(format!(
            "{} {}",
            r.status,
            r.header("x-cache").unwrap_or("-")
        ));
    }
    out
}

#[test]
fn x_accel_expires_and_buffering_govern_the_cache() {
    let (o, f) = (origin(), files());
    let conf = http(o.port, f.path().to_str().unwrap());
    let srv = Server::start(&one_worker_conf(&conf));
    let targets = ["/c/short", "/c/at", "/c/zero", "/cign/short", "/c/nobuf"];
    let ngx = Nginx::start(&conf);
    let mut stories = Vec::new();
    // Both servers' stories run side by side: the 2 s waits overlap.
    std::thread::scope(|s| {
        let ours: Vec<_> = targets
            .iter()
            .map(|t| s.spawn(move || cache_story(srv.port, t)))
            .collect();
        let theirs: Vec<_> = targets
            .iter()
            .filter_map(|t| ngx.as_ref().map(|n| (n.port, t)))
            .map(|(p, t)| s.spawn(move || cache_story(p, t)))
            .collect();
        for h in ours {
            stories.push(h.join().unwrap());
        }
        for (i, h) in theirs.into_iter().enumerate() {
            assert_eq!(stories[i], h.join().unwrap(), "{}", targets[i]);
        }
    });
    assert_eq!(stories[0], ["200 MISS", "200 HIT", "200 EXPIRED"]);
    assert_eq!(stories[1][..2], ["200 MISS", "200 HIT"]);
    assert_eq!(stories[2], ["200 MISS", "200 MISS", "200 MISS"]);
    assert_eq!(stories[3], ["200 MISS", "200 HIT", "200 HIT"]);
    assert_eq!(stories[4], ["200 MISS", "200 MISS", "200 MISS"]);
    if ngx.is_none() {
        eprintln!("skipping the comparison: {NGINX} is not installed");
    }
}

/// Two GETs of `/c/file` through `proxy_cache`: the answers and how many
/// requests the origin got.
fn redirect_through_cache(port: u16, o: &Origin) -> (Vec<String>, usize) {
    let before = o.count();
    let answers = (0..2).map(|_| seen(&ask(port, "GET", "/c/file"))).collect();
    (answers, o.count() - before)
}

#[test]
fn an_x_accel_redirect_through_the_cache_is_followed_and_never_stored() {
    let (o, f) = (origin(), files());
    let conf = http(o.port, f.path().to_str().unwrap());
    let srv = Server::start(&one_worker_conf(&conf));
    let ours = redirect_through_cache(srv.port, &o);
    assert_eq!(ours.1, 2, "{ours:?}");
    assert!(
        ours.0.iter().all(|a| a.ends_with("the file a\n")),
        "{ours:?}"
    );
    let Some(ngx) = Nginx::start(&conf) else {
        eprintln!("skipping the comparison: {NGINX} is not installed");
        return;
    };
    assert_eq!(ours, redirect_through_cache(ngx.port, &o));
}
