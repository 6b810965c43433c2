//! Variable families beside `template.rs`'s table: `stub_status`'s
//! `$connections_*` figures, the userid module's `$uid_*`, and which built-in variables `set` and
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

/// The userid module's variables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UidVar {
    /// `$uid_got`: the uid the request's cookie carried.
    Got,
    /// `$uid_set`: the uid the response's cookie sets.
    Set,
    /// `$uid_reset`: empty unless a `map` or `set` gives it a value (a
    /// value other than `0` makes a new uid; `log` logs it).
    Reset,
}

impl UidVar {
    /// The userid variable `name`, if it is one.
    pub fn var(name: &str) -> Option<Var> {
        Some(Var::Userid(match name {
            "uid_got" => UidVar::Got,
            "uid_set" => UidVar::Set,
            "uid_reset" => UidVar::Reset,
            _ => return None,
        }))
    }
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
                | Var::Userid(UidVar::Reset)
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
