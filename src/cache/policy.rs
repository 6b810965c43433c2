//! Cache policy, as pure functions: whether a response may be stored and
//! until when, in NGINX's order, and which stored variant answers a
//! request (`Vary`).
//!
//! Validity, first answer wins (NGINX's `ngx_http_upstream` header
//! handlers with no `proxy_ignore_headers`):
//! 1. `Set-Cookie` present → not cached; `Vary` naming `*` anywhere (in a
//!    list, or on any of several `Vary` lines — NGINX looks only at a
//!    first line that is exactly `*`), or a `Vary` longer than NGINX's
//!    128 bytes → not cached: `*` means no later request can be matched.
//! 2. `X-Accel-Expires`: `0` → not cached, `N` → N seconds, `@T` → until
//!    unix time T.
//! 3. `Cache-Control`: `no-store`, `no-cache` or `private` → not cached;
//!    `s-maxage=N`, else `max-age=N` → N seconds (`0` → not cached).
//! 4. `Expires`: a date in the future → until then; past or invalid → not
//!    cached.
//! 5. `proxy_cache_valid`: the first rule naming the status (or `any`);
//!    none, or a zero time → not cached.
//!
//! Besides its validity, an entry keeps NGINX's two stale windows
//! ([`StaleWindows`], NGINX 1.11.10+): `Cache-Control:
//! stale-while-revalidate=N` lets it be served for N seconds past its
//! validity while it is refreshed, `stale-if-error=N` (and
//! `stale-while-revalidate`) when the upstream fails. A malformed number
//! keeps the response out of the cache, as NGINX's `u->cacheable = 0`.

use std::time::Duration;

use crate::h1::fields::HeaderLines;

/// One `proxy_cache_valid [code ...|any] time` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheValid {
    /// Statuses it covers; empty means `any`.
    pub codes: Vec<u16>,
    /// How long such a response stays fresh.
    pub time: Duration,
}

impl CacheValid {
    /// Whether this rule covers `status`.
    pub fn covers(&self, status: u16) -> bool {
        self.codes.is_empty() || self.codes.contains(&status)
    }
}

/// NGINX's longest `Vary` value it caches (`NGX_HTTP_CACHE_VARY_LEN`).
pub const MAX_VARY: usize = 128;

/// Why a response is not stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotCached {
    /// `Set-Cookie`.
    SetCookie,
    /// `Vary: *` or too long a `Vary`.
    Vary,
    /// `X-Accel-Expires: 0`.
    AccelExpires,
    /// `Cache-Control: no-store|no-cache|private` or a zero age.
    CacheControl,
    /// `Expires` in the past or invalid.
    Expires,
    /// No `proxy_cache_valid` rule (or a zero one) for the status.
    NoRule,
}

/// Seconds past its validity an entry may still be served stale (NGINX's
/// `updating_sec` and `error_sec` in the entry header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StaleWindows {
    /// While it is refreshed (`stale-while-revalidate`).
    pub updating: i64,
    /// When the upstream fails (`stale-if-error`, else
    /// `stale-while-revalidate`).
    pub error: i64,
}

impl StaleWindows {
    /// These windows with what `headers`' `Cache-Control` says laid over
    /// them, as NGINX reads the directives into the request's cache
    /// (`stale-while-revalidate` sets both, then `stale-if-error` the
    /// second); a malformed number → not cached.
    pub fn with(self, headers: &(impl HeaderLines + ?Sized)) -> Result<StaleWindows, NotCached> {
        let mut w = self;
        if let Some(n) = stale_directive(headers, "stale-while-revalidate=")? {
            (w.updating, w.error) = (n, n);
        }
        if let Some(n) = stale_directive(headers, "stale-if-error=")? {
            w.error = n;
        }
        Ok(w)
    }
}

/// The seconds of the first `Cache-Control` directive starting with
/// `name` (NGINX's delta-seconds: digits up to `,`, `;` or a space, a
/// huge number capped), `Err` for anything else after the `=`.
fn stale_directive(
    headers: &(impl HeaderLines + ?Sized),
    name: &str,
) -> Result<Option<i64>, NotCached> {
    let found = headers
        .all("cache-control")
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .find(|d| {
            d.get(..name.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(name))
        });
    let Some(d) = found else {
        return Ok(None);
    };
    let n = d[name.len()..].split([';', ' ']).next().unwrap_or("");
    if !n.bytes().all(|b| b.is_ascii_digit()) {
        return Err(NotCached::CacheControl);
    }
    Ok(Some(n.parse::<i64>().unwrap_or(if n.is_empty() {
        0
    } else {
        i64::MAX
    })))
}

