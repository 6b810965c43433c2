//! TLS directives (`ngx_http_ssl_module`): `ssl_certificate`,
//! `ssl_certificate_key`, `ssl_protocols`, `ssl_ciphers`,
//! `ssl_prefer_server_ciphers`, `ssl_session_cache`,
//! `ssl_session_timeout`, `ssl_session_tickets`, `ssl_handshake_timeout`,
//! `ssl_early_data`, `ssl_client_certificate`, `ssl_verify_client`, and
//! porter's `ssl_ktls` (kernel TLS, docs/design.md *kTLS*). They are http- or server-level, a server inheriting
//! what it does not set; [`server_tls`] turns one server's merged settings
//! into its rustls configuration when the config loads (certificates
//! read, keys checked), so a bad pair is `porter -t`'s error with the
//! file:line of its `ssl_certificate`.

#[allow(unused_imports)]
use super::*;
use crate::tls::client_auth::{ClientAuth, VerifyClient};
use crate::tls::{self, ServerTls, TlsSettings};
use rustls::server::{ProducesTickets, StoresServerSessions};

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("ssl_certificate", HTTP | SRV, Arity::N(1), |b, d| {
        let p = path_arg(b, d)?;
        b.ssl().certs.push(p);
        Ok(())
    }),
    d("ssl_certificate_key", HTTP | SRV, Arity::N(1), |b, d| {
        let p = path_arg(b, d)?;
        b.ssl().keys.push(p);
        Ok(())
    }),
    d("ssl_protocols", HTTP | SRV, Arity::Min(1), set_protocols),
    d("ssl_ciphers", HTTP | SRV, Arity::N(1), |b, d| {
        let v = tls::ciphers::select(&d.args[0]).map_err(|e| match e {
            tls::ciphers::CipherError::Unknown(n) => {
                format!("unknown cipher \"{n}\" in \"ssl_ciphers\" (rustls offers ECDHE with AES-GCM or CHACHA20-POLY1305)")
            }
            tls::ciphers::CipherError::NoMatch => format!(
                "SSL_CTX_set_cipher_list(\"{}\") failed (no cipher match: rustls offers ECDHE with AES-GCM or CHACHA20-POLY1305)",
                d.args[0]
            ),
        })?;
        set_once(&mut b.ssl().ciphers, v, d)
    }),
    d(
        "ssl_prefer_server_ciphers",
        HTTP | SRV,
        Arity::N(1),
        |b, d| {
            let v = flag(d)?;
            set_once(&mut b.ssl().prefer_server_ciphers, v, d)
        },
    ),
    d(
        "ssl_session_cache",
        HTTP | SRV,
        Arity::Range(1, 2),
        set_session_cache,
    ),
    d("ssl_session_timeout", HTTP | SRV, Arity::N(1), |b, d| {
        let v = time(d, &d.args[0])?;
        set_once(&mut b.ssl().session_timeout, v, d)
    }),
    d("ssl_session_tickets", HTTP | SRV, Arity::N(1), |b, d| {
        let v = flag(d)?;
        set_once(&mut b.ssl().session_tickets, v, d)
    }),
    d("ssl_handshake_timeout", HTTP | SRV, Arity::N(1), |b, d| {
        let v = time(d, &d.args[0])?;
        set_once(&mut b.ssl().handshake_timeout, v, d)
    }),
    d("ssl_client_certificate", HTTP | SRV, Arity::N(1), |b, d| {
        let p = path_arg(b, d)?;
        set_once(&mut b.ssl().client_ca, p, d)
    }),
    d("ssl_verify_client", HTTP | SRV, Arity::N(1), |b, d| {
        let v = match d.args[0].as_str() {
            "off" => VerifyClient::Off,
            "on" => VerifyClient::On,
            "optional" => VerifyClient::Optional,
            "optional_no_ca" => VerifyClient::OptionalNoCa,
            a => {
                return Err(format!(
                    "invalid value \"{a}\" in \"ssl_verify_client\" directive, it must be \"on\", \"off\", \"optional\" or \"optional_no_ca\""
                ))
            }
        };
        let at = NamedPath {
            path: PathBuf::new(),
            file: d.file.clone(),
            line: d.line,
        };
        set_once(&mut b.ssl().verify_client, (v, at), d)
    }),
    d("ssl_ktls", HTTP | SRV, Arity::N(1), |b, d| {
        let v = flag(d)?;
        set_once(&mut b.ssl().ktls, v, d)
    }),
    d("ssl_early_data", HTTP | SRV, Arity::N(1), |_, d| {
        if flag(d)? {
            return Err(
                "\"ssl_early_data on\" is not supported by porter (0-RTT requests can be replayed)"
                    .into(),
            );
        }
        Ok(())
    }),
];

/// A file named by a directive, with where it was named (for errors
/// found when it is read).
#[derive(Clone)]
pub(super) struct NamedPath {
    path: PathBuf,
    file: Arc<Path>,
    line: u32,
}

