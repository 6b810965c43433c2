//! The preaccess and access phases, as NGINX runs them between the
//! location's `return` and `try_files`: `limit_req` (which may wait on a
//! timer of the loop, never sleeping the thread), `limit_conn`, then the
//! access checks in NGINX's order — `allow`/`deny`, then `auth_basic` —
//! combined by `satisfy all` (every check that applies must pass) or
//! `satisfy any` (one passing check is enough; a 401 wins over a 403).
//! The limits run once per request (internal redirects do not count it
//! again); the access checks run in each location the request reaches.
//!
//! The htpasswd file is read through the disk layer on every request, as
//! NGINX reads it (a change is seen at once). Hashes that cost more than a
//! SHA-1 (`$apr1$`, `crypt()`) are checked on the hasher pool, a small
//! bounded pool of its own, so a bcrypt hash does not stall the loop.

use std::io;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::auth_request::Verdict;
use super::disk_io;
use super::outcome::{Env, Outcome};
use crate::access::limit_conn::ConnVerdict;
use crate::access::limit_req::{self, LimitReq, ReqVerdict};
use crate::access::{basic, htpasswd, rules};
use crate::disk::pool::{Lane, PoolSpec, ThreadPool};
use crate::disk::PathRules;
use crate::http::context::RequestCtx;
use crate::log::Level;

/// What one access check decided (NGINX's handler return codes).
enum Check {
    /// It does not apply here.
    Declined,
    /// It lets the request through.
    Ok,
    /// 403.
    Forbidden,
    /// 401 with these `WWW-Authenticate` values.
    Unauthorized(Vec<String>),
    /// Any other status (500 for a failure).
    Fail(u16),
}

/// Runs the limits and access checks of the location in effect; `Some`
/// when the request stops here. A location without any costs one test,
/// and the phases' state (a file read, a hash, a delay) lives in a box of
/// its own only when they run, so every request's future stays small.
pub async fn check(ctx: &mut RequestCtx, env: &Env<'_>) -> Option<Outcome> {
    let s = &ctx.loc.s;
    if s.limit_req.is_empty()
        && s.limit_conn.is_empty()
        && s.access_rules.is_empty()
        && s.auth_basic.is_none()
        && s.auth_request.is_none()
    {
        return None;
    }
    Box::pin(run_phases(ctx, env)).await
}

async fn run_phases(ctx: &mut RequestCtx, env: &Env<'_>) -> Option<Outcome> {
    if let Some(o) = limit_req(ctx, env).await {
        return Some(o);
    }
    if let Some(o) = limit_conn(ctx, env) {
        return Some(o);
    }
    access(ctx, env).await
}

/// NGINX logs a delay one level below the limit's level (`info` stays).
fn delay_level(level: Level) -> Level {
    match level {
        Level::Error => Level::Warn,
        Level::Warn => Level::Notice,
        _ => Level::Info,
    }
}

async fn limit_req(ctx: &mut RequestCtx, env: &Env<'_>) -> Option<Outcome> {
    if ctx.limits.limit_req_status.is_some() || ctx.loc.s.limit_req.is_empty() {
        return None;
    }
    let s = &ctx.loc.s;
    let limits = Arc::clone(&s.limit_req);
    let (level, dry, code) = (
        s.limit_req_log_level,
        s.limit_req_dry_run,
        s.limit_req_status,
    );
    let dry_text = if dry { ", dry run" } else { "" };
    let keys = req_keys(ctx, env, &limits);
    let zone = |i: usize| limits[i].zone.name.as_str();
    match limit_req::check(&limits, &keys) {
        ReqVerdict::Declined => None,
        ReqVerdict::Passed => {
            ctx.limits.limit_req_status = Some("PASSED");
            None
        }
        ReqVerdict::Rejected { excess, limit } => {
            ctx.log(env.log).line(
                level,
                format_args!(
                    "limiting requests{dry_text}, excess: {}.{:03} by zone \"{}\"",
                    excess / 1000,
                    excess % 1000,
                    zone(limit)
                ),
            );
            rejected_req(ctx, dry, code)
        }
        ReqVerdict::NoMemory { limit } => {
            env.log.log(
                Level::Alert,
                format_args!(
                    "could not allocate node in limit_req zone \"{}\"",
                    zone(limit)
                ),
            );
            rejected_req(ctx, dry, code)
        }
        ReqVerdict::Delayed { ms, excess, limit } => {
            ctx.log(env.log).line(
                delay_level(level),
                format_args!(
                    "delaying request{dry_text}, excess: {}.{:03}, by zone \"{}\"",
                    excess / 1000,
                    excess % 1000,
                    zone(limit)
                ),
            );
            if dry {
                ctx.limits.limit_req_status = Some("DELAYED_DRY_RUN");
            } else {
                ctx.limits.limit_req_status = Some("DELAYED");
                // A client that closes meanwhile ends the request (499).
                let gone = tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(ms)) => false,
                    _ = env.client_gone() => true,
                };
                if gone {
                    return Some(client_closed(ctx, env));
                }
            }
            None
        }
    }
}

