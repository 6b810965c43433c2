//! ACME directives, nginx-acme's names (`ngx_http_acme_module`):
//! `acme_issuer NAME { uri; contact; account_key; challenge; state_path;
//! accept_terms_of_service; external_account_key; ssl_trusted_certificate;
//! ssl_verify; }`,
//! `acme_shared_zone`, and `acme_certificate ISSUER [NAME…] [key=ALG]` in
//! a server, whose certificate `ssl_certificate $acme_certificate;
//! ssl_certificate_key $acme_certificate_key;` serve (see `ssl.rs`).
//! An issuer's block is read here, whole, when the directive is; a
//! server's certificate is resolved when the server's settings merge
//! ([`certificate`]: its names default to `server_name`'s), so an error
//! names the `acme_certificate` line.

#[allow(unused_imports)]
use super::*;
use crate::acme::{self, AccountKey, ChallengeKind, ExternalAccount, Issuer, KeyKind};
use crate::tls;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    blk("acme_issuer", HTTP, Arity::N(1), set_issuer),
    d("acme_shared_zone", HTTP, Arity::N(1), set_shared_zone),
    d("acme_certificate", SRV, Arity::Min(1), |b, d| {
        let srv = b.server();
        if srv.acme.is_some() {
            return Err(dup(d));
        }
        srv.acme = Some(d.clone());
        Ok(())
    }),
];

/// Where porter finds the system's CAs when `ssl_trusted_certificate`
/// is not given (Debian's bundle, OpenSSL's default file there).
const SYSTEM_CAS: &str = "/etc/ssl/certs/ca-certificates.crt";

/// An `acme_issuer` block as its lines are read.
#[derive(Default)]
struct IssuerB {
    uri: Option<String>,
    contacts: Vec<String>,
    account_key: Option<AccountKey>,
    challenge: Option<ChallengeKind>,
    state_path: Option<Option<PathBuf>>,
    accept_tos: bool,
    external_account: Option<ExternalAccount>,
    trusted: Option<PathBuf>,
    verify: Option<bool>,
}

fn set_issuer(b: &mut Build, d: &Directive) -> Res {
    let name = d.args[0].clone();
    if b.acme_issuers.contains_key(&name) {
        return Err(format!("duplicate \"acme_issuer\" \"{name}\""));
    }
    let mut i = IssuerB::default();
    for e in d.block.as_deref().unwrap_or(&[]) {
        if e.block.is_some() {
            return http::inner_error(e, format!("unexpected \"{{\" after \"{}\"", e.name));
        }
        if let Err(m) = issuer_line(b, &mut i, e) {
            return http::inner_error(e, m);
        }
    }
    let Some(uri) = i.uri else {
        return Err(format!("\"uri\" is missing in \"acme_issuer\" \"{name}\""));
    };
    let verify = i.verify.unwrap_or(true);
    let trusted_path = i
        .trusted
        .or_else(|| Some(PathBuf::from(SYSTEM_CAS)).filter(|p| p.exists()));
    let trusted = match &trusted_path {
        Some(p) => Some(tls::client::load_trusted(p)?),
        None => None,
    };
    let spec = tls::client::ClientSpec {
        verify,
        trusted,
        crls: None,
        verify_depth: 9,
        server_name: true,
        tls12: true,
        tls13: true,
        ciphers: proxy_ssl::default_ciphers(),
        session_reuse: true,
        cert: None,
        alpn_h2: false,
    };
    let tls = tls::client::config(&spec)?;
    let state_path = match i.state_path {
        Some(p) => p,
        None => Some(b.full_path(&format!("acme_{name}"))),
    };
    let issuer = Issuer {
        name: name.clone(),
        uri,
        contacts: i.contacts,
        account_key: i.account_key.unwrap_or(AccountKey::Generate),
        challenge: i.challenge.unwrap_or(ChallengeKind::Http01),
        state_path,
        accept_tos: i.accept_tos,
        external_account: i.external_account,
        tls,
        tls_settings: format!("{trusted_path:?}|{verify}"),
    };
    b.acme_issuers.insert(name, Arc::new(issuer));
    Ok(())
}

