//! The typed configuration the server runs on: what the directive table
//! builds from the parsed directive tree.
//!
//! Location-level settings are declared once in [`loc_settings!`]: each
//! field exists as an `Option` in [`LocBuilder`] (what one level of the file
//! set) and as a plain value in [`LocSettings`] (the merged result, with
//! NGINX's default). Merging follows NGINX: a level that sets nothing
//! inherits its parent's value whole (lists such as `add_header` included).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::locations::{LocationTree, NamedLocations};
pub use super::main_conf::{CpuAffinity, MainConf, SocketBufs};
use super::rewrite::Op;
pub use super::server_names::ServerName;
use crate::log::AccessLog;
use crate::vars::regex::Regex;
use crate::vars::template::Template;

/// The whole running configuration: one immutable value per generation.
#[derive(Debug)]
pub struct Config {
    /// Main-context settings (workers, pid, user, error_log, events).
    pub main: MainConf,
    /// `proxy_cache_path` zones, in file order.
    pub cache_zones: Vec<crate::cache::ZoneSpec>,
    /// The `client_body_temp_path` directories (NGINX's default among them
    /// when a location proxies), made at start-up for the workers' user.
    pub body_temp_paths: Vec<PathBuf>,
    /// The virtual servers, in file order.
    pub servers: Vec<Arc<ServerConf>>,
    /// Every distinct listening address with the servers on it.
    pub listens: Vec<ListenGroup>,
    /// Every file read while parsing (for `-T`).
    pub files: Vec<PathBuf>,
    /// The prefix (`-p`) relative paths resolved against.
    pub prefix: PathBuf,
    /// `acme_certificate`s, for the ACME thread to keep valid.
    pub acme: Vec<Arc<crate::acme::Certificate>>,
}

/// One distinct listening address and the servers that answer on it.
#[derive(Debug, Clone)]
pub struct ListenGroup {
    /// The address bound (`0.0.0.0:0` for a UNIX-domain socket).
    pub addr: SocketAddr,
    /// `listen unix:PATH`: the socket file bound instead of `addr`.
    pub unix: Option<Arc<std::path::Path>>,
    /// `backlog=N` (NGINX's default 511).
    pub backlog: i32,
    /// `sndbuf=` / `rcvbuf=`.
    pub bufs: SocketBufs,
    /// `fastopen=`, `deferred`, `so_keepalive=`, `ipv6only=`, `multipath`.
    pub opts: super::listen_opts::ListenOpts,
    /// Servers listening here, in file order.
    pub servers: Vec<Arc<ServerConf>>,
    /// Index into `servers` of the default server.
    pub default: usize,
    /// `listen ... ssl` on this address (by any of its servers): every
    /// connection starts with a TLS handshake.
    pub ssl: bool,
    /// `listen ... http2` on this address (by any of its servers): HTTP/2
    /// for every server on it, as NGINX's deprecated parameter.
    pub http2: bool,
    /// `listen ... proxy_protocol` on this address (by any of its
    /// servers): every connection starts with a PROXY header.
    pub proxy_protocol: bool,
    /// `listen ... quic`: a UDP address serving HTTP/3 (a group of its
    /// own beside the TCP one of the same address and port).
    pub quic: bool,
    /// A `stream { }` server's address: each connection is its session
    /// (`servers` is then empty).
    pub stream: Option<Arc<super::stream::StreamServer>>,
    /// A stream server's `listen ... udp`: UDP sockets, one per worker;
    /// each datagram from a new client address starts a session
    /// (`stream::udp`).
    pub udp: bool,
    /// On a QUIC address: the key its stateless resets and tokens derive
    /// from (`quic_host_key` of the default server, else random bytes
    /// made when the configuration loaded; the same for every worker).
    pub quic_key: Arc<[u8]>,
}

impl ListenGroup {
    /// Whether the address is bound as UDP (`quic`, or a stream `udp`).
    pub fn is_udp(&self) -> bool {
        self.quic || self.udp
    }
}

