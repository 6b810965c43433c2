//! `error_log syslog:...` and `access_log syslog:...`: the datagrams porter
//! sends to a UDP collector, compared with Debian's nginx's on the same
//! lines (but the time, the host name, the process and thread ids and the
//! connection number), and NGINX's errors for bad `syslog:` parameters.

use std::net::UdpSocket;
use std::time::Duration;

use crate::common::*;

/// Every datagram that arrives within a second of the first (none: empty).
fn datagrams(sock: &UdpSocket) -> Vec<String> {
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    while let Ok(n) = sock.recv(&mut buf) {
        out.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        sock.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
    }
    out
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_ascii_lowercase()
}

/// A datagram with what differs between two servers and two runs masked:
/// `<PRI>TIME HOST TAG: MSG`, an error line's own time and `PID#TID: *N`.
fn masked(d: &str) -> String {
    let (pri, rest) = d.split_once('>').expect("<PRI>");
    // `Mmm dd hh:mm:ss ` is 16 bytes.
    let time = &rest[..16];
    assert!(
        time.as_bytes()[3] == b' ' && time.as_bytes()[9] == b':',
        "{d}"
    );
    let rest = &rest[16..];
    let host = format!("{} ", hostname());
    let (host, rest) = match rest.strip_prefix(&host) {
        Some(r) => ("HOST ", r),
        None => ("", rest),
    };
    let (tag, mut msg) = rest.split_once(": ").expect("TAG: ");
    let mut m = String::new();
    // `2026/11/28 05:00:00 [error] 123#124: *5 ` of an error line.
    if msg.len() > 20 && msg.as_bytes()[4] == b'/' && msg.as_bytes()[19] == b' ' {
        let lvl_end = msg.find("] ").unwrap() + 2;
        m.push_str("TIME ");
        m.push_str(&msg[20..lvl_end]);
        m.push_str("PID: ");
        msg = &msg[lvl_end..];
        msg = &msg[msg.find(": ").unwrap() + 2..];
        if let Some(r) = msg.strip_prefix('*') {
            m.push_str("*C ");
            msg = &r[r.find(' ').unwrap() + 1..];
        }
    }
    m.push_str(msg);
    format!("{pri}>{host}{tag}: {m}")
}

fn server_body(udp: u16) -> String {
    format!(
        "    root /nonexistent-porter-syslog;\n\
         \x20   location /a {{ access_log syslog:server=127.0.0.1:{udp} sl; }}\n\
         \x20   location /t {{ access_log syslog:severity=alert,server=127.0.0.1:{udp},facility=user,tag=SEE_1,nohostname sl; }}\n\
         \x20   location /e {{ error_log syslog:server=127.0.0.1:{udp},facility=daemon,severity=debug; }}\n\
         \x20   location /w {{ error_log syslog:server=127.0.0.1:{udp} warn; error_log syslog:server=127.0.0.1:{udp} emerg; }}\n"
    )
}

const HTTP_EXTRA: &str = "log_format sl \"$request_method $uri $status\";";

/// The masked datagrams a GET of each path brings, in order.
fn exchange(port: u16, sock: &UdpSocket, paths: &[&str]) -> Vec<Vec<String>> {
    paths
        .iter()
        .map(|p| {
            get(port, p);
            datagrams(sock).iter().map(|d| masked(d)).collect()
        })
        .collect()
}

#[test]
fn datagrams_are_nginx_s() {
    let paths = ["/a/x", "/t/y", "/e/missing", "/w/missing"];
    let ps = UdpSocket::bind("127.0.0.1:0").unwrap();
    let porter = Server::start(&one_server_conf(
        HTTP_EXTRA,
        &server_body(ps.local_addr().unwrap().port()),
    ));
    let got = exchange(porter.port, &ps, &paths);
    let expect_start = [
        vec!["<190>HOST nginx: GET /a/x 404"],
        vec!["<9>SEE_1: GET /t/y 404"],
        // An error line's severity is its level; the facility stays.
        vec!["<27>HOST nginx: TIME [error] PID: *C open() \"/nonexistent-porter-syslog/e/missing\" failed (2: No such file or directory), client: 127.0.0.1, server: localhost, request: \"GET /e/missing HTTP/1.1\", host: \"localhost\""],
        // `warn` takes the error line, `emerg` does not.
        vec!["<187>HOST nginx: TIME [error] PID: *C open() \"/nonexistent-porter-syslog/w/missing\" failed (2: No such file or directory), client: 127.0.0.1, server: localhost, request: \"GET /w/missing HTTP/1.1\", host: \"localhost\""],
    ];
    assert_eq!(got, expect_start);
    let ns = UdpSocket::bind("127.0.0.1:0").unwrap();
    let body = server_body(ns.local_addr().unwrap().port());
    let Some(n) = Nginx::start(&format!(
        "{HTTP_EXTRA}\nserver {{\n listen 127.0.0.1:{{PORT}};\n server_name localhost;\n{body}\n}}\n"
    )) else {
        eprintln!("nginx not installed: porter's datagrams checked alone");
        return;
    };
    assert_eq!(got, exchange(n.port, &ns, &paths), "porter vs nginx");
}

#[test]
fn a_collector_that_comes_back_gets_lines_again() {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = sock.local_addr().unwrap();
    let porter = Server::start(&one_server_conf(HTTP_EXTRA, &server_body(addr.port())));
    assert_eq!(exchange(porter.port, &sock, &["/a/1"])[0].len(), 1);
    drop(sock);
    // Refused sends (nothing listens): lost, the requests unharmed.
    assert_eq!(get(porter.port, "/a/2").status, 404);
    assert_eq!(get(porter.port, "/a/3").status, 404);
    let sock = UdpSocket::bind(addr).unwrap();
    assert_eq!(
        exchange(porter.port, &sock, &["/a/4"]),
        [vec!["<190>HOST nginx: GET /a/4 404"]]
    );
}

#[test]
fn bad_syslog_parameters_are_nginx_s_errors() {
    for (target, err) in [
        ("syslog:facility=user", "no syslog server specified"),
        (
            "syslog:server=127.0.0.1,facility=x",
            "unknown syslog facility \"x\"",
        ),
        (
            "syslog:server=127.0.0.1,severity=err",
            "unknown syslog severity \"err\"",
        ),
        (
            "syslog:server=127.0.0.1,tag=a-b",
            "syslog \"tag\" only allows alphanumeric characters and underscore",
        ),
        (
            "syslog:server=127.0.0.1,bogus",
            "unknown syslog parameter \"bogus\"",
        ),
    ] {
        let e = config_error(&format!("error_log {target}; events {{}} http {{}}"));
        assert!(e.contains(err), "{target}: {e}");
        let e = config_error(&format!(
            "events {{}} http {{ server {{ access_log {target}; }} }}"
        ));
        assert!(e.contains(err), "{target}: {e}");
    }
    let e = config_error(
        "events {} http { server { access_log syslog:server=127.0.0.1 combined buffer=32k; } }",
    );
    assert!(e.contains("logs to syslog cannot be buffered"), "{e}");
}
