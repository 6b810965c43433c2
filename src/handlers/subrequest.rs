//! Subrequests, as NGINX's `ngx_http_subrequest`: a request the server
//! makes to itself on behalf of the one in hand, answered by porter's
//! normal path (rewrite, locations, `try_files`, the content handler —
//! proxy, static files through the disk layer, `return` — `error_page`
//! and internal redirects), never by a copy of a handler.
//!
//! A [`Subrequest`] is what a subrequest copies from its main request (the
//! head, method, URI, location, captures) and the worker's parts a handler
//! needs, owned, so a background subrequest (`mirror`) may outlive the
//! main request's handler. Two ways in:
//!
//! - [`Subrequest::run`]: a new URI from the server's rewrite phase on, as
//!   NGINX's subrequests to a URI (`auth_request`, `mirror`, SSI's
//!   `include`). Access checks and header filters are the main request's
//!   only (`RequestCtx::subrequest`) but SSI's, which runs an included
//!   page's commands: NGINX skips its access phase and the not-modified
//!   and range filters for subrequests.
//! - [`Subrequest::clone_ctx`]: the same URI and location at the content
//!   phase (a slice's subrequest, NGINX's cloned subrequest).
//!
//! A subrequest is a future the main request awaits (or the worker's loop
//! runs in the background): it never blocks the loop. Its variables are
//! its own; what it answered is in the returned [`Answer`].

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;

use super::outcome::Env;
use crate::cache::CacheSet;
use crate::config::{LocationConf, ServerConf};
use crate::disk::Disk;
use crate::http::body::ClientBody;
use crate::http::context::{ConnInfo, Method, RequestCtx};
use crate::http::request::RequestHead;
use crate::http::response::Response;
use crate::log::ErrorLog;
use crate::vars::regex::Captures;

/// What a subrequest copies from the main request, and the worker's parts
/// a handler needs (an [`Env`] of its own).
pub struct Subrequest {
    conn: ConnInfo,
    requests: u64,
    head: RequestHead,
    method: Method,
    uri: String,
    args: Option<String>,
    server: Arc<ServerConf>,
    /// The main request's location when the subrequest was made.
    pub loc: Arc<LocationConf>,
    captures: Captures,
    /// The worker's disk layer.
    pub disk: Rc<Disk>,
    /// The error log.
    pub log: ErrorLog,
    /// The proxy cache zones.
    pub caches: Arc<CacheSet>,
    /// The request body the subrequest is given (`mirror_request_body`),
    /// read whole by the main request; none otherwise.
    body: Option<Rc<Vec<u8>>>,
    /// [`Subrequest::run`] keeps the main request's method.
    keep_method: bool,
    /// What a body filter shares with the main request (SSI's state).
    filter_state: Option<Rc<dyn std::any::Any>>,
}

/// What a subrequest to a URI answered.
pub struct Answer {
    /// The subrequest's own state after it ran (its `$upstream_*`, its
    /// `$sent_http_*`), for `auth_request_set`.
    pub ctx: RequestCtx,
    /// Its response (`None`: it would have closed the connection).
    pub response: Option<Response>,
}

impl Answer {
    /// The subrequest's status (NGINX's `sr->headers_out.status`); a
    /// subrequest that closed without answering counts as 0.
    pub fn status(&self) -> u16 {
        self.response.as_ref().map_or(0, |r| r.status)
    }
}

/// A subrequest in flight.
pub type SubFuture<'s> = Pin<Box<dyn Future<Output = Answer> + 's>>;

impl Subrequest {
    /// A subrequest of `ctx`, at its current URI and location.
    pub fn of(ctx: &RequestCtx, env: &Env<'_>) -> Subrequest {
        Subrequest {
            conn: ctx.conn.clone(),
            requests: ctx.conn_requests,
            head: ctx.head.clone(),
            method: ctx.method,
            uri: ctx.uri.clone(),
            args: ctx.args.clone(),
            server: Arc::clone(&ctx.server),
            loc: Arc::clone(&ctx.loc),
            captures: ctx.captures.clone(),
            disk: Rc::clone(env.disk),
            log: env.log.clone(),
            caches: Arc::clone(env.caches),
            body: None,
            keep_method: false,
            filter_state: ctx.filter_state.clone(),
        }
    }

