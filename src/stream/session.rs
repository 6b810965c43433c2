//! [`Session`]: one stream connection's state as its variables see it —
//! the client's addresses (after realip), the PROXY header, the byte
//! counts both ways, the upstream tries, the status, the TLS handshake's
//! facts (`$ssl_*`) — and its [`VarSource`], so `map`, `geo`,
//! `split_clients`, `set`, `return`, `proxy_pass` with variables, `hash`
//! keys and `access_log` render through the same variable engine as HTTP
//! requests.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::http::context::{ConnInfo, TlsInfo};
use crate::util::net::Net;
use crate::vars::stream_names::StreamVar;
use crate::vars::template::{Var, VarSource};

/// One upstream try: the peer, how long the connect took (none when it
/// failed), and what went each way.
#[derive(Debug, Default, Clone)]
pub struct Try {
    /// The peer's address as `$upstream_addr` shows it.
    pub addr: String,
    /// Time to connect, if it did.
    pub connect: Option<Duration>,
    /// Time to the first byte from the peer, if one came.
    pub first_byte: Option<Duration>,
    /// Time from the start of the try to its end.
    pub session: Option<Duration>,
    /// Bytes sent to the peer.
    pub sent: u64,
    /// Bytes read from the peer.
    pub received: u64,
}

/// A stream session.
pub struct Session {
    /// The connection; after realip its `peer` is the client the PROXY
    /// header named.
    pub conn: ConnInfo,
    /// The connection's own peer once realip replaced `conn.peer`
    /// (`$realip_remote_addr`, `$realip_remote_port`).
    pub realip_peer: Option<SocketAddr>,
    /// `$status`: 200, or what ended it (400, 403, 500, 502, 503).
    pub status: Cell<u16>,
    /// `$bytes_received`: read from the client.
    pub received: Cell<u64>,
    /// `$bytes_sent`: written to the client.
    pub sent: Cell<u64>,
    /// The upstream tries, in order.
    pub tries: RefCell<Vec<Try>>,
    /// `set` variables and `map`s' cached values.
    slots: RefCell<HashMap<usize, String>>,
    /// When the session ended (`$session_time` in the access log).
    pub ended: Cell<Option<Instant>>,
    /// `ssl_preread`'s ClientHello, if one was read.
    pub hello: RefCell<Option<super::preread::Hello>>,
    /// `$limit_conn_status`: `PASSED`, `REJECTED`, `REJECTED_DRY_RUN`.
    pub limit_conn_status: Cell<Option<&'static str>>,
    /// A UDP session (`listen ... udp`): `$protocol` is `UDP`.
    pub udp: bool,
    /// What the TLS handshake settled (`listen ... ssl`), for `$ssl_*`.
    tls: RefCell<Option<Arc<TlsInfo>>>,
}

impl Session {
    /// A session of `conn`, status 200 until something ends it otherwise.
    pub fn new(conn: ConnInfo) -> Session {
        Session {
            conn,
            realip_peer: None,
            status: Cell::new(200),
            received: Cell::new(0),
            sent: Cell::new(0),
            tries: RefCell::new(Vec::new()),
            slots: RefCell::new(HashMap::new()),
            ended: Cell::new(None),
            limit_conn_status: Cell::new(None),
            hello: RefCell::new(None),
            udp: false,
            tls: RefCell::new(None),
        }
    }

    /// Keeps what the TLS handshake settled, for `$ssl_*`.
    pub fn set_tls(&self, info: Arc<TlsInfo>) {
        *self.tls.borrow_mut() = Some(info);
    }

    /// NGINX's stream realip (its post-accept phase): when the PROXY
    /// header came from a trusted sender (`from`: `set_real_ip_from`),
    /// the address it names, with its port, is the client's for the rest
    /// of the session — `$remote_addr`, `allow`/`deny`, `limit_conn`
    /// keys, `hash`, both logs, the PROXY line sent upstream — and the
    /// peer's own is kept in `realip_peer`.
    pub fn realip(&mut self, from: &[Net]) {
        let Some(pp) = self.conn.proxy_protocol.as_deref() else {
            return;
        };
        if from.is_empty() {
            return;
        }
        let unix = self.conn.unix.is_some();
        if let Some(addr) = pp.trusted_client(self.conn.peer, unix, from, false) {
            self.realip_peer = Some(self.conn.peer);
            self.conn.peer = addr;
        }
    }

    /// Whether the client is a UNIX-domain socket's peer (`listen unix:`,
    /// not replaced by realip).
    fn client_unix(&self) -> bool {
        self.conn.unix.is_some() && self.realip_peer.is_none()
    }

    /// The client's address as the error log and `$remote_addr` give it.
    pub fn client(&self) -> String {
        match self.client_unix() {
            true => "unix:".to_string(),
            false => self.conn.peer.ip().to_string(),
        }
    }

    /// The listening address as the error log's `server:` gives it.
    pub fn server(&self) -> String {
        match &self.conn.unix {
            Some(p) => format!("unix:{}", p.display()),
            None => self.conn.local.to_string(),
        }
    }

    /// The client's IP, for `allow`/`deny` (none on a UNIX-domain socket).
    pub fn client_ip(&self) -> Option<IpAddr> {
        (!self.client_unix()).then(|| self.conn.peer.ip())
    }

