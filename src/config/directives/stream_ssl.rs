//! TLS in the `stream { }` block (NGINX's `ngx_stream_ssl_module` and the
//! `proxy_ssl` part of `ngx_stream_proxy_module`), built from the HTTP
//! pieces: the `ssl_*` rows of `ssl.rs` are allowed in `stream` and its
//! servers and write the stream level's [`SslB`] ([`StreamSsl`], reached
//! through `Build::ssl`); a stream server with a `listen ... ssl` gets its
//! `tls::ServerTls` from the same `ssl::server_tls` an HTTP server does
//! ([`server_tls`]), with NGINX's stream default of 60 s for
//! `ssl_handshake_timeout` and no ALPN (a stream server has no
//! `ssl_alpn`, so a client's ALPN list is ignored, as OpenSSL does
//! without a callback). `proxy_ssl_*` are the HTTP proxy's rows with the
//! stream contexts added (`proxy_ssl.rs`); the client certificate pair of
//! a server that proxies over TLS is loaded once its settings merge
//! ([`client_cert`]).

use super::proxy_ssl::ClientCerts;
use super::ssl::{SslB, SslShared};
#[allow(unused_imports)]
use super::*;

/// NGINX's stream default for `ssl_handshake_timeout`.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);

/// The `ssl_*` settings of the `stream` level and of the server being
/// read.
#[derive(Default)]
pub(super) struct StreamSsl {
    /// The `stream` level's.
    main: SslB,
    /// One per `server { }`, in file order (taken by [`server_tls`]).
    servers: Vec<SslB>,
}

impl StreamSsl {
    /// A new stream server's (empty) settings.
    pub(super) fn open_server(&mut self) {
        self.servers.push(SslB::default());
    }

    /// The settings the walker writes now: the last server's inside one,
    /// else the `stream` level's.
    pub(super) fn level(&mut self, in_server: bool) -> &mut SslB {
        match (in_server, self.servers.last_mut()) {
            (true, Some(s)) => s,
            _ => &mut self.main,
        }
    }
}

/// The TLS of stream server number `i` (merged over the `stream`
/// level's) when it listens with `ssl` (`ssl_listen`: where, for NGINX's
/// message when it has no certificate); `None` without such a `listen`.
pub(super) fn server_tls(
    ssl: &StreamSsl,
    i: usize,
    ssl_listen: Option<(&Arc<Path>, u32)>,
    shared: &mut SslShared,
) -> Result<Option<Arc<crate::tls::ServerTls>>, ConfError> {
    let Some((file, line)) = ssl_listen else {
        return Ok(None);
    };
    let own = ssl.servers.get(i).cloned().unwrap_or_default();
    let listen = Some((file, line, "ssl"));
    let Some(tls) = super::ssl::server_tls(
        &ssl.main,
        &own,
        listen,
        HANDSHAKE_TIMEOUT,
        false,
        shared,
        None,
    )?
    else {
        return Ok(None);
    };
    // Built just now, so this is its only owner.
    match Arc::try_unwrap(tls) {
        Ok(mut tls) => {
            let mut config = (*tls.config).clone();
            config.alpn_protocols.clear();
            tls.config = Arc::new(config);
            Ok(Some(Arc::new(tls)))
        }
        Err(shared) => Ok(Some(shared)),
    }
}

/// Loads the merged `proxy_ssl_certificate` pair of a stream server
/// that proxies with `proxy_ssl on`, as a location's is loaded.
pub(super) fn client_cert(loc: &mut LocBuilder, loaded: &mut ClientCerts) -> Result<(), ConfError> {
    if loc.stream.ssl != Some(true) {
        return Ok(());
    }
    super::proxy_ssl::load_proxy_pair(loc, loaded)
}
