//! NGINX's rewriting of a proxied `Set-Cookie` (`proxy_cookie_domain`,
//! `proxy_cookie_path`, `proxy_cookie_flags`), as
//! `ngx_http_proxy_rewrite_cookie` does it: the value is split at `;` into
//! `name=value` attributes (spaces around each trimmed), the first
//! `domain`/`path` rule that matches replaces the attribute's value, the
//! first `proxy_cookie_flags` rule naming the cookie adds, removes or sets
//! `Secure`, `HttpOnly` and `SameSite`; and only when something matched
//! is the header written anew, its attributes joined by `"; "`. A value
//! whose first part has no `=` is left alone, as NGINX leaves it.
//!
//! The proxy handler calls [`rewrite`] where it copies the upstream's
//! header lines (`handlers::proxy::response`); a cached response's head
//! goes through the same place.

use std::borrow::Cow;
use std::sync::Arc;

use crate::vars::map::WithMatch;
use crate::vars::regex::Regex;
use crate::vars::template::{Template, VarSource};

/// What a rule compares with: text (a domain equal to it, a path
/// starting with it, a cookie name equal to it) or a regular expression
/// (`~`, `~*`) whose captures the replacement may use.
#[derive(Debug, Clone)]
pub enum CookieMatch {
    /// The text, with variables.
    Text(Template),
    /// `~regex` (domains and cookie names always caseless).
    Regex(Arc<Regex>),
}

/// One `proxy_cookie_domain` or `proxy_cookie_path` rule.
#[derive(Debug, Clone)]
pub struct CookieRewrite {
    /// What the attribute's value is compared with.
    pub from: CookieMatch,
    /// What replaces the matched part (all of it for a regex).
    pub to: Template,
}

/// One `proxy_cookie_flags cookie flag…` rule.
#[derive(Debug, Clone)]
pub struct CookieFlags {
    /// The cookie's name (text compared without regard to case).
    pub name: CookieMatch,
    /// The flags, with variables: `secure`, `nosecure`, `httponly`,
    /// `nohttponly`, `samesite=strict|lax|none`, `nosamesite`.
    pub flags: Vec<Template>,
}

/// The rules of one location.
pub struct CookieRules<'a> {
    /// `proxy_cookie_domain`.
    pub domain: &'a [CookieRewrite],
    /// `proxy_cookie_path`.
    pub path: &'a [CookieRewrite],
    /// `proxy_cookie_flags`.
    pub flags: &'a [CookieFlags],
}

impl CookieRules<'_> {
    /// Whether no rule is set (the header is copied as it came).
    pub fn is_empty(&self) -> bool {
        self.domain.is_empty() && self.path.is_empty() && self.flags.is_empty()
    }
}

/// The flag names NGINX knows, lowercase, and their bits (NGINX's
/// `ngx_http_proxy_cookie_flags_masks`: every bit asked for counts, so
/// `secure nosecure` keeps Secure as NGINX's order of tests does).
const FLAGS: &[(&str, u16)] = &[
    ("secure", SECURE_ON),
    ("nosecure", SECURE_OFF),
    ("httponly", HTTPONLY_ON),
    ("nohttponly", HTTPONLY_OFF),
    ("samesite=strict", STRICT),
    ("samesite=lax", LAX),
    ("samesite=none", NONE),
    ("nosamesite", SAMESITE_OFF),
];

const SECURE_ON: u16 = 1;
const SECURE_OFF: u16 = 2;
const HTTPONLY_ON: u16 = 4;
const HTTPONLY_OFF: u16 = 8;
const STRICT: u16 = 16;
const LAX: u16 = 32;
const NONE: u16 = 64;
const SAMESITE_OFF: u16 = 128;

/// Whether `s` names a flag `proxy_cookie_flags` knows (for the config
/// check of flags written without variables).
pub fn known_flag(s: &str) -> bool {
    FLAGS.iter().any(|(n, _)| n.eq_ignore_ascii_case(s))
}

/// One `name[=value]` part of the header; a removed one has no key.
struct Attr<'a> {
    key: Option<Cow<'a, str>>,
    value: Option<Cow<'a, str>>,
}

/// `Set-Cookie: value` after the rules; `None` when none matched (the
/// header goes out as it came).
pub fn rewrite(value: &str, rules: &CookieRules, src: &dyn VarSource) -> Option<String> {
    let mut attrs = parse(value);
    attrs[0].value.as_ref()?;
    let mut changed = false;
    for a in attrs.iter_mut().skip(1) {
        let (Some(key), Some(v)) = (&a.key, &a.value) else {
            continue;
        };
        let new = if key.eq_ignore_ascii_case("domain") {
            first_rewrite(v, rules.domain, src, domain_rule)
        } else if key.eq_ignore_ascii_case("path") {
            first_rewrite(v, rules.path, src, path_rule)
        } else {
            None
        };
        if let Some(n) = new {
            a.value = Some(Cow::Owned(n));
            changed = true;
        }
    }
    changed |= edit_flags(&mut attrs, rules.flags, src);
    changed.then(|| join(&attrs))
}

