//! NGINX's `post_action URI|@name` (`ngx_http_post_action`): once the
//! main request's response is sent, the request runs again at URI (without its arguments) or in
//! the named location, with its method, and what that
//! answers is thrown away (NGINX sets `header_only` and HTTP/0.9, so
//! nothing more reaches the client). The location that decides is the
//! one the response came from (after internal redirects), as NGINX reads
//! `post_action` from the request's final location.
//!
//! porter makes it a [`Subrequest`] that keeps the method, left unstarted
//! in `RequestCtx::post_action`: the connection runs it after the
//! response is written and before the access log line, as NGINX logs the
//! request when the post action ends; a keep-alive client's next request
//! waits for it, as in NGINX. Unlike NGINX's, it runs no access phase
//! (porter's subrequests do not) and the access log line is the main
//! request's (NGINX logs the request in the post action's location).

use super::subrequest::Subrequest;
use super::Env;
use crate::http::context::RequestCtx;

/// Arms the location's `post_action` on a main request whose response is
/// ready; nothing when it has none.
pub fn arm(ctx: &mut RequestCtx, env: &Env<'_>) {
    let Some(target) = ctx.loc.s.post_action.clone() else {
        return;
    };
    let sub = Subrequest::of(ctx, env).same_method();
    ctx.post_action = Some(Box::pin(async move {
        // NGINX's internal redirect to a URI drops the arguments; a named
        // location keeps the request's URI and arguments.
        let answer = match target.starts_with('@') {
            true => sub.run_named(target.to_string()).await,
            false => sub.run(target.to_string(), None).await,
        };
        // The response is dropped: an upstream's read ends with it.
        drop(answer);
    }));
}
