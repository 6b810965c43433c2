//! `uwsgi_string` beside nginx: the string goes inside the uwsgi packet,
//! after the vars, counted in the packet's size. A uwsgi server written
//! here answers the packet's size and its last bytes; porter and Debian's
//! nginx must send the same.

use std::io::{Read, Write};
use std::net::TcpListener;

use crate::common::*;

/// Answers each packet with its size and its last 12 bytes (as text).
fn packet_echo() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let mut h = [0u8; 4];
            if s.read_exact(&mut h).is_err() {
                continue;
            }
            let size = u16::from_le_bytes([h[1], h[2]]) as usize;
            let mut vars = vec![0; size];
            if s.read_exact(&mut vars).is_err() {
                continue;
            }
            let tail = String::from_utf8_lossy(&vars[size.saturating_sub(12)..]).into_owned();
            let body = format!("size={size} tail={tail:?}\n");
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

#[test]
fn uwsgi_string_follows_the_vars_as_nginx_sends_it() {
    let app = packet_echo();
    let conf = format!(
        "  server {{\n    listen 127.0.0.1:{{PORT}};\n    location / {{\n      \
         uwsgi_param A b;\n      uwsgi_string \"tail-string\";\n      \
         uwsgi_pass 127.0.0.1:{app};\n    }}\n    location /plain {{\n      \
         uwsgi_param A b;\n      uwsgi_pass 127.0.0.1:{app};\n    }}\n  }}"
    );
    let p = Server::start(&one_worker_conf(&conf));
    let n = Nginx::start(&conf).expect("nginx is not installed");
    for path in ["/", "/plain"] {
        let (mine, theirs) = (get(p.port, path), get(n.port, path));
        assert_eq!(mine.status, 200, "{path}");
        assert!(mine.text().starts_with("size="), "{path}");
        assert_eq!(mine.text(), theirs.text(), "{path}");
    }
    // The client's headers come as vars before it (`Connection: close`).
    assert_eq!(
        get(p.port, "/").text().split(" tail=").nth(1),
        Some("\"etail-string\"\n")
    );
    assert!(!get(p.port, "/plain").text().contains("tail-string"));
}
