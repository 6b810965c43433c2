//! More of NGINX's proxy module (issue 13): `proxy_method`,
//! `proxy_set_body`, `proxy_ignore_headers`, `proxy_cache_convert_head`,
//! `proxy_cookie_domain`, `proxy_cookie_path` and `proxy_cookie_flags`
//! (`upstream::cookie`); and `slice`. Applied in
//! `handlers/proxy/request.rs` (method, body), `handlers/proxy/response.rs`
//! (cookies) and `handlers/proxy/cache.rs` (ignored headers, HEAD).

#[allow(unused_imports)]
use super::*;
use crate::upstream::cookie::{self, CookieFlags, CookieMatch, CookieRewrite};
use crate::vars::regex::Regex;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("proxy_method", HSL, Arity::N(1), |b, d| {
        let t = template(&d.args[0])?;
        set_once(&mut b.loc().proxy_method, Some(t), d)
    }),
    d("proxy_set_body", HSL, Arity::N(1), |b, d| {
        let t = template(&d.args[0])?;
        set_once(&mut b.loc().proxy_set_body, Some(t), d)
    }),
    d("proxy_ignore_headers", HSL, Arity::Min(1), |b, d| {
        let mut names = Vec::new();
        for a in &d.args {
            let lower = a.to_ascii_lowercase();
            if !IGNORABLE.contains(&lower.as_str()) {
                return Err(format!("invalid value \"{a}\" in \"{}\" directive", d.name));
            }
            names.push(lower);
        }
        set_once(&mut b.loc().proxy_ignore_headers, Arc::new(names), d)
    }),
    d(
        "proxy_cache_convert_head",
        HSL,
        Arity::N(1),
        loc_flag!(proxy_cache_convert_head),
    ),
    // NGINX's slice module (`handlers::slice`).
    d("slice", HSL, Arity::N(1), loc_size!(slice)),
    d("proxy_cookie_domain", HSL, Arity::Range(1, 2), |b, d| {
        cookie_rule(
            b,
            d,
            |l| &mut l.proxy_cookie_domain,
            |d| rewrite_rule(d, true),
        )
    }),
    d("proxy_cookie_path", HSL, Arity::Range(1, 2), |b, d| {
        cookie_rule(
            b,
            d,
            |l| &mut l.proxy_cookie_path,
            |d| rewrite_rule(d, false),
        )
    }),
    d("proxy_cookie_flags", HSL, Arity::Range(1, 4), |b, d| {
        cookie_rule(b, d, |l| &mut l.proxy_cookie_flags, flags_rule)
    }),
];

/// The upstream response headers `proxy_ignore_headers` may name.
const IGNORABLE: &[&str] = &[
    "x-accel-redirect",
    "x-accel-expires",
    "x-accel-limit-rate",
    "x-accel-buffering",
    "x-accel-charset",
    "expires",
    "cache-control",
    "set-cookie",
    "vary",
];

type Rules<T> = Option<Arc<Vec<T>>>;

/// `proxy_cookie_domain|path|flags off | RULE;`: rules accumulate in one
/// level; `off` stands alone, as NGINX's "is duplicate" has it.
fn cookie_rule<T: Clone>(
    b: &mut Build,
    d: &Directive,
    slot: fn(&mut LocBuilder) -> &mut Rules<T>,
    rule: fn(&Directive) -> Result<T, String>,
) -> Res {
    let rules = slot(b.loc());
    if rules.as_ref().is_some_and(|r| r.is_empty()) {
        return Err(dup(d));
    }
    if d.args.len() == 1 {
        if d.args[0] != "off" {
            return Err(format!("invalid parameter \"{}\"", d.args[0]));
        }
        if rules.is_some() {
            return Err(dup(d));
        }
        *rules = Some(Arc::new(Vec::new()));
        return Ok(());
    }
    let new = rule(d)?;
    let mut list = rules.as_deref().cloned().unwrap_or_default();
    list.push(new);
    *rules = Some(Arc::new(list));
    Ok(())
}

/// `~regex` (`~*` caseless for paths; a domain's always is), else text.
fn cookie_match(arg: &str, always_caseless: bool) -> Result<CookieMatch, String> {
    match arg.strip_prefix('~') {
        Some(re) => {
            let (re, caseless) = match re.strip_prefix('*') {
                Some(re) if !always_caseless => (re, true),
                _ => (re, always_caseless),
            };
            Ok(CookieMatch::Regex(Arc::new(Regex::compile(re, caseless)?)))
        }
        None => Ok(CookieMatch::Text(template(arg)?)),
    }
}

/// `proxy_cookie_domain FROM TO` (a leading `.` of a text pair dropped,
/// the value's own kept) or `proxy_cookie_path FROM TO`.
fn rewrite_rule(d: &Directive, domain: bool) -> Result<CookieRewrite, String> {
    let (mut from, mut to) = (d.args[0].as_str(), d.args[1].as_str());
    if domain && !from.starts_with('~') {
        from = from.strip_prefix('.').unwrap_or(from);
        to = to.strip_prefix('.').unwrap_or(to);
    }
    Ok(CookieRewrite {
        from: cookie_match(from, domain)?,
        to: template(to)?,
    })
}

/// `proxy_cookie_flags COOKIE FLAG…` (COOKIE `~regex`, caseless). A flag
/// without variables that NGINX does not know loads with a warning: NGINX
/// skips it at run time (a debug line), and so does porter.
fn flags_rule(d: &Directive) -> Result<CookieFlags, String> {
    let mut flags = Vec::new();
    for a in &d.args[1..] {
        let t = template(a)?;
        if t.is_literal() && !cookie::known_flag(a) {
            warn(d, &format!("unknown cookie flag \"{a}\" is ignored"));
        }
        flags.push(t);
    }
    Ok(CookieFlags {
        name: cookie_match(&d.args[0], true)?,
        flags,
    })
}
