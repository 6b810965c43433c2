//! porter: an event-driven HTTP/1.1 static-file server and reverse proxy
//! whose event loops never wait on a disk, configured in NGINX's syntax.
//!
//! Map of the crate (see `docs/design.md`):
//! - [`access`]: `allow`/`deny`, Basic authentication, `limit_req`/`limit_conn` zones;
//! - [`acme`]: automatic HTTPS (ACME, RFC 8555): certificates obtained and renewed;
//! - [`config`]: NGINX-syntax parser, directive table, typed model;
//! - [`runtime`]: master thread, workers (one event loop each), listeners;
//! - [`h1`]: HTTP/1.1 framing the server and the upstream client share
//!   (chunked coding, body streams, the field line, the tunnel's peer);
//! - [`http`]: parsing, ranges, conditionals, the connection loop;
//! - [`handlers`]: locations, static files, `proxy_pass`, `return`,
//!   `error_page`, status, and the header filter chain;
//! - [`upstream`]: upstream groups and NGINX's balancers, per-worker
//!   keep-alive pools, HTTP/1 client framing (the proxy handler's parts);
//! - [`disk`]: the only place that touches the file system;
//! - [`log`]: access and error logs, written off the event loops;
//! - [`metrics`]: server-wide counters.

pub mod access;
pub mod acme;
pub mod cache;
pub mod config;
pub mod disk;
#[doc(hidden)]
pub mod fuzzing;
pub mod h1;
pub mod handlers;
pub mod http;
pub mod log;
pub mod metrics;
pub mod runtime;
pub mod stream;
pub mod tls;
pub mod upstream;
pub mod util;
pub mod vars;