/// One `server { }` block.
#[derive(Debug)]
pub struct ServerConf {
    /// `server_name` entries; the first is `$server_name`.
    pub names: Vec<ServerName>,
    /// The primary name, as `$server_name` shows it.
    pub primary_name: String,
    /// The server's locations (see `config::locations`).
    pub locations: LocationTree,
    /// `location @name` blocks.
    pub named: NamedLocations,
    /// The server-level settings, used when no location matches.
    pub base: Arc<LocationConf>,
    /// The rewrite module's server-level program (`rewrite`, `return`,
    /// `set`, `if` outside locations), run before location selection.
    pub script: Arc<Vec<Op>>,
    /// Server-level limits for reading the request head.
    pub limits: HeadLimitsConf,
    /// Its TLS (`ssl_certificate` and the other `ssl_*`), if it has any.
    pub tls: Option<Arc<crate::tls::ServerTls>>,
    /// The variables the configuration defines (`set`, `map`, …), for
    /// lookups by name while requests run (SSI's `echo`).
    pub variables: Arc<std::collections::HashMap<String, crate::vars::template::Var>>,
}

impl ServerConf {
    /// The location for `uri` without regex locations or captures (for
    /// tests and tools): exact, else longest prefix, else the server level.
    pub fn find_location(&self, uri: &str) -> &Arc<LocationConf> {
        if let Some(l) = self.locations.exact.get(uri) {
            return l;
        }
        for l in &self.locations.prefixes {
            if uri.starts_with(l.path.as_str()) {
                return l;
            }
        }
        &self.base
    }
}

/// The handler a location runs.
#[derive(Debug, Clone)]
pub enum Handler {
    /// Files from `root`/`alias`.
    Static,
    /// `stub_status`.
    StubStatus,
    /// `porter_metrics`: Prometheus text.
    Metrics(Arc<crate::upstream::AllGroups>),
    /// `porter_status`: the live HTML page and its JSON.
    Status(Arc<crate::upstream::AllGroups>),
    /// `empty_gif`.
    EmptyGif,
    /// `flv` (`handlers/flv.rs`).
    Flv,
    /// `mp4` (`handlers/mp4/`).
    Mp4,
    /// `proxy_pass`.
    Proxy(Arc<crate::upstream::ProxyPass>),
    /// `grpc_pass`: the target as `proxy_pass` keeps one (`grpc://` as
    /// `http://`, `grpcs://` as `https://`).
    Grpc(Arc<crate::upstream::ProxyPass>),
}

/// A `location` block (or the server level), fully merged.
#[derive(Debug)]
pub struct LocationConf {
    /// The location's path, as written.
    pub path: String,
    /// Its kind.
    pub kind: LocationKind,
    /// `internal`: only reachable by internal redirects (error_page, index).
    pub internal: bool,
    /// `^~`: a match stops the regex search.
    pub noregex: bool,
    /// The compiled regex of a regex location.
    pub regex: Option<Arc<Regex>>,
    /// The locations nested in this one.
    pub nested: LocationTree,
    /// NGINX's automatic 301 from `/x` to `/x/` (a name ending in `/`
    /// whose handler is `proxy_pass`).
    pub auto_redirect: bool,
    /// The rewrite module's program for this location.
    pub script: Arc<Vec<Op>>,
    /// Content handler.
    pub handler: Handler,
    /// `limit_except`: the block a method outside its list runs under.
    pub limit_except: Option<super::locations::LimitExcept>,
    /// The merged inheritable settings.
    pub s: LocSettings,
}

// Content modules' types: `content.rs`; the other settings' value types:
// `setting_types.rs`.
pub use super::content::*;
pub use super::setting_types::*;

