//! What goes to a FastCGI application (`fastcgi_pass`): `BEGIN_REQUEST`,
//! the `PARAMS` stream — each `fastcgi_param` rendered (`if_not_empty`
//! ones left out when empty), then the client's headers as `HTTP_*`
//! (unless `fastcgi_pass_request_headers off`, and but those a
//! `fastcgi_param HTTP_*` sets; repeated headers joined as current NGINX
//! joins them) — and the body as `STDIN` records. With `fastcgi_cache`,
//! NGINX's `ngx_http_fastcgi_cache_headers` apply: the client's `If-*`,
//! `Range` and `If-Range` are not passed, and a revalidation sends the
//! entry's validators as `HTTP_IF_MODIFIED_SINCE` / `HTTP_IF_NONE_MATCH`
//! (a `fastcgi_param` of those names wins). The records themselves are
//! `upstream::fastcgi`'s; the rest of the exchange is the proxy's.

use std::cell::RefCell;

use super::request::{request_body, FetchOptions, ReqBody, UpstreamError, CLEARED_FOR_CACHE};
use crate::config::app_upstream::AppSettings;
use crate::handlers::outcome::Env;
use crate::http::body::ClientBody;
use crate::http::context::RequestCtx;
use crate::upstream::fastcgi;

/// The request's records up to the body (with a body read whole, or
/// none, its `STDIN` records and the empty one that ends them) and how
/// the body travels.
pub async fn build_request(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    client_body: Option<&RefCell<ClientBody<'_>>>,
    opts: &FetchOptions,
) -> Result<(Vec<u8>, ReqBody), UpstreamError> {
    let buffering = ctx.loc.s.fastcgi.request_buffering;
    let body = request_body(ctx, env, client_body, None, true, buffering).await?;
    let mut head = Vec::with_capacity(1024);
    fastcgi::begin_request(&mut head, ctx.loc.s.fastcgi.keep_conn);
    let params = cgi_params(ctx, &ctx.loc.s.fastcgi, opts);
    fastcgi::params(
        &mut head,
        params.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
    );
    match &body {
        ReqBody::Stream { .. } | ReqBody::Spooled(_) => {}
        ReqBody::None => fastcgi::stdin_end(&mut head),
        ReqBody::Buffered(b) => {
            fastcgi::stdin(&mut head, b);
            fastcgi::stdin_end(&mut head);
        }
    }
    Ok((head, body))
}

/// The name-value pairs of `PARAMS` (and of uwsgi's vars, SCGI's
/// headers), in NGINX's order; with a cache, NGINX's
/// `ngx_http_*_cache_headers` rules (the same in the three modules).
pub(super) fn cgi_params(
    ctx: &RequestCtx,
    s: &AppSettings,
    opts: &FetchOptions,
) -> Vec<(String, String)> {
    let mut out = Vec::with_capacity(s.params.len() + ctx.head.headers().len());
    for p in s.params.iter() {
        let v = p.value.render(ctx);
        if p.if_not_empty && v.is_empty() {
            continue;
        }
        out.push((p.name.clone(), v));
    }
    let named = |n: &str| s.params.iter().any(|p| p.name.eq_ignore_ascii_case(n));
    let validators = [
        ("HTTP_IF_MODIFIED_SINCE", &opts.if_modified_since),
        ("HTTP_IF_NONE_MATCH", &opts.if_none_match),
    ];
    for (name, v) in validators {
        if let (Some(v), false) = (v, named(name)) {
            out.push((name.to_string(), v.clone()));
        }
    }
    if !s.pass_request_headers {
        return out;
    }
    let first = out.len();
    for (n, v) in ctx.head.headers() {
        if opts.cache_headers && CLEARED_FOR_CACHE.iter().any(|c| n.eq_ignore_ascii_case(c)) {
            continue;
        }
        let name = header_param(n);
        if s.params.iter().any(|p| p.name.eq_ignore_ascii_case(&name)) {
            continue;
        }
        // Repeated headers travel as one (`ngx_http_link_multi_headers`):
        // cookies joined with `; `, the rest with `, `.
        match out[first..].iter_mut().find(|(k, _)| *k == name) {
            Some((_, prev)) => {
                prev.push_str(if name == "HTTP_COOKIE" { "; " } else { ", " });
                prev.push_str(v);
            }
            None => out.push((name, v.to_string())),
        }
    }
    out
}

/// `HTTP_` and the header's name in upper case, `-` as `_`.
fn header_param(name: &str) -> String {
    let mut p = String::with_capacity(5 + name.len());
    p.push_str("HTTP_");
    p.extend(name.chars().map(|c| match c {
        '-' => '_',
        c => c.to_ascii_uppercase(),
    }));
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_names_become_cgi_params() {
        assert_eq!(header_param("Content-Type"), "HTTP_CONTENT_TYPE");
        assert_eq!(header_param("x-forwarded-for"), "HTTP_X_FORWARDED_FOR");
    }
}
