//! The `stream { }` block's sessions: a TCP connection accepted on a
//! stream server's address (or, on a `listen ... udp` one, the datagrams
//! of one client address: `udp.rs`) runs NGINX's stream phases in order —
//! the PROXY header (`listen ... proxy_protocol`), post-accept (realip: a
//! trusted sender's PROXY header names the client), preaccess
//! (`limit_conn`, `set`), access (`allow`/`deny`), ssl (the TLS handshake
//! of `listen ... ssl`), preread (`ssl_preread`), content (`return`, or
//! `proxy_pass`: connect, with TLS when `proxy_ssl on`, then relay bytes
//! both ways) — and ends with its `access_log` lines. The worker counts a session in
//! `worker_connections` and a graceful stop waits for it, as for an HTTP
//! connection. The configuration is `config::stream`; peers, balancing,
//! variables, access rules, the PROXY protocol and the log writer are the
//! ones HTTP uses.
//!
//! | File | What it holds |
//! |---|---|
//! | `mod.rs` | [`serve`]: the phases of one session |
//! | `session.rs` | `Session`: the session's state and its variables |
//! | `preread.rs` | `ssl_preread`: the ClientHello's SNI, version and ALPN |
//! | `proxy.rs` | `proxy_pass`: the group, the tries, the connect |
//! | `tls.rs` | TLS: `listen ... ssl`'s handshake and `ssl_verify_client`, `proxy_ssl`'s handshake |
//! | `wire.rs` | `Wire`: one end (plain or TLS) as the phases read and write it |
//! | `relay.rs` | the two-way relay: buffers, `proxy_timeout`, rates, half-close |
//! | `udp.rs` | `listen ... udp`: the datagrams' dispatch to their sessions |
//! | `udp_session.rs` | a UDP session: its phases, its upstream, its datagrams |
//! | `udp_pktinfo.rs` | a wildcard UDP socket: each datagram's destination, answers from it |

pub mod preread;
pub mod proxy;
pub mod relay;
pub mod session;
pub mod tls;
pub mod udp;
mod udp_pktinfo;
mod udp_session;
pub mod wire;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

use crate::access::limit_conn::{ConnVerdict, Held};
use crate::config::stream::StreamServer;
use crate::config::ListenGroup;
use crate::http::context::ConnInfo;
use crate::log::{ErrorLog, Level};
use crate::vars::template::VarSource;
use session::Session;
use wire::Wire;

/// How long the PROXY header may take (NGINX's `proxy_protocol_timeout`).
const PROXY_PROTOCOL_TIMEOUT: Duration = Duration::from_secs(30);

/// How long `return`'s value may take to send.
const RETURN_TIMEOUT: Duration = Duration::from_secs(60);

/// Serves one stream session on `tcp`, accepted on `listen` (which says
/// whether a PROXY header comes first and whether TLS does); `wlog` is
/// the worker's error log.
pub async fn serve(
    mut tcp: TcpStream,
    mut conn: ConnInfo,
    listen: &ListenGroup,
    srv: Arc<StreamServer>,
    wlog: &ErrorLog,
) {
    let elog = srv.s.error_log.clone().unwrap_or_else(|| wlog.clone());
    if !srv.s.tcp_nodelay {
        let _ = tcp.set_nodelay(false);
    }
    let ok = !listen.proxy_protocol
        || crate::http::proxy_protocol::accept(&mut tcp, PROXY_PROTOCOL_TIMEOUT, &elog, &mut conn)
            .await;
    let mut s = Session::new(conn);
    s.realip(&srv.s.real_ip_from);
    if ok {
        let tls = srv.tls.as_deref().filter(|_| listen.ssl);
        let _held = phases(&tcp, tls, &s, &srv, &elog).await;
    } else {
        s.status.set(400);
    }
    s.ended.set(Some(Instant::now()));
    for l in srv.s.access_log.iter() {
        l.write(&s, None);
    }
}

/// The phases after the PROXY header; what it returns (the `limit_conn`
/// slots) is held until the session ends.
async fn phases(
    tcp: &TcpStream,
    server_tls: Option<&crate::tls::ServerTls>,
    s: &Session,
    srv: &StreamServer,
    elog: &ErrorLog,
) -> Vec<Held> {
    let (held, go) = preaccess(s, srv, elog);
    if !go {
        return held;
    }
    let conn = match server_tls {
        Some(t) => match tls::accept(tcp, t, s, elog).await {
            Some(c) => Some(c),
            None => {
                s.status.set(500);
                return held;
            }
        },
        None => None,
    };
    let client = match &conn {
        Some(c) => Wire::Tls(tcp, c),
        None => Wire::Tcp(tcp),
    };
    let initial = if srv.s.stream.ssl_preread {
        match preread(client, s, srv, elog).await {
            Some(b) => b,
            None => return held,
        }
    } else {
        Vec::new()
    };
    if let Some(t) = &srv.ret {
        let v = t.render(s);
        if client.write_all(v.as_bytes(), RETURN_TIMEOUT).await.is_ok() {
            s.sent.set(v.len() as u64);
        }
        client.close_notify();
        return held;
    }
    proxy_session(client, s, srv, elog, initial).await;
    held
}

