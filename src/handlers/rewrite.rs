//! Runs the rewrite module's program of a server or location
//! (`config::rewrite`) as NGINX's script engine does: instructions in
//! order, `if` blocks entered when their condition holds (switching to the
//! block's configuration), `rewrite` replacing the URI (and arguments) or
//! answering with a redirect, `return` answering, `break` and the `last`
//! and `break` flags stopping. The caller runs the phases around it: a
//! changed URI sends it back to location selection.
//!
//! `if (-f …)` and the other file tests `stat` through the disk layer, as
//! every file access does: the loop never waits on the disk.

use std::path::Path;
use std::sync::Arc;

use super::disk_io;
use super::file;
use super::outcome::{redirect, Env, Outcome};
use crate::config::rewrite::{Cond, FileTest, Op, Rewrite, RewriteFlag};
use crate::config::Handler;
use crate::config::Return;
use crate::disk::FileKind;
use crate::http::context::RequestCtx;
use crate::http::response::Response;
use crate::log::Level;
use crate::vars::regex::{Captures, Regex};

/// Runs `script`; `Some` when it answered the request (`return`, a
/// redirect, an error), `None` to go on with the request.
pub async fn run(ctx: &mut RequestCtx, env: &Env<'_>, script: &Arc<Vec<Op>>) -> Option<Outcome> {
    if script.is_empty() {
        return None;
    }
    let script = Arc::clone(script);
    let r = run_ops(ctx, env, &script).await;
    warn_unset(ctx, env);
    r
}

/// Logs NGINX's `using uninitialized "NAME" variable` for each `set`
/// variable read before it was set.
pub fn warn_unset(ctx: &RequestCtx, env: &Env<'_>) {
    let read = std::mem::take(&mut *ctx.unset_read.borrow_mut());
    for v in read {
        ctx.log(env.log).line(
            Level::Warn,
            format_args!("using uninitialized \"{}\" variable", v.name),
        );
    }
}

async fn run_ops(ctx: &mut RequestCtx, env: &Env<'_>, script: &[Op]) -> Option<Outcome> {
    let mut stack = vec![script.iter()];
    while let Some(top) = stack.last_mut() {
        let Some(op) = top.next() else {
            stack.pop();
            continue;
        };
        match op {
            Op::Set(var, value) => {
                let v = value.render(ctx);
                ctx.set_slot(var.index, v);
            }
            Op::SetArgs(value) => {
                let v = value.render(ctx);
                ctx.args = Some(v).filter(|a| !a.is_empty());
            }
            Op::SetLimitRate(value) => {
                // NGINX's `ngx_http_variable_request_set_size`: a value
                // that is not a size is logged and changes nothing.
                let v = value.render(ctx);
                match crate::config::value::parse_size(&v) {
                    Some(n) => ctx.limit_rate = Some(n),
                    None => ctx.log(env.log).error(format_args!("invalid size \"{v}\"")),
                }
            }
            Op::Break => {
                // A URI a `rewrite` changed stays in this location, whose
                // prefix it may no longer start with.
                if ctx.uri_changed {
                    ctx.valid_location = false;
                }
                ctx.uri_changed = false;
                return None;
            }
            Op::Return(r) => return Some(do_return(ctx, r)),
            Op::Rewrite(rw) => match rewrite(ctx, env, rw) {
                Flow::Next => {}
                Flow::Stop => return None,
                Flow::Answer(o) => return Some(*o),
            },
            Op::If(block) => {
                if test(ctx, env, &block.cond).await {
                    if let Some(l) = &block.loc {
                        if lost_upstream(&ctx.loc.handler, &l.handler) {
                            ctx.log(env.log)
                                .line(Level::Alert, format_args!("no upstream configuration"));
                            return Some(Outcome::Status(500));
                        }
                        ctx.loc = Arc::clone(l);
                    }
                    stack.push(block.body.iter());
                }
            }
        }
    }
    None
}

/// An `if` block without `proxy_pass` entered after one with it: NGINX
/// keeps the content handler a block set (a location without one has
/// none of its own), so the proxy runs with the new block's settings, which
/// name no upstream, and answers 500 with this alert.
fn lost_upstream(from: &Handler, to: &Handler) -> bool {
    matches!(from, Handler::Proxy(_) | Handler::Grpc(_)) && matches!(to, Handler::Static)
}

enum Flow {
    Next,
    Stop,
    Answer(Box<Outcome>),
}

fn notice(ctx: &RequestCtx, env: &Env<'_>, msg: std::fmt::Arguments<'_>) {
    if ctx.loc.s.rewrite_log {
        ctx.log(env.log).line(Level::Notice, msg);
    }
}

/// Matches `re` against `subject` for `rewrite` and `if`: a failed match
/// clears the captures, as NGINX's script engine does.
fn script_match(ctx: &mut RequestCtx, env: &Env<'_>, re: &Regex, subject: &str) -> bool {
    let hit = ctx.regex_exec(re, subject);
    if hit {
        notice(
            ctx,
            env,
            format_args!("\"{}\" matches \"{subject}\"", re.raw()),
        );
    } else {
        notice(
            ctx,
            env,
            format_args!("\"{}\" does not match \"{subject}\"", re.raw()),
        );
        ctx.captures = Captures::default();
    }
    hit
}

