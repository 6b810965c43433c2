//! The `X-Accel-*` header lines an upstream sends to steer porter, as
//! NGINX's upstream core reads them (`ngx_http_upstream_process_headers`)
//! for every upstream kind: one hook per question, called where an
//! upstream's (or a cached entry's) response becomes the client's, each
//! given the location's `*_ignore_headers` list (lowercase names).
//!
//! - [`redirect`]: `X-Accel-Redirect: URI` (or `@name`) drops the
//!   upstream's response and continues the request at URI — an internal
//!   redirect through porter's normal path, static files included — or in
//!   the named location. The method becomes GET (HEAD stays). The
//!   upstream's `Content-Type`, `Set-Cookie`, `Content-Disposition`,
//!   `Cache-Control`, `Expires` and `Accept-Ranges` stay on the answer (NGINX's
//!   `redirect` header copies). An unsafe URI is a 404. An
//!   `X-Accel-Limit-Rate` beside it paces the redirected answer, over the
//!   new location's `limit_rate` (NGINX sets `r->limit_rate` as the line
//!   arrives, before the redirect).
//! - [`apply`]: `X-Accel-Limit-Rate: N` paces the response at N bytes a
//!   second (`limit_rate_after` still applies).
//! - [`apply`] too: `X-Accel-Charset: CS` makes CS the charset filter's
//!   destination whatever the type (`charset::header_filter`), when the
//!   configuration knows CS.
//! - [`buffering`]: `X-Accel-Buffering: yes|no` in place of
//!   `proxy_buffering` (off: the cache stores nothing).
//! - `X-Accel-Expires` is read by the cache's validity rules
//!   (`cache::policy`), `proxy_ignore_headers` honoured in
//!   `fill::policy_headers`.
//!
//! All of them are hidden from the client (`knobs::PROXY_HIDDEN`).

use crate::h1::fields::HeaderLines;
use crate::handlers::outcome::{Env, Outcome};
use crate::http::context::{Method, RequestCtx};
use crate::http::response::Response;
use crate::log::Level;

/// The upstream header lines an `X-Accel-Redirect` carries over to the
/// response that answers the request.
const KEPT_ON_REDIRECT: &[&str] = &[
    "content-type",
    "set-cookie",
    "content-disposition",
    "cache-control",
    "expires",
    "accept-ranges",
];

fn ignored(ignore: &[String], name: &str) -> bool {
    ignore.iter().any(|n| n == name)
}

/// `X-Accel-Redirect`: the outcome that continues the request elsewhere,
/// or `None` when the upstream sent none (or it is ignored).
pub fn redirect(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    ignore: &[String],
    headers: &(impl HeaderLines + ?Sized),
) -> Option<Outcome> {
    if ignored(ignore, "x-accel-redirect") {
        return None;
    }
    let target = headers.get("x-accel-redirect")?.to_string();
    if let Some(n) = limit_rate(ignore, headers) {
        ctx.limit_rate = Some(n);
    }
    for (n, v) in headers.lines() {
        if n.eq_ignore_ascii_case("content-type") {
            // In its slot on the answer (`chain::Carried::apply`).
            ctx.carried_headers
                .push(("Content-Type".into(), v.to_string()));
        } else if KEPT_ON_REDIRECT.iter().any(|k| n.eq_ignore_ascii_case(k)) {
            ctx.carried_headers.push((n.to_string(), v.to_string()));
        }
    }
    if target.starts_with('@') {
        return Some(Outcome::Named(target));
    }
    let Some((uri, args)) = crate::http::uri::parse_unsafe_uri(&target) else {
        ctx.log(env.log).line(
            Level::Error,
            format_args!("unsafe URI \"{target}\" was detected"),
        );
        return Some(Outcome::Status(404));
    };
    if !ctx.is_head() {
        ctx.method = Method::Get;
    }
    Some(Outcome::Internal(uri, args))
}

/// `X-Accel-Limit-Rate` and `X-Accel-Charset` on the client response `r`.
pub fn apply(ignore: &[String], headers: &(impl HeaderLines + ?Sized), r: &mut Response) {
    if !ignored(ignore, "x-accel-charset") {
        let cs = headers.get("x-accel-charset").map(str::trim);
        r.override_charset = cs.filter(|c| !c.is_empty()).map(str::to_string);
    }
    if let Some(n) = limit_rate(ignore, headers) {
        r.limit_rate = Some(n);
    }
}

/// `X-Accel-Limit-Rate: N` unless ignored (an unreadable one: none).
fn limit_rate(ignore: &[String], headers: &(impl HeaderLines + ?Sized)) -> Option<u64> {
    if ignored(ignore, "x-accel-limit-rate") {
        return None;
    }
    headers
        .get("x-accel-limit-rate")
        .and_then(|v| v.trim().parse::<u64>().ok())
}

/// Whether the response is buffered (so it may be stored in the cache):
/// `X-Accel-Buffering: yes|no`, else `configured`.
pub fn buffering(
    configured: bool,
    ignore: &[String],
    headers: &(impl HeaderLines + ?Sized),
) -> bool {
    if ignored(ignore, "x-accel-buffering") {
        return configured;
    }
    match headers.get("x-accel-buffering") {
        Some(v) if v.eq_ignore_ascii_case("yes") => true,
        Some(v) if v.eq_ignore_ascii_case("no") => false,
        _ => configured,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn x_accel_buffering_overrides_the_setting_unless_ignored() {
        let no = h(&[("X-Accel-Buffering", "no")]);
        let yes = h(&[("x-accel-buffering", "YES")]);
        assert!(!buffering(true, &[], &no));
        assert!(buffering(false, &[], &yes));
        assert!(buffering(true, &["x-accel-buffering".into()], &no));
        assert!(buffering(true, &[], &h(&[("X-Accel-Buffering", "maybe")])));
    }

    #[test]
    fn x_accel_limit_rate_sets_the_pace_unless_ignored() {
        let mut r = Response::new(200);
        apply(&[], &h(&[("X-Accel-Limit-Rate", "1024")]), &mut r);
        assert_eq!(r.limit_rate, Some(1024));
        let mut r = Response::new(200);
        apply(
            &["x-accel-limit-rate".into()],
            &h(&[("X-Accel-Limit-Rate", "1")]),
            &mut r,
        );
        apply(&[], &h(&[("X-Accel-Limit-Rate", "fast")]), &mut r);
        assert_eq!(r.limit_rate, None);
    }
}
