//! The referer module: `valid_referers` (`access::referer`, read through
//! `$invalid_referer`) and its hash sizes.

#[allow(unused_imports)]
use super::*;
use crate::access::referer::ValidReferers;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d(
        "valid_referers",
        SRV | LOC,
        Arity::Min(1),
        set_valid_referers,
    ),
    d(
        "referer_hash_max_size",
        SRV | LOC,
        Arity::N(1),
        internals::hash_number,
    ),
    d(
        "referer_hash_bucket_size",
        SRV | LOC,
        Arity::N(1),
        internals::hash_number,
    ),
];

/// Lines of one level add up, as NGINX's keys array does; the check that
/// `none`/`blocked` come with a hostname is made on what the level has
/// written so far (NGINX makes it at merge time, after every line).
fn set_valid_referers(b: &mut Build, d: &Directive) -> Res {
    let slot = b.loc().valid_referers.get_or_insert_with(Default::default);
    let rules: &mut ValidReferers = Arc::make_mut(slot.get_or_insert_with(Default::default));
    for a in &d.args {
        rules.add(a)?;
    }
    rules.check()
}
