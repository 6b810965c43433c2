//! The settings the proxy's core reads for one request, taken from the
//! `proxy_*`, `fastcgi_*`, `uwsgi_*`, `scgi_*` or `grpc_*` directives by the protocol spoken
//! (`upstream::Protocol`): the one place that knows which directive
//! family governs a try, so `fetch`, `connect`, `response` and the cache
//! flow (`cache.rs`, `fill.rs`: the protocol's `*_cache*` group) are the
//! same code for every protocol. Borrowed, built per request at no cost.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use crate::config::app_upstream::AppSettings;
use crate::config::cache_conf::{CacheBuilder, CacheSettings};
use crate::config::model::{ProxyBind, StoreTo};
use crate::config::LocSettings;
use crate::upstream::{NextUpstream, Protocol};

/// What governs a request's tries, connections and response head.
pub struct Knobs<'a> {
    /// The protocol (connections of two protocols never share a pool).
    pub proto: Protocol,
    /// `*_connect_timeout`.
    pub connect_timeout: Duration,
    /// `*_send_timeout`.
    pub send_timeout: Duration,
    /// `*_read_timeout`.
    pub read_timeout: Duration,
    /// `*_next_upstream`.
    pub next_upstream: NextUpstream,
    /// `*_next_upstream_tries`.
    pub next_upstream_tries: u64,
    /// `*_next_upstream_timeout`.
    pub next_upstream_timeout: Duration,
    /// `*_buffer_size`: the largest response head.
    pub buffer_size: u64,
    /// `*_intercept_errors`.
    pub intercept_errors: bool,
    /// `*_hide_header`.
    pub hide_header: &'a [String],
    /// `*_pass_header`.
    pub pass_header: &'a [String],
    /// `*_pass_request_body`.
    pub pass_request_body: bool,
    /// `*_socket_keepalive`.
    pub socket_keepalive: bool,
    /// `*_bind`.
    pub bind: Option<&'a ProxyBind>,
    /// `proxy_limit_rate` (`fastcgi_`, `uwsgi_`, `scgi_`): bytes a second
    /// read from the upstream.
    pub limit_rate: u64,
    /// Response headers never passed unless `*_pass_header` names them.
    pub hidden: &'static [&'static str],
    /// `*_ignore_headers` (lowercase): X-Accel-* and cache headers not
    /// acted on.
    pub ignore_headers: &'a Arc<Vec<String>>,
    /// `*_buffering`.
    pub buffering: bool,
    /// The `*_cache*` directives (`proxy_cache`, `fastcgi_cache`...).
    pub cache: &'a CacheSettings,
    /// `proxy_cache_convert_head` (NGINX's FastCGI has none: a HEAD goes
    /// to the application as a HEAD).
    pub convert_head: bool,
    /// `*_store` (None: off).
    pub store: Option<&'a StoreTo>,
    /// `*_store_access`.
    pub store_access: u32,
}

/// The cache settings of a protocol without a cache (gRPC): no zone.
static NO_CACHE: LazyLock<CacheSettings> = LazyLock::new(|| CacheBuilder::default().finish());

/// NGINX's `ngx_http_proxy_hide_headers`.
pub(crate) const PROXY_HIDDEN: &[&str] = &[
    "date",
    "server",
    "x-pad",
    "x-accel-expires",
    "x-accel-redirect",
    "x-accel-limit-rate",
    "x-accel-buffering",
    "x-accel-charset",
];

/// NGINX's `ngx_http_fastcgi_hide_headers` (and `ngx_http_scgi_...`): the
/// application's `Date` and `Server` go to the client, its `Status` line
/// does not.
const FASTCGI_HIDDEN: &[&str] = &[
    "status",
    "x-accel-expires",
    "x-accel-redirect",
    "x-accel-limit-rate",
    "x-accel-buffering",
    "x-accel-charset",
];

/// NGINX's `ngx_http_uwsgi_hide_headers`: as FastCGI's, but a `Status`
/// header passes (uWSGI answers with a status line).
const UWSGI_HIDDEN: &[&str] = &[
    "x-accel-expires",
    "x-accel-redirect",
    "x-accel-limit-rate",
    "x-accel-buffering",
    "x-accel-charset",
];

impl<'a> Knobs<'a> {
    /// The settings `proto` reads in a location.
    pub fn of(s: &'a LocSettings, proto: Protocol) -> Knobs<'a> {
        match proto {
            Protocol::Http => Knobs {
                proto,
                connect_timeout: s.proxy_connect_timeout,
                send_timeout: s.proxy_send_timeout,
                read_timeout: s.proxy_read_timeout,
                next_upstream: s.proxy_next_upstream,
                next_upstream_tries: s.proxy_next_upstream_tries,
                next_upstream_timeout: s.proxy_next_upstream_timeout,
                buffer_size: s.proxy_buffer_size,
                intercept_errors: s.proxy_intercept_errors,
                hide_header: &s.proxy_hide_header,
                pass_header: &s.proxy_pass_header,
                pass_request_body: s.proxy_pass_request_body,
                socket_keepalive: s.proxy_socket_keepalive,
                bind: s.proxy_bind.as_ref(),
                limit_rate: s.proxy_limit_rate,
                hidden: PROXY_HIDDEN,
                ignore_headers: &s.proxy_ignore_headers,
                buffering: s.proxy_buffering,
                cache: &s.proxy_cache,
                convert_head: s.proxy_cache_convert_head,
                store: s.proxy_store.as_deref(),
                store_access: s.proxy_store_access,
            },
            Protocol::FastCgi => Knobs::app(proto, &s.fastcgi, &s.fastcgi_cache, FASTCGI_HIDDEN),
            Protocol::Uwsgi => Knobs::app(proto, &s.uwsgi, &s.uwsgi_cache, UWSGI_HIDDEN),
            Protocol::Scgi => Knobs::app(proto, &s.scgi, &s.scgi_cache, FASTCGI_HIDDEN),
            // NGINX's gRPC module has no cache.
            Protocol::Grpc => Knobs::app(proto, &s.grpc, &NO_CACHE, PROXY_HIDDEN),
        }
    }

    /// An application server's settings (`fastcgi_*`, `uwsgi_*`, `scgi_*`,
    /// `grpc_*`).
    fn app(
        proto: Protocol,
        a: &'a AppSettings,
        cache: &'a CacheSettings,
        hidden: &'static [&'static str],
    ) -> Knobs<'a> {
        Knobs {
            proto,
            connect_timeout: a.connect_timeout,
            send_timeout: a.send_timeout,
            read_timeout: a.read_timeout,
            next_upstream: a.next_upstream,
            next_upstream_tries: a.next_upstream_tries,
            next_upstream_timeout: a.next_upstream_timeout,
            buffer_size: a.buffer_size,
            intercept_errors: a.intercept_errors,
            hide_header: &a.hide_header,
            pass_header: &a.pass_header,
            pass_request_body: a.pass_request_body,
            socket_keepalive: a.socket_keepalive,
            bind: a.bind.as_ref(),
            limit_rate: a.limit_rate,
            hidden,
            ignore_headers: &a.ignore_headers,
            buffering: a.buffering,
            cache,
            convert_head: false,
            store: a.store.as_deref(),
            store_access: a.store_access,
        }
    }
}
