//! `proxy_pass https://`'s directives (`ngx_http_proxy_module`'s
//! `proxy_ssl_*`, also the stream proxy's with `proxy_ssl on`): whether and against what the upstream's certificate is
//! checked (CAs, revocation lists), the name checked and sent as SNI, versions, suites and session
//! reuse. Location settings, inherited one by one like NGINX's; the CA
//! file and `proxy_ssl_password_file` are read when the directive is
//! read, so a bad one is `porter -t`'s error with its file:line; the
//! client certificate pair (`proxy_ssl_certificate`, `_key`) once the
//! settings have merged ([`load_client_certs`]), once per distinct pair,
//! for the locations that proxy. The rustls configuration they make is
//! built on first use (`tls::client`).

#[allow(unused_imports)]
use super::*;
use crate::tls::ciphers::{self, CipherError};
use rustls::sign::CertifiedKey;

/// The http levels and the stream block's (NGINX's stream proxy has the
/// same `proxy_ssl_*` rows; a stream server's settings are a location's).
const HSLS: u16 = HSL | super::stream::SS;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    // The stream proxy's switch (`proxy_pass https://` says it in HTTP).
    d("proxy_ssl", super::stream::SS, Arity::N(1), |b, d| {
        let v = flag(d)?;
        set_once(&mut b.loc().stream.ssl, v, d)
    }),
    d("proxy_ssl_verify", HSLS, Arity::N(1), |b, d| {
        let v = flag(d)?;
        set_once(&mut b.loc().proxy_ssl_verify, v, d)
    }),
    d(
        "proxy_ssl_trusted_certificate",
        HSLS,
        Arity::N(1),
        |b, d| {
            if d.args[0].contains('$') {
                return Err(format!(
                    "variables in \"{}\" are not supported by porter",
                    d.name
                ));
            }
            let certs = crate::tls::client::load_trusted(&b.full_path(&d.args[0]))?;
            set_once(&mut b.loc().proxy_ssl_trusted_certificate, Some(certs), d)
        },
    ),
    // Checked for every certificate of the chain (as NGINX's
    // `X509_V_FLAG_CRL_CHECK_ALL`): one whose issuer has no list here
    // fails, as in NGINX.
    d("proxy_ssl_crl", HSLS, Arity::N(1), |b, d| {
        let f = file_at(b, d)?;
        let crls = crate::tls::client::load_crls(&f.path)?;
        set_once(&mut b.loc().proxy_ssl_crl, Some(crls), d)
    }),
    d("proxy_ssl_server_name", HSLS, Arity::N(1), |b, d| {
        let v = flag(d)?;
        set_once(&mut b.loc().proxy_ssl_server_name, v, d)
    }),
    d("proxy_ssl_name", HSLS, Arity::N(1), |b, d| {
        let v = template(&d.args[0])?;
        set_once(&mut b.loc().proxy_ssl_name, Some(v), d)
    }),
    d("proxy_ssl_protocols", HSLS, Arity::Min(1), set_protocols),
    d("proxy_ssl_ciphers", HSLS, Arity::N(1), |b, d| {
        let v = select_ciphers(d)?;
        set_once(&mut b.loc().proxy_ssl_ciphers, v, d)
    }),
    d("proxy_ssl_session_reuse", HSLS, Arity::N(1), |b, d| {
        let v = flag(d)?;
        set_once(&mut b.loc().proxy_ssl_session_reuse, v, d)
    }),
    d("proxy_ssl_certificate", HSLS, Arity::N(1), |b, d| {
        let f = file_at(b, d)?;
        set_once(&mut b.loc().proxy_ssl_certificate, Some(f), d)
    }),
    d("proxy_ssl_certificate_key", HSLS, Arity::N(1), |b, d| {
        let f = file_at(b, d)?;
        set_once(&mut b.loc().proxy_ssl_certificate_key, Some(f), d)
    }),
    d("proxy_ssl_password_file", HSLS, Arity::N(1), |b, d| {
        let f = file_at(b, d)?;
        let lines = super::ssl::read_passwords(&f.path)?;
        set_once(&mut b.loc().proxy_ssl_password_file, Arc::new(lines), d)
    }),
    // Enforced after webpki's verdict (`tls::client`'s `Depth`).
    d("proxy_ssl_verify_depth", HSLS, Arity::N(1), |b, d| {
        let n = number(d, &d.args[0])?;
        set_once(&mut b.loc().proxy_ssl_verify_depth, n, d)
    }),
];

/// `proxy_ssl_ciphers`' default, NGINX's.
pub(crate) fn default_ciphers() -> Arc<(String, Vec<rustls::SupportedCipherSuite>)> {
    let spec = "DEFAULT";
    Arc::new((spec.to_string(), ciphers::select(spec).unwrap_or_default()))
}

/// `proxy_ssl_ciphers`/`grpc_ssl_ciphers`' value.
pub(super) fn select_ciphers(
    d: &Directive,
) -> Result<Arc<(String, Vec<rustls::SupportedCipherSuite>)>, String> {
    let spec = &d.args[0];
    let v = ciphers::select(spec).map_err(|e| match e {
        CipherError::Unknown(n) => format!(
            "unknown cipher \"{n}\" in \"{}\" (rustls offers ECDHE with AES-GCM or CHACHA20-POLY1305)",
            d.name
        ),
        CipherError::NoMatch => format!(
            "SSL_CTX_set_cipher_list(\"{spec}\") failed (no cipher match: rustls offers ECDHE with AES-GCM or CHACHA20-POLY1305)"
        ),
    })?;
    Ok(Arc::new((spec.clone(), v)))
}

