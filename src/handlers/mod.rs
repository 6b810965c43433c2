//! Request processing after the head is parsed, in NGINX's phases: the
//! server's rewrite program, location selection (`config::locations`:
//! `internal`, the body size limit, the automatic 301), the location's
//! rewrite program (a changed URI selects again, at most 10 times), the
//! limits and access checks ([`access`]), `try_files`, the content
//! handler (for files: `gzip_static`, which may decline, then the static
//! handler, whose index step asks `random_index` first); then `error_page`, internal and named-location redirects (the
//! same bound, counted by `count_uri_change`), and the response filter
//! chain ([`chain`]: slice, conditional requests, `add_header`/`expires`,
//! userid, gunzip, `sub_filter`, `charset`, `ssi`, `gzip`, ranges, trailers, then the copy
//! step that reads a small file body into memory), and `post_action`
//! ([`post_action`]) armed for after the response. Handlers produce a
//! [`Response`] description and call no filter; the connection loop writes
//! it. This file is the dispatcher only: what the handlers share
//! ([`Outcome`], [`Env`], [`redirect`]) is in [`outcome`], below them, and
//! a handler imports that, not this file. The connection reaches them
//! through [`Handlers`], its implementation of `http`'s [`Respond`], which
//! the worker builds.

mod access;
mod addition;
mod auth_request;
pub mod autoindex;
pub mod body_source;
pub mod chain;
pub mod charset;
mod copy;
mod dav;
pub mod disk_io;
mod empty_gif;
mod file;
pub mod filters;
mod flv;
pub mod grpc;
mod gunzip;
pub mod gzip;
mod gzip_static;
pub mod metrics;
mod mirror;
mod mp4;
pub mod outcome;
mod post_action;
pub mod proxy;
mod random_index;
pub mod realip;
pub mod rewrite;
pub mod slice;
mod ssi;
pub mod static_file;
mod status_page;
mod stub_status;
mod sub_filter;
pub mod subrequest;
pub mod trailers;
mod userid;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use crate::cache::CacheSet;
use crate::config::locations::Found;
use crate::config::{Handler, LocationConf, PageStatus};
use crate::disk::Disk;
use crate::http::body::ClientBody;
use crate::http::connection::Respond;
use crate::http::context::{Method, RequestCtx};
use crate::http::response::{Body, Response};
use crate::http::status;
use crate::log::{ErrorLog, Level};

use chain::Built;
use outcome::{redirect, split_args, Content, Env, Outcome};

/// The handlers of one worker: what they share across its requests. The
/// worker builds it and hands it to the connection loop, which calls it
/// through [`Respond`].
pub struct Handlers {
    /// The worker's disk layer (the connection sends files through the
    /// same one).
    pub disk: Rc<Disk>,
    /// The error log.
    pub log: ErrorLog,
    /// The proxy cache zones of this generation.
    pub caches: Arc<CacheSet>,
}

impl Handlers {
    /// The environment of one request, whose body (if any) is `body`.
    pub fn env<'a>(&'a self, body: Option<&'a RefCell<ClientBody<'a>>>) -> Env<'a> {
        Env {
            disk: &self.disk,
            log: &self.log,
            caches: &self.caches,
            body,
        }
    }
}

impl Respond for Handlers {
    async fn respond<'a>(
        &'a self,
        ctx: &mut RequestCtx,
        body: &'a RefCell<ClientBody<'a>>,
    ) -> Option<Response> {
        respond(ctx, &self.env(Some(body))).await
    }

    async fn respond_status<'a>(
        &'a self,
        ctx: &mut RequestCtx,
        body: Option<&'a RefCell<ClientBody<'a>>>,
        code: u16,
    ) -> Option<Response> {
        respond_status(ctx, &self.env(body), code).await
    }
}