/// One line of an `acme_issuer` block.
fn issuer_line(b: &Build, i: &mut IssuerB, e: &Directive) -> Res {
    let one = || match e.args.as_slice() {
        [v] => Ok(v.as_str()),
        _ => Err(format!(
            "invalid number of arguments in \"{}\" directive",
            e.name
        )),
    };
    match e.name.as_str() {
        "uri" => {
            let u = one()?;
            if !u.starts_with("https://") {
                return Err(format!("invalid \"uri\" \"{u}\": an ACME directory is an https:// URL"));
            }
            i.uri = Some(u.to_string());
        }
        "contact" => {
            let c = one()?;
            i.contacts.push(match c.contains(':') {
                true => c.to_string(),
                false => format!("mailto:{c}"),
            });
        }
        "account_key" => {
            i.account_key = Some(match one()? {
                "ecdsa:256" => AccountKey::Generate,
                v @ ("ecdsa:384" | "ecdsa:521" | "rsa:2048" | "rsa:3072" | "rsa:4096") => {
                    return Err(format!("unsupported account key \"{v}\": porter's ACME accounts sign with ES256 (\"ecdsa:256\" or a P-256 key file)"))
                }
                path => AccountKey::File(b.full_path(path)),
            })
        }
        "challenge" => {
            i.challenge = Some(match one()? {
                "http" | "http-01" => ChallengeKind::Http01,
                "tls-alpn" | "tls-alpn-01" => ChallengeKind::TlsAlpn01,
                v => return Err(format!("unsupported challenge: {v}")),
            })
        }
        "state_path" => {
            i.state_path = Some(match one()? {
                "off" => None,
                p => Some(b.full_path(p)),
            })
        }
        "accept_terms_of_service" if e.args.is_empty() => i.accept_tos = true,
        "ssl_trusted_certificate" => i.trusted = Some(b.full_path(one()?)),
        "ssl_verify" => {
            let v = one()?;
            i.verify = Some(parse_flag(v).ok_or_else(|| {
                format!("invalid value \"{v}\" in \"ssl_verify\" directive, it must be \"on\" or \"off\"")
            })?)
        }
        "accept_terms_of_service" => {
            return Err("invalid number of arguments in \"accept_terms_of_service\" directive".into())
        }
        "external_account_key" => {
            if i.external_account.is_some() {
                return Err("\"external_account_key\" directive is duplicate".into());
            }
            let [kid, key] = e.args.as_slice() else {
                return Err(
                    "invalid number of arguments in \"external_account_key\" directive".into(),
                );
            };
            i.external_account = Some(external_account(b, kid, key)?);
        }
        n @ ("common_name_in_csr" | "preferred_chain" | "profile") => {
            return Err(format!("\"{n}\" in \"acme_issuer\" is not supported by porter"))
        }
        n => return Err(format!("unknown directive \"{n}\" in \"acme_issuer\"")),
    }
    Ok(())
}

/// `external_account_key KID FILE|data:KEY` (nginx-acme's): the key
/// identifier and the MAC key, base64url, from the file (surrounding
/// white space dropped) or given inline after `data:`.
fn external_account(b: &Build, kid: &str, key: &str) -> Result<ExternalAccount, String> {
    if kid.is_empty() || key.is_empty() {
        return Err("invalid value in \"external_account_key\" directive".into());
    }
    let encoded = match key.strip_prefix("data:") {
        Some(k) => k.to_string(),
        None => {
            let path = b.full_path(key);
            std::fs::read_to_string(&path).map_err(|e| {
                format!(
                    "open() \"{}\" failed {}",
                    path.display(),
                    crate::util::errno_text(&e)
                )
            })?
        }
    };
    let mac = crate::access::basic::decode_url(encoded.trim().as_bytes())
        .filter(|k| !k.is_empty())
        .ok_or("invalid base64url encoded value in \"external_account_key\" directive")?;
    Ok(ExternalAccount {
        kid: kid.to_string(),
        mac,
    })
}

/// `acme_shared_zone zone=NAME:SIZE`: checked and otherwise without
/// effect (workers are threads of one process: certificates and
/// challenges are in its memory already).
fn set_shared_zone(_: &mut Build, d: &Directive) -> Res {
    let v = &d.args[0];
    let ok = v
        .strip_prefix("zone=")
        .and_then(|z| z.split_once(':'))
        .is_some_and(|(n, s)| !n.is_empty() && parse_size(s).is_some());
    match ok {
        true => Ok(()),
        false => Err(format!("invalid \"acme_shared_zone\" value \"{v}\"")),
    }
}

