//! The `proxy_pass` and `fastcgi_pass` content handler and `proxy_cache`
//! (one core: the protocol is a parameter, `upstream::Protocol`), split by
//! step, each
//! file importing only those below it:
//!
//! | File | Holds |
//! |---|---|
//! | `accel.rs` | the `X-Accel-*` lines an upstream steers porter with: redirect, limit rate, buffering |
//! | `dispatch.rs` | [`serve`]: through the cache, or straight through the two steps |
//! | `cache.rs` | the `proxy_cache` flow: lookup, HIT, lock, stale, revalidate, purge |
//! | `fill.rs` | storing a response while it is sent ([`CacheFill`](fill)), refresh after a 304 |
//! | `store.rs` | `proxy_store`: a 200 saved as a file while it is sent, renamed into place whole |
//! | `fetch.rs` | step one, [`fetch`]: peers, tries, `proxy_next_upstream`, the response head |
//! | `exchange.rs` | one exchange on a connection: the request out, the response head in, per protocol |
//! | `fastcgi.rs` | what goes to a FastCGI application: `fastcgi_param`, the client's headers, `$fastcgi_script_name` |
//! | `knobs.rs` | the settings a request reads, `proxy_*` or `fastcgi_*` by protocol |
//! | `target.rs` | where the request goes: the `upstream` group, `$proxy_host` |
//! | `tls.rs` | `proxy_pass https://`: the `proxy_ssl_*` configuration, the handshake, its log lines |
//! | `tries.rs` | the loop over a group's peers every protocol shares (gRPC's too): `*_next_upstream` |
//! | `request.rs` | what goes upstream: URI, method, head, body |
//! | `response.rs` | step two, [`into_response`]: the client's response for an upstream's |
//!
//! A `101` to a request that asked for an upgrade (WebSocket) becomes a
//! response carrying an `http::tunnel::Upgrade`: the connection loop
//! turns the client connection into a tunnel to the upstream once the head
//! is sent (docs/design.md, "WebSocket and Upgrade").

mod accel;
mod cache;
mod connect;
mod dispatch;
mod exchange;
mod fastcgi;
mod fetch;
mod fill;
mod knobs;
mod request;
mod response;
mod scgi;
mod store;
mod target;
pub mod tls;
mod tries;
mod uwsgi;

pub use request::next_temp_number;

pub use self::dispatch::{serve, serve_with};
pub use self::fetch::{fetch, fetch_with};
pub use self::request::{escape_uri, upstream_uri, FetchOptions, UpstreamError};
pub use self::response::{head_response, hop_by_hop, intercepted, into_response};
pub use self::target::prepare;

// The upstream core other protocol modules share (`handlers::grpc`):
// where a request goes, the settings, connecting, TLS, the tries and
// their log lines.
pub(crate) use self::connect::connect_options;
pub(crate) use self::fetch::{connect_failed, fail, Failure};
pub(crate) use self::knobs::Knobs;
pub(crate) use self::knobs::PROXY_HIDDEN as HIDDEN;
pub(crate) use self::response::intercepted_if;
pub(crate) use self::target::{resolve_group, resolve_target};
pub(crate) use self::tls::{app_spec, handshake, target_with, HandshakeFail, TlsTarget};
pub(crate) use self::tries::{note_try, try_peers, PeerTry, TryResult};
