//! `$ssl_*` variables: the names of the client certificate's and the
//! session's ([`SslVar`]), and the name table from `$ssl_*` names to
//! [`Var`]s, apart from `template.rs`'s other names.

use super::template::Var;

/// `$ssl_*` variables of the client certificate and the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslVar {
    /// `$ssl_client_s_dn`: the subject, RFC 2253.
    ClientSDn,
    /// `$ssl_client_i_dn`: the issuer, RFC 2253.
    ClientIDn,
    /// `$ssl_client_serial`.
    ClientSerial,
    /// `$ssl_client_fingerprint`: SHA-1, hex.
    ClientFingerprint,
    /// `$ssl_client_cert`: PEM, lines after the first tab-prefixed.
    ClientCert,
    /// `$ssl_client_escaped_cert`: PEM, urlencoded.
    ClientEscapedCert,
    /// `$ssl_client_raw_cert`: PEM.
    ClientRawCert,
    /// `$ssl_client_v_start`.
    ClientVStart,
    /// `$ssl_client_v_end`.
    ClientVEnd,
    /// `$ssl_client_v_remain`: days left.
    ClientVRemain,
    /// `$ssl_session_id`.
    SessionId,
    /// `$ssl_curve`: the key-exchange group.
    Curve,
    /// `$ssl_early_data`.
    EarlyData,
}

impl SslVar {
    /// The `$ssl_*` variable `name`, if it is one.
    pub(super) fn var(name: &str) -> Option<Var> {
        Some(Var::Ssl(match name {
            "ssl_protocol" => return Some(Var::SslProtocol),
            "ssl_cipher" => return Some(Var::SslCipher),
            "ssl_server_name" => return Some(Var::SslServerName),
            "ssl_session_reused" => return Some(Var::SslSessionReused),
            "ssl_client_verify" => return Some(Var::SslClientVerify),
            "ssl_client_s_dn" => SslVar::ClientSDn,
            "ssl_client_i_dn" => SslVar::ClientIDn,
            "ssl_client_serial" => SslVar::ClientSerial,
            "ssl_client_fingerprint" => SslVar::ClientFingerprint,
            "ssl_client_cert" => SslVar::ClientCert,
            "ssl_client_escaped_cert" => SslVar::ClientEscapedCert,
            "ssl_client_raw_cert" => SslVar::ClientRawCert,
            "ssl_client_v_start" => SslVar::ClientVStart,
            "ssl_client_v_end" => SslVar::ClientVEnd,
            "ssl_client_v_remain" => SslVar::ClientVRemain,
            "ssl_session_id" => SslVar::SessionId,
            "ssl_curve" => SslVar::Curve,
            "ssl_early_data" => SslVar::EarlyData,
            _ => return None,
        }))
    }
}