/// A server's `acme_certificate`, resolved: its issuer, its names
/// (`server_name`'s when none are given: exact names, `.example.com` as
/// `www.example.com` and `example.com`, regular expressions left out
/// with a `warn`), its key type, and its slot (with the certificate the
/// state path keeps, on first load).
pub(super) fn certificate(
    issuers: &HashMap<String, Arc<Issuer>>,
    d: &Directive,
    server_names: &[String],
) -> Result<Arc<acme::Certificate>, ConfError> {
    let at = |m: String| d.error(format!("\"acme_certificate\": {m}"));
    let issuer = issuers
        .get(&d.args[0])
        .ok_or_else(|| at(format!("issuer \"{}\" is not defined", d.args[0])))?;
    let mut key = KeyKind::EcdsaP256;
    let mut listed = Vec::new();
    for a in &d.args[1..] {
        match a.strip_prefix("key=") {
            Some("ecdsa" | "ecdsa:256") => key = KeyKind::EcdsaP256,
            Some("ecdsa:384") => key = KeyKind::EcdsaP384,
            Some("rsa" | "rsa:2048") => key = KeyKind::Rsa2048,
            Some("rsa:3072") => key = KeyKind::Rsa3072,
            Some("rsa:4096") => key = KeyKind::Rsa4096,
            Some(v) => {
                return Err(at(format!(
                    "unsupported key \"{v}\" (porter makes \"ecdsa:256\", \"ecdsa:384\", \"rsa:2048\", \"rsa:3072\" or \"rsa:4096\" keys)"
                )))
            }
            None => listed.push(a.clone()),
        }
    }
    let from_server_name = listed.is_empty();
    let raw = if from_server_name {
        server_names
    } else {
        &listed[..]
    };
    let mut names: Vec<String> = Vec::new();
    for n in raw {
        for name in identifiers(n, from_server_name, d).map_err(at)? {
            // Neither HTTP-01 nor TLS-ALPN-01 (RFC 8737 §3) can prove a
            // wildcard; the issuer would refuse the order.
            if name.starts_with("*.") {
                return Err(at(format!("wildcard name \"{name}\" cannot be validated with the \"{}\" challenge of issuer \"{}\"", issuer.challenge.name(), issuer.name)));
            }
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    if names.is_empty() {
        return Err(at("no identifiers found in \"server_name\"".into()));
    }
    let id = acme::certificate_id(&issuer.name, &issuer.uri, &names, key);
    let (slot, fresh) = acme::slot::slot(&id);
    let cert = acme::Certificate {
        issuer: Arc::clone(issuer),
        names,
        key,
        slot,
        id,
    };
    if fresh {
        match acme::state::read_certificate(&cert) {
            Ok(Some(kept)) => cert.slot.install(kept),
            Ok(None) => {}
            Err(m) => warn(d, &format!("{m}; a new certificate will be ordered")),
        }
    }
    Ok(Arc::new(cert))
}

/// The certificate names one `server_name` (or listed) entry stands for.
fn identifiers(raw: &str, from_server_name: bool, d: &Directive) -> Result<Vec<String>, String> {
    if raw.is_empty() || (from_server_name && raw == "_") {
        return Ok(Vec::new());
    }
    if raw.starts_with('~') {
        if from_server_name {
            warn(
                d,
                &format!(
                    "\"acme_certificate\": unsupported regular expression in server_name: {raw}"
                ),
            );
            return Ok(Vec::new());
        }
        return Err(format!("invalid name \"{raw}\""));
    }
    let n = raw.to_ascii_lowercase();
    let valid = |s: &str| {
        let s = s.strip_prefix("*.").unwrap_or(s);
        !s.is_empty()
            && s.split('.')
                .all(|l| !l.is_empty() && l.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-'))
    };
    let out = match n.strip_prefix('.') {
        Some(host) => vec![format!("www.{host}"), host.to_string()],
        None => vec![n.clone()],
    };
    match out.iter().all(|s| valid(s)) {
        true => Ok(out),
        false => Err(format!("invalid name \"{raw}\"")),
    }
}

/// What `ssl_certificate $acme_certificate` means for one server.
pub(super) enum AcmeUse {
    /// Not used.
    No,
    /// Inherited by a server that does not listen with `ssl` and has no
    /// `acme_certificate`: no TLS here.
    NotHere,
    /// The server's `acme_certificate` answers handshakes.
    Serve(Arc<dyn rustls::server::ResolvesServerCert>),
}

pub(super) fn acme_resolver(
    s: &super::ssl::SslB,
    slot: Option<Arc<crate::acme::slot::CertSlot>>,
    ssl_listen: bool,
) -> Result<AcmeUse, ConfError> {
    let Some(at) = &s.acme else {
        return Ok(AcmeUse::No);
    };
    if s.acme_key.is_none() {
        return Err(at.error(
            "\"$acme_certificate\" needs \"ssl_certificate_key $acme_certificate_key\"".into(),
        ));
    }
    if !s.certs.is_empty() {
        return Err(at.error(
            "\"$acme_certificate\" cannot be combined with certificate files in one server".into(),
        ));
    }
    match slot {
        Some(slot) => Ok(AcmeUse::Serve(slot)),
        None if !ssl_listen => Ok(AcmeUse::NotHere),
        None => {
            Err(at
                .error("\"$acme_certificate\" needs an \"acme_certificate\" in the server".into()))
        }
    }
}
