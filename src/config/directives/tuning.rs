//! Tuning directives of NGINX's HTTP core and proxy modules that a real
//! configuration carries: each is validated as NGINX validates it (sizes,
//! times, flags, numbers, temp-path levels) and either applied or
//! accepted without effect where porter's design has nothing to tune
//! (`docs/directives.md` says which and why). Applied here: the request-head
//! rules `merge_slashes`, `ignore_invalid_headers`, `underscores_in_headers`
//! and `max_headers` (server level, `http/request.rs`, `http/uri.rs`) and
//! `keepalive_time` (`http/connection.rs`), and the request body's
//! `client_body_buffer_size`, `client_body_temp_path` and
//! `proxy_request_buffering` (`handlers/proxy/request.rs`).

#[allow(unused_imports)]
use super::*;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("client_body_temp_path", HSL, Arity::Range(1, 4), |b, d| {
        let t = super::cache::temp_path(b, d)?;
        b.cache.body_temp(&t, super::cache::place(d));
        set_once(&mut b.loc().client_body_temp_path, Some(t), d)
    }),
    d(
        "client_body_buffer_size",
        HSL,
        Arity::N(1),
        loc_size!(client_body_buffer_size),
    ),
    d("client_body_in_file_only", HSL, Arity::N(1), |b, d| {
        let v = match d.args[0].as_str() {
                "on" => Some(false),
                "clean" => Some(true),
                "off" => None,
                v => return Err(format!("invalid value \"{v}\" in \"{}\" directive, it must be \"on\", \"off\" or \"clean\"", d.name)),
            };
        set_once(&mut b.loc().client_body_in_file_only, v, d)
    }),
    d("client_body_in_single_buffer", HSL, Arity::N(1), flag_only),
    d("proxy_buffers", HSL, Arity::N(2), buffers),
    d("proxy_busy_buffers_size", HSL, Arity::N(1), size_only),
    d(
        "proxy_request_buffering",
        HSL,
        Arity::N(1),
        loc_flag!(proxy_request_buffering),
    ),
    d(
        "variables_hash_max_size",
        HTTP,
        Arity::N(1),
        super::internals::hash_number,
    ),
    d(
        "variables_hash_bucket_size",
        HTTP,
        Arity::N(1),
        super::internals::hash_size,
    ),
    d(
        "merge_slashes",
        HTTP | SRV,
        Arity::N(1),
        loc_flag!(merge_slashes),
    ),
    d(
        "ignore_invalid_headers",
        HTTP | SRV,
        Arity::N(1),
        loc_flag!(ignore_invalid_headers),
    ),
    d(
        "underscores_in_headers",
        HTTP | SRV,
        Arity::N(1),
        loc_flag!(underscores_in_headers),
    ),
    d("max_headers", HTTP | SRV, Arity::N(1), |b, d| {
        let n = number(d, &d.args[0])? as usize;
        set_once(&mut b.loc().max_headers, n, d)
    }),
    d(
        "keepalive_time",
        HSL,
        Arity::N(1),
        loc_time!(keepalive_time),
    ),
];

/// NGINX's compiled-in `client_body_temp` under the prefix, where no
/// level set `client_body_temp_path`.
pub(super) fn default_body_temp(loc: &mut LocBuilder, prefix: &std::path::Path) {
    loc.client_body_temp_path.get_or_insert_with(|| {
        Some(crate::cache::TempPath {
            path: prefix.join(DEFAULT_BODY_TEMP),
            levels: crate::cache::Levels::default(),
        })
    });
}

/// `client_body_temp_path`'s default, under the prefix.
pub(super) const DEFAULT_BODY_TEMP: &str = "client_body_temp";

/// NGINX's "is duplicate" for a directive that porter checks and does
/// not keep: the second in one block is an error.
fn once(b: &mut Build, d: &Directive) -> Res {
    let key = (b.servers.len(), b.cur_loc, b.ctx, d.name.clone());
    if !b.tuning_seen.insert(key) {
        return Err(dup(d));
    }
    Ok(())
}

/// `*_buffers NUMBER SIZE`, checked and not used.
pub(super) fn buffers(b: &mut Build, d: &Directive) -> Res {
    once(b, d)?;
    match (d.args[0].parse::<u64>(), parse_size(&d.args[1])) {
        (Ok(n), Some(s)) if n > 0 && s > 0 => Ok(()),
        _ => Err(invalid(d)),
    }
}

/// A size (`k`/`m` suffixes), checked and not used.
pub(super) fn size_only(b: &mut Build, d: &Directive) -> Res {
    once(b, d)?;
    size(d, &d.args[0]).map(|_| ())
}

/// A number, checked and not used.
pub(super) fn number_only(b: &mut Build, d: &Directive) -> Res {
    once(b, d)?;
    number(d, &d.args[0]).map(|_| ())
}

/// `on`/`off`, checked and not used.
pub(super) fn flag_only(b: &mut Build, d: &Directive) -> Res {
    once(b, d)?;
    flag(d).map(|_| ())
}
