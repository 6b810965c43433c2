//! One test binary for the reverse proxy: each file listed below is a
//! module of this crate, as tests are filed by feature (docs/design.md,
//! "Tests"). One crate per area rather than one per file: each binary
//! compiles `tests/common/` and links the library once, which is most of
//! the test build's time. Run one file's tests with
//! `cargo test --release --test area_proxy FILE::`.

mod common;

mod proxy;
mod proxy_cookie_flags;
mod proxy_directives;
mod proxy_force_ranges;
mod proxy_implicit_upstream;
mod proxy_intercept_errors;
mod proxy_limit_rate;
mod proxy_next_upstream;
mod proxy_pass_header_date;
mod proxy_redirect_regex;
mod proxy_socket;
mod proxy_ssl;
mod proxy_store;
mod proxy_unfinished;
mod request_body_file;
mod request_body_single_buffer;
mod request_buffering;
mod request_buffering_off;
mod resolver;
mod stream;
mod stream_namespaces;
mod stream_realip;
mod stream_resolver;
mod stream_tls;
mod stream_udp;
mod upstream_keepalive_time;
mod upstream_max_conns;
mod upstream_methods;
mod upstream_response_time;
mod upstream_unix;
mod websocket;
mod websocket_access_log;
mod x_accel;