/// The verdict on a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Validity {
    /// Store it, fresh until this unix time.
    Until(i64),
    /// Do not store it.
    No(NotCached),
}

fn digits(s: &str) -> Option<i64> {
    let d: &str = &s[..s.bytes().take_while(u8::is_ascii_digit).count()];
    d.parse().ok()
}

/// Decides whether a response with `status` and `headers` (as received
/// from the upstream) is stored, and until when, at unix time `now`.
pub fn validity(
    status: u16,
    headers: &(impl HeaderLines + ?Sized),
    rules: &[CacheValid],
    now: i64,
) -> Validity {
    if headers.get("set-cookie").is_some() {
        return Validity::No(NotCached::SetCookie);
    }
    for v in headers.all("vary") {
        if v.trim().len() > MAX_VARY || v.split(',').any(|n| n.trim() == "*") {
            return Validity::No(NotCached::Vary);
        }
    }
    if let Some(v) = accel_expires(headers, now)
        .or_else(|| cache_control(headers, now))
        .or_else(|| expires(headers, now))
    {
        return v;
    }
    match rule_validity(status, rules, now) {
        Some(t) => Validity::Until(t),
        None => Validity::No(NotCached::NoRule),
    }
}

/// [`validity`] now, with the stale windows the headers give (a
/// malformed window: not stored).
pub fn validity_and_windows(
    status: u16,
    headers: &(impl HeaderLines + ?Sized),
    rules: &[CacheValid],
) -> (Validity, StaleWindows) {
    let valid = validity(status, headers, rules, crate::util::time::now().0);
    match StaleWindows::default().with(headers) {
        Ok(w) => (valid, w),
        Err(no) => (Validity::No(no), StaleWindows::default()),
    }
}

/// `proxy_cache_valid`'s time for `status` from `now` (`None`: no rule,
/// or a zero one).
pub fn rule_validity(status: u16, rules: &[CacheValid], now: i64) -> Option<i64> {
    match rules.iter().find(|r| r.covers(status)) {
        Some(r) if !r.time.is_zero() => Some(now + r.time.as_secs() as i64),
        _ => None,
    }
}

/// The validity `headers` give by themselves (`X-Accel-Expires`,
/// `Cache-Control`, `Expires`, in that order), without the rules: what a
/// 304 that revalidates an entry, and then the entry's own stored
/// headers, are read for (NGINX's `valid_sec` after each is processed).
/// `None` when none of them gives a time.
pub fn header_validity(headers: &(impl HeaderLines + ?Sized), now: i64) -> Option<i64> {
    match accel_expires(headers, now)
        .or_else(|| cache_control(headers, now))
        .or_else(|| expires(headers, now))
    {
        Some(Validity::Until(t)) => Some(t),
        _ => None,
    }
}

/// `X-Accel-Expires`: seconds from now, `@` an absolute time, 0 never;
/// `None` when absent or unparsable (NGINX ignores it then).
fn accel_expires(headers: &(impl HeaderLines + ?Sized), now: i64) -> Option<Validity> {
    let v = headers.get("x-accel-expires")?.trim();
    let all_digits = |s: &str| {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<i64>().ok())
            .flatten()
    };
    match v.strip_prefix('@') {
        Some(abs) => match all_digits(abs)? {
            t if t > now => Some(Validity::Until(t)),
            _ => Some(Validity::No(NotCached::AccelExpires)),
        },
        None => match all_digits(v)? {
            0 => Some(Validity::No(NotCached::AccelExpires)),
            n => Some(Validity::Until(now + n)),
        },
    }
}

/// `Cache-Control`: `no-store`, `no-cache`, `private` (also with a field
/// list) → not stored; else `s-maxage`, then `max-age`; `None` when none
/// of these decides.
fn cache_control(headers: &(impl HeaderLines + ?Sized), now: i64) -> Option<Validity> {
    let mut cc_seen = false;
    for v in headers.all("cache-control") {
        for d in v.split(',') {
            let d = d.trim().to_ascii_lowercase();
            if d == "no-store" || d == "no-cache" || d == "private" {
                return Some(Validity::No(NotCached::CacheControl));
            }
            if d.starts_with("no-cache=") || d.starts_with("private=") {
                return Some(Validity::No(NotCached::CacheControl));
            }
        }
        cc_seen = true;
    }
    if !cc_seen {
        return None;
    }
    let joined: Vec<String> = headers
        .all("cache-control")
        .flat_map(|v| v.split(','))
        .map(|d| d.trim().to_ascii_lowercase())
        .collect();
    let age = |p: &str| {
        joined
            .iter()
            .find_map(|d| d.strip_prefix(p).map(|n| digits(n.trim_matches('"'))))
    };
    match age("s-maxage=").or_else(|| age("max-age="))? {
        Some(0) | None => Some(Validity::No(NotCached::CacheControl)),
        Some(n) => Some(Validity::Until(now + n)),
    }
}

