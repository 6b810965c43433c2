//! The tries over an upstream group's peers, one loop for every protocol
//! (`proxy_pass`, `fastcgi_pass`, `uwsgi_pass`, `scgi_pass` and
//! `grpc_pass`): peers in balancing order, `*_next_upstream` (+ `_tries`,
//! `_timeout`) read from the protocol's [`Knobs`], `max_fails` counted,
//! NGINX's `no live upstreams` line. A protocol gives only its try
//! ([`PeerTry::attempt`]) and whether its request can go again.

use std::sync::Arc;
use std::time::Instant;

use super::fetch::Failure;
use super::knobs::Knobs;
use super::request::UpstreamError;
use crate::h1::fields::Fields;
use crate::handlers::outcome::Env;
use crate::http::context::RequestCtx;
use crate::http::upstream_vars::TryRecord;
use crate::upstream::balance::InFlight;
use crate::upstream::{NextUpstream, PeerRef, Protocol, UpstreamGroup};

/// A try's outcome: `Err(Ok(_))` is the peer's failure (logged),
/// `Err(Err(_))` one that ends the request.
pub(crate) type TryResult<R> = Result<R, Result<Failure, UpstreamError>>;

/// One protocol's request, as the loop over peers sees it.
pub(crate) trait PeerTry {
    /// What a try that got an answer gives.
    type Response;
    /// The protocol, whose `*_next_upstream*` govern the tries.
    fn proto(&self) -> Protocol;
    /// One try at `peer` (its `$upstream_*` record pushed).
    async fn attempt(
        &self,
        ctx: &mut RequestCtx,
        env: &Env<'_>,
        group: &UpstreamGroup,
        peer: PeerRef,
    ) -> TryResult<Self::Response>;
    /// The method may go to another peer once it reached one (without
    /// `non_idempotent`): not POST, LOCK, PATCH.
    fn idempotent(&self) -> bool;
    /// The request can still be sent whole (its body was not streamed to
    /// a peer already).
    fn resendable(&self, ctx: &RequestCtx) -> bool;
    /// A response's status.
    fn status(r: &Self::Response) -> u16;
    /// A response's headers (`$upstream_http_*`).
    fn headers(r: &Self::Response) -> Fields;
    /// Keeps the request counted in flight to its peer (`max_conns`,
    /// `least_conn`) until the response's body is read, as NGINX counts
    /// it; by default the count ends with the head.
    fn hold(_: &mut Self::Response, guard: InFlight) {
        drop(guard);
    }
    /// The log's `upstream:` when no peer is left (`http://NAME/uri`).
    fn no_peer_url(&self, group: &UpstreamGroup) -> String;
}

/// Tries the group's peers in balancing order until one answers or
/// `*_next_upstream` says stop.
pub(crate) async fn try_peers<T: PeerTry>(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    group: &Arc<UpstreamGroup>,
    t: &T,
) -> Result<T::Response, UpstreamError> {
    let loc = Arc::clone(&ctx.loc);
    let k = Knobs::of(&loc.s, t.proto());
    let (mut sel, max_tries) = selection(ctx, group, k.next_upstream_tries);
    let started = Instant::now();
    let mut tries = 0;
    loop {
        let Some(peer) = group.select(&mut sel) else {
            return Err(no_live_upstreams(ctx, env, group, &t.no_peer_url(group)));
        };
        tries += 1;
        let outcome = t.attempt(ctx, env, group, peer).await;
        let resendable = t.resendable(ctx);
        // A request that never reached the peer (connect failed) may go
        // to the next one whatever its method, as in NGINX.
        let may_retry = |cond: u16, sent: bool| {
            k.next_upstream.has(cond)
                && tries < max_tries
                && (k.next_upstream_timeout.is_zero()
                    || started.elapsed() < k.next_upstream_timeout)
                && (t.idempotent() || !sent || k.next_upstream.has(NextUpstream::NON_IDEMPOTENT))
                && resendable
        };
        match outcome {
            Ok(resp) => {
                let status = T::status(&resp);
                // A status listed in *_next_upstream passes the request
                // on: a failure of the peer, except 403 and 404, which are
                // answers. Otherwise the response stands and the peer did
                // its job (NGINX frees it as a success).
                if NextUpstream::status_bit(status).is_some_and(|b| may_retry(b, true)) {
                    group.release(peer, !matches!(status, 403 | 404));
                    continue;
                }
                let mut resp = resp;
                T::hold(&mut resp, group.answered(peer));
                if let Some(u) = ctx.upstream.as_mut() {
                    u.headers = T::headers(&resp);
                }
                return Ok(resp);
            }
            Err(Ok(f)) => {
                group.release(peer, f.peer_failed);
                if may_retry(f.cond, f.sent) {
                    continue;
                }
                return Err(UpstreamError::Status(f.status));
            }
            Err(Err(e)) => {
                group.release(peer, false);
                return Err(e);
            }
        }
    }
}

/// A request's walk over `group`'s peers: the balancer's key (`hash
/// KEY`, `ip_hash`) and the tries `*_next_upstream_tries` allows (0: one
/// per peer). Shared by every protocol's try loop (proxy, FastCGI, gRPC).
pub(crate) fn selection(
    ctx: &RequestCtx,
    group: &UpstreamGroup,
    tries: u64,
) -> (crate::upstream::balance::Selection, usize) {
    let key = match (&group.hash, group.method) {
        (Some(h), _) => Some(h.key.render(ctx)),
        (None, crate::upstream::balance::Method::IpHash) => Some(ctx.conn.peer.ip().to_string()),
        _ => None,
    };
    let max_tries = match tries {
        0 => group.peer_count(),
        n => (n as usize).min(group.peer_count()),
    };
    (group.selection(key), max_tries)
}

/// Every peer is down or tried: NGINX's line, 502.
fn no_live_upstreams(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    group: &UpstreamGroup,
    url: &str,
) -> UpstreamError {
    ctx.log(env.log).with_upstream(url).error(format_args!(
        "no live upstreams while connecting to upstream"
    ));
    let rec = TryRecord {
        addr: group.name.clone(),
        status: Some(502),
        ..Default::default()
    };
    rec.response.end();
    note_try(ctx, None, &rec);
    UpstreamError::Status(502)
}

/// Records a try (`at: None`: a new one, whose index is returned) or
/// updates the record at `at`. A try is recorded when it starts and
/// updated as it goes, so a try given up half-way (the client left) is
/// still in `$upstream_*` with what it had (NGINX's `u->state`).
pub(crate) fn note_try(ctx: &mut RequestCtx, at: Option<usize>, rec: &TryRecord) -> Option<usize> {
    let u = ctx.upstream.as_mut()?;
    if let Some(t) = at.and_then(|i| u.tries.get_mut(i)) {
        *t = rec.clone();
        return at;
    }
    u.tries.push(rec.clone());
    Some(u.tries.len() - 1)
}
