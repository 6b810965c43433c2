//! Step two of a proxied request: the client's [`Response`] for an
//! upstream's — its status and headers less the hidden and hop-by-hop ones,
//! `Location` and `Refresh` through `proxy_redirect`, the validators in their slots — and
//! its body as a [`Body::Stream`] the connection loop pulls piece by piece
//! (Content-Length passed through, or chunked to an HTTP/1.1 client when
//! the length is unknown). A cached entry's head goes through the same
//! [`head_response`].

use std::borrow::Cow;

use super::knobs::Knobs;
use crate::h1::fields::HeaderLines;
use crate::handlers::outcome::Outcome;
use crate::http::context::RequestCtx;
use crate::http::request::Version;
use crate::http::response::{Body, Response, StreamBody};
use crate::http::tunnel::{TunnelTimeouts, Upgrade};
use crate::upstream::cookie::{self, CookieRules};
use crate::upstream::{Protocol, ProxyPass, RedirectRule, UpstreamResponse};
use crate::vars::map::WithMatch;

const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "upgrade",
    "te",
    "trailer",
    "proxy-connection",
];

/// `proxy_intercept_errors` (`fastcgi_intercept_errors`): an upstream
/// status with an `error_page` becomes that page; a 401 keeps the
/// upstream's `WWW-Authenticate` lines, as NGINX copies them.
pub fn intercepted(
    ctx: &mut RequestCtx,
    pass: &ProxyPass,
    status: u16,
    headers: &(impl HeaderLines + ?Sized),
) -> Option<Outcome> {
    let on = Knobs::of(&ctx.loc.s, pass.proto).intercept_errors;
    intercepted_if(on, ctx, status, headers)
}

/// [`intercepted`] when the module's `*_intercept_errors` is `on`
/// (`grpc_intercept_errors`).
pub fn intercepted_if(
    on: bool,
    ctx: &mut RequestCtx,
    status: u16,
    headers: &(impl HeaderLines + ?Sized),
) -> Option<Outcome> {
    let s = &ctx.loc.s;
    if !(on && status >= 300 && s.error_pages.iter().any(|p| p.codes.contains(&status))) {
        return None;
    }
    if status == 401 {
        ctx.carried_headers.extend(
            headers
                .lines()
                .filter(|(n, _)| n.eq_ignore_ascii_case("www-authenticate"))
                .map(|(n, v)| (n.to_string(), v.to_string())),
        );
    }
    Some(Outcome::Status(status))
}

/// Step two: the client response for an upstream response — its status
/// and headers (less the hidden and hop-by-hop ones) and its body as a
/// stream.
pub fn into_response(ctx: &RequestCtx, pass: &ProxyPass, up: UpstreamResponse) -> Response {
    let mut r = head_response(ctx, pass, up.status(), up.headers());
    r.reason = Some((up.status(), up.head.reason().to_string()));
    if up.status() == 101 {
        return switched(ctx, r, up);
    }
    let empty = up.body.is_complete();
    r.content_length = up.content_length();
    if empty {
        r.body = Body::Empty;
        if r.content_length.is_none()
            && !(up.status() == 204 || up.status() == 304 || ctx.is_head())
        {
            r.content_length = Some(0);
        }
    } else {
        if r.content_length.is_none() {
            if ctx.head.version == Version::Http11 {
                r.chunked = true;
            } else {
                r.close = true;
            }
        }
        r.body = Body::Stream(StreamBody::new(Box::new(up.body)));
    }
    if forces_ranges(ctx, pass) {
        // The upstream's `Accept-Ranges` is not copied: the range filter
        // sends its own (NGINX's `ngx_http_upstream_copy_allow_ranges`).
        r.headers
            .retain(|(n, _)| !n.eq_ignore_ascii_case("accept-ranges"));
        r.allow_ranges = r.status == 200;
    }
    r
}

/// `proxy_force_ranges on` for an HTTP upstream: its 200s (fresh or from
/// the cache) are served in ranges whatever its `Accept-Ranges` says.
pub fn forces_ranges(ctx: &RequestCtx, pass: &ProxyPass) -> bool {
    ctx.loc.s.proxy_force_ranges && matches!(pass.proto, Protocol::Http)
}

