//! HTTP/3 and QUIC directives (`src/http/http3/`), NGINX 1.25's
//! `ngx_http_v3_module`: `http3`, `http3_hq`,
//! `http3_max_concurrent_streams`, `http3_stream_buffer_size`,
//! `quic_retry`, `quic_gso`, `quic_host_key`,
//! `quic_active_connection_id_limit` (http and server level), and the
//! main context's `quic_bpf`. The `quic` parameter of `listen` is in
//! `http.rs`; [`check_quic_tls`] is NGINX's check that a `listen ... quic`
//! server can do TLS 1.3.

#[allow(unused_imports)]
use super::*;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("http3", HTTP | SRV, Arity::N(1), loc_flag!(http3)),
    d("http3_hq", HTTP | SRV, Arity::N(1), |b, d| {
        let v = flag(d)?;
        if v {
            notice(
                d,
                "\"http3_hq on\" is accepted, but porter offers only ALPN \"h3\" on QUIC: \
                 hq-interop clients are refused",
            );
        }
        set_once(&mut b.loc().http3_hq, v, d)
    }),
    d(
        "http3_max_concurrent_streams",
        HTTP | SRV,
        Arity::N(1),
        |b, d| {
            let n = number(d, &d.args[0])?;
            let n = u32::try_from(n).map_err(|_| invalid(d))?;
            set_once(&mut b.loc().http3_max_concurrent_streams, n, d)
        },
    ),
    d(
        "http3_stream_buffer_size",
        HTTP | SRV,
        Arity::N(1),
        |b, d| {
            let n = size(d, &d.args[0])?;
            if n == 0 {
                return Err(invalid(d));
            }
            // A QUIC flow-control window is a varint (< 2^62); porter's
            // reads are in memory: a gigabyte is far past any sense.
            let n = n.min(1 << 30) as usize;
            set_once(&mut b.loc().http3_stream_buffer_size, n, d)
        },
    ),
    d("quic_retry", HTTP | SRV, Arity::N(1), loc_flag!(quic_retry)),
    d("quic_gso", HTTP | SRV, Arity::N(1), loc_flag!(quic_gso)),
    d("quic_host_key", HTTP | SRV, Arity::N(1), |b, d| {
        let path = b.full_path(&d.args[0]);
        let key = std::fs::read(&path).map_err(|e| {
            format!(
                "open() \"{}\" failed {}",
                path.display(),
                crate::util::errno_text(&e)
            )
        })?;
        if key.is_empty() {
            return Err(format!("empty file \"{}\"", path.display()));
        }
        set_once(&mut b.loc().quic_host_key, Some(Arc::from(key)), d)
    }),
    d(
        "quic_active_connection_id_limit",
        HTTP | SRV,
        Arity::N(1),
        |b, d| {
            let n = number(d, &d.args[0])?;
            let n = u32::try_from(n)
                .ok()
                .filter(|n| *n >= 2)
                .ok_or_else(|| invalid(d))?;
            notice(
                d,
                "\"quic_active_connection_id_limit\" is accepted; porter's QUIC stack (quinn) \
                 keeps 5 of the client's connection IDs and gives the client up to 8 of its own",
            );
            set_once(&mut b.loc().quic_active_connection_id_limit, n, d)
        },
    ),
    d("quic_bpf", MAIN, Arity::N(1), |_, d| {
        if flag(d)? {
            notice(
                d,
                "\"quic_bpf on\" is not needed: porter always steers QUIC datagrams to the \
                 worker that owns their connection with a classic BPF program on the \
                 connection ID (SO_ATTACH_REUSEPORT_CBPF), no eBPF",
            );
        }
        Ok(())
    }),
];

/// NGINX's checks for a server with `listen ... quic` (`quic`: where):
/// its TLS must offer TLS 1.3 (QUIC has no other), as
/// `"ssl_protocols" must enable TLSv1.3 for the "listen ... quic"
/// directive`. A missing certificate is `server_tls`'s error.
pub(super) fn check_quic_tls(
    quic: Option<&(Arc<Path>, u32)>,
    tls: Option<&crate::tls::ServerTls>,
) -> Result<(), ConfError> {
    let (Some((file, line)), Some(tls)) = (quic, tls) else {
        return Ok(());
    };
    if tls.reject || crate::tls::offers_tls13(&tls.config) {
        return Ok(());
    }
    Err(ConfError {
        message: "\"ssl_protocols\" must enable TLSv1.3 for the \"listen ... quic\" directive"
            .into(),
        file: Some(file.clone()),
        line: *line,
    })
}

#[cfg(test)]
mod tests {
    use crate::config::error::ConfError;
    use crate::config::Config;

    fn parse(http: &str) -> Result<Config, ConfError> {
        super::super::parse_http_for_test(http)
    }

    #[test]
    fn settings_reach_the_server_with_nginx_defaults() {
        let c = parse("server { listen 127.0.0.1:1; }").unwrap();
        let s = &c.servers[0].base.s;
        assert!(s.http3);
        assert!(!s.quic_retry && !s.quic_gso && !s.http3_hq);
        assert_eq!(s.http3_max_concurrent_streams, 128);
        assert_eq!(s.http3_stream_buffer_size, 64 * 1024);
        assert_eq!(s.quic_active_connection_id_limit, 2);
        let c = parse(
            "quic_retry on; server { listen 127.0.0.1:1; http3 off; quic_gso on; \
             http3_max_concurrent_streams 7; http3_stream_buffer_size 1m; }",
        )
        .unwrap();
        let s = &c.servers[0].base.s;
        assert!(!s.http3 && s.quic_retry && s.quic_gso);
        assert_eq!(s.http3_max_concurrent_streams, 7);
        assert_eq!(s.http3_stream_buffer_size, 1024 * 1024);
    }

    #[test]
    fn quic_and_tcp_on_one_port_are_two_groups() {
        let c = parse(
            "server { listen 127.0.0.1:1 quic reuseport; listen 127.0.0.1:1; \
             ssl_reject_handshake on; }",
        )
        .unwrap();
        assert_eq!(c.listens.len(), 2);
        assert!(c.listens[0].quic && !c.listens[1].quic);
        assert_eq!(c.listens[0].addr, c.listens[1].addr);
    }

    #[test]
    fn tcp_parameters_are_incompatible_with_quic() {
        for p in ["ssl", "http2", "proxy_protocol", "backlog=10"] {
            let e = parse(&format!("server {{ listen 127.0.0.1:1 quic {p}; }}")).unwrap_err();
            let name = p.split('=').next().unwrap();
            assert_eq!(
                e.message,
                format!("\"{name}\" parameter is incompatible with \"quic\""),
                "{p}"
            );
            assert_eq!(e.line, 1);
        }
    }

    #[test]
    fn quic_without_a_certificate_is_nginx_error() {
        let e = parse("server { listen 127.0.0.1:1 quic; }").unwrap_err();
        assert_eq!(
            e.message,
            "no \"ssl_certificate\" is defined for the \"listen ... quic\" directive"
        );
    }
}