impl NamedPath {
    fn error(&self, message: String) -> ConfError {
        ConfError {
            message,
            file: Some(self.file.clone()),
            line: self.line,
        }
    }
}

/// `ssl_session_cache`.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum SessionCache {
    /// `off` / `none`: no session IDs are stored.
    Off,
    /// `builtin[:N]`: a cache of N sessions for this server.
    Builtin(usize),
    /// `shared:NAME:SIZE`: a cache shared by the servers naming it.
    Shared(String, u64),
}

/// The `ssl_*` settings of one level (http or server).
#[derive(Clone, Default)]
pub(super) struct SslB {
    certs: Vec<NamedPath>,
    keys: Vec<NamedPath>,
    protocols: Option<(bool, bool)>,
    ciphers: Option<Vec<rustls::SupportedCipherSuite>>,
    prefer_server_ciphers: Option<bool>,
    session_cache: Option<Vec<SessionCache>>,
    session_timeout: Option<Duration>,
    session_tickets: Option<bool>,
    handshake_timeout: Option<Duration>,
    client_ca: Option<NamedPath>,
    verify_client: Option<(VerifyClient, NamedPath)>,
    ktls: Option<bool>,
}

impl SslB {
    /// This level's settings with what it leaves unset taken from `up`
    /// (certificates as a whole list, as NGINX merges arrays).
    fn merged(&self, up: &SslB) -> SslB {
        let mut m = self.clone();
        if m.certs.is_empty() {
            m.certs = up.certs.clone();
            m.keys = up.keys.clone();
        }
        m.protocols = m.protocols.or(up.protocols);
        m.ciphers = m.ciphers.or_else(|| up.ciphers.clone());
        m.prefer_server_ciphers = m.prefer_server_ciphers.or(up.prefer_server_ciphers);
        m.session_cache = m.session_cache.or_else(|| up.session_cache.clone());
        m.session_timeout = m.session_timeout.or(up.session_timeout);
        m.session_tickets = m.session_tickets.or(up.session_tickets);
        m.handshake_timeout = m.handshake_timeout.or(up.handshake_timeout);
        m.client_ca = m.client_ca.or_else(|| up.client_ca.clone());
        m.verify_client = m.verify_client.or_else(|| up.verify_client.clone());
        m.ktls = m.ktls.or(up.ktls);
        m
    }
}

/// What the servers of one configuration share: `shared:` session caches
/// by name, and one set of ticket keys.
#[derive(Default)]
pub(super) struct SslShared {
    zones: HashMap<String, Arc<dyn StoresServerSessions>>,
    tickets: Option<Arc<dyn ProducesTickets>>,
}

impl Build {
    pub(super) fn ssl(&mut self) -> &mut SslB {
        match self.ctx {
            HTTP => &mut self.ssl_http,
            _ => &mut self.server().ssl,
        }
    }
}

fn path_arg(b: &Build, d: &Directive) -> Result<NamedPath, String> {
    if d.args[0].contains('$') {
        return Err(format!(
            "variables in \"{}\" are not supported by porter",
            d.name
        ));
    }
    Ok(NamedPath {
        path: b.full_path(&d.args[0]),
        file: d.file.clone(),
        line: d.line,
    })
}

fn set_protocols(b: &mut Build, d: &Directive) -> Res {
    let (mut v12, mut v13) = (false, false);
    for a in &d.args {
        match a.as_str() {
            "TLSv1.2" => v12 = true,
            "TLSv1.3" => v13 = true,
            "SSLv2" | "SSLv3" | "TLSv1" | "TLSv1.1" => {
                return Err(format!(
                    "\"{a}\" in \"ssl_protocols\" is not supported by porter (rustls offers TLSv1.2 and TLSv1.3 only)"
                ))
            }
            _ => {
                return Err(format!(
                    "invalid value \"{a}\" in \"ssl_protocols\" directive, it must be \"TLSv1.2\" or \"TLSv1.3\""
                ))
            }
        }
    }
    set_once(&mut b.ssl().protocols, (v12, v13), d)
}

fn set_session_cache(b: &mut Build, d: &Directive) -> Res {
    let bad = |a: &str| format!("invalid session cache \"{a}\"");
    let mut v = Vec::new();
    for a in &d.args {
        let c = match a.as_str() {
            "off" | "none" if d.args.len() == 1 => SessionCache::Off,
            "builtin" => SessionCache::Builtin(20480),
            s if s.starts_with("builtin:") => SessionCache::Builtin(
                s[8..]
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| bad(a))?,
            ),
            s if s.starts_with("shared:") => {
                let (name, sz) = s[7..].rsplit_once(':').ok_or_else(|| bad(a))?;
                let bytes = parse_size(sz).filter(|n| *n > 0).ok_or_else(|| bad(a))?;
                if name.is_empty() {
                    return Err(bad(a));
                }
                SessionCache::Shared(name.to_string(), bytes)
            }
            _ => return Err(bad(a)),
        };
        v.push(c);
    }
    set_once(&mut b.ssl().session_cache, v, d)
}

