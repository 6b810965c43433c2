//! NGINX's `ngx_http_auth_request_module`: `auth_request URI` asks a
//! subrequest ([`super::subrequest`]) to URI — with the request's header
//! lines and no body — whether the request may go on, as the last of the
//! access checks (after `allow`/`deny` and `auth_basic`, under `satisfy`;
//! `handlers::access`). The subrequest's status decides: 2xx lets the
//! request through, 401 and 403 are the answer (a 401 with the
//! subrequest's `WWW-Authenticate` lines), anything else is a 500 with
//! NGINX's `auth request unexpected status: N while sending to client`
//! line. Whatever the status,
//! `auth_request_set` values are rendered first in the subrequest's
//! context (its `$upstream_http_*`, `$sent_http_*`, `$upstream_status`)
//! into the main request's variables, so they last across its internal
//! redirects and reach the error page too.

use super::outcome::Env;
use super::subrequest::Subrequest;
use crate::http::context::RequestCtx;
use crate::log::Level;

/// What the subrequest decided.
pub enum Verdict {
    /// A 2xx: go on.
    Allowed,
    /// 403.
    Forbidden,
    /// 401 with these `WWW-Authenticate` values (possibly none).
    Unauthorized(Vec<String>),
    /// Any other status: 500, logged.
    Failed,
}

/// Runs the `auth_request` subrequest of the location in effect (which
/// has one).
pub async fn check(ctx: &mut RequestCtx, env: &Env<'_>, uri: &str) -> Verdict {
    let sub = Subrequest::of(ctx, env);
    let answer = sub.run(uri.to_string(), None).await;
    for (var, value) in ctx.loc.s.auth_request_set.clone().iter() {
        let v = value.render(&answer.ctx);
        match var.name.as_str() {
            // The built-ins with a setter (`vars::families::builtin_setter`): no
            // `set` or block declares a variable of these names.
            "args" => ctx.args = Some(v).filter(|a| !a.is_empty()),
            "limit_rate" => {
                if let Some(n) = crate::config::value::parse_size(&v) {
                    ctx.limit_rate = Some(n)
                }
            }
            _ => ctx.set_slot(var.index, v),
        }
    }
    match answer.status() {
        200..=299 => Verdict::Allowed,
        403 => Verdict::Forbidden,
        401 => {
            // The subrequest's own lines, else its upstream's (NGINX looks
            // at `sr->headers_out`, then `sr->upstream->headers_in`).
            let own = answer.response.iter().flat_map(|r| r.headers.iter());
            let upstream = answer.ctx.upstream.iter().flat_map(|u| u.headers.iter());
            let mut lines: Vec<String> = own
                .filter(|(n, _)| n.eq_ignore_ascii_case("www-authenticate"))
                .map(|(_, v)| v.clone())
                .collect();
            if lines.is_empty() {
                lines = upstream
                    .filter(|(n, _)| n.eq_ignore_ascii_case("www-authenticate"))
                    .map(|(_, v)| v.to_string())
                    .collect();
            }
            Verdict::Unauthorized(lines)
        }
        code => {
            // NGINX's log action then is the subrequest's last one.
            ctx.log(env.log).line(
                Level::Error,
                format_args!("auth request unexpected status: {code} while sending to client"),
            );
            Verdict::Failed
        }
    }
}
