//! `server ... max_conns=N` in an `upstream` block (load-balancer configs
//! carry it): a peer with N requests in flight is passed over; with no
//! other peer the request is a 502, as Debian's nginx answers the same
//! requests side by side.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use common::origin::*;
use common::*;

fn get(port: u16, path: &str) -> Resp {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let mut buf = Vec::new();
    read_response(&mut s, &mut buf, false).expect("response")
}

/// An origin that answers `NAME`, after a second for `/slow`.
fn origin(name: &'static str) -> Origin {
    Origin::start(move |r| {
        let reply = Reply::ok(name.as_bytes());
        match r.target.as_str() {
            "/slow" => reply.delay(Duration::from_millis(1500)),
            _ => reply,
        }
    })
}

/// While one `/slow` request holds the first peer, the statuses and bodies
/// of three quick requests.
fn while_one_is_held(port: u16) -> Vec<(u16, String)> {
    let held = std::thread::spawn(move || {
        let r = get(port, "/slow");
        (r.status, r.text())
    });
    std::thread::sleep(Duration::from_millis(400));
    let mut out: Vec<(u16, String)> = (0..3)
        .map(|_| {
            let r = get(port, "/");
            (
                r.status,
                if r.status == 200 {
                    r.text()
                } else {
                    String::new()
                },
            )
        })
        .collect();
    out.push(held.join().unwrap());
    out
}

fn http(upstream: &str) -> String {
    format!(
        "upstream u {{\n{upstream}\n}}\n\
         server {{\n listen 127.0.0.1:{{PORT}};\n location / {{ proxy_pass http://u; }}\n}}\n"
    )
}

fn porter_conf(http: &str) -> String {
    format!(
        "daemon off;\nworker_processes 1;\nerror_log {{PREFIX}}/logs/error.log info;\n\
         events {{ worker_connections 256; }}\nhttp {{\n access_log off;\n{http}}}\n"
    )
}

/// Runs `upstream` in porter and in nginx; returns porter's answers after
/// checking nginx's are the same.
fn both(upstream: &str) -> Vec<(u16, String)> {
    let http = http(upstream);
    let porter = Server::start(&porter_conf(&http));
    let got = while_one_is_held(porter.port);
    drop(porter);
    match Nginx::start(&http) {
        Some(nginx) => assert_eq!(while_one_is_held(nginx.port), got, "nginx differs"),
        None => eprintln!("nginx not installed: porter alone"),
    }
    got
}

#[test]
fn a_single_peer_at_max_conns_answers_502() {
    let a = origin("a");
    let got = both(&format!("server 127.0.0.1:{} max_conns=1;", a.port));
    let want = vec![
        (502, String::new()),
        (502, String::new()),
        (502, String::new()),
        (200, "a".to_string()),
    ];
    assert_eq!(got, want);
}

#[test]
fn a_peer_at_max_conns_is_passed_over_for_the_others() {
    let (a, b) = (origin("a"), origin("b"));
    let got = both(&format!(
        "server 127.0.0.1:{} max_conns=1;\nserver 127.0.0.1:{};",
        a.port, b.port
    ));
    let want = vec![
        (200, "b".to_string()),
        (200, "b".to_string()),
        (200, "b".to_string()),
        (200, "a".to_string()),
    ];
    assert_eq!(got, want);
}

#[test]
fn max_conns_must_be_a_number() {
    let e = config_error(&porter_conf(
        "upstream u { server 127.0.0.1:1 max_conns=x; }\nserver { listen 127.0.0.1:1; }\n",
    ));
    assert!(e.contains("invalid parameter \"max_conns=x\""), "{e}");
}
