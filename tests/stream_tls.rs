//! TLS in the `stream { }` block (src/stream/tls.rs, wire.rs): `listen
//! ... ssl` terminating TLS before a plain upstream (the relay both ways,
//! with the client's `close_notify` as its half-close), `$ssl_*` in
//! `return` and in the stream `access_log`, `ssl_verify_client`, and
//! `proxy_ssl` to a TLS upstream with `proxy_ssl_verify` (the right name
//! passes; a wrong name or an unknown CA ends the session with NGINX's
//! error-log line) — each beside Debian's nginx on the same
//! configuration, its stream module loaded, where it is installed.

use crate::common::tls::{self as t, Alg, Ca, ClientOpts};
use crate::common::*;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Debian's stream module, loaded by nginx (porter has it built in).
const STREAM_MODULE: &str = "/work/nginx-mods/usr/lib/nginx/modules/ngx_stream_module.so";

/// A whole config around a `stream` body.
fn conf(body: &str) -> String {
    format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/run.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\nevents {{}}\n\
         stream {{\n{body}\n}}\n"
    )
}

/// Debian's nginx on a stream config, stopped by PID on drop.
struct Beside {
    child: Child,
    port: u16,
    prefix: TempDir,
}

impl Beside {
    /// nginx on `body` (`{PORT}`, `{PREFIX}` substituted); `None` when
    /// nginx or its stream module is not installed.
    fn start(body: &str) -> Option<Beside> {
        if !Path::new(NGINX).exists() || !Path::new(STREAM_MODULE).exists() {
            eprintln!("nginx or its stream module not installed: porter alone");
            return None;
        }
        let prefix = TempDir::new("nginx-stream-tls");
        std::fs::create_dir_all(prefix.path().join("logs")).unwrap();
        let port = free_port();
        let text = format!(
            "load_module {STREAM_MODULE};\n{}",
            config_text(&conf(body), port, prefix.path())
        );
        let path = prefix.write("nginx.conf", text);
        let child = Command::new(NGINX)
            .arg("-p")
            .arg(prefix.path())
            .arg("-e")
            .arg(prefix.path().join("logs/error.log"))
            .arg("-c")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let n = Beside {
            child,
            port,
            prefix,
        };
        let log = || std::fs::read_to_string(n.prefix.path().join("logs/error.log"));
        assert!(
            wait_port(port, Duration::from_secs(10)),
            "nginx did not start: {}",
            log().unwrap_or_default()
        );
        Some(n)
    }
}

impl Drop for Beside {
    fn drop(&mut self) {
        stop_child(&mut self.child, 15);
    }
}

/// One implementation under test: its `{PORT}`, the ports `{P1}`, `{P2}`,
/// … became, and its prefix (for its logs).
struct Target {
    name: &'static str,
    port: u16,
    ports: Vec<u16>,
    dir: PathBuf,
}

