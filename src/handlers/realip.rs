//! NGINX's realip phase: behind a trusted load balancer, proxy or CDN
//! (`set_real_ip_from`), the client's address is read from a header
//! (`real_ip_header`) or the PROXY header, and replaces the peer's in
//! `ctx.conn.peer` for the rest of the request, so everything that reads
//! the client's address sees it: `$remote_addr` (and `$remote_port`, 0 —
//! empty — unless the address came with a port), the access log, the
//! error log's `client:`, `allow`/`deny`, `limit_req`/`limit_conn` keys,
//! `ip_hash`/`hash`, `$proxy_add_x_forwarded_for`, `proxy_protocol`.
//! The peer's own address stays in `ctx.realip_peer`
//! (`$realip_remote_addr`, `$realip_remote_port`).
//!
//! As NGINX, it runs in the post-read phase with the server's settings,
//! and again in the preaccess phase (before `limit_req`) with the
//! location's, for realip configured in a location only; once it has
//! changed the address it does not run again (internal redirects
//! included). The address walk itself is `access::realip`.

use crate::access::realip::RealIpHeader;
use crate::config::LocSettings;
use crate::http::context::RequestCtx;
use crate::util::net::forwarded_client;

/// Applies realip with settings `s` (the server's in the post-read phase,
/// the location's in preaccess), unless it already changed the address.
pub fn run(ctx: &mut RequestCtx, s: &LocSettings) {
    if s.real_ip_from.is_empty() || ctx.realip_peer.is_some() {
        return;
    }
    let peer = ctx.conn.peer;
    let unix = ctx.client_unix();
    let forwarded_addr = |peer, v: &[&str], from, rec| forwarded_client(peer, unix, v, from, rec);
    let (from, rec) = (&s.real_ip_from[..], s.real_ip_recursive);
    let one = |v: Option<&str>| v.and_then(|v| forwarded_addr(peer, &[v], from, rec));
    let found = match &s.real_ip_header {
        RealIpHeader::XRealIp => one(ctx.header("x-real-ip")),
        RealIpHeader::XForwardedFor => {
            let lines: smallvec::SmallVec<[&str; 4]> = ctx
                .head
                .headers()
                .filter(|(n, _)| n.eq_ignore_ascii_case("x-forwarded-for"))
                .map(|(_, v)| v)
                .collect();
            forwarded_addr(peer, &lines, from, rec)
        }
        RealIpHeader::ProxyProtocol => ctx
            .conn
            .proxy_protocol
            .as_ref()
            .and_then(|pp| pp.trusted_client(peer, unix, from, rec)),
        RealIpHeader::Other(name) => one(ctx
            .head
            .headers()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)),
    };
    if let Some(addr) = found {
        ctx.realip_peer = Some(peer);
        ctx.conn.peer = addr;
    }
}
