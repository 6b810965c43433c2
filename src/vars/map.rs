//! `map $source $variable { KEY VALUE; … }`: a variable whose value is
//! chosen by the value of another, evaluated only when something reads it
//! (and then kept for the rest of the request unless the map is
//! `volatile`), as NGINX's map module does.
//!
//! Lookup order is NGINX's: an exact key (compared without regard to
//! case), then with `hostnames` the longest leading wildcard
//! (`*.example.com`, `.example.com`) and the longest trailing one
//! (`www.example.*`), then the regular expressions (`~`, `~*`) in the order
//! written — whose captures the value may use — then `default` (empty when
//! none is given).

use std::collections::HashMap;
use std::sync::Arc;

use super::regex::{Matched, Regex};
use super::template::{Template, Var, VarSource};

/// One `map` block, compiled.
#[derive(Debug)]
pub struct Map {
    /// The variable's name, without `$`.
    pub name: String,
    slot: usize,
    source: Template,
    hostnames: bool,
    volatile: bool,
    exact: HashMap<String, Template>,
    /// `.example.com` suffixes (from `*.example.com` / `.example.com`),
    /// longest first; `.example.com` also matches `example.com` (kept in
    /// `exact`).
    head: Vec<(String, Template)>,
    /// `www.example.` prefixes (from `www.example.*`), longest first.
    tail: Vec<(String, Template)>,
    regexes: Vec<(Regex, Template)>,
    default: Option<Template>,
}

impl PartialEq for Map {
    fn eq(&self, other: &Map) -> bool {
        self.slot == other.slot
    }
}

impl Eq for Map {}

/// A `map` block being read.
pub struct MapBuilder {
    map: Map,
}

impl MapBuilder {
    /// A map of `source` into `$name`; `slot` caches its value per request.
    pub fn new(name: &str, source: Template, slot: usize) -> MapBuilder {
        MapBuilder {
            map: Map {
                name: name.to_string(),
                slot,
                source,
                hostnames: false,
                volatile: false,
                exact: HashMap::new(),
                head: Vec::new(),
                tail: Vec::new(),
                regexes: Vec::new(),
                default: None,
            },
        }
    }

    /// `hostnames`.
    pub fn hostnames(&mut self) {
        self.map.hostnames = true;
    }

    /// `volatile`.
    pub fn volatile(&mut self) {
        self.map.volatile = true;
    }

    /// One `KEY VALUE;` line (`default` included); errors are NGINX's.
    pub fn entry(&mut self, key: &str, value: Template) -> Result<(), String> {
        self.entry_with(key, || Ok(value))
    }

    /// [`MapBuilder::entry`] with the value compiled by `value` after a
    /// regular expression key, so the value may use its named captures
    /// (which compiling the key declares), as NGINX compiles them.
    pub fn entry_with(
        &mut self,
        key: &str,
        value: impl FnOnce() -> Result<Template, String>,
    ) -> Result<(), String> {
        let m = &mut self.map;
        if key == "default" {
            if m.default.is_some() {
                return Err("duplicate default map parameter".into());
            }
            m.default = Some(value()?);
            return Ok(());
        }
        if let Some(re) = key.strip_prefix("~*") {
            let re = Regex::compile(re, true)?;
            m.regexes.push((re, value()?));
            return Ok(());
        }
        if let Some(re) = key.strip_prefix('~') {
            let re = Regex::compile(re, false)?;
            m.regexes.push((re, value()?));
            return Ok(());
        }
        let value = value()?;
        let key = key.strip_prefix('\\').unwrap_or(key).to_ascii_lowercase();
        let conflict = || format!("conflicting parameter \"{key}\"");
        if m.hostnames {
            if let Some(rest) = key.strip_prefix("*.") {
                let suffix = format!(".{rest}");
                if m.head.iter().any(|(k, _)| *k == suffix) {
                    return Err(conflict());
                }
                m.head.push((suffix, value));
                return Ok(());
            }
            if let Some(rest) = key.strip_prefix('.') {
                if m.head.iter().any(|(k, _)| *k == key) {
                    return Err(conflict());
                }
                m.exact.insert(rest.to_string(), value.clone());
                m.head.push((key.clone(), value));
                return Ok(());
            }
            if let Some(rest) = key.strip_suffix(".*") {
                let prefix = format!("{rest}.");
                if m.tail.iter().any(|(k, _)| *k == prefix) {
                    return Err(conflict());
                }
                m.tail.push((prefix, value));
                return Ok(());
            }
        }
        if m.exact.contains_key(&key) {
            return Err(conflict());
        }
        m.exact.insert(key, value);
        Ok(())
    }

