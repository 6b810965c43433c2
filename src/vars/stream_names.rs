//! The variables only the `stream { }` block has (NGINX's stream core,
//! upstream and `ssl_preread` modules): `$protocol`, `$bytes_received`,
//! `$session_time`, `$upstream_first_byte_time`, `$upstream_session_time`
//! and `$ssl_preread_*`. They are known only while the walker reads a
//! `stream` block ([`set_stream`]), so an `http` template naming one is
//! still NGINX's `unknown "protocol" variable`. The names the two blocks
//! share (`$remote_addr`, `$status`, `$upstream_addr`, …) stay the common
//! [`super::template::Var`]s, rendered by the stream session's source.

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

/// The stream-only variable `name`, while a stream block is read.
pub fn lookup(name: &str) -> Option<StreamVar> {
    if !IN_STREAM.with(Cell::get) {
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
}
