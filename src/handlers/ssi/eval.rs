//! What SSI commands compute, as pure functions: parameter values with
//! `$var` substitution (NGINX's `ngx_http_ssi_evaluate_string`), the
//! expression of `if`/`elif` (`ngx_http_ssi_if`), and `echo`'s encodings.

/// Looks a variable up by its (lowercased) name: `None` when it has no
/// value (NGINX's `not_found`), which differs from an empty one.
pub type Lookup<'a> = dyn Fn(&str) -> Option<String> + 'a;

/// Whether `c` may be in a variable name.
fn name_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Copies literal text, dropping a backslash before `\`, `'`, `"` or
/// `$`, up to an unescaped `$` (when `stop_at_dollar`); returns where it
/// stopped.
fn literal(text: &[u8], mut i: usize, stop_at_dollar: bool, out: &mut Vec<u8>) -> usize {
    let mut quoted = false;
    while i < text.len() {
        let c = text[i];
        if !quoted {
            if c == b'\\' {
                quoted = true;
                i += 1;
                continue;
            }
            if c == b'$' && stop_at_dollar {
                break;
            }
        } else {
            quoted = false;
            if !matches!(c, b'\\' | b'\'' | b'"' | b'$') {
                out.push(b'\\');
            }
        }
        out.push(c);
        i += 1;
    }
    i
}

/// NGINX's `ngx_http_ssi_evaluate_string`: `$name` and `${name}`
/// replaced by their values (none for one without a value), backslash
/// escapes resolved. With `prefix` (`include`'s URI, NGINX's
/// `NGX_HTTP_SSI_ADD_PREFIX`), a result not starting with `/` gets the
/// directory of that URI in front. `Err` is the line to log.
pub fn evaluate(text: &str, prefix: Option<&str>, lookup: &Lookup<'_>) -> Result<String, String> {
    let bytes = text.as_bytes();
    // The parts, each a literal or a variable's value.
    let mut parts: Vec<Vec<u8>> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'$' {
            let mut lit = Vec::new();
            i = literal(bytes, i, true, &mut lit);
            parts.push(lit);
            continue;
        }
        i += 1;
        let bracket = bytes.get(i) == Some(&b'{');
        if bracket {
            i += 1;
        }
        let start = i;
        while i < bytes.len() && name_byte(bytes[i]) {
            i += 1;
        }
        let name = &text[start..i];
        if bracket {
            if bytes.get(i) != Some(&b'}') {
                return Err(format!(
                    "the closing bracket in \"{}\" variable is missing",
                    &text[start..]
                ));
            }
            i += 1;
        }
        if name.is_empty() {
            return Err(format!("invalid variable name in \"{text}\""));
        }
        if let Some(v) = lookup(&name.to_ascii_lowercase()) {
            parts.push(v.into_bytes());
        }
    }
    let mut out = Vec::new();
    if let Some(uri) = prefix {
        let first = parts.iter().find(|p| !p.is_empty());
        if first.is_none_or(|p| p[0] != b'/') {
            if let Some(slash) = uri.rfind('/') {
                out.extend_from_slice(&uri.as_bytes()[..=slash]);
            }
        }
    }
    for p in parts {
        out.extend_from_slice(&p);
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// The right side of an `if` comparison.
#[derive(Debug, PartialEq, Eq)]
pub enum Right<'a> {
    /// Text (to evaluate), compared byte for byte.
    Text(&'a str),
    /// `/regex/`: the pattern (to evaluate), matched.
    Regex(&'a str),
}

/// An `if`/`elif` expression, split as NGINX splits it.
#[derive(Debug, PartialEq, Eq)]
pub struct Condition<'a> {
    /// The left side (lowercased, to evaluate).
    pub left: String,
    /// `None`: true when the left side evaluates non-empty; else whether
    /// the comparison is negated (`!=`), and the right side.
    pub compare: Option<(bool, Right<'a>)>,
}

/// Splits `expr` (NGINX's `ngx_http_ssi_if`): the left side runs while
/// its bytes are letters, digits, `$ { } _ " '` (lowercased); then `=`
/// or `!=`, then `/regex/` or text (`\/` at its start escapes a slash).
/// `None`: an invalid expression.
pub fn condition(expr: &str) -> Option<Condition<'_>> {
    let b = expr.as_bytes();
    let mut p = 0;
    while p < b.len()
        && (b[p].is_ascii_alphanumeric()
            || matches!(b[p], b'$' | b'{' | b'}' | b'_' | b'"' | b'\''))
    {
        p += 1;
    }
    let left = expr[..p].to_ascii_lowercase();
    while b.get(p) == Some(&b' ') {
        p += 1;
    }
    if p == b.len() {
        return Some(Condition {
            left,
            compare: None,
        });
    }
    let negative = if b[p] == b'=' {
        p += 1;
        false
    } else if b[p] == b'!' && b.get(p + 1) == Some(&b'=') {
        p += 2;
        true
    } else {
        return None;
    };
    while b.get(p) == Some(&b' ') {
        p += 1;
    }
    let last = b.len();
    let right = if p + 1 < last && b[p] == b'/' {
        if b[last - 1] != b'/' {
            return None;
        }
        Right::Regex(&expr[p + 1..last - 1])
    } else {
        if p + 1 < last && b[p] == b'\\' && b[p + 1] == b'/' {
            p += 1;
        }
        Right::Text(&expr[p..])
    };
    Some(Condition {
        left,
        compare: Some((negative, right)),
    })
}

/// `echo`'s encodings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// As is.
    None,
    /// Percent-encoded (NGINX's `NGX_ESCAPE_HTML` set).
    Url,
    /// `<`, `>`, `&`, `"` as entities (the default).
    Entity,
}