/// A `101`: no body, no length, and the connection becomes a tunnel
/// once the head is sent when the client asked for it. One it did not
/// ask for (`fetch` lets it through to an HTTP/1.x client only) is sent
/// as a head alone and the connection closes, the upstream's dropped:
/// what NGINX 1.22's client sees ("TODO: prevent upgrade if not
/// requested"), but at once rather than at `proxy_read_timeout`.
fn switched(ctx: &RequestCtx, mut r: Response, up: UpstreamResponse) -> Response {
    let s = &ctx.loc.s;
    r.content_length = None;
    r.body = Body::Empty;
    r.close = true;
    if !super::request::upgrade_asked(ctx) {
        return r;
    }
    r.upgrade = up.body.into_upgrade().map(|sw| {
        Box::new(Upgrade {
            peer: Box::new(sw.conn),
            early: sw.early,
            buffer: s.proxy_buffer_size as usize,
            timeouts: TunnelTimeouts {
                idle: s.proxy_read_timeout,
                to_peer: s.proxy_send_timeout,
                to_client: s.send_timeout,
            },
            log: sw.log,
            received: sw.received,
        })
    });
    r
}

/// The client response's status and headers for an upstream's (or a
/// cached entry's) `status` and `headers`: less the hidden and hop-by-hop
/// ones, `Location` rewritten, validators in their slots. No body.
pub fn head_response(
    ctx: &RequestCtx,
    pass: &ProxyPass,
    status: u16,
    headers: &(impl HeaderLines + ?Sized),
) -> Response {
    let s = &ctx.loc.s;
    let k = Knobs::of(s, pass.proto);
    let http = pass.proto == Protocol::Http;
    let mut r = Response::new(status);
    let hidden = |n: &str| {
        (k.hidden.contains(&n) && !k.pass_header.iter().any(|p| p == n))
            || k.hide_header.iter().any(|p| p == n)
    };
    let cookies = CookieRules {
        domain: &s.proxy_cookie_domain,
        path: &s.proxy_cookie_path,
        flags: &s.proxy_cookie_flags,
    };
    let mut buf = [0u8; 64];
    for (n, v) in headers.lines() {
        let lower = lowercase(n, &mut buf);
        // `Upgrade` goes to an HTTP/1.x client (with a 101, and as the
        // offer of one in any other response: NGINX's
        // `ngx_http_upstream_copy_upgrade`); HTTP/2 has no such header.
        let upgrade_offer = lower == "upgrade" && !ctx.conn.multiplexed();
        if (HOP_BY_HOP.contains(&&*lower) && !upgrade_offer) || hidden(&lower) {
            continue;
        }
        match &*lower {
            "server" | "date" => {
                no_own(&mut r, &lower);
                r.headers.push((n.to_string(), v.to_string()));
            }
            // The last one stands, as NGINX's copies replace each other.
            "content-type" => r.content_type = Some(v.into()),
            "etag" if r.etag.is_none() => r.etag = Some(v.to_string()),
            // FastCGI has no redirect rewriting: the application's value
            // goes out as sent, a path too (NGINX's
            // `ngx_http_upstream_rewrite_location` leaves it relative).
            "location" if r.location.is_none() && http => match rewrite_location(ctx, pass, v) {
                // Rewritten to a path: made absolute and sent in its own
                // slot, as NGINX's header filter does. Anything else
                // (a URL, or a Location no rule matched) stays in line.
                Some(v) if v.starts_with('/') => {
                    r.location = Some(crate::handlers::outcome::absolute_location(ctx, &v))
                }
                Some(v) => r.headers.push((n.to_string(), v)),
                None => r.headers.push((n.to_string(), v.to_string())),
            },
            "refresh" if http => r
                .headers
                .push((n.to_string(), rewrite_refresh(ctx, pass, v))),
            // In line, where the upstream put it (NGINX's header filter
            // writes a proxied Last-Modified among the other lines); the
            // parsed time is for the conditional filters.
            "set-cookie" if http && !cookies.is_empty() => {
                let v = cookie::rewrite(v, &cookies, ctx).unwrap_or_else(|| v.to_string());
                r.headers.push((n.to_string(), v));
            }
            "last-modified" if r.last_modified.is_none() => {
                if let Ok(t) = httpdate::parse_http_date(v) {
                    r.last_modified = t
                        .duration_since(std::time::UNIX_EPOCH)
                        .ok()
                        .map(|d| d.as_secs() as i64);
                    r.last_modified_inline = true;
                }
                r.headers.push((n.to_string(), v.to_string()));
            }
            _ => r.headers.push((n.to_string(), v.to_string())),
        }
    }
    // A passed `Date` or `Server` the upstream did not send is not made up
    // by porter either (NGINX empties its own header for it).
    k.pass_header.iter().for_each(|p| no_own(&mut r, p));
    super::accel::apply(k.ignore_headers, headers, &mut r);
    r.own_type = true;
    r
}

