//! `porter_status`: the live status page and its JSON (`?format=json`),
//! over real sockets. The JSON's counters move with the requests made
//! (status classes, a cache zone's MISS then HIT, an upstream peer that
//! fails, TLS handshakes full, resumed and failed), the Prometheus page
//! carries the same new series, the HTML loads nothing from elsewhere,
//! and Debian's headless Chromium runs the page under load: its script
//! polls without an error, draws rates, and two screenshots taken a few
//! seconds apart differ. `pkg/grafana/porter.json` parses and names only
//! series the server exports.

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::metrics::Metrics;
use crate::common::origin::{Origin, Reply};
use crate::common::tls::{self as t, Alg, Ca, ClientOpts};
use crate::common::*;
use serde_json::Value;

/// A server with the status page at `/status`, the Prometheus page at
/// `/metrics`, files under `/`, a cached proxy to `origin` at `/c/`, and
/// an `upstream` group whose first peer (`dead`) refuses connections.
fn conf(origin: u16, dead: u16) -> String {
    one_server_conf(
        &format!(
            "  proxy_cache_path {{PREFIX}}/cache levels=1:2 keys_zone=one:1m max_size=10m;\n  \
             upstream back {{ server 127.0.0.1:{dead}; server 127.0.0.1:{origin}; }}"
        ),
        &format!(
            "    root {{PREFIX}}/html;\n    \
             location /status {{ porter_status; }}\n    \
             location /metrics {{ porter_metrics; }}\n    \
             location /c/ {{ proxy_pass http://127.0.0.1:{origin}; proxy_cache one; \
               add_header X-Cache $upstream_cache_status; }}\n    \
             location /u/ {{ proxy_pass http://back; }}"
        ),
    )
}

/// An origin answering 200 with a minute's freshness.
fn origin() -> Origin {
    Origin::start(|_| Reply::ok(b"from origin\n").header("Cache-Control", "max-age=60"))
}

fn start(origin: &Origin) -> Server {
    let dir = TempDir::new("status");
    dir.write("html/index.html", "hello\n");
    Server::start_in(dir, &conf(origin.port, free_port()), &[])
}

fn json(body: &[u8]) -> Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(body)))
}

/// One keep-alive connection: every request on it is logged (and so
/// counted) before the next is read.
struct KeepAlive(TcpStream, Vec<u8>);

impl KeepAlive {
    fn open(port: u16) -> KeepAlive {
        KeepAlive(TcpStream::connect(("127.0.0.1", port)).unwrap(), Vec::new())
    }

    fn get(&mut self, path: &str) -> Resp {
        self.try_get(path).expect("a response")
    }

    fn try_get(&mut self, path: &str) -> Option<Resp> {
        write!(self.0, "GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").ok()?;
        read_response(&mut self.0, &mut self.1, false)
    }

    fn status(&mut self) -> Value {
        let r = self.get("/status?format=json");
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.header("cache-control"), Some("no-store"));
        json(&r.body)
    }
}

fn n(v: &Value, path: &str) -> u64 {
    v.pointer(path)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{path} missing in {v}"))
}

#[test]
fn json_has_every_section_and_requests_move_the_counters() {
    let o = origin();
    let s = start(&o);
    let mut c = KeepAlive::open(s.port);
    let a = c.status();
    for key in [
        "porter",
        "time_ms",
        "connections",
        "requests",
        "buckets",
        "workers",
        "pools",
        "fastpath",
        "caches",
        "upstreams",
        "tls",
    ] {
        assert!(a.get(key).is_some(), "{key} missing in {a}");
    }
    let w = &a["workers"][0];
    assert_eq!(
        w["lag"]["buckets"].as_array().unwrap().len(),
        a["buckets"].as_array().unwrap().len() + 1,
        "one cumulative count per bucket and +Inf"
    );
    for k in ["count", "sum", "max"] {
        assert!(w["lag"][k].is_number() && w["busy"][k].is_number(), "{w}");
    }
    for op in ["open", "stat", "read", "sendfile"] {
        assert!(a["fastpath"][op]["hit"].is_u64(), "{a}");
    }
    assert!(n(&a, "/connections/active") >= 1);

    for _ in 0..10 {
        assert_eq!(c.get("/missing").status, 404);
    }
    let b = c.status();
    let d = |p: &str| n(&b, p) - n(&a, p);
    // The ten and this JSON request itself; the first JSON request's 200
    // was logged after its own figures were taken.
    assert_eq!(d("/requests/total"), 11);
    assert_eq!(d("/requests/4xx"), 10);
    assert_eq!(d("/requests/2xx"), 1);
    assert_eq!(d("/requests/5xx"), 0);
    assert!(n(&b, "/time_ms") >= n(&a, "/time_ms"));
}