/// Each `limit_req` zone's key for this request (None: the limit does not
/// apply; a key over 65535 bytes is logged and skipped, as NGINX does).
fn req_keys(ctx: &RequestCtx, env: &Env<'_>, limits: &[LimitReq]) -> Vec<Option<Vec<u8>>> {
    let mut keys = Vec::with_capacity(limits.len());
    for l in limits.iter() {
        let Some(def) = l.zone.def() else {
            keys.push(None);
            continue;
        };
        let key = def.key.render_key(ctx);
        if key.len() > 65535 {
            ctx.log(env.log).error(format_args!(
                "the value of the \"{}\" key is more than 65535 bytes: \"{}\"",
                def.key.raw(),
                String::from_utf8_lossy(&key)
            ));
            keys.push(None);
        } else {
            keys.push(Some(key));
        }
    }
    keys
}

/// A client that closed while its request waited: NGINX's info line and
/// 499 in the access log; nothing is sent.
pub(super) fn client_closed(ctx: &mut RequestCtx, env: &Env<'_>) -> Outcome {
    ctx.log(env.log).line(
        Level::Info,
        format_args!("client prematurely closed connection"),
    );
    ctx.status = 499;
    Outcome::Close
}

fn rejected_req(ctx: &mut RequestCtx, dry: bool, code: u16) -> Option<Outcome> {
    if dry {
        ctx.limits.limit_req_status = Some("REJECTED_DRY_RUN");
        return None;
    }
    ctx.limits.limit_req_status = Some("REJECTED");
    Some(Outcome::Status(code))
}

fn limit_conn(ctx: &mut RequestCtx, env: &Env<'_>) -> Option<Outcome> {
    if ctx.limits.limit_conn_status.is_some() || ctx.loc.s.limit_conn.is_empty() {
        return None;
    }
    let s = &ctx.loc.s;
    let limits = Arc::clone(&s.limit_conn);
    let (level, dry, code) = (
        s.limit_conn_log_level,
        s.limit_conn_dry_run,
        s.limit_conn_status,
    );
    for l in limits.iter() {
        let Some(def) = l.zone.def() else { continue };
        let key = def.key.render_key(ctx);
        if key.is_empty() {
            continue;
        }
        if key.len() > 255 {
            ctx.log(env.log).error(format_args!(
                "the value of the \"{}\" key is more than 255 bytes: \"{}\"",
                def.key.raw(),
                String::from_utf8_lossy(&key)
            ));
            continue;
        }
        ctx.limits.limit_conn_status = Some("PASSED");
        match l.zone.acquire(&key, l.max) {
            ConnVerdict::Held(h) => ctx.limits.held.push(h),
            verdict => {
                if matches!(verdict, ConnVerdict::Limited) {
                    let dry_text = if dry { ", dry run" } else { "" };
                    ctx.log(env.log).line(
                        level,
                        format_args!("limiting connections{dry_text} by zone \"{}\"", l.zone.name),
                    );
                } else {
                    env.log.log(
                        Level::Crit,
                        format_args!(
                            "ngx_slab_alloc() failed: no memory in limit_conn zone \"{}\"",
                            l.zone.name
                        ),
                    );
                }
                ctx.limits.held.clear();
                if dry {
                    ctx.limits.limit_conn_status = Some("REJECTED_DRY_RUN");
                    return None;
                }
                ctx.limits.limit_conn_status = Some("REJECTED");
                return Some(Outcome::Status(code));
            }
        }
    }
    None
}