    /// The finished map.
    pub fn finish(mut self) -> Map {
        self.map
            .head
            .sort_by_key(|(k, _)| std::cmp::Reverse(k.len()));
        self.map
            .tail
            .sort_by_key(|(k, _)| std::cmp::Reverse(k.len()));
        self.map
    }
}

impl Map {
    /// Whether its source or any value reads `$sent_http_*`
    /// ([`Template::reads_sent_http`]).
    pub fn reads_sent_http(&self) -> bool {
        let values = self.exact.values();
        let wild = self.head.iter().chain(&self.tail).map(|(_, v)| v);
        let re = self.regexes.iter().map(|(_, v)| v);
        self.source.reads_sent_http()
            || values
                .chain(wild)
                .chain(re)
                .chain(&self.default)
                .any(Template::reads_sent_http)
    }

    /// The slot of the per-request table its value is cached in (NGINX's
    /// map variables are changeable: a stream `set` writes it).
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// Appends the map's value for the request `src` to `out`.
    pub fn append(&self, src: &dyn VarSource, out: &mut String) {
        if !self.volatile {
            if let Some(v) = src.slot(self.slot) {
                out.push_str(&v);
                return;
            }
        }
        let value = self.evaluate(src);
        if !self.volatile {
            src.store_slot(self.slot, &value);
        }
        out.push_str(&value);
    }

    fn evaluate(&self, src: &dyn VarSource) -> String {
        let mut key = self.source.render(src);
        if self.hostnames && key.ends_with('.') {
            key.pop();
        }
        // An empty value still looks up the exact keys (`'' close;`, the
        // standard WebSocket map), but no wildcard or regex: NGINX's
        // `ngx_http_map_find` tries those only when `len` is not 0.
        let low = key.to_ascii_lowercase();
        if let Some(v) = self.exact.get(&low) {
            return v.render(src);
        }
        if !key.is_empty() {
            if self.hostnames {
                let head = self.head.iter().find(|(k, _)| low.ends_with(k.as_str()));
                let tail = || self.tail.iter().find(|(k, _)| low.starts_with(k.as_str()));
                if let Some((_, v)) = head.or_else(tail) {
                    return v.render(src);
                }
            }
            for (re, v) in &self.regexes {
                if let Some(m) = re.exec(&key) {
                    return v.render(&WithMatch { src, m: &m });
                }
            }
        }
        self.default
            .as_ref()
            .map(|v| v.render(src))
            .unwrap_or_default()
    }
}

/// The request's variables, with `$N` and the named captures of a map's
/// own regular expression in front (also a proxy cookie rule's:
/// `upstream::cookie`).
pub struct WithMatch<'a> {
    /// The request's variables.
    pub src: &'a dyn VarSource,
    /// The match whose captures come first.
    pub m: &'a Matched,
}

