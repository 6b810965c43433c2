//! Cached errors (NGINX's keys-zone node `error`): an upstream error that
//! `proxy_intercept_errors` hands to `error_page` is remembered in the
//! keys zone when it is cacheable (`proxy_cache_valid`, or the upstream's
//! `Cache-Control: max-age`), and answers later requests through
//! `error_page` without asking the upstream; `proxy_cache_bypass` asks
//! again and a stored answer replaces the error; an error the upstream
//! marks `no-cache` is not remembered. Debian's nginx runs the same steps
//! side by side (nginx-tests' proxy_cache_bypass.t and proxy_cache_valid.t
//! are vendored too).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::common::origin::*;
use crate::common::*;

/// An origin answering 404 (with `Cache-Control` from the request's
/// `X-CC`) until `fixed`, then 200 `NOOP`; `hits` counts its requests.
struct Flaky {
    origin: Origin,
    fixed: Arc<AtomicBool>,
    hits: Arc<AtomicUsize>,
}

impl Flaky {
    fn start() -> Flaky {
        let fixed = Arc::new(AtomicBool::new(false));
        let hits = Arc::new(AtomicUsize::new(0));
        let (f, h) = (Arc::clone(&fixed), Arc::clone(&hits));
        let origin = Origin::start(move |req: &Req| {
            h.fetch_add(1, Ordering::SeqCst);
            if f.load(Ordering::SeqCst) {
                return Reply::ok(b"NOOP");
            }
            let r = Reply::ok(b"missing").status(404);
            match req.header("x-cc") {
                Some(cc) => r.header("Cache-Control", cc),
                None => r,
            }
        });
        Flaky {
            origin,
            fixed,
            hits,
        }
    }
}

fn http(o: u16) -> String {
    format!(
        "proxy_cache_path {{PREFIX}}/cache keys_zone=one:1m;\n\
         server {{\n listen 127.0.0.1:{{PORT}};\n server_name localhost;\n\
         proxy_cache one; proxy_cache_key $uri; proxy_cache_bypass $arg_bypass;\n\
         proxy_intercept_errors on; error_page 404 = @fallback;\n\
         proxy_set_header X-CC $http_x_cc;\n\
         location / {{ proxy_pass http://127.0.0.1:{o}; proxy_cache_valid any 1y; }}\n\
         location /cc/ {{ proxy_pass http://127.0.0.1:{o}; proxy_cache_valid 200 1m; }}\n\
         location @fallback {{ return 403; }}\n}}\n"
    )
}

/// The steps, with (status, upstream requests so far) after each.
fn steps(port: u16, f: &Flaky) -> Vec<(u16, usize)> {
    let mut out = Vec::new();
    let mut step = |path: &str, h: &str| {
        let r = get_with(port, path, h);
        out.push((r.status, f.hits.load(Ordering::SeqCst)));
    };
    step("/t", "");
    step("/cc/t", "X-CC: max-age=100\r\n");
    step("/cc/nc", "X-CC: no-cache\r\n");
    f.fixed.store(true, Ordering::SeqCst);
    step("/t", "");
    step("/cc/t", "");
    step("/cc/nc", "");
    step("/t?bypass=1", "");
    step("/t", "");
    out
}

#[test]
fn cacheable_intercepted_errors_answer_until_bypassed() {
    let f = Flaky::start();
    let porter = Server::start(&one_worker_conf(&http(f.origin.port)));
    let got = steps(porter.port, &f);
    let want = vec![
        (403, 1),
        (403, 2),
        (403, 3),
        (403, 3), // remembered by proxy_cache_valid any
        (403, 3), // remembered by max-age
        (200, 4), // no-cache: asked again
        (200, 5), // bypass asks and stores
        (200, 5), // the stored answer replaced the error
    ];
    assert_eq!(got, want);
    let f2 = Flaky::start();
    let Some(nginx) = Nginx::start(&http(f2.origin.port)) else {
        eprintln!("nginx not installed: porter alone");
        return;
    };
    assert_eq!(steps(nginx.port, &f2), want, "nginx");
}