#[test]
fn a_cache_miss_then_a_hit_count_in_the_zone() {
    let o = origin();
    let s = start(&o);
    let mut c = KeepAlive::open(s.port);
    let zone = |v: &Value| v["caches"][0].clone();
    let a = zone(&c.status());
    assert_eq!(a["zone"], "one");
    assert_eq!(a["max_size"], 10 << 20);
    assert_eq!(a["responses"]["HIT"], 0);
    assert_eq!(c.get("/c/a").header("x-cache"), Some("MISS"));
    assert_eq!(c.get("/c/a").header("x-cache"), Some("HIT"));
    assert_eq!(c.get("/c/a").header("x-cache"), Some("HIT"));
    let b = zone(&c.status());
    assert_eq!(b["responses"]["MISS"], 1, "{b}");
    assert_eq!(b["responses"]["HIT"], 2, "{b}");
    for k in ["STALE", "EXPIRED", "UPDATING", "REVALIDATED", "BYPASS"] {
        assert_eq!(b["responses"][k], 0, "{k}: {b}");
    }
    assert_eq!(b["entries"], 1);
    assert_eq!(b["size"], 4096, "one entry, one 4 KiB block");
    assert_eq!(o.count(), 1);

    let m = Metrics::fetch(s.port);
    let z = |st| {
        m.must(
            "porter_cache_responses_total",
            &[("zone", "one"), ("status", st)],
        )
    };
    assert_eq!((z("MISS"), z("HIT")), (1.0, 2.0));
    assert_eq!(
        m.must("porter_cache_size_bytes", &[("zone", "one")]),
        4096.0
    );
    assert_eq!(m.must("porter_cache_entries", &[("zone", "one")]), 1.0);
}

#[test]
fn upstream_peers_show_state_tries_and_failures() {
    let o = origin();
    let s = start(&o);
    let mut c = KeepAlive::open(s.port);
    // Round-robin: the dead peer is tried first, fails, and the request
    // goes on to the live one; then the dead one is skipped.
    for _ in 0..4 {
        assert_eq!(c.get("/u/x").status, 200);
    }
    let v = c.status();
    let groups = v["upstreams"].as_array().unwrap();
    let back = groups
        .iter()
        .find(|g| g["name"] == "back")
        .expect("group back");
    let (dead, live) = (&back["peers"][0], &back["peers"][1]);
    assert_eq!(dead["state"], "unavailable", "{back}");
    assert_eq!(dead["failures"], 1, "{back}");
    assert_eq!(dead["fails"], 1, "{back}");
    assert_eq!(live["state"], "up");
    assert_eq!(live["tries"], 4, "{back}");
    assert_eq!(live["failures"], 0);
    assert_eq!(live["active"], 0);
    assert_eq!(live["backup"], false);
    let origin_addr = format!("127.0.0.1:{}", o.port);
    assert!(
        groups.iter().any(|g| g["name"] == origin_addr.as_str()),
        "the implicit group of proxy_pass http://{origin_addr} is listed: {v}"
    );

    let m = Metrics::fetch(s.port);
    let peer = |name, addr: &str| {
        m.must(
            name,
            &[("upstream", "back"), ("addr", addr), ("server", addr)],
        )
    };
    let dead_addr = dead["addr"].as_str().unwrap();
    assert_eq!(peer("porter_upstream_peer_up", dead_addr), 0.0);
    assert_eq!(peer("porter_upstream_peer_up", &origin_addr), 1.0);
    assert_eq!(peer("porter_upstream_peer_failures_total", dead_addr), 1.0);
    assert_eq!(peer("porter_upstream_peer_tries_total", &origin_addr), 4.0);
    assert_eq!(
        m.get("porter_responses_total", &[("class", "2xx")]),
        Some(5.0)
    );
}

