//! HTTP/2 directives (`src/http/http2/`): `http2`,
//! `http2_max_concurrent_streams`, `http2_chunk_size`,
//! `http2_body_preread_size`, and the directives NGINX 1.25.1 made
//! obsolete (`http2_idle_timeout`, `http2_recv_timeout`,
//! `http2_max_requests`, `http2_max_field_size`, `http2_max_header_size`),
//! accepted with NGINX's warning and ignored: `keepalive_timeout`,
//! `client_header_timeout`, `keepalive_requests` and
//! `large_client_header_buffers` govern HTTP/2 connections instead.

#[allow(unused_imports)]
use super::*;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("http2", HTTP | SRV, Arity::N(1), loc_flag!(http2)),
    d(
        "http2_max_concurrent_streams",
        HTTP | SRV,
        Arity::N(1),
        |b, d| {
            let n = number(d, &d.args[0])?;
            let n = u32::try_from(n).map_err(|_| invalid(d))?;
            set_once(&mut b.loc().http2_max_concurrent_streams, n, d)
        },
    ),
    d("http2_chunk_size", HSL, Arity::N(1), |b, d| {
        let n = size(d, &d.args[0])?;
        if n == 0 {
            return Err("the http2 chunk size cannot be zero".into());
        }
        // A DATA frame is at most 16 MiB - 1 (RFC 9113 4.2).
        let n = n.min((1 << 24) - 1) as usize;
        set_once(&mut b.loc().http2_chunk_size, n, d)
    }),
    d(
        "http2_body_preread_size",
        HTTP | SRV,
        Arity::N(1),
        |b, d| {
            let n = size(d, &d.args[0])?;
            // The largest flow-control window (RFC 9113 6.9.1).
            if n > (1 << 31) - 1 {
                return Err("the http2_body_preread_size is too large".into());
            }
            set_once(&mut b.loc().http2_body_preread_size, n as u32, d)
        },
    ),
    d("http2_idle_timeout", HTTP | SRV, Arity::N(1), obsolete),
    d("http2_recv_timeout", HTTP | SRV, Arity::N(1), obsolete),
    d("http2_max_requests", HTTP | SRV, Arity::N(1), obsolete),
    d("http2_max_field_size", HTTP | SRV, Arity::N(1), obsolete),
    d("http2_max_header_size", HTTP | SRV, Arity::N(1), obsolete),
    d(
        "http2_max_concurrent_pushes",
        HTTP | SRV,
        Arity::N(1),
        obsolete,
    ),
    d("http2_push_preload", HSL, Arity::N(1), obsolete),
    d("http2_push", HSL, Arity::N(1), obsolete),
    d(
        "http2_streams_index_size",
        HTTP | SRV,
        Arity::N(1),
        |b, d| {
            let n = number(d, &d.args[0])?;
            if n == 0 || n & (n - 1) != 0 {
                return Err(format!("\"{}\" must be a power of two", d.name));
            }
            let _ = b;
            super::internals::notice(d, "has no effect: the h2 crate keeps its own stream index");
            Ok(())
        },
    ),
    d("http2_pool_size", HTTP | SRV, Arity::N(1), |b, d| {
        super::tuning::size_only(b, d)?;
        super::internals::notice(
            d,
            "has no effect: porter allocates per stream, not from pools",
        );
        Ok(())
    }),
    d("http2_recv_buffer_size", HTTP, Arity::N(1), |b, d| {
        super::tuning::size_only(b, d)?;
        super::internals::notice(
            d,
            "has no effect: the h2 crate reads into each connection's own buffer",
        );
        Ok(())
    }),
];

/// NGINX 1.25.1's warning for an HTTP/2 directive it replaced, or, for
/// server push (which it removed), ignores.
fn obsolete(_: &mut Build, d: &Directive) -> Res {
    let instead = match d.name.as_str() {
        "http2_idle_timeout" => "keepalive_timeout",
        "http2_recv_timeout" => "client_header_timeout",
        "http2_max_requests" => "keepalive_requests",
        "http2_max_field_size" | "http2_max_header_size" => "large_client_header_buffers",
        _ => {
            warn(
                d,
                &format!("the \"{}\" directive is obsolete, ignored", d.name),
            );
            return Ok(());
        }
    };
    warn(
        d,
        &format!(
            "the \"{}\" directive is obsolete, use the \"{instead}\" directive instead",
            d.name
        ),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::error::ConfError;
    use crate::config::Config;

    fn parse(http: &str) -> Result<Config, ConfError> {
        super::super::parse_http_for_test(http)
    }

    #[test]
    fn http2_settings_reach_the_server() {
        let c = parse(
            "http2_chunk_size 16k; server { listen 127.0.0.1:1; http2 on; \
             http2_max_concurrent_streams 7; http2_body_preread_size 1m; }",
        )
        .unwrap();
        let s = &c.servers[0].base.s;
        assert!(s.http2);
        assert_eq!(s.http2_max_concurrent_streams, 7);
        assert_eq!(s.http2_chunk_size, 16 * 1024);
        assert_eq!(s.http2_body_preread_size, 1024 * 1024);
        assert!(!c.listens[0].http2);
    }

    #[test]
    fn listen_http2_marks_the_address() {
        let c = parse("server { listen 127.0.0.1:1 http2; }").unwrap();
        assert!(c.listens[0].http2);
        assert!(!c.servers[0].base.s.http2);
    }

    #[test]
    fn zero_chunk_size_is_refused() {
        let e = parse("http2_chunk_size 0;").unwrap_err();
        assert!(
            e.message.contains("the http2 chunk size cannot be zero"),
            "{e}"
        );
    }
}
