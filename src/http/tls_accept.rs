//! The start of a connection on a `listen ... ssl` address: NGINX's
//! one-byte peek (a TLS record, `0x16`, or an SSLv2 hello, high bit set,
//! starts a handshake; anything else is plain HTTP, answered with NGINX's
//! 400 "The plain HTTP request was sent to HTTPS port" once its head is
//! read), then the handshake, bounded by `ssl_handshake_timeout`, with
//! the server block chosen by SNI as `Host` chooses it (or, for an ACME
//! issuer's TLS-ALPN-01 validation, the validation certificate:
//! `acme::tls_alpn`). An HTTP/1.x
//! connection whose server has `ssl_ktls on` (the default) then moves to
//! kernel TLS when the start-up probe found it ([`crate::tls::ktls`]);
//! HTTP/2 connections stay in user space.

use std::sync::Arc;
use std::time::Instant;

use tokio::net::TcpStream;

use super::context::{ConnInfo, TlsInfo};
use super::stream::ClientStream;
use crate::acme;
use crate::config::ListenGroup;
use crate::log::{ErrorLog, Level};
use crate::metrics;
use crate::tls::conn::{self, HandshakeError, Hello, Ktls, Refuse, TlsConn};
use crate::tls::peer::PeerCert;
use crate::tls::{ktls, ServerTls};

/// How a connection to a TLS address began.
pub enum Accepted {
    /// A completed handshake.
    Tls(ClientStream, Arc<TlsInfo>),
    /// The client speaks plain HTTP: read its request, answer 497.
    PlainHttp(ClientStream),
    /// The client left, timed out or failed the handshake (logged).
    Closed,
}

/// Starts a connection accepted on the TLS address `listen`.
pub async fn accept(
    tcp: TcpStream,
    listen: &ListenGroup,
    log: &ErrorLog,
    info: &ConnInfo,
) -> Accepted {
    let default = &listen.servers[listen.default];
    let timeout = match &default.tls {
        Some(t) => t.handshake_timeout,
        None => default.limits.header_timeout,
    };
    let deadline = tokio::time::Instant::from_std(Instant::now() + timeout);
    let mut first = [0u8; 1];
    match tokio::time::timeout_at(deadline, tcp.peek(&mut first)).await {
        Ok(Ok(1)) => {}
        Ok(_) => return Accepted::Closed,
        Err(_) => {
            handshake_failed(log, info, "client timed out (110: Connection timed out)");
            return Accepted::Closed;
        }
    }
    if first[0] != 0x16 && first[0] & 0x80 == 0 {
        return Accepted::PlainHttp(ClientStream::plain(tcp));
    }
    let mut answered: Option<Arc<ServerTls>> = None;
    let pick = |hello: &Hello<'_>| {
        if let Some(c) = acme::tls_alpn::answer(hello.server_name, hello.acme_tls) {
            return Ok(c);
        }
        let tls = server_for(listen, hello)?;
        let config = Arc::clone(&tls.config);
        answered = Some(tls);
        Ok(config)
    };
    // kTLS may follow: the handshake reads whole records only.
    let whole_records = ktls::probe().usable()
        && listen
            .servers
            .iter()
            .any(|s| s.tls.as_ref().is_some_and(|t| t.ktls));
    match tokio::time::timeout_at(deadline, conn::accept(&tcp, pick, whole_records)).await {
        Ok(Ok(tls)) => established(tcp, tls, answered, whole_records, log, info),
        Ok(Err(HandshakeError::Closed)) => {
            handshake_failed(log, info, "peer closed connection in SSL handshake");
            Accepted::Closed
        }
        Ok(Err(e)) => {
            handshake_failed(log, info, &e.to_string());
            Accepted::Closed
        }
        Err(_) => {
            handshake_failed(log, info, "client timed out (110: Connection timed out)");
            Accepted::Closed
        }
    }
}

