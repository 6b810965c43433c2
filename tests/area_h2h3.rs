//! One test binary for HTTP/2 and HTTP/3: each file listed below is a
//! module of this crate, as tests are filed by feature (docs/design.md,
//! "Tests"). One crate per area rather than one per file: each binary
//! compiles `tests/common/` and links the library once, which is most of
//! the test build's time. Run one file's tests with
//! `cargo test --release --test area_h2h3 FILE::`.

mod common;

mod http2;
mod http2_attacks;
mod http2_differential;
mod http2_fairness;
mod http2_proxy;
mod http3;
mod http3_aioquic;
mod http3_client_cert;
mod http3_early_data;
mod http3_hostile;
mod http3_reload;
mod websocket_h2;
