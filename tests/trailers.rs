//! `add_trailer`, byte for byte on raw sockets and beside Debian's nginx:
//! trailers go after the last chunk of an HTTP/1.1 response whose status
//! is 200/201/204/206/301/302/303/307/308 (or any with `always`), which is
//! then chunked even when its length is known; an empty value is not
//! sent; HTTP/1.0, HEAD, 204 and 304 responses get none.

use std::io::Write;
use std::net::TcpStream;

use crate::common::*;

const SERVER: &str = "server {\n listen 127.0.0.1:{PORT};\n root {ROOT};\n\
  location /f/ { add_trailer X-T \"v-$status\"; add_trailer X-Empty \"\"; add_trailer X-Uri $uri; }\n\
  location /err/ { add_trailer X-T t; return 404; }\n\
  location /always/ { add_trailer X-A a always; add_trailer X-T t; return 404; }\n\
  location /redir/ { add_trailer X-T t; return 302 /f/a.txt; }\n\
  location /nc/ { add_trailer X-T t; return 204; }\n\
}\n";

/// What a response looked like on the wire: status line, whether it was
/// chunked, its Content-Length, the body, and the trailer section as
/// sent (the bytes between the last chunk's size line and the end).
#[derive(Debug, PartialEq)]
struct Wire {
    status: String,
    chunked: bool,
    length: Option<String>,
    body: Vec<u8>,
    trailer: Vec<u8>,
}

fn exchange(port: u16, req: &str) -> Wire {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let raw = read_all(&mut s);
    let end = find(&raw, b"\r\n\r\n").expect("a head") + 4;
    let head = String::from_utf8_lossy(&raw[..end]).to_string();
    let field = |name: &str| {
        head.lines()
            .find_map(|l| {
                l.split_once(": ")
                    .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            })
            .map(|(_, v)| v.to_string())
    };
    let chunked = field("transfer-encoding").as_deref() == Some("chunked");
    let (body, trailer) = if chunked {
        dechunk(&raw[end..])
    } else {
        (raw[end..].to_vec(), Vec::new())
    };
    Wire {
        status: head.lines().next().unwrap_or("").to_string(),
        chunked,
        length: field("content-length"),
        body,
        trailer,
    }
}

/// The body and the trailer section of a chunked body.
fn dechunk(mut b: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut body = Vec::new();
    loop {
        let eol = find(b, b"\r\n").expect("a size line");
        let size =
            usize::from_str_radix(std::str::from_utf8(&b[..eol]).unwrap().trim(), 16).unwrap();
        b = &b[eol + 2..];
        if size == 0 {
            return (body, b.to_vec());
        }
        body.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

fn get11(port: u16, path: &str) -> Wire {
    exchange(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
    )
}

fn conf(root: &std::path::Path) -> String {
    SERVER.replace("{ROOT}", root.to_str().unwrap())
}

fn porter_conf(body: &str) -> String {
    format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\nerror_log {{PREFIX}}/logs/error.log info;\n\
         events {{ worker_connections 64; }}\nhttp {{\n access_log off;\n{body}}}\n"
    )
}

#[test]
fn trailers_follow_the_last_chunk_of_a_file_as_nginx_sends_them() {
    let root = TempDir::new("trl");
    root.write("f/a.txt", "hello trailers\n");
    let s = Server::start(&porter_conf(&conf(root.path())));
    let w = get11(s.port, "/f/a.txt");
    assert_eq!(
        w,
        Wire {
            status: "HTTP/1.1 200 OK".into(),
            chunked: true,
            length: None,
            body: b"hello trailers\n".to_vec(),
            trailer: b"X-T: v-200\r\nX-Uri: /f/a.txt\r\n\r\n".to_vec(),
        }
    );
}

#[test]
fn status_always_and_protocol_decide_as_in_nginx() {
    let root = TempDir::new("trl2");
    root.write("f/a.txt", "hello trailers\n");
    let s = Server::start(&porter_conf(&conf(root.path())));
    let run = |port: u16| {
        vec![
            get11(port, "/f/a.txt"),
            get11(port, "/err/x"),
            get11(port, "/always/x"),
            get11(port, "/redir/x"),
            get11(port, "/nc/x"),
            exchange(port, "GET /f/a.txt HTTP/1.0\r\n\r\n"),
            exchange(
                port,
                "HEAD /f/a.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
            ),
        ]
    };
    let porter = run(s.port);
    assert!(!porter[1].chunked, "a 404 without always has no trailers");
    assert_eq!(porter[2].trailer, b"X-A: a\r\n\r\n");
    assert_eq!(porter[3].trailer, b"X-T: t\r\n\r\n");
    assert!(!porter[4].chunked && !porter[5].chunked && !porter[6].chunked);
    let Some(n) = Nginx::start(&conf(root.path())) else {
        eprintln!("skipping the nginx comparison: {NGINX} is not installed");
        return;
    };
    let nginx = run(n.port);
    // Error pages name the server in their body: compare all but bodies.
    for (i, (p, n)) in porter.iter().zip(&nginx).enumerate() {
        assert_eq!(
            (&p.status, p.chunked, p.length.is_some(), &p.trailer),
            (&n.status, n.chunked, n.length.is_some(), &n.trailer),
            "request {i}"
        );
    }
    assert_eq!(porter[0].body, nginx[0].body);
    assert_eq!(
        porter[6].length, nginx[6].length,
        "HEAD keeps the file's length"
    );
}
