//! TLS in a stream session, with the HTTP side's pieces: NGINX's ssl
//! phase for a `listen ... ssl` address ([`accept`]: the handshake,
//! bounded by `ssl_handshake_timeout`, after `limit_conn` and the access
//! rules, then `ssl_verify_client`'s verdict, as
//! `ngx_stream_ssl_handler` judges it once the handshake is done), and
//! `proxy_ssl on` toward the upstream ([`connect`]: the client handshake
//! after the PROXY header, bounded by `proxy_connect_timeout`, with the
//! HTTP proxy's `proxy_ssl_*` configuration and its log lines). The
//! handshake's facts become the session's `$ssl_*` variables
//! (`http::tls_vars::TlsInfo`).

use std::sync::Arc;

use rustls::pki_types::ServerName;
use tokio::net::TcpStream;

use super::session::Session;
use crate::config::stream::StreamServer;
use crate::handlers::proxy::tls::{spec, HandshakeFail};
use crate::http::context::TlsInfo;
use crate::log::{ErrorLog, Level};
use crate::tls::conn::{self, TlsConn};
use crate::tls::peer::PeerCert;
use crate::tls::{client, ServerTls};

/// The TLS handshake of a client on a `listen ... ssl` address, then
/// `ssl_verify_client`'s verdict; the session's `$ssl_*` facts are kept.
/// `None`: the session ends (NGINX's 500), with NGINX's `info` line
/// (none for a handshake that timed out, as NGINX).
pub async fn accept(
    tcp: &TcpStream,
    t: &ServerTls,
    s: &Session,
    elog: &ErrorLog,
) -> Option<TlsConn> {
    let config = Arc::clone(&t.config);
    let shake = conn::accept(tcp, move |_| Ok(config), false);
    let tls = match tokio::time::timeout(t.handshake_timeout, shake).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            log(elog, s, format_args!("{e}"));
            return None;
        }
        Err(_) => return None,
    };
    let chain = tls.peer_certificates();
    let client_verify = match &t.client_auth {
        Some(auth) => auth.verify(chain.as_deref()),
        None => "NONE".into(),
    };
    if let Some((_, what)) = t.verify_client.refusal(&client_verify) {
        log(elog, s, format_args!("{what}"));
        return None;
    }
    let peer = chain
        .as_deref()
        .and_then(|c| c.first())
        .and_then(|c| PeerCert::parse(c))
        .map(Arc::new);
    let info = TlsInfo {
        protocol: tls.protocol(),
        cipher: tls.cipher(),
        server_name: tls.server_name(),
        reused: tls.resumed(),
        client_verify,
        peer,
        curve: tls.curve(),
        session_id: tls.session_id(),
        handshaking: None,
    };
    s.set_tls(Arc::new(info));
    Some(tls)
}

/// NGINX's `info` line of the ssl phase (before `proxy_pass`, so with
/// only the client and the server as its context).
fn log(elog: &ErrorLog, s: &Session, what: std::fmt::Arguments<'_>) {
    let ctx = format!(", client: {}, server: {}", s.client(), s.server());
    elog.log_conn(
        Level::Info,
        Some(s.conn.id),
        format_args!("{what} while SSL handshaking"),
        &ctx,
    );
}

/// `proxy_ssl on`: the TLS handshake with a peer just connected (after
/// its PROXY header), within `proxy_connect_timeout`. The name checked
/// and sent as SNI is `proxy_ssl_name` rendered, else the host of
/// `proxy_pass` (`group`: the upstream block's name or `host:port`),
/// without a port, as NGINX's `ngx_stream_proxy_ssl_name`. `Err`:
/// NGINX's message (`... while SSL handshaking to upstream`).
pub async fn connect(
    s: &Session,
    srv: &StreamServer,
    tcp: &TcpStream,
    group: &str,
) -> Result<TlsConn, String> {
    let st = &srv.s;
    let rendered = match &st.proxy_ssl_name {
        Some(t) => t.render(s),
        None => group.to_string(),
    };
    let shown = host_of(&rendered).to_string();
    let spec = spec(st);
    let config = client::config(&spec)?;
    let name = match client::server_name(&rendered) {
        Ok(n) => n,
        // Neither checked nor sent: any name does.
        Err(_) if !spec.verify && !spec.server_name => {
            ServerName::from(std::net::IpAddr::from([127, 0, 0, 1]))
        }
        Err(e) => return Err(e),
    };
    let shake = conn::connect(tcp, config, name);
    match tokio::time::timeout(st.stream.connect_timeout, shake).await {
        Ok(Ok(tls)) => Ok(tls),
        Ok(Err(e)) => Err(HandshakeFail::Failed(e).message_for(&shown)),
        Err(_) => Err(HandshakeFail::TimedOut.message_for(&shown)),
    }
}

/// `name` without a port (`[v6]:port` gives `v6`).
fn host_of(name: &str) -> &str {
    match name.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(v6),
        None => name.rsplit_once(':').map_or(name, |(h, _)| h),
    }
}

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn the_ssl_name_loses_its_port_as_nginx_strips_it() {
        assert_eq!(host_of("127.0.0.1:8081"), "127.0.0.1");
        assert_eq!(host_of("backend"), "backend");
        assert_eq!(host_of("example.com:443"), "example.com");
        assert_eq!(host_of("[::1]:8443"), "::1");
    }
}
