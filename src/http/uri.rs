//! Request-target handling: splitting off the query (and a fragment, which
//! NGINX drops with everything after it), and NGINX's URI normalisation (percent-decoding, duplicate slashes merged, `.` and `..`
//! resolved). A URI that would climb above `/` is refused (400), so a file
//! path built from root + URI can never leave the root. Also the escaping
//! of `rewrite` targets ([`escape_args`], [`unescape_redirect`]).

use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};

/// Why a URI was refused (always a 400).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UriError {
    /// `%` not followed by two hex digits.
    BadEscape,
    /// A decoded NUL byte.
    Nul,
    /// `..` above the root.
    AboveRoot,
    /// Decoded bytes are not UTF-8 (porter keeps URIs as text).
    NotUtf8,
}

/// Splits a target into path and arguments; absolute-form targets
/// (`http://host/p`) yield their path. A `#` ends both.
pub fn split_target(target: &str) -> (&str, Option<&str>) {
    let target = target.split('#').next().unwrap_or(target);
    let mut t = target;
    if let Some(n) = scheme_len(t) {
        // `scheme_len` counts ASCII bytes only: `n` is a character
        // boundary whatever UTF-8 follows (a fuzzing find: a target like
        // `/pytho€` once panicked here).
        let rest = &t[n..];
        match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => t = &rest[i..],
            // "http://h?x" or "http://?x": the path "/" is implied.
            Some(_) => return ("/", target.split_once('?').map(|(_, a)| a)),
            None => t = "/",
        }
    }
    match t.split_once('?') {
        Some((p, a)) => (p, Some(a)),
        None => (t, None),
    }
}

/// The length of `scheme://` at the start of an absolute-form target, as
/// NGINX's request-line parser reads it: a letter, then letters, digits,
/// `+`, `-` or `.` (any scheme, not only `http`).
pub fn scheme_len(target: &str) -> Option<usize> {
    let b = target.as_bytes();
    if !b.first()?.is_ascii_alphabetic() {
        return None;
    }
    let n = b
        .iter()
        .position(|&c| !(c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.')))?;
    b[n..].starts_with(b"://").then_some(n + 3)
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Decodes and normalises a path as NGINX does (`merge_slashes on`).
pub fn normalize(path: &str) -> Result<String, UriError> {
    normalize_with(path, true)
}

/// [`normalize`], keeping repeated slashes when `merge_slashes` is off (a
/// `..` then removes one empty segment, as NGINX's parser does).
pub fn normalize_with(path: &str, merge_slashes: bool) -> Result<String, UriError> {
    if is_normal(path) {
        return Ok(path.to_string());
    }
    normalize_general(path, merge_slashes)
}

/// [`normalize_with`] for any path: decode, then resolve the segments.
fn normalize_general(path: &str, merge_slashes: bool) -> Result<String, UriError> {
    let raw = path.as_bytes();
    let mut decoded = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'%' {
            let h = raw.get(i + 1).copied().and_then(hex);
            let l = raw.get(i + 2).copied().and_then(hex);
            match (h, l) {
                (Some(h), Some(l)) => decoded.push(h << 4 | l),
                _ => return Err(UriError::BadEscape),
            }
            i += 3;
        } else {
            decoded.push(raw[i]);
            i += 1;
        }
    }
    if decoded.contains(&0) {
        return Err(UriError::Nul);
    }
    let decoded = String::from_utf8(decoded).map_err(|_| UriError::NotUtf8)?;
    let trailing_slash = decoded.ends_with('/')
        || decoded.ends_with("/.")
        || decoded.ends_with("/..")
        || decoded == "."
        || decoded == "..";
    let mut segs: Vec<&str> = Vec::new();
    let last = decoded.split('/').count() - 1;
    for (i, seg) in decoded.split('/').enumerate() {
        match seg {
            "" if !merge_slashes && i != 0 && i != last => segs.push(""),
            "" | "." => {}
            ".." => {
                if segs.pop().is_none() {
                    return Err(UriError::AboveRoot);
                }
            }
            s => segs.push(s),
        }
    }
    let mut out = String::with_capacity(decoded.len() + 1);
    for s in &segs {
        out.push('/');
        out.push_str(s);
    }
    if trailing_slash || out.is_empty() {
        out.push('/');
    }
    Ok(out)
}

/// Whether `path` is its own normal form, which most request paths are:
/// it starts with `/` and holds no `%`, NUL, `//` or segment starting
/// with `.` (so no `.` or `..`). One pass and no allocation, where the
/// general case decodes, splits and joins.
fn is_normal(path: &str) -> bool {
    let mut prev = 0;
    path.starts_with('/')
        && path.bytes().all(|b| {
            let ok = b != b'%' && b != 0 && !(prev == b'/' && (b == b'/' || b == b'.'));
            prev = b;
            ok
        })
}

/// Characters percent-escaped in a `Location` built from a URI.
const LOCATION: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'\\')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}')
    .add(0x7f);

