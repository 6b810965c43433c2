//! The uwsgi module's directives (`uwsgi_pass`, `uwsgi_modifier1/2` and
//! the `uwsgi_*` rows every application server has, [`app_rows!`]), kept
//! in `LocSettings::uwsgi`, and `uwsgi_string`; `uwsgi_ssl_*` are gRPC's
//! rows ([`upstream_ssl_rows!`]) for `suwsgi://`. `uwsgi_pass` makes the
//! location's handler the proxy's, speaking uwsgi
//! (`upstream::Protocol::Uwsgi`).

use super::app_rows::{app_rows, upstream_rows, upstream_ssl_rows};
#[allow(unused_imports)]
use super::*;
use crate::upstream::Protocol;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("uwsgi_pass", LOC, Arity::N(1), |b, d| {
        super::app_rows::set_pass(b, d, Protocol::Uwsgi)
    }),
    d("uwsgi_modifier1", HSL, Arity::N(1), |b, d| {
        let v = modifier(d)?;
        set_once(&mut b.loc().uwsgi.modifier1, v, d)
    }),
    d("uwsgi_modifier2", HSL, Arity::N(1), |b, d| {
        let v = modifier(d)?;
        set_once(&mut b.loc().uwsgi.modifier2, v, d)
    }),
    d("uwsgi_string", HSL, Arity::N(1), |b, d| {
        let v: Arc<str> = d.args[0].as_str().into();
        set_once(&mut b.loc().uwsgi.string, v, d)
    }),
];

/// `uwsgi_ssl_*`: TLS to the application (`uwsgi_pass suwsgi://`).
pub(super) static SSL: &[Spec] = &upstream_ssl_rows!(uwsgi, "uwsgi");

/// The `uwsgi_*` twins of the proxy's settings.
pub(super) static COMMON: &[Spec] = &upstream_rows!(uwsgi, "uwsgi");

/// The `uwsgi_*` rows FastCGI, uwsgi and SCGI share.
pub(super) static CGI: &[Spec] = &app_rows!(uwsgi, "uwsgi");

/// A modifier: a number that fits the packet's byte.
fn modifier(d: &Directive) -> Result<u8, String> {
    let n = number(d, &d.args[0])?;
    u8::try_from(n).map_err(|_| format!("invalid value \"{}\"", d.args[0]))
}
