//! `porter_status`: a live status page. `GET` of the location answers one
//! self-contained HTML page (`page.html`: inline script and canvas
//! charts, nothing fetched from elsewhere) that polls the same location
//! with `?format=json` once a second and draws requests/s by status
//! class, connections, event-loop lag per worker, thread pools, the fast
//! path's hit ratio, cache zones, upstream peers and TLS handshakes.
//!
//! The page costs the server nothing while nobody looks: every figure is
//! a counter kept anyway (relaxed atomics, or a peer's state under the
//! lock its selection takes), the JSON ([`json`]) is rendered only when
//! asked, and rates are the browser's differences between two polls.

pub mod json;

use super::outcome::{Env, Outcome};
use crate::http::context::{Method, RequestCtx};
use crate::http::response::Response;
use crate::upstream::AllGroups;

/// The page, as served.
const PAGE: &str = include_str!("page.html");

/// Whether the request asks for the JSON (`format=json` among the
/// arguments).
fn wants_json(args: Option<&str>) -> bool {
    args.is_some_and(|a| a.split('&').any(|p| p == "format=json"))
}

/// The content handler.
pub fn serve(ctx: &mut RequestCtx, env: &Env<'_>, groups: &AllGroups) -> Outcome {
    if !matches!(ctx.method, Method::Get | Method::Head) {
        return Outcome::Status(405);
    }
    ctx.test_expect();
    let mut r = if wants_json(ctx.args.as_deref()) {
        Response::bytes(
            200,
            "application/json",
            json::render(env, groups.get()).into_bytes(),
        )
    } else {
        Response::bytes(200, "text/html; charset=utf-8", PAGE.as_bytes().to_vec())
    };
    // Figures of this instant: never from a cache between.
    r.headers.push(("Cache-Control".into(), "no-store".into()));
    Outcome::Send(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_asked_by_the_format_argument_only() {
        assert!(wants_json(Some("format=json")));
        assert!(wants_json(Some("a=1&format=json")));
        assert!(!wants_json(Some("format=jsonx")));
        assert!(!wants_json(Some("xformat=json")));
        assert!(!wants_json(None));
    }

    #[test]
    fn the_page_loads_nothing_from_elsewhere() {
        let lower = PAGE.to_ascii_lowercase();
        for bad in ["src=\"http", "href=\"http", "@import", "url(http", "//cdn"] {
            assert!(!lower.contains(bad), "{bad}");
        }
        assert!(PAGE.contains("?format=json"));
    }
}
