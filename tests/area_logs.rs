//! One test binary for logs and the status page: each file listed below is a
//! module of this crate, as tests are filed by feature (docs/design.md,
//! "Tests"). One crate per area rather than one per file: each binary
//! compiles `tests/common/` and links the library once, which is most of
//! the test build's time. Run one file's tests with
//! `cargo test --release --test area_logs FILE::`.

mod common;

mod access_log;
mod access_log_vars;
mod error_log;
mod log_reopen;
mod status_page;
mod syslog;
