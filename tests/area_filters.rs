//! One test binary for the response filters: each file listed below is a
//! module of this crate, as tests are filed by feature (docs/design.md,
//! "Tests"). One crate per area rather than one per file: each binary
//! compiles `tests/common/` and links the library once, which is most of
//! the test build's time. Run one file's tests with
//! `cargo test --release --test area_filters FILE::`.

mod common;

mod addition;
mod charset;
mod chunked_transfer_encoding;
mod gunzip;
mod gzip;
mod gzip_encoded_charset;
mod gzip_static_vary;
mod headers_filter;
mod limit_rate;
mod limit_rate_vars;
mod slice;
mod ssi;
mod ssi_parallel;
mod sub_filter;
mod trailers;
mod userid;
