//! One test binary for the request head, URI and connection: each file listed below is a
//! module of this crate, as tests are filed by feature (docs/design.md,
//! "Tests"). One crate per area rather than one per file: each binary
//! compiles `tests/common/` and links the library once, which is most of
//! the test build's time. Run one file's tests with
//! `cargo test --release --test area_request FILE::`.

mod common;

mod bad_input;
mod client_abort;
mod client_timeouts;
mod connection_flood;
mod idle_memory;
mod keepalive;
mod keepalive_disable;
mod listen_options;
mod listen_socket_buffers;
mod listen_unix;
mod request_headers;
mod server_names;
mod uri_normalisation;
