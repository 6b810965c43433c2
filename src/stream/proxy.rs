//! `proxy_pass` in a stream server: the group (an `upstream` block, the
//! implicit group of `host:port`, or a name rendered per session — an
//! `IP:port`, `unix:PATH`, or a host resolved through the server's
//! `resolver`, as NGINX's `ngx_stream_proxy_handler`), the
//! peers tried in the balancer's order with `proxy_next_upstream`,
//! `proxy_next_upstream_tries` and `proxy_next_upstream_timeout`, each
//! connect bounded by `proxy_connect_timeout`, and the PROXY header of
//! `proxy_protocol on`, then the TLS handshake of `proxy_ssl on`
//! (`tls.rs`; one that fails is a failed try, as NGINX's next upstream).
//! Peer selection and failure accounting are the HTTP proxy's
//! (`upstream::balance`); every try is recorded on the session for
//! `$upstream_*`.

use std::sync::Arc;
use std::time::Instant;

use super::session::{Session, Try};
use super::wire::Wire;
use crate::config::stream::{StreamPass, StreamServer};
use crate::config::ProxyBind;
use crate::log::{ErrorLog, Level};
use crate::upstream::balance::{InFlight, PeerRef, UpstreamGroup};
use crate::upstream::{ConnectOptions, PeerAddr, Socket};
use crate::vars::template::VarSource;

/// A connected peer, held in flight (`max_conns`, `least_conn`) while the
/// session lasts.
pub struct Connected {
    /// The socket.
    pub socket: Socket,
    /// The TLS session over it (`proxy_ssl on`).
    pub tls: Option<crate::tls::conn::TlsConn>,
    /// The peer's count in its group, given back when dropped.
    pub _in_flight: InFlight,
    /// When the try began.
    pub began: Instant,
}

impl Connected {
    /// The upstream's end as the relay reads and writes it.
    pub fn wire(&self) -> Wire<'_> {
        match (&self.tls, &self.socket) {
            (Some(t), Socket::Tcp(tcp)) => Wire::Tls(tcp, t),
            _ => Wire::Sock(&self.socket),
        }
    }
}

/// Why a try that connected did not become the session's upstream.
enum NotReady {
    /// The next peer may be tried (the TLS handshake failed).
    TryNext,
    /// The session ends (the PROXY header could not be sent).
    End,
}

/// Logs `msg` for the session at `level`, with NGINX's stream context.
pub fn log(
    log: &ErrorLog,
    s: &Session,
    level: Level,
    msg: std::fmt::Arguments<'_>,
    upstream: &str,
) {
    let up = if upstream.is_empty() {
        String::new()
    } else {
        format!(", upstream: \"{upstream}\"")
    };
    let udp = if s.udp { "udp " } else { "" };
    let ctx = format!(
        ", {udp}client: {}, server: {}{up}, bytes from/to client:{}/{}, bytes from/to upstream:{}/{}",
        s.client(),
        s.server(),
        s.received.get(),
        s.sent.get(),
        s.tries.borrow().iter().map(|t| t.received).sum::<u64>(),
        s.tries.borrow().iter().map(|t| t.sent).sum::<u64>(),
    );
    log.log_conn(level, Some(s.conn.id), msg, &ctx);
}

/// The group a session's `proxy_pass` names, or the status to end with.
pub(super) async fn group(
    s: &Session,
    srv: &StreamServer,
    pass: &StreamPass,
    elog: &ErrorLog,
) -> Result<Arc<UpstreamGroup>, u16> {
    let (t, ups) = match pass {
        StreamPass::Group(g) => return Ok(Arc::clone(g)),
        StreamPass::Dynamic(t, ups) => (t, ups),
    };
    let name = t.render(s);
    if let Some(g) = ups.get(&name) {
        return Ok(Arc::clone(g));
    }
    let addr = match name.parse::<std::net::SocketAddr>() {
        Ok(a) => PeerAddr::from(a),
        Err(_) => match crate::upstream::unix_path(&name) {
            Some(p) => PeerAddr::unix(p).map_err(|_| 500u16)?,
            None => return resolved(s, srv, &name, elog).await,
        },
    };
    Ok(Arc::new(UpstreamGroup::implicit(
        name.clone(),
        &name,
        vec![addr],
    )))
}

/// The group of a rendered `HOST:PORT`: the host's addresses from the
/// server's `resolver`, tried in turn; else 500 with NGINX's line (no
/// port, no resolver, a name that did not resolve).
async fn resolved(
    s: &Session,
    srv: &StreamServer,
    name: &str,
    elog: &ErrorLog,
) -> Result<Arc<UpstreamGroup>, u16> {
    let fail = |what: String| {
        log(elog, s, Level::Error, format_args!("{what}"), "");
        Err(500)
    };
    // The last colon outside brackets starts the port (`[::1]` has none).
    let colon = name.rfind(':').filter(|&i| !name[i..].contains(']'));
    let (host, port) = match colon {
        Some(i) => match name[i + 1..].parse::<u16>() {
            Ok(p) if p != 0 => (&name[..i], p),
            _ => return fail(format!("invalid port in upstream \"{name}\"")),
        },
        None => return fail(format!("no port in upstream \"{name}\"")),
    };
    let Some(resolver) = srv.s.resolver.as_ref() else {
        return fail(format!("no resolver defined to resolve {host}"));
    };
    match resolver.resolve(host, srv.s.resolver_timeout).await {
        Ok(ips) => {
            let addrs = ips
                .into_iter()
                .map(|ip| std::net::SocketAddr::new(ip, port).into())
                .collect();
            Ok(Arc::new(UpstreamGroup::implicit(
                name.to_string(),
                name,
                addrs,
            )))
        }
        Err(e) => fail(format!("{host} could not be resolved ({e})")),
    }
}

