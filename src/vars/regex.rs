//! NGINX's regular expressions (`location ~`, `server_name ~`, `rewrite`,
//! `if (… ~ …)`, `map` entries), compiled once per configuration load.
//!
//! NGINX uses PCRE; porter uses `fancy-regex`, which hands every pattern
//! without PCRE-only constructs to the `regex` crate's automata (linear
//! time) and runs the rest — lookahead `(?=…)`/`(?!…)`, lookbehind
//! `(?<=…)`/`(?<!…)`, backreferences `\1`/`\k<name>`, atomic groups `(?>…)`,
//! possessive quantifiers `a*+` — with a bounded backtracking VM. Named
//! groups are written `(?<name>…)` or `(?P<name>…)` as in PCRE; `~*`
//! compiles caseless. Differences from PCRE (see docs/differences.md):
//! `\w`, `\d`, `\s` and `\b` are Unicode-aware, `$` matches only at the
//! very end (not before a final newline), and `(?'name'…)`,
//! recursion `(?R)` and callouts are not supported (`\Q…\E`, which
//! neither crate has, is turned into the escaped text it quotes) — such a pattern is a
//! configuration error, reported as NGINX reports a PCRE compile error.
//!
//! A match yields [`Captures`]: `$0`…`$9` read them, and each named group
//! becomes the variable of that name (NGINX's named captures).

use std::sync::Arc;

use super::template;

/// How many backtracking steps a PCRE-only pattern may take per match
/// before porter gives up on it (treated as "does not match").
const BACKTRACK_LIMIT: usize = 1_000_000;

/// One compiled regular expression.
#[derive(Debug)]
pub struct Regex {
    re: fancy_regex::Regex,
    raw: String,
    caseless: bool,
    /// Number of capture groups (without group 0).
    groups: usize,
    /// Named groups: (group number, the variable it sets).
    named: Vec<(usize, Arc<template::Indexed>)>,
}

impl PartialEq for Regex {
    fn eq(&self, other: &Regex) -> bool {
        self.raw == other.raw
    }
}

impl Eq for Regex {}

/// What the last successful match with capture groups left: `$N` is
/// `subject[spans[N]]`.
#[derive(Debug, Default, Clone)]
pub struct Captures {
    /// The string matched.
    pub subject: String,
    /// Byte ranges of group 0 (the whole match) and each group; `None` for
    /// a group that did not take part.
    pub spans: Vec<Option<(usize, usize)>>,
}

impl Captures {
    /// `$n`, empty when the group did not match or does not exist.
    pub fn get(&self, n: usize) -> &str {
        match self.spans.get(n) {
            Some(Some((a, b))) => &self.subject[*a..*b],
            _ => "",
        }
    }
}

/// A successful match: its captures (when the pattern has groups) and the
/// values of its named groups.
pub struct Matched {
    /// The new captures (none for a pattern without groups).
    pub captures: Option<Captures>,
    /// Values for the variables of named groups.
    pub named: Vec<(Arc<template::Indexed>, String)>,
}

impl Regex {
    /// Compiles `pattern` (`caseless` for `~*`), registering each named
    /// group as a variable. The error reads as NGINX's.
    pub fn compile(pattern: &str, caseless: bool) -> Result<Regex, String> {
        // `(?i)` written ahead rather than the builder's flag, which
        // fancy-regex lets override the pattern's own `(?-i)` (PCRE's
        // caseless option does not: `valid_referers ~(?-i)example.net`).
        let unquoted = unquote(pattern);
        let source = if caseless {
            format!("(?i){unquoted}")
        } else {
            unquoted
        };
        let re = fancy_regex::RegexBuilder::new(&source)
            .backtrack_limit(BACKTRACK_LIMIT)
            .build()
            .map_err(|e| format!("pcre2_compile() failed: {e} in \"{pattern}\""))?;
        let groups = re.captures_len().saturating_sub(1);
        let mut named = Vec::new();
        for (i, name) in re.capture_names().enumerate() {
            if let Some(name) = name {
                if name.chars().next().is_some_and(|c| c.is_ascii_digit()) {
                    return Err(format!("invalid variable name \"{name}\" in \"{pattern}\""));
                }
                named.push((i, template::declare_indexed(name)));
            }
        }
        Ok(Regex {
            re,
            raw: pattern.to_string(),
            caseless,
            groups,
            named,
        })
    }

