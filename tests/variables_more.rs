//! More variables stock configs log: `$pipe`, `$request_completion`,
//! `$binary_remote_addr` (NGINX's raw 4 bytes, escaped in the access log,
//! and a `limit_req` key), `$realpath_root`, `$connection_time` — each
//! compared with the access-log lines nginx writes for the same requests.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{one_worker_conf, read_response, Nginx, Server, TempDir};

const FORMAT: &str =
    "log_format v '$pipe $request_completion \"$binary_remote_addr\" $realpath_root $status $connection_time';";

fn server(root: &Path, log: &Path) -> String {
    format!(
        "  {FORMAT}\n  limit_req_zone $binary_remote_addr zone=one:1m rate=1r/m;\n\
         server {{\n    listen 127.0.0.1:{{PORT}};\n    root {};\n    access_log {} v;\n\
         location /limited/ {{ limit_req zone=one; }}\n  }}",
        root.display(),
        log.display()
    )
}

/// A connection to `port` from the loopback address `from`.
fn connect_from(from: &str, port: u16) -> TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let local: SocketAddr = format!("{from}:0").parse().unwrap();
    s.bind(&local.into()).unwrap();
    let to: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    s.connect(&to.into()).unwrap();
    s.into()
}

/// The requests: two pipelined in one write, one alone from another
/// address, a `limit_req` keyed by `$binary_remote_addr` twice, and a
/// large file the client stops reading.
fn exchange(port: u16) -> Vec<u16> {
    let mut statuses = Vec::new();
    let mut s = connect_from("127.0.0.1", port);
    s.write_all(
        b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut buf = Vec::new();
    for _ in 0..2 {
        statuses.push(read_response(&mut s, &mut buf, false).unwrap().status);
    }
    for _ in 0..2 {
        let mut s = connect_from("127.1.200.250", port);
        s.write_all(b"GET /limited/a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        statuses.push(
            read_response(&mut s, &mut Vec::new(), false)
                .unwrap()
                .status,
        );
    }
    // An aborted download: the response is not complete.
    let mut s = connect_from("127.0.0.1", port);
    s.write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut head = [0u8; 64];
    let _ = std::io::Read::read(&mut s, &mut head);
    let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
    drop(s);
    statuses
}

/// The log's lines once there are `n`, each without its last field
/// (`$connection_time`, checked for its shape).
fn lines(log: &Path, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.lines().count() >= n || Instant::now() > deadline {
            return text
                .lines()
                .map(|l| {
                    let (rest, time) = l.rsplit_once(' ').unwrap();
                    let (s, ms) = time.split_once('.').expect("connection_time s.mmm");
                    assert!(s.parse::<u64>().is_ok() && ms.len() == 3, "{l}");
                    rest.to_string()
                })
                .collect();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn access_log_lines_match_nginx() {
    let dir = TempDir::new("vars-more");
    dir.write("real/a.txt", "hello\n");
    dir.write("real/limited/a.txt", "limited\n");
    dir.write("real/big.bin", vec![7u8; 64 << 20]);
    std::os::unix::fs::symlink(dir.path().join("real"), dir.path().join("link")).unwrap();
    let root = dir.path().join("link");
    let (ours, theirs) = (dir.path().join("porter.log"), dir.path().join("nginx.log"));
    let srv = Server::start(&one_worker_conf(&server(&root, &ours)));
    let ngx = Nginx::start(&server(&root, &theirs)).expect("/usr/sbin/nginx to compare with");
    let a = exchange(srv.port);
    let b = exchange(ngx.port);
    assert_eq!(a, b);
    assert_eq!(a, [200, 200, 200, 503]);
    let (a, b) = (lines(&ours, 5), lines(&theirs, 5));
    let real = std::fs::canonicalize(dir.path().join("real")).unwrap();
    assert_eq!(
        a[0],
        format!(". OK \"\\x7F\\x00\\x00\\x01\" {} 200", real.display())
    );
    assert_eq!(a[1].chars().next(), Some('p'), "{}", a[1]);
    assert!(a[2].contains("\"\\x7F\\x01\\xC8\\xFA\""), "{}", a[2]);
    assert!(a[4].starts_with(".  \""), "an aborted response: {}", a[4]);
    // nginx may log the pipelined request after the aborted one
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    assert_eq!(sorted(a), sorted(b));
}
