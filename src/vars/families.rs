//! Variable families beside `template.rs`'s table: `stub_status`'s
//! `$connections_*` figures, and which built-in variables `set` and
//! `auth_request_set` may give a value of their own (NGINX's changeable
//! variables).

use super::template::Var;

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
