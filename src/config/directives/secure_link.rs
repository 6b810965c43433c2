//! The secure link module: `secure_link`, `secure_link_md5`,
//! `secure_link_secret` (`access::secure_link`, read through
//! `$secure_link` and `$secure_link_expires`).

#[allow(unused_imports)]
use super::*;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("secure_link", HSL, Arity::N(1), |b, d| {
        let v = template(&d.args[0])?;
        let slot = template::new_slot();
        set_once(&mut b.loc().secure_link, Some((v, slot)), d)?;
        unmixed(b)
    }),
    d("secure_link_md5", HSL, Arity::N(1), |b, d| {
        let v = template(&d.args[0])?;
        set_once(&mut b.loc().secure_link_md5, Some(v), d)?;
        unmixed(b)
    }),
    d("secure_link_secret", HSL, Arity::N(1), |b, d| {
        let v = Arc::from(d.args[0].as_str());
        set_once(&mut b.loc().secure_link_secret, Some(v), d)?;
        unmixed(b)
    }),
];

/// NGINX's merge-time refusal of both forms at one level.
fn unmixed(b: &mut Build) -> Res {
    let l = b.loc();
    if l.secure_link_secret.is_some() && (l.secure_link.is_some() || l.secure_link_md5.is_some()) {
        return Err(
            "\"secure_link_secret\" cannot be mixed with \"secure_link\" and \"secure_link_md5\""
                .into(),
        );
    }
    Ok(())
}