#[test]
fn tls_handshakes_full_resumed_and_failed_are_counted() {
    let ca = Ca::new();
    let dir = TempDir::new("status-tls");
    ca.leaf(&["a.test"], Alg::Ecdsa).write(dir.path(), "a");
    let s = Server::start_in(
        dir,
        &one_worker_conf(
            "  server { listen 127.0.0.1:{PORT} ssl; server_name a.test;\n\
               ssl_certificate {PREFIX}/a.crt; ssl_certificate_key {PREFIX}/a.key;\n\
               location /status { porter_status; }\n\
               location /metrics { porter_metrics; } }",
        ),
        &[],
    );
    let cfg = t::client(&ca, ClientOpts::default());
    let mut first = t::Conn::open(s.port, &cfg, "a.test").unwrap();
    // TLS 1.3's ticket arrives with the first response.
    let r = first
        .request(
            "GET /status?format=json HTTP/1.1\r\nHost: a.test\r\n\r\n",
            false,
        )
        .unwrap();
    let a = json(&r.body);
    assert_eq!(n(&a, "/tls/handshakes"), 1);
    assert_eq!(n(&a, "/tls/resumed"), 0);
    let mut again = t::Conn::open(s.port, &cfg, "a.test").unwrap();
    assert!(again.resumed());
    // A handshake that fails: a record header and garbage.
    let mut bad = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    bad.write_all(b"\x16\x03\x01\x00\x05hello").unwrap();
    let _ = read_all(&mut bad);
    let deadline = Instant::now() + Duration::from_secs(5);
    let b = loop {
        let r = again
            .request(
                "GET /status?format=json HTTP/1.1\r\nHost: a.test\r\n\r\n",
                false,
            )
            .unwrap();
        let b = json(&r.body);
        if n(&b, "/tls/failed") >= 1 || Instant::now() > deadline {
            break b;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(n(&b, "/tls/handshakes"), 2, "{b}");
    assert_eq!(n(&b, "/tls/resumed"), 1, "{b}");
    assert_eq!(n(&b, "/tls/failed"), 1, "{b}");
    let m = first
        .request("GET /metrics HTTP/1.1\r\nHost: a.test\r\n\r\n", false)
        .unwrap();
    let m = Metrics(m.text());
    assert_eq!(
        m.get("porter_tls_handshakes_total", &[("result", "ok")]),
        Some(2.0)
    );
    assert_eq!(
        m.get("porter_tls_handshakes_total", &[("result", "failed")]),
        Some(1.0)
    );
    assert_eq!(m.get("porter_tls_resumed_total", &[]), Some(1.0));
}

#[test]
fn the_page_is_one_self_contained_document() {
    let o = origin();
    let s = start(&o);
    let r = get(s.port, "/status");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(r.header("cache-control"), Some("no-store"));
    let page = r.text().to_ascii_lowercase();
    assert!(page.starts_with("<!doctype html>"));
    for external in [
        "src=\"http",
        "href=\"http",
        "src='http",
        "href='http",
        "@import",
        "url(",
    ] {
        assert!(!page.contains(external), "the page loads {external}");
    }
    assert!(page.contains("<canvas") && page.contains("?format=json"));
    // Other arguments are the page; other methods are refused.
    assert!(get(s.port, "/status?x=1")
        .text()
        .starts_with("<!DOCTYPE html>"));
    let post = raw(
        s.port,
        b"POST /status HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(post.status, 405);
}

/// A bounded load on the server until `stop`: files, misses, cache hits
/// and upstream tries, about 200 requests a second.
fn load(port: u16, stop: Arc<AtomicBool>, done: Arc<AtomicU64>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        let paths = ["/index.html", "/c/hot", "/nope", "/u/y", "/c/hot"];
        let mut c = KeepAlive::open(port);
        let mut i = 0;
        while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
            if c.try_get(paths[i % paths.len()]).is_none() {
                break;
            }
            done.fetch_add(1, Ordering::Relaxed);
            i += 1;
            std::thread::sleep(Duration::from_millis(5));
        }
    })
}

