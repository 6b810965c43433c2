//! The userid filter (`ngx_http_userid_filter_module`'s header filter),
//! in the chain after the headers filter, as NGINX orders them: for the
//! main request of a location with `userid v1` or `on`, makes the uid
//! (`http::userid`, which `$uid_set` may have done already) and adds its
//! `Set-Cookie` line — after `add_header`'s lines — and `P3P` when
//! `userid_p3p` is set; the lines reading the cookie left go to the
//! error log here.

use super::outcome::Env;
use crate::config::userid_conf::UseridMode;
use crate::http::context::RequestCtx;
use crate::http::response::Response;

/// The header filter.
pub fn header_filter(ctx: &RequestCtx, env: &Env<'_>, resp: &mut Response) {
    if ctx.loc.s.userid.mode >= UseridMode::V1 {
        ctx.userid_create();
        if let Some(cookie) = ctx.userid_cookie() {
            resp.headers.push(("Set-Cookie".into(), cookie));
            let p3p = &ctx.loc.s.userid.p3p;
            if !p3p.is_empty() {
                resp.headers.push(("P3P".into(), p3p.clone()));
            }
        }
    }
    for (level, line) in ctx.userid_log_lines() {
        ctx.log(env.log).line(level, format_args!("{line}"));
    }
}
