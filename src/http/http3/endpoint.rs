//! A worker's QUIC endpoint for one `listen ... quic` address: quinn on
//! the worker's own UDP socket, configured from the address's default
//! server (`http3_*`, `quic_*`, `keepalive_timeout`) and from every
//! server's TLS on the address (the certificate by SNI, as the TCP
//! listener picks it).
//!
//! What quinn does and porter configures: Retry (`quic_retry on`: every
//! new client's address is validated by a Retry before any state is
//! kept), the amplification limit (at most three times the bytes
//! received go to an address not yet validated), stateless resets (their
//! key and the address-validation tokens' key derive from `quic_host_key`,
//! else from a random key made at each configuration load, shared by all
//! workers of the generation), GSO (`quic_gso`) and GRO (quinn-udp turns
//! it on where the kernel has it).
//!
//! Connection IDs: [`WorkerCids`] makes every ID this worker issues start
//! with the worker's index, which the steering program of
//! `runtime/quic_steer.rs` reads to send each datagram to its worker.

use std::sync::Arc;
use std::time::Duration;

use quinn::{ConnectionId, ConnectionIdGenerator, EndpointConfig, ServerConfig, TransportConfig};
use ring::{hkdf, hmac};

use crate::config::{Config, ListenGroup};

/// Length of the connection IDs porter issues (quinn's default).
const CID_LEN: usize = 8;

/// Connection IDs that start with the worker's index (modulo 256) and
/// the endpoint's tag on its socket (`handover.rs`), the rest random.
pub struct WorkerCids {
    worker: u8,
    tag: u8,
}

impl ConnectionIdGenerator for WorkerCids {
    fn generate_cid(&mut self) -> ConnectionId {
        let mut id = [0u8; CID_LEN];
        crate::tls::fill_random(&mut id[2..]);
        id[0] = self.worker;
        id[1] = self.tag;
        ConnectionId::new(&id)
    }

    fn cid_len(&self) -> usize {
        CID_LEN
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

/// The secrets of an address: the stateless-reset key and the key of
/// Retry and address-validation tokens, both derived from `host_key`.
fn keys(host_key: &[u8]) -> (hmac::Key, hkdf::Prk) {
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, b"porter quic").extract(host_key);
    let derive = |label: &[u8]| {
        let mut out = [0u8; 32];
        prk.expand(&[label], hkdf::HKDF_SHA256)
            .and_then(|okm| okm.fill(&mut out))
            .expect("32 bytes is HKDF-SHA256's output length");
        out
    };
    let reset = hmac::Key::new(hmac::HMAC_SHA256, &derive(b"sr_token_key"));
    let token = hkdf::Prk::new_less_safe(hkdf::HKDF_SHA256, &derive(b"av_token_key"));
    (reset, token)
}

/// The endpoint settings of worker `worker` for `group`, whose endpoint
/// has `tag` on the worker's socket.
pub fn endpoint_config(group: &ListenGroup, worker: usize, tag: u8) -> EndpointConfig {
    let (reset, _) = keys(&group.quic_key);
    let mut c = EndpointConfig::new(Arc::new(reset));
    let worker = (worker % 256) as u8;
    c.cid_generator(move || Box::new(WorkerCids { worker, tag }));
    c
}

/// The server settings of group `gi` of `config`: TLS by SNI over the
/// servers of the address, the default server's transport settings.
pub fn server_config(config: &Arc<Config>, gi: usize) -> Result<ServerConfig, String> {
    let group = &config.listens[gi];
    let server = &group.servers[group.default];
    let s = &server.base.s;
    let base = server
        .tls
        .as_ref()
        .map(|t| Arc::clone(&t.config))
        .ok_or("the default server has no TLS")?;
    let cfg = Arc::clone(config);
    let pick = move |sni: Option<&str>| {
        let g = &cfg.listens[gi];
        g.find_server(sni)
            .tls
            .as_ref()
            .filter(|t| !t.reject)
            .map(|t| Arc::clone(&t.config))
    };
    let early = server.tls.as_ref().and_then(|t| t.early_sessions.clone());
    let tls = crate::tls::quic_server_config(&base, Box::new(pick), early, asks(group))?;
    let (_, token) = keys(&group.quic_key);
    let mut c = ServerConfig::new(tls, Arc::new(token));
    c.transport_config(Arc::new(transport(s, server.limits.max_head)));
    c.retry_token_lifetime(Duration::from_secs(15));
    Ok(c)
}

/// The verifier of client certificates QUIC must add to the default
/// server's TLS: none when that server asks itself (its configuration
/// has its own) or no server of the address asks; else the first
/// server's that has `ssl_verify_client` (each request's own server
/// judges the certificate sent, `tls_accept::client_cert_refusal`).
fn asks(group: &ListenGroup) -> Option<Arc<crate::tls::client_auth::ClientAuth>> {
    let auth = |s: &crate::config::ServerConf| s.tls.as_ref().and_then(|t| t.client_auth.clone());
    if auth(&group.servers[group.default]).is_some() {
        return None;
    }
    group.servers.iter().find_map(|s| auth(s))
}

/// Whether the address takes 0-RTT: its default server, whose TLS
/// settings (sessions, tickets) QUIC uses, has `ssl_early_data on` (a
/// request in early data for another server that has not is answered
/// 425, `stream.rs`).
pub fn takes_early_data(group: &ListenGroup) -> bool {
    let server = &group.servers[group.default];
    server.tls.as_ref().is_some_and(|t| t.early_data)
}

/// QUIC transport settings from a server's `http3_*` and `quic_*`.
fn transport(s: &crate::config::LocSettings, _max_head: usize) -> TransportConfig {
    let mut t = TransportConfig::default();
    let streams = quinn::VarInt::from_u32(s.http3_max_concurrent_streams);
    t.max_concurrent_bidi_streams(streams);
    // The client's control stream and its two QPACK streams.
    t.max_concurrent_uni_streams(quinn::VarInt::from_u32(3));
    let window = s.http3_stream_buffer_size as u64;
    t.stream_receive_window(quinn::VarInt::from_u64(window).unwrap_or(quinn::VarInt::MAX));
    // Every stream may fill its window at once.
    let all = window.saturating_mul(u64::from(s.http3_max_concurrent_streams.max(1)));
    t.receive_window(quinn::VarInt::from_u64(all).unwrap_or(quinn::VarInt::MAX));
    t.send_window(all.max(window));
    t.max_idle_timeout(quinn::IdleTimeout::try_from(s.keepalive_timeout).ok());
    t.enable_segmentation_offload(s.quic_gso);
    t
}
