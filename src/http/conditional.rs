//! Conditional requests, with the order and comparisons of NGINX's
//! not-modified filter: If-Unmodified-Since, then If-Match (412 on
//! failure), then If-Modified-Since / If-None-Match (304 only when every one
//! present says "not modified"). Also If-Range and the ETag format.

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
    format!("\"{:x}-{:x}\"", mtime, size)
}

/// Parses an HTTP date (IMF-fixdate, RFC 850 or asctime).
pub fn parse_http_date(s: &str) -> Option<i64> {
    let t = httpdate::parse_http_date(s.trim()).ok()?;
    Some(t.duration_since(UNIX_EPOCH).ok()?.as_secs() as i64)
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// NGINX's list match of `etag` in an If-Match / If-None-Match value;
/// `weak` allows a `W/` prefix on the listed tags.
fn etag_matches(value: &str, etag: Option<&str>, weak: bool) -> bool {
    let Some(etag) = etag else {
        return false;
    };
    if value == "*" {
        return true;
    }
    value.split(',').any(|item| {
        let mut t = item.trim_matches([' ', '\t']);
        if weak {
            t = t.strip_prefix("W/").unwrap_or(t);
        }
        t == etag
    })
}

/// Evaluates the preconditions for a 200 response with validators `etag`
/// (None under `etag off`) and `mtime`.
pub fn evaluate(
    headers: &[(String, String)],
    etag: Option<&str>,
    mtime: i64,
    ims_mode: ImsMode,
) -> Precondition {
    if let Some(v) = header(headers, "if-unmodified-since") {
        // An unparsable date fails the test, as in NGINX.
        match parse_http_date(v) {
            Some(t) if t >= mtime => {}
            _ => return Precondition::Failed,
        }
    }
    if let Some(v) = header(headers, "if-match") {
        if !etag_matches(v, etag, false) {
            return Precondition::Failed;
        }
    }
    let ims = header(headers, "if-modified-since");
    let inm = header(headers, "if-none-match");
    if ims.is_none() && inm.is_none() {
        return Precondition::Proceed;
    }
    if let Some(v) = ims {
        let modified = match ims_mode {
            ImsMode::Off => true,
            ImsMode::Exact => parse_http_date(v) != Some(mtime),
            ImsMode::Before => !matches!(parse_http_date(v), Some(t) if t >= mtime),
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
/// an ETag compared exactly, anything else a date compared exactly).
pub fn if_range_matches(value: &str, etag: Option<&str>, mtime: i64) -> bool {
    if value.len() >= 2 && value.ends_with('"') {
        return etag == Some(value);
    }
    parse_http_date(value) == Some(mtime)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MTIME: i64 = 1_795_000_000;

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    fn eval(pairs: &[(&str, &str)]) -> Precondition {
        let e = etag(MTIME, 27);
        evaluate(&h(pairs), Some(&e), MTIME, ImsMode::Exact)
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
                &h(&[("If-Modified-Since", &later)]),
                Some(&e2),
                MTIME,
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
        // etag off: If-Match always fails.
        assert_eq!(
            evaluate(&h(&[("If-Match", "*")]), None, MTIME, ImsMode::Exact),
            Precondition::Failed
        );
    }

    #[test]
    fn if_range() {
        let e = etag(MTIME, 27);
        assert!(if_range_matches(&e, Some(&e), MTIME));
        assert!(!if_range_matches("\"zz\"", Some(&e), MTIME));
        assert!(if_range_matches(
            &crate::util::time::http_date(MTIME),
            Some(&e),
            MTIME
        ));
        assert!(!if_range_matches(
            &crate::util::time::http_date(MTIME + 1),
            Some(&e),
            MTIME
        ));
    }
}
