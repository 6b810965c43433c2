//! `limit_except METHOD ... { }`: the directives of the block (`allow`,
//! `deny`, `auth_basic`, `auth_basic_user_file`, `proxy_pass`,
//! `access_log`) apply to the requests whose method is not listed, as
//! NGINX's `ngx_http_core_limit_except`: the block is a location of its
//! own (a nested one no URI selects, inheriting the enclosing location),
//! and once a request's location is found, a method outside the list
//! switches the request to it (`LimitExcept` in `config::locations`).
//! `GET` allows `HEAD` too.

#[allow(unused_imports)]
use super::*;
use crate::config::locations::LimitExcept;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[blk("limit_except", LOC, Arity::Min(1), set_limit_except)];

/// The methods `limit_except` names (NGINX's `ngx_methods_names`).
const METHODS: &[&str] = &[
    "GET",
    "HEAD",
    "POST",
    "PUT",
    "DELETE",
    "MKCOL",
    "COPY",
    "MOVE",
    "OPTIONS",
    "PROPFIND",
    "PROPPATCH",
    "LOCK",
    "UNLOCK",
    "PATCH",
];

/// The methods allowed, upper case, `HEAD` added with `GET`.
fn allowed(args: &[String]) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for a in args {
        let m = METHODS
            .iter()
            .find(|m| m.eq_ignore_ascii_case(a))
            .ok_or_else(|| format!("invalid method \"{a}\""))?;
        out.push(m.to_string());
    }
    if out.iter().any(|m| m == "GET") && !out.iter().any(|m| m == "HEAD") {
        out.push("HEAD".into());
    }
    Ok(out)
}

fn set_limit_except(b: &mut Build, d: &Directive) -> Res {
    let methods = allowed(&d.args)?;
    if b.location().limit_except.is_some() {
        return Err(dup(d));
    }
    let (parent, idx) = b.push_noname_location();
    let srv = b.server();
    srv.locations[parent].limit_except = Some((methods, idx));
    let saved = b.cur_loc.replace(idx);
    let r = b.walk_nested(d, LMT);
    b.cur_loc = saved;
    r
}

/// The `limit_except` of a location built, its block taken from `built`.
pub(super) fn finish(
    spec: &Option<(Vec<String>, usize)>,
    built: &[Option<Arc<LocationConf>>],
) -> Option<LimitExcept> {
    let (methods, idx) = spec.as_ref()?;
    Some(LimitExcept {
        allowed: methods.clone(),
        loc: built.get(*idx).cloned().flatten()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn get_allows_head_and_names_are_caseless() {
        assert_eq!(
            allowed(&args(&["get", "POST"])).unwrap(),
            ["GET", "POST", "HEAD"]
        );
        assert_eq!(allowed(&args(&["POST"])).unwrap(), ["POST"]);
    }

    #[test]
    fn an_unknown_method_is_refused_as_nginx_does() {
        assert_eq!(
            allowed(&args(&["TRACE"])).unwrap_err(),
            "invalid method \"TRACE\""
        );
    }
}
