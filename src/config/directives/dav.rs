//! The WebDAV module's directives (`handlers/dav/`, settings in
//! `config/dav_conf.rs`): `dav_methods`, `dav_access`,
//! `create_full_put_path`, `min_delete_depth`.

#[allow(unused_imports)]
use super::*;
use crate::config::dav_conf::{dav_bit, DAV_PUT};

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("dav_methods", HSL, Arity::Min(1), set_dav_methods),
    d("dav_access", HSL, Arity::Range(1, 3), |b, d| {
        let v = super::store::access(&d.args)?;
        set_once(&mut b.loc().dav.access, v, d)
    }),
    d("create_full_put_path", HSL, Arity::N(1), |b, d| {
        let v = flag(d)?;
        set_once(&mut b.loc().dav.create_full_put_path, v, d)
    }),
    d("min_delete_depth", HSL, Arity::N(1), |b, d| {
        let v = number(d, &d.args[0])?;
        set_once(&mut b.loc().dav.min_delete_depth, v, d)
    }),
];

/// `dav_methods off | METHOD ...` (NGINX's bitmask slot: names in any
/// case, a second line at one level adds to the first, a repeated name
/// is a warning).
fn set_dav_methods(b: &mut Build, d: &Directive) -> Res {
    let mut bits = b.loc().dav.methods.unwrap_or(0);
    for a in &d.args {
        let bit = match a.to_ascii_uppercase().as_str() {
            "OFF" => 0,
            m => dav_bit(m).ok_or_else(|| format!("invalid value \"{a}\""))?,
        };
        if bit != 0 && bits & bit != 0 {
            warn(d, &format!("duplicate value \"{a}\""));
        }
        bits |= bit;
    }
    b.loc().dav.methods = Some(bits);
    // PUT bodies go to temp files: the body temp directories are made at
    // start-up for the workers' user, as for a proxied body.
    if bits & DAV_PUT != 0 {
        b.cache.proxies = true;
    }
    Ok(())
}
