//! Start-up notices (issue 30 item 5): once, at `notice`, the disk route
//! of the static-file locations, one line per distinct route naming its
//! locations, not one line per location.

mod common;

use std::time::Duration;

use common::Server;

#[test]
fn disk_routes_are_logged_once_grouped_by_route() {
    let s = Server::start(
        "daemon off; pid {PREFIX}/porter.pid; error_log {PREFIX}/logs/error.log notice;\n\
         events {}\nhttp { access_log off; aio threads;\n\
           server { listen 127.0.0.1:{PORT}; root {PREFIX};\n\
             location /a/ {} location /b/ {} location /c/ { aio off; }\n\
             location /d/ { aio threads; aio_fast_path off; }\n\
             location /p/ { proxy_pass http://127.0.0.1:1; } } }",
    );
    let log = s.wait_log("logs/error.log", "started", Duration::from_secs(5));
    let routes: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("disk route of"))
        .collect();
    assert_eq!(routes.len(), 3, "{log}");
    let line = |what: &str| {
        routes
            .iter()
            .find(|l| l.contains(what))
            .unwrap_or_else(|| panic!("no {what} in {log}"))
            .to_string()
    };
    let threads = line("3 locations (\"/a/\", \"/b/\", server): aio threads=default, ");
    assert!(threads.contains("[notice]"), "{threads}");
    assert!(threads.contains("misses to the pool"), "{threads}");
    line("1 location (\"/c/\"): aio off: the event loop opens, reads");
    line("1 location (\"/d/\"): aio threads=default, no fast path (aio_fast_path off)");
    // The proxied location has no disk route.
    assert!(!log.contains("\"/p/\""), "{log}");
    // Once: a reload does not repeat them.
    s.signal(1);
    let log = s.wait_log("logs/error.log", "reconfigured", Duration::from_secs(5));
    assert_eq!(log.matches("disk route of").count(), 3, "{log}");
}
