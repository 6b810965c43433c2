//! The SSI filter's directives (`handlers/ssi/`): `ssi`, `ssi_types`,
//! `ssi_silent_errors`, `ssi_value_length`, `ssi_min_file_chunk`,
//! `ssi_last_modified`, and `ssi_ignore_recycled_buffers`, which tunes
//! NGINX's buffer reuse porter does not have (a notice says so).

#[allow(unused_imports)]
use super::*;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("ssi", HSL, Arity::N(1), loc_flag!(ssi)),
    d("ssi_types", HSL, Arity::Min(1), |b, d| {
        let v = super::content::html_and(d);
        set_once(&mut b.loc().ssi_types, v, d)
    }),
    d(
        "ssi_silent_errors",
        HSL,
        Arity::N(1),
        loc_flag!(ssi_silent_errors),
    ),
    d(
        "ssi_value_length",
        HSL,
        Arity::N(1),
        loc_size!(ssi_value_length),
    ),
    d(
        "ssi_min_file_chunk",
        HSL,
        Arity::N(1),
        loc_size!(ssi_min_file_chunk),
    ),
    d(
        "ssi_last_modified",
        HSL,
        Arity::N(1),
        loc_flag!(ssi_last_modified),
    ),
    d("ssi_ignore_recycled_buffers", HSL, Arity::N(1), |_, d| {
        flag(d)?;
        notice(
            d,
            "has no effect: porter's SSI filter copies what it keeps and reuses no buffer",
        );
        Ok(())
    }),
];