    /// The pattern as written.
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// Number of capture groups.
    pub fn groups(&self) -> usize {
        self.groups
    }

    /// Whether `subject` matches, without captures (for patterns whose
    /// captures nobody reads).
    pub fn is_match(&self, subject: &str) -> bool {
        self.re.is_match(subject).unwrap_or(false)
    }

    /// Matches `subject`; `None` when it does not match (or the match
    /// gave up at the backtrack limit).
    pub fn exec(&self, subject: &str) -> Option<Matched> {
        if self.groups == 0 {
            // NGINX sets the capture count from every match, so `$1`… read
            // empty after one without groups.
            return self.is_match(subject).then(|| Matched {
                captures: Some(Captures::default()),
                named: Vec::new(),
            });
        }
        // A miss (the common case) costs no capture slots.
        if !self.is_match(subject) {
            return None;
        }
        let caps = self.re.captures(subject).ok()??;
        let spans = (0..=self.groups)
            .map(|i| caps.get(i).map(|m| (m.start(), m.end())))
            .collect();
        let named = self
            .named
            .iter()
            .map(|(i, v)| {
                let s = caps.get(*i).map_or("", |m| m.as_str());
                (Arc::clone(v), s.to_string())
            })
            .collect();
        Some(Matched {
            captures: Some(Captures {
                subject: subject.to_string(),
                spans,
            }),
            named,
        })
    }
}

/// `pattern` with PCRE's quoting `\Q…\E` (the text between taken
/// literally; `\E` may be left out at the end) written as escaped text,
/// which fancy-regex and the `regex` crate lack; a `\E` outside a quote
/// is dropped, as PCRE ignores it.
fn unquote(pattern: &str) -> String {
    if !pattern.contains("\\Q") && !pattern.contains("\\E") {
        return pattern.to_string();
    }
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('Q') => {
                let rest = chars.as_str();
                let (quoted, after) = rest.split_once("\\E").unwrap_or((rest, ""));
                out.push_str(&fancy_regex::escape(quoted));
                chars = after.chars();
            }
            Some('E') => {}
            Some(n) => {
                out.push('\\');
                out.push(n);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// The regexes of one level of regex locations, run together in one pass
/// of `regex-automata`'s lazy DFA: a URI is tested against all of them at
/// once, and only the first that matched (in order) runs on its own for
/// its captures. A pattern that needs fancy-regex's backtracker (lookaround,
/// backreferences) is not in the set and runs on its own, in its turn.
#[derive(Debug)]
pub struct RegexSet {
    set: regex_automata::meta::Regex,
    /// For each regex, in order: its pattern in `set`, if it is there.
    member: Vec<Option<regex_automata::PatternID>>,
}

/// Which regexes of a [`RegexSet`] may match a subject.
pub struct Candidates<'a> {
    set: &'a RegexSet,
    hits: regex_automata::PatternSet,
}

impl Candidates<'_> {
    /// Whether regex `i` (in the order given to [`RegexSet::new`]) can
    /// match: `false` only when the set pass ruled it out.
    pub fn may_match(&self, i: usize) -> bool {
        match self.set.member.get(i).copied().flatten() {
            Some(pid) => self.hits.contains(pid),
            None => true,
        }
    }
}

