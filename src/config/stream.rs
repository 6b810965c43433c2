//! The `stream { }` block as the server runs it (NGINX's stream core,
//! proxy, upstream, access, log, map/geo/split_clients, set and return
//! modules): one [`StreamServer`] per `server { }`, reached through the
//! `ListenGroup` of each address it listens on. A stream server's
//! inheritable settings are the location settings' own
//! ([`LocSettings`]: `access_log`, `allow`/`deny`, `limit_conn`,
//! `error_log`, `tcp_nodelay`), with the proxy's stream-only settings in
//! their nested group [`StreamSettings`]; the directives are
//! `directives/stream.rs`'s. TLS (`listen ... ssl`, `proxy_ssl`) uses the
//! HTTP servers' and proxy's settings: [`StreamServer::tls`] and the
//! `proxy_ssl_*` location settings.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::group::settings_group;
use super::model::LocSettings;
use crate::upstream::balance::UpstreamGroup;
use crate::vars::template::{Indexed, Template};

settings_group! {
    /// A stream level's proxy settings as written.
    StreamBuilder =>
    /// A stream server's proxy settings, merged with the `stream` level's.
    StreamSettings;
    /// `proxy_connect_timeout` (default 60 s).
    connect_timeout: Duration = Duration::from_secs(60);
    /// `proxy_timeout`: the longest wait for a byte either way (10 min).
    timeout: Duration = Duration::from_secs(600);
    /// `proxy_requests` (UDP): client datagrams after which the session's
    /// binding is released (0: never).
    requests: u64 = 0;
    /// `proxy_responses` (UDP): datagrams expected back for each client
    /// datagram (`u64::MAX`: unset, the session ends by `proxy_timeout`).
    responses: u64 = u64::MAX;
    /// `proxy_next_upstream` (on): a failed connect tries the next peer.
    next_upstream: bool = true;
    /// `proxy_next_upstream_tries` (0: no limit).
    next_upstream_tries: u64 = 0;
    /// `proxy_next_upstream_timeout` (zero: no limit).
    next_upstream_timeout: Duration = Duration::ZERO;
    /// `proxy_buffer_size`: each direction's buffer (16 KiB).
    buffer_size: u64 = 16384;
    /// `proxy_upload_rate`: bytes per second read from the client (0: no
    /// limit), variables allowed (NGINX 1.27.0), rendered per session.
    upload_rate: Template = Template::literal("0");
    /// `proxy_download_rate`: bytes per second read from the upstream.
    download_rate: Template = Template::literal("0");
    /// `proxy_half_close`: one side's end closes only that direction.
    half_close: bool = false;
    /// `proxy_protocol`: a PROXY v1 header starts each upstream connection.
    proxy_protocol: bool = false;
    /// `ssl_preread`: the ClientHello is read for `$ssl_preread_*`.
    ssl_preread: bool = false;
    /// `preread_timeout` (30 s).
    preread_timeout: Duration = Duration::from_secs(30);
    /// `preread_buffer_size` (16 KiB).
    preread_buffer_size: u64 = 16384;
    /// `proxy_ssl`: TLS to the upstream (the `proxy_ssl_*` settings are
    /// the location settings' own).
    ssl: bool = false;
}

/// Where a stream server's `proxy_pass` goes.
#[derive(Debug, Clone)]
pub enum StreamPass {
    /// An `upstream` block, or the implicit group of `host:port`.
    Group(Arc<UpstreamGroup>),
    /// A value with variables, rendered per session: the name of an
    /// `upstream` block of the stream level, else an `IP:port`.
    Dynamic(Template, Arc<HashMap<String, Arc<UpstreamGroup>>>),
}

/// What a `set` of a stream server writes to: a slot of the session's
/// variable table (a `set` variable's own, or a `map`'s cached value).
#[derive(Debug, Clone)]
pub struct StreamSet {
    /// The slot.
    pub slot: usize,
    /// The value, rendered when the session starts.
    pub value: Template,
    /// The variable written, when it is a `set` one.
    pub var: Option<Arc<Indexed>>,
}

/// One `server { }` of the `stream` block.
#[derive(Debug)]
pub struct StreamServer {
    /// The inheritable settings (the stream ones in `s.stream`).
    pub s: LocSettings,
    /// `proxy_pass`.
    pub pass: Option<StreamPass>,
    /// `return VALUE`: the value sent before the connection closes.
    pub ret: Option<Template>,
    /// `set` lines, in order, run when the session starts.
    pub sets: Vec<StreamSet>,
    /// Where the server block is (`file:line`), for messages.
    pub at: String,
    /// Its TLS, when it has a `listen ... ssl` (the `ssl_*` directives,
    /// read as the HTTP servers' are).
    pub tls: Option<Arc<crate::tls::ServerTls>>,
}
