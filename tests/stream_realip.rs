//! realip in `stream` (NGINX's stream realip module): on a `listen ...
//! proxy_protocol` address, a session from a trusted sender
//! (`set_real_ip_from`: an address, a CIDR, `unix:`) takes its client's
//! address and port from the PROXY header, and everything keyed on the
//! client sees them — `$remote_addr`, `allow`/`deny`, the access log, the
//! error log's `client:`, the PROXY line sent upstream — while
//! `$realip_remote_addr` keeps the peer's own. Each case runs on porter
//! and on Debian's nginx with its stream module, and the two are compared.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use crate::common::stream_beside::StreamNginx;
use crate::common::*;

const PP: &[u8] = b"PROXY TCP4 192.0.2.1 192.0.2.2 1234 5678\r\n";
const PP_OTHER: &[u8] = b"PROXY TCP4 192.0.2.9 192.0.2.2 1234 5678\r\n";

/// porter's main-level lines before a body.
fn porter_conf(body: &str) -> String {
    format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\n{body}"
    )
}

/// Writes `data`, reads the answer to its end.
fn ask(port: u16, data: &[u8]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(data).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The same over a UNIX-domain socket.
fn ask_unix(path: &std::path::Path, data: &[u8]) -> String {
    let mut s = UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(data).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// A backend that answers each connection with its first line (the PROXY
/// header a `proxy_protocol on` proxy sends), then closes.
fn first_line_echo() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { return };
            let mut line = String::new();
            let _ = BufReader::new(&c).read_line(&mut line);
            let _ = c.write_all(line.as_bytes());
        }
    });
    port
}

/// Four stream servers after a plain one on `probe` (the start-up
/// check): `p[0]` trusts 127.0.0.1, `p[1]` only 10.0.0.0/8, `p[2]`
/// trusts loopback and allows 192.0.2.1 alone, `p[3]` proxies to
/// `backend` with `proxy_protocol on`.
fn body(probe: &str, p: [u16; 4], backend: u16) -> String {
    format!(
        "events {{}}\nstream {{\n\
         log_format rl \"$remote_addr:$remote_port $realip_remote_addr $status\";\n\
         server {{ listen 127.0.0.1:{probe}; return ok; }}\n\
         server {{ listen 127.0.0.1:{} proxy_protocol; set_real_ip_from 127.0.0.1;\n\
           access_log {{PREFIX}}/logs/rl.log rl;\n\
           return \"$remote_addr:$remote_port $realip_remote_addr\"; }}\n\
         server {{ listen 127.0.0.1:{} proxy_protocol; set_real_ip_from 10.0.0.0/8;\n\
           return \"$remote_addr $realip_remote_addr\"; }}\n\
         server {{ listen 127.0.0.1:{} proxy_protocol; set_real_ip_from 127.0.0.0/8;\n\
           allow 192.0.2.1; deny all; return in; }}\n\
         server {{ listen 127.0.0.1:{} proxy_protocol; set_real_ip_from 127.0.0.1;\n\
           proxy_pass 127.0.0.1:{backend}; proxy_protocol on; }}\n}}\n",
        p[0], p[1], p[2], p[3]
    )
}

/// What one server's sessions give: the four answers (the last with its
/// port made `P`), the access-log line and the error-log `deny` line.
fn sessions(p: [u16; 4], read: impl Fn(&str) -> String) -> Vec<String> {
    let mut got = vec![
        ask(p[0], PP),
        ask(p[1], PP),
        ask(p[2], PP),
        ask(p[2], PP_OTHER),
        ask(p[3], PP).replace(&p[3].to_string(), "P"),
    ];
    // The logs are written as each session ends.
    for _ in 0..50 {
        if read("logs/rl.log").ends_with('\n') && read("logs/error.log").contains("forbidden") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    got.push(read("logs/rl.log"));
    let errors = read("logs/error.log");
    let deny = errors
        .lines()
        .find(|l| l.contains("access forbidden"))
        .map(|l| log_message(l.split_once("[error] ").map_or(l, |x| x.1)))
        .unwrap_or_default();
    // The server's address differs between the two: keep what precedes.
    got.push(deny.split(", server:").next().unwrap_or("").to_string());
    got
}

#[test]
fn a_trusted_proxy_header_names_the_client_for_every_phase() {
    let backend = first_line_echo();
    let p = [free_port(), free_port(), free_port(), free_port()];
    let porter = Server::start(&porter_conf(&body("{PORT}", p, backend)));
    let got = sessions(p, |f| porter.read(f));
    assert_eq!(
        got,
        vec![
            "192.0.2.1:1234 127.0.0.1".to_string(),
            "127.0.0.1 127.0.0.1".to_string(),
            "in".to_string(),
            String::new(),
            "PROXY TCP4 192.0.2.1 127.0.0.1 1234 P\r\n".to_string(),
            "192.0.2.1:1234 127.0.0.1 200\n".to_string(),
            "access forbidden by rule while initializing session, client: 192.0.2.9".to_string(),
        ]
    );
    let n = [free_port(), free_port(), free_port(), free_port()];
    let probe = free_port();
    let Some(nginx) = StreamNginx::start(&body(&probe.to_string(), n, backend), probe) else {
        return;
    };
    assert_eq!(sessions(n, |f| nginx.read(f)), got);
}

/// `listen unix:` with `set_real_ip_from unix:` trusts the socket's
/// clients; another socket without it does not.
fn unix_body(probe: &str) -> String {
    format!(
        "events {{}}\nstream {{\n\
         server {{ listen 127.0.0.1:{probe}; return ok; }}\n\
         server {{ listen unix:{{PREFIX}}/t.sock proxy_protocol; set_real_ip_from unix:;\n\
           return \"$remote_addr $realip_remote_addr\"; }}\n\
         server {{ listen unix:{{PREFIX}}/u.sock proxy_protocol; set_real_ip_from 127.0.0.1;\n\
           return \"$remote_addr $realip_remote_addr\"; }}\n}}\n"
    )
}

#[test]
fn unix_trusts_the_clients_of_a_unix_domain_socket() {
    let porter = Server::start(&porter_conf(&unix_body("{PORT}")));
    let dir = porter.prefix.path();
    let got = [
        ask_unix(&dir.join("t.sock"), PP),
        ask_unix(&dir.join("u.sock"), PP),
    ];
    assert_eq!(got, ["192.0.2.1 unix:", "unix: unix:"]);
    let probe = free_port();
    let Some(nginx) = StreamNginx::start(&unix_body(&probe.to_string()), probe) else {
        return;
    };
    let dir = nginx.prefix.path();
    let theirs = [
        ask_unix(&dir.join("t.sock"), PP),
        ask_unix(&dir.join("u.sock"), PP),
    ];
    assert_eq!(theirs, got);
}

#[test]
fn set_real_ip_from_takes_nginx_s_arguments_in_stream() {
    let bad = [
        (
            "set_real_ip_from 300.1.1.1/8;",
            "host not found in set_real_ip_from",
        ),
        ("set_real_ip_from;", "invalid number of arguments"),
        ("real_ip_header X-Real-IP;", "\"real_ip_header\""),
    ];
    for (line, want) in bad {
        let err = config_error(&format!(
            "events {{}}\nstream {{\n{line}\nserver {{ listen 127.0.0.1:1; return x; }}\n}}\n"
        ));
        assert!(
            err.contains(want) && err.contains("porter.conf:3"),
            "{line}: {err}"
        );
    }
}
