//! `proxy_cache_purge`: a PURGE removes the entry (200, then 404), the
//! next GET is a MISS, and a location without the directive refuses it.
//! porter before an in-test origin (`tests/common/cache.rs`).

use std::time::Duration;

use crate::common::cache::*;
use crate::common::origin::*;
use crate::common::*;

#[test]
fn purge_removes_the_entry() {
    let origin = Origin::start(|_| Reply::ok(b"p"));
    let srv = Server::start(&conf_with(
        origin.port,
        "",
        "",
        "proxy_cache_valid 10m; proxy_cache_purge PURGE from 127.0.0.1;",
        "location /closed/ { proxy_pass http://127.0.0.1:ORIGIN; proxy_cache one;\n\
           proxy_cache_purge PURGE from 10.0.0.0/8; }",
    ));
    assert_eq!(cache_status(&req(srv.port, "GET", "/p", "")), "MISS");
    wait_for("a hit", Duration::from_secs(10), || {
        cache_status(&req(srv.port, "GET", "/p", "")) == "HIT"
    });
    let p = req(srv.port, "PURGE", "/p", "");
    assert_eq!(p.status, 200);
    assert!(p.text().contains("Successful purge"), "{}", p.text());
    assert_eq!(req(srv.port, "PURGE", "/p", "").status, 404);
    assert_eq!(cache_status(&req(srv.port, "GET", "/p", "")), "MISS");
    assert_eq!(req(srv.port, "PURGE", "/closed/x", "").status, 403);
}
