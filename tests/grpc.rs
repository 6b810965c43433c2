//! `grpc_pass` against the real binary on loopback: a gRPC server and
//! client written with Debian's `python3-grpcio` (generic handlers and raw
//! bytes, so no generated code: tests/common/grpc_server.py,
//! grpc_client.py), porter between them speaking h2c or TLS with ALPN to
//! the client and HTTP/2 to the upstream, and Debian's nginx 1.22 beside
//! it on the same calls where the test compares status codes, results,
//! trailers and error-log lines. The package is required: these tests
//! fail, not skip, without it (`.ci/run` installs it).

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{one_worker_conf, support, Nginx, Server, TempDir};

const PYTHON: &str = "/usr/bin/python3";

/// The gRPC server, stopped by PID on drop.
struct Upstream {
    child: Child,
    /// `127.0.0.1:PORT` or `unix:/path`.
    addr: String,
}

impl Upstream {
    /// `tls`: nothing, or the certificate and key, and the CA a client
    /// certificate must be signed by when one is required.
    fn start(addr: String, tls: &[&Path]) -> Upstream {
        let mut cmd = Command::new(PYTHON);
        cmd.arg(support("grpc_server.py")).arg(&addr);
        if !tls.is_empty() {
            cmd.arg("--tls").args(tls);
        }
        let mut child = cmd.stdout(Stdio::piped()).spawn().expect("python3 runs");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(
            line.trim(),
            "ready",
            "the gRPC server did not start: is python3-grpcio installed?"
        );
        Upstream { child, addr }
    }

    fn tcp() -> Upstream {
        Upstream::start(format!("127.0.0.1:{}", common::free_port()), &[])
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a call printed: `code`, `details`, `result`, and the `trailer`
/// and `initial` metadata lines.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Call {
    code: String,
    details: String,
    result: String,
    trailers: Vec<String>,
}

fn call_with(target: &str, args: &[&str]) -> Call {
    // Bounded whatever the server does: grpcio's client-streaming call can
    // outlive its own deadline when the server answers before the stream
    // is sent (seen against nginx 1.22's 413); coreutils' timeout kills it,
    // and the call then has no code.
    let out = Command::new("timeout")
        .args(["-k", "5", "60", PYTHON])
        .arg(support("grpc_client.py"))
        .arg(target)
        .args(args)
        .stderr(Stdio::null())
        .output()
        .expect("python3 runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let field = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(k).and_then(|r| r.strip_prefix(' ')))
            .unwrap_or_default()
            .to_string()
    };
    Call {
        code: field("code"),
        details: field("details"),
        result: field("result"),
        trailers: text
            .lines()
            .filter(|l| l.starts_with("trailer "))
            .map(str::to_string)
            .collect(),
    }
}

fn call(port: u16, args: &[&str]) -> Call {
    call_with(&format!("127.0.0.1:{port}"), args)
}

/// A server block on `{PORT}` speaking h2c, with `body` in `location /`.
fn grpc_server(extra: &str, body: &str) -> String {
    format!(
        "  client_max_body_size 64m;\n{extra}\n  server {{\n    listen 127.0.0.1:{{PORT}};\n    http2 on;\n    \
         location / {{\n{body}\n    }}\n  }}"
    )
}

fn porter(http_body: &str) -> Server {
    Server::start(&one_worker_conf(http_body))
}

/// nginx 1.22 has `listen ... http2`, not `http2 on`.
fn nginx(http_body: &str) -> Option<Nginx> {
    let n = Nginx::start(
        &http_body
            .replace("\n    http2 on;", "")
            .replace("listen 127.0.0.1:{PORT}", "listen 127.0.0.1:{PORT} http2"),
    );
    if n.is_none() {
        eprintln!("nginx comparison skipped: {} is absent", common::NGINX);
    }
    n
}

/// The error-log lines at `[error]`, without time, pid and connection.
fn errors(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| l.split_once("[error] "))
        .map(|(_, rest)| common::log_message(rest).to_string())
        .collect()
}

const CALLS: &[&[&str]] = &[
    &["unary", "10"],
    &["unary", "0"],
    &["unary", "5", "--md", "x-fail=7"],
    &["unary", "5", "--md", "x-fail=13"],
    &["server", "3", "1000"],
    &["server", "0", "10"],
    &["client", "5", "100"],
    &["client", "0", "100"],
    &["bidi", "4", "50"],
];