/// Escapes a decoded path for use in a `Location` header.
pub fn escape_for_location(path: &str) -> String {
    utf8_percent_encode(path, LOCATION).to_string()
}

/// NGINX's `ngx_http_parse_unsafe_uri`, for a URI an upstream names
/// (`X-Accel-Redirect`) or a subrequest's target: splits off the
/// arguments and percent-decodes the path; `None` when it is unsafe —
/// empty, `..` as a whole segment, a NUL, or not UTF-8 once decoded.
pub fn parse_unsafe_uri(value: &str) -> Option<(String, Option<String>)> {
    let (path, args) = match value.split_once('?') {
        Some((p, a)) => (p, Some(a.to_string())),
        None => (value, None),
    };
    if path.is_empty() {
        return None;
    }
    let decoded = percent_encoding::percent_decode_str(path).collect::<Vec<u8>>();
    let unsafe_dots = decoded
        .split(|&b| b == b'/')
        .enumerate()
        .any(|(i, seg)| seg == b".." && (i > 0 || decoded.starts_with(b"..")));
    if decoded.contains(&0) || unsafe_dots {
        return None;
    }
    String::from_utf8(decoded).ok().map(|p| (p, args))
}

/// What NGINX's `NGX_ESCAPE_ARGS` escapes: space, `#`, `%`, `&`, `+`,
/// `;`, `?`, controls (and every byte above 0x7e, as any percent-encoding).
const ARGS: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'#')
    .add(b'%')
    .add(b'&')
    .add(b'+')
    .add(b';')
    .add(b'?');

/// A decoded value made fit for a query string (NGINX's
/// `ngx_escape_uri(..., NGX_ESCAPE_ARGS)`): what a regex capture becomes in
/// a `rewrite` replacement's arguments, or anywhere in a redirect's, when
/// the request's URI was escaped.
pub fn escape_args(value: &str) -> String {
    utf8_percent_encode(value, ARGS).to_string()
}

