//! Automatic HTTPS end to end against Pebble (Debian's `pebble`: the
//! ACME test server and `pebble-challtestsrv`, whose DNS answers every
//! name with 127.0.0.1). Each test starts its own Pebble, with a
//! certificate made here for its directory (porter trusts it through
//! `ssl_trusted_certificate`) and `httpPort` set to a plain port of
//! porter's, so Pebble's HTTP-01 validation reaches porter itself.
//! Issued certificates are checked with a rustls client that trusts only
//! the root Pebble made for this run (read from its management port).

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::tls::{Alg, Ca, Conn};
use crate::common::{free_port, wait_port, Server, TempDir};

const PEBBLE: &str = "/usr/bin/pebble";
const CHALLTESTSRV: &str = "/usr/bin/pebble-challtestsrv";

/// A running Pebble and its DNS; both killed by PID on drop.
struct Pebble {
    pebble: Child,
    dns: Child,
    mgmt: u16,
    ca: Arc<Ca>,
    dir: TempDir,
}

/// What a test's Pebble is set up with.
struct PebbleSetup {
    /// The TLS certificate of its directory (kept across a restart).
    ca: Arc<Ca>,
    port: u16,
    /// porter's plain port, where HTTP-01 is validated.
    http_port: u16,
    /// porter's TLS port, where TLS-ALPN-01 is validated (else a port
    /// nothing listens on).
    tls_port: Option<u16>,
    /// External account binding required, with this key ID and
    /// base64url MAC key.
    eab: Option<(&'static str, &'static str)>,
    /// Extra environment (`PEBBLE_VA_SLEEPTIME`).
    env: Vec<(&'static str, String)>,
}

impl PebbleSetup {
    /// Pebble on `port`, validating HTTP-01 on porter's `http_port`.
    fn new(ca: &Arc<Ca>, port: u16, http_port: u16) -> PebbleSetup {
        PebbleSetup {
            ca: Arc::clone(ca),
            port,
            http_port,
            tls_port: None,
            eab: None,
            env: Vec::new(),
        }
    }
}

fn require_pebble() {
    assert!(
        Path::new(PEBBLE).exists() && Path::new(CHALLTESTSRV).exists(),
        "tests/acme.rs needs Debian's pebble package (apt-get install pebble)"
    );
}

impl Pebble {
    fn start(s: &PebbleSetup) -> Pebble {
        require_pebble();
        let dir = TempDir::new("pebble");
        let leaf = s.ca.leaf(&["localhost", "127.0.0.1"], Alg::Ecdsa);
        let (cert, key) = leaf.write(dir.path(), "wfe");
        let mgmt = free_port();
        let dns_port = free_port();
        let eab = match s.eab {
            Some((kid, mac)) => format!(
                r#""externalAccountBindingRequired": true, "externalAccountMACKeys": {{"{kid}": "{mac}"}}"#
            ),
            None => r#""externalAccountBindingRequired": false"#.to_string(),
        };
        let config = format!(
            r#"{{"pebble": {{"listenAddress": "127.0.0.1:{}", "managementListenAddress": "127.0.0.1:{mgmt}",
              "certificate": "{}", "privateKey": "{}", "httpPort": {}, "tlsPort": {},
              "ocspResponderURL": "", {eab}}}}}"#,
            s.port,
            cert.display(),
            key.display(),
            s.http_port,
            s.tls_port.unwrap_or_else(free_port)
        );
        let conf = dir.write("pebble.json", config);
        let dns = Command::new(CHALLTESTSRV)
            .args(["-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""])
            .args(["-dns01", &format!("127.0.0.1:{dns_port}")])
            .args(["-http01", "", "-https01", "", "-tlsalpn01", ""])
            .args(["-management", &format!("127.0.0.1:{}", free_port())])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let log = std::fs::File::create(dir.path().join("pebble.log")).unwrap();
        let mut cmd = Command::new(PEBBLE);
        cmd.arg("-config")
            .arg(&conf)
            .args(["-dnsserver", &format!("127.0.0.1:{dns_port}")])
            .env("PEBBLE_WFE_NONCEREJECT", "0")
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        if !s.env.iter().any(|(k, _)| *k == "PEBBLE_VA_SLEEPTIME") {
            cmd.env("PEBBLE_VA_NOSLEEP", "1");
        }
        for (k, v) in &s.env {
            cmd.env(k, v);
        }
        let pebble = cmd.spawn().unwrap();
        let p = Pebble {
            pebble,
            dns,
            mgmt,
            ca: Arc::clone(&s.ca),
            dir,
        };
        assert!(
            wait_port(s.port, Duration::from_secs(10)),
            "pebble did not start: {}",
            p.log()
        );
        assert!(
            wait_port(mgmt, Duration::from_secs(10)),
            "pebble's management port"
        );
        p
    }

    /// Waits until porter's error log says a certificate was issued and
    /// returns the log (the test fails with both logs otherwise).
    fn wait_issued(&self, srv: &Server) -> String {
        let log = srv.wait_log("logs/error.log", "issued by", Duration::from_secs(60));
        assert!(log.contains("issued by"), "{log}\n{}", self.log());
        log
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("pebble.log")).unwrap_or_default()
    }

    /// The root this Pebble signs with (new at each start).
    fn root_pem(&self) -> String {
        let cfg = common::tls::client(&self.ca, Default::default());
        let mut c = Conn::open(self.mgmt, &cfg, "localhost").unwrap();
        let r = c
            .request(
                "GET /roots/0 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
                false,
            )
            .unwrap();
        assert_eq!(r.status, 200);
        r.text()
    }
}

