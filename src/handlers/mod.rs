//! Request processing after the head is parsed: server-level `return`,
//! location selection, `internal`, `return`, `try_files`, the content
//! handler, `error_page` and internal redirects, then the header filters
//! (`add_header`, `expires`, `charset`). Handlers produce a [`Response`]
//! description; the connection loop writes it.

pub mod metrics;
pub mod static_file;
mod stub_status;

use std::sync::Arc;

use crate::config::{Handler, ImsMode, LocSettings, Return};
use crate::disk::Disk;
use crate::http::context::{Method, RequestCtx};
use crate::http::response::Response;
use crate::log::{ErrorLog, Level};

/// What one pass through a location produced.
pub enum Outcome {
    /// A response to send.
    Done(Response),
    /// An error status to turn into a page (after `error_page`).
    Status(u16),
    /// Restart location selection with a new URI.
    Internal(String, Option<String>),
    /// Close the connection without a response (`return 444`).
    Close,
}

/// NGINX's limit on internal redirects per request.
const MAX_INTERNAL_REDIRECTS: u32 = 10;

/// Everything a handler needs besides the request.
pub struct Env<'a> {
    /// The worker's disk layer.
    pub disk: &'a Disk,
    /// The error log.
    pub log: &'a ErrorLog,
}

/// Produces the response for `ctx`; `None` means close without answering.
pub async fn respond(ctx: &mut RequestCtx, env: &Env<'_>) -> Option<Response> {
    let mut redirects = 0;
    let mut page_status: Option<u16> = None;
    let mut outcome = match ctx.server.server_return.clone() {
        Some(r) => do_return(ctx, &r),
        None => run_location(ctx, env).await,
    };
    loop {
        match outcome {
            Outcome::Close => return None,
            Outcome::Done(mut resp) => {
                if let Some(code) = page_status {
                    if resp.status == 200 {
                        resp.status = code;
                        resp.accept_ranges = false;
                    }
                }
                finalize(ctx, &mut resp);
                return Some(resp);
            }
            Outcome::Internal(uri, args) => {
                redirects += 1;
                if redirects > MAX_INTERNAL_REDIRECTS {
                    env.log.log_conn(
                        Level::Error,
                        Some(ctx.conn.id),
                        format_args!(
                            "rewrite or internal redirection cycle while internally redirecting to \"{uri}\""
                        ),
                        &ctx.log_context(),
                    );
                    outcome = Outcome::Status(500);
                    continue;
                }
                ctx.uri = uri;
                ctx.args = args;
                ctx.internal = true;
                outcome = run_location(ctx, env).await;
            }
            Outcome::Status(code) => {
                let page = if ctx.error_page {
                    None
                } else {
                    ctx.loc
                        .s
                        .error_pages
                        .iter()
                        .find(|p| p.codes.contains(&code))
                        .cloned()
                };
                let Some(page) = page else {
                    let mut resp = Response::special(code, ctx.loc.s.server_tokens);
                    if let Some(c) = page_status {
                        if resp.status < 400 {
                            resp.status = c;
                        }
                    }
                    finalize(ctx, &mut resp);
                    return Some(resp);
                };
                ctx.error_page = true;
                let target = page.target.render(ctx);
                if target.starts_with('/') {
                    page_status = match page.status {
                        None => Some(code),
                        Some(None) => None,
                        Some(Some(c)) => Some(c),
                    };
                    if ctx.method != Method::Head {
                        ctx.method = Method::Get;
                    }
                    let (uri, args) = split_args(&target);
                    outcome = Outcome::Internal(uri, args);
                } else {
                    let status = match page.status {
                        Some(Some(c)) if (301..=308).contains(&c) => c,
                        _ => 302,
                    };
                    outcome = Outcome::Done(redirect(ctx, status, &target));
                }
            }
        }
    }
}

fn split_args(target: &str) -> (String, Option<String>) {
    match target.split_once('?') {
        Some((u, a)) => (u.to_string(), Some(a.to_string())),
        None => (target.to_string(), None),
    }
}

async fn run_location(ctx: &mut RequestCtx, env: &Env<'_>) -> Outcome {
    ctx.loc = Arc::clone(ctx.server.find_location(&ctx.uri));
    let loc = Arc::clone(&ctx.loc);
    if loc.internal && !ctx.internal {
        return Outcome::Status(404);
    }
    let max_body = loc.s.client_max_body_size;
    if let Some(len) = ctx.head.content_length {
        if max_body != 0 && len > max_body {
            env.log.log_conn(
                Level::Error,
                Some(ctx.conn.id),
                format_args!("client intended to send too large body: {len} bytes"),
                &ctx.log_context(),
            );
            return Outcome::Status(413);
        }
    }
    if let Some(r) = &loc.ret {
        return do_return(ctx, r);
    }
    if let Some(list) = loc.s.try_files.clone() {
        if let Some(o) = static_file::try_files(ctx, env, &list).await {
            return o;
        }
    }
    match loc.handler {
        Handler::Static => static_file::serve(ctx, env).await,
        Handler::StubStatus => stub_status::serve(ctx),
        Handler::Metrics => metrics::serve(ctx, env),
    }
}