/// The upstream's `Server` or `Date` (`name`, lowercase) stands in place
/// of porter's own.
fn no_own(r: &mut Response, name: &str) {
    match name {
        "server" => r.own_server = false,
        "date" => r.own_date = false,
        _ => {}
    }
}

/// `name` in lowercase, in `buf` when it fits (a header name nearly
/// always does): checking a header line of a cached response allocates
/// nothing.
fn lowercase<'a>(name: &str, buf: &'a mut [u8; 64]) -> Cow<'a, str> {
    match buf.get_mut(..name.len()) {
        Some(b) => {
            b.copy_from_slice(name.as_bytes());
            b.make_ascii_lowercase();
            Cow::Borrowed(std::str::from_utf8(b).expect("ASCII lowercasing keeps UTF-8"))
        }
        None => Cow::Owned(name.to_ascii_lowercase()),
    }
}

/// Whether an upstream header is hop-by-hop (never stored or passed).
pub fn hop_by_hop(name: &str) -> bool {
    HOP_BY_HOP.iter().any(|h| h.eq_ignore_ascii_case(name))
}

/// An upstream's `Location` (or `Refresh` from `prefix`, the part after
/// `url=`) after `proxy_redirect`: the first rule that matches rewrites
/// it (`None`: no rule matched), as NGINX's
/// `ngx_http_proxy_rewrite_redirect`.
fn rewrite_location(ctx: &RequestCtx, pass: &ProxyPass, v: &str) -> Option<String> {
    rewrite_redirect(ctx, pass, v, 0)
}

/// `Refresh: 5; url=URL` with its URL through `proxy_redirect`
/// (NGINX's `ngx_http_upstream_rewrite_refresh`; not made absolute).
fn rewrite_refresh(ctx: &RequestCtx, pass: &ProxyPass, v: &str) -> String {
    let at = v.to_ascii_lowercase().find("url=").map(|i| i + 4);
    at.and_then(|at| rewrite_redirect(ctx, pass, v, at))
        .unwrap_or_else(|| v.to_string())
}

fn rewrite_redirect(ctx: &RequestCtx, pass: &ProxyPass, v: &str, prefix: usize) -> Option<String> {
    let (head, url) = v.split_at(prefix);
    for rule in ctx.loc.s.proxy_redirect.iter() {
        let (from, to) = match rule {
            RedirectRule::Default => match &pass.redirect_default {
                Some((f, t)) => (f.clone(), t.clone()),
                None => continue,
            },
            RedirectRule::Replace(f, t) => (f.render(ctx), t.render(ctx)),
            // A match anywhere replaces the whole URL.
            RedirectRule::Regex(re, t) => match re.exec(url) {
                Some(m) => {
                    return Some(format!(
                        "{head}{}",
                        t.render(&WithMatch { src: ctx, m: &m })
                    ))
                }
                None => continue,
            },
        };
        if let Some(rest) = url.strip_prefix(from.as_str()) {
            return Some(format!("{head}{to}{rest}"));
        }
    }
    None
}
