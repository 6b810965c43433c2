//! `proxy_pass_header Date` / `Server`: the upstream's lines go to the
//! client in place of porter's, and when the upstream sent none the
//! client gets none either (NGINX empties its own header then). Debian's
//! nginx answers the same requests side by side.

use crate::common::origin::*;
use crate::common::*;

/// Each answer's `Date` and `Server` lines.
fn answers(port: u16) -> Vec<(Option<String>, Option<String>)> {
    ["/pass/with", "/pass/without", "/plain/with"]
        .iter()
        .map(|path| {
            let r = get(port, path);
            assert_eq!(r.status, 200, "{path}");
            let f = |n: &str| r.header(n).map(String::from);
            (f("date"), f("server"))
        })
        .collect()
}

#[test]
fn passed_date_and_server_are_the_upstreams_or_absent() {
    let origin = Origin::start(|req: &Req| {
        let r = Reply::ok(b"x");
        if req.target.ends_with("/with") {
            r.header("Date", "passed").header("Server", "passed")
        } else {
            r
        }
    });
    let o = origin.port;
    let http = format!(
        "server {{\n listen 127.0.0.1:{{PORT}};\n server_name localhost;\n\
         location /pass/ {{ proxy_pass http://127.0.0.1:{o}; \
         proxy_pass_header Date; proxy_pass_header Server; }}\n\
         location /plain/ {{ proxy_pass http://127.0.0.1:{o}; }}\n}}\n"
    );
    let porter = Server::start(&one_worker_conf(&http));
    let got = answers(porter.port);
    let passed = Some("passed".to_string());
    assert_eq!(got[0], (passed.clone(), passed), "passed");
    assert_eq!(got[1], (None, None), "none sent, none made up");
    assert!(got[2].0.as_deref().is_some_and(|d| d.ends_with(" GMT")));
    assert!(got[2].1.as_deref().is_some_and(|s| s != "passed"));
    let Some(nginx) = Nginx::start(&http) else {
        eprintln!("nginx not installed: porter alone");
        return;
    };
    let want = answers(nginx.port);
    assert_eq!(got[..2], want[..2]);
}
