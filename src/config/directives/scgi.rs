//! The SCGI module's directives (`scgi_pass` and the `scgi_*` rows every
//! application server has, [`app_rows!`]), kept in `LocSettings::scgi`.
//! `scgi_pass` makes the location's handler the proxy's, speaking SCGI
//! (`upstream::Protocol::Scgi`).

use super::app_rows::{app_rows, upstream_rows};
#[allow(unused_imports)]
use super::*;
use crate::upstream::Protocol;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[d("scgi_pass", LOC, Arity::N(1), |b, d| {
    super::app_rows::set_pass(b, d, Protocol::Scgi)
})];

/// The `scgi_*` twins of the proxy's settings.
pub(super) static COMMON: &[Spec] = &upstream_rows!(scgi, "scgi");

/// The `scgi_*` rows FastCGI, uwsgi and SCGI share.
pub(super) static CGI: &[Spec] = &app_rows!(scgi, "scgi");