/// NGINX 1.22's default still lists TLSv1 and TLSv1.1, so configs name
/// them; rustls cannot offer them, so they are skipped as long as TLSv1.2
/// or TLSv1.3 is there too (an upstream that speaks only the old ones
/// fails its handshake with a log line).
fn set_protocols(b: &mut Build, d: &Directive) -> Res {
    let v = protocols(d)?;
    set_once(&mut b.loc().proxy_ssl_protocols, v, d)
}

/// `proxy_ssl_protocols`/`grpc_ssl_protocols`' value: (TLSv1.2, TLSv1.3).
pub(super) fn protocols(d: &Directive) -> Result<(bool, bool), String> {
    let (mut v12, mut v13) = (false, false);
    for a in &d.args {
        match a.as_str() {
            "TLSv1.2" => v12 = true,
            "TLSv1.3" => v13 = true,
            "SSLv2" | "SSLv3" | "TLSv1" | "TLSv1.1" => {}
            _ => return Err(format!("invalid value \"{a}\" in \"{}\" directive", d.name)),
        }
    }
    if !v12 && !v13 {
        return Err(format!(
            "\"{}\" names no protocol porter offers (rustls offers TLSv1.2 and TLSv1.3 only)",
            d.name
        ));
    }
    Ok((v12, v13))
}

pub(super) fn file_at(b: &Build, d: &Directive) -> Result<Arc<FileAt>, String> {
    if d.args[0].contains('$') {
        return Err(format!(
            "variables in \"{}\" are not supported by porter",
            d.name
        ));
    }
    Ok(Arc::new(FileAt {
        path: b.full_path(&d.args[0]),
        file: d.file.clone(),
        line: d.line,
    }))
}

/// Client certificate pairs already loaded in this build, by files and
/// passwords, so locations inheriting one pair share one `CertifiedKey`.
pub(super) type ClientCerts = HashMap<(PathBuf, PathBuf, Arc<Vec<String>>), Arc<CertifiedKey>>;

/// Loads the merged `proxy_ssl_certificate` pair of a location that
/// proxies into `proxy_ssl_client_cert`, and `grpc_ssl_certificate`'s
/// (`uwsgi_ssl_certificate`'s) of one that passes to gRPC (uwsgi) into
/// `grpc.ssl_client_cert` (`uwsgi.ssl_client_cert`) (NGINX's errors: a
/// certificate without a key; the pair's own, at the certificate's line).
pub(super) fn load_client_certs(
    loc: &mut LocBuilder,
    handler: &Handler,
    loaded: &mut ClientCerts,
) -> Result<(), ConfError> {
    if matches!(handler, Handler::Proxy(_)) {
        load_proxy_pair(loc, loaded)?;
    }
    if matches!(handler, Handler::Proxy(p) if p.proto == crate::upstream::Protocol::Uwsgi) {
        let u = &mut loc.uwsgi;
        let pair = client_pair(
            ("uwsgi_ssl_certificate_key", u.ssl_certificate.clone()),
            u.ssl_certificate_key.clone(),
            u.ssl_password_file.clone(),
            loaded,
        )?;
        if pair.is_some() {
            u.ssl_client_cert = Some(pair);
        }
    }
    if matches!(handler, Handler::Grpc(_)) {
        let g = &mut loc.grpc;
        let pair = client_pair(
            ("grpc_ssl_certificate_key", g.ssl_certificate.clone()),
            g.ssl_certificate_key.clone(),
            g.ssl_password_file.clone(),
            loaded,
        )?;
        if pair.is_some() {
            g.ssl_client_cert = Some(pair);
        }
    }
    Ok(())
}

/// Loads the merged `proxy_ssl_certificate` pair of `loc` (a location
/// that proxies, or a stream server with `proxy_ssl on`).
pub(super) fn load_proxy_pair(
    loc: &mut LocBuilder,
    loaded: &mut ClientCerts,
) -> Result<(), ConfError> {
    let pair = client_pair(
        (
            "proxy_ssl_certificate_key",
            loc.proxy_ssl_certificate.clone(),
        ),
        loc.proxy_ssl_certificate_key.clone(),
        loc.proxy_ssl_password_file.clone(),
        loaded,
    )?;
    if pair.is_some() {
        loc.proxy_ssl_client_cert = Some(pair);
    }
    Ok(())
}

/// One merged certificate pair, loaded (once per distinct files and
/// passwords); `None` when no certificate is set.
fn client_pair(
    (key_name, cert): (&str, Option<Option<Arc<FileAt>>>),
    key: Option<Option<Arc<FileAt>>>,
    passwords: Option<Arc<Vec<String>>>,
    loaded: &mut ClientCerts,
) -> Result<Option<Arc<CertifiedKey>>, ConfError> {
    let Some(Some(cert)) = cert else {
        return Ok(None);
    };
    let at = |m: String| ConfError {
        message: m,
        file: Some(cert.file.clone()),
        line: cert.line,
    };
    let Some(Some(key)) = key else {
        return Err(at(format!(
            "no \"{key_name}\" is defined for certificate \"{}\"",
            cert.path.display()
        )));
    };
    let id = (
        cert.path.clone(),
        key.path.clone(),
        passwords.unwrap_or_default(),
    );
    let pair = match loaded.get(&id) {
        Some(p) => Arc::clone(p),
        None => {
            let p = crate::tls::load_pair(&cert.path, &key.path, &id.2).map_err(at)?;
            loaded.insert(id, Arc::clone(&p));
            p
        }
    };
    Ok(Some(pair))
}