/// The `Location` value for `target`: relative URIs become absolute
/// (`absolute_redirect`), with the port unless it is 80 (`port_in_redirect`).
pub fn absolute_location(ctx: &RequestCtx, target: &str) -> String {
    let s = &ctx.loc.s;
    if !target.starts_with('/') || !s.absolute_redirect {
        return target.to_string();
    }
    let host = if s.server_name_in_redirect && !ctx.server.primary_name.is_empty() {
        ctx.server.primary_name.clone()
    } else {
        match &ctx.head.host {
            Some(_) => ctx.host().to_string(),
            None => ctx.conn.local.ip().to_string(),
        }
    };
    let port = ctx.conn.local.port();
    if s.port_in_redirect && port != 80 {
        format!("http://{host}:{port}{target}")
    } else {
        format!("http://{host}{target}")
    }
}

/// A redirect response with NGINX's page.
///
/// NGINX writes a Location it made absolute itself before `Connection`, and
/// one configured as a full URL among the other headers after it.
pub fn redirect(ctx: &RequestCtx, status: u16, target: &str) -> Response {
    let mut r = Response::special(status, ctx.loc.s.server_tokens);
    if target.starts_with('/') {
        r.location = Some(absolute_location(ctx, target));
    } else {
        r.headers.push(("Location".into(), target.to_string()));
    }
    r
}

fn do_return(ctx: &mut RequestCtx, r: &Return) -> Outcome {
    if r.code == 444 {
        return Outcome::Close;
    }
    let text = r.text.as_ref().map(|t| t.render(ctx));
    match (r.code, text) {
        (301 | 302 | 303 | 307 | 308, Some(url)) => Outcome::Done(redirect(ctx, r.code, &url)),
        (code, Some(body)) => {
            let ct = ctx.loc.s.default_type.clone();
            Outcome::Done(Response::bytes(code, &ct, body.into_bytes()))
        }
        (code, None) if code >= 400 => Outcome::Status(code),
        (code, None) => Outcome::Done(Response::special(code, ctx.loc.s.server_tokens)),
    }
}

/// Statuses `add_header` and `expires` apply to without `always`.
fn header_filter_applies(status: u16) -> bool {
    matches!(
        status,
        200 | 201 | 204 | 206 | 301 | 302 | 303 | 304 | 307 | 308
    )
}

/// NGINX's default `charset_types`.
fn charset_type(ct: &str) -> bool {
    matches!(
        ct,
        "text/html"
            | "text/xml"
            | "text/plain"
            | "text/vnd.wap.wml"
            | "application/javascript"
            | "application/rss+xml"
    )
}

/// The header filters: `charset`, `expires`, `add_header`.
fn finalize(ctx: &mut RequestCtx, resp: &mut Response) {
    ctx.status = resp.status;
    let s: &LocSettings = &ctx.loc.s;
    if let (Some(cs), Some(ct)) = (&s.charset, &mut resp.content_type) {
        if charset_type(ct) {
            ct.push_str("; charset=");
            ct.push_str(cs);
        }
    }
    let applies = header_filter_applies(resp.status);
    if applies {
        if let Some(secs) = s.expires {
            expires_headers(secs, resp);
        }
    }
    let loc = Arc::clone(&ctx.loc);
    for h in loc.s.add_headers.iter() {
        if applies || h.always {
            let v = h.value.render(ctx);
            if !v.is_empty() {
                resp.headers.push((h.name.clone(), v));
            }
        }
    }
}

fn expires_headers(secs: i64, resp: &mut Response) {
    let (expires, cc) = match secs {
        i64::MIN => (
            "Thu, 01 Jan 1970 00:00:01 GMT".to_string(),
            "no-cache".to_string(),
        ),
        i64::MAX => (
            "Thu, 31 Dec 2037 23:55:55 GMT".to_string(),
            "max-age=315360000".to_string(),
        ),
        s => {
            let now = crate::util::time::now().0;
            let cc = if s < 0 {
                "no-cache".to_string()
            } else {
                format!("max-age={s}")
            };
            (crate::util::time::http_date(now + s), cc)
        }
    };
    resp.headers.push(("Expires".into(), expires));
    resp.headers.push(("Cache-Control".into(), cc));
}

/// `if_modified_since` as the conditional evaluator needs it.
pub fn ims_mode(s: &LocSettings) -> ImsMode {
    s.if_modified_since
}
