//! `proxy_store`, `fastcgi_store`, `uwsgi_store`, `scgi_store` and their
//! `*_store_access` (NGINX's upstream store): an upstream's 200 answer
//! saved as a file (handlers/proxy/store.rs does the saving).

#[allow(unused_imports)]
use super::*;
use crate::config::setting_types::StoreTo;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("proxy_store", HSL, Arity::N(1), |b, d| {
        let v = store_to(b, d, "proxy_temp")?;
        set_once(&mut b.loc().proxy_store, v, d)
    }),
    d("proxy_store_access", HSL, Arity::Range(1, 3), |b, d| {
        let v = access(&d.args)?;
        set_once(&mut b.loc().proxy_store_access, v, d)
    }),
    d("fastcgi_store", HSL, Arity::N(1), |b, d| {
        let v = store_to(b, d, "fastcgi_temp")?;
        set_once(&mut b.loc().fastcgi.store, v, d)
    }),
    d("fastcgi_store_access", HSL, Arity::Range(1, 3), |b, d| {
        let v = access(&d.args)?;
        set_once(&mut b.loc().fastcgi.store_access, v, d)
    }),
    d("uwsgi_store", HSL, Arity::N(1), |b, d| {
        let v = store_to(b, d, "uwsgi_temp")?;
        set_once(&mut b.loc().uwsgi.store, v, d)
    }),
    d("uwsgi_store_access", HSL, Arity::Range(1, 3), |b, d| {
        let v = access(&d.args)?;
        set_once(&mut b.loc().uwsgi.store_access, v, d)
    }),
    d("scgi_store", HSL, Arity::N(1), |b, d| {
        let v = store_to(b, d, "scgi_temp")?;
        set_once(&mut b.loc().scgi.store, v, d)
    }),
    d("scgi_store_access", HSL, Arity::Range(1, 3), |b, d| {
        let v = access(&d.args)?;
        set_once(&mut b.loc().scgi.store_access, v, d)
    }),
];

/// `*_store on | off | PATH` (NGINX's `ngx_http_proxy_store`); `temp`
/// is the module's default temp directory (made at start-up for the
/// workers' user, as NGINX's master makes its temp paths).
fn store_to(b: &mut Build, d: &Directive, temp: &str) -> Result<Option<Arc<StoreTo>>, String> {
    let path = match d.args[0].as_str() {
        "off" => return Ok(None),
        "on" => None,
        p => Some(template(p)?),
    };
    let default_temp = b.prefix.join(temp);
    b.cache.store_temp(default_temp.clone());
    Ok(Some(Arc::new(StoreTo { path, default_temp })))
}

/// `*_store_access users:permissions ...` (NGINX's
/// `ngx_conf_set_access_slot`): `user:`, `group:` or `all:` with `rw`
/// or `r`; the user always has `rw`.
pub(super) fn access(args: &[String]) -> Result<u32, String> {
    let mut mode = 0o600;
    for a in args {
        let (shift, right) = a
            .strip_prefix("user:")
            .map(|r| (6, r))
            .or_else(|| a.strip_prefix("group:").map(|r| (3, r)))
            .or_else(|| a.strip_prefix("all:").map(|r| (0, r)))
            .ok_or_else(|| format!("invalid value \"{a}\""))?;
        let bits = match right {
            "rw" => 6,
            "r" => 4,
            _ => return Err(format!("invalid value \"{a}\"")),
        };
        mode |= bits << shift;
    }
    Ok(mode)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn access_is_nginx_mode_arithmetic() {
        assert_eq!(access(&args(&["user:rw"])).unwrap(), 0o600);
        assert_eq!(access(&args(&["group:rw", "all:r"])).unwrap(), 0o664);
        assert_eq!(access(&args(&["user:r", "all:r"])).unwrap(), 0o604 | 0o600);
        assert_eq!(
            access(&args(&["all:x"])).unwrap_err(),
            "invalid value \"all:x\""
        );
    }
}
