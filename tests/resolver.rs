//! `resolver` and `resolver_timeout`: a `proxy_pass` URL with variables
//! whose host is a name (no `upstream` block) is resolved at run time
//! through the configured name server — here a small DNS responder on
//! loopback (`common::dns`: A records from a table, NXDOMAIN for other
//! names, silence for `slow.test`). Checked: the answer is used, cached
//! for its TTL or `valid=`, and NGINX's 502s and log lines for no
//! resolver, an unknown name and a timeout; the same config under
//! Debian's nginx gives the same statuses and lines.

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;

use crate::common::dns::Dns;
use crate::common::origin::*;
use crate::common::*;

/// The `http { }` body: `/` proxies to the host in `?h=`, on the origin's
/// port; `/none/` has no resolver; logs go to `logs`.
fn http_body(dns: u16, resolver_args: &str, origin: u16, logs: &Path) -> String {
    let l = logs.display();
    format!(
        "log_format ua '$arg_h $upstream_addr $status';\n\
         error_log {l}/error.log info;\n\
         server {{\n listen 127.0.0.1:{{PORT}};\n access_log {l}/ua.log ua;\n\
           location / {{ resolver 127.0.0.1:{dns} {resolver_args}; resolver_timeout 1s;\n\
             proxy_pass http://$arg_h:{origin}; }}\n\
           location /none/ {{ proxy_pass http://$arg_h:{origin}; }}\n\
         }}\n"
    )
}

fn porter_conf(body: &str) -> String {
    format!(
        "daemon off;\nworker_processes 2;\npid {{PREFIX}}/porter.pid;\nerror_log {{PREFIX}}/logs/error.log info;\n\
         events {{ worker_connections 64; }}\nhttp {{\n{body}}}\n"
    )
}

fn status(port: u16, path: &str) -> u16 {
    get(port, path).status
}

/// The `[error]` lines' messages, without time, pid and connection
/// number.
fn errors(logs: &Path) -> Vec<String> {
    let log = std::fs::read_to_string(logs.join("error.log")).unwrap_or_default();
    log.lines()
        .filter_map(|l| l.split_once("[error] ").map(|(_, t)| t))
        .map(|t| log_message(t).to_string())
        .collect()
}

/// What NGINX answers and logs for the three failures, and one success.
fn failures(port: u16, logs: &Path) -> (Vec<u16>, Vec<String>) {
    let codes = vec![
        status(port, "/none/?h=a.test"),
        status(port, "/?h=missing.test"),
        status(port, "/?h=slow.test"),
        status(port, "/?h=a.test"),
    ];
    std::thread::sleep(Duration::from_millis(300));
    (codes, errors(logs))
}

#[test]
fn names_resolve_at_run_time_and_fail_as_nginx_says() {
    let o = Origin::start(|_| Reply::ok(b"origin"));
    let dns = Dns::start(&[("a.test", Ipv4Addr::LOCALHOST, 300)]);
    let (plogs, nlogs) = (TempDir::new("resp"), TempDir::new("resn"));
    let s = Server::start(&porter_conf(&http_body(dns.port, "", o.port, plogs.path())));
    let porter = failures(s.port, plogs.path());
    assert_eq!(porter.0, vec![502, 502, 502, 200]);
    let ctx = |req: &str| {
        format!(
            ", client: 127.0.0.1, server: , request: \"GET {req} HTTP/1.1\", host: \"localhost\""
        )
    };
    assert_eq!(
        porter.1,
        vec![
            format!(
                "no resolver defined to resolve a.test{}",
                ctx("/none/?h=a.test")
            ),
            format!(
                "missing.test could not be resolved (3: Host not found){}",
                ctx("/?h=missing.test")
            ),
            format!(
                "slow.test could not be resolved (110: Operation timed out){}",
                ctx("/?h=slow.test")
            ),
        ]
    );
    let ua = std::fs::read_to_string(plogs.path().join("ua.log")).unwrap();
    assert!(
        ua.ends_with(&format!("a.test 127.0.0.1:{} 200\n", o.port)),
        "{ua}"
    );
    assert_eq!(o.count(), 1);
    let Some(n) = Nginx::start(&http_body(dns.port, "", o.port, nlogs.path())) else {
        eprintln!("skipping the nginx comparison: {NGINX} is not installed");
        return;
    };
    assert_eq!(failures(n.port, nlogs.path()), porter);
}

#[test]
fn answers_are_cached_for_their_ttl() {
    let o = Origin::start(|_| Reply::ok(b"origin"));
    let dns = Dns::start(&[("ttl.test", Ipv4Addr::LOCALHOST, 2)]);
    let logs = TempDir::new("resttl");
    let s = Server::start(&porter_conf(&http_body(
        dns.port,
        "ipv6=off",
        o.port,
        logs.path(),
    )));
    // Two workers, several requests each: one query while the TTL runs.
    for _ in 0..6 {
        assert_eq!(status(s.port, "/?h=ttl.test"), 200);
    }
    assert_eq!(dns.count("ttl.test 1"), 1);
    assert_eq!(dns.count("ttl.test 28"), 0, "ipv6=off asks no AAAA");
    std::thread::sleep(Duration::from_millis(2300));
    assert_eq!(status(s.port, "/?h=ttl.test"), 200);
    assert_eq!(dns.count("ttl.test 1"), 2, "expired answer asked again");
}

#[test]
fn valid_overrides_the_ttl() {
    let o = Origin::start(|_| Reply::ok(b"origin"));
    let dns = Dns::start(&[("v.test", Ipv4Addr::LOCALHOST, 3600)]);
    let logs = TempDir::new("resvalid");
    let s = Server::start(&porter_conf(&http_body(
        dns.port,
        "valid=1s",
        o.port,
        logs.path(),
    )));
    assert_eq!(status(s.port, "/?h=v.test"), 200);
    assert_eq!(status(s.port, "/?h=v.test"), 200);
    assert_eq!(dns.count("v.test 1"), 1);
    assert_eq!(dns.count("v.test 28"), 1, "ipv6=on asks AAAA too");
    std::thread::sleep(Duration::from_millis(1300));
    assert_eq!(status(s.port, "/?h=v.test"), 200);
    assert_eq!(dns.count("v.test 1"), 2);
    // A negative answer is not kept (NGINX drops the node): asked again.
    assert_eq!(status(s.port, "/?h=nx.test"), 502);
    assert_eq!(status(s.port, "/?h=nx.test"), 502);
    assert_eq!(dns.count("nx.test 1"), 2);
}

#[test]
fn resolver_arguments_nginx_refuses_are_config_errors() {
    for (args, want) in [
        ("127.0.0.1 valid=x", "invalid parameter \"valid=x\""),
        ("127.0.0.1 ipv6=maybe", "invalid parameter \"ipv6=maybe\""),
        (
            "no-such-host.invalid",
            "host not found in resolver \"no-such-host.invalid\"",
        ),
    ] {
        let err = config_error(&porter_conf(&format!(
            "resolver {args};\nserver {{ listen 127.0.0.1:1; }}\n"
        )));
        assert!(err.contains(want), "{args}: {err}");
    }
}
