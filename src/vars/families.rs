//! Variable families beside `template.rs`'s table: `stub_status`'s
//! `$connections_*` figures, and which built-in variables `set` and
//! `auth_request_set` may give a value of their own (NGINX's changeable
//! variables).

use std::sync::Arc;

use super::template::{new_slot, Indexed, Var};

/// Which figure a `$connections_*` variable reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnCount {
    /// `$connections_active`.
    Active,
    /// `$connections_reading`.
    Reading,
    /// `$connections_writing`.
    Writing,
    /// `$connections_waiting`.
    Waiting,
}

impl Var {
    /// A built-in variable `set` (or `auth_request_set`) may give a value
    /// of its own: the prefixed families (NGINX adds `set $http_foo` as a
    /// variable of its own, which reads the header until it is set).
    pub fn changeable(&self) -> bool {
        matches!(
            self,
            Var::Arg(_)
                | Var::Http(_)
                | Var::SentHttp(_)
                | Var::UpstreamHttp(_)
                | Var::Cookie(_)
                | Var::UpstreamCookie(_)
                | Var::SentTrailer(_)
        )
    }
}

/// A slot for `auth_request_set $args` (or `$limit_rate`): the value
/// goes to the request itself, so the name stays the built-in's.
pub fn builtin_setter(name: &str) -> Arc<Indexed> {
    Arc::new(Indexed {
        name: name.to_string(),
        index: new_slot(),
        by_set: std::sync::atomic::AtomicBool::new(false),
        builtin: None,
    })
}
