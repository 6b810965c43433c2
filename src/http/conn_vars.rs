//! The variables of the connection and its addresses: `$remote_addr` and
//! `$remote_port` (the client's, after realip), `$realip_remote_addr` and
//! `$realip_remote_port` (the connection's own peer), `$binary_remote_addr`
//! (the client's 4 or 16 bytes as characters U+0000–U+00FF), the PROXY header's
//! `$proxy_protocol_*`, `$server_addr`, `$server_port`, `$connection`, `$connection_time`,
//! `$pipe`.
//! A port of 0 (an address realip read without one) is empty, as NGINX
//! prints only ports 1–65535.
//! On a `listen unix:PATH` connection the client's address is `unix:`
//! (`$binary_remote_addr` too) and the server's `unix:PATH`, ports empty,
//! as NGINX prints a UNIX-domain socket's addresses.

use std::fmt::Write as _;
use std::net::IpAddr;

use super::context::RequestCtx;
use crate::vars::template::Var;

fn port(out: &mut String, p: u16) {
    if p != 0 {
        let _ = write!(out, "{p}");
    }
}

impl RequestCtx {
    /// Whether the client is a UNIX-domain socket's peer (`listen unix:`,
    /// not replaced by realip): NGINX's `unix:` address, matched by
    /// `allow`/`deny`/`set_real_ip_from unix:`.
    pub fn client_unix(&self) -> bool {
        self.conn.unix.is_some() && self.realip_peer.is_none()
    }

    /// The client's address as `$remote_addr` prints it.
    pub fn remote_addr(&self) -> String {
        if self.client_unix() {
            return "unix:".to_string();
        }
        self.conn.peer.ip().to_string()
    }

    /// The connection and its addresses.
    pub(super) fn append_connection(&self, var: &Var, out: &mut String) {
        let own = self.realip_peer.unwrap_or(self.conn.peer);
        let pp = self.conn.proxy_protocol.as_deref();
        let unix = self.conn.unix.is_some();
        match var {
            Var::RemoteAddr | Var::BinaryRemoteAddr if self.client_unix() => out.push_str("unix:"),
            Var::RealipRemoteAddr if unix => out.push_str("unix:"),
            Var::ServerAddr if unix => {
                let path = self
                    .conn
                    .unix
                    .as_deref()
                    .unwrap_or(std::path::Path::new(""));
                let _ = write!(out, "unix:{}", path.display());
            }
            Var::ServerPort if unix => {}
            Var::RemoteAddr => {
                let _ = write!(out, "{}", self.conn.peer.ip());
            }
            Var::BinaryRemoteAddr => {
                let bytes = match self.conn.peer.ip() {
                    IpAddr::V4(a) => a.octets().to_vec(),
                    IpAddr::V6(a) => a.octets().to_vec(),
                };
                out.extend(bytes.into_iter().map(char::from));
            }
            Var::RemotePort => port(out, self.conn.peer.port()),
            Var::RealipRemoteAddr => {
                let _ = write!(out, "{}", own.ip());
            }
            Var::RealipRemotePort => port(out, own.port()),
            Var::ProxyProtocolAddr => out.push_str(pp.map_or("", |p| &p.src_addr)),
            Var::ProxyProtocolPort => port(out, pp.map_or(0, |p| p.src_port)),
            Var::ProxyProtocolServerAddr => out.push_str(pp.map_or("", |p| &p.dst_addr)),
            Var::ProxyProtocolServerPort => port(out, pp.map_or(0, |p| p.dst_port)),
            Var::RemoteUser => {
                if let Some((user, _)) =
                    crate::access::basic::credentials(self.header("authorization"))
                {
                    out.push_str(&String::from_utf8_lossy(&user));
                }
            }
            Var::ServerAddr => {
                let _ = write!(out, "{}", self.conn.local.ip());
            }
            Var::ServerPort => {
                let _ = write!(out, "{}", self.conn.local.port());
            }
            Var::Connection => {
                let _ = write!(out, "{}", self.conn.id);
            }
            Var::ConnectionRequests => {
                let _ = write!(out, "{}", self.conn_requests);
            }
            Var::ConnectionTime => {
                let ms = self.conn.accepted.elapsed().as_millis();
                let _ = write!(out, "{}.{:03}", ms / 1000, ms % 1000);
            }
            Var::Pipe => out.push(if self.pipelined { 'p' } else { '.' }),
            Var::RequestId => super::derived::request_id(self.conn.id, self.conn_requests, out),
            _ => {}
        }
    }
}
