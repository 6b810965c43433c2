//! What every handler shares, below them all: the [`Outcome`] of a pass
//! through a location (and a content step's [`Content`]), the [`Env`] a
//! handler runs in, and the redirect
//! NGINX builds ([`redirect`], [`absolute_location`]). `handlers/mod.rs`
//! (the dispatcher) re-exports them; the handlers import them from here,
//! so no handler imports its dispatcher.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use crate::cache::CacheSet;
use crate::disk::Disk;
use crate::http::body::ClientBody;
use crate::http::context::RequestCtx;
use crate::http::response::Response;
use crate::log::ErrorLog;

/// What one pass through a location produced.
pub enum Outcome {
    /// A response the handler sends itself (a file, `return` text): an
    /// `error_page` status replaces its own, as NGINX's `err_status` does.
    Send(Response),
    /// A response built like NGINX's special responses (a redirect): its
    /// status stands.
    Special(Response),
    /// An error status to turn into a page (after `error_page`).
    Status(u16),
    /// Restart location selection with a new URI.
    Internal(String, Option<String>),
    /// Continue in the named location (`@name`).
    Named(String),
    /// Close the connection without a response (`return 444`).
    Close,
}

/// What a content step did: NGINX's content-phase handlers answer or
/// return `NGX_DECLINED` so the next one runs (`gzip_static` before the
/// static handler).
// As large as an `Outcome`, which every phase returns by value; a box
// would cost an allocation per answered step.
#[allow(clippy::large_enum_variant)]
pub enum Content {
    /// The step answered.
    Answered(Outcome),
    /// The step has nothing to send; the next one runs.
    Declined,
}

/// Everything a handler needs besides the request.
pub struct Env<'a> {
    /// The worker's disk layer.
    pub disk: &'a Rc<Disk>,
    /// The error log.
    pub log: &'a ErrorLog,
    /// The proxy cache zones of this generation (`proxy_cache NAME`).
    pub caches: &'a Arc<CacheSet>,
    /// The request body, for a handler that forwards it (the proxy); what
    /// it leaves unread the connection discards.
    pub body: Option<&'a RefCell<ClientBody<'a>>>,
}

impl Env<'_> {
    /// Resolves when the client closed its HTTP/1.x connection (never on
    /// HTTP/2 or HTTP/3, nor with no body lent): for a request that waits
    /// (a `limit_req` delay, an upstream's answer) to end with 499, as
    /// NGINX's `ngx_http_test_reading` and upstream connection check.
    pub async fn client_gone(&self) {
        // The socket outlives the body's borrow, released at once.
        let socket = self
            .body
            .and_then(|b| b.try_borrow().ok().and_then(|b| b.socket()));
        match socket {
            Some(s) => s.closed_by_peer().await,
            None => std::future::pending().await,
        }
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
        match ctx.head.host() {
            Some(_) => ctx.host().to_string(),
            None => ctx.conn.local.ip().to_string(),
        }
    };
    let port = ctx.conn.local.port();
    let (scheme, default_port) = match ctx.conn.tls {
        Some(_) => ("https", 443),
        None => ("http", 80),
    };
    // A UNIX-domain socket's port is 0: none is written, as NGINX.
    if s.port_in_redirect && port != default_port && port != 0 {
        format!("{scheme}://{host}:{port}{target}")
    } else {
        format!("{scheme}://{host}{target}")
    }
}

/// A redirect response with NGINX's page.
///
/// NGINX writes a Location it made absolute itself before `Connection`, and
/// one configured as a full URL among the other headers after it.
pub fn redirect(ctx: &RequestCtx, status: u16, target: &str) -> Response {
    let msie = ctx
        .header("user-agent")
        .is_some_and(crate::http::user_agent::msie);
    if matches!(status, 301 | 302) && ctx.loc.s.msie_refresh && msie {
        return refresh_page(target);
    }
    let mut r = Response::special(status, ctx.loc.s.server_tokens);
    if target.starts_with('/') {
        r.location = Some(absolute_location(ctx, target));
    } else {
        r.headers.push(("Location".into(), target.to_string()));
    }
    r
}

/// `msie_refresh`: NGINX's `ngx_http_send_refresh`, a 200 page whose
/// `Refresh` goes to `target` (escaped as `NGX_ESCAPE_REFRESH`: space,
/// quotes and bytes outside 0x20–0x7e), in place of the redirect.
fn refresh_page(target: &str) -> Response {
    let mut page = String::from("<html><head><meta http-equiv=\"Refresh\" content=\"0; URL=");
    for b in target.bytes() {
        if matches!(b, b' ' | b'"' | b'\'') || !(0x20..0x7f).contains(&b) {
            page.push_str(&format!("%{b:02X}"));
        } else {
            page.push(b as char);
        }
    }
    page.push_str("\"></head><body></body></html>\r\n");
    Response::bytes(200, "text/html", page.into_bytes())
}

/// A target's URI and its arguments (after `?`).
pub(super) fn split_args(target: &str) -> (String, Option<String>) {
    match target.split_once('?') {
        Some((u, a)) => (u.to_string(), Some(a.to_string())),
        None => (target.to_string(), None),
    }
}
