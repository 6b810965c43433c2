//! One test binary for the process, the configuration and packaging: each file listed below is a
//! module of this crate, as tests are filed by feature (docs/design.md,
//! "Tests"). One crate per area rather than one per file: each binary
//! compiles `tests/common/` and links the library once, which is most of
//! the test build's time. Run one file's tests with
//! `cargo test --release --test area_process FILE::`.

mod common;

mod binary_upgrade;
mod cli;
mod config_corpus;
mod configure_arguments;
mod fuzz_corpus;
mod internals;
mod lifecycle;
mod packaging;
mod prefix;
mod real_configs;
mod shutdown_signals;