#[test]
fn unary_and_streams_both_ways_pass_with_their_trailers_as_through_nginx() {
    let up = Upstream::tcp();
    let conf = grpc_server("", &format!("      grpc_pass grpc://{};", up.addr));
    let p = porter(&conf);
    let n = nginx(&conf);
    for args in CALLS {
        let got = call(p.port, args);
        assert_ne!(got.code, "", "{args:?}: no answer");
        if args.contains(&"--md") {
            assert_ne!(got.code, "OK", "{args:?}");
            assert_eq!(got.details, "failed on purpose", "{args:?}");
            assert!(got
                .trailers
                .contains(&"trailer x-trailer unary".to_string()));
        } else {
            assert_eq!(got.code, "OK", "{args:?}: {got:?}");
        }
        if let Some(n) = &n {
            assert_eq!(got, call(n.port, args), "{args:?}: porter and nginx differ");
        }
    }
    // Custom trailing metadata and the result of each kind of call.
    let u = call(p.port, &["unary", "10"]);
    assert_eq!(u.result, "true");
    assert_eq!(
        u.trailers,
        ["trailer x-len 10", "trailer x-trailer unary"],
        "{u:?}"
    );
    assert_eq!(
        call(p.port, &["server", "3", "1000"]).result,
        "[3, 3000, true]"
    );
    assert_eq!(call(p.port, &["client", "5", "100"]).result, "500");
    assert_eq!(call(p.port, &["bidi", "4", "50"]).result, "[4, true]");
}

#[test]
fn large_messages_pass_whole_both_ways() {
    let up = Upstream::tcp();
    let conf = grpc_server("", &format!("      grpc_pass grpc://{};", up.addr));
    let p = porter(&conf);
    let n = nginx(&conf);
    let calls: &[&[&str]] = &[
        &["unary", "8000000"],
        &["server", "100", "200000"],
        &["client", "50", "300000"],
        &["bidi", "30", "500000"],
    ];
    for args in calls {
        let got = call(p.port, args);
        assert_eq!(got.code, "OK", "{args:?}: {got:?}");
        assert!(!got.result.contains("false"), "{args:?}: {got:?}");
        if let Some(n) = &n {
            assert_eq!(got, call(n.port, args), "{args:?}");
        }
    }
    assert_eq!(call(p.port, &["client", "50", "300000"]).result, "15000000");
}

#[test]
fn deadline_exceeded_reaches_the_client_and_a_slow_head_times_out_as_504() {
    let up = Upstream::tcp();
    let conf = grpc_server(
        "",
        &format!(
            "      grpc_pass grpc://{};\n      grpc_read_timeout 1s;",
            up.addr
        ),
    );
    let p = porter(&conf);
    let n = nginx(&conf);
    let late = ["unary", "5", "--md", "x-sleep=3", "--timeout", "0.5"];
    assert_eq!(call(p.port, &late).code, "DEADLINE_EXCEEDED");
    // The upstream is slower than grpc_read_timeout: 504, which gRPC
    // clients read as UNAVAILABLE.
    let slow = ["unary", "5", "--md", "x-sleep=2.5", "--timeout", "10"];
    let got = call(p.port, &slow);
    assert_eq!(got.code, "UNAVAILABLE", "{got:?}");
    assert!(got.details.contains("504"), "{got:?}");
    let line = "upstream timed out (110: Connection timed out) while reading response header from upstream";
    assert!(p
        .wait_log("logs/error.log", line, Duration::from_secs(5))
        .contains(line));
    if let Some(n) = &n {
        assert_eq!(call(n.port, &late).code, "DEADLINE_EXCEEDED");
        assert_eq!(call(n.port, &slow), got);
    }
    // The server goes on after the cancelled calls.
    assert_eq!(call(p.port, &["unary", "10"]).code, "OK");
}

