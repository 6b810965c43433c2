//! `auth_delay` (NGINX 1.17.10, nginx-tests' `auth_delay.t`): a 401 of
//! the access phase waits the delay, a request let through does not.

use std::time::{Duration, Instant};

use crate::common::*;

#[test]
fn a_refused_password_waits_the_delay() {
    let root = TempDir::new("authdelay");
    root.write("index.html", "ok");
    let users = root.write("htpasswd", "user:{PLAIN}good\n");
    let server = format!(
        "root {}; location / {{ auth_delay 1500ms; auth_basic closed; auth_basic_user_file {}; }}",
        root.path().display(),
        users.display()
    );
    let p = Server::start(&one_server_conf("", &server));
    let timed = |auth: &str| {
        let start = Instant::now();
        let r = get_with(p.port, "/", &format!("Authorization: Basic {auth}\r\n"));
        (r.status, start.elapsed())
    };
    // user:bad, then user:good
    let (status, took) = timed("dXNlcjpiYWQ=");
    assert_eq!(status, 401);
    assert!(took >= Duration::from_millis(1400), "{took:?}");
    let (status, took) = timed("dXNlcjpnb29k");
    assert_eq!(status, 200);
    assert!(took < Duration::from_millis(1000), "{took:?}");
}
