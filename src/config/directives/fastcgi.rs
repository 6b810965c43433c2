//! The FastCGI module's directives: `fastcgi_pass`, the ones only FastCGI
//! has (`fastcgi_index`, `fastcgi_split_path_info`, `fastcgi_keep_conn`,
//! `fastcgi_catch_stderr`) and the `fastcgi_*` rows every application
//! server has ([`app_rows!`]: `fastcgi_param`, the twins of the proxy's
//! settings), kept in `LocSettings::fastcgi` (`config/app_upstream.rs`).
//! `fastcgi_pass` makes the location's handler the proxy's, speaking
//! FastCGI (`upstream::Protocol::FastCgi`).

use super::app_rows::{app_rows, upstream_rows};
#[allow(unused_imports)]
use super::*;
use crate::upstream::Protocol;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("fastcgi_pass", LOC, Arity::N(1), |b, d| {
        super::app_rows::set_pass(b, d, Protocol::FastCgi)
    }),
    d("fastcgi_index", HSL, Arity::N(1), |b, d| {
        let v: Arc<str> = d.args[0].as_str().into();
        set_once(&mut b.loc().fastcgi.index, Some(v), d)
    }),
    d("fastcgi_split_path_info", LOC, Arity::N(1), |b, d| {
        let re = crate::vars::regex::Regex::compile(&d.args[0], false)?;
        if re.groups() != 2 {
            return Err(format!("pattern \"{}\" must have 2 captures", d.args[0]));
        }
        set_once(&mut b.loc().fastcgi.split_path_info, Some(Arc::new(re)), d)
    }),
    d("fastcgi_keep_conn", HSL, Arity::N(1), |b, d| {
        let v = flag(d)?;
        set_once(&mut b.loc().fastcgi.keep_conn, v, d)
    }),
    d("fastcgi_catch_stderr", HSL, Arity::N(1), |b, d| {
        let slot = &mut b.loc().fastcgi.catch_stderr;
        let mut list = slot.as_deref().cloned().unwrap_or_default();
        list.push(d.args[0].clone());
        *slot = Some(Arc::new(list));
        Ok(())
    }),
    // Accepted, no effect, as the buffer rows of `app_rows!`.
    d(
        "fastcgi_send_lowat",
        HSL,
        Arity::N(1),
        super::tuning::size_only,
    ),
];

/// The `fastcgi_*` twins of the proxy's settings.
pub(super) static COMMON: &[Spec] = &upstream_rows!(fastcgi, "fastcgi");

/// The `fastcgi_*` rows FastCGI, uwsgi and SCGI share.
pub(super) static CGI: &[Spec] = &app_rows!(fastcgi, "fastcgi");