impl Drop for Pebble {
    fn drop(&mut self) {
        for c in [&mut self.pebble, &mut self.dns] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A client trusting only `root_pem`.
fn client_trusting(root_pem: &str) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_slice_iter(root_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// The certificate porter serves for `name` on `port` right now, if a
/// handshake succeeds without verification (DER).
fn served(port: u16, name: &str) -> Option<Vec<u8>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
        .with_no_client_auth();
    Conn::open(port, &Arc::new(cfg), name)
        .ok()
        .map(|c| c.peer_cert())
}

/// Accepts any certificate (to see what is served, whoever signed it).
#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &rustls::pki_types::CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &rustls::pki_types::CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// porter's configuration: a plain server on `{PORT}` and `http_port`
/// (Pebble validates there), a TLS server on `tls_port` for `names`.
fn conf(pebble_port: u16, http_port: u16, tls_port: u16, names: &str) -> String {
    conf_with_state(pebble_port, http_port, tls_port, names, "{PREFIX}/acme")
}

/// [`conf`] with the state path `state`.
fn conf_with_state(
    pebble_port: u16,
    http_port: u16,
    tls_port: u16,
    names: &str,
    state: &str,
) -> String {
    format!(
        "daemon off;\nworker_processes 2;\nerror_log {{PREFIX}}/logs/error.log info;\npid {{PREFIX}}/porter.pid;\n\
         events {{ worker_connections 64; }}\n\
         http {{\n  access_log off;\n\
           acme_issuer pebble {{\n    uri https://127.0.0.1:{pebble_port}/dir;\n    contact admin@porter.test;\n\
             ssl_trusted_certificate {{PREFIX}}/pebble-ca.pem;\n    state_path {state};\n    accept_terms_of_service;\n  }}\n\
           acme_shared_zone zone=ngx_acme_shared:1M;\n\
           server {{ listen 127.0.0.1:{{PORT}}; listen 127.0.0.1:{http_port}; location / {{ return 404; }} }}\n\
           server {{\n    listen 127.0.0.1:{tls_port} ssl;\n    server_name {names};\n    acme_certificate pebble;\n\
             ssl_certificate $acme_certificate;\n    ssl_certificate_key $acme_certificate_key;\n\
             location / {{ return 200 \"tls $ssl_server_name\\n\"; }}\n  }}\n}}\n"
    )
}

/// A prefix with Pebble's directory CA in it.
fn prefix_for(ca: &Ca) -> TempDir {
    let p = TempDir::new("acme");
    p.write("pebble-ca.pem", ca.pem());
    p
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn first_issuance_serves_pebble_s_certificate_for_both_names_with_private_state() {
    let ca = Arc::new(Ca::new());
    let (pebble_port, http_port, tls_port) = (free_port(), free_port(), free_port());
    let pebble = Pebble::start(&PebbleSetup::new(&ca, pebble_port, http_port));
    let prefix = prefix_for(&ca);
    let state = prefix.path().join("acme");
    let srv = Server::start_in(
        prefix,
        &conf(
            pebble_port,
            http_port,
            tls_port,
            "porter.test www.porter.test",
        ),
        &[],
    );
    let log = pebble.wait_issued(&srv);
    assert!(log.contains("issued by \"pebble\""), "{log}");
    assert!(
        log.contains("acme: account registered with \"pebble\""),
        "{log}"
    );
    let cfg = client_trusting(&pebble.root_pem());
    for name in ["porter.test", "www.porter.test"] {
        let mut c =
            Conn::open(tls_port, &cfg, name).expect("a certificate Pebble issued for the name");
        let r = c
            .request(
                &format!("GET / HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n\r\n"),
                false,
            )
            .unwrap();
        assert_eq!(r.text(), format!("tls {name}\n"));
    }
    assert!(
        Conn::open(tls_port, &cfg, "other.test").is_err(),
        "the name is checked"
    );
    assert_eq!(mode(&state), 0o700);
    let files: Vec<_> = std::fs::read_dir(&state)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 3, "{files:?}");
    assert!(state.join("account.key").exists());
    for f in &files {
        assert_eq!(mode(f), 0o600, "{}", f.display());
    }
    assert!(!log.contains("[error]"), "{log}");
}

#[test]
fn a_wildcard_name_is_refused_for_http_01_naming_the_line() {
    let c = conf(1, 2, 3, "porter.test *.porter.test").replace(
        "ssl_trusted_certificate {PREFIX}/pebble-ca.pem;",
        "ssl_verify off;",
    );
    let err = common::config_error(&c.replace("{PORT}", "4"));
    assert!(
        err.contains("\"acme_certificate\": wildcard name \"*.porter.test\" cannot be validated with the \"http-01\" challenge of issuer \"pebble\""),
        "{err}"
    );
    let line = c
        .lines()
        .position(|l| l.contains("acme_certificate pebble"))
        .unwrap()
        + 1;
    assert!(err.contains(&format!("porter.conf:{line}")), "{err}");
    let listed = c.replace(
        "acme_certificate pebble;",
        "acme_certificate pebble porter.test *.porter.test;",
    );
    let err = common::config_error(&listed.replace("{PORT}", "4"));
    assert!(err.contains("wildcard name \"*.porter.test\""), "{err}");
}

/// The files porter keeps for `names` from the issuer on `pebble_port`.
fn kept_files(
    state: &Path,
    pebble_port: u16,
    names: &[&str],
) -> (std::path::PathBuf, std::path::PathBuf) {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let id = porter::acme::certificate_id(
        "pebble",
        &format!("https://127.0.0.1:{pebble_port}/dir"),
        &names,
        porter::acme::KeyKind::EcdsaP256,
    );
    (
        state.join(format!("{id}.crt")),
        state.join(format!("{id}.key")),
    )
}

/// Puts a certificate for `names` whose renewal (two thirds into its
/// life) comes `due` seconds from now where porter keeps it; returns its
/// DER.
fn seed_short_lived(state: &Path, pebble_port: u16, names: &[&str], due: u64) -> Vec<u8> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    // Lifetime 3 * 60 s: renewal at not_before + 120 s.
    let not_before = now + due - 120;
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    let mut params =
        rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .unwrap();
    params.not_before = epoch + Duration::from_secs(not_before);
    params.not_after = epoch + Duration::from_secs(not_before + 180);
    let leaf = Ca::new().leaf_from(params);
    std::fs::create_dir_all(state).unwrap();
    let (crt, key) = kept_files(state, pebble_port, names);
    std::fs::write(crt, &leaf.cert_pem).unwrap();
    std::fs::write(key, &leaf.key_pem).unwrap();
    leaf.der.clone()
}

fn count(log: &str, needle: &str) -> usize {
    log.matches(needle).count()
}

#[test]
fn a_restart_serves_the_kept_certificate_and_a_short_lived_one_is_renewed_while_serving() {
    let ca = Arc::new(Ca::new());
    let (pebble_port, http_port, tls_port) = (free_port(), free_port(), free_port());
    let pebble = Pebble::start(&PebbleSetup::new(&ca, pebble_port, http_port));
    let state_dir = TempDir::new("acme-state");
    let state = state_dir.path().join("state");
    let c = conf_with_state(
        pebble_port,
        http_port,
        tls_port,
        "porter.test",
        state.to_str().unwrap(),
    );
    let first = {
        let srv = Server::start_in(prefix_for(&ca), &c, &[]);
        pebble.wait_issued(&srv);
        served(tls_port, "porter.test").unwrap()
    };
    // A restart: the kept certificate is served and nothing is ordered.
    {
        let srv = Server::start_in(prefix_for(&ca), &c, &[]);
        let log = srv.wait_log("logs/error.log", "renewal in", Duration::from_secs(30));
        assert!(log.contains("renewal in"), "{log}");
        assert_eq!(count(&log, "ordering a certificate"), 0, "{log}");
        assert_eq!(served(tls_port, "porter.test").unwrap(), first);
    }
    // A certificate kept near the end of its life: served at start, then
    // replaced by a renewal in the running server.
    let short = seed_short_lived(&state, pebble_port, &["porter.test"], 4);
    let srv = Server::start_in(prefix_for(&ca), &c, &[]);
    assert_eq!(served(tls_port, "porter.test").unwrap(), short);
    let log = pebble.wait_issued(&srv);
    assert!(log.contains("renewal in"), "{log}");
    let cfg = client_trusting(&pebble.root_pem());
    let conn = Conn::open(tls_port, &cfg, "porter.test").expect("the renewed certificate");
    let renewed = conn.peer_cert();
    assert_ne!(renewed, short);
    assert_ne!(renewed, first);
    // What is kept is the renewed certificate, still private.
    let (crt, key) = kept_files(&state, pebble_port, &["porter.test"]);
    assert!(std::fs::read_to_string(&crt)
        .unwrap()
        .contains("BEGIN CERTIFICATE"));
    assert_eq!((mode(&crt), mode(&key)), (0o600, 0o600));
    assert!(!log.contains("[error]"), "{log}");
}

#[test]
fn an_issuer_outage_during_renewal_keeps_the_old_certificate_serving_and_retries() {
    let ca = Arc::new(Ca::new());
    let (pebble_port, http_port, tls_port) = (free_port(), free_port(), free_port());
    let state_dir = TempDir::new("acme-state");
    let state = state_dir.path().join("state");
    let old = seed_short_lived(&state, pebble_port, &["porter.test"], 2);
    let c = conf_with_state(
        pebble_port,
        http_port,
        tls_port,
        "porter.test",
        state.to_str().unwrap(),
    );
    // The issuer is down when the renewal falls due.
    let srv = Server::start_in(prefix_for(&ca), &c, &[]);
    let log = srv.wait_log(
        "logs/error.log",
        "next attempt in 10 s",
        Duration::from_secs(30),
    );
    assert!(
        log.contains("[error]") && log.contains("next attempt in 10 s"),
        "{log}"
    );
    assert!(
        log.contains("acme: certificate for \"porter.test\" from \"pebble\": new account failed ("),
        "{log}"
    );
    assert_eq!(
        served(tls_port, "porter.test").unwrap(),
        old,
        "the old certificate keeps serving"
    );
    // The issuer is back: the next attempt renews.
    let pebble = Pebble::start(&PebbleSetup::new(&ca, pebble_port, http_port));
    pebble.wait_issued(&srv);
    let cfg = client_trusting(&pebble.root_pem());
    assert!(Conn::open(tls_port, &cfg, "porter.test").is_ok());
}

#[test]
fn without_a_certificate_handshakes_are_refused_and_plain_http_serves() {
    let ca = Ca::new();
    let (pebble_port, http_port, tls_port) = (free_port(), free_port(), free_port());
    let srv = Server::start_in(
        prefix_for(&ca),
        &conf(pebble_port, http_port, tls_port, "porter.test"),
        &[],
    );
    let log = srv.wait_log("logs/error.log", "next attempt in", Duration::from_secs(30));
    assert!(log.contains("next attempt in"), "{log}");
    assert_eq!(served(tls_port, "porter.test"), None);
    assert_eq!(common::get(http_port, "/").status, 404);
    assert_eq!(
        common::get(http_port, "/.well-known/acme-challenge/unknown").status,
        404
    );
}

#[test]
fn a_reload_in_the_middle_of_an_order_lets_it_finish_once() {
    let ca = Arc::new(Ca::new());
    let (pebble_port, http_port, tls_port) = (free_port(), free_port(), free_port());
    // Pebble's validation waits up to 5 s per name: the reload below
    // lands while the order is pending (unless both waits are 0 s).
    let pebble = Pebble::start(&PebbleSetup {
        env: vec![("PEBBLE_VA_SLEEPTIME", "6".into())],
        ..PebbleSetup::new(&ca, pebble_port, http_port)
    });
    let c = conf(
        pebble_port,
        http_port,
        tls_port,
        "porter.test www.porter.test",
    );
    let srv = Server::start_in(prefix_for(&ca), &c, &[]);
    let log = srv.wait_log(
        "logs/error.log",
        "ordering a certificate",
        Duration::from_secs(30),
    );
    assert!(log.contains("ordering a certificate"), "{log}");
    srv.signal(1);
    let log = srv.wait_log("logs/error.log", "reconfigured", Duration::from_secs(30));
    assert!(log.contains("reconfigured"), "{log}");
    let log = pebble.wait_issued(&srv);
    assert_eq!(count(&log, "ordering a certificate"), 1, "{log}");
    assert_eq!(count(&log, "issued by"), 1, "{log}");
    let cfg = client_trusting(&pebble.root_pem());
    assert!(wait_until(Duration::from_secs(5), || Conn::open(
        tls_port,
        &cfg,
        "www.porter.test"
    )
    .is_ok()));
    assert!(!log.contains("[error]"), "{log}");
}

#[test]
fn tls_alpn_01_is_answered_in_the_handshake_of_the_https_listener() {
    let ca = Arc::new(Ca::new());
    let (pebble_port, http_port, tls_port) = (free_port(), free_port(), free_port());
    // Pebble validates TLS-ALPN-01 on porter's TLS port; its HTTP-01
    // port has nothing behind it, so only the TLS-ALPN-01 answer can
    // prove the names.
    let pebble = Pebble::start(&PebbleSetup {
        tls_port: Some(tls_port),
        ..PebbleSetup::new(&ca, pebble_port, free_port())
    });
    let c = conf(
        pebble_port,
        http_port,
        tls_port,
        "porter.test www.porter.test",
    )
    .replace(
        "accept_terms_of_service;",
        "accept_terms_of_service;\n    challenge tls-alpn-01;",
    );
    let srv = Server::start_in(prefix_for(&ca), &c, &[]);
    let log = pebble.wait_issued(&srv);
    // Pebble validates each name from several perspectives.
    assert!(
        count(&log, "acme: tls-alpn-01 validation certificate sent") >= 2,
        "{log}"
    );
    let cfg = client_trusting(&pebble.root_pem());
    for name in ["porter.test", "www.porter.test"] {
        let mut c = Conn::open(tls_port, &cfg, name).expect("the issued certificate");
        let r = c
            .request(
                &format!("GET / HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n\r\n"),
                false,
            )
            .unwrap();
        assert_eq!(r.text(), format!("tls {name}\n"));
    }
    assert!(!log.contains("[error]"), "{log}");
    // A wildcard cannot be proven this way either.
    let wild = c
        .replace(
            "acme_certificate pebble;",
            "acme_certificate pebble *.porter.test;",
        )
        .replace(
            "ssl_trusted_certificate {PREFIX}/pebble-ca.pem;",
            "ssl_verify off;",
        );
    let err = common::config_error(&wild.replace("{PORT}", "4"));
    assert!(
        err.contains("wildcard name \"*.porter.test\" cannot be validated with the \"tls-alpn-01\" challenge"),
        "{err}"
    );
}

#[test]
fn an_rsa_certificate_is_issued_and_served() {
    let ca = Arc::new(Ca::new());
    let (pebble_port, http_port, tls_port) = (free_port(), free_port(), free_port());
    let pebble = Pebble::start(&PebbleSetup::new(&ca, pebble_port, http_port));
    let c = conf(pebble_port, http_port, tls_port, "porter.test").replace(
        "acme_certificate pebble;",
        "acme_certificate pebble key=rsa:2048;",
    );
    let srv = Server::start_in(prefix_for(&ca), &c, &[]);
    let log = pebble.wait_issued(&srv);
    let cfg = client_trusting(&pebble.root_pem());
    let conn = Conn::open(tls_port, &cfg, "porter.test").expect("the issued certificate");
    let der = conn.peer_cert();
    let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
    match cert.public_key().parsed().unwrap() {
        x509_parser::public_key::PublicKey::RSA(k) => assert_eq!(k.key_size(), 2048),
        k => panic!("not an RSA certificate: {k:?}"),
    }
    assert!(!log.contains("[error]"), "{log}");
}

/// The key identifier and MAC key (base64url) of the tests' external
/// account.
const EAB: (&str, &str) = (
    "kid-porter",
    "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W",
);

/// [`conf`] with `external_account_key LINE;` in the issuer.
fn conf_with_eab(
    pebble_port: u16,
    http_port: u16,
    tls_port: u16,
    names: &str,
    eab: &str,
) -> String {
    conf(pebble_port, http_port, tls_port, names).replace(
        "accept_terms_of_service;",
        &format!("accept_terms_of_service;\n    external_account_key {eab};"),
    )
}

#[test]
fn an_issuer_requiring_external_account_binding_issues_with_the_key_from_a_file() {
    let ca = Arc::new(Ca::new());
    let (pebble_port, http_port, tls_port) = (free_port(), free_port(), free_port());
    let mut setup = PebbleSetup::new(&ca, pebble_port, http_port);
    setup.eab = Some(EAB);
    let pebble = Pebble::start(&setup);
    let prefix = prefix_for(&ca);
    // nginx-acme's file form: the base64url key, white space around it.
    prefix.write("eab.key", format!("\n{}\n", EAB.1));
    let c = conf_with_eab(
        pebble_port,
        http_port,
        tls_port,
        "porter.test",
        &format!("{} eab.key", EAB.0),
    );
    let srv = Server::start_in(prefix, &c, &[]);
    let log = pebble.wait_issued(&srv);
    assert!(
        log.contains("acme: account registered with \"pebble\""),
        "{log}"
    );
    let cfg = client_trusting(&pebble.root_pem());
    assert!(Conn::open(tls_port, &cfg, "porter.test").is_ok());
    assert!(!log.contains("[error]"), "{log}");
}

#[test]
fn without_the_binding_or_with_a_wrong_mac_the_account_is_refused_and_nothing_is_issued() {
    let ca = Arc::new(Ca::new());
    for eab in [
        None,
        Some(format!(
            "{} data:{}",
            EAB.0, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
        )),
    ] {
        let (pebble_port, http_port, tls_port) = (free_port(), free_port(), free_port());
        let mut setup = PebbleSetup::new(&ca, pebble_port, http_port);
        setup.eab = Some(EAB);
        let pebble = Pebble::start(&setup);
        let c = match &eab {
            Some(line) => conf_with_eab(pebble_port, http_port, tls_port, "porter.test", line),
            None => conf(pebble_port, http_port, tls_port, "porter.test"),
        };
        let srv = Server::start_in(prefix_for(&ca), &c, &[]);
        let log = srv.wait_log("logs/error.log", "next attempt in", Duration::from_secs(30));
        assert!(
            log.contains("new account failed"),
            "{eab:?}: {log}\n{}",
            pebble.log()
        );
        assert!(!log.contains("issued by"), "{log}");
        assert_eq!(served(tls_port, "porter.test"), None);
    }
}

#[test]
fn a_kept_account_key_the_issuer_forgot_is_replaced_by_a_new_bound_account() {
    let ca = Arc::new(Ca::new());
    let (pebble_port, http_port, tls_port) = (free_port(), free_port(), free_port());
    let mut setup = PebbleSetup::new(&ca, pebble_port, http_port);
    setup.eab = Some(EAB);
    let line = format!("{} data:{}", EAB.0, EAB.1);
    let state_dir = TempDir::new("acme-state");
    let state = state_dir.path().join("state");
    let conf_for = |names: &str| {
        conf_with_state(
            pebble_port,
            http_port,
            tls_port,
            names,
            state.to_str().unwrap(),
        )
        .replace(
            "accept_terms_of_service;",
            &format!("accept_terms_of_service;\n    external_account_key {line};"),
        )
    };
    let first_key = {
        let pebble = Pebble::start(&setup);
        let srv = Server::start_in(prefix_for(&ca), &conf_for("porter.test"), &[]);
        pebble.wait_issued(&srv);
        std::fs::read(state.join("account.key")).unwrap()
    };
    // A new Pebble knows no account; another name needs a new order.
    let pebble = Pebble::start(&setup);
    let srv = Server::start_in(prefix_for(&ca), &conf_for("other.test"), &[]);
    let log = pebble.wait_issued(&srv);
    assert!(
        log.contains("acme: account registered with \"pebble\""),
        "{log}"
    );
    assert_ne!(std::fs::read(state.join("account.key")).unwrap(), first_key);
    assert_eq!(mode(&state.join("account.key")), 0o600);
    let cfg = client_trusting(&pebble.root_pem());
    assert!(Conn::open(tls_port, &cfg, "other.test").is_ok());
}

#[test]
fn a_bad_external_account_key_is_refused_naming_the_line() {
    let issuer = |line: &str| {
        format!(
            "events {{}}\nhttp {{\n  acme_issuer x {{\n    uri https://127.0.0.1:1/dir;\n    {line}\n  }}\n}}\n"
        )
    };
    let e = common::config_error(&issuer("external_account_key kid data:not+base64url;"));
    assert!(e.contains("invalid base64url encoded value"), "{e}");
    assert!(e.contains("porter.conf:5"), "{e}");
    let e = common::config_error(&issuer("external_account_key kid {PREFIX}/missing.key;"));
    assert!(
        e.contains("missing.key\" failed (2: No such file or directory)"),
        "{e}"
    );
    let e = common::config_error(&issuer("external_account_key kid;"));
    assert!(
        e.contains("invalid number of arguments in \"external_account_key\""),
        "{e}"
    );
}