/// NGINX's `ngx_http_proxy_parse_cookie`: split at `;`, spaces trimmed
/// around names and values.
fn parse(value: &str) -> Vec<Attr<'_>> {
    value
        .split(';')
        .map(|part| {
            let part = part.trim_start_matches(' ');
            match part.split_once('=') {
                Some((k, v)) => Attr {
                    key: Some(Cow::Borrowed(k.trim_end_matches(' '))),
                    value: Some(Cow::Borrowed(v.trim_matches(' '))),
                },
                None => Attr {
                    key: Some(Cow::Borrowed(part.trim_end_matches(' '))),
                    value: None,
                },
            }
        })
        .collect()
}

fn join(attrs: &[Attr]) -> String {
    let mut out = String::new();
    for (i, a) in attrs.iter().enumerate() {
        let Some(key) = &a.key else { continue };
        if i > 0 {
            out.push_str("; ");
        }
        out.push_str(key);
        if let Some(v) = &a.value {
            out.push('=');
            out.push_str(v);
        }
    }
    out
}

type TextRule = fn(&str, &str, String) -> Option<String>;

/// The first rule that matches `v` gives its new value.
fn first_rewrite(
    v: &str,
    rules: &[CookieRewrite],
    src: &dyn VarSource,
    text: TextRule,
) -> Option<String> {
    rules.iter().find_map(|r| match &r.from {
        CookieMatch::Text(from) => text(v, &from.render(src), r.to.render(src)),
        CookieMatch::Regex(re) => {
            let m = re.exec(v)?;
            Some(r.to.render(&WithMatch { src, m: &m }))
        }
    })
}

/// A domain equal to `from` (a leading `.` of the value kept) becomes
/// `to`.
fn domain_rule(v: &str, from: &str, to: String) -> Option<String> {
    let (dot, bare) = match v.strip_prefix('.') {
        Some(b) => (".", b),
        None => ("", v),
    };
    bare.eq_ignore_ascii_case(from)
        .then(|| format!("{dot}{to}"))
}

/// A path starting with `from` has that part replaced by `to`.
fn path_rule(v: &str, from: &str, to: String) -> Option<String> {
    v.strip_prefix(from).map(|rest| to + rest)
}

/// `proxy_cookie_flags`: the first rule naming the cookie; whether it
/// asked for anything (then the header is written anew, as NGINX does,
/// even when the flags were already as asked).
fn edit_flags(attrs: &mut Vec<Attr>, rules: &[CookieFlags], src: &dyn VarSource) -> bool {
    let name = attrs[0].key.as_deref().unwrap_or("");
    let mut matched = None;
    let rule = rules.iter().find(|r| match &r.name {
        CookieMatch::Text(t) => t.render(src).eq_ignore_ascii_case(name),
        CookieMatch::Regex(re) => re.exec(name).map(|m| matched = Some(m)).is_some(),
    });
    let Some(rule) = rule else { return false };
    let mut f = 0;
    for flag in &rule.flags {
        let value = match &matched {
            Some(m) => flag.render(&WithMatch { src, m }),
            None => flag.render(src),
        };
        // Unknown values are skipped, as NGINX skips them (a debug line).
        if let Some((_, bit)) = FLAGS.iter().find(|(n, _)| n.eq_ignore_ascii_case(&value)) {
            f |= bit;
        }
    }
    if f == 0 {
        return false;
    }
    apply_flags(attrs, f);
    true
}

/// NGINX's `ngx_http_proxy_edit_cookie_flags`: an attribute present is
/// kept, removed or (SameSite) given the asked value; one asked for and
/// absent is added at the end in the order Secure, HttpOnly, SameSite.
fn apply_flags(attrs: &mut Vec<Attr>, mut f: u16) {
    for a in attrs.iter_mut().skip(1) {
        let Some(key) = a.key.as_deref() else {
            continue;
        };
        if key.eq_ignore_ascii_case("secure") {
            flag_present(&mut f, SECURE_ON, SECURE_OFF, &mut a.key);
        } else if key.eq_ignore_ascii_case("httponly") {
            flag_present(&mut f, HTTPONLY_ON, HTTPONLY_OFF, &mut a.key);
        } else if key.eq_ignore_ascii_case("samesite") {
            let want = [(STRICT, "Strict"), (LAX, "Lax"), (NONE, "None")]
                .into_iter()
                .find(|(bit, _)| f & bit != 0);
            match want {
                Some((bit, want)) => {
                    f &= !bit;
                    if !a
                        .value
                        .as_deref()
                        .is_some_and(|v| v.eq_ignore_ascii_case(want))
                    {
                        a.key = Some(Cow::Borrowed("SameSite"));
                        a.value = Some(Cow::Borrowed(want));
                    }
                }
                None if f & SAMESITE_OFF != 0 => a.key = None,
                None => {}
            }
        }
    }
    let mut push = |k: &'static str, v: Option<&'static str>| {
        attrs.push(Attr {
            key: Some(Cow::Borrowed(k)),
            value: v.map(Cow::Borrowed),
        })
    };
    if f & SECURE_ON != 0 {
        push("Secure", None);
    }
    if f & HTTPONLY_ON != 0 {
        push("HttpOnly", None);
    }
    if let Some((_, v)) = [(STRICT, "Strict"), (LAX, "Lax"), (NONE, "None")]
        .into_iter()
        .find(|(bit, _)| f & bit != 0)
    {
        push("SameSite", Some(v));
    }
}

