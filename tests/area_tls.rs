//! One test binary for TLS: each file listed below is a
//! module of this crate, as tests are filed by feature (docs/design.md,
//! "Tests"). One crate per area rather than one per file: each binary
//! compiles `tests/common/` and links the library once, which is most of
//! the test build's time. Run one file's tests with
//! `cargo test --release --test area_tls FILE::`.

mod common;

mod acme;
mod tls;
mod tls_directives;
mod tls_early_data;
mod tls_v1_certificate;
mod tls_variables;