/// A try that connected: `tcp_nodelay`, the PROXY header of
/// `proxy_protocol on`, the TLS handshake of `proxy_ssl on`, the peer
/// held in flight.
async fn connected(
    s: &Session,
    srv: &StreamServer,
    (g, elog): (&Arc<UpstreamGroup>, &ErrorLog),
    peer: PeerRef,
    socket: Socket,
    began: Instant,
) -> Result<Connected, NotReady> {
    let st = &srv.s.stream;
    if let Socket::Tcp(t) = &socket {
        let _ = t.set_nodelay(srv.s.tcp_nodelay);
    }
    if st.proxy_protocol {
        let line = crate::http::proxy_protocol::v1_line(s.conn.peer, s.conn.local);
        if socket
            .write_first(line.as_bytes(), st.timeout)
            .await
            .is_err()
        {
            g.release(peer, true);
            s.status.set(502);
            return Err(NotReady::End);
        }
        if let Some(t) = s.tries.borrow_mut().last_mut() {
            t.sent += line.len() as u64;
        }
    }
    let tls = match (st.ssl, &socket) {
        (false, _) => None,
        (true, Socket::Tcp(tcp)) => match super::tls::connect(s, srv, tcp, &g.name).await {
            Ok(t) => Some(t),
            Err(msg) => {
                g.release(peer, true);
                let addr = s.tries.borrow().last().map(|t| t.addr.clone());
                let addr = addr.unwrap_or_default();
                log(elog, s, Level::Error, format_args!("{msg}"), &addr);
                return Err(NotReady::TryNext);
            }
        },
        (true, Socket::Unix(_)) => {
            let what = "\"proxy_ssl\" to a UNIX-domain socket is not supported by porter";
            log(elog, s, Level::Error, format_args!("{what}"), "");
            g.release(peer, true);
            s.status.set(502);
            return Err(NotReady::End);
        }
    };
    // As NGINX's `$upstream_connect_time`: up to the end of the handshake.
    if let Some(t) = s.tries.borrow_mut().last_mut() {
        t.connect = Some(began.elapsed());
    }
    Ok(Connected {
        socket,
        tls,
        _in_flight: g.answered(peer),
        began,
    })
}

/// `proxy_bind` (rendered for the session; empty binds nothing) and
/// `proxy_socket_keepalive`, as the HTTP proxy applies them.
pub(super) fn connect_options(s: &Session, srv: &StreamServer) -> Result<ConnectOptions, String> {
    let bind = match &srv.s.proxy_bind {
        None => None,
        Some(b) => {
            let v = b.addr.render(s);
            match (v.is_empty(), ProxyBind::parse(&v)) {
                (true, _) => None,
                (false, Some(a)) => Some((a, b.transparent)),
                (false, None) => return Err(v),
            }
        }
    };
    Ok(ConnectOptions {
        bind,
        keepalive: srv.s.proxy_socket_keepalive,
    })
}

/// Connects the session to a peer of its `proxy_pass`, trying the next
/// as `proxy_next_upstream*` allow; on failure the session's status
/// (502, or 500 for a name that cannot be used) is set and `None` returned.
pub async fn connect(s: &Session, srv: &StreamServer, elog: &ErrorLog) -> Option<Connected> {
    let st = &srv.s.stream;
    let pass = srv.pass.as_ref()?;
    let g = match group(s, srv, pass, elog).await {
        Ok(g) => g,
        Err(code) => {
            s.status.set(code);
            return None;
        }
    };
    let key = g.hash.as_ref().map(|h| h.key.render(s as &dyn VarSource));
    let mut sel = g.selection(key);
    let started = Instant::now();
    let mut tries = 0u64;
    loop {
        let Some(peer) = g.select(&mut sel) else {
            log(
                elog,
                s,
                Level::Error,
                format_args!("no live upstreams while connecting to upstream"),
                "",
            );
            s.tries.borrow_mut().push(Try {
                addr: g.name.clone(),
                ..Try::default()
            });
            s.status.set(502);
            return None;
        };
        tries += 1;
        let spec = g.peer(peer);
        let addr = spec.addr.to_string();
        s.tries.borrow_mut().push(Try {
            addr: addr.clone(),
            ..Try::default()
        });
        let began = Instant::now();
        let opts = match connect_options(s, srv) {
            Ok(o) => o,
            Err(v) => {
                let what = format_args!("invalid local address \"{v}\"");
                log(elog, s, Level::Error, what, "");
                s.status.set(500);
                return None;
            }
        };
        match crate::upstream::connect_with(&spec.addr, st.connect_timeout, &opts).await {
            Ok(socket) => match connected(s, srv, (&g, elog), peer, socket, began).await {
                Ok(c) => return Some(c),
                Err(NotReady::End) => return None,
                Err(NotReady::TryNext) => {}
            },
            Err(e) => {
                g.release(peer, true);
                let msg = if e.raw_os_error() == Some(libc::ETIMEDOUT) {
                    "upstream timed out (110: Connection timed out)".to_string()
                } else {
                    format!("connect() failed {}", crate::util::errno_text(&e))
                };
                let what = format_args!("{msg} while connecting to upstream");
                log(elog, s, Level::Error, what, &addr);
            }
        }
        // As NGINX, no more tries than live peers (a `down` one is none).
        let out_of_tries = (st.next_upstream_tries != 0 && tries >= st.next_upstream_tries)
            || tries >= g.peer_count() as u64;
        let out_of_time =
            !st.next_upstream_timeout.is_zero() && started.elapsed() >= st.next_upstream_timeout;
        if !st.next_upstream || out_of_tries || out_of_time {
            s.status.set(502);
            return None;
        }
    }
}
