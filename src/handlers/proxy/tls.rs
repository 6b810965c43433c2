//! `proxy_pass https://`: what a request needs to reach its upstream over
//! TLS (the location's client configuration and the name checked and sent
//! as SNI), the handshake after connecting, and NGINX's log lines when it
//! fails. The record I/O itself is `tls::conn`'s, behind `UpStream`.

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::{CertificateError, ClientConfig};
use tokio::net::TcpStream;

use super::request::UpstreamError;
use crate::config::app_upstream::AppSettings;
use crate::config::LocSettings;
use crate::http::context::RequestCtx;
use crate::log::ErrorLog;
use crate::tls::client::{self, ClientSpec};
use crate::tls::conn::{self, HandshakeError};
use crate::upstream::UpStream;

/// TLS to the upstream of one request.
pub struct TlsTarget {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
    /// The name as rendered, for log lines.
    shown: String,
}

/// The request's TLS target when its `proxy_pass` URL is `https://`:
/// the location's `proxy_ssl_*` configuration and `proxy_ssl_name`
/// (default `$proxy_host`). A name that is not one is 502 with a line.
pub fn target(ctx: &RequestCtx, log: &ErrorLog) -> Result<TlsTarget, UpstreamError> {
    let s = &ctx.loc.s;
    target_with(ctx, log, &spec(s), s.proxy_ssl_name.as_ref())
}

/// A TLS target made of `spec` and the name `name` renders to (default
/// `$proxy_host`): `proxy_pass https://`'s and `grpc_pass grpcs://`'s.
pub fn target_with(
    ctx: &RequestCtx,
    log: &ErrorLog,
    spec: &ClientSpec,
    name: Option<&crate::vars::template::Template>,
) -> Result<TlsTarget, UpstreamError> {
    let shown = match name {
        Some(t) => t.render(ctx),
        None => ctx
            .upstream
            .as_ref()
            .map_or_else(String::new, |u| u.proxy_host.clone()),
    };
    let made = client::config(spec).and_then(|config| {
        let name = client::server_name(&shown)?;
        Ok(TlsTarget {
            config,
            name,
            shown: shown.clone(),
        })
    });
    made.map_err(|e| {
        ctx.log_in(log).error(format_args!("{e}"));
        UpstreamError::Status(502)
    })
}

/// The `proxy_ssl_*` settings of a location (or of a stream server
/// with `proxy_ssl on`) as a client configuration's spec.
pub fn spec(s: &LocSettings) -> ClientSpec {
    ClientSpec {
        verify: s.proxy_ssl_verify,
        trusted: s.proxy_ssl_trusted_certificate.clone(),
        crls: s.proxy_ssl_crl.clone(),
        verify_depth: usize::try_from(s.proxy_ssl_verify_depth).unwrap_or(usize::MAX),
        server_name: s.proxy_ssl_server_name,
        tls12: s.proxy_ssl_protocols.0,
        tls13: s.proxy_ssl_protocols.1,
        ciphers: Arc::clone(&s.proxy_ssl_ciphers),
        session_reuse: s.proxy_ssl_session_reuse,
        cert: s.proxy_ssl_client_cert.clone(),
        alpn_h2: false,
    }
}

/// An upstream module's `*_ssl_*` settings (`grpc_ssl_*`); `alpn_h2`:
/// offer `h2` (gRPC's upstreams speak HTTP/2).
pub fn app_spec(a: &AppSettings, alpn_h2: bool) -> ClientSpec {
    ClientSpec {
        verify: a.ssl_verify,
        trusted: a.ssl_trusted_certificate.clone(),
        crls: a.ssl_crl.clone(),
        verify_depth: usize::try_from(a.ssl_verify_depth).unwrap_or(usize::MAX),
        server_name: a.ssl_server_name,
        tls12: a.ssl_protocols.0,
        tls13: a.ssl_protocols.1,
        ciphers: Arc::clone(&a.ssl_ciphers),
        session_reuse: a.ssl_session_reuse,
        cert: a.ssl_client_cert.clone(),
        alpn_h2,
    }
}

/// Why a handshake with an upstream failed.
pub enum HandshakeFail {
    /// `proxy_connect_timeout` passed.
    TimedOut,
    /// The peer or the socket ended it.
    Failed(HandshakeError),
}

impl HandshakeFail {
    /// Whether `proxy_next_upstream timeout` (rather than `error`) applies.
    pub fn timed_out(&self) -> bool {
        matches!(self, HandshakeFail::TimedOut)
    }

    /// NGINX's message for the failure, `while SSL handshaking to
    /// upstream` (the caller appends the context).
    pub fn message(&self, t: &TlsTarget) -> String {
        self.message_for(&t.shown)
    }

    /// [`HandshakeFail::message`] for a connection to the name `shown`
    /// (the stream proxy's, which has no `TlsTarget`).
    pub fn message_for(&self, shown: &str) -> String {
        const WHILE: &str = "while SSL handshaking to upstream";
        match self {
            HandshakeFail::TimedOut => {
                format!("upstream timed out (110: Connection timed out) {WHILE}")
            }
            HandshakeFail::Failed(HandshakeError::Tls(rustls::Error::InvalidCertificate(c))) => {
                match c {
                    CertificateError::NotValidForName
                    | CertificateError::NotValidForNameContext { .. } => {
                        format!("upstream SSL certificate does not match \"{shown}\" {WHILE}")
                    }
                    c => format!(
                        "upstream SSL certificate verify error: ({}) {WHILE}",
                        verify_reason(c)
                    ),
                }
            }
            HandshakeFail::Failed(HandshakeError::Closed) => {
                format!("peer closed connection in SSL handshake {WHILE}")
            }
            HandshakeFail::Failed(e) => format!("{e} {WHILE}"),
        }
    }
}

/// OpenSSL's verify result code and text for a certificate rustls
/// refused, as NGINX logs them (`20:unable to get local issuer
/// certificate`); rustls's name for the rest.
fn verify_reason(c: &CertificateError) -> String {
    let known = match c {
        CertificateError::UnknownIssuer => "20:unable to get local issuer certificate",
        CertificateError::BadSignature => "7:certificate signature failure",
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            "10:certificate has expired"
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "9:certificate is not yet valid"
        }
        CertificateError::Revoked => "23:certificate revoked",
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
            "26:unsupported certificate purpose"
        }
        c => return format!("{c:?}"),
    };
    known.to_string()
}

/// Runs the TLS handshake on a new connection within `timeout`.
pub async fn handshake(
    tcp: TcpStream,
    t: &TlsTarget,
    timeout: Duration,
) -> Result<UpStream, HandshakeFail> {
    let shake = conn::connect(&tcp, Arc::clone(&t.config), t.name.clone());
    match tokio::time::timeout(timeout, shake).await {
        Ok(Ok(tls)) => Ok(UpStream::tls(tcp, tls)),
        Ok(Err(e)) => Err(HandshakeFail::Failed(e)),
        Err(_) => Err(HandshakeFail::TimedOut),
    }
}

/// The keep-alive pool a group's connections go to: TLS and plain ones,
/// HTTP and FastCGI ones, of one group never mix (uwsgi and SCGI ones are
/// never kept).
pub fn pool_key(group: u64, tls: bool, proto: crate::upstream::Protocol) -> u64 {
    let fastcgi = proto != crate::upstream::Protocol::Http;
    group << 2 | u64::from(fastcgi) << 1 | u64::from(tls)
}