/// The access phase; a 401 it answers waits `auth_delay` first (NGINX
/// 1.17.10: against timing attacks on passwords), on a loop timer.
async fn access(ctx: &mut RequestCtx, env: &Env<'_>) -> Option<Outcome> {
    let answer = checks(ctx, env).await;
    let delay = ctx.loc.s.auth_delay;
    if matches!(answer, Some(Outcome::Status(401))) && !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    answer
}

/// `allow`/`deny`, `auth_basic`, then `auth_request` (NGINX's order),
/// under `satisfy`.
async fn checks(ctx: &mut RequestCtx, env: &Env<'_>) -> Option<Outcome> {
    let any = ctx.loc.s.satisfy_any;
    // NGINX's `r->access_code` under `satisfy any`.
    let mut refused: Option<Check> = None;
    for step in 0..3 {
        let c = match step {
            0 => address_rules(ctx, env, any),
            1 => auth_basic(ctx, env).await,
            _ => auth_request(ctx, env).await,
        };
        match c {
            Check::Declined => {}
            Check::Ok if any => return None,
            Check::Ok => {}
            Check::Forbidden | Check::Unauthorized(_) if any => {
                if !matches!(refused, Some(Check::Unauthorized(_))) {
                    refused = Some(c);
                }
            }
            other => return Some(outcome(ctx, other)),
        }
    }
    let refused = refused?;
    if matches!(refused, Check::Forbidden) {
        ctx.log(env.log)
            .error(format_args!("access forbidden by rule"));
    }
    Some(outcome(ctx, refused))
}

fn outcome(ctx: &mut RequestCtx, c: Check) -> Outcome {
    match c {
        Check::Forbidden => Outcome::Status(403),
        Check::Unauthorized(lines) => {
            // Kept on whatever page answers the 401 (`error_page` too).
            let lines = lines
                .into_iter()
                .map(|v| ("WWW-Authenticate".to_string(), v));
            ctx.carried_headers.extend(lines);
            Outcome::Status(401)
        }
        Check::Fail(code) => Outcome::Status(code),
        Check::Declined | Check::Ok => Outcome::Status(500),
    }
}

/// `auth_request`: the subrequest's verdict (`super::auth_request`).
async fn auth_request(ctx: &mut RequestCtx, env: &Env<'_>) -> Check {
    let Some(uri) = ctx.loc.s.auth_request.clone() else {
        return Check::Declined;
    };
    match super::auth_request::check(ctx, env, &uri).await {
        Verdict::Allowed => Check::Ok,
        Verdict::Forbidden => Check::Forbidden,
        Verdict::Unauthorized(lines) => Check::Unauthorized(lines),
        Verdict::Failed => Check::Fail(500),
    }
}

fn address_rules(ctx: &RequestCtx, env: &Env<'_>, any: bool) -> Check {
    let list = &ctx.loc.s.access_rules;
    let client = (!ctx.client_unix()).then(|| ctx.conn.peer.ip());
    match rules::first_match(list, client) {
        None => Check::Declined,
        Some(r) if r.deny => {
            if !any {
                ctx.log(env.log)
                    .error(format_args!("access forbidden by rule"));
            }
            Check::Forbidden
        }
        Some(_) => Check::Ok,
    }
}

/// auth_basic's 401.
fn basic_challenge(realm: &str) -> Check {
    Check::Unauthorized(vec![format!("Basic realm=\"{realm}\"")])
}

