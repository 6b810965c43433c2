//! `proxy_limit_rate`: the reads of one proxied response from its upstream
//! are paced (NGINX's buffered pipe; `0` is no limit, and with
//! `proxy_buffering off` it does not apply). The body arrives whole either
//! way.

use std::time::{Duration, Instant};

use crate::common::origin::*;
use crate::common::*;

#[test]
fn proxy_limit_rate_paces_the_upstream_reads() {
    let body = pattern(40_000, 3);
    let b = body.clone();
    let origin = Origin::start(move |_| Reply::ok(&b));
    let o = origin.port;
    let porter = Server::start(&one_server_conf(
        "",
        &format!(
            "proxy_limit_rate 20000;\n\
             location / {{ proxy_pass http://127.0.0.1:{o}; }}\n\
             location /unlimited {{ proxy_pass http://127.0.0.1:{o}; proxy_limit_rate 0; }}\n\
             location /unbuffered {{ proxy_pass http://127.0.0.1:{o}; proxy_buffering off; }}\n"
        ),
    ));
    let timed = |path: &str| {
        let t = Instant::now();
        let r = get(porter.port, path);
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.body, body, "{path}");
        t.elapsed()
    };
    // 40,000 bytes at 20,000 a second: the second 20,000 wait a second.
    let limited = timed("/");
    assert!(limited >= Duration::from_millis(900), "{limited:?}");
    let unlimited = timed("/unlimited");
    assert!(unlimited < Duration::from_millis(500), "{unlimited:?}");
    let unbuffered = timed("/unbuffered");
    assert!(unbuffered < Duration::from_millis(500), "{unbuffered:?}");
}

#[test]
fn proxy_limit_rate_takes_a_size() {
    let err = config_error(
        &one_server_conf(
            "",
            "location / { proxy_pass http://127.0.0.1:9; proxy_limit_rate fast; }",
        )
        .replace("{PORT}", "1"),
    );
    assert!(err.contains("\"proxy_limit_rate\""), "{err}");
}