impl Target {
    /// Polls `rel` in the prefix until it contains `needle`.
    fn wait_log(&self, rel: &str, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let s = std::fs::read_to_string(self.dir.join(rel)).unwrap_or_default();
            if s.contains(needle) || Instant::now() >= deadline {
                return s;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `body` with `{P1}`…`{Pn}` replaced by free ports.
fn with_ports(body: &str, n: usize) -> (String, Vec<u16>) {
    let ports: Vec<u16> = (0..n).map(|_| free_port()).collect();
    let mut b = body.to_string();
    for (i, p) in ports.iter().enumerate() {
        b = b.replace(&format!("{{P{}}}", i + 1), &p.to_string());
    }
    (b, ports)
}

/// porter, and nginx when installed, on `body` with `n` extra ports
/// each; the porter `Server` and nginx are kept alive by the caller.
fn both(body: &str, n: usize) -> (Server, Option<Beside>, Vec<Target>) {
    let (pb, pp) = with_ports(body, n);
    let porter = Server::start(&conf(&pb));
    let (nb, np) = with_ports(body, n);
    let nginx = Beside::start(&nb);
    let mut targets = vec![Target {
        name: "porter",
        port: porter.port,
        ports: pp,
        dir: porter.prefix.path().to_path_buf(),
    }];
    if let Some(n) = &nginx {
        targets.push(Target {
            name: "nginx",
            port: n.port,
            ports: np,
            dir: n.prefix.path().to_path_buf(),
        });
    }
    (porter, nginx, targets)
}

/// A CA, a server certificate for `example.com`, and both written to a
/// new directory (`ca.crt`, `srv.crt`, `srv.key`).
fn certs() -> (Ca, TempDir) {
    let ca = Ca::new();
    let dir = TempDir::new("stream-tls-certs");
    dir.write("ca.crt", ca.pem());
    ca.leaf(&["example.com"], Alg::Ecdsa)
        .write(dir.path(), "srv");
    (ca, dir)
}

/// The `ssl_certificate` lines of a server using `certs()`' pair.
fn pair(dir: &Path) -> String {
    let d = dir.display();
    format!("ssl_certificate {d}/srv.crt; ssl_certificate_key {d}/srv.key;")
}

/// A TLS session to `port` with SNI `sni`: sends `data` (then
/// `close_notify` when `close`), and reads to the end (the server's
/// `close_notify`, a bare close or an error); `None` when the handshake
/// fails.
fn tls_exchange(
    port: u16,
    cfg: &Arc<rustls::ClientConfig>,
    sni: &str,
    data: &[u8],
    close: bool,
) -> Option<String> {
    let mut c = t::Conn::open(port, cfg, sni)
        .map_err(|e| eprintln!("handshake with {port}: {e}"))
        .ok()?;
    c.tls.write_all(data).ok()?;
    if close {
        c.tls.conn.send_close_notify();
    }
    c.tls.flush().map_err(|e| eprintln!("flush: {e}")).ok()?;
    let mut out = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        match c.tls.read(&mut buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// A plain TCP session to `port` that sends nothing and reads to the end.
fn plain_read(port: u16) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// A backend that reads each connection to its end, then answers
/// `echo:` and what it read, and closes.
fn echo_to_eof() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { return };
            std::thread::spawn(move || {
                let mut got = Vec::new();
                let _ = c.read_to_end(&mut got);
                let _ = c.write_all(b"echo:");
                let _ = c.write_all(&got);
                let _ = c.shutdown(Shutdown::Write);
            });
        }
    });
    port
}

#[test]
fn tls_is_terminated_and_relayed_to_a_plain_upstream_both_ways() {
    let (ca, dir) = certs();
    let b = echo_to_eof();
    let body = format!(
        "server {{ listen 127.0.0.1:{{PORT}} ssl; {}\n\
         proxy_pass 127.0.0.1:{b}; proxy_half_close on; }}",
        pair(dir.path())
    );
    let (_p, _n, targets) = both(&body, 0);
    let cfg = t::client(&ca, ClientOpts::default());
    let big: Vec<u8> = (0..200_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    for tg in &targets {
        let got = tls_exchange(tg.port, &cfg, "example.com", b"hello", true);
        assert_eq!(got.as_deref(), Some("echo:hello"), "{}", tg.name);
        // More than the relay's buffers hold, through TLS records both ways.
        let got = tls_exchange(tg.port, &cfg, "example.com", &big, true).unwrap();
        assert_eq!(got.len(), big.len() + 5, "{}", tg.name);
        assert!(got.as_bytes()[5..] == big[..], "{}", tg.name);
    }
}

#[test]
fn ssl_variables_in_return_and_the_stream_access_log() {
    let (ca, dir) = certs();
    let body = format!(
        "log_format tls \"$status $ssl_protocol $ssl_server_name $ssl_session_reused\";\n\
         ssl_protocols TLSv1.2 TLSv1.3; # 1.22's default lacks TLSv1.3 (1.23.4 has it)\n\
         server {{ listen 127.0.0.1:{{PORT}} ssl; {}\n\
         access_log {{PREFIX}}/logs/tls.log tls;\n\
         return \"$ssl_protocol $ssl_cipher $ssl_server_name $ssl_session_reused \
         $ssl_client_verify\"; }}",
        pair(dir.path())
    );
    let (_p, _n, targets) = both(&body, 0);
    let mut seen = Vec::new();
    for versions in [vec![&rustls::version::TLS13], vec![&rustls::version::TLS12]] {
        let v12 = versions[0] == &rustls::version::TLS12;
        let cfg = t::client(
            &ca,
            ClientOpts {
                versions,
                schemes: None,
            },
        );
        let mut answers = Vec::new();
        for tg in &targets {
            let got = tls_exchange(tg.port, &cfg, "example.com", b"", false);
            let got = got.unwrap_or_else(|| panic!("{} v12 {v12}", tg.name));
            let want = if v12 { "TLSv1.2 " } else { "TLSv1.3 " };
            assert!(got.starts_with(want), "{}: {got}", tg.name);
            assert!(got.ends_with(" example.com . NONE"), "{}: {got}", tg.name);
            let line = format!("200 {}example.com .", want);
            let log = tg.wait_log("logs/tls.log", &line);
            assert!(log.contains(&line), "{}: {log}", tg.name);
            answers.push(got);
        }
        seen.push(answers);
    }
    // The same facts from both (suite names as OpenSSL prints them).
    for answers in seen {
        assert!(answers.windows(2).all(|w| w[0] == w[1]), "{answers:?}");
    }
}

#[test]
fn client_certificates_are_verified_before_the_session_goes_on() {
    let (ca, dir) = certs();
    let d = dir.path().display();
    let body = format!(
        "log_format st $status;\n\
         server {{ listen 127.0.0.1:{{PORT}} ssl; {}\n\
         ssl_verify_client on; ssl_client_certificate {d}/ca.crt;\n\
         access_log {{PREFIX}}/logs/st.log st;\n\
         return \"$ssl_client_verify $ssl_client_s_dn\"; }}\n\
         server {{ listen 127.0.0.1:{{P1}} ssl; {}\n\
         ssl_verify_client optional; ssl_client_certificate {d}/ca.crt;\n\
         return \"$ssl_client_verify\"; }}",
        pair(dir.path()),
        pair(dir.path())
    );
    let (_p, _n, targets) = both(&body, 1);
    let good = t::client_with_cert(&ca, &ca.leaf(&["client.example"], Alg::Ecdsa));
    let other = Ca::new();
    let bad = t::client_with_cert(&ca, &other.leaf(&["intruder.example"], Alg::Ecdsa));
    let none = t::client(&ca, ClientOpts::default());
    let mut answers = Vec::new();
    for tg in &targets {
        let got = tls_exchange(tg.port, &good, "example.com", b"", false).unwrap();
        assert!(got.starts_with("SUCCESS "), "{}: {got}", tg.name);
        answers.push(got);
        let got = tls_exchange(tg.port, &none, "example.com", b"", false);
        assert_eq!(got.as_deref().unwrap_or(""), "", "{}", tg.name);
        let want = "client sent no required SSL certificate while SSL handshaking";
        let log = tg.wait_log("logs/error.log", want);
        assert!(log.contains(want), "{}: {log}", tg.name);
        let got = tls_exchange(tg.ports[0], &bad, "example.com", b"", false);
        assert_eq!(got.as_deref().unwrap_or(""), "", "{}", tg.name);
        let want = "client SSL certificate verify error: (";
        let log = tg.wait_log("logs/error.log", want);
        assert!(log.contains(want), "{}: {log}", tg.name);
        let st = tg.wait_log("logs/st.log", "500");
        assert!(
            st.contains("200\n") && st.contains("500\n"),
            "{}: {st}",
            tg.name
        );
    }
    assert!(answers.windows(2).all(|w| w[0] == w[1]), "{answers:?}");
}

#[test]
fn proxy_ssl_verify_passes_the_right_name_and_ends_the_session_on_a_wrong_one() {
    let (_ca, dir) = certs();
    let other = Ca::new();
    dir.write("other.crt", other.pem());
    let d = dir.path().display();
    let front = |port: &str, name: &str, ca: &str| {
        format!(
            "server {{ listen 127.0.0.1:{port}; proxy_pass 127.0.0.1:{{P1}};\n\
             proxy_ssl on; proxy_ssl_verify on; proxy_ssl_server_name on;\n\
             proxy_ssl_session_reuse off;\n\
             proxy_ssl_trusted_certificate {d}/{ca}; proxy_ssl_name {name}; }}\n"
        )
    };
    let body = format!(
        "server {{ listen 127.0.0.1:{{P1}} ssl; {}\n\
         return \"sni=$ssl_server_name\"; }}\n{}{}{}",
        pair(dir.path()),
        front("{PORT}", "example.com", "ca.crt"),
        front("{P2}", "wrong.example", "ca.crt"),
        front("{P3}", "example.com", "other.crt"),
    );
    // No session reuse: NGINX keeps one saved session per upstream peer,
    // so a server trusting another CA would resume the session another
    // server verified, without a check (porter's sessions are per
    // client configuration).
    let (_p, _n, targets) = both(&body, 3);
    for tg in &targets {
        assert_eq!(plain_read(tg.port), "sni=example.com", "{}", tg.name);
        assert_eq!(plain_read(tg.ports[1]), "", "{}", tg.name);
        let want = "upstream SSL certificate does not match \"wrong.example\" \
                    while SSL handshaking to upstream";
        let log = tg.wait_log("logs/error.log", want);
        assert!(log.contains(want), "{}: {log}", tg.name);
        // The other CA has the same name: OpenSSL and webpki both find it
        // as the issuer and refuse the signature.
        assert_eq!(plain_read(tg.ports[2]), "", "{}", tg.name);
        let want = "upstream SSL certificate verify error: \
                    (7:certificate signature failure) \
                    while SSL handshaking to upstream";
        let log = tg.wait_log("logs/error.log", want);
        assert!(log.contains(want), "{}: {log}", tg.name);
    }
}

#[test]
fn proxy_timeout_ends_an_idle_tls_session() {
    let (ca, dir) = certs();
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let b = silent.local_addr().unwrap().port();
    let body = format!(
        "server {{ listen 127.0.0.1:{{PORT}} ssl; {}\n\
         proxy_pass 127.0.0.1:{b}; proxy_timeout 1s; }}",
        pair(dir.path())
    );
    let porter = Server::start(&conf(&body));
    let cfg = t::client(&ca, ClientOpts::default());
    let began = Instant::now();
    let got = tls_exchange(porter.port, &cfg, "example.com", b"x", false);
    let took = began.elapsed();
    assert_eq!(got.as_deref(), Some(""));
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "{took:?}"
    );
}

#[test]
fn stream_tls_config_errors_name_file_and_line() {
    let dir = TempDir::new("stream-tls-conf");
    let bad = [
        (
            "events {}\nstream {\nserver { listen 127.0.0.1:1 ssl; return x; }\n}\n",
            "no \"ssl_certificate\" is defined for the \"listen ... ssl\" directive",
        ),
        (
            "events {}\nstream {\nserver { listen 127.0.0.1:1; proxy_ssl maybe; \
             proxy_pass 127.0.0.1:2; }\n}\n",
            "invalid value \"maybe\"",
        ),
        (
            "events {}\nhttp {\nserver { proxy_ssl on; }\n}\n",
            "\"proxy_ssl\" directive is not allowed here",
        ),
    ];
    for (text, want) in bad {
        let path = dir.write("bad.conf", text);
        let out = run(&["-t", "-c", path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(want) && err.contains("bad.conf:"),
            "{text}: {err}"
        );
    }
}
