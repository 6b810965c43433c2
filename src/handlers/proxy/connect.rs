//! Connecting to a peer for a proxied request: an idle keep-alive
//! connection when one may be reused, else a new one made as the location
//! says (`proxy_bind`, `proxy_socket_keepalive`, the PROXY header of
//! `proxy_protocol on`, the TLS handshake of `proxy_pass https://`), all
//! within `proxy_connect_timeout`.

use std::time::Instant;

use super::knobs::Knobs;
use super::tls::{self, HandshakeFail, TlsTarget};
use crate::config::model::ProxyBind;
use crate::http::context::RequestCtx;
use crate::upstream::{self, pool, PeerAddr, Socket, UpStream, UpstreamConn, UpstreamGroup};

/// Why no connection to a peer was made.
pub(super) enum ConnectFail {
    /// `connect()` failed or timed out.
    Connect(std::io::Error),
    /// The TLS handshake did.
    Handshake(HandshakeFail),
}

/// An idle pooled connection to `addr` when allowed and one is there, else
/// a new one (`proxy_connect_timeout`, which also bounds the TLS
/// handshake of an `https://` upstream).
pub(super) async fn connection(
    group: &UpstreamGroup,
    addr: &PeerAddr,
    allow_pooled: bool,
    k: &Knobs<'_>,
    (tls, proxy_header): (Option<&TlsTarget>, Option<&str>),
    opts: &upstream::ConnectOptions,
) -> Result<UpstreamConn, ConnectFail> {
    let key = tls::pool_key(group.id, tls.is_some(), k.proto);
    if allow_pooled {
        if let Some(c) = pool::take(key, addr, group.keepalive_timeout, proxy_header) {
            return Ok(c);
        }
    }
    let started = Instant::now();
    let sock = upstream::connect_with(addr, k.connect_timeout, opts)
        .await
        .map_err(ConnectFail::Connect)?;
    // The PROXY header goes first, before a TLS handshake (as NGINX's
    // stream proxy sends it).
    if let Some(h) = proxy_header {
        sock.write_first(h.as_bytes(), k.connect_timeout)
            .await
            .map_err(ConnectFail::Connect)?;
    }
    let stream = match (tls, sock) {
        (None, sock) => UpStream::plain(sock),
        (Some(_), Socket::Unix(_)) => {
            return Err(ConnectFail::Connect(std::io::Error::from_raw_os_error(
                libc::EPROTONOSUPPORT,
            )))
        }
        (Some(t), Socket::Tcp(tcp)) => {
            let left = k.connect_timeout.saturating_sub(started.elapsed());
            tls::handshake(tcp, t, left)
                .await
                .map_err(ConnectFail::Handshake)?
        }
    };
    Ok(UpstreamConn {
        stream: std::rc::Rc::new(stream),
        addr: addr.clone(),
        requests: 0,
        opened: std::time::Instant::now(),
        reused: false,
        proxy_header: proxy_header.map(str::to_string),
    })
}

/// How this request's connections to peers are made: `*_bind` (its
/// address rendered for the request; an empty value binds nothing, as
/// NGINX; `Err(value)` when it is no address: NGINX's 500) and
/// `*_socket_keepalive`.
pub(crate) fn connect_options(
    ctx: &RequestCtx,
    k: &Knobs<'_>,
) -> Result<upstream::ConnectOptions, String> {
    let bind = match k.bind {
        None => None,
        Some(b) => {
            let v = b.addr.render(ctx);
            match (v.is_empty(), ProxyBind::parse(&v)) {
                (true, _) => None,
                (false, Some(a)) => Some((a, b.transparent)),
                (false, None) => return Err(v),
            }
        }
    };
    Ok(upstream::ConnectOptions {
        bind,
        keepalive: k.socket_keepalive,
    })
}
