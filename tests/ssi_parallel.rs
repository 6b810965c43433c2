//! SSI includes run at once, as NGINX's do: two slow includes of a page
//! take the time of one, their bodies still come out in document order;
//! `wait="yes"` holds the parse, so the next include starts only after
//! the first is done (beside Debian's nginx 1.22, skipped without it).
//! An include whose `set=` body is too big ends the response before its
//! head was sent (nginx-tests' subrequest_output_buffer_size.t, check 3).
//!
//! Run: `cargo test --release --test area_filters ssi_parallel::`.

use std::time::{Duration, Instant};

use crate::common::origin::{Origin, Reply};
use crate::common::{one_worker_conf, raw, try_raw, Nginx, Server, TempDir};

const SLOW: Duration = Duration::from_millis(800);

fn setup() -> (TempDir, Origin, String) {
    let root = TempDir::new("ssi-par");
    root.write(
        "two.html",
        "<!--#include virtual=\"/up/a\" -->|<!--#include virtual=\"/up/b\" -->|end",
    );
    root.write(
        "waited.html",
        "<!--#include virtual=\"/up/a\" wait=\"yes\" -->|<!--#include virtual=\"/up/b\" -->|end",
    );
    root.write(
        "set.html",
        "<!--#include virtual=\"/up/long\" set=\"x\" -->set: <!--#echo var=\"x\" -->",
    );
    let o = Origin::start(|r| match r.target.as_str() {
        "/long" => Reply::ok(&[b'x'; 400]),
        t => Reply::ok(format!("slow{t}").as_bytes()).delay(SLOW),
    });
    let conf = format!(
        "server {{\n  listen 127.0.0.1:{{PORT}};\n  server_name localhost;\n\
  root {};\n  ssi on;\n  subrequest_output_buffer_size 42;\n\
  location /up/ {{\n    ssi off;\n    proxy_pass http://127.0.0.1:{}/;\n  }}\n}}\n",
        root.path().display(),
        o.port
    );
    (root, o, conf)
}

/// The body of `path` and how long it took.
fn timed(port: u16, path: &str) -> (String, Duration) {
    let t = Instant::now();
    let r = raw(
        port,
        format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes(),
    );
    assert_eq!(r.status, 200);
    (r.text(), t.elapsed())
}

fn check(port: u16, who: &str) {
    let (body, took) = timed(port, "/two.html");
    assert_eq!(body, "slow/a|slow/b|end", "{who}");
    assert!(
        took < SLOW * 2 - SLOW / 4,
        "{who}: two includes took {took:?}"
    );
    let (body, took) = timed(port, "/waited.html");
    assert_eq!(body, "slow/a|slow/b|end", "{who}");
    assert!(took >= SLOW * 2, "{who}: wait=yes took {took:?}");
    // Nothing was sent: no status line at all.
    let r = try_raw(port, b"GET /set.html HTTP/1.0\r\nHost: localhost\r\n\r\n");
    assert!(r.is_none(), "{who}: {:?}", r.map(|r| r.status));
}

#[test]
fn includes_run_at_once_and_come_out_in_order() {
    let (_root, _o, conf) = setup();
    let srv = Server::start(&one_worker_conf(&conf));
    check(srv.port, "porter");
    let Some(ngx) = Nginx::start(&conf) else {
        eprintln!("skipping the comparison: nginx is not installed");
        return;
    };
    check(ngx.port, "nginx");
}