fn rewrite(ctx: &mut RequestCtx, env: &Env<'_>, rw: &Rewrite) -> Flow {
    // Most rewrites do not match: find out before copying the URI.
    if !rw.regex.is_match(&ctx.uri) {
        let re = rw.regex.raw();
        notice(
            ctx,
            env,
            format_args!("\"{re}\" does not match \"{}\"", ctx.uri),
        );
        ctx.captures = Captures::default();
        return Flow::Next;
    }
    let uri = ctx.uri.clone();
    if !script_match(ctx, env, &rw.regex, &uri) {
        return Flow::Next;
    }
    let redirect = matches!(rw.flag, RewriteFlag::Redirect(_));
    let mut value = replacement(ctx, rw, redirect);
    let old_args = ctx.args.clone().filter(|a| !a.is_empty());
    if let RewriteFlag::Redirect(code) = rw.flag {
        value = crate::http::uri::unescape_redirect(&value);
        if let (true, Some(a)) = (rw.add_args, &old_args) {
            value.push(if rw.has_args { '&' } else { '?' });
            value.push_str(a);
        }
        notice(ctx, env, format_args!("rewritten redirect: \"{value}\""));
        ctx.test_expect();
        return Flow::Answer(Box::new(Outcome::Special(super::outcome::redirect(
            ctx, code, &value,
        ))));
    }
    let new_uri = match value.split_once('?').filter(|_| rw.has_args) {
        Some((u, a)) => {
            let mut args = a.to_string();
            if let (true, Some(old)) = (rw.add_args, &old_args) {
                args.push('&');
                args.push_str(old);
            }
            ctx.args = Some(args).filter(|a| !a.is_empty());
            u.to_string()
        }
        None => {
            if !rw.add_args {
                ctx.args = None;
            }
            value
        }
    };
    notice(
        ctx,
        env,
        format_args!(
            "rewritten data: \"{new_uri}\", args: \"{}\"",
            ctx.args.as_deref().unwrap_or("")
        ),
    );
    if new_uri.is_empty() {
        ctx.log(env.log)
            .error(format_args!("the rewritten URI has a zero length"));
        return Flow::Answer(Box::new(Outcome::Status(500)));
    }
    ctx.uri = new_uri;
    ctx.internal = true;
    ctx.uri_changed = rw.flag != RewriteFlag::Break;
    if rw.flag == RewriteFlag::Break {
        ctx.valid_location = false;
    }
    match rw.flag {
        RewriteFlag::Continue => Flow::Next,
        _ => Flow::Stop,
    }
}

/// A `rewrite`'s replacement rendered as NGINX's script engine does: when
/// the request's URI came escaped (`%` or `+` in it: NGINX's
/// `quoted_uri`, `plus_in_uri`), a regex capture is escaped for a query
/// string in the arguments (after the replacement's `?`), and anywhere in
/// a redirect's target, which is then unescaped as a whole
/// (`ngx_http_script_copy_capture_code`).
fn replacement(ctx: &RequestCtx, rw: &Rewrite, redirect: bool) -> String {
    let path = crate::http::uri::split_target(ctx.head.target()).0;
    let quoted = path.contains(['%', '+']);
    let mut out = String::new();
    rw.replacement.render_with(ctx, &mut out, &|v, var, out| {
        let capture = matches!(var, crate::vars::template::Var::Capture(_));
        if quoted && capture && (redirect || out.contains('?')) {
            out.push_str(&crate::http::uri::escape_args(v));
        } else {
            out.push_str(v);
        }
    });
    out
}

async fn test(ctx: &mut RequestCtx, env: &Env<'_>, cond: &Cond) -> bool {
    match cond {
        Cond::Value(t) => {
            let v = t.render(ctx);
            !(v.is_empty() || v == "0")
        }
        Cond::Equal(a, b, negate) => (a.render(ctx) == b.render(ctx)) != *negate,
        Cond::Match(subject, re, negate) => {
            let s = subject.render(ctx);
            script_match(ctx, env, re, &s) != *negate
        }
        Cond::File(path, t, negate) => {
            let path = path.render(ctx);
            file_test(ctx, env, &path, *t).await != *negate
        }
    }
}

/// `-f`, `-d`, `-e`, `-x` on `path`, through the disk layer (following
/// symlinks unless `disable_symlinks`, as NGINX's open file cache does).
async fn file_test(ctx: &RequestCtx, env: &Env<'_>, path: &str, t: FileTest) -> bool {
    let Ok(io) = disk_io::route(ctx, env) else {
        return false;
    };
    let meta = match io
        .stat(Path::new(path), &disk_io::path_rules(ctx, path))
        .await
    {
        Ok(m) => m,
        Err(_) => return false,
    };
    match t {
        FileTest::File => meta.kind == FileKind::Regular,
        FileTest::Dir => meta.kind == FileKind::Directory,
        FileTest::Exists => true,
        FileTest::Exec => meta.exec,
    }
}

/// The `return` directive's answer: 444 closes, a redirect with a URL,
/// an error status for its page, or a body typed by the URI.
fn do_return(ctx: &mut RequestCtx, r: &Return) -> Outcome {
    if r.code == 444 {
        return Outcome::Close;
    }
    let text = r.text.as_ref().map(|t| t.render(ctx));
    // NGINX's send_response discards the body first.
    if r.code < 400 || text.is_some() {
        ctx.test_expect();
    }
    match (r.code, text) {
        (301 | 302 | 303 | 307 | 308, Some(url)) => Outcome::Special(redirect(ctx, r.code, &url)),
        (301 | 302 | 303 | 307 | 308 | 400.., None) => Outcome::Status(r.code),
        // A body (possibly empty), typed by the URI's extension as NGINX's
        // send_response does.
        (code, body) => {
            let s = &ctx.loc.s;
            let ct = file::content_type(&s.types, &s.default_type, &ctx.uri);
            let body = body.unwrap_or_default().into_bytes();
            Outcome::Send(Response::bytes(code, &ct, body))
        }
    }
}
