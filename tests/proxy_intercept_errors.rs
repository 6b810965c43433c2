//! `proxy_intercept_errors` with `error_page`: an intercepted 401 is
//! answered by the error page and keeps the upstream's
//! `WWW-Authenticate`, as Debian's nginx does on the same server block
//! (`tests/common/beside.rs`).

use crate::common::beside::{self, Both};
use crate::common::origin::*;

#[test]
fn intercepted_401_keeps_www_authenticate() {
    let origin = Origin::start(|_| {
        Reply::ok(b"no")
            .status(401)
            .header("WWW-Authenticate", "Basic realm=\"r\"")
    });
    let b = Both::start(
        "",
        "location / { proxy_pass http://127.0.0.1:{ORIGIN}; proxy_intercept_errors on; error_page 401 /e401; }\n\
         location = /e401 { return 401 \"denied\"; }",
        origin.port,
    );
    for (who, port) in b.ports() {
        let r = beside::get_h(port, "/", "");
        assert_eq!(r.status, 401, "{who}");
        assert_eq!(
            r.header("www-authenticate"),
            Some("Basic realm=\"r\""),
            "{who}"
        );
        assert_eq!(r.text(), "denied", "{who}");
    }
}
