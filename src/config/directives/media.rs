//! The media modules' directives: `flv` (NGINX's `ngx_http_flv_module`,
//! `src/handlers/flv.rs`) and `mp4`, `mp4_buffer_size`,
//! `mp4_max_buffer_size`, `mp4_start_key_frame` (`ngx_http_mp4_module`,
//! `src/handlers/mp4/`). `mp4_limit_rate` and `mp4_limit_rate_after` are
//! NGINX's commercial subscription's, unknown to NGINX 1.22 and current
//! open-source NGINX, and stay unknown here.

#[allow(unused_imports)]
use super::*;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("flv", LOC, Arity::N(0), |b, _| {
        b.location().handler = Handler::Flv;
        Ok(())
    }),
    d("mp4", LOC, Arity::N(0), |b, _| {
        b.location().handler = Handler::Mp4;
        Ok(())
    }),
    d(
        "mp4_buffer_size",
        HSL,
        Arity::N(1),
        loc_size!(mp4_buffer_size),
    ),
    d(
        "mp4_max_buffer_size",
        HSL,
        Arity::N(1),
        loc_size!(mp4_max_buffer_size),
    ),
    d(
        "mp4_start_key_frame",
        HSL,
        Arity::N(1),
        loc_flag!(mp4_start_key_frame),
    ),
];
