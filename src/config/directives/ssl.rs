//! TLS directives (`ngx_http_ssl_module`, and most of them also
//! `ngx_stream_ssl_module`'s: `stream_ssl.rs`): `ssl_certificate`,
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
use super::acme::{acme_resolver, AcmeUse};
use super::*;
use crate::tls::client_auth::{ClientAuth, VerifyClient};
use crate::tls::{self, ServerTls, TlsSettings};
use rustls::crypto::SupportedKxGroup;
use rustls::server::{ProducesTickets, StoresServerSessions};
use rustls::sign::CertifiedKey;

/// The http and server levels, and the stream block's (NGINX's
/// `ngx_stream_ssl_module` has these rows too, read into the same
/// [`SslB`]: `Build::ssl`).
const HSS: u16 = HTTP | SRV | super::stream::SS;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("ssl_certificate", HSS, Arity::N(1), |b, d| {
        if d.args[0] == "$acme_certificate" {
            let at = named(b, d);
            b.ssl().acme = Some(at);
            return Ok(());
        }
        let p = path_arg(b, d)?;
        b.ssl().certs.push(p);
        Ok(())
    }),
    d("ssl_certificate_key", HSS, Arity::N(1), |b, d| {
        if d.args[0] == "$acme_certificate_key" {
            let at = named(b, d);
            b.ssl().acme_key = Some(at);
            return Ok(());
        }
        let p = path_arg(b, d)?;
        b.ssl().keys.push(p);
        Ok(())
    }),
    d("ssl_protocols", HSS, Arity::Min(1), set_protocols),
    d("ssl_ciphers", HSS, Arity::N(1), |b, d| {
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
    d("ssl_prefer_server_ciphers", HSS, Arity::N(1), |b, d| {
        let v = flag(d)?;
        set_once(&mut b.ssl().prefer_server_ciphers, v, d)
    }),
    d(
        "ssl_session_cache",
        HSS,
        Arity::Range(1, 2),
        set_session_cache,
    ),
    d("ssl_session_timeout", HSS, Arity::N(1), |b, d| {
        let v = time(d, &d.args[0])?;
        set_once(&mut b.ssl().session_timeout, v, d)
    }),
    d("ssl_session_tickets", HSS, Arity::N(1), |b, d| {
        let v = flag(d)?;
        set_once(&mut b.ssl().session_tickets, v, d)
    }),
    d("ssl_handshake_timeout", HSS, Arity::N(1), |b, d| {
        let v = time(d, &d.args[0])?;
        set_once(&mut b.ssl().handshake_timeout, v, d)
    }),
    d("ssl_client_certificate", HSS, Arity::N(1), |b, d| {
        let p = path_arg(b, d)?;
        set_once(&mut b.ssl().client_ca, p, d)
    }),
    d("ssl_crl", HSS, Arity::N(1), |b, d| {
        let p = path_arg(b, d)?;
        set_once(&mut b.ssl().crl, p, d)
    }),
    d("ssl_verify_client", HSS, Arity::N(1), |b, d| {
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
        set_once(&mut b.ssl().verify_client, (v, here(d)), d)
    }),
    d("ssl_ktls", HTTP | SRV, Arity::N(1), |b, d| {
        let v = flag(d)?;
        set_once(&mut b.ssl().ktls, v, d)
    }),
    d("ssl_early_data", HTTP | SRV, Arity::N(1), |b, d| {
        let v = flag(d)?;
        set_once(&mut b.ssl().early_data, v, d)
    }),
    d("ssl_dhparam", HSS, Arity::N(1), set_dhparam),
    d("ssl_ecdh_curve", HSS, Arity::N(1), set_ecdh_curve),
    d("ssl_stapling", HTTP | SRV, Arity::N(1), |b, d| {
        let v = (flag(d)?, here(d));
        set_once(&mut b.ssl().stapling, v, d)
    }),
    d("ssl_stapling_verify", HTTP | SRV, Arity::N(1), |b, d| {
        let v = flag(d)?;
        set_once(&mut b.ssl().stapling_verify, v, d)
    }),
    d("ssl_stapling_file", HTTP | SRV, Arity::N(1), |b, d| {
        let p = path_arg(b, d)?;
        set_once(&mut b.ssl().stapling_file, p, d)
    }),
    d("ssl_stapling_responder", HTTP | SRV, Arity::N(1), |b, d| {
        if !d.args[0].starts_with("http://") {
            return Err(format!("invalid URL prefix in \"{}\"", d.args[0]));
        }
        let v = d.args[0].clone();
        set_once(&mut b.ssl().stapling_responder, v, d)
    }),
    d("ssl_trusted_certificate", HSS, Arity::N(1), |b, d| {
        let p = path_arg(b, d)?;
        set_once(&mut b.ssl().trusted, p, d)
    }),
    d("ssl_session_ticket_key", HSS, Arity::N(1), |b, d| {
        let p = path_arg(b, d)?;
        let key = std::fs::read(&p.path).map_err(|e| {
            format!(
                "open() \"{}\" failed {}",
                p.path.display(),
                crate::util::errno_text(&e)
            )
        })?;
        if key.len() != 48 && key.len() != 80 {
            return Err(format!("\"{}\" must be 48 or 80 bytes", p.path.display()));
        }
        b.ssl().ticket_keys.get_or_insert_with(Vec::new).push(key);
        Ok(())
    }),
    d("ssl_buffer_size", HTTP | SRV, Arity::N(1), |b, d| {
        let v = size(d, &d.args[0])? as usize;
        set_once(&mut b.ssl().buffer_size, v, d)
    }),
    d("ssl_verify_depth", HSS, Arity::N(1), |b, d| {
        let v = number(d, &d.args[0])?;
        set_once(&mut b.ssl().verify_depth, v, d)
    }),
    d("ssl_password_file", HSS, Arity::N(1), set_password_file),
    d("ssl_reject_handshake", HTTP | SRV, Arity::N(1), |b, d| {
        let v = flag(d)?;
        set_once(&mut b.ssl().reject_handshake, v, d)
    }),
    d("ssl_conf_command", HSS, Arity::N(2), |_, d| {
        warn(d, &format!("\"ssl_conf_command {}\" is ignored: porter's TLS is rustls, which has no OpenSSL configuration commands", d.args[0]));
        Ok(())
    }),
];

/// Where `d` is written (for what is found when its server merges).
fn here(d: &Directive) -> NamedPath {
    NamedPath {
        path: PathBuf::new(),
        file: d.file.clone(),
        line: d.line,
    }
}

/// A file named by a directive, with where it was named (for errors
/// found when it is read).
#[derive(Clone)]
pub(super) struct NamedPath {
    path: PathBuf,
    file: Arc<Path>,
    line: u32,
}

impl NamedPath {
    pub(super) fn error(&self, message: String) -> ConfError {
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
    pub(super) certs: Vec<NamedPath>,
    keys: Vec<NamedPath>,
    /// `ssl_certificate $acme_certificate`: the server's
    /// `acme_certificate` is served.
    pub(super) acme: Option<NamedPath>,
    /// `ssl_certificate_key $acme_certificate_key`.
    pub(super) acme_key: Option<NamedPath>,
    protocols: Option<(bool, bool)>,
    ciphers: Option<Vec<rustls::SupportedCipherSuite>>,
    prefer_server_ciphers: Option<bool>,
    session_cache: Option<Vec<SessionCache>>,
    session_timeout: Option<Duration>,
    session_tickets: Option<bool>,
    handshake_timeout: Option<Duration>,
    client_ca: Option<NamedPath>,
    crl: Option<NamedPath>,
    verify_client: Option<(VerifyClient, NamedPath)>,
    ktls: Option<bool>,
    dhparam_seen: Option<()>,
    ecdh_curve: Option<Vec<&'static dyn SupportedKxGroup>>,
    /// `ssl_stapling`, and where it is written (for its notice).
    stapling: Option<(bool, NamedPath)>,
    stapling_verify: Option<bool>,
    stapling_file: Option<NamedPath>,
    stapling_responder: Option<String>,
    trusted: Option<NamedPath>,
    /// `ssl_session_ticket_key` files' contents, in order.
    ticket_keys: Option<Vec<Vec<u8>>>,
    buffer_size: Option<usize>,
    verify_depth: Option<u64>,
    /// `ssl_password_file`'s lines.
    passwords: Option<Vec<String>>,
    reject_handshake: Option<bool>,
    early_data: Option<bool>,
}

impl SslB {
    /// This level's settings with what it leaves unset taken from `up`
    /// (certificates as a whole list, as NGINX merges arrays).
    fn merged(&self, up: &SslB) -> SslB {
        let mut m = self.clone();
        if m.certs.is_empty() && m.acme.is_none() {
            m.certs = up.certs.clone();
            m.keys = up.keys.clone();
            m.acme = up.acme.clone();
        }
        if m.keys.is_empty() && m.acme_key.is_none() {
            m.acme_key = up.acme_key.clone();
        }
        m.protocols = m.protocols.or(up.protocols);
        m.ciphers = m.ciphers.or_else(|| up.ciphers.clone());
        m.prefer_server_ciphers = m.prefer_server_ciphers.or(up.prefer_server_ciphers);
        m.session_cache = m.session_cache.or_else(|| up.session_cache.clone());
        m.session_timeout = m.session_timeout.or(up.session_timeout);
        m.session_tickets = m.session_tickets.or(up.session_tickets);
        m.handshake_timeout = m.handshake_timeout.or(up.handshake_timeout);
        m.client_ca = m.client_ca.or_else(|| up.client_ca.clone());
        m.crl = m.crl.or_else(|| up.crl.clone());
        m.verify_client = m.verify_client.or_else(|| up.verify_client.clone());
        m.ktls = m.ktls.or(up.ktls);
        m.ecdh_curve = m.ecdh_curve.or_else(|| up.ecdh_curve.clone());
        m.stapling = m.stapling.or_else(|| up.stapling.clone());
        m.stapling_verify = m.stapling_verify.or(up.stapling_verify);
        m.stapling_file = m.stapling_file.or_else(|| up.stapling_file.clone());
        m.stapling_responder = m
            .stapling_responder
            .or_else(|| up.stapling_responder.clone());
        m.trusted = m.trusted.or_else(|| up.trusted.clone());
        m.ticket_keys = m.ticket_keys.or_else(|| up.ticket_keys.clone());
        m.buffer_size = m.buffer_size.or(up.buffer_size);
        m.verify_depth = m.verify_depth.or(up.verify_depth);
        m.passwords = m.passwords.or_else(|| up.passwords.clone());
        m.reject_handshake = m.reject_handshake.or(up.reject_handshake);
        m.early_data = m.early_data.or(up.early_data);
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
            STREAM | SSRV => self.stream.ssl.level(self.ctx == SSRV),
            _ => &mut self.server().ssl,
        }
    }
}

fn named(b: &Build, d: &Directive) -> NamedPath {
    NamedPath {
        path: b.full_path(&d.args[0]),
        file: d.file.clone(),
        line: d.line,
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

/// `ssl_protocols`: TLSv1.2 and TLSv1.3 as NGINX; the older versions
/// rustls does not speak (Debian's stock `ssl_protocols TLSv1 TLSv1.1
/// TLSv1.2 TLSv1.3;`) left out with one `warn`; none left is an error.
fn set_protocols(b: &mut Build, d: &Directive) -> Res {
    let (mut v12, mut v13) = (false, false);
    let mut left_out = Vec::new();
    for a in &d.args {
        match a.as_str() {
            "TLSv1.2" => v12 = true,
            "TLSv1.3" => v13 = true,
            "SSLv2" | "SSLv3" | "TLSv1" | "TLSv1.1" => left_out.push(format!("\"{a}\"")),
            _ => {
                return Err(format!(
                    "invalid value \"{a}\" in \"ssl_protocols\" directive, it must be \"TLSv1.2\" or \"TLSv1.3\""
                ))
            }
        }
    }
    if !v12 && !v13 {
        return Err(format!(
            "no protocol porter offers in \"ssl_protocols\": {} not supported (rustls offers TLSv1.2 and TLSv1.3 only)",
            left_out.join(", ")
        ));
    }
    set_once(&mut b.ssl().protocols, (v12, v13), d)?;
    if !left_out.is_empty() {
        warn(
            d,
            &format!(
                "{} in \"ssl_protocols\" left out: rustls offers TLSv1.2 and TLSv1.3 only",
                left_out.join(", ")
            ),
        );
    }
    Ok(())
}

/// `ssl_dhparam`: read as NGINX reads it (a missing or unreadable file,
/// or one without `DH PARAMETERS`, is an error); rustls offers no DHE
/// suites, so a `notice` says ECDHE is used.
fn set_dhparam(b: &mut Build, d: &Directive) -> Res {
    let p = path_arg(b, d)?;
    // Opened here for NGINX's errno text; read and checked by `tls`.
    std::fs::File::open(&p.path).map_err(|e| {
        format!(
            "BIO_new_file(\"{}\") failed {}",
            p.path.display(),
            crate::util::errno_text(&e)
        )
    })?;
    tls::keys::check_dhparam(&p.path)?;
    set_once(&mut b.ssl().dhparam_seen, (), d)?;
    notice(
        d,
        "\"ssl_dhparam\" is not used: rustls offers no DHE suites, key exchange is ECDHE",
    );
    Ok(())
}

/// `ssl_ecdh_curve`: OpenSSL's group names onto rustls's (`tls::groups`).
fn set_ecdh_curve(b: &mut Build, d: &Directive) -> Res {
    let g = tls::groups::select(&d.args[0])
        .map_err(|e| format!("SSL_CTX_set1_curves_list(\"{}\") failed ({e})", d.args[0]))?;
    set_once(&mut b.ssl().ecdh_curve, g.groups, d)?;
    if !g.left_out.is_empty() {
        warn(
            d,
            &format!(
            "\"{}\" in \"ssl_ecdh_curve\" left out: porter offers X25519, prime256v1, secp384r1 and secp521r1",
            g.left_out.join(":")
        ),
        );
    }
    Ok(())
}

/// `ssl_password_file`: read when the directive is, as NGINX does; each
/// line is a passphrase to try on encrypted keys.
fn set_password_file(b: &mut Build, d: &Directive) -> Res {
    let p = path_arg(b, d)?;
    let lines = read_passwords(&p.path)?;
    set_once(&mut b.ssl().passwords, lines, d)
}

/// The lines of a password file (`ssl_password_file`,
/// `proxy_ssl_password_file`), NGINX's errors when it cannot be read or
/// holds none.
pub(super) fn read_passwords(path: &Path) -> Result<Vec<String>, String> {
    let text = std::fs::read(path).map_err(|e| {
        format!(
            "open() \"{}\" failed {}",
            path.display(),
            crate::util::errno_text(&e)
        )
    })?;
    let lines: Vec<String> = String::from_utf8_lossy(&text)
        .split(['\r', '\n'])
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    if lines.is_empty() {
        return Err(format!("empty file \"{}\"", path.display()));
    }
    Ok(lines)
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
/// has a certificate, listens with `ssl` (`ssl_listen`: that `listen`,
/// for NGINX's message when no certificate is given) or refuses
/// handshakes (`ssl_reject_handshake on`, which needs no certificate).
pub(super) fn server_tls(
    http: &SslB,
    srv: &SslB,
    ssl_listen: Option<(&Arc<Path>, u32, &str)>,
    header_timeout: Duration,
    h2: bool,
    shared: &mut SslShared,
    acme: Option<Arc<crate::acme::slot::CertSlot>>,
) -> Result<Option<Arc<ServerTls>>, ConfError> {
    let s = srv.merged(http);
    let reject = s.reject_handshake.unwrap_or(false);
    let resolver = match acme_resolver(&s, acme, ssl_listen.is_some())? {
        AcmeUse::Serve(r) => Some(r),
        AcmeUse::NotHere => return Ok(None),
        AcmeUse::No => None,
    };
    if s.certs.is_empty() && !reject && resolver.is_none() {
        return match ssl_listen {
            Some((file, line, kind)) => Err(ConfError {
                message: format!(
                    "no \"ssl_certificate\" is defined for the \"listen ... {kind}\" directive"
                ),
                file: Some(file.clone()),
                line,
            }),
            None => Ok(None),
        };
    }
    let keys = load_keys(&s)?;
    let trusted = match &s.trusted {
        Some(t) => tls::keys::read_trusted(&t.path).map_err(|m| t.error(m))?,
        None => Vec::new(),
    };
    let timeout = s.session_timeout.unwrap_or(Duration::from_secs(300));
    let sessions = session_store(&s, timeout, shared);
    let cached = (s.session_cache.iter().flatten()).any(|c| !matches!(c, SessionCache::Off));
    let early_sessions = (s.early_data == Some(true))
        .then(|| tls::session::early_store(cached.then(|| Arc::clone(&sessions)), timeout));
    let tickets = tickets(&s, timeout, shared)?;
    let (verify_client, client_auth) = client_auth(&s, &trusted)?;
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
        kx_groups: s.ecdh_curve.clone(),
        buffer_size: s.buffer_size,
        resolver,
        early: early_sessions.clone(),
    };
    let at = |m| match s.certs.first() {
        Some(c) => c.error(m),
        None => ConfError {
            message: m,
            file: None,
            line: 0,
        },
    };
    let config = tls::server_config(settings).map_err(at)?;
    Ok(Some(Arc::new(ServerTls {
        config,
        handshake_timeout: s.handshake_timeout.unwrap_or(header_timeout),
        verify_client,
        client_auth,
        ktls: s.ktls.unwrap_or(true),
        reject,
        early_data: s.early_data.unwrap_or(false),
        early_sessions,
    })))
}

/// The server's certificate pairs (keys opened with `ssl_password_file`'s
/// lines), each with the `ssl_stapling_file` response when stapling is on.
fn load_keys(s: &SslB) -> Result<Vec<Arc<CertifiedKey>>, ConfError> {
    let ocsp = match &s.stapling {
        Some((true, at)) => match &s.stapling_file {
            Some(f) => Some(tls::keys::read_ocsp(&f.path).map_err(|m| f.error(m))?),
            None => {
                say_at("notice", &at.file, at.line, "\"ssl_stapling\" staples nothing: porter does not fetch OCSP responses, give them with \"ssl_stapling_file\"");
                None
            }
        },
        _ => None,
    };
    let passwords = s.passwords.as_deref().unwrap_or_default();
    let mut keys = Vec::new();
    for (i, cert) in s.certs.iter().enumerate() {
        let Some(key) = s.keys.get(i) else {
            return Err(cert.error(format!(
                "no \"ssl_certificate_key\" is defined for certificate \"{}\"",
                cert.path.display()
            )));
        };
        let pair = tls::load_pair(&cert.path, &key.path, passwords).map_err(|m| cert.error(m))?;
        keys.push(match &ocsp {
            Some(r) => Arc::new(CertifiedKey {
                ocsp: Some(r.clone()),
                ..(*pair).clone()
            }),
            None => pair,
        });
    }
    Ok(keys)
}

/// The ticket keys of a server (`ssl_session_tickets on`): its
/// `ssl_session_ticket_key` files', else the keys every server of this
/// configuration shares, made at load.
fn tickets(
    s: &SslB,
    timeout: Duration,
    shared: &mut SslShared,
) -> Result<Option<Arc<dyn ProducesTickets>>, ConfError> {
    if !s.session_tickets.unwrap_or(true) {
        return Ok(None);
    }
    let t = match (&s.ticket_keys, &shared.tickets) {
        // The files were checked (48 or 80 bytes) when read.
        (Some(files), _) => match tls::tickets::FileTickets::new(files) {
            Ok(t) => Arc::new(t) as Arc<dyn ProducesTickets>,
            Err(i) => {
                return Err(ConfError {
                    message: format!("session ticket key {} must be 48 or 80 bytes", i + 1),
                    file: None,
                    line: 0,
                })
            }
        },
        (None, Some(t)) => t.clone(),
        (None, None) => {
            let t = rustls::crypto::ring::Ticketer::new().map_err(|e| ConfError {
                message: format!("cannot create ticket keys: {e}"),
                file: s.certs.first().map(|c| c.file.clone()),
                line: s.certs.first().map_or(0, |c| c.line),
            })?;
            shared.tickets = Some(t.clone());
            t
        }
    };
    Ok(Some(
        Arc::new(tls::session::TimedTickets::new(t, timeout)) as Arc<dyn ProducesTickets>
    ))
}

/// `ssl_verify_client` and the CAs of `ssl_client_certificate`, loaded.
fn client_auth(
    s: &SslB,
    trusted: &[rustls::pki_types::CertificateDer<'static>],
) -> Result<(VerifyClient, Option<Arc<ClientAuth>>), ConfError> {
    let Some((mode, at)) = s
        .verify_client
        .clone()
        .filter(|(m, _)| *m != VerifyClient::Off)
    else {
        return Ok((VerifyClient::Off, None));
    };
    // NGINX (since 1.27) takes the CAs of either file; `optional_no_ca`
    // needs neither.
    let ca = s.client_ca.as_ref();
    if ca.is_none() && trusted.is_empty() && mode != VerifyClient::OptionalNoCa {
        return Err(at.error(
            "no ssl_client_certificate or ssl_trusted_certificate for ssl_verify_client".into(),
        ));
    }
    let crls = match &s.crl {
        Some(c) => tls::client::load_crls(&c.path)
            .map_err(|m| c.error(m))?
            .lists
            .clone(),
        None => Vec::new(),
    };
    let depth = usize::try_from(s.verify_depth.unwrap_or(1)).unwrap_or(usize::MAX);
    let auth = ClientAuth::load(ca.map(|c| c.path.as_path()), trusted, crls, depth)
        .map_err(|m| ca.unwrap_or(&at).error(m))?;
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