/// Preaccess (`limit_conn`, `set`) and access (`allow`/`deny`), TCP's
/// and UDP's: the `limit_conn` slots taken, and whether the session goes
/// on (when not, its status is set).
fn preaccess(s: &Session, srv: &StreamServer, elog: &ErrorLog) -> (Vec<Held>, bool) {
    let Some(held) = limit_conn(s, srv, elog) else {
        s.status.set(503);
        return (Vec::new(), false);
    };
    for set in &srv.sets {
        let v = set.value.render(s);
        s.store_slot(set.slot, &v);
    }
    if let Some(r) = crate::access::rules::first_match(&srv.s.access_rules, s.client_ip()) {
        if r.deny {
            // NGINX's log action until preread: "initializing session".
            let what = format_args!("access forbidden by rule while initializing session");
            proxy::log(elog, s, Level::Error, what, "");
            s.status.set(403);
            return (held, false);
        }
    }
    (held, true)
}

/// `ssl_preread`: reads until the ClientHello is whole (or is none),
/// `preread_timeout` passes (the session goes on with what it has) or
/// `preread_buffer_size` is full (400); the bytes read, or `None` when
/// the session ends here.
async fn preread(
    client: Wire<'_>,
    s: &Session,
    srv: &StreamServer,
    elog: &ErrorLog,
) -> Option<Vec<u8>> {
    let st = &srv.s.stream;
    let max = st.preread_buffer_size.max(1) as usize;
    let deadline = tokio::time::Instant::now() + st.preread_timeout;
    let mut buf = Vec::new();
    loop {
        match preread::parse(&buf) {
            preread::Parsed::Done(hello) => {
                *s.hello.borrow_mut() = hello;
                break;
            }
            preread::Parsed::More if buf.len() >= max => {
                proxy::log(
                    elog,
                    s,
                    Level::Error,
                    format_args!("preread buffer full"),
                    "",
                );
                s.status.set(400);
                return None;
            }
            preread::Parsed::More => {}
        }
        let room = max - buf.len();
        let read = async {
            loop {
                match client.try_read_into(&mut buf, room) {
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        client.readable().await?
                    }
                    r => return r,
                }
            }
        };
        match tokio::time::timeout_at(deadline, read).await {
            Err(_) => break,
            Ok(Ok(0)) | Ok(Err(_)) => {
                s.received.set(buf.len() as u64);
                return None;
            }
            Ok(Ok(_)) => {}
        }
    }
    s.received.set(buf.len() as u64);
    Some(buf)
}

/// `limit_conn`: the slots taken, or `None` when a zone refuses (503).
fn limit_conn(s: &Session, srv: &StreamServer, elog: &ErrorLog) -> Option<Vec<Held>> {
    let mut held = Vec::new();
    for l in srv.s.limit_conn.iter() {
        let Some(def) = l.zone.def() else { continue };
        let key = def.key.render_key(s);
        if key.is_empty() || key.len() > 255 {
            continue;
        }
        s.limit_conn_status.set(Some("PASSED"));
        match l.zone.acquire(&key, l.max) {
            ConnVerdict::Held(h) => held.push(h),
            _ => {
                let dry = if srv.s.limit_conn_dry_run {
                    ", dry run"
                } else {
                    ""
                };
                let level = srv.s.limit_conn_log_level;
                let name = &l.zone.name;
                proxy::log(
                    elog,
                    s,
                    level,
                    format_args!(
                        "limiting connections{dry} by zone \"{name}\" while initializing session"
                    ),
                    "",
                );
                if !srv.s.limit_conn_dry_run {
                    s.limit_conn_status.set(Some("REJECTED"));
                    return None;
                }
                s.limit_conn_status.set(Some("REJECTED_DRY_RUN"));
                held.clear();
                return Some(held);
            }
        }
    }
    Some(held)
}

/// A rate rendered for the session (one that is no size: none).
fn rate(s: &Session, t: &crate::vars::template::Template) -> u64 {
    crate::config::value::parse_size(&t.render(s)).unwrap_or(0)
}

/// `proxy_pass`: a peer connected, then the relay until one side ends.
async fn proxy_session(
    client: Wire<'_>,
    s: &Session,
    srv: &StreamServer,
    elog: &ErrorLog,
    initial: Vec<u8>,
) {
    let pre = initial.len() as u64;
    let Some(up) = proxy::connect(s, srv, elog).await else {
        return;
    };
    let st = &srv.s.stream;
    let lim = relay::Limits {
        buffer: st.buffer_size.max(1) as usize,
        timeout: st.timeout,
        upload_rate: rate(s, &st.upload_rate),
        download_rate: rate(s, &st.download_rate),
        half_close: st.half_close,
    };
    let (c, end) = relay::relay(client, up.wire(), lim, initial).await;
    s.received.set(pre + c.from_client);
    s.sent.set(c.to_client);
    let addr = {
        let mut tries = s.tries.borrow_mut();
        let t = tries.last_mut().expect("the try connected");
        t.sent += c.to_upstream;
        t.received = c.from_upstream;
        t.first_byte = c.first_byte.map(|f| f.duration_since(up.began));
        t.session = Some(up.began.elapsed());
        t.addr.clone()
    };
    let what = match end {
        relay::End::Client => "client disconnected",
        relay::End::Upstream => "upstream disconnected",
        relay::End::TimedOut => "connection timed out (110: Connection timed out) while proxying",
    };
    proxy::log(elog, s, Level::Info, format_args!("{what}"), &addr);
}
