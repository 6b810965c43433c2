//! Parsers for NGINX's scalar argument syntaxes: sizes (`512k`, `1m`),
//! times (`75s`, `1h 30m`, `500ms`) and flags (`on`/`off`).
//!
//! They return `None` on a bad value; the directive table turns that into
//! NGINX's wording (`"x" directive invalid value in FILE:LINE`).

use std::time::Duration;

/// Parses an NGINX size: a decimal number with an optional `k`/`K`, `m`/`M`
/// or `g`/`G` suffix (powers of 1024).
pub fn parse_size(s: &str) -> Option<u64> {
    let (digits, mult) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 1024u64),
        b'm' | b'M' => (&s[..s.len() - 1], 1024 * 1024),
        b'g' | b'G' => (&s[..s.len() - 1], 1024 * 1024 * 1024),
        _ => (s, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(mult)
}

/// Parses an NGINX time value. A bare number means seconds; units are `ms`,
/// `s`, `m`, `h`, `d`, `w`, `M` (30 days) and `y` (365 days), and several
/// parts may be combined, as in `1h 30m`.
pub fn parse_time(s: &str) -> Option<Duration> {
    let mut total_ms: u64 = 0;
    let mut rest = s.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let n: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let (unit_ms, unit_len) = if rest.starts_with("ms") {
            (1, 2)
        } else {
            match rest.as_bytes().first() {
                None | Some(b' ') => (1000, 0),
                Some(b's') => (1000, 1),
                Some(b'm') => (60_000, 1),
                Some(b'h') => (3_600_000, 1),
                Some(b'd') => (86_400_000, 1),
                Some(b'w') => (7 * 86_400_000, 1),
                Some(b'M') => (30 * 86_400_000, 1),
                Some(b'y') => (365 * 86_400_000, 1),
                _ => return None,
            }
        };
        total_ms = total_ms.checked_add(n.checked_mul(unit_ms)?)?;
        rest = rest[unit_len..].trim_start();
    }
    Some(Duration::from_millis(total_ms))
}

/// Parses `on` / `off`.
pub fn parse_flag(s: &str) -> Option<bool> {
    match s {
        "on" => Some(true),
        "off" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512k"), Some(512 * 1024));
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size("2g"), Some(2 << 30));
        assert_eq!(parse_size("100"), Some(100));
        assert_eq!(parse_size("k"), None);
        assert_eq!(parse_size("1.5m"), None);
        assert_eq!(parse_size("-1"), None);
        assert_eq!(parse_size(""), None);
    }

    #[test]
    fn times() {
        assert_eq!(parse_time("75"), Some(Duration::from_secs(75)));
        assert_eq!(parse_time("75s"), Some(Duration::from_secs(75)));
        assert_eq!(parse_time("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_time("1h 30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_time("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_time("2d"), Some(Duration::from_secs(172_800)));
        assert_eq!(parse_time("x"), None);
        assert_eq!(parse_time("10q"), None);
        assert_eq!(parse_time(""), None);
    }

    #[test]
    fn flags() {
        assert_eq!(parse_flag("on"), Some(true));
        assert_eq!(parse_flag("off"), Some(false));
        assert_eq!(parse_flag("yes"), None);
    }
}
