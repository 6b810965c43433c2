//! `valid_referers`: which `Referer` values are valid, as NGINX's referer
//! module decides it for `$invalid_referer` (`1` when invalid, else empty).
//!
//! NGINX's order (`ngx_http_referer_variable`): no rule at all → valid; no
//! `Referer` → valid only with `none`; a value not starting with `http://`
//! or `https://` (or shorter than `http://i.ru`) → valid only with
//! `blocked`; else the host (up to `/` or `:`, lowercased, at most 256
//! bytes) is looked up among the hostnames — exact, then the longest
//! `*.example.com`/`.example.com`, then the longest `www.example.*` — and a
//! hostname written with a URI part (`example.com/galleries/`) also needs
//! the path to start with it; then the server's names (`server_names`);
//! then the `~` regular expressions, caseless, against the value after the
//! scheme.

use std::collections::HashMap;
use std::sync::Arc;

use crate::vars::regex::Regex;

/// The longest host NGINX compares (its buffer).
const MAX_HOST: usize = 256;

/// One location's `valid_referers` lines, compiled.
#[derive(Debug, Clone, Default)]
pub struct ValidReferers {
    none: bool,
    blocked: bool,
    server_names: bool,
    /// Host → URI prefix (`None`: any URI).
    exact: HashMap<String, Option<String>>,
    /// `.example.com` suffixes, longest first.
    head: Vec<(String, Option<String>)>,
    /// `www.example.` prefixes, longest first.
    tail: Vec<(String, Option<String>)>,
    regexes: Vec<Arc<Regex>>,
}

impl ValidReferers {
    /// Adds one argument of a `valid_referers` line; errors are NGINX's.
    pub fn add(&mut self, arg: &str) -> Result<(), String> {
        match arg {
            "" => return Err(format!("invalid referer \"{arg}\"")),
            "none" => self.none = true,
            "blocked" => self.blocked = true,
            "server_names" => self.server_names = true,
            _ => {
                if let Some(re) = arg.strip_prefix('~') {
                    if re.is_empty() {
                        return Err(format!("empty regex in \"{arg}\""));
                    }
                    self.regexes.push(Arc::new(Regex::compile(re, true)?));
                    return Ok(());
                }
                let (host, uri) = match arg.find('/') {
                    Some(i) => (&arg[..i], Some(arg[i..].to_string())),
                    None => (arg, None),
                };
                self.add_host(host, uri)?;
            }
        }
        Ok(())
    }

    /// NGINX's `ngx_hash_add_key` with wildcards, for one hostname.
    fn add_host(&mut self, host: &str, uri: Option<String>) -> Result<(), String> {
        let invalid = || format!("invalid hostname or wildcard \"{host}\"");
        let low = host.to_ascii_lowercase();
        // NGINX names the key it lowercased in place.
        let conflict = || format!("conflicting parameter \"{low}\"");
        if low.contains("..") || low.matches('*').count() > 1 || low.is_empty() {
            return Err(invalid());
        }
        let (list, key) = if let Some(rest) = low.strip_prefix("*.").filter(|r| !r.is_empty()) {
            (&mut self.head, format!(".{rest}"))
        } else if let Some(rest) = low.strip_suffix(".*").filter(|r| !r.is_empty()) {
            (&mut self.tail, format!("{rest}."))
        } else if low.contains('*') {
            return Err(invalid());
        } else if let Some(rest) = low.strip_prefix('.').filter(|r| !r.is_empty()) {
            if self.exact.contains_key(rest) || self.head.iter().any(|(k, _)| *k == low) {
                return Err(conflict());
            }
            self.exact.insert(rest.to_string(), uri.clone());
            (&mut self.head, low.clone())
        } else {
            if self.exact.contains_key(&low) {
                return Err(conflict());
            }
            self.exact.insert(low, uri);
            return Ok(());
        };
        if list.iter().any(|(k, _)| *k == key) {
            return Err(conflict());
        }
        list.push((key, uri));
        list.sort_by_key(|(k, _)| std::cmp::Reverse(k.len()));
        Ok(())
    }

