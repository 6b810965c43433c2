//! The addition filter's directives (`handlers/addition.rs`, settings in
//! `config/addition_conf.rs`): `add_before_body`, `add_after_body`,
//! `addition_types`.

#[allow(unused_imports)]
use super::*;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("add_before_body", HSL, Arity::N(1), |b, d| {
        set_once(&mut b.loc().addition.before, d.args[0].clone(), d)
    }),
    d("add_after_body", HSL, Arity::N(1), |b, d| {
        set_once(&mut b.loc().addition.after, d.args[0].clone(), d)
    }),
    d("addition_types", HSL, Arity::Min(1), |b, d| {
        let v = super::content::html_and(d);
        set_once(&mut b.loc().addition.types, v, d)
    }),
];