/// Produces the response for `ctx`; `None` means close without answering.
pub async fn respond(ctx: &mut RequestCtx, env: &Env<'_>) -> Option<Response> {
    // NGINX refuses TRACE once the head is read, before any rewrite or
    // location runs, and closes: the request never reached the point
    // where keep-alive is decided.
    if ctx.method == Method::Trace {
        ctx.log(env.log).line(
            Level::Info,
            format_args!("client sent TRACE method while reading client request headers"),
        );
        let resp = finish(ctx, env, Outcome::Status(405)).await;
        return resp.map(|mut r| {
            r.close = true;
            r
        });
    }
    // NGINX's post-read phase: realip with the server's settings.
    if !ctx.server.base.s.real_ip_from.is_empty() {
        let server = Arc::clone(&ctx.server);
        realip::run(ctx, &server.base.s);
    }
    // ACME's HTTP-01 tokens, before any rewrite or location (as
    // nginx-acme's post-read handler): one atomic load when none is
    // pending.
    if ctx.method == Method::Get {
        if let Some(key_auth) = crate::acme::challenge::answer(&ctx.uri) {
            let r = Response::bytes(200, "text/plain", key_auth.into_bytes());
            return finish(ctx, env, Outcome::Send(r)).await;
        }
    }
    let first = run_phases(ctx, env, None).await;
    let answer = matches!(
        first,
        Outcome::Send(_) | Outcome::Special(_) | Outcome::Status(_)
    );
    let first = match first {
        Outcome::Status(413) => first,
        _ if answer && bad_preread_body(env) => {
            let why = "client sent invalid chunked body";
            ctx.log(env.log).line(Level::Info, format_args!("{why}"));
            Outcome::Status(400)
        }
        _ => first,
    };
    let resp = finish(ctx, env, first).await;
    if resp.is_some() && ctx.loc.s.post_action.is_some() {
        post_action::arm(ctx, env);
    }
    resp
}

/// NGINX discards what of an unread body came with the head before it
/// answers (`ngx_http_discard_request_body`): bad chunked framing there
/// is a 400 in place of the answer. The rest is discarded after it.
fn bad_preread_body(env: &Env<'_>) -> bool {
    env.body.is_some_and(|b| {
        let mut b = b.borrow_mut();
        b.read == 0 && b.discard_buffered().is_err()
    })
}

/// A subrequest's response ([`subrequest`]): its phases from the
/// server's rewrite program on, then `error_page` and internal redirects;
/// no header filters (they are the main request's).
/// With `named`, it starts in that named location (`post_action @name`).
async fn serve_subrequest(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    named: Option<String>,
) -> Option<Response> {
    let first = match named {
        Some(name) => Outcome::Named(name),
        None => run_phases(ctx, env, None).await,
    };
    finish(ctx, env, first).await
}

/// The response for a request refused before location selection (a
/// malformed head or URI): the status's page, after `error_page` and the
/// header filters of the level `ctx.loc` names (the server level).
pub async fn respond_status(ctx: &mut RequestCtx, env: &Env<'_>, code: u16) -> Option<Response> {
    finish(ctx, env, Outcome::Status(code)).await
}

/// Follows internal redirects and error pages from `outcome` to the
/// response, and runs the filter chain on it.
async fn finish(ctx: &mut RequestCtx, env: &Env<'_>, mut outcome: Outcome) -> Option<Response> {
    // The status an error page's response is sent with (NGINX's err_status).
    let mut page_status: Option<u16> = None;
    // What earlier passes through the filters left on the request.
    let mut carried = chain::Carried::default();
    loop {
        if !ctx.carried_headers.is_empty() {
            carried.add(std::mem::take(&mut ctx.carried_headers));
        }
        let mut resp = match outcome {
            Outcome::Close => return None,
            Outcome::Send(mut resp) => {
                if let Some(code) = page_status {
                    resp.status = code;
                }
                carried.apply(&mut resp, Built::Handler);
                resp
            }
            Outcome::Special(mut resp) => {
                if let Some(o) = redirect_error_page(ctx, &mut resp, &mut page_status, &mut carried)
                {
                    outcome = o;
                    continue;
                }
                carried.apply(&mut resp, Built::Special);
                resp
            }
            Outcome::Internal(uri, args) => {
                if let Some(o) = count_uri_change(ctx, env, UriChange::Internal(&uri)) {
                    outcome = o;
                    continue;
                }
                ctx.uri = uri;
                ctx.args = args;
                ctx.internal = true;
                // NGINX clears the modules' contexts (the slice's too).
                ctx.slice.set(None);
                outcome = run_phases(ctx, env, None).await;
                continue;
            }
            Outcome::Named(name) => {
                ctx.slice.set(None);
                outcome = named_location(ctx, env, &name).await;
                continue;
            }
            Outcome::Status(code) => match error_page(ctx, code, &mut page_status) {
                Some(o) => {
                    outcome = o;
                    continue;
                }
                None => {
                    ctx.expect_tested = true;
                    let mut resp = special_page(ctx, code);
                    carried.apply(&mut resp, Built::Special);
                    resp
                }
            },
        };
        rewrite::warn_unset(ctx, env);
        match chain::run(ctx, env, &mut resp, &mut carried).await {
            Ok(()) => return Some(resp),
            Err(o) => outcome = o,
        }
    }
}