macro_rules! loc_settings {
    (nested { $($(#[$ndoc:meta])* $nfield:ident : $nb:ty => $ns:ty;)* }
     $($(#[$doc:meta])* $field:ident : $ty:ty = $default:expr;)*) => {
        /// Location-level settings as one config level wrote them.
        #[derive(Clone, Default, Debug)]
        pub struct LocBuilder {
            $($(#[$ndoc])* pub $nfield: $nb,)*
            $($(#[$doc])* pub $field: Option<$ty>,)*
        }

        /// Location-level settings after merging with every outer level.
        #[derive(Clone, Debug)]
        pub struct LocSettings {
            $($(#[$ndoc])* pub $nfield: $ns,)*
            $($(#[$doc])* pub $field: $ty,)*
        }

        impl LocBuilder {
            /// Takes from `parent` every setting this level did not set
            /// (field by field in the nested groups).
            pub fn inherit(&mut self, parent: &LocBuilder) {
                $(self.$nfield.inherit(&parent.$nfield);)*
                $(if self.$field.is_none() { self.$field = parent.$field.clone(); })*
            }

            /// Fills NGINX's defaults into what is still unset.
            pub fn finish(&self) -> LocSettings {
                LocSettings {
                    $($nfield: self.$nfield.finish(),)*
                    $($field: match &self.$field { Some(v) => v.clone(), None => $default },)*
                }
            }
        }
    };
}

loc_settings! {
    nested {
        /// `fastcgi_*` (`directives/fastcgi.rs`, `config/app_upstream.rs`).
        fastcgi: super::app_upstream::AppBuilder => super::app_upstream::AppSettings;
        /// `uwsgi_*` (`directives/uwsgi.rs`).
        uwsgi: super::app_upstream::AppBuilder => super::app_upstream::AppSettings;
        /// `scgi_*` (`directives/scgi.rs`).
        scgi: super::app_upstream::AppBuilder => super::app_upstream::AppSettings;
        /// `grpc_*` (`directives/grpc.rs`; src/handlers/grpc).
        grpc: super::app_upstream::AppBuilder => super::app_upstream::AppSettings;
        /// The stream proxy's settings (`stream { }`, `config/stream.rs`).
        stream: super::stream::StreamBuilder => super::stream::StreamSettings;
        /// `proxy_cache*` (`directives/cache.rs`, `config/cache_conf.rs`).
        proxy_cache: super::cache_conf::CacheBuilder => super::cache_conf::CacheSettings;
        /// `fastcgi_cache*`, the same group.
        fastcgi_cache: super::cache_conf::CacheBuilder => super::cache_conf::CacheSettings;
        /// `uwsgi_cache*`, the same group.
        uwsgi_cache: super::cache_conf::CacheBuilder => super::cache_conf::CacheSettings;
        /// `scgi_cache*`, the same group.
        scgi_cache: super::cache_conf::CacheBuilder => super::cache_conf::CacheSettings;
        /// `userid*` (`directives/userid.rs`, `config/userid_conf.rs`).
        userid: super::userid_conf::UseridBuilder => super::userid_conf::UseridSettings;
        /// `dav_*` (`config/dav_conf.rs`; src/handlers/dav).
        dav: super::dav_conf::DavBuilder => super::dav_conf::DavSettings;
        /// `add_*_body`, `addition_types` (`config/addition_conf.rs`).
        addition: super::addition_conf::AdditionBuilder => super::addition_conf::AdditionSettings;
    }
    /// `root` / `alias`.
    root: DocRoot = DocRoot::Root(Template::literal("html"));
    /// `index`.
    index: Vec<Template> = vec![Template::literal("index.html")];
    /// `default_type`.
    default_type: Arc<str> = Arc::from("text/plain");
    /// `types { }`.
    types: Arc<Types> = builtin_types();
    /// `sendfile`.
    sendfile: bool = false;
    /// `sendfile_max_chunk` (0 = unlimited).
    sendfile_max_chunk: u64 = 2 * 1024 * 1024;
    /// `directio`: files of at least this size bypass the page cache.
    directio: Option<u64> = None;
    /// `directio_alignment` (a power of two).
    directio_alignment: u64 = 512;
    /// `tcp_nodelay`.
    tcp_nodelay: bool = true;
    /// `keepalive_timeout` first value.
    keepalive_timeout: Duration = Duration::from_secs(75);
    /// `keepalive_timeout` second value (`Keep-Alive: timeout=N`).
    keepalive_header: Option<Duration> = None;
    /// `keepalive_requests`.
    keepalive_requests: u64 = 1000;
    /// `keepalive_disable` (default `msie6`).
    keepalive_disable: KeepaliveDisable = KeepaliveDisable { msie6: true, safari: false };
    /// `send_timeout`.
    send_timeout: Duration = Duration::from_secs(60);
    /// `client_header_timeout` (read at server level): the whole head.
    client_header_timeout: Duration = Duration::from_secs(60);
    /// `client_body_timeout`: between two reads of a body a handler reads.
    client_body_timeout: Duration = Duration::from_secs(60);
    /// `lingering_close`.
    lingering_close: LingeringClose = LingeringClose::On;
    /// `lingering_time`: the longest a lingering close (or the discard of
    /// an unread body after the response) reads.
    lingering_time: Duration = Duration::from_secs(30);
    /// `lingering_timeout`: the longest wait for more input then.
    lingering_timeout: Duration = Duration::from_secs(5);
    /// `reset_timedout_connection`: a connection closed on a timeout is
    /// reset (RST) instead of closed with a FIN.
    reset_timedout_connection: bool = false;
    /// `large_client_header_buffers` (number, size; read at server level).
    large_client_header_buffers: (usize, usize) = (4, 8192);
    /// `client_max_body_size` (0 = unlimited).
    client_max_body_size: u64 = 1024 * 1024;
    /// `client_body_buffer_size`: a request body read whole before it goes
    /// upstream stays in memory up to this, in a temp file beyond.
    client_body_buffer_size: u64 = 16 * 1024;
    /// `client_body_temp_path` (None: `client_body_temp` under the prefix,
    /// set when the configuration is built).
    client_body_temp_path: Option<crate::cache::TempPath> = None;
    /// `client_body_in_file_only` (None: off; `Some(clean)`: on, or
    /// `clean` to remove the file when the request ends).
    client_body_in_file_only: Option<bool> = None;
    /// `error_page` rules.
    error_pages: Arc<Vec<ErrorPage>> = Arc::new(Vec::new());
    /// `add_header` lines.
    add_headers: Arc<Vec<AddHeader>> = Arc::new(Vec::new());
    /// `sub_filter` pairs, in order.
    sub_filters: Arc<Vec<SubFilter>> = Arc::new(Vec::new());
    /// `sub_filter_types` (lowercase, text/html always in; `*` any).
    sub_filter_types: Arc<Vec<String>> = Arc::new(vec!["text/html".to_string()]);
    /// `sub_filter_once`.
    sub_filter_once: bool = true;
    /// `sub_filter_last_modified`.
    sub_filter_last_modified: bool = false;
    /// `ssi`: the SSI filter runs on responses of `ssi_types`.
    ssi: bool = false;
    /// `ssi_types` (lowercase, text/html always in; `*` any).
    ssi_types: Arc<Vec<String>> = Arc::new(vec!["text/html".to_string()]);
    /// `ssi_silent_errors`: a failed SSI command outputs nothing.
    ssi_silent_errors: bool = false;
    /// `ssi_value_length`: the longest parameter value of a command.
    ssi_value_length: u64 = 255;
    /// `ssi_min_file_chunk` (accepted; see design.md "SSI").
    ssi_min_file_chunk: u64 = 1024;
    /// `ssi_last_modified`: keep `Last-Modified` (and a weak `ETag`).
    ssi_last_modified: bool = false;
    /// `access_log` targets (empty = off).
    access_log: Arc<Vec<AccessLog>> = Arc::new(Vec::new());
    /// `log_subrequest`: subrequests write their location's access log.
    log_subrequest: bool = false;
    /// `open_log_file_cache` (for access logs whose path has variables).
    open_log_file_cache: Option<Arc<crate::log::OpenLogCache>> = None;
    /// `log_not_found`.
    log_not_found: bool = true;
    /// `max_ranges` (None = unlimited).
    max_ranges: Option<usize> = None;
    /// `if_modified_since`.
    if_modified_since: ImsMode = ImsMode::Exact;
    /// `etag`.
    etag: bool = true;
    /// `server_tokens`.
    server_tokens: bool = true;
    /// `msie_padding`: pad error pages for MSIE and Chrome.
    msie_padding: bool = true;
    /// `msie_refresh`: a 301/302 redirect answered to MSIE as a page that
    /// refreshes to the target.
    msie_refresh: bool = false;
    /// `chunked_transfer_encoding`: off closes the connection after a
    /// body of unknown length instead of chunking it.
    chunked_transfer_encoding: bool = true;
    /// `absolute_redirect`.
    absolute_redirect: bool = true;
    /// `port_in_redirect`.
    port_in_redirect: bool = true;
    /// `server_name_in_redirect`.
    server_name_in_redirect: bool = false;
    /// `disable_symlinks off|on|if_not_owner [from=part]`.
    disable_symlinks: DisableSymlinks = DisableSymlinks::default();
    /// `charset` (None = off).
    charset: Option<String> = None;
    /// `charset $var`: the name rendered per request (`charset` then
    /// holds the text as written).
    charset_var: Option<Template> = None;
    /// `expires` (None = off).
    expires: Option<Expires> = None;
    /// `try_files`.
    try_files: Option<Arc<TryFiles>> = None;
    /// `aio off|threads[=NAME]`.
    aio: AioConf = AioConf::Off;
    /// `aio_write` (writes of temp files through the pool too).
    aio_write: bool = false;
    /// `aio_fast_path`: try cached paths and pages inline first.
    aio_fast_path: bool = true;
    /// `open_file_cache` (None = off).
    open_file_cache: Option<OpenFileCacheConf> = None;
    /// `open_file_cache_valid`.
    open_file_cache_valid: Duration = Duration::from_secs(60);
    /// `open_file_cache_min_uses`.
    open_file_cache_min_uses: u64 = 1;
    /// `open_file_cache_errors`.
    open_file_cache_errors: bool = false;

    // The reverse proxy (`src/upstream`, `src/handlers/proxy.rs`).
    /// `proxy_set_header` lines, in order (NGINX's defaults `Host
    /// $proxy_host` and `Connection close` are added when not named here).
    proxy_set_header: Arc<Vec<(String, Template)>> = Arc::new(Vec::new());
    /// `proxy_ssl_verify`.
    proxy_ssl_verify: bool = false;
    /// `proxy_ssl_trusted_certificate`, read.
    proxy_ssl_trusted_certificate: Option<Arc<crate::tls::client::TrustedCerts>> = None;
    /// `proxy_ssl_crl`, read.
    proxy_ssl_crl: Option<Arc<crate::tls::client::Crls>> = None;
    /// `proxy_ssl_server_name`.
    proxy_ssl_server_name: bool = false;
    /// `proxy_ssl_name` (None: `$proxy_host`).
    proxy_ssl_name: Option<Template> = None;
    /// `proxy_ssl_protocols`: (TLSv1.2, TLSv1.3).
    proxy_ssl_protocols: (bool, bool) = (true, true);
    /// `proxy_ssl_ciphers`: the string and the TLS 1.2 suites it selects.
    proxy_ssl_ciphers: Arc<(String, Vec<rustls::SupportedCipherSuite>)> = super::directives::default_proxy_ciphers();
    /// `proxy_ssl_session_reuse`.
    proxy_ssl_session_reuse: bool = true;
    /// `proxy_ssl_verify_depth`.
    proxy_ssl_verify_depth: u64 = 1;
    /// `proxy_ssl_certificate`.
    proxy_ssl_certificate: Option<Arc<FileAt>> = None;
    /// `proxy_ssl_certificate_key`.
    proxy_ssl_certificate_key: Option<Arc<FileAt>> = None;
    /// `proxy_ssl_password_file`'s lines.
    proxy_ssl_password_file: Arc<Vec<String>> = Arc::new(Vec::new());
    /// The client certificate pair, loaded once the settings merged.
    proxy_ssl_client_cert: Option<Arc<rustls::sign::CertifiedKey>> = None;
    /// `proxy_ignore_client_abort`: the upstream's answer is awaited even
    /// after the client closed.
    proxy_ignore_client_abort: bool = false;
    /// `proxy_http_version 1.1` (default 1.0).
    proxy_http11: bool = false;
    /// `proxy_connect_timeout`.
    proxy_connect_timeout: Duration = Duration::from_secs(60);
    /// `proxy_bind` (None: off).
    proxy_bind: Option<ProxyBind> = None;
    /// `proxy_socket_keepalive`.
    proxy_socket_keepalive: bool = false;
    /// `proxy_read_timeout`.
    proxy_read_timeout: Duration = Duration::from_secs(60);
    /// `proxy_send_timeout`.
    proxy_send_timeout: Duration = Duration::from_secs(60);
    /// `proxy_next_upstream` conditions.
    proxy_next_upstream: crate::upstream::NextUpstream = crate::upstream::NextUpstream::DEFAULT;
    /// `proxy_next_upstream_tries` (0: as many as there are peers).
    proxy_next_upstream_tries: u64 = 0;
    /// `proxy_next_upstream_timeout` (zero: unlimited).
    proxy_next_upstream_timeout: Duration = Duration::ZERO;
    /// `proxy_buffering` (bodies always stream in bounded pieces; off: the
    /// cache stores nothing, as in NGINX).
    proxy_buffering: bool = true;
    /// `proxy_request_buffering`: the body is read whole (in memory, or a
    /// temp file) before the upstream is asked, so it can go to the next.
    proxy_request_buffering: bool = true;
    /// `proxy_force_ranges`: serve ranges of a proxied 200 whatever its
    /// `Accept-Ranges`.
    proxy_force_ranges: bool = false;
    /// `proxy_limit_rate`: bytes a second read from the upstream (0: no
    /// limit; with `proxy_buffering` on only, as in NGINX).
    proxy_limit_rate: u64 = 0;
    /// `proxy_pass_request_headers`.
    proxy_pass_request_headers: bool = true;
    /// `proxy_pass_request_body`.
    proxy_pass_request_body: bool = true;
    /// `proxy_hide_header` names (lowercase), besides NGINX's defaults.
    proxy_hide_header: Arc<Vec<String>> = Arc::new(Vec::new());
    /// `proxy_pass_header` names (lowercase), taken off the hidden list.
    proxy_pass_header: Arc<Vec<String>> = Arc::new(Vec::new());
    /// `proxy_intercept_errors`.
    proxy_intercept_errors: bool = false;
    /// `proxy_buffer_size`: the largest upstream response head.
    proxy_buffer_size: u64 = 4096;
    /// `proxy_redirect` rules (`off`: none; unset: `default`).
    proxy_redirect: Arc<Vec<crate::upstream::RedirectRule>> =
        Arc::new(vec![crate::upstream::RedirectRule::Default]);

    // HTTP/2 (issue 15; src/http/http2/). All but `http2_chunk_size` are
    // read at server level, as NGINX's server-level directives.
    /// `http2 on|off`: HTTP/2 on this server (ALPN `h2`; h2c with prior
    /// knowledge on a plain address).
    http2: bool = false;
    /// `http2_max_concurrent_streams`: open streams per connection
    /// (RST_STREAM REFUSED_STREAM beyond).
    http2_max_concurrent_streams: u32 = 128;
    /// `http2_chunk_size`: the largest DATA frame of a response body.
    http2_chunk_size: usize = 8 * 1024;
    /// `http2_body_preread_size`: each stream's initial receive window.
    http2_body_preread_size: u32 = 64 * 1024;

    // HTTP/3 over QUIC (issue 29; src/http/http3/), server level as in
    // NGINX; a `listen ... quic` address takes them from its default
    // server.
    /// `http3 on|off`: HTTP/3 on a `listen ... quic` address.
    http3: bool = true;
    /// `http3_hq`: accepted; porter offers only ALPN `h3`.
    http3_hq: bool = false;
    /// `http3_max_concurrent_streams`: request streams a client may open
    /// at once (QUIC's `initial_max_streams_bidi`).
    http3_max_concurrent_streams: u32 = 128;
    /// `http3_stream_buffer_size`: each stream's receive window and the
    /// most a response reads from the disk at once.
    http3_stream_buffer_size: usize = 64 * 1024;
    /// `quic_retry`: a Retry validates every new client's address.
    quic_retry: bool = false;
    /// `quic_gso`: segmentation offload for the datagrams sent.
    quic_gso: bool = false;
    /// `quic_host_key`: the key file's bytes (None: a random key per
    /// configuration load), for stateless resets and address tokens.
    quic_host_key: Option<Arc<[u8]>> = None;
    /// `quic_active_connection_id_limit`.
    quic_active_connection_id_limit: u32 = 2;

    // Access control and limits (`src/access`, `src/handlers/access.rs`).
    /// `allow` / `deny` rules, in order.
    access_rules: Arc<Vec<crate::access::rules::AccessRule>> = Arc::new(Vec::new());
    /// `satisfy any` (else `all`).
    satisfy_any: bool = false;
    /// `auth_delay`: how long a 401 of the access phase waits.
    auth_delay: Duration = Duration::ZERO;
    /// `auth_basic` realm (rendering `off`: no authentication).
    auth_basic: Option<Template> = None;
    /// `auth_basic_user_file`.
    auth_basic_user_file: Option<Template> = None;
    /// The prefix a rendered `auth_basic_user_file $var` that is relative
    /// is read under (NGINX's `conf_prefix`).
    auth_basic_file_prefix: Option<Arc<str>> = None;
    /// `auth_request URI` (None: off).
    auth_request: Option<Arc<str>> = None;
    /// `auth_request_set` lines: the variable and its value, rendered in
    /// the subrequest's context.
    auth_request_set: Arc<Vec<(Arc<crate::vars::template::Indexed>, Template)>> = Arc::new(Vec::new());
    /// `mirror` URIs (empty: off).
    mirrors: Arc<Vec<Arc<str>>> = Arc::new(Vec::new());
    /// `mirror_request_body`.
    mirror_request_body: bool = true;
    /// `post_action URI|@name` (None: off): run after the response is
    /// sent (`handlers::post_action`).
    post_action: Option<Arc<str>> = None;
    /// `subrequest_output_buffer_size`: the most of a subrequest's body
    /// kept in memory (SSI's `include ... set=`), one page by default.
    subrequest_output_buffer_size: u64 = 4096;
    /// `limit_req` lines.
    limit_req: Arc<Vec<crate::access::limit_req::LimitReq>> = Arc::new(Vec::new());
    /// `limit_req_status`.
    limit_req_status: u16 = 503;
    /// `limit_req_log_level` (delays are logged one level lower).
    limit_req_log_level: crate::log::Level = crate::log::Level::Error;
    /// `limit_req_dry_run`.
    limit_req_dry_run: bool = false;
    /// `limit_conn` lines.
    limit_conn: Arc<Vec<crate::access::limit_conn::LimitConn>> = Arc::new(Vec::new());
    /// `limit_conn_status`.
    limit_conn_status: u16 = 503;
    /// `limit_conn_log_level`.
    limit_conn_log_level: crate::log::Level = crate::log::Level::Error;
    /// `limit_conn_dry_run`.
    limit_conn_dry_run: bool = false;
    // realip (`directives/realip.rs`, `handlers/realip.rs`).
    /// `set_real_ip_from`: the trusted senders (empty: realip is off).
    real_ip_from: Arc<Vec<crate::access::rules::Net>> = Arc::new(Vec::new());
    /// `real_ip_header`.
    real_ip_header: crate::access::realip::RealIpHeader = crate::access::realip::RealIpHeader::XRealIp;
    /// `real_ip_recursive`.
    real_ip_recursive: bool = false;
    /// `proxy_protocol`: a PROXY v1 header first on each new upstream
    /// connection (the stream module's directive, in the http proxy).
    proxy_protocol: bool = false;
    /// `secure_link`, and the request slot `$secure_link_expires` reads.
    secure_link: Option<(Template, usize)> = None;
    /// `secure_link_md5`.
    secure_link_md5: Option<Template> = None;
    /// `secure_link_secret`.
    secure_link_secret: Option<Arc<str>> = None;
    /// `valid_referers` (None: every referer is valid).
    valid_referers: Option<Arc<crate::access::referer::ValidReferers>> = None;
    // More of the proxy module (`directives/proxy_extra.rs`).
    /// `proxy_store` (None: off).
    proxy_store: Option<Arc<StoreTo>> = None;
    /// `proxy_store_access`: the stored file's mode.
    proxy_store_access: u32 = 0o600;
    /// `proxy_method` (None: the client's).
    proxy_method: Option<Template> = None;
    /// `proxy_set_body` (None: the client's body).
    proxy_set_body: Option<Template> = None;
    /// `proxy_ignore_headers` names (lowercase).
    proxy_ignore_headers: Arc<Vec<String>> = Arc::new(Vec::new());
    /// `proxy_cache_convert_head`.
    proxy_cache_convert_head: bool = true;
    /// `slice` (bytes; 0 = off).
    slice: u64 = 0;
    /// `proxy_cookie_domain` rules.
    proxy_cookie_domain: Arc<Vec<crate::upstream::cookie::CookieRewrite>> = Arc::new(Vec::new());
    /// `proxy_cookie_path` rules.
    proxy_cookie_path: Arc<Vec<crate::upstream::cookie::CookieRewrite>> = Arc::new(Vec::new());
    /// `proxy_cookie_flags` rules.
    proxy_cookie_flags: Arc<Vec<crate::upstream::cookie::CookieFlags>> = Arc::new(Vec::new());

    // Names resolved at run time (`directives/resolver.rs`,
    // `upstream::resolver`).
    /// `resolver` (None: no resolver defined).
    resolver: Option<Arc<crate::upstream::resolver::Resolver>> = None;
    /// `resolver_timeout`.
    resolver_timeout: Duration = Duration::from_secs(30);

    // Trailers (`directives/trailers.rs`, `handlers/trailers.rs`).
    /// `add_trailer` lines.
    add_trailers: Arc<Vec<AddHeader>> = Arc::new(Vec::new());

    // Tuning and request-head settings (`directives/tuning.rs`).
    /// `merge_slashes` (server level).
    merge_slashes: bool = true;
    /// `ignore_invalid_headers` (server level).
    ignore_invalid_headers: bool = true;
    /// `underscores_in_headers` (server level).
    underscores_in_headers: bool = false;
    /// `max_headers` (server level).
    max_headers: usize = 1000;
    /// `keepalive_time`: after this long a connection closes after the
    /// request in progress.
    keepalive_time: Duration = Duration::from_secs(3600);
    /// `error_log` at http, server or location level (None: the main
    /// context's).
    error_log: Option<crate::log::ErrorLog> = None;
    // The rewrite module (`config::rewrite`, `handlers::rewrite`).
    /// `rewrite_log`: matches and rewrites logged at `notice`.
    rewrite_log: bool = false;
    /// `uninitialized_variable_warn`.
    uninitialized_variable_warn: bool = true;
    // Content modules (`src/handlers/gzip.rs`, `autoindex.rs`,
    // `charset.rs`, `http/rate.rs`, `directives/content.rs`): gzip,
    // gzip_static, autoindex, charset, limit_rate.
    /// `gzip`.
    gzip: bool = false;
    /// `gzip_types` (lowercase; `*` matches any; `text/html` always in).
    gzip_types: Arc<Vec<String>> = Arc::new(vec!["text/html".to_string()]);
    /// `gzip_min_length`.
    gzip_min_length: u64 = 20;
    /// `gzip_comp_level` (1-9).
    gzip_comp_level: u32 = 1;
    /// `gzip_vary`.
    gzip_vary: bool = false;
    /// `gzip_proxied` (a set of `GZIP_PROXIED_*` bits).
    gzip_proxied: u16 = GZIP_PROXIED_OFF;
    /// `gzip_disable`.
    gzip_disable: Option<Arc<GzipDisable>> = None;
    /// `gzip_http_version 1.0` (default 1.1: HTTP/1.0 requests get no gzip).
    gzip_http10: bool = false;
    /// `gzip_static`.
    gzip_static: GzipStatic = GzipStatic::Off;
    /// `gunzip` (`handlers/gunzip.rs`), and `gunzip_buffers` (number, size).
    gunzip: bool = false;
    /// See `gunzip`.
    gunzip_buffers: (u64, u64) = (32, 4096);
    /// `random_index` (`handlers/random_index.rs`).
    random_index: bool = false;
    /// `autoindex`.
    autoindex: bool = false;
    /// `autoindex_format`.
    autoindex_format: AutoindexFormat = AutoindexFormat::Html;
    /// `autoindex_exact_size`.
    autoindex_exact_size: bool = true;
    /// `autoindex_localtime`.
    autoindex_localtime: bool = false;
    /// `source_charset` (None: the response is not recoded).
    source_charset: Option<String> = None;
    /// `source_charset $var`, the same.
    source_charset_var: Option<Template> = None;
    /// `override_charset`.
    override_charset: bool = false;
    /// `charset_types` (lowercase; `*` matches any).
    charset_types: Arc<Vec<String>> = Arc::new(
        ["text/html", "text/xml", "text/plain", "text/vnd.wap.wml", "application/javascript", "application/rss+xml"]
            .iter().map(|t| t.to_string()).collect());
    /// `charset_map` tables (http level only; every location sees all).
    charset_maps: Arc<Vec<Arc<CharsetMap>>> = Arc::new(Vec::new());
    /// `limit_rate` (bytes a second; 0: no limit).
    limit_rate: u64 = 0;
    /// `limit_rate_after`.
    limit_rate_after: u64 = 0;
    /// `mp4_buffer_size`, `mp4_max_buffer_size`, `mp4_start_key_frame`
    /// (`handlers/mp4/`, `directives/media.rs`).
    mp4_buffer_size: u64 = 512 * 1024;
    /// See `mp4_buffer_size`.
    mp4_max_buffer_size: u64 = 10 * 1024 * 1024;
    /// See `mp4_buffer_size`.
    mp4_start_key_frame: bool = false;
    /// `limit_rate $var`: rendered per request, a size (0 when it does
    /// not parse), in place of `limit_rate`.
    limit_rate_var: Option<Template> = None;
    /// `limit_rate_after $var`, the same.
    limit_rate_after_var: Option<Template> = None;
}
