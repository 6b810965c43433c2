//! Conditional requests, with the order and comparisons of NGINX's
//! not-modified filter: If-Unmodified-Since, then If-Match (412 on
//! failure), then If-Modified-Since / If-None-Match (304 only when every one
//! present says "not modified"). A response without `Last-Modified` or
//! `ETag` (`return 200 text`, `etag off`) is still evaluated: `*` matches
//! any entity, a date or tag cannot. Also If-Range and the ETag format.

use std::time::UNIX_EPOCH;

use crate::config::ImsMode;

/// What the preconditions decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition {
    /// Send the response.
    Proceed,
    /// 304 Not Modified.
    NotModified,
    /// 412 Precondition Failed.
    Failed,
}

/// NGINX's strong ETag: `"mtime-size"` in lowercase hex.
pub fn etag(mtime: i64, size: u64) -> String {
    // Built by hand: it is made for every file response, and `format!` costs
    // more than the rest of it.
    fn hex(out: &mut String, mut v: u64) {
        let mut digits = [0u8; 16];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b"0123456789abcdef"[(v & 15) as usize];
            v >>= 4;
            if v == 0 {
                break;
            }
        }
        out.push_str(std::str::from_utf8(&digits[i..]).expect("hex digits"));
    }
    let mut s = String::with_capacity(36);
    s.push('"');
    hex(&mut s, mtime as u64);
    s.push('-');
    hex(&mut s, size);
    s.push('"');
    s
}

/// Parses an HTTP date (IMF-fixdate, RFC 850 or asctime).
pub fn parse_http_date(s: &str) -> Option<i64> {
    let t = httpdate::parse_http_date(s.trim()).ok()?;
    Some(t.duration_since(UNIX_EPOCH).ok()?.as_secs() as i64)
}

/// NGINX's list match of `etag` in an If-Match / If-None-Match value;
/// `weak` allows a `W/` prefix on the listed tags. `*` matches even a
/// response without an ETag.
fn etag_matches(value: &str, etag: Option<&str>, weak: bool) -> bool {
    if value == "*" {
        return true;
    }
    let Some(etag) = etag else {
        return false;
    };
    value.split(',').any(|item| {
        let mut t = item.trim_matches([' ', '\t']);
        if weak {
            t = t.strip_prefix("W/").unwrap_or(t);
        }
        t == etag
    })
}

/// Evaluates the preconditions for a 200 response with validators `etag`
/// (None under `etag off` or for a generated body) and `mtime` (None when
/// the response has no `Last-Modified`). `header` looks up a request
/// header by its lowercase name.
pub fn evaluate<'a>(
    header: impl Fn(&str) -> Option<&'a str>,
    etag: Option<&str>,
    mtime: Option<i64>,
    ims_mode: ImsMode,
) -> Precondition {
    if let Some(v) = header("if-unmodified-since") {
        // An unparsable date, or no date to compare with, fails the test,
        // as in NGINX.
        match (parse_http_date(v), mtime) {
            (Some(t), Some(m)) if t >= m => {}
            _ => return Precondition::Failed,
        }
    }
    if let Some(v) = header("if-match") {
        if !etag_matches(v, etag, false) {
            return Precondition::Failed;
        }
    }
    let ims = header("if-modified-since");
    let inm = header("if-none-match");
    if ims.is_none() && inm.is_none() {
        return Precondition::Proceed;
    }
    if let Some(v) = ims {
        let modified = match (ims_mode, mtime) {
            (ImsMode::Off, _) | (_, None) => true,
            (ImsMode::Exact, Some(m)) => parse_http_date(v) != Some(m),
            (ImsMode::Before, Some(m)) => !matches!(parse_http_date(v), Some(t) if t >= m),
        };
        if modified {
            return Precondition::Proceed;
        }
    }
    if let Some(v) = inm {
        if !etag_matches(v, etag, true) {
            return Precondition::Proceed;
        }
    }
    Precondition::NotModified
}