    /// Keeps the main request's method (`mirror`); a subrequest is
    /// otherwise a GET, whatever the main request's method (HEAD too), as
    /// NGINX's `ngx_http_subrequest` makes it.
    pub fn same_method(mut self) -> Subrequest {
        self.keep_method = true;
        self
    }

    /// Gives the subrequest `state` as its `RequestCtx::filter_state` (an
    /// SSI include's nesting), in place of the main request's.
    pub fn with_filter_state(mut self, state: Rc<dyn std::any::Any>) -> Subrequest {
        self.filter_state = Some(state);
        self
    }

    /// Gives the subrequest `body` as its request body.
    pub fn with_body(mut self, body: Rc<Vec<u8>>) -> Subrequest {
        self.body = Some(body);
        self
    }

    /// The subrequest's context: the main request's head and method,
    /// variables of its own, internal (it may enter `internal`
    /// locations), `100 Continue` settled.
    fn ctx(&self) -> RequestCtx {
        let mut c = RequestCtx::new(&self.conn, self.requests, self.head.clone(), &self.server);
        c.method = self.method;
        c.internal = true;
        c.subrequest = true;
        c.expect_tested = true;
        c.filter_state = self.filter_state.clone();
        c
    }

    /// A copy of the main request at its URI, location and captures, for
    /// its content handler alone (a slice's subrequest).
    pub fn clone_ctx(&self) -> RequestCtx {
        let mut c = self.ctx();
        c.uri = self.uri.clone();
        c.args = self.args.clone();
        c.loc = Arc::clone(&self.loc);
        c.captures = self.captures.clone();
        c
    }

    /// The environment of a subrequest without a body.
    pub fn env(&self) -> Env<'_> {
        Env {
            disk: &self.disk,
            log: &self.log,
            caches: &self.caches,
            body: None,
        }
    }

    /// Runs the subrequest at `uri` (with `args`) from the server's
    /// rewrite phase to its response, through `error_page` and internal
    /// redirects as any request.
    pub fn run(&self, uri: String, args: Option<String>) -> SubFuture<'_> {
        Box::pin(self.answer(uri, args, None))
    }

    /// Runs the subrequest in the named location `name` (`@...`) at the
    /// main request's URI and arguments (`post_action @name`).
    pub fn run_named(&self, name: String) -> SubFuture<'_> {
        Box::pin(self.answer(self.uri.clone(), self.args.clone(), Some(name)))
    }

    async fn answer(&self, uri: String, args: Option<String>, named: Option<String>) -> Answer {
        let mut ctx = self.ctx();
        ctx.uri = uri;
        ctx.args = args;
        if !self.keep_method {
            ctx.method = Method::Get;
        }
        let body = self
            .body
            .as_ref()
            .map(|b| RefCell::new(ClientBody::memory(b.to_vec())));
        let env = Env {
            disk: &self.disk,
            log: &self.log,
            caches: &self.caches,
            body: body.as_ref(),
        };
        let response = super::serve_subrequest(&mut ctx, &env, named).await;
        if let Some(r) = &response {
            ctx.status = r.status;
            ctx.sent_headers = r.sent_headers();
        }
        if ctx.loc.s.log_subrequest {
            // NGINX logs a subrequest only under `log_subrequest on`,
            // in the access logs of the location it ended in.
            let cache = ctx.loc.s.open_log_file_cache.as_ref();
            for l in ctx.loc.s.access_log.iter() {
                l.write(&ctx, cache);
            }
        }
        Answer { ctx, response }
    }
}