impl VarSource for WithMatch<'_> {
    fn append(&self, var: &Var, out: &mut String) {
        match var {
            Var::Capture(n) => self.capture(*n, out),
            Var::Indexed(v) => match self.m.named.iter().find(|(n, _)| n.index == v.index) {
                Some((_, value)) => out.push_str(value),
                None => self.src.append(var, out),
            },
            Var::Map(m) => m.append(self, out),
            _ => self.src.append(var, out),
        }
    }

    fn slot(&self, index: usize) -> Option<String> {
        self.src.slot(index)
    }

    fn store_slot(&self, index: usize, value: &str) {
        self.src.store_slot(index, value)
    }

    fn capture(&self, n: u8, out: &mut String) {
        match &self.m.captures {
            Some(c) => out.push_str(c.get(n as usize)),
            None => self.src.capture(n, out),
        }
    }
}

/// A map as a variable.
pub fn var(map: Map) -> Var {
    Var::Map(Arc::new(map))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    struct Src {
        host: &'static str,
        slots: RefCell<HashMap<usize, String>>,
    }

    impl VarSource for Src {
        fn append(&self, var: &Var, out: &mut String) {
            if let Var::Host = var {
                out.push_str(self.host)
            }
        }
        fn slot(&self, i: usize) -> Option<String> {
            self.slots.borrow().get(&i).cloned()
        }
        fn store_slot(&self, i: usize, v: &str) {
            self.slots.borrow_mut().insert(i, v.to_string());
        }
    }

    fn lit(s: &str) -> Template {
        Template::literal(s)
    }

    fn value(m: &Map, host: &'static str) -> String {
        let src = Src {
            host,
            slots: RefCell::default(),
        };
        let mut out = String::new();
        m.append(&src, &mut out);
        out
    }

    #[test]
    fn nginx_lookup_order() {
        let mut b = MapBuilder::new("x", Template::compile("$host").unwrap(), 0);
        b.hostnames();
        b.entry("default", lit("d")).unwrap();
        b.entry("Example.COM", lit("exact")).unwrap();
        b.entry("*.example.com", lit("head")).unwrap();
        b.entry("*.a.example.com", lit("longer head")).unwrap();
        b.entry("www.example.*", lit("tail")).unwrap();
        b.entry("~^(\\w+)\\.org$", Template::compile("re $1").unwrap())
            .unwrap();
        assert_eq!(
            b.entry("example.com", lit("again")).unwrap_err(),
            "conflicting parameter \"example.com\""
        );
        let m = b.finish();
        assert_eq!(value(&m, "example.com"), "exact");
        assert_eq!(value(&m, "example.com."), "exact");
        assert_eq!(value(&m, "b.example.com"), "head");
        assert_eq!(value(&m, "b.a.example.com"), "longer head");
        assert_eq!(value(&m, "www.example.net"), "tail");
        assert_eq!(value(&m, "site.org"), "re site");
        assert_eq!(value(&m, "other"), "d");
    }

    #[test]
    fn a_map_reads_the_response_when_its_source_or_a_value_does() {
        let plain = MapBuilder::new("x", Template::compile("$host").unwrap(), 0).finish();
        assert!(!plain.reads_sent_http());
        let src = Template::compile("$sent_http_content_type").unwrap();
        assert!(MapBuilder::new("x", src, 0).finish().reads_sent_http());
        let mut b = MapBuilder::new("x", Template::compile("$host").unwrap(), 0);
        let v = Template::compile("[$sent_http_etag]").unwrap();
        b.entry("~^a", v).unwrap();
        assert!(b.finish().reads_sent_http());
    }

    #[test]
    fn an_empty_key_matches_an_empty_value_and_no_regex_does() {
        let mut b = MapBuilder::new("x", Template::compile("$host").unwrap(), 0);
        b.entry("default", lit("upgrade")).unwrap();
        b.entry("", lit("close")).unwrap();
        b.entry("~^$", lit("regex")).unwrap();
        let m = b.finish();
        assert_eq!(value(&m, ""), "close");
        assert_eq!(value(&m, "websocket"), "upgrade");
        let mut b = MapBuilder::new("x", Template::compile("$host").unwrap(), 0);
        b.entry("~.*", lit("regex")).unwrap();
        assert_eq!(value(&b.finish(), ""), "");
    }
}