/// Whether an If-Range value still matches the entity (a quoted value is
/// an ETag compared exactly, anything else a date compared exactly; without
/// the validator nothing matches).
pub fn if_range_matches(value: &str, etag: Option<&str>, mtime: Option<i64>) -> bool {
    if value.len() >= 2 && value.ends_with('"') {
        return etag == Some(value);
    }
    mtime.is_some() && parse_http_date(value) == mtime
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etag_is_hex_mtime_dash_size() {
        assert_eq!(etag(1_600_000_000, 27), "\"5f5e1000-1b\"");
        assert_eq!(etag(0, 0), "\"0-0\"");
        assert_eq!(
            etag(-1, u64::MAX),
            format!("\"{:x}-{:x}\"", -1i64, u64::MAX)
        );
    }

    const MTIME: i64 = 1_795_000_000;

    /// A request's header lookup over `pairs`.
    fn h<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<&'a str> {
        |name| {
            pairs
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| *v)
        }
    }

    fn eval(pairs: &[(&str, &str)]) -> Precondition {
        let e = etag(MTIME, 27);
        evaluate(h(pairs), Some(&e), Some(MTIME), ImsMode::Exact)
    }

    #[test]
    fn etag_format() {
        assert_eq!(etag(0x6b035ae9, 27), "\"6b035ae9-1b\"");
    }

    #[test]
    fn none_match_and_modified_since() {
        let e = etag(MTIME, 27);
        let date = crate::util::time::http_date(MTIME);
        assert_eq!(eval(&[]), Precondition::Proceed);
        assert_eq!(eval(&[("If-None-Match", &e)]), Precondition::NotModified);
        assert_eq!(
            eval(&[("If-None-Match", &format!("\"x\", W/{e}"))]),
            Precondition::NotModified
        );
        assert_eq!(eval(&[("If-None-Match", "*")]), Precondition::NotModified);
        assert_eq!(
            eval(&[("If-None-Match", "\"other\"")]),
            Precondition::Proceed
        );
        assert_eq!(
            eval(&[("If-Modified-Since", &date)]),
            Precondition::NotModified
        );
        let later = crate::util::time::http_date(MTIME + 10);
        assert_eq!(
            eval(&[("If-Modified-Since", &later)]),
            Precondition::Proceed
        ); // exact
        let e2 = etag(MTIME, 27);
        assert_eq!(
            evaluate(
                h(&[("If-Modified-Since", &later)]),
                Some(&e2),
                Some(MTIME),
                ImsMode::Before
            ),
            Precondition::NotModified
        );
        // Both present: both must say not modified.
        assert_eq!(
            eval(&[("If-Modified-Since", &date), ("If-None-Match", "\"x\"")]),
            Precondition::Proceed
        );
    }

    #[test]
    fn match_and_unmodified_since() {
        let e = etag(MTIME, 27);
        assert_eq!(eval(&[("If-Match", &e)]), Precondition::Proceed);
        assert_eq!(eval(&[("If-Match", "\"zz\"")]), Precondition::Failed);
        assert_eq!(
            eval(&[("If-Match", &format!("W/{e}"))]),
            Precondition::Failed
        ); // strong
        let before = crate::util::time::http_date(MTIME - 1);
        assert_eq!(
            eval(&[("If-Unmodified-Since", &before)]),
            Precondition::Failed
        );
        assert_eq!(
            eval(&[("If-Unmodified-Since", "garbage")]),
            Precondition::Failed
        );
        let same = crate::util::time::http_date(MTIME);
        assert_eq!(
            eval(&[("If-Unmodified-Since", &same)]),
            Precondition::Proceed
        );
        // etag off: If-Match fails, except `*`.
        assert_eq!(
            evaluate(
                h(&[("If-Match", "\"x\"")]),
                None,
                Some(MTIME),
                ImsMode::Exact
            ),
            Precondition::Failed
        );
        assert_eq!(
            evaluate(h(&[("If-Match", "*")]), None, Some(MTIME), ImsMode::Exact),
            Precondition::Proceed
        );
    }

    #[test]
    fn without_validators() {
        // `return 200 text`: no Last-Modified, no ETag.
        let ev = |pairs: &[(&str, &str)]| evaluate(h(pairs), None, None, ImsMode::Exact);
        assert_eq!(ev(&[("If-None-Match", "*")]), Precondition::NotModified);
        assert_eq!(ev(&[("If-None-Match", "\"x\"")]), Precondition::Proceed);
        let date = crate::util::time::http_date(MTIME);
        assert_eq!(ev(&[("If-Modified-Since", &date)]), Precondition::Proceed);
        assert_eq!(ev(&[("If-Unmodified-Since", &date)]), Precondition::Failed);
        assert_eq!(ev(&[("If-Match", "*")]), Precondition::Proceed);
        assert!(!if_range_matches(&date, None, None));
    }

    #[test]
    fn if_range() {
        let e = etag(MTIME, 27);
        assert!(if_range_matches(&e, Some(&e), Some(MTIME)));
        assert!(!if_range_matches("\"zz\"", Some(&e), Some(MTIME)));
        assert!(if_range_matches(
            &crate::util::time::http_date(MTIME),
            Some(&e),
            Some(MTIME)
        ));
        assert!(!if_range_matches(
            &crate::util::time::http_date(MTIME + 1),
            Some(&e),
            Some(MTIME)
        ));
    }
}
