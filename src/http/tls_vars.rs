//! What a connection's TLS handshake settled ([`TlsInfo`]) and the
//! `$ssl_*` variables of the client certificate and the session that it
//! renders ([`append`]), in NGINX's forms (`ngx_event_openssl.c`'s
//! `ngx_ssl_get_*`). The certificate's fields are parsed once, at the
//! handshake, by `tls::peer`.

use std::borrow::Cow;
use std::sync::Arc;

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use crate::tls::peer::PeerCert;
use crate::tls::session_id::SessionId;
use crate::vars::template::{SslVar, Var};

/// What a TLS handshake settled, for `$ssl_*`, `$https` and `$scheme`.
#[derive(Debug)]
pub struct TlsInfo {
    /// `$ssl_protocol`: `TLSv1.2` or `TLSv1.3`.
    pub protocol: &'static str,
    /// `$ssl_cipher`: the suite, as OpenSSL names it.
    pub cipher: &'static str,
    /// `$ssl_server_name`: the SNI name, if sent.
    pub server_name: Option<String>,
    /// `$ssl_session_reused`: `r` when the session was resumed.
    pub reused: bool,
    /// `$ssl_client_verify`: `NONE`, `SUCCESS` or `FAILED:reason` (not
    /// allocated for the first two).
    pub client_verify: Cow<'static, str>,
    /// The client's certificate, when it sent one.
    pub peer: Option<Arc<PeerCert>>,
    /// `$ssl_curve`: the key-exchange group, as OpenSSL names it.
    pub curve: &'static str,
    /// `$ssl_session_id` (printed in hex).
    pub session_id: SessionId,
    /// A TCP connection served from early data: true until its handshake
    /// finishes (`tls::conn::TlsConn::handshaking`).
    pub handshaking: Option<Arc<std::sync::atomic::AtomicBool>>,
}

impl TlsInfo {
    /// The handshake is not finished yet: what is read now came in early
    /// data (`$ssl_early_data`, as NGINX's `SSL_in_early_data`).
    pub fn in_early_data(&self) -> bool {
        use std::sync::atomic::Ordering;
        self.handshaking
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Acquire))
    }
}

/// Appends the value of an `$ssl_*` variable of the connection whose TLS
/// is `tls` (nothing on a plain connection): the session's
/// (`$ssl_protocol`, `$ssl_cipher`, `$ssl_server_name`,
/// `$ssl_session_reused`, `$ssl_client_verify`) and [`append`]'s.
pub fn append_var(tls: Option<&TlsInfo>, var: &Var, out: &mut String) {
    let Some(t) = tls else { return };
    match var {
        Var::SslProtocol => out.push_str(t.protocol),
        Var::SslCipher => out.push_str(t.cipher),
        Var::SslServerName => out.push_str(t.server_name.as_deref().unwrap_or("")),
        Var::SslClientVerify => out.push_str(&t.client_verify),
        Var::SslSessionReused => out.push_str(if t.reused { "r" } else { "." }),
        Var::Ssl(v) => append(tls, *v, out),
        _ => {}
    }
}

/// NGINX's `NGX_ESCAPE_URI_COMPONENT`: all but letters, digits and `-._~`.
const URI_COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Appends the value of `var` on a connection whose TLS is `tls` (nothing
/// on a plain connection, or without a client certificate for the
/// `$ssl_client_*` ones).
pub fn append(tls: Option<&TlsInfo>, var: SslVar, out: &mut String) {
    let Some(t) = tls else { return };
    match var {
        SslVar::SessionId => t.session_id.append_hex(out),
        SslVar::Curve => out.push_str(t.curve),
        // A request's, not the connection's: `RequestCtx::early_data`.
        SslVar::EarlyData => {}
        _ => {
            if let Some(p) = &t.peer {
                append_cert(p, var, out)
            }
        }
    }
}

fn append_cert(p: &PeerCert, var: SslVar, out: &mut String) {
    match var {
        SslVar::ClientSDn => out.push_str(&p.subject),
        SslVar::ClientIDn => out.push_str(&p.issuer),
        SslVar::ClientSerial => out.push_str(&p.serial),
        SslVar::ClientFingerprint => out.push_str(&p.fingerprint),
        SslVar::ClientCert => out.push_str(&p.tabbed()),
        SslVar::ClientEscapedCert => out.extend(utf8_percent_encode(&p.pem, URI_COMPONENT)),
        SslVar::ClientRawCert => out.push_str(&p.pem),
        SslVar::ClientVStart => out.push_str(&p.v_start),
        SslVar::ClientVEnd => out.push_str(&p.v_end),
        SslVar::ClientVRemain => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64);
            out.push_str(&p.v_remain(now))
        }
        SslVar::SessionId | SslVar::Curve | SslVar::EarlyData => {}
    }
}
