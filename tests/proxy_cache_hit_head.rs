//! The head of a cache HIT (issue 31): a worker's kept entry shares its
//! decoded header with every hit (`cache::open_entries`), and each stored
//! header line is matched against the hidden and hop-by-hop lists with
//! its name lowercased on the stack. A hit must send the head of the
//! entry it serves — never a retired entry's — and the same lines as
//! NGINX, hit after hit, long names included.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::origin::*;
use crate::common::*;

/// A name longer than the 64-byte buffer `head_response` lowercases in.
const LONG: &str = "X-A-Header-Name-Longer-Than-Sixty-Four-Bytes-To-Take-The-Other-Way";

fn cache_conf(origin: u16) -> String {
    one_server_conf(
        "  proxy_cache_path {PREFIX}/cache levels=1:2 keys_zone=one:1m;",
        &format!(
            "    location / {{ proxy_pass http://127.0.0.1:{origin}; proxy_cache one;\n      \
               proxy_cache_valid 10m; proxy_cache_purge PURGE from 127.0.0.1;\n      \
               add_header X-Cache $upstream_cache_status always; }}"
        ),
    )
}

fn req(port: u16, method: &str, path: &str) -> Resp {
    raw(
        port,
        format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
}

/// (X-Cache, X-Version, ETag, body).
fn seen(r: &Resp) -> (String, String, String, String) {
    let h = |n: &str| r.header(n).unwrap_or("").to_string();
    (h("X-Cache"), h("X-Version"), h("ETag"), r.text())
}

#[test]
fn a_hit_sends_the_head_of_the_entry_it_serves() {
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    let origin = Origin::start(move |_| {
        let v = n2.fetch_add(1, Ordering::SeqCst) + 1;
        Reply::ok(format!("body v{v}").as_bytes())
            .header("X-Version", &format!("v{v}"))
            .header("ETag", &format!("\"v{v}\""))
    });
    // One worker: every request meets the same kept entry.
    let srv = Server::start(&cache_conf(origin.port));
    let want = |status: &str, v: usize| {
        (
            status.to_string(),
            format!("v{v}"),
            format!("\"v{v}\""),
            format!("body v{v}"),
        )
    };
    assert_eq!(seen(&req(srv.port, "GET", "/k")), want("MISS", 1));
    for _ in 0..5 {
        assert_eq!(seen(&req(srv.port, "GET", "/k")), want("HIT", 1));
    }
    assert_eq!(req(srv.port, "PURGE", "/k").status, 200);
    assert_eq!(seen(&req(srv.port, "GET", "/k")), want("MISS", 2));
    // The refill is a new entry: its hits carry its head, not the head
    // the retired kept entry shared.
    for _ in 0..5 {
        let got = seen(&req(srv.port, "GET", "/k"));
        assert_eq!(got, want("HIT", n.load(Ordering::SeqCst)));
    }
}

/// The header names in order (less Server and Date) and the values of
/// the ones the test sets.
fn head_of(r: &Resp) -> (u16, Vec<String>, Vec<Option<String>>) {
    let names = r
        .headers
        .iter()
        .map(|(n, _)| n.to_ascii_lowercase())
        .filter(|n| n != "server" && n != "date")
        .collect();
    let values = [
        "X-Cache",
        "ETag",
        "Content-Type",
        "x-lower",
        LONG,
        "Set-Cookie",
    ]
    .iter()
    .map(|n| r.header(n).map(str::to_string))
    .collect();
    (r.status, names, values)
}

#[test]
fn hits_send_the_lines_nginx_sends() {
    let origin = Origin::start(|_| {
        Reply::ok(b"cached body")
            .header("ETag", "\"e1\"")
            .header("Content-Type", "text/plain")
            .header("x-lower", "a")
            .header(LONG, "long")
            .header("Keep-Alive", "timeout=5")
            .header("X-Accel-Expires", "600")
            .header("Set-Cookie", "a=1")
            .header("X-Pad", "b")
    });
    let Some(nginx) = Nginx::start(&format!(
        "  proxy_cache_path {{PREFIX}}/cache levels=1:2 keys_zone=one:1m;\n  \
           server {{ listen 127.0.0.1:{{PORT}}; server_name localhost;\n    \
             location / {{ proxy_pass http://127.0.0.1:{}; proxy_cache one;\n      \
               proxy_cache_valid 10m; proxy_ignore_headers Set-Cookie;\n      \
               add_header X-Cache $upstream_cache_status always; }} }}",
        origin.port
    )) else {
        panic!("this test compares with /usr/sbin/nginx: install nginx-light");
    };
    let porter = Server::start(&one_server_conf(
        "  proxy_cache_path {PREFIX}/cache levels=1:2 keys_zone=one:1m;",
        &format!(
            "    location / {{ proxy_pass http://127.0.0.1:{}; proxy_cache one;\n      \
               proxy_cache_valid 10m; proxy_ignore_headers Set-Cookie;\n      \
               add_header X-Cache $upstream_cache_status always; }}",
            origin.port
        ),
    ));
    for i in 0..4 {
        for method in ["GET", "HEAD"] {
            let (n, p) = (
                req(nginx.port, method, "/h"),
                req(porter.port, method, "/h"),
            );
            assert_eq!(
                head_of(&p),
                head_of(&n),
                "request {i} ({method})\nporter: {:?}\nnginx: {:?}",
                p.headers,
                n.headers
            );
            if method == "GET" {
                assert_eq!(p.body, n.body, "request {i}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