/// `Expires`: a time in the past or an unparsable one → not stored.
fn expires(headers: &(impl HeaderLines + ?Sized), now: i64) -> Option<Validity> {
    let v = headers.get("expires")?;
    Some(match httpdate::parse_http_date(v.trim()) {
        Ok(t) => {
            let t = t
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0);
            if t <= now {
                Validity::No(NotCached::Expires)
            } else {
                Validity::Until(t)
            }
        }
        Err(_) => Validity::No(NotCached::Expires),
    })
}

/// The header names a response varies on (lowercase, in order).
pub fn vary_names(headers: &(impl HeaderLines + ?Sized)) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for v in headers.all("vary") {
        for n in v.split(',') {
            let n = n.trim().to_ascii_lowercase();
            if !n.is_empty() && !out.contains(&n) {
                out.push(n);
            }
        }
    }
    out
}

/// The request's values of `names` (`request(name)` gives a header's
/// value, several lines joined with `, `; absent is empty), as stored in
/// an entry's header.
pub fn vary_values(
    names: &[String],
    request: impl Fn(&str) -> Option<String>,
) -> Vec<(String, String)> {
    names
        .iter()
        .map(|n| {
            (
                n.clone(),
                request(n).map(|v| v.trim().to_string()).unwrap_or_default(),
            )
        })
        .collect()
}

/// Whether a stored variant (its `Vary` names and the storing request's
/// values) answers this request: every value equal.
pub fn variant_matches(
    stored: &[(String, String)],
    request: impl Fn(&str) -> Option<String>,
) -> bool {
    stored
        .iter()
        .all(|(n, v)| request(n).map(|r| r.trim().to_string()).unwrap_or_default() == *v)
}

