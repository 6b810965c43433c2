//! Location selection as NGINX's `ngx_http_core_find_location` does it.
//!
//! At each level (the server, or the inside of a location with nested
//! locations):
//!
//! 1. an exact location (`= /x`) naming the URI wins at once;
//! 2. else a prefix location whose name is the URI is taken;
//! 3. else, if the URI plus `/` names a prefix or exact location whose
//!    handler is `proxy_pass`, NGINX's automatic 301 to that name;
//! 4. else the longest matching prefix is remembered.
//!
//! A remembered prefix with nested locations is searched the same way; an
//! exact match (or automatic redirect) down there ends the search. Then,
//! unless the remembered prefix is `^~`, the regex locations of the level
//! are tried in the order written, and the first that matches wins (after
//! a search of its own nested locations). Nothing matching leaves the
//! longest prefix, or the server level.
//!
//! Named locations (`@name`) are never searched: `error_page` and
//! `try_files` jump to them by name. Every regex was compiled when the
//! configuration was loaded.

use std::collections::HashMap;
use std::sync::Arc;

use super::model::LocationConf;
use crate::vars::regex::{Regex, RegexSet};

/// The locations of one level, arranged for lookup.
#[derive(Debug, Default)]
pub struct LocationTree {
    /// `location = /x`.
    pub exact: HashMap<String, Arc<LocationConf>>,
    /// Prefix locations (`/x`, `^~ /x`), longest first.
    pub prefixes: Vec<Arc<LocationConf>>,
    /// Regex locations (`~`, `~*`), in configuration order.
    pub regexes: Vec<Arc<LocationConf>>,
    /// Some location of the level redirects automatically (spares the
    /// scan for the common case).
    pub auto_redirects: bool,
    /// The regexes of `regexes`, run in one pass (see [`RegexSet`]).
    pub regex_set: Option<RegexSet>,
}

/// A location's `limit_except`: a request whose method is not
/// `allowed` runs under `loc` (the block's directives over the
/// location's), as NGINX's `ngx_http_update_location_config` switches
/// `r->loc_conf`.
#[derive(Debug)]
pub struct LimitExcept {
    /// The methods named (upper case; `HEAD` with `GET`).
    pub allowed: Vec<String>,
    /// The block's location.
    pub loc: Arc<LocationConf>,
}

impl LimitExcept {
    /// The block's location when `method` is not allowed.
    pub fn for_method(&self, method: &str) -> Option<&Arc<LocationConf>> {
        (!self.allowed.iter().any(|m| m == method)).then_some(&self.loc)
    }
}

/// How a search ended (NGINX's return codes of the same name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rc {
    /// An exact or regex match: final.
    Ok,
    /// The automatic redirect to the location's name.
    Done,
    /// Nothing matched at this level.
    Declined,
}

/// The result of a search.
#[derive(Debug)]
pub enum Found {
    /// The location to run (`None`: the server level).
    Location(Option<Arc<LocationConf>>),
    /// NGINX's automatic 301 to `URI/` for a location ending in `/` whose
    /// handler is `proxy_pass`; the location is the one named.
    Redirect(Arc<LocationConf>),
}

impl LocationTree {
    /// Combines the level's regexes into one set (once the level is
    /// complete).
    pub fn combine_regexes(&mut self) {
        let res: Vec<&Regex> = self
            .regexes
            .iter()
            .filter_map(|l| l.regex.as_deref())
            .collect();
        self.regex_set = match res.len() == self.regexes.len() {
            true => RegexSet::new(&res),
            false => None,
        };
    }

    /// True when the level has no locations at all.
    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.prefixes.is_empty() && self.regexes.is_empty()
    }

    /// Finds the location for `uri`; `matches` runs a regex against the
    /// URI (and keeps its captures, as the request's).
    pub fn find(&self, uri: &str, matches: &mut dyn FnMut(&Regex) -> bool) -> Found {
        match self.search(uri, matches) {
            (Rc::Done, Some(l)) => Found::Redirect(l),
            (_, l) => Found::Location(l),
        }
    }

    fn search(
        &self,
        uri: &str,
        matches: &mut dyn FnMut(&Regex) -> bool,
    ) -> (Rc, Option<Arc<LocationConf>>) {
        let mut found = None;
        let mut noregex = false;
        let rc = match self.find_static(uri) {
            Static::Exact(l) => return (Rc::Ok, Some(l)),
            Static::Redirect(l) => return (Rc::Done, Some(l)),
            Static::Prefix(l) => {
                noregex = l.noregex;
                let (rc, inner) = l.nested.search(uri, matches);
                found = Some(inner.unwrap_or(l));
                if matches!(rc, Rc::Ok | Rc::Done) {
                    return (rc, found);
                }
                rc
            }
            Static::None => Rc::Declined,
        };
        if !noregex && !self.regexes.is_empty() {
            let candidates = self.regex_set.as_ref().map(|s| s.candidates(uri));
            for (i, l) in self.regexes.iter().enumerate() {
                let Some(re) = &l.regex else { continue };
                if candidates.as_ref().is_some_and(|c| !c.may_match(i)) {
                    continue;
                }
                if matches(re) {
                    // NGINX ends here whatever the nested search says.
                    let (_, inner) = l.nested.search(uri, matches);
                    return (Rc::Ok, Some(inner.unwrap_or_else(|| Arc::clone(l))));
                }
            }
        }
        (rc, found)
    }

    fn find_static(&self, uri: &str) -> Static {
        if let Some(l) = self.exact.get(uri) {
            return Static::Exact(Arc::clone(l));
        }
        if let Some(l) = self.prefixes.iter().find(|l| l.path == uri) {
            return Static::Prefix(Arc::clone(l));
        }
        if !self.auto_redirects {
            return self.longest_prefix(uri);
        }
        let slashed = |l: &&Arc<LocationConf>| {
            l.auto_redirect
                && l.path.len() == uri.len() + 1
                && l.path.ends_with('/')
                && l.path.starts_with(uri)
        };
        if let Some(l) = self.exact.values().find(slashed) {
            return Static::Redirect(Arc::clone(l));
        }
        if let Some(l) = self.prefixes.iter().find(slashed) {
            return Static::Redirect(Arc::clone(l));
        }
        self.longest_prefix(uri)
    }

    fn longest_prefix(&self, uri: &str) -> Static {
        match self
            .prefixes
            .iter()
            .find(|l| uri.starts_with(l.path.as_str()))
        {
            Some(l) => Static::Prefix(Arc::clone(l)),
            None => Static::None,
        }
    }
}

enum Static {
    Exact(Arc<LocationConf>),
    Redirect(Arc<LocationConf>),
    Prefix(Arc<LocationConf>),
    None,
}

/// A server's `@name` locations.
pub type NamedLocations = HashMap<String, Arc<LocationConf>>;
