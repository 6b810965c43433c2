//! The values of variables the configuration defines (`split_clients`,
//! `map`, `geo`) or a module's directives decide, rendered for a request:
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
            _ => {}
        }
    }
}
