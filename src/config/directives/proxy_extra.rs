//! More of NGINX's proxy module (issue 13): `proxy_method`,
//! `proxy_set_body`, `proxy_ignore_headers`, `proxy_cache_convert_head`,
//! `proxy_cookie_domain` and `proxy_cookie_path`; and `slice`. Applied in
//! `handlers/proxy/request.rs` (method, body), `handlers/proxy/response.rs`
//! (cookies) and `handlers/proxy/cache.rs` (ignored headers, HEAD).

#[allow(unused_imports)]
use super::*;

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
        cookie_rule(b, d, |l| &mut l.proxy_cookie_domain)
    }),
    d("proxy_cookie_path", HSL, Arity::Range(1, 2), |b, d| {
        cookie_rule(b, d, |l| &mut l.proxy_cookie_path)
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

type CookieRules = Option<Arc<Vec<(String, Template)>>>;

/// `proxy_cookie_domain|path off | FROM TO;`: rules accumulate in one
/// level; `off` stands alone; regex (`~`) rules are not supported.
fn cookie_rule(b: &mut Build, d: &Directive, slot: fn(&mut LocBuilder) -> &mut CookieRules) -> Res {
    let rules = slot(b.loc());
    if d.args.len() == 1 {
        if d.args[0] != "off" {
            return Err(format!(
                "invalid number of arguments in \"{}\" directive",
                d.name
            ));
        }
        if rules.is_some() {
            return Err(dup(d));
        }
        *rules = Some(Arc::new(Vec::new()));
        return Ok(());
    }
    if d.args[0].starts_with('~') {
        return Err(format!(
            "regular expressions in \"{}\" are not supported by porter",
            d.name
        ));
    }
    let to = template(&d.args[1])?;
    let mut list = rules.as_deref().cloned().unwrap_or_default();
    list.push((d.args[0].clone(), to));
    *rules = Some(Arc::new(list));
    Ok(())
}