impl RegexSet {
    /// A set of `regexes` (`None` when fewer than two can be combined, or
    /// the combination fails: each then runs on its own).
    pub fn new(regexes: &[&Regex]) -> Option<RegexSet> {
        use regex_automata::meta;
        let mut patterns = Vec::new();
        let mut member = Vec::with_capacity(regexes.len());
        for re in regexes {
            let p = if re.caseless {
                format!("(?i:{})", re.raw)
            } else {
                format!("(?:{})", re.raw)
            };
            // Only what the automata accept on their own joins the set.
            if meta::Regex::new(&p).is_ok() {
                member.push(Some(regex_automata::PatternID::new(patterns.len()).ok()?));
                patterns.push(p);
            } else {
                member.push(None);
            }
        }
        if patterns.len() < 2 {
            return None;
        }
        let set = meta::Regex::builder()
            .configure(meta::Config::new().match_kind(regex_automata::MatchKind::All))
            .build_many(&patterns)
            .ok()?;
        Some(RegexSet { set, member })
    }

    /// One pass over `subject`.
    pub fn candidates(&self, subject: &str) -> Candidates<'_> {
        let mut hits = regex_automata::PatternSet::new(self.set.pattern_len());
        self.set
            .which_overlapping_matches(&regex_automata::Input::new(subject), &mut hits);
        Candidates { set: self, hits }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_text_matches_literally() {
        assert_eq!(
            unquote(r"^(?P<n>[a-z]+)\Q.example.com\E$"),
            r"^(?P<n>[a-z]+)\.example\.com$"
        );
        assert_eq!(unquote(r"a\Q*+"), r"a\*\+");
        assert_eq!(unquote(r"\\Q\d\E"), r"\\Q\d");
        let re = Regex::compile(r"^(?P<name>[a-z]+)\Q.example.com\E$", false).unwrap();
        assert!(re.is_match("www.example.com"));
        assert!(!re.is_match("www-example.com"));
    }

    #[test]
    fn captures_and_named_groups() {
        let re = Regex::compile(r"^/u/(?<user>\w+)/(\d+)$", false).unwrap();
        let m = re.exec("/u/bob/42").unwrap();
        let c = m.captures.unwrap();
        assert_eq!(
            (c.get(0), c.get(1), c.get(2), c.get(3)),
            ("/u/bob/42", "bob", "42", "")
        );
        assert_eq!(m.named[0].1, "bob");
        assert!(re.exec("/u/bob/x").is_none());
    }

    #[test]
    fn caseless_and_pcre_constructs() {
        let re = Regex::compile(r"\.(?:JPG|png)$", true).unwrap();
        assert!(re.is_match("/a.jpg") && re.is_match("/a.PNG"));
        // Lookahead, lookbehind and a backreference: PCRE-only syntax.
        let re = Regex::compile(r"^/(?!admin)(\w+)/\1$", false).unwrap();
        assert!(re.is_match("/ab/ab"));
        assert!(!re.is_match("/admin/admin"));
        assert!(Regex::compile(r"(?<=/x)y", false).unwrap().is_match("/xy"));
        assert!(Regex::compile("(", false)
            .unwrap_err()
            .starts_with("pcre2_compile() failed"));
    }

    #[test]
    fn a_set_rules_out_what_cannot_match() {
        let res: Vec<Regex> = [
            (r"^/a/(\d+)$", false),
            (r"\.PNG$", true),
            (r"^/(?!x)y", false),
            (r"^/b", false),
        ]
        .iter()
        .map(|(p, c)| Regex::compile(p, *c).unwrap())
        .collect();
        let set = RegexSet::new(&res.iter().collect::<Vec<_>>()).unwrap();
        let c = set.candidates("/a/12");
        assert!(c.may_match(0) && !c.may_match(1) && c.may_match(2) && !c.may_match(3));
        let c = set.candidates("/b/x.png");
        assert!(!c.may_match(0) && c.may_match(1) && c.may_match(3));
    }

    #[test]
    fn a_pattern_without_groups_clears_earlier_captures() {
        let m = Regex::compile("^/a", false).unwrap().exec("/a/b").unwrap();
        assert_eq!(m.captures.unwrap().get(1), "");
    }
}
