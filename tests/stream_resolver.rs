//! `resolver` and `resolver_timeout` in `stream`: a stream `proxy_pass`
//! with variables that renders `HOST:PORT` (no `upstream` block of that
//! name) is resolved through the server's `resolver` — the loopback DNS
//! responder of `common::dns` — and its addresses are tried in turn
//! within `proxy_next_upstream_tries`. The failures end the session with
//! NGINX's error-log lines (no port, no resolver, a name not found, a
//! lookup timed out). porter and Debian's nginx with its stream module
//! run the same configuration; statuses, `$upstream_addr` and the lines
//! are compared.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::time::Duration;

use crate::common::dns::Dns;
use crate::common::stream_beside::StreamNginx;
use crate::common::*;

/// A backend on 127.0.0.1 that answers `SEE-THIS` and closes.
fn backend() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { return };
            let _ = c.write_all(b"SEE-THIS");
        }
    });
    port
}

/// The value each test server's `proxy_pass` renders, and whether the
/// server has the resolver; `B` is the backend's port.
const CASES: &[(&str, bool, &str)] = &[
    ("a.test:B", true, ""),
    ("a.test", true, ""),
    ("nx.test:B", true, ""),
    ("slow.test:B", true, ""),
    ("many.test:B", true, "proxy_next_upstream_tries 2;"),
    ("many.test:B", true, ""),
    ("a.test:B", false, ""),
];

/// The stream block: `$t` maps each server's port to its value.
fn body(probe: &str, ports: &[u16], dns: u16, b: u16) -> String {
    let (mut map, mut servers) = (String::new(), String::new());
    for ((target, resolver, extra), port) in CASES.iter().zip(ports) {
        let target = target.replace('B', &b.to_string());
        map.push_str(&format!("{port} {target};\n"));
        let r = match resolver {
            true => format!("resolver 127.0.0.1:{dns}; resolver_timeout 1s;"),
            false => String::new(),
        };
        servers.push_str(&format!(
            "server {{ listen 127.0.0.1:{port}; proxy_pass $t; {r} {extra} }}\n"
        ));
    }
    format!(
        "events {{}}\nstream {{\nmap $server_port $t {{\ndefault probe;\n{map}}}\n\
         log_format r \"$t $upstream_addr $status\";\n\
         access_log {{PREFIX}}/logs/r.log r;\nproxy_connect_timeout 2s;\n\
         server {{ listen 127.0.0.1:{probe}; return ok; }}\n{servers}}}\n"
    )
}

/// Each server's answer, then the access log's lines and the `[error]`
/// messages (without their `client:` context), once all are written.
fn sessions(ports: &[u16], read: impl Fn(&str) -> String) -> (Vec<String>, Vec<String>) {
    let mut answers = Vec::new();
    for p in ports {
        let mut s = TcpStream::connect(("127.0.0.1", *p)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        answers.push(out);
    }
    for _ in 0..50 {
        if read("logs/r.log").lines().count() > ports.len() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let errors = read("logs/error.log");
    let errors = errors
        .lines()
        .filter_map(|l| l.split_once("[error] ").map(|x| log_message(x.1)))
        .map(|m| m.split(", client:").next().unwrap_or("").to_string());
    let log = read("logs/r.log");
    let lines = log.lines().map(str::to_string);
    (answers, lines.chain(errors).collect())
}

#[test]
fn a_rendered_host_name_is_resolved_as_nginx_does() {
    let b = backend();
    let local = Ipv4Addr::LOCALHOST;
    let other = Ipv4Addr::new(127, 0, 0, 2);
    let zone = [
        ("a.test", local, 300),
        ("many.test", other, 300),
        ("many.test", other, 300),
        ("many.test", local, 300),
    ];
    let dns = Dns::start(&zone);
    let ports: Vec<u16> = CASES.iter().map(|_| free_port()).collect();
    let porter = Server::start(&format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\n{}",
        body("{PORT}", &ports, dns.port, b)
    ));
    let got = sessions(&ports, |f| porter.read(f));
    let ok = "SEE-THIS".to_string();
    assert_eq!(
        got.0,
        [
            ok.clone(),
            "".into(),
            "".into(),
            "".into(),
            "".into(),
            ok,
            "".into()
        ]
    );
    let up = |a: &str| format!("{a}:{b}");
    let (two, one) = (up("127.0.0.2"), up("127.0.0.1"));
    let want_log = [
        "probe - 200".to_string(), // the start-up check's session
        format!("a.test:{b} {one} 200"),
        "a.test - 500".to_string(),
        format!("nx.test:{b} - 500"),
        format!("slow.test:{b} - 500"),
        format!("many.test:{b} {two}, {two} 502"),
        format!("many.test:{b} {two}, {two}, {one} 200"),
        format!("a.test:{b} - 500"),
    ];
    assert_eq!(got.1[..want_log.len()], want_log);
    let refused = "connect() failed (111: Connection refused) while connecting to upstream";
    let want_errors = [
        "no port in upstream \"a.test\"",
        "nx.test could not be resolved (3: Host not found)",
        "slow.test could not be resolved (110: Operation timed out)",
        refused,
        refused,
        refused,
        refused,
        "no resolver defined to resolve a.test",
    ];
    assert_eq!(got.1[want_log.len()..], want_errors);
    let ports: Vec<u16> = CASES.iter().map(|_| free_port()).collect();
    let probe = free_port();
    let text = body(&probe.to_string(), &ports, dns.port, b);
    let Some(nginx) = StreamNginx::start(&text, probe) else {
        return;
    };
    assert_eq!(sessions(&ports, |f| nginx.read(f)), got);
}

#[test]
fn resolver_is_taken_in_stream_and_its_servers() {
    for (line, want) in [
        (
            "resolver 127.0.0.1 valid=x;",
            "invalid parameter \"valid=x\"",
        ),
        ("resolver_timeout x;", "invalid value"),
    ] {
        let err = config_error(&format!(
            "events {{}}\nstream {{\n{line}\nserver {{ listen 127.0.0.1:1; return x; }}\n}}\n"
        ));
        assert!(
            err.contains(want) && err.contains("porter.conf:3"),
            "{line}: {err}"
        );
    }
}