impl Encoding {
    /// The encoding named `s`, if any.
    pub fn named(s: &str) -> Option<Encoding> {
        match s {
            "none" => Some(Encoding::None),
            "url" => Some(Encoding::Url),
            "entity" => Some(Encoding::Entity),
            _ => None,
        }
    }

    /// Appends `value` encoded to `out`.
    pub fn apply(self, value: &[u8], out: &mut Vec<u8>) {
        match self {
            Encoding::None => out.extend_from_slice(value),
            Encoding::Entity => {
                for &c in value {
                    match c {
                        b'<' => out.extend_from_slice(b"&lt;"),
                        b'>' => out.extend_from_slice(b"&gt;"),
                        b'&' => out.extend_from_slice(b"&amp;"),
                        b'"' => out.extend_from_slice(b"&quot;"),
                        _ => out.push(c),
                    }
                }
            }
            Encoding::Url => {
                for &c in value {
                    let escape = !(0x20..0x7f).contains(&c)
                        || matches!(
                            c,
                            b' ' | b'"'
                                | b'#'
                                | b'%'
                                | b'\''
                                | b'<'
                                | b'>'
                                | b'\\'
                                | b'^'
                                | b'`'
                                | b'{'
                                | b'|'
                                | b'}'
                        );
                    if escape {
                        out.extend_from_slice(format!("%{c:02X}").as_bytes());
                    } else {
                        out.push(c);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(name: &str) -> Option<String> {
        match name {
            "a" => Some("A".into()),
            "empty" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn variables_are_substituted_and_escapes_resolved() {
        assert_eq!(evaluate("x$a${a}y$none", None, &vars).unwrap(), "xAAy");
        assert_eq!(evaluate(r"\$a \n \\", None, &vars).unwrap(), r"$a \n \");
        assert_eq!(evaluate("$A", None, &vars).unwrap(), "A");
        assert!(evaluate("x$", None, &vars).is_err());
        assert!(evaluate("${a", None, &vars).is_err());
    }

    #[test]
    fn a_relative_include_gets_the_uri_directory() {
        assert_eq!(
            evaluate("b.html", Some("/d/a.html"), &vars).unwrap(),
            "/d/b.html"
        );
        assert_eq!(
            evaluate("/b.html", Some("/d/a.html"), &vars).unwrap(),
            "/b.html"
        );
        assert_eq!(evaluate("$empty$a", Some("/d/"), &vars).unwrap(), "/d/A");
    }

    #[test]
    fn conditions_split_as_nginx() {
        let c = condition("$ARG_v = /re+gexp?/").unwrap();
        assert_eq!(c.left, "$arg_v");
        assert_eq!(c.compare, Some((false, Right::Regex("re+gexp?"))));
        let c = condition("equal != $arg_v").unwrap();
        assert_eq!(c.compare, Some((true, Right::Text("$arg_v"))));
        assert_eq!(condition("$a").unwrap().compare, None);
        assert_eq!(
            condition(r"$a = \/x").unwrap().compare,
            Some((false, Right::Text("/x")))
        );
        assert!(condition("$a < 1").is_none());
        assert!(condition("$a = /x").is_none());
    }

    #[test]
    fn encodings() {
        let enc = |e: Encoding, s: &str| {
            let mut out = Vec::new();
            e.apply(s.as_bytes(), &mut out);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(
            enc(Encoding::Entity, "<a&\"b\">"),
            "&lt;a&amp;&quot;b&quot;&gt;"
        );
        assert_eq!(enc(Encoding::Url, "<a b>/?=&"), "%3Ca%20b%3E/?=&");
        assert_eq!(enc(Encoding::None, "<x>"), "<x>");
    }
}