/// The `error_page` for `code` in the current location, once per request:
/// an internal redirect (setting the status its response is sent with) or
/// a redirect to a URL.
fn error_page(ctx: &mut RequestCtx, code: u16, page_status: &mut Option<u16>) -> Option<Outcome> {
    if ctx.error_page {
        return None;
    }
    let page = ctx
        .loc
        .s
        .error_pages
        .iter()
        .find(|p| p.codes.contains(&code))
        .cloned()?;
    ctx.error_page = true;
    let target = page.target.render(ctx);
    if target.starts_with('/') || target.starts_with('@') {
        *page_status = match page.status {
            PageStatus::Error => Some(code),
            PageStatus::Page => None,
            PageStatus::Set(c) => Some(c),
        };
        // A page sent with an error status does not ask for the body.
        if page_status.is_some_and(|c| c != 200) {
            ctx.expect_tested = true;
        }
        if target.starts_with('@') {
            return Some(Outcome::Named(target));
        }
        if !ctx.is_head() {
            ctx.method = Method::Get;
        }
        let (uri, args) = split_args(&target);
        Some(Outcome::Internal(uri, args))
    } else {
        ctx.expect_tested = true;
        let status = match page.status {
            PageStatus::Set(c) if (301..=308).contains(&c) => c,
            _ => 302,
        };
        Some(Outcome::Special(redirect(ctx, status, &target)))
    }
}

/// A redirect ends the request with its status, as NGINX's `return`,
/// `rewrite ... redirect` and directory 301 do: the location's
/// `error_page` for that status applies, and the redirect's `Location`
/// stays with the request for the page (a page that redirects again
/// replaces it, as `ngx_http_clear_location`).
fn redirect_error_page(
    ctx: &mut RequestCtx,
    resp: &mut Response,
    page_status: &mut Option<u16>,
    carried: &mut chain::Carried,
) -> Option<Outcome> {
    if !(301..=308).contains(&resp.status) {
        return None;
    }
    let o = error_page(ctx, resp.status, page_status)?;
    let mut lines: Vec<(String, String)> = resp
        .location
        .take()
        .map(|l| ("Location".to_string(), l))
        .into_iter()
        .collect();
    lines.extend(
        resp.headers
            .drain(..)
            .filter(|(n, _)| n.eq_ignore_ascii_case("location")),
    );
    carried.add(lines);
    Some(o)
}

/// NGINX's built-in page for `code`; a 4xx/5xx page is padded for the
/// browsers that would hide a short one (`msie_padding`).
fn special_page(ctx: &RequestCtx, code: u16) -> Response {
    let mut resp = Response::special(code, ctx.loc.s.server_tokens);
    let pad = code >= 400
        && ctx.loc.s.msie_padding
        && ctx
            .header("user-agent")
            .is_some_and(status::wants_page_padding);
    if let (true, Body::Bytes(page)) = (pad, &mut resp.body) {
        page.extend_from_slice(status::FRIENDLY_PAGE_PADDING.as_bytes());
        resp.content_length = Some(page.len() as u64);
    }
    resp
}

