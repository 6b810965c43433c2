//! `limit_rate` and `limit_rate_after` with variables (NGINX 1.17.0) and
//! the `$limit_rate` variable `set` changes (nginx-tests' `limit_rate.t`
//! and `http_variables.t`): the pace a rendered value gives, and the
//! value `$limit_rate` reads back, compared with Debian's nginx.

use std::time::Instant;

use crate::common::*;

fn server(root: &std::path::Path) -> String {
    format!(
        "root {};
         location /var {{ limit_rate $arg_l; limit_rate_after $arg_a; }}
         location /set {{ set $limit_rate $arg_l; add_header X-Rate $limit_rate; return 200 ok; }}",
        root.display()
    )
}

/// Seconds GET `path` takes to the end of its body.
fn seconds(port: u16, path: &str) -> f64 {
    let start = Instant::now();
    let r = get(port, path);
    assert_eq!(r.body.len(), 30_000, "{path}");
    start.elapsed().as_secs_f64()
}

#[test]
fn a_rate_with_variables_is_read_per_request() {
    let root = TempDir::new("lrv");
    root.write("var", "x".repeat(30_000));
    let p = Server::start(&one_server_conf("", &server(root.path())));
    // 30 000 bytes at 12k a second beyond 256: two seconds and more.
    let slow = seconds(p.port, "/var?l=12k&a=256");
    assert!(slow >= 1.5, "{slow}");
    // Beyond `limit_rate_after`, or no rate (empty, not a size): at once.
    for path in ["/var?l=12k&a=40k", "/var", "/var?l=x"] {
        let t = seconds(p.port, path);
        assert!(t < 1.0, "{path}: {t}");
    }
}

#[test]
fn set_limit_rate_is_read_back_in_bytes() {
    let root = TempDir::new("lrs");
    let (p, n) = both("", &server(root.path()));
    let ask = |port: u16| -> Vec<String> {
        ["/set?l=40k", "/set", "/set?l=bad"]
            .iter()
            .map(|path| get(port, path).header("x-rate").unwrap_or("-").to_string())
            .collect()
    };
    let porter = ask(p.port);
    assert_eq!(porter, ["40960", "0", "0"]);
    match n {
        Some(n) => assert_eq!(porter, ask(n.port)),
        None => eprintln!("skipped the comparison: nginx is not installed"),
    }
}