/// NGINX's `ngx_unescape_uri(..., NGX_UNESCAPE_REDIRECT)`, which a
/// `rewrite ... redirect` target passes through before its arguments are
/// added: an escape of a printable character above `%` is decoded, any
/// other stays escaped, and the first `?` (written, or decoded from
/// `%3F`) ends the decoding, the rest kept as it is. A `%` without two
/// hex digits is dropped as NGINX drops it.
pub fn unescape_redirect(s: &str) -> String {
    let b = s.as_bytes();
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'?' {
            out.extend_from_slice(&b[i..]);
            break;
        }
        if c != b'%' {
            out.push(c);
            i += 1;
            continue;
        }
        let Some(high) = b.get(i + 1).and_then(|&h| hex(h)) else {
            // NGINX writes the character after a lone `%`.
            out.extend(b.get(i + 1));
            i += 2;
            continue;
        };
        let Some(low) = b.get(i + 2).and_then(|&l| hex(l)) else {
            i += 3;
            continue;
        };
        let ch = high << 4 | low;
        i += 3;
        if ch == b'?' {
            out.push(ch);
            out.extend_from_slice(&b[i..]);
            break;
        }
        if ch > b'%' && ch < 0x7f {
            out.push(ch);
        } else {
            out.extend_from_slice(&b[i - 3..i]);
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_targets_unescape_as_nginx() {
        assert_eq!(
            unescape_redirect("http%3A%2F%2Fexample.com%2F%3Ffrom%3Dblah"),
            "http://example.com/?from%3Dblah"
        );
        assert_eq!(
            unescape_redirect("http%3A%2F%2Fexample.com%0D%0Asplit"),
            "http://example.com%0D%0Asplit"
        );
        assert_eq!(unescape_redirect("/a%20b?c=%2F"), "/a%20b?c=%2F");
        assert_eq!(escape_args("/a b%&"), "/a%20b%25%26");
    }

    #[test]
    fn split() {
        assert_eq!(split_target("/a?b=1"), ("/a", Some("b=1")));
        assert_eq!(split_target("/a"), ("/a", None));
        assert_eq!(split_target("http://h:1/x?y"), ("/x", Some("y")));
        assert_eq!(split_target("HTTP://h"), ("/", None));
        assert_eq!(split_target("/a.txt#frag"), ("/a.txt", None));
        assert_eq!(split_target("/a?x=1#frag"), ("/a", Some("x=1")));
        assert_eq!(split_target("/a#f?x=1"), ("/a", None));
    }

    #[test]
    fn split_takes_any_utf8_and_a_bare_scheme() {
        // Found by fuzzing (fuzz/corpus/uri/crash-d183…): a multibyte
        // character across byte 7 (or 8) panicked in the scheme check.
        assert_eq!(split_target("/pytho€?a9b"), ("/pytho€", Some("a9b")));
        assert_eq!(split_target("/pyth€"), ("/pyth€", None));
        assert_eq!(split_target("/€€€"), ("/€€€", None));
        // Nothing between the scheme and `?` (`rest[i - 1..i]` with i = 0),
        // or a multibyte host before it.
        assert_eq!(split_target("http://?x"), ("/", Some("x")));
        assert_eq!(split_target("https://hé?x"), ("/", Some("x")));
        assert_eq!(split_target("http://h?x"), ("/", Some("x")));
    }

    #[test]
    fn merge_slashes_off_keeps_them() {
        assert_eq!(normalize_with("/a//b///c", false).unwrap(), "/a//b///c");
        assert_eq!(normalize_with("/a//", false).unwrap(), "/a//");
        assert_eq!(normalize_with("/a//../b", false).unwrap(), "/a/b");
        assert_eq!(normalize_with("//", false).unwrap(), "//");
        assert_eq!(normalize_with("/a//b", true).unwrap(), "/a/b");
    }

    #[test]
    fn normalizes_like_nginx() {
        assert_eq!(normalize("/a//b/./c").unwrap(), "/a/b/c");
        assert_eq!(normalize("/a/b/../c").unwrap(), "/a/c");
        assert_eq!(normalize("/dir%2f..%2fa.txt").unwrap(), "/a.txt");
        assert_eq!(normalize("/%2e%2e/x").unwrap_err(), UriError::AboveRoot);
        assert_eq!(normalize("/a/..").unwrap(), "/");
        assert_eq!(normalize("/a/.").unwrap(), "/a/");
        assert_eq!(normalize("/a/").unwrap(), "/a/");
        assert_eq!(normalize("/%41b").unwrap(), "/Ab");
        assert_eq!(normalize("/sp%20ace").unwrap(), "/sp ace");
    }

    #[test]
    fn refuses_escapes_from_root_and_bad_bytes() {
        assert_eq!(normalize("/../a").unwrap_err(), UriError::AboveRoot);
        assert_eq!(normalize("/d/../../a").unwrap_err(), UriError::AboveRoot);
        assert_eq!(normalize("/a%00b").unwrap_err(), UriError::Nul);
        assert_eq!(normalize("/a%zz").unwrap_err(), UriError::BadEscape);
        assert_eq!(normalize("/a%4").unwrap_err(), UriError::BadEscape);
        assert_eq!(normalize("/%ff").unwrap_err(), UriError::NotUtf8);
    }

    #[test]
    fn a_path_taken_as_normal_is_what_normalising_makes_of_it() {
        // Every path of up to five characters over an alphabet that can
        // spell escapes, dot segments and repeated slashes.
        let alphabet = ['/', '.', 'a', '%', '2', 'e', '\0'];
        let mut paths = vec![String::new()];
        let mut normal = 0;
        for _ in 0..5 {
            let longer: Vec<String> = paths
                .iter()
                .flat_map(|p| alphabet.iter().map(move |c| format!("{p}{c}")))
                .collect();
            for p in &longer {
                for merge in [true, false] {
                    let general = normalize_general(p, merge);
                    if is_normal(p) {
                        normal += 1;
                        assert_eq!(general.as_deref(), Ok(p.as_str()), "{p:?}");
                    }
                    assert_eq!(normalize_with(p, merge), general, "{p:?}");
                }
            }
            paths = longer;
        }
        assert!(normal > 100);
        assert!(is_normal("/1k.bin") && is_normal("/") && is_normal("/a/b/"));
        assert!(!is_normal("/a/.b") && !is_normal("a") && !is_normal("/a//b"));
    }

    #[test]
    fn location_escape() {
        assert_eq!(escape_for_location("/a b/ü?"), "/a%20b/%C3%BC%3F");
    }

    #[test]
    fn unsafe_uris_are_refused_as_nginx_refuses_them() {
        let ok = |v: &str| parse_unsafe_uri(v);
        assert_eq!(ok("/f/a.txt"), Some(("/f/a.txt".into(), None)));
        assert_eq!(
            ok("/f/a%20b?x=1"),
            Some(("/f/a b".into(), Some("x=1".into())))
        );
        assert_eq!(ok("/a..b/c"), Some(("/a..b/c".into(), None)));
        assert_eq!(ok(""), None);
        assert_eq!(ok("?x"), None);
        assert_eq!(ok("/../etc/passwd"), None);
        assert_eq!(ok("/a/.."), None);
        assert_eq!(ok("/a/%2e%2e/b"), None);
        assert_eq!(ok("../x"), None);
        assert_eq!(ok("/a%00b"), None);
    }
}