    /// NGINX's merge-time check: `none` or `blocked` need a hostname.
    pub fn check(&self) -> Result<(), String> {
        let hosts = !self.exact.is_empty()
            || !self.head.is_empty()
            || !self.tail.is_empty()
            || self.server_names;
        if (self.none || self.blocked) && !hosts {
            return Err("the \"none\" or \"blocked\" referers are specified in the \
                 \"valid_referers\" directive without any valid referer"
                .into());
        }
        Ok(())
    }

    /// Whether `referer` (the request's first `Referer`, if any) is
    /// valid; `server_name` says whether a lowercased host is one of the
    /// server's names (used with `server_names`).
    pub fn is_valid(&self, referer: Option<&str>, server_name: &dyn Fn(&str) -> bool) -> bool {
        let Some(referer) = referer else {
            return self.none;
        };
        let after = if referer.len() >= "http://i.ru".len() {
            strip_scheme(referer)
        } else {
            None
        };
        let Some(rest) = after else {
            return self.blocked;
        };
        let end = rest.find(['/', ':']).unwrap_or(rest.len());
        if end > MAX_HOST {
            return false;
        }
        let host = rest[..end].to_ascii_lowercase();
        if let Some(uri) = self.find(&host) {
            let path = rest[end..].find('/').map_or("", |i| &rest[end + i..]);
            return uri.as_ref().is_none_or(|u| path.starts_with(u.as_str()));
        }
        if self.server_names && server_name(&host) {
            return true;
        }
        self.regexes.iter().any(|re| re.is_match(rest))
    }

    /// The URI part of the hostname entry `host` matches, NGINX's
    /// combined-hash order.
    fn find(&self, host: &str) -> Option<&Option<String>> {
        if let Some(u) = self.exact.get(host) {
            return Some(u);
        }
        let head = self.head.iter().find(|(k, _)| host.ends_with(k.as_str()));
        let tail = || self.tail.iter().find(|(k, _)| host.starts_with(k.as_str()));
        head.or_else(tail).map(|(_, u)| u)
    }
}

fn strip_scheme(referer: &str) -> Option<&str> {
    let b = referer.as_bytes();
    if b.len() >= 7 && b[..7].eq_ignore_ascii_case(b"http://") {
        return Some(&referer[7..]);
    }
    if b.len() >= 8 && b[..8].eq_ignore_ascii_case(b"https://") {
        return Some(&referer[8..]);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(args: &[&str]) -> ValidReferers {
        let mut v = ValidReferers::default();
        for a in args {
            v.add(a).unwrap();
        }
        v
    }

    #[test]
    fn nginx_order_of_checks() {
        let v = rules(&[
            "none",
            "blocked",
            "example.com/gal/",
            "*.example.org",
            "www.ex.*",
            "~\\.google\\.",
        ]);
        let no = |_: &str| false;
        assert!(v.is_valid(None, &no));
        assert!(v.is_valid(Some("junk"), &no));
        assert!(v.is_valid(Some("http://EXAMPLE.com:80/gal/x"), &no));
        assert!(!v.is_valid(Some("http://example.com/other"), &no));
        assert!(v.is_valid(Some("https://a.b.example.org/"), &no));
        assert!(!v.is_valid(Some("https://example.org/"), &no));
        assert!(v.is_valid(Some("http://www.ex.co.uk/"), &no));
        assert!(v.is_valid(Some("http://www.GOOGLE.com/search"), &no));
        assert!(!v.is_valid(Some("http://evil.com/"), &no));
        let strict = rules(&["example.com"]);
        assert!(!strict.is_valid(None, &no));
        assert!(!strict.is_valid(Some("junk"), &no));
    }

    #[test]
    fn bad_arguments_read_as_nginx_reads_them() {
        let mut v = ValidReferers::default();
        assert_eq!(
            v.add("a*b").unwrap_err(),
            "invalid hostname or wildcard \"a*b\""
        );
        assert_eq!(v.add("~").unwrap_err(), "empty regex in \"~\"");
        v.add("x.com").unwrap();
        assert_eq!(
            v.add("X.com/y").unwrap_err(),
            "conflicting parameter \"x.com\""
        );
        assert!(rules(&["none"]).check().is_err());
    }
}
