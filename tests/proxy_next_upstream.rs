//! `proxy_next_upstream` with `http_404`/`http_503`: when every server
//! gave such an answer (out of servers, out of `proxy_next_upstream_tries`,
//! a single server, an address), the client gets the last upstream answer,
//! as Debian's nginx gives it on the same server block
//! (`tests/common/beside.rs`). The conditions and retries themselves:
//! `tests/proxy.rs`.

use crate::common::beside::{self, Both};
use crate::common::origin::*;

#[test]
fn next_upstream_out_of_servers_returns_the_last_answer() {
    let a = Origin::start(|_| Reply::ok(b"a404").status(404));
    let c = Origin::start(|_| Reply::ok(b"c404").status(404));
    let b = Both::start(
        &format!(
            "upstream two {{ server 127.0.0.1:{}; server 127.0.0.1:{}; }}",
            a.port, c.port
        ),
        "location / { proxy_pass http://two; proxy_next_upstream http_404; }",
        0,
    );
    for (who, port) in b.ports() {
        let r = beside::get_h(port, "/", "");
        assert_eq!(r.status, 404, "{who}");
        assert!(
            r.text() == "a404" || r.text() == "c404",
            "{who}: {}",
            r.text()
        );
    }
}

#[test]
fn next_upstream_variants_return_the_upstream_answer() {
    let a = Origin::start(|_| Reply::ok(b"a503").status(503));
    let c = Origin::start(|_| Reply::ok(b"c503").status(503));
    let one = Origin::start(|_| Reply::ok(b"one404").status(404));
    let b = Both::start(
        &format!(
            "upstream two {{ server 127.0.0.1:{} max_fails=0; server 127.0.0.1:{} max_fails=0; }}\n\
             upstream solo {{ server 127.0.0.1:{}; }}",
            a.port, c.port, one.port
        ),
        &format!(
            "location /two/ {{ proxy_pass http://two; proxy_next_upstream http_503; }}
             location /tries/ {{ proxy_pass http://two; proxy_next_upstream http_503; proxy_next_upstream_tries 1; }}
             location /solo/ {{ proxy_pass http://solo; proxy_next_upstream http_404; }}
             location /addr/ {{ proxy_pass http://127.0.0.1:{}; proxy_next_upstream http_404; }}",
            one.port
        ),
        0,
    );
    for (who, port) in b.ports() {
        for i in 0..3 {
            for (path, status, bodies) in [
                ("/two/", 503, ["a503", "c503"]),
                ("/tries/", 503, ["a503", "c503"]),
                ("/solo/", 404, ["one404", "one404"]),
                ("/addr/", 404, ["one404", "one404"]),
            ] {
                let r = beside::get_h(port, path, "");
                assert_eq!(r.status, status, "{who} {path} #{i}");
                assert!(
                    bodies.contains(&r.text().as_str()),
                    "{who} {path}: {}",
                    r.text()
                );
            }
        }
    }
}
