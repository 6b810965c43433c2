//! The settings of an application-server upstream (`fastcgi_*`; the
//! same struct serves `uwsgi_*`, `scgi_*` and `grpc_*`, each field named
//! for the directive without its prefix; a protocol leaves alone the
//! fields it has no directive for): one level's
//! [`AppBuilder`] (each field set or not) merged field by field into
//! [`AppSettings`], as the location settings are. The proxy's core reads
//! the shared ones through `handlers::proxy`'s `Knobs`.

use std::sync::Arc;
use std::time::Duration;

use super::group::settings_group;
use super::setting_types::{FileAt, ProxyBind};
use crate::tls::client::{Crls, TrustedCerts};
use crate::upstream::NextUpstream;
use crate::vars::regex::Regex;
use crate::vars::template::Template;

/// One `fastcgi_param NAME VALUE [if_not_empty]`.
#[derive(Debug, Clone)]
pub struct AppParam {
    /// The parameter's name.
    pub name: String,
    /// Its value.
    pub value: Template,
    /// `if_not_empty`: not sent when the value renders empty.
    pub if_not_empty: bool,
}

settings_group! {
    /// Application-upstream settings as one config level wrote them.
    AppBuilder =>
    /// Application-upstream settings after merging with outer levels.
    AppSettings;
    /// `fastcgi_param` lines (a level with any replaces the outer list).
    params: Arc<Vec<AppParam>> = Arc::new(Vec::new());
    /// `fastcgi_connect_timeout`.
    connect_timeout: Duration = Duration::from_secs(60);
    /// `fastcgi_send_timeout`.
    send_timeout: Duration = Duration::from_secs(60);
    /// `fastcgi_read_timeout`.
    read_timeout: Duration = Duration::from_secs(60);
    /// `fastcgi_next_upstream`.
    next_upstream: NextUpstream = NextUpstream::DEFAULT;
    /// `fastcgi_next_upstream_tries` (0: as many as there are peers).
    next_upstream_tries: u64 = 0;
    /// `fastcgi_next_upstream_timeout` (zero: unlimited).
    next_upstream_timeout: Duration = Duration::ZERO;
    /// `fastcgi_buffer_size`: the largest response header.
    buffer_size: u64 = 4096;
    /// `fastcgi_buffering` (bodies always stream in bounded pieces).
    buffering: bool = true;
    /// `fastcgi_request_buffering` (a body over 64 KiB streams either way).
    request_buffering: bool = true;
    /// `fastcgi_store` (None: off).
    store: Option<Arc<super::setting_types::StoreTo>> = None;
    /// `fastcgi_store_access`: the stored file's mode.
    store_access: u32 = 0o600;
    /// `fastcgi_intercept_errors`.
    intercept_errors: bool = false;
    /// `fastcgi_hide_header` names (lowercase).
    hide_header: Arc<Vec<String>> = Arc::new(Vec::new());
    /// `fastcgi_pass_header` names (lowercase).
    pass_header: Arc<Vec<String>> = Arc::new(Vec::new());
    /// `fastcgi_ignore_headers` names (lowercase).
    ignore_headers: Arc<Vec<String>> = Arc::new(Vec::new());
    /// `fastcgi_pass_request_headers`.
    pass_request_headers: bool = true;
    /// `fastcgi_pass_request_body`.
    pass_request_body: bool = true;
    /// `fastcgi_socket_keepalive`.
    socket_keepalive: bool = false;
    /// `fastcgi_bind`.
    bind: Option<ProxyBind> = None;
    /// `fastcgi_keep_conn`.
    keep_conn: bool = false;
    /// `fastcgi_index`.
    index: Option<Arc<str>> = None;
    /// `fastcgi_split_path_info` (two captures: script name, path info).
    split_path_info: Option<Arc<Regex>> = None;
    /// `fastcgi_catch_stderr` strings.
    catch_stderr: Arc<Vec<String>> = Arc::new(Vec::new());
    /// `fastcgi_limit_rate` (bytes a second; 0: none).
    limit_rate: u64 = 0;
    /// `uwsgi_modifier1` (the packet's first byte).
    modifier1: u8 = 0;
    /// `uwsgi_modifier2` (the packet's fourth byte).
    modifier2: u8 = 0;
    /// `uwsgi_string`: bytes sent after the vars, inside the packet.
    string: Arc<str> = Arc::from("");
    /// `grpc_set_header` lines, in order.
    set_header: Arc<Vec<(String, Template)>> = Arc::new(Vec::new());
    /// `grpc_ssl_verify`.
    ssl_verify: bool = false;
    /// `grpc_ssl_trusted_certificate`, read.
    ssl_trusted_certificate: Option<Arc<TrustedCerts>> = None;
    /// `grpc_ssl_crl`, read.
    ssl_crl: Option<Arc<Crls>> = None;
    /// `grpc_ssl_server_name`.
    ssl_server_name: bool = false;
    /// `grpc_ssl_name` (None: the `grpc_pass` host).
    ssl_name: Option<Template> = None;
    /// `grpc_ssl_protocols`: (TLSv1.2, TLSv1.3).
    ssl_protocols: (bool, bool) = (true, true);
    /// `grpc_ssl_ciphers`: the string and the TLS 1.2 suites it selects.
    ssl_ciphers: Arc<(String, Vec<rustls::SupportedCipherSuite>)> = super::directives::default_proxy_ciphers();
    /// `grpc_ssl_session_reuse`.
    ssl_session_reuse: bool = true;
    /// `grpc_ssl_verify_depth`.
    ssl_verify_depth: u64 = 1;
    /// `grpc_ssl_certificate`.
    ssl_certificate: Option<Arc<FileAt>> = None;
    /// `grpc_ssl_certificate_key`.
    ssl_certificate_key: Option<Arc<FileAt>> = None;
    /// `grpc_ssl_password_file`'s lines.
    ssl_password_file: Arc<Vec<String>> = Arc::new(Vec::new());
    /// The client certificate pair, loaded once the settings merged.
    ssl_client_cert: Option<Arc<rustls::sign::CertifiedKey>> = None;
}