/// The jump to a named location (`error_page`, `try_files`), counted
/// with the internal redirects.
async fn named_location(ctx: &mut RequestCtx, env: &Env<'_>, name: &str) -> Outcome {
    if let Some(o) = count_uri_change(ctx, env, UriChange::Named(name)) {
        return o;
    }
    match ctx.server.named.get(name).cloned() {
        Some(loc) => {
            ctx.internal = true;
            run_phases(ctx, env, Some(loc)).await
        }
        None => {
            ctx.log(env.log)
                .error(format_args!("could not find named location \"{name}\""));
            Outcome::Status(500)
        }
    }
}

/// A step counted against NGINX's one bound on URI changes and internal
/// redirects (`uri_changes`, from
/// [`crate::http::context::MAX_URI_CHANGES`]), with what its log line
/// names. Every kind is counted, then checked, as in NGINX's own places
/// for each, so the 11th is refused.
enum UriChange<'a> {
    /// An internal redirect to this URI (`error_page`, `index`,
    /// `try_files`; `ngx_http_internal_redirect`).
    Internal(&'a str),
    /// A jump to this named location (`ngx_http_named_location`).
    Named(&'a str),
    /// A location's `rewrite` changed the URI (to `ctx.uri`): counted, then
    /// checked (NGINX's post-rewrite phase).
    Rewrite,
}

/// Counts `change`; when it is one too many, NGINX's error line and the
/// 500 to answer with.
fn count_uri_change(ctx: &mut RequestCtx, env: &Env<'_>, change: UriChange<'_>) -> Option<Outcome> {
    ctx.uri_changes = ctx.uri_changes.saturating_sub(1);
    if ctx.uri_changes != 0 {
        return None;
    }
    let doing = match change {
        UriChange::Internal(uri) => format!("internally redirecting to \"{uri}\""),
        UriChange::Named(name) => format!("redirect to named location \"{name}\""),
        UriChange::Rewrite => format!("processing \"{}\"", ctx.uri),
    };
    ctx.log(env.log).error(format_args!(
        "rewrite or internal redirection cycle while {doing}"
    ));
    Some(Outcome::Status(500))
}

/// NGINX's phases from the server's rewrite program (or, for a named
/// location, from its own program) to the content handler.
async fn run_phases(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    named: Option<Arc<LocationConf>>,
) -> Outcome {
    let mut located = match named {
        Some(loc) => {
            ctx.loc = loc;
            true
        }
        None => {
            ctx.loc = Arc::clone(&ctx.server.base);
            let script = Arc::clone(&ctx.server.script);
            if let Some(o) = rewrite::run(ctx, env, &script).await {
                return o;
            }
            false
        }
    };
    loop {
        if !located {
            ctx.uri_changed = false;
            if let Some(o) = find_config(ctx, env) {
                return o;
            }
        }
        located = false;
        let script = Arc::clone(&ctx.loc.script);
        if let Some(o) = rewrite::run(ctx, env, &script).await {
            return o;
        }
        if !ctx.uri_changed {
            break;
        }
        if let Some(o) = count_uri_change(ctx, env, UriChange::Rewrite) {
            return o;
        }
    }
    content(ctx, env).await
}

/// Location selection and what NGINX checks right after it: `internal`,
/// `client_max_body_size`, the automatic 301 to `URI/`.
fn find_config(ctx: &mut RequestCtx, env: &Env<'_>) -> Option<Outcome> {
    let server = Arc::clone(&ctx.server);
    // Lent out while the regexes run (they write captures, not the URI).
    let uri = std::mem::take(&mut ctx.uri);
    let found = server
        .locations
        .find(&uri, &mut |re| ctx.regex_exec(re, &uri));
    ctx.uri = uri;
    ctx.valid_location = true;
    let (loc, slash) = match found {
        Found::Location(l) => (l.unwrap_or_else(|| Arc::clone(&server.base)), false),
        Found::Redirect(l) => (l, true),
    };
    ctx.loc = loc;
    // `limit_except`: a method outside its list runs under its block.
    let method = match ctx.method {
        Method::Get => "GET",
        Method::Head => "HEAD",
        Method::Post => "POST",
        _ => ctx.head.method(),
    };
    if let Some(l) = ctx
        .loc
        .limit_except
        .as_ref()
        .and_then(|le| le.for_method(method))
    {
        ctx.loc = Arc::clone(l);
    }
    if ctx.loc.internal && !ctx.internal {
        return Some(Outcome::Status(404));
    }
    if let Some(b) = env.body {
        b.borrow_mut().set_timeout(ctx.loc.s.client_body_timeout);
    }
    let max_body = ctx.loc.s.client_max_body_size;
    if let Some(len) = ctx.head.content_length {
        if max_body != 0 && len > max_body {
            ctx.log(env.log).error(format_args!(
                "client intended to send too large body: {len} bytes"
            ));
            return Some(Outcome::Status(413));
        }
    }
    if slash {
        let mut target = crate::http::uri::escape_for_location(&ctx.uri);
        target.push('/');
        if let Some(a) = &ctx.args {
            target.push('?');
            target.push_str(a);
        }
        ctx.test_expect();
        return Some(Outcome::Special(redirect(ctx, 301, &target)));
    }
    None
}

/// The access phases, `try_files` and `mirror`, then the location's
/// content handler.
async fn content(ctx: &mut RequestCtx, env: &Env<'_>) -> Outcome {
    let loc = Arc::clone(&ctx.loc);
    // NGINX's preaccess and access phases: realip (the location's, when
    // the server's did not apply), limit_req, limit_conn, then
    // allow/deny, auth_basic and auth_request (`satisfy`); a subrequest
    // has none of them but realip (NGINX's run for the main request).
    realip::run(ctx, &loc.s);
    if !ctx.subrequest {
        if let Some(o) = access::check(ctx, env).await {
            return o;
        }
    }
    // The precontent phase: `try_files`, then `mirror`.
    if let Some(list) = loc.s.try_files.clone() {
        if let Some(o) = static_file::try_files(ctx, env, &list).await {
            return o;
        }
    }
    if !ctx.loc.s.mirrors.is_empty() && !ctx.subrequest {
        if let Some(o) = mirror::start(ctx, env).await {
            return o;
        }
    }
    handler(ctx, env).await
}

/// The location's content handler alone: what a slice's subrequest runs
/// ([`slice`]; NGINX's cloned subrequests start at the content phase).
pub(crate) async fn handler(ctx: &mut RequestCtx, env: &Env<'_>) -> Outcome {
    let loc = Arc::clone(&ctx.loc);
    match loc.handler {
        // NGINX's content phase for files: `gzip_static`, which may
        // decline, then the static and index handlers.
        // With `dav_methods`, WebDAV's step first for the methods it
        // lists (NGINX's DAV handler runs before the static one).
        Handler::Static => {
            if loc.s.dav.methods != 0 {
                if let Content::Answered(o) = dav::serve(ctx, env).await {
                    return o;
                }
            }
            match gzip_static::serve(ctx, env).await {
                Content::Answered(o) => o,
                Content::Declined => static_file::serve(ctx, env).await,
            }
        }
        Handler::StubStatus => stub_status::serve(ctx),
        Handler::Metrics(ref groups) => metrics::serve(ctx, env, groups),
        Handler::Status(ref groups) => status_page::serve(ctx, env, groups),
        Handler::EmptyGif => empty_gif::serve(ctx),
        // The media modules decline a directory or a URI ending in `/`;
        // the static and index handlers answer it then.
        Handler::Flv => match flv::serve(ctx, env).await {
            Content::Answered(o) => o,
            Content::Declined => static_file::serve(ctx, env).await,
        },
        Handler::Mp4 => match Box::pin(mp4::serve(ctx, env)).await {
            Content::Answered(o) => o,
            Content::Declined => static_file::serve(ctx, env).await,
        },
        // Boxed: the proxy's state is large, and a request's future is
        // allocated and moved whole (`http::connection`); a static file's
        // request should not carry the proxy's size.
        Handler::Proxy(ref pass) => Box::pin(proxy::serve(ctx, env, pass)).await,
        Handler::Grpc(ref pass) => Box::pin(grpc::serve(ctx, env, pass)).await,
    }
}