/// Headless Chromium (`--no-sandbox`: the tests may run as root) on
/// `url` with `args`; its console goes to stderr (`--enable-logging`).
fn chromium(url: &str, args: &[&str]) -> (String, String) {
    let profile = TempDir::new("chromium");
    let out = Command::new("timeout")
        .args([
            "25",
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args([
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1280,1500",
        ])
        .args(["--virtual-time-budget=3500", "--hide-scrollbars"])
        .args(args)
        .arg(url)
        .output()
        .expect("chromium (Debian's chromium package) runs");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The page's console lines: it writes none but errors (an uncaught
/// exception, or a failed poll's `console.error`).
fn console_errors(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains(":CONSOLE")).collect()
}

/// The value of `attr` on the element with id `id` in a dumped DOM.
fn attr<'a>(dom: &'a str, id: &str, attr: &str) -> Option<&'a str> {
    let at = dom.find(&format!("id=\"{id}\""))?;
    let tag_start = dom[..at].rfind('<')?;
    let tag = &dom[tag_start..tag_start + dom[tag_start..].find('>')?];
    let v = tag.split(&format!("{attr}=\"")).nth(1)?;
    v.split('"').next()
}

#[test]
fn headless_chromium_runs_the_page_under_load_and_the_charts_move() {
    let o = origin();
    let s = start(&o);
    let url = format!("http://127.0.0.1:{}/status", s.port);
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let loader = load(s.port, stop.clone(), done.clone());
    while done.load(Ordering::Relaxed) < 20 {
        std::thread::sleep(Duration::from_millis(10));
    }

    let (dom, err) = chromium(&url, &["--dump-dom"]);
    assert!(
        console_errors(&err).is_empty(),
        "{:?}",
        console_errors(&err)
    );
    let polls: u32 = dom
        .split("data-polls=\"")
        .nth(1)
        .and_then(|p| p.split('"').next()?.parse().ok())
        .unwrap_or(0);
    assert!(polls >= 2, "the page polled {polls} times:\n{dom}\n{err}");
    assert!(
        dom.contains("<span id=\"error\" class=\"err\"></span>"),
        "{dom}"
    );
    let last = |id| attr(&dom, id, "data-last").and_then(|v| v.parse::<f64>().ok());
    assert!(
        last("c-req").is_some_and(|v| v > 0.0),
        "requests/s drawn: {dom}"
    );
    assert!(
        last("c-conn").is_some_and(|v| v >= 1.0),
        "connections drawn: {dom}"
    );
    for text in [
        ">one<",
        ">back<",
        ">unavailable<",
        ">worker 0<",
        ">sendfile<",
    ] {
        assert!(dom.contains(text), "{text} not rendered:\n{dom}");
    }

    let shots = TempDir::new("shots");
    let mut pngs = Vec::new();
    for i in 0..2 {
        if i > 0 {
            std::thread::sleep(Duration::from_secs(2));
        }
        let p = shots.path().join(format!("{i}.png"));
        let (_, err) = chromium(&url, &[&format!("--screenshot={}", p.display())]);
        assert!(
            console_errors(&err).is_empty(),
            "{:?}",
            console_errors(&err)
        );
        pngs.push(read_png(&p, &err));
    }
    stop.store(true, Ordering::Relaxed);
    loader.join().unwrap();
    assert_ne!(pngs[0], pngs[1], "two screenshots 2 s apart are the same");
}

fn read_png(p: &Path, err: &str) -> Vec<u8> {
    let png =
        std::fs::read(p).unwrap_or_else(|e| panic!("no screenshot {}: {e}\n{err}", p.display()));
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
    png
}

#[test]
fn the_grafana_dashboard_parses_and_names_exported_series() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/pkg/grafana/porter.json"
    ))
    .unwrap();
    let d: Value = serde_json::from_str(&text).expect("pkg/grafana/porter.json is JSON");
    let panels = d["panels"].as_array().expect("panels");
    assert!(panels.len() >= 8);
    let o = origin();
    let s = start(&o);
    let m = Metrics::fetch(s.port).0;
    let mut exprs = 0;
    for p in panels {
        for t in p["targets"].as_array().into_iter().flatten() {
            let e = t["expr"].as_str().unwrap();
            exprs += 1;
            for name in e.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if name.starts_with("porter_") {
                    let base = name
                        .trim_end_matches("_bucket")
                        .trim_end_matches("_sum")
                        .trim_end_matches("_count");
                    assert!(
                        m.contains(&format!("# TYPE {name} "))
                            || m.contains(&format!("# TYPE {base} ")),
                        "panel {:?} reads {name}, which porter does not export",
                        p["title"]
                    );
                }
            }
        }
    }
    assert!(exprs >= 10);
}