/// The key a non-matching variant is stored under, as NGINX keys its
/// secondary variants by the main key and the request's values of the
/// `Vary` headers: the main entry keeps the `Vary` names, and a request
/// whose values differ looks up (and fills) this key instead.
pub fn variant_key(key: &str, values: &[(String, String)]) -> String {
    let mut k = String::with_capacity(key.len() + 32);
    k.push_str(key);
    for (n, v) in values {
        k.push('\n');
        k.push_str(n);
        k.push(':');
        k.push_str(v);
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h1::fields::Fields;

    const NOW: i64 = 1_800_000_000;

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    fn default_rules() -> Vec<CacheValid> {
        // `proxy_cache_valid 10m;` = 200 301 302.
        vec![CacheValid {
            codes: vec![200, 301, 302],
            time: Duration::from_secs(600),
        }]
    }

    #[test]
    fn proxy_cache_valid_by_status() {
        let rules = vec![
            CacheValid {
                codes: vec![200, 302],
                time: Duration::from_secs(600),
            },
            CacheValid {
                codes: vec![404],
                time: Duration::from_secs(60),
            },
            CacheValid {
                codes: vec![],
                time: Duration::from_secs(5),
            },
        ];
        assert_eq!(
            validity(200, &Fields::default(), &rules, NOW),
            Validity::Until(NOW + 600)
        );
        assert_eq!(
            validity(404, &Fields::default(), &rules, NOW),
            Validity::Until(NOW + 60)
        );
        assert_eq!(
            validity(500, &Fields::default(), &rules, NOW),
            Validity::Until(NOW + 5)
        );
        assert_eq!(
            validity(404, &Fields::default(), &default_rules(), NOW),
            Validity::No(NotCached::NoRule)
        );
        let zero = vec![CacheValid {
            codes: vec![],
            time: Duration::ZERO,
        }];
        assert_eq!(
            validity(200, &Fields::default(), &zero, NOW),
            Validity::No(NotCached::NoRule)
        );
        assert_eq!(
            validity(200, &Fields::default(), &[], NOW),
            Validity::No(NotCached::NoRule)
        );
    }

    #[test]
    fn header_order_is_nginx_order() {
        let r = default_rules();
        // X-Accel-Expires beats Cache-Control and Expires.
        let hs = h(&[
            ("Cache-Control", "max-age=100"),
            ("X-Accel-Expires", "30"),
            ("Expires", "Thu, 01 Jan 2099 00:00:00 GMT"),
        ]);
        assert_eq!(validity(200, &hs, &r, NOW), Validity::Until(NOW + 30));
        assert_eq!(
            validity(200, &h(&[("X-Accel-Expires", "@1900000000")]), &r, NOW),
            Validity::Until(1_900_000_000)
        );
        assert_eq!(
            validity(
                200,
                &h(&[("X-Accel-Expires", "0"), ("Cache-Control", "max-age=9")]),
                &r,
                NOW
            ),
            Validity::No(NotCached::AccelExpires)
        );
        // s-maxage beats max-age; Cache-Control beats Expires.
        let hs = h(&[
            ("Cache-Control", "public, max-age=100, s-maxage=50"),
            ("Expires", "Thu, 01 Jan 2099 00:00:00 GMT"),
        ]);
        assert_eq!(validity(200, &hs, &r, NOW), Validity::Until(NOW + 50));
        assert_eq!(
            validity(200, &h(&[("Cache-Control", "max-age=100")]), &r, NOW),
            Validity::Until(NOW + 100)
        );
        // Headers beat proxy_cache_valid, even for statuses it omits.
        assert_eq!(
            validity(404, &h(&[("Cache-Control", "max-age=7")]), &r, NOW),
            Validity::Until(NOW + 7)
        );
        assert_eq!(
            validity(
                200,
                &h(&[("Expires", "Thu, 01 Jan 2099 00:00:00 GMT")]),
                &r,
                NOW
            ),
            Validity::Until(4_070_908_800)
        );
    }

    #[test]
    fn refusals() {
        let r = default_rules();
        for cc in [
            "no-store",
            "No-Cache",
            "private",
            "max-age=10, private",
            "max-age=0",
            "no-cache=\"Set-Cookie\"",
        ] {
            assert_eq!(
                validity(200, &h(&[("Cache-Control", cc)]), &r, NOW),
                Validity::No(NotCached::CacheControl),
                "{cc}"
            );
        }
        assert_eq!(
            validity(
                200,
                &h(&[("Set-Cookie", "a=b"), ("Cache-Control", "max-age=60")]),
                &r,
                NOW
            ),
            Validity::No(NotCached::SetCookie)
        );
        assert_eq!(
            validity(200, &h(&[("Vary", "*")]), &r, NOW),
            Validity::No(NotCached::Vary)
        );
        for vary in [
            &[("Vary", "Accept, *")][..],
            &[("Vary", "*,Accept")],
            &[("Vary", "Accept"), ("Vary", "*")],
            &[("Vary", "Accept"), ("vary", " * ")],
        ] {
            assert_eq!(
                validity(200, &h(vary), &r, NOW),
                Validity::No(NotCached::Vary),
                "{vary:?}"
            );
        }
        assert_eq!(
            validity(200, &h(&[("Vary", &"x".repeat(129))]), &r, NOW),
            Validity::No(NotCached::Vary)
        );
        assert_eq!(
            validity(
                200,
                &h(&[("Expires", "Thu, 01 Jan 1970 00:00:00 GMT")]),
                &r,
                NOW
            ),
            Validity::No(NotCached::Expires)
        );
        assert_eq!(
            validity(200, &h(&[("Expires", "0")]), &r, NOW),
            Validity::No(NotCached::Expires)
        );
        // Cache-Control without an age falls through to Expires / rules.
        assert_eq!(
            validity(200, &h(&[("Cache-Control", "public")]), &r, NOW),
            Validity::Until(NOW + 600)
        );
    }

    #[test]
    fn vary_variants() {
        let resp = h(&[
            ("Vary", "Accept-Encoding, accept-language"),
            ("Vary", "Accept-Encoding"),
        ]);
        let names = vary_names(&resp);
        assert_eq!(names, vec!["accept-encoding", "accept-language"]);
        let gzip = |n: &str| (n == "accept-encoding").then(|| "gzip".to_string());
        let plain = |_: &str| None;
        let stored = vary_values(&names, gzip);
        assert_eq!(
            stored,
            vec![
                ("accept-encoding".to_string(), "gzip".to_string()),
                ("accept-language".to_string(), String::new())
            ]
        );
        assert!(variant_matches(&stored, gzip));
        assert!(!variant_matches(&stored, plain));
        assert!(variant_matches(&[], plain), "no Vary matches every request");
        let k1 = variant_key("k", &stored);
        let k2 = variant_key("k", &vary_values(&names, plain));
        assert_ne!(k1, k2);
        assert_ne!(k1, "k");
    }
}
