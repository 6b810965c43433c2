//! Variable values NGINX derives with a computation of their own:
//! `$request_id`, `$slice_range`, `$fastcgi_script_name` and
//! `$fastcgi_path_info`.

use super::context::RequestCtx;

/// The URI split by `fastcgi_split_path_info` (NGINX's
/// `ngx_http_fastcgi_split`): the first capture and the second when the
/// regex matches, else the whole URI and nothing. Worked out each time
/// from the current URI, so after `try_files` changed it the path info is
/// that of the new URI (NGINX's handler recomputes it too: hence the
/// `set $path_info` of Debian's `fastcgi-php.conf`).
pub fn fastcgi_split(ctx: &RequestCtx) -> (&str, &str) {
    let uri = ctx.uri.as_str();
    let Some(re) = &ctx.loc.s.fastcgi.split_path_info else {
        return (uri, "");
    };
    match re.exec(uri).and_then(|m| m.captures) {
        Some(c) if c.spans.len() >= 3 => {
            let span = |i: usize| c.spans[i].map_or((0, 0), |x| x);
            let (a, b) = (span(1), span(2));
            (&uri[a.0..a.1], &uri[b.0..b.1])
        }
        _ => (uri, ""),
    }
}

/// `$slice_range` (NGINX's `ngx_http_slice_range_variable`): the main
/// request's first reading picks the slice that holds the first byte the
/// client asked for and keeps it (`RequestCtx::slice`; a slice's
/// subrequest has its own preset); empty once the response status is
/// known, or with `slice` off.
pub(super) fn slice_range(ctx: &RequestCtx, out: &mut String) {
    use std::fmt::Write as _;
    let size = ctx.loc.s.slice;
    if size == 0 {
        return;
    }
    let start = match ctx.slice.get() {
        Some(s) => s,
        None if ctx.status != 0 => return,
        None => {
            let first = super::range::slice_first_byte(
                ctx.header("range"),
                ctx.header("if-range").is_some(),
            );
            let s = size * (first / size);
            ctx.slice.set(Some(s));
            s
        }
    };
    let _ = write!(out, "bytes={start}-{}", start + size - 1);
}

/// `$request_id`: 128 bits as 32 hexadecimal digits, the same each time
/// the request reads it. NGINX draws 16 random bytes per request and keeps
/// them; porter computes them with two hashes keyed at random when the
/// process starts over what names the request uniquely (the connection's
/// serial number and the request's number on it), so nothing is stored
/// per request and the values are as unpredictable to a client.
pub(super) fn request_id(conn: u64, n: u64, out: &mut String) {
    use std::fmt::Write as _;
    use std::hash::{BuildHasher, Hasher};
    static KEYS: std::sync::OnceLock<[std::collections::hash_map::RandomState; 2]> =
        std::sync::OnceLock::new();
    let keys = KEYS.get_or_init(Default::default);
    for k in keys {
        let mut h = k.build_hasher();
        h.write_u64(conn);
        h.write_u64(n);
        let _ = write!(out, "{:016x}", h.finish());
    }
}