/// The TLS of server `srv` (its settings merged over `http`'s), when it
/// has a certificate or listens with `ssl` (`ssl_listen`: that `listen`,
/// for NGINX's message when no certificate is given).
pub(super) fn server_tls(
    http: &SslB,
    srv: &SslB,
    ssl_listen: Option<(&Arc<Path>, u32)>,
    header_timeout: Duration,
    h2: bool,
    shared: &mut SslShared,
) -> Result<Option<Arc<ServerTls>>, ConfError> {
    let s = srv.merged(http);
    if s.certs.is_empty() {
        return match ssl_listen {
            Some((file, line)) => Err(ConfError {
                message: "no \"ssl_certificate\" is defined for the \"listen ... ssl\" directive"
                    .into(),
                file: Some(file.clone()),
                line,
            }),
            None => Ok(None),
        };
    }
    let mut keys = Vec::new();
    for (i, cert) in s.certs.iter().enumerate() {
        let Some(key) = s.keys.get(i) else {
            return Err(cert.error(format!(
                "no \"ssl_certificate_key\" is defined for certificate \"{}\"",
                cert.path.display()
            )));
        };
        keys.push(tls::load_pair(&cert.path, &key.path).map_err(|m| cert.error(m))?);
    }
    let timeout = s.session_timeout.unwrap_or(Duration::from_secs(300));
    let sessions = session_store(&s, timeout, shared);
    let tickets = if s.session_tickets.unwrap_or(true) {
        let t = match &shared.tickets {
            Some(t) => t.clone(),
            None => {
                let t = rustls::crypto::ring::Ticketer::new()
                    .map_err(|e| s.certs[0].error(format!("cannot create ticket keys: {e}")))?;
                shared.tickets = Some(t.clone());
                t
            }
        };
        Some(Arc::new(tls::session::TimedTickets::new(t, timeout)) as Arc<dyn ProducesTickets>)
    } else {
        None
    };
    let (verify_client, client_auth) = client_auth(&s)?;
    let (tls12, tls13) = s.protocols.unwrap_or((true, true));
    let settings = TlsSettings {
        keys,
        tls12,
        tls13,
        ciphers: match s.ciphers {
            Some(c) => c,
            None => tls::ciphers::select("HIGH:!aNULL:!MD5").unwrap_or_default(),
        },
        prefer_server_ciphers: s.prefer_server_ciphers.unwrap_or(false),
        sessions,
        tickets,
        client_auth: client_auth.clone(),
        h2,
        ktls: s.ktls.unwrap_or(true),
    };
    let config = tls::server_config(settings).map_err(|m| s.certs[0].error(m))?;
    Ok(Some(Arc::new(ServerTls {
        config,
        handshake_timeout: s.handshake_timeout.unwrap_or(header_timeout),
        verify_client,
        client_auth,
        ktls: s.ktls.unwrap_or(true),
    })))
}

/// `ssl_verify_client` and the CAs of `ssl_client_certificate`, loaded.
fn client_auth(s: &SslB) -> Result<(VerifyClient, Option<Arc<ClientAuth>>), ConfError> {
    let Some((mode, at)) = s
        .verify_client
        .clone()
        .filter(|(m, _)| *m != VerifyClient::Off)
    else {
        return Ok((VerifyClient::Off, None));
    };
    let Some(ca) = &s.client_ca else {
        if mode == VerifyClient::OptionalNoCa {
            return Err(
                at.error("\"ssl_verify_client optional_no_ca\" is not supported by porter".into())
            );
        }
        return Err(at.error("no ssl_client_certificate for ssl_verify_client".into()));
    };
    let auth = ClientAuth::load(&ca.path).map_err(|m| ca.error(m))?;
    Ok((mode, Some(auth)))
}

/// The session ID store of a server: none (NGINX's default `none`), its
/// own (`builtin`), or a zone shared with the other servers naming it.
fn session_store(
    s: &SslB,
    timeout: Duration,
    shared: &mut SslShared,
) -> Arc<dyn StoresServerSessions> {
    let caches = s.session_cache.clone().unwrap_or(vec![SessionCache::Off]);
    // With both builtin and shared, NGINX looks in both; one store serves.
    let inner = caches.iter().rev().find_map(|c| match c {
        SessionCache::Off => None,
        SessionCache::Builtin(n) => {
            Some(rustls::server::ServerSessionMemoryCache::new(*n) as Arc<dyn StoresServerSessions>)
        }
        SessionCache::Shared(name, bytes) => Some(
            shared
                .zones
                .entry(name.clone())
                .or_insert_with(|| tls::session::memory_cache(*bytes))
                .clone(),
        ),
    });
    match inner {
        Some(i) => Arc::new(tls::session::TimedStore::new(i, timeout)),
        None => Arc::new(rustls::server::NoServerSessionStorage {}),
    }
}