/// A flag attribute found: kept when asked for (and not added again),
/// removed when asked off.
fn flag_present(f: &mut u16, on: u16, off: u16, key: &mut Option<Cow<str>>) {
    if *f & on != 0 {
        *f &= !on;
    } else if *f & off != 0 {
        *key = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoVars;
    impl VarSource for NoVars {
        fn append(&self, _: &crate::vars::template::Var, _: &mut String) {}
    }

    fn t(s: &str) -> Template {
        Template::compile(s).unwrap()
    }

    fn flags(name: &str, f: &[&str]) -> CookieFlags {
        let name = match name.strip_prefix('~') {
            Some(re) => CookieMatch::Regex(Arc::new(Regex::compile(re, true).unwrap())),
            None => CookieMatch::Text(t(name)),
        };
        CookieFlags {
            name,
            flags: f.iter().map(|s| t(s)).collect(),
        }
    }

    fn run(
        v: &str,
        domain: &[CookieRewrite],
        path: &[CookieRewrite],
        fl: &[CookieFlags],
    ) -> Option<String> {
        let rules = CookieRules {
            domain,
            path,
            flags: fl,
        };
        rewrite(v, &rules, &NoVars)
    }

    #[test]
    fn flags_are_added_in_nginx_order_and_the_header_rejoined() {
        let f = [flags("id", &["samesite=lax", "httponly", "secure"])];
        assert_eq!(
            run("id=1;path=/", &[], &[], &f).as_deref(),
            Some("id=1; path=/; Secure; HttpOnly; SameSite=Lax")
        );
    }

    #[test]
    fn present_flags_are_kept_once_removed_or_replaced() {
        let f = [flags("ID", &["secure", "nohttponly", "samesite=strict"])];
        assert_eq!(
            run("id=1; secure; HttpOnly; samesite=none", &[], &[], &f).as_deref(),
            Some("id=1; secure; SameSite=Strict")
        );
        let off = [flags("id", &["nosamesite", "nosecure"])];
        assert_eq!(
            run("id=1; Secure; SameSite=Lax", &[], &[], &off).as_deref(),
            Some("id=1")
        );
    }

    #[test]
    fn only_the_first_rule_naming_the_cookie_counts() {
        let f = [flags("~^s", &["secure"]), flags("sid", &["httponly"])];
        assert_eq!(run("sid=1", &[], &[], &f).as_deref(), Some("sid=1; Secure"));
        assert_eq!(run("other=1", &[], &[], &f), None);
        // Unknown flags are skipped; none known: no rewrite.
        assert_eq!(run("x=1", &[], &[], &[flags("x", &["bogus"])]), None);
    }

    #[test]
    fn domain_and_path_rules_replace_the_first_match() {
        let domain = [CookieRewrite {
            from: CookieMatch::Text(t("backend.local")),
            to: t("example.com"),
        }];
        let path = [CookieRewrite {
            from: CookieMatch::Text(t("/app/")),
            to: t("/"),
        }];
        assert_eq!(
            run(
                "a=b;Domain=.BACKEND.local ;Path=/app/x",
                &domain,
                &path,
                &[]
            )
            .as_deref(),
            Some("a=b; Domain=.example.com; Path=/x")
        );
        assert_eq!(run("a=b; domain=other", &domain, &path, &[]), None);
    }

    #[test]
    fn regex_rules_replace_the_whole_value_with_captures() {
        let domain = [CookieRewrite {
            from: CookieMatch::Regex(Arc::new(
                Regex::compile(r"\.?([a-z]+)\.local", true).unwrap(),
            )),
            to: t("$1.example.com"),
        }];
        assert_eq!(
            run("a=b; domain=.shop.LOCAL", &domain, &[], &[]).as_deref(),
            Some("a=b; domain=shop.example.com")
        );
    }

    #[test]
    fn a_value_without_a_name_is_left_alone() {
        let f = [flags("~.", &["secure"])];
        assert_eq!(run("justtext; path=/", &[], &[], &f), None);
    }
}
