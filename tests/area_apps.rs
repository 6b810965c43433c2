//! One test binary for application servers (FastCGI, uwsgi, SCGI, gRPC): each file listed below is a
//! module of this crate, as tests are filed by feature (docs/design.md,
//! "Tests"). One crate per area rather than one per file: each binary
//! compiles `tests/common/` and links the library once, which is most of
//! the test build's time. Run one file's tests with
//! `cargo test --release --test area_apps FILE::`.

mod common;

mod fastcgi;
mod fastcgi_app_faults;
mod fastcgi_cache;
mod grpc;
mod scgi;
mod uwsgi;
mod uwsgi_ssl;
mod uwsgi_string;
