//! The values of variables the configuration defines (`split_clients`,
//! `map`, `geo`) or a module's directives decide (`$invalid_referer`),
//! rendered for a request:
//! kept out of `context.rs` so each module adds its arm here.

use super::context::RequestCtx;
use crate::vars::template::Var;

impl RequestCtx {
    /// Appends the value of a configuration-defined variable.
    pub(super) fn append_defined(&self, var: &Var, out: &mut String) {
        match var {
            Var::Split(sc) => sc.append(self, out),
            Var::Map(m) => m.append(self, out),
            Var::Geo(g) => g.append(self, out),
            Var::InvalidReferer => {
                if let Some(rules) = &self.loc.s.valid_referers {
                    let server = &self.server;
                    if !rules.is_valid(self.header("referer"), &|h| server.has_name(h)) {
                        out.push('1');
                    }
                }
            }
            _ => {}
        }
    }
}
