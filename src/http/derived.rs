//! Variable values NGINX derives with a computation of their own:
//! `$request_id` and `$slice_range`.

use super::context::RequestCtx;

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
