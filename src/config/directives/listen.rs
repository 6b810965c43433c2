//! A server's `listen` lines as the parser keeps them until the servers
//! are grouped by address (`build.rs`'s `add_listens`).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use crate::config::model::SocketBufs;

/// One `listen` line of a server, as parsed (`http.rs`).
pub(super) struct ListenB {
    pub(super) addr: SocketAddr,
    /// `listen unix:PATH` (`addr` is then a placeholder).
    pub(super) unix: Option<Arc<Path>>,
    pub(super) default_server: bool,
    pub(super) backlog: i32,
    /// `sndbuf=` and `rcvbuf=`: the socket's buffer sizes, if set.
    pub(super) bufs: SocketBufs,
    /// `ssl`, and where the `listen` is (for NGINX's missing-certificate error).
    pub(super) ssl: Option<(Arc<Path>, u32)>,
    /// `http2` (deprecated in NGINX 1.25.1 for the `http2` directive).
    pub(super) http2: bool,
    /// `proxy_protocol`: a PROXY header starts each connection.
    pub(super) proxy_protocol: bool,
    /// `quic`: a UDP address for HTTP/3, and where the `listen` is.
    pub(super) quic: Option<(Arc<Path>, u32)>,
}

impl ListenB {
    /// The address as NGINX's messages name it: `unix:PATH` or `IP:PORT`.
    pub(super) fn name(&self) -> String {
        match &self.unix {
            Some(p) => format!("unix:{}", p.display()),
            None => self.addr.to_string(),
        }
    }
}