async fn auth_basic(ctx: &RequestCtx, env: &Env<'_>) -> Check {
    let s = &ctx.loc.s;
    let (Some(realm), Some(file)) = (&s.auth_basic, &s.auth_basic_user_file) else {
        return Check::Declined;
    };
    let realm = realm.render(ctx);
    if realm == "off" {
        return Check::Declined;
    }
    let Some((user, password)) = basic::credentials(ctx.header("authorization")) else {
        ctx.log(env.log).line(
            Level::Info,
            format_args!("no user/password was provided for basic authentication"),
        );
        return basic_challenge(&realm);
    };
    let mut path = file.render(ctx);
    if let (false, Some(prefix)) = (path.starts_with('/'), &s.auth_basic_file_prefix) {
        // `auth_basic_user_file $var` rendered relative: under the prefix.
        path = format!("{prefix}{path}");
    }
    let content = match read_user_file(ctx, env, &path).await {
        Ok(c) => c,
        Err(e) => {
            let line = crate::disk::Failure::of(&e, "open", &path).line;
            let missing = e.raw_os_error() == Some(libc::ENOENT);
            let (level, code) = if missing {
                (Level::Error, 403)
            } else {
                (Level::Crit, 500)
            };
            ctx.log(env.log).line(level, format_args!("{line}"));
            return if code == 403 {
                Check::Forbidden
            } else {
                Check::Fail(code)
            };
        }
    };
    let shown = String::from_utf8_lossy(&user);
    let Some(hash) = htpasswd::find_user(&content, &user) else {
        ctx.log(env.log)
            .error(format_args!("user \"{shown}\" was not found in \"{path}\""));
        return basic_challenge(&realm);
    };
    match matches(env, password, hash.to_vec()).await {
        Ok(true) => Check::Ok,
        Ok(false) => {
            ctx.log(env.log)
                .error(format_args!("user \"{shown}\": password mismatch"));
            basic_challenge(&realm)
        }
        Err(line) => {
            ctx.log(env.log).error(format_args!("{line}"));
            Check::Fail(503)
        }
    }
}

/// The whole user file, through the disk layer on the location's route.
async fn read_user_file(ctx: &RequestCtx, env: &Env<'_>, path: &str) -> io::Result<Vec<u8>> {
    let io = disk_io::route(ctx, env)
        .map_err(|_| io::Error::other(format!("no I/O route for \"{path}\"")))?;
    let file = io.open(Path::new(path), &PathRules::default()).await?;
    let mut content = Vec::new();
    let mut buf = vec![0u8; 8192];
    loop {
        let n = file.read_at(&mut buf, content.len() as u64).await?;
        if n == 0 {
            return Ok(content);
        }
        content.extend_from_slice(&buf[..n]);
    }
}

/// Threads of the hasher pool (shared by every worker) and how many
/// checks may wait for one.
const HASHER_THREADS: usize = 2;
const HASHER_QUEUE: usize = 256;

static HASHER: OnceLock<Option<ThreadPool>> = OnceLock::new();

/// Whether `password` matches `hash`: cheap formats here, the others on
/// the hasher pool. `Err` with a log line when the pool cannot take it.
async fn matches(env: &Env<'_>, password: Vec<u8>, hash: Vec<u8>) -> Result<bool, String> {
    if htpasswd::cost(&hash) == htpasswd::Cost::Cheap {
        return Ok(htpasswd::verify(&password, &hash));
    }
    let pool = HASHER.get_or_init(|| {
        let spec = PoolSpec {
            name: "hasher".into(),
            threads: HASHER_THREADS,
            max_queue: HASHER_QUEUE,
        };
        ThreadPool::start(spec, None, env.log.clone()).ok()
    });
    let Some(pool) = pool else {
        // No threads could be started: check here rather than refuse.
        return Ok(htpasswd::verify(&password, &hash));
    };
    let rx = pool
        .submit_in(Lane::Short, move || htpasswd::verify(&password, &hash))
        .map_err(|e| match e {
            crate::disk::pool::PoolError::Overflow { pool, waiting } => {
                format!("thread pool \"{pool}\" queue overflow: {waiting} tasks waiting")
            }
            crate::disk::pool::PoolError::Stopped => "thread pool \"hasher\" is stopped".into(),
        })?;
    rx.await
        .map_err(|_| "thread pool \"hasher\" dropped a task".to_string())
}
