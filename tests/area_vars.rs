//! One test binary for variables and the access modules: each file listed below is a
//! module of this crate, as tests are filed by feature (docs/design.md,
//! "Tests"). One crate per area rather than one per file: each binary
//! compiles `tests/common/` and links the library once, which is most of
//! the test build's time. Run one file's tests with
//! `cargo test --release --test area_vars FILE::`.

mod common;

mod access;
mod auth_delay;
mod auth_request;
mod geo;
mod header_value_vars;
mod limit_except;
mod map_forward_reference;
mod mirror;
mod post_action;
mod realip;
mod referer;
mod regex_inline_flags;
mod secure_link;
mod split_clients;
mod variables;
mod variables_more;
mod variables_nginx;
