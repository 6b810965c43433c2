//! The directives of NGINX's subrequest modules (`handlers::subrequest`):
//! `auth_request URI|off` and `auth_request_set $var value`
//! (`handlers::auth_request`), `mirror URI|off` and `mirror_request_body`
//! (`handlers::mirror`), `subrequest_output_buffer_size` (SSI's
//! `include ... set=`), `post_action URI|@name|off`
//! (`handlers::post_action`). `auth_request_set` and `mirror` lines add up
//! within a level; a level with its own replaces its parent's.

#[allow(unused_imports)]
use super::*;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("auth_request", HSL, Arity::N(1), |b, d| {
        let v = match d.args[0].as_str() {
            "off" => None,
            uri => Some(Arc::from(uri)),
        };
        set_once(&mut b.loc().auth_request, v, d)
    }),
    d("post_action", HSL, Arity::N(1), |b, d| {
        let v = match d.args[0].as_str() {
            "off" => None,
            uri => Some(Arc::from(uri)),
        };
        set_once(&mut b.loc().post_action, v, d)
    }),
    d("auth_request_set", HSL, Arity::N(2), set_auth_request_set),
    d("mirror", HSL, Arity::N(1), set_mirror),
    d(
        "mirror_request_body",
        HSL,
        Arity::N(1),
        loc_flag!(mirror_request_body),
    ),
    d(
        "subrequest_output_buffer_size",
        HSL,
        Arity::N(1),
        loc_size!(subrequest_output_buffer_size),
    ),
];

fn set_auth_request_set(b: &mut Build, d: &Directive) -> Res {
    let name = match d.args[0].strip_prefix('$') {
        Some(n) if !n.is_empty() => n,
        _ => return Err(format!("invalid variable name \"{}\"", d.args[0])),
    };
    let var = match Var::from_name(name) {
        // `$args` and `$limit_rate` change the request itself: a slot
        // of their name, which `handlers::auth_request` knows.
        Some(Var::Args | Var::LimitRate) => crate::vars::families::builtin_setter(name),
        Some(v) if !matches!(v, Var::Indexed(_)) && !v.changeable() => {
            return Err(format!("the duplicate \"{name}\" variable"));
        }
        _ => template::declare_indexed(name),
    };
    let value = template(&d.args[1])?;
    let slot = &mut b.loc().auth_request_set;
    let mut list = slot.as_deref().cloned().unwrap_or_default();
    list.push((var, value));
    *slot = Some(Arc::new(list));
    Ok(())
}

fn set_mirror(b: &mut Build, d: &Directive) -> Res {
    let slot = &mut b.loc().mirrors;
    let off = d.args[0] == "off";
    match slot.as_deref() {
        // `mirror off` after a mirror, or a mirror after `mirror off`.
        Some(list) if off || list.is_empty() => return Err(dup(d)),
        _ => {}
    }
    let mut list = slot.as_deref().cloned().unwrap_or_default();
    if !off {
        list.push(Arc::from(d.args[0].as_str()));
    }
    *slot = Some(Arc::new(list));
    Ok(())
}