#[test]
fn upstream_down_is_unavailable_with_nginx_status_and_log_line() {
    let dead = common::free_port();
    let conf = grpc_server("", &format!("      grpc_pass grpc://127.0.0.1:{dead};"));
    let p = porter(&conf);
    let got = call(p.port, &["unary", "5"]);
    assert_eq!(got.code, "UNAVAILABLE", "{got:?}");
    assert_eq!(got.details, "Received http2 header with status: 502");
    let line = "connect() failed (111: Connection refused) while connecting to upstream";
    let log = p.wait_log("logs/error.log", line, Duration::from_secs(5));
    if let Some(n) = nginx(&conf) {
        assert_eq!(call(n.port, &["unary", "5"]), got);
        std::thread::sleep(Duration::from_millis(200));
        let strip = |v: Vec<String>| {
            v.into_iter()
                .map(|l| l[..l.find(", host:").unwrap_or(l.len())].to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(strip(errors(&log)), strip(errors(&n.error_log())));
    }
    assert!(
        log.contains(&format!("upstream: \"grpc://127.0.0.1:{dead}\"")),
        "{log}"
    );
}

#[test]
fn a_body_over_client_max_body_size_is_413_as_nginx() {
    let up = Upstream::tcp();
    let conf = grpc_server("", &format!("      grpc_pass grpc://{};", up.addr))
        .replace("client_max_body_size 64m;", "client_max_body_size 1m;");
    let p = porter(&conf);
    let n = nginx(&conf);
    for args in [&["unary", "2000000"][..], &["client", "30", "100000"]] {
        let got = call(p.port, args);
        assert_eq!(got.code, "UNKNOWN", "{args:?}: {got:?}");
        assert!(got.details.contains("413"), "{got:?}");
        if let Some(n) = &n {
            let theirs = call(n.port, args);
            if theirs.code.is_empty() {
                // grpcio's client hung on nginx's early 413 (killed after
                // 60 s): nothing of nginx's to compare with this time.
                eprintln!("{args:?}: no answer through nginx within 60 s");
            } else {
                assert_eq!(theirs, got, "{args:?}");
            }
        }
    }
    let line = "client intended to send too large chunked body";
    assert!(p
        .wait_log("logs/error.log", line, Duration::from_secs(5))
        .contains(line));
}

#[test]
fn grpcs_to_a_tls_upstream_and_tls_with_alpn_to_the_client() {
    let dir = TempDir::new("grpcs");
    let ca = common::tls::Ca::new();
    let (crt, key) = ca
        .leaf(&["localhost", "127.0.0.1"], common::tls::Alg::Ecdsa)
        .write(dir.path(), "leaf");
    let ca_file = dir.write("ca.pem", ca.pem());
    let up = Upstream::start(format!("127.0.0.1:{}", common::free_port()), &[&crt, &key]);
    let body = format!(
        "      grpc_pass grpcs://{};\n      grpc_ssl_verify on;\n      \
         grpc_ssl_trusted_certificate {};\n      grpc_ssl_name localhost;\n      \
         grpc_ssl_server_name on;",
        up.addr,
        ca_file.display()
    );
    let conf = grpc_server("", &body).replace(
        "listen 127.0.0.1:{PORT};",
        &format!(
            "listen 127.0.0.1:{{PORT}} ssl;\n    ssl_certificate {};\n    ssl_certificate_key {};",
            crt.display(),
            key.display()
        ),
    );
    let p = porter(&conf);
    let n = nginx(&conf);
    let tls = ["--tls", ca_file.to_str().unwrap(), "localhost"];
    for args in [
        &["unary", "1000"][..],
        &["server", "5", "70000"],
        &["bidi", "5", "1000"],
    ] {
        let args: Vec<&str> = args.iter().chain(tls.iter()).copied().collect();
        let got = call(p.port, &args);
        assert_eq!(got.code, "OK", "{args:?}: {got:?}");
        if let Some(n) = &n {
            assert_eq!(call(n.port, &args), got, "{args:?}");
        }
    }
    // A certificate for another name fails the handshake: 502.
    let conf = conf.replace("grpc_ssl_name localhost;", "grpc_ssl_name other.example;");
    let p = porter(&conf);
    let got = call(
        p.port,
        &[
            "unary",
            "10",
            "--tls",
            ca_file.to_str().unwrap(),
            "localhost",
        ],
    );
    assert_eq!(got.code, "UNAVAILABLE", "{got:?}");
    let line = "upstream SSL certificate does not match \"other.example\"";
    assert!(p
        .wait_log("logs/error.log", line, Duration::from_secs(5))
        .contains(line));
}

#[test]
fn unix_socket_upstream_group_with_keepalive_and_next_upstream() {
    let dir = TempDir::new("grpcunix");
    let sock = dir.path().join("g.sock");
    let up = Upstream::start(format!("unix:{}", sock.display()), &[]);
    // porter's workers run as nobody.
    common::set_mode(dir.path(), 0o755);
    common::set_mode(&sock, 0o777);
    let dead = common::free_port();
    let extra = format!(
        "  upstream backend {{\n    server 127.0.0.1:{dead};\n    server {};\n    keepalive 4;\n  }}",
        up.addr
    );
    let conf = grpc_server(
        &extra,
        "      grpc_pass grpc://backend;\n      grpc_set_header x-from porter;",
    );
    let p = porter(&conf);
    for _ in 0..6 {
        let got = call(p.port, &["unary", "100"]);
        assert_eq!(got.code, "OK", "{got:?}: {}", p.read("logs/error.log"));
        assert_eq!(got.result, "true");
    }
    assert_eq!(call(p.port, &["bidi", "3", "10"]).result, "[3, true]");
    let log = p.read("logs/error.log");
    assert!(
        log.contains("connect() failed (111: Connection refused) while connecting to upstream"),
        "{log}"
    );
}

/// Established TCP connections to `port` (`ss`, iproute2).
fn connections_to(port: u16) -> usize {
    let out = Command::new("ss")
        .args(["-tnH", "state", "established"])
        .arg(format!("dst 127.0.0.1:{port}"))
        .output()
        .expect("ss runs (iproute2)");
    String::from_utf8_lossy(&out.stdout).lines().count()
}

#[test]
fn keepalive_keeps_one_http2_connection_for_calls_in_turn() {
    let up = Upstream::tcp();
    let port: u16 = up.addr.rsplit(':').next().unwrap().parse().unwrap();
    let kept = format!(
        "  upstream kept {{\n    server {};\n    keepalive 4;\n  }}",
        up.addr
    );
    let p = porter(&grpc_server(&kept, "      grpc_pass grpc://kept;"));
    for _ in 0..5 {
        assert_eq!(call(p.port, &["unary", "10"]).code, "OK");
    }
    assert_eq!(call(p.port, &["server", "2", "10"]).code, "OK");
    assert_eq!(
        connections_to(port),
        1,
        "one pooled connection carried the calls"
    );
    // Without `keepalive`, a connection ends with its call.
    let p2 = porter(&grpc_server(
        "",
        &format!("      grpc_pass grpc://{};", up.addr),
    ));
    for _ in 0..3 {
        assert_eq!(call(p2.port, &["unary", "10"]).code, "OK");
    }
    drop(p);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(connections_to(port), 0);
}

#[test]
fn a_client_that_does_not_read_holds_the_upstream_back_and_memory_stays_flat() {
    let up = Upstream::tcp();
    let conf = grpc_server("", &format!("      grpc_pass grpc://{};", up.addr));
    let p = porter(&conf);
    assert_eq!(call(p.port, &["unary", "10"]).code, "OK");
    // Workers are threads of the one process.
    let worker = p.child.id();
    let before = common::rss_kib(worker);
    // 300 MB on offer; the client reads one message and then nothing.
    let dir = TempDir::new("grpcstall");
    let progress = dir.path().join("progress");
    let md = format!("x-progress={}", progress.display());
    let mut stall = Command::new(PYTHON)
        .arg(support("grpc_client.py"))
        .arg(format!("127.0.0.1:{}", p.port))
        .args([
            "stall",
            "3000",
            "100000",
            "4",
            "--timeout",
            "30",
            "--md",
            &md,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(stall.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "stalled");
    let start = Instant::now();
    let mut peak = 0;
    while start.elapsed() < Duration::from_secs(3) {
        peak = peak.max(common::rss_kib(worker));
        std::thread::sleep(Duration::from_millis(100));
    }
    let sent: u64 = std::fs::read_to_string(&progress)
        .unwrap_or_default()
        .trim()
        .parse()
        .unwrap_or(0);
    let _ = stall.wait();
    eprintln!("RSS {before} KiB -> peak {peak} KiB; the upstream sent {sent} of 3000 messages");
    assert!(
        peak < before + 20 * 1024,
        "porter's RSS grew from {before} KiB to {peak} KiB while its client did not read"
    );
    // Held back: what the upstream got out is what the windows and
    // buffers on the way hold (a few MB), not the 300 MB on offer.
    assert!(
        sent > 0 && sent < 200,
        "the upstream sent {sent} messages of 100 KB"
    );
    // The stream was cancelled; the next calls go through.
    assert_eq!(call(p.port, &["server", "3", "10"]).result, "[3, 30, true]");
}

#[test]
fn grpc_pass_config_errors() {
    let err = common::config_error(&one_worker_conf(
        "  server { listen 127.0.0.1:1; location / { grpc_pass http://127.0.0.1:1; } }",
    ));
    assert!(
        err.contains("invalid URL prefix in \"http://127.0.0.1:1\""),
        "{err}"
    );
    let err = common::config_error(&one_worker_conf(
        "  server { listen 127.0.0.1:1; location / { grpc_pass 127.0.0.1:1; proxy_pass http://127.0.0.1:2; } }",
    ));
    assert!(err.contains("is duplicate"), "{err}");
}

/// A POST over h2c with prior knowledge (curl): the status, the
/// response's head fields and its body.
fn h2c_post(port: u16, path: &str) -> (String, String) {
    let out = Command::new("curl")
        .args([
            "-s",
            "-m",
            "20",
            "--http2-prior-knowledge",
            "-D",
            "-",
            "-X",
            "POST",
        ])
        .args(["-H", "content-type: application/grpc", "--data-binary", "x"])
        .arg(format!("http://127.0.0.1:{port}{path}"))
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let head: Vec<&str> = head
        .lines()
        .filter(|l| !l.starts_with("date:") && !l.starts_with("server:"))
        .collect();
    (head.join("\n"), body.to_string())
}

#[test]
fn set_hide_pass_header_and_intercept_errors_as_nginx() {
    // The upstream: porter itself over h2c, answering with what it got.
    let back = porter(
        "  server {\n    listen 127.0.0.1:{PORT};\n    http2 on;\n    \
         location / {\n      add_header x-secret s;\n      add_header x-accel-charset c;\n      \
         return 200 \"host=$host from=$http_x_from te=$http_te\\n\";\n    }\n    \
         location /fail { return 503; }\n  }",
    );
    let body = format!(
        "      grpc_pass grpc://127.0.0.1:{};\n      grpc_set_header x-from front;\n      \
         grpc_hide_header x-secret;\n      grpc_pass_header x-accel-charset;\n    }}\n    \
         location /fail {{\n      grpc_pass grpc://127.0.0.1:{};\n      grpc_intercept_errors on;\n      \
         error_page 503 = @fallback;\n    }}\n    location /fail/off {{\n      \
         grpc_pass grpc://127.0.0.1:{};\n    }}\n    location @fallback {{\n      \
         return 200 \"intercepted\\n\";",
        back.port, back.port, back.port
    );
    let conf = grpc_server("", &body);
    let p = porter(&conf);
    let got = h2c_post(p.port, "/t");
    assert!(got.1.contains("host=127.0.0.1 from=front"), "{got:?}");
    assert!(!got.0.contains("x-secret"), "{got:?}");
    assert!(got.0.contains("x-accel-charset: c"), "{got:?}");
    assert_eq!(h2c_post(p.port, "/fail").1, "intercepted\n");
    assert!(h2c_post(p.port, "/fail/off").0.starts_with("HTTP/2 503"));
    // (nginx is compared without the intercepted path: with
    // `grpc_intercept_errors` its answer took about a minute here.)
    if let Some(n) = nginx(&conf) {
        for path in ["/t", "/fail/off"] {
            let (ph, pb) = h2c_post(p.port, path);
            let (nh, nb) = h2c_post(n.port, path);
            if nh.is_empty() {
                // nginx 1.22 sometimes gives curl no answer at all here
                // (seen once in CI); porter's answer was checked above.
                eprintln!("{path}: no answer from nginx: {}", n.error_log());
                continue;
            }
            assert_eq!(pb, nb, "{path}: porter {ph}\nnginx {nh}\n{}", n.error_log());
            assert_eq!(ph.lines().next(), nh.lines().next(), "{path}");
        }
    }
}

/// A unary call over TLS trusting `ca_file`, to porter or nginx.
fn tls_call(port: u16, ca_file: &Path) -> Call {
    let ca = ca_file.to_str().unwrap();
    call(port, &["unary", "10", "--tls", ca, "localhost"])
}

#[test]
fn grpc_ssl_certificate_answers_an_upstream_that_requires_one_as_nginx() {
    let dir = TempDir::new("grpcmtls");
    let ca = common::tls::Ca::new();
    let (crt, key) = ca
        .leaf(&["localhost", "127.0.0.1"], common::tls::Alg::Ecdsa)
        .write(dir.path(), "leaf");
    let (client_crt, client_key) = ca
        .leaf(&["porter client"], common::tls::Alg::Ecdsa)
        .write(dir.path(), "client");
    let ca_file = dir.write("ca.pem", ca.pem());
    let up = Upstream::start(
        format!("127.0.0.1:{}", common::free_port()),
        &[&crt, &key, &ca_file],
    );
    let listen = format!(
        "listen 127.0.0.1:{{PORT}} ssl;\n    ssl_certificate {};\n    ssl_certificate_key {};",
        crt.display(),
        key.display()
    );
    let site = |extra: &str| {
        let body = format!(
            "      grpc_pass grpcs://{};\n      grpc_ssl_verify on;\n      \
             grpc_ssl_trusted_certificate {};\n      grpc_ssl_name localhost;\n{extra}",
            up.addr,
            ca_file.display()
        );
        grpc_server("", &body).replace("listen 127.0.0.1:{PORT};", &listen)
    };
    // Inherited from the server level, as NGINX's settings are.
    let with_cert = site("").replace(
        "  server {\n",
        &format!(
            "  server {{\n    grpc_ssl_certificate {};\n    grpc_ssl_certificate_key {};\n",
            client_crt.display(),
            client_key.display()
        ),
    );
    let p = porter(&with_cert);
    let got = tls_call(p.port, &ca_file);
    assert_eq!(got.code, "OK", "{got:?}");
    assert_eq!(got.result, "true", "the echo came back whole");
    if let Some(n) = nginx(&with_cert) {
        assert_eq!(tls_call(n.port, &ca_file), got);
    }
    // Without one the upstream ends the handshake: 502, UNAVAILABLE.
    let without = site("");
    let p = porter(&without);
    let got = tls_call(p.port, &ca_file);
    assert_eq!(got.code, "UNAVAILABLE", "{got:?}");
    if let Some(n) = nginx(&without) {
        assert_eq!(tls_call(n.port, &ca_file).code, got.code);
    }
    // A certificate without its key is NGINX's error, at its line.
    let err = common::config_error(&one_worker_conf(&format!(
        "  server {{ listen 127.0.0.1:1; location / {{ grpc_pass grpcs://127.0.0.1:1;\n grpc_ssl_certificate {}; }} }}",
        client_crt.display()
    )));
    let want = format!(
        "no \"grpc_ssl_certificate_key\" is defined for certificate \"{}\"",
        client_crt.display()
    );
    assert!(err.contains(&want), "{err}");
}

#[test]
fn grpc_ssl_crl_refuses_a_revoked_upstream_certificate_as_nginx() {
    let dir = TempDir::new("grpccrl");
    let ca = common::tls::Ca::new();
    let mut params =
        rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .unwrap();
    params.serial_number = Some(rcgen::SerialNumber::from(4242u64));
    let (crt, key) = ca.leaf_from(params).write(dir.path(), "leaf");
    let ca_file = dir.write("ca.pem", ca.pem());
    let up = Upstream::start(format!("127.0.0.1:{}", common::free_port()), &[&crt, &key]);
    let site = |crl: &Path| {
        let body = format!(
            "      grpc_pass grpcs://{};\n      grpc_ssl_verify on;\n      \
             grpc_ssl_trusted_certificate {};\n      grpc_ssl_name localhost;\n      \
             grpc_ssl_crl {};",
            up.addr,
            ca_file.display(),
            crl.display()
        );
        grpc_server("", &body)
    };
    // A list that revokes another certificate: the call passes.
    let other = site(&dir.write("other.crl", ca.crl(&[7])));
    let p = porter(&other);
    let got = call(p.port, &["unary", "10"]);
    assert_eq!(got.code, "OK", "{got:?}");
    if let Some(n) = nginx(&other) {
        assert_eq!(call(n.port, &["unary", "10"]), got);
    }
    // The upstream's own revoked: the handshake fails, 502 with NGINX's line.
    let revoked = site(&dir.write("revoked.crl", ca.crl(&[7, 4242])));
    let p = porter(&revoked);
    let got = call(p.port, &["unary", "10"]);
    assert_eq!(got.code, "UNAVAILABLE", "{got:?}");
    let line = "upstream SSL certificate verify error: (23:certificate revoked) while SSL handshaking to upstream";
    assert!(p
        .wait_log("logs/error.log", line, Duration::from_secs(5))
        .contains(line));
    if let Some(n) = nginx(&revoked) {
        assert_eq!(call(n.port, &["unary", "10"]).code, got.code);
        let log = n.error_log();
        assert!(log.contains(line), "{log}");
    }
    // A file with no list in it is refused at load.
    let err = common::config_error(&one_worker_conf(&format!(
        "  server {{ listen 127.0.0.1:1; location / {{ grpc_pass grpcs://127.0.0.1:1;\n grpc_ssl_crl {}; }} }}",
        ca_file.display()
    )));
    assert!(err.contains("X509_LOOKUP_load_file("), "{err}");
}
