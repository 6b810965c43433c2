//! The variables only the `stream { }` block has (NGINX's stream core,
//! upstream and `ssl_preread` modules): `$protocol`, `$bytes_received`,
//! `$session_time`, `$upstream_first_byte_time`, `$upstream_session_time`
//! and `$ssl_preread_*`. They are known only while the walker reads a
//! `stream` block ([`set_stream`]), so an `http` template naming one is
//! still NGINX's `unknown "protocol" variable`. The names the two blocks
//! share (`$remote_addr`, `$status`, `$upstream_addr`, …, [`shared`]) stay
//! the common [`super::template::Var`]s, rendered by the stream session's
//! source; inside `stream` no other built-in name is known (`$uri` there
//! is NGINX's `unknown "uri" variable`), and the names the configuration
//! defines are each block's own (`template.rs` keeps two tables).

use std::cell::Cell;

/// A stream-only variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamVar {
    /// `$protocol`: `TCP` or `UDP`.
    Protocol,
    /// `$bytes_received`: bytes read from the client.
    BytesReceived,
    /// `$session_time`: seconds, millisecond resolution.
    SessionTime,
    /// `$upstream_first_byte_time`.
    UpstreamFirstByteTime,
    /// `$upstream_session_time`.
    UpstreamSessionTime,
    /// `$ssl_preread_server_name`: the SNI of the ClientHello.
    PrereadServerName,
    /// `$ssl_preread_protocol`: the highest version the client offers.
    PrereadProtocol,
    /// `$ssl_preread_alpn_protocols`: the ALPN list, comma-separated.
    PrereadAlpn,
}

thread_local! {
    /// The walker is inside `stream { }` (the build runs on one thread).
    static IN_STREAM: Cell<bool> = const { Cell::new(false) };
}

/// Says whether templates compiled from now on belong to the stream block.
pub fn set_stream(on: bool) {
    IN_STREAM.with(|s| s.set(on));
}

/// Whether the walker is inside `stream { }`.
pub fn in_stream() -> bool {
    IN_STREAM.with(Cell::get)
}

/// Whether the built-in `name` of the common table is also one of the
/// stream block's (NGINX's stream core, upstream, realip, limit_conn and
/// ssl modules; `porter_version` is porter's `nginx_version`).
pub fn shared(name: &str) -> bool {
    const SHARED: &[&str] = &[
        "binary_remote_addr",
        "remote_addr",
        "remote_port",
        "realip_remote_addr",
        "realip_remote_port",
        "proxy_protocol_addr",
        "proxy_protocol_port",
        "proxy_protocol_server_addr",
        "proxy_protocol_server_port",
        "server_addr",
        "server_port",
        "bytes_sent",
        "status",
        "connection",
        "nginx_version",
        "porter_version",
        "hostname",
        "pid",
        "msec",
        "time_iso8601",
        "time_local",
        "upstream_addr",
        "upstream_bytes_sent",
        "upstream_bytes_received",
        "upstream_connect_time",
        "limit_conn_status",
    ];
    SHARED.contains(&name) || name.starts_with("ssl_") || matches!(name.as_bytes(), [b'0'..=b'9'])
}

/// The stream-only variable `name`, while a stream block is read.
pub fn lookup(name: &str) -> Option<StreamVar> {
    if !in_stream() {
        return None;
    }
    Some(match name {
        "protocol" => StreamVar::Protocol,
        "bytes_received" => StreamVar::BytesReceived,
        "session_time" => StreamVar::SessionTime,
        "upstream_first_byte_time" => StreamVar::UpstreamFirstByteTime,
        "upstream_session_time" => StreamVar::UpstreamSessionTime,
        "ssl_preread_server_name" => StreamVar::PrereadServerName,
        "ssl_preread_protocol" => StreamVar::PrereadProtocol,
        "ssl_preread_alpn_protocols" => StreamVar::PrereadAlpn,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_names_exist_only_inside_stream() {
        assert_eq!(lookup("protocol"), None);
        set_stream(true);
        assert_eq!(lookup("protocol"), Some(StreamVar::Protocol));
        set_stream(false);
        assert_eq!(lookup("bytes_received"), None);
    }

    #[test]
    fn only_the_stream_modules_names_are_shared() {
        assert!(shared("remote_addr") && shared("realip_remote_port"));
        assert!(shared("ssl_protocol") && shared("1"));
        assert!(!shared("uri") && !shared("http_host") && !shared("arg_a"));
    }
}