    fn tries_list(&self, out: &mut String, f: impl Fn(&Try, &mut String)) {
        for (i, t) in self.tries.borrow().iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            f(t, out);
        }
    }

    fn stream_var(&self, v: StreamVar, out: &mut String) {
        match v {
            StreamVar::Protocol => out.push_str(if self.udp { "UDP" } else { "TCP" }),
            StreamVar::BytesReceived => {
                let _ = write!(out, "{}", self.received.get());
            }
            StreamVar::SessionTime => {
                let end = self.ended.get().unwrap_or_else(Instant::now);
                secs(out, Some(end.duration_since(self.conn.accepted)));
            }
            StreamVar::UpstreamFirstByteTime => {
                self.tries_list(out, |t, out| secs(out, t.first_byte))
            }
            StreamVar::UpstreamSessionTime => self.tries_list(out, |t, out| secs(out, t.session)),
            StreamVar::PrereadServerName | StreamVar::PrereadProtocol | StreamVar::PrereadAlpn => {
                if let Some(h) = &*self.hello.borrow() {
                    out.push_str(match v {
                        StreamVar::PrereadServerName => &h.server_name,
                        StreamVar::PrereadProtocol => h.protocol(),
                        _ => &h.alpn,
                    });
                }
            }
        }
    }

    fn addresses(&self, var: &Var, out: &mut String) {
        let pp = self.conn.proxy_protocol.as_deref();
        let port = |out: &mut String, p: u16| {
            if p != 0 {
                let _ = write!(out, "{p}");
            }
        };
        let own = self.realip_peer.unwrap_or(self.conn.peer);
        match var {
            Var::RemoteAddr | Var::BinaryRemoteAddr if self.client_unix() => out.push_str("unix:"),
            Var::RealipRemoteAddr if self.conn.unix.is_some() => out.push_str("unix:"),
            Var::ServerAddr | Var::ServerPort if self.conn.unix.is_some() => {
                if matches!(var, Var::ServerAddr) {
                    out.push_str(&self.server());
                }
            }
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
            Var::ServerAddr => {
                let _ = write!(out, "{}", self.conn.local.ip());
            }
            Var::ServerPort => port(out, self.conn.local.port()),
            Var::ProxyProtocolAddr => out.push_str(pp.map_or("", |p| &p.src_addr)),
            Var::ProxyProtocolPort => port(out, pp.map_or(0, |p| p.src_port)),
            Var::ProxyProtocolServerAddr => out.push_str(pp.map_or("", |p| &p.dst_addr)),
            Var::ProxyProtocolServerPort => port(out, pp.map_or(0, |p| p.dst_port)),
            _ => {}
        }
    }

    fn upstream(&self, var: &Var, out: &mut String) {
        match var {
            Var::UpstreamAddr => self.tries_list(out, |t, out| out.push_str(&t.addr)),
            Var::UpstreamConnectTime => self.tries_list(out, |t, out| secs(out, t.connect)),
            Var::UpstreamBytesSent => self.tries_list(out, |t, out| {
                let _ = write!(out, "{}", t.sent);
            }),
            Var::UpstreamBytesReceived => self.tries_list(out, |t, out| {
                let _ = write!(out, "{}", t.received);
            }),
            _ => {}
        }
    }
}

/// Seconds with milliseconds (`0.012`), or `-` for a time never reached.
fn secs(out: &mut String, d: Option<Duration>) {
    match d {
        Some(d) => {
            let ms = d.as_millis();
            let _ = write!(out, "{}.{:03}", ms / 1000, ms % 1000);
        }
        None => out.push('-'),
    }
}

impl VarSource for Session {
    fn append(&self, var: &Var, out: &mut String) {
        match var {
            Var::Stream(v) => self.stream_var(*v, out),
            Var::Map(m) => m.append(self, out),
            Var::Geo(g) => g.append(self, out),
            Var::Split(sc) => sc.append(self, out),
            Var::Indexed(v) => {
                if let Some(s) = self.slot(v.index) {
                    out.push_str(&s);
                }
            }
            Var::LimitConnStatus => out.push_str(self.limit_conn_status.get().unwrap_or("")),
            Var::SslProtocol
            | Var::SslCipher
            | Var::SslServerName
            | Var::SslSessionReused
            | Var::SslClientVerify
            | Var::Ssl(_) => {
                crate::http::tls_vars::append_var(self.tls.borrow().as_deref(), var, out)
            }
            // No root in a stream session: the access log's path with
            // variables (`log/by_path.rs`) tests it, and `/` always is.
            Var::DocumentRoot => out.push('/'),
            Var::Status => {
                let _ = write!(out, "{:03}", self.status.get());
            }
            Var::BytesSent => {
                let _ = write!(out, "{}", self.sent.get());
            }
            Var::Connection => {
                let _ = write!(out, "{}", self.conn.id);
            }
            Var::Msec => {
                let (s, ms) = crate::util::time::now();
                let _ = write!(out, "{s}.{ms:03}");
            }
            Var::TimeLocal => crate::util::time::time_local(out),
            Var::TimeIso8601 => crate::util::time::time_iso8601(out),
            Var::Pid => {
                let _ = write!(out, "{}", std::process::id());
            }
            Var::Version => out.push_str(env!("CARGO_PKG_VERSION")),
            Var::Hostname => out.push_str(&rustix::system::uname().nodename().to_string_lossy()),
            Var::UpstreamAddr
            | Var::UpstreamConnectTime
            | Var::UpstreamBytesSent
            | Var::UpstreamBytesReceived => self.upstream(var, out),
            _ => self.addresses(var, out),
        }
    }

    fn slot(&self, index: usize) -> Option<String> {
        self.slots.borrow().get(&index).cloned()
    }

    fn store_slot(&self, index: usize, value: &str) {
        self.slots.borrow_mut().insert(index, value.to_string());
    }
}