/// A finished handshake: a TLS-ALPN-01 validation (closed: the issuer
/// sends nothing more, RFC 8737 §3), else the connection's stream and
/// its TLS facts.
fn established(
    tcp: TcpStream,
    tls: TlsConn,
    answered: Option<Arc<ServerTls>>,
    whole_records: bool,
    log: &ErrorLog,
    info: &ConnInfo,
) -> Accepted {
    if tls.alpn_acme_tls() {
        // The issuer has seen the validation certificate; it sends
        // nothing more (RFC 8737 §3).
        tls.close_notify(&tcp);
        log.log_conn(
            Level::Info,
            Some(info.id),
            format_args!("acme: tls-alpn-01 validation certificate sent"),
            &format!(", client: {}, server: {}", info.peer.ip(), info.local),
        );
        return Accepted::Closed;
    }
    metrics::inc(&metrics::tls::HANDSHAKES);
    if tls.resumed() {
        metrics::inc(&metrics::tls::RESUMED);
    }
    let client_verify = match answered.as_ref().and_then(|t| t.client_auth.as_ref()) {
        Some(auth) => auth.verify(tls.peer_certificates().as_deref()),
        None => "NONE".into(),
    };
    let facts = TlsInfo {
        protocol: tls.protocol(),
        cipher: tls.cipher(),
        server_name: tls.server_name(),
        reused: tls.resumed(),
        client_verify,
        peer: peer_cert(&tls),
        curve: tls.curve(),
        session_id: tls.session_id(),
        handshaking: tls.handshaking(),
    };
    let ktls_on = answered.as_ref().is_some_and(|t| t.ktls);
    match into_stream(tcp, tls, whole_records && ktls_on) {
        Ok(s) => Accepted::Tls(s, Arc::new(facts)),
        Err(e) => {
            handshake_failed(log, info, &format!("kTLS setup failed ({e})"));
            Accepted::Closed
        }
    }
}

/// The fields of the certificate the client sent, if it sent one.
fn peer_cert(tls: &TlsConn) -> Option<Arc<PeerCert>> {
    let chain = tls.peer_certificates()?;
    PeerCert::parse(chain.first()?).map(Arc::new)
}

/// The TLS of the server a ClientHello chooses on `listen`: by SNI (else
/// the default server); a server without certificates on this address
/// answers with the default server's (or, failing that, the first that
/// has some). `ssl_reject_handshake on` there refuses (NGINX: the server
/// the SNI chose, else the default server, answers `unrecognized_name`).
fn server_for(listen: &ListenGroup, hello: &Hello<'_>) -> Result<Arc<ServerTls>, Refuse> {
    let name = hello.server_name.map(str::to_ascii_lowercase);
    let chosen = listen.find_server(name.as_deref());
    let tls = [chosen, &listen.servers[listen.default]]
        .into_iter()
        .chain(listen.servers.iter())
        .find_map(|s| s.tls.clone())
        .ok_or(Refuse::NoCertificate)?;
    if tls.reject {
        return Err(Refuse::Reject);
    }
    Ok(tls)
}

/// The stream of a finished handshake: moved to kTLS when `ktls` (the
/// kernel offers it and the server has `ssl_ktls on`) and the connection
/// speaks HTTP/1.x, else user-space TLS. An error: the kernel refused
/// the keys after rustls gave them up (counted; the connection is lost).
fn into_stream(tcp: TcpStream, tls: TlsConn, ktls: bool) -> std::io::Result<ClientStream> {
    if !ktls || tls.alpn_h2() {
        return Ok(ClientStream::tls(tcp, tls));
    }
    match tls.into_ktls(&tcp, ktls::probe()) {
        Ktls::On => {
            ktls::count(&ktls::SWITCHED);
            Ok(ClientStream::ktls(tcp))
        }
        Ktls::Stay(tls) => {
            ktls::count(&ktls::STAYED);
            Ok(ClientStream::tls(tcp, *tls))
        }
        Ktls::Failed(e) => {
            ktls::count(&ktls::FAILED);
            Err(e)
        }
    }
}

/// NGINX's `info` line for a failed handshake, counted.
fn handshake_failed(log: &ErrorLog, info: &ConnInfo, what: &str) {
    metrics::inc(&metrics::tls::FAILED);
    log.log_conn(
        Level::Info,
        Some(info.id),
        format_args!("{what} while SSL handshaking"),
        &format!(", client: {}, server: {}", info.peer.ip(), info.local),
    );
}

/// NGINX's refusal of a request on a TLS connection whose client
/// certificate `ssl_verify_client` requires: 496 when none was sent (`on`),
/// 495 when the one sent did not verify (`on`, `optional`), with the
/// error-log text.
pub(super) fn client_cert_refusal(ctx: &super::context::RequestCtx) -> Option<(u16, String)> {
    let verify = ctx.server.tls.as_ref()?.verify_client;
    let got = &ctx.conn.tls.as_ref()?.client_verify;
    let (missing, what) = verify.refusal(got)?;
    Some((if missing { 496 } else { 495 }, what))
}

/// RFC 8470's 425 (Too Early) for a request in early data that porter
/// will not risk being replayed: a method that is not safe, or a server
/// without `ssl_early_data on` (another server of the address took
/// 0-RTT). The client sends it again after the handshake.
pub(crate) fn too_early(ctx: &super::context::RequestCtx) -> Option<(u16, String)> {
    let taken = ctx.server.tls.as_ref().is_some_and(|t| t.early_data);
    if taken && ctx.method.safe() {
        return None;
    }
    let what = format!(
        "client sent \"{}\" request in TLS early data",
        ctx.head.method()
    );
    Some((425, what))
}
