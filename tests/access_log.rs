//! `access_log` on the real binary: the `if=` condition.

use std::time::Duration;

use crate::common::{get, one_server_conf, Server};

#[test]
fn access_log_if_skips_lines() {
    let p = Server::start(&one_server_conf(
        "",
        "access_log {PREFIX}/logs/cond.log combined if=$arg_log;\nlocation / { return 200 ok; }",
    ));
    for q in ["/?log=1&n=a", "/?log=0&n=b", "/?n=c", "/?log=yes&n=d"] {
        assert_eq!(get(p.port, q).status, 200);
    }
    let text = p.wait_log("logs/cond.log", "n=d", Duration::from_secs(5));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].contains("n=a") && lines[1].contains("n=d"),
        "{text}"
    );
}
