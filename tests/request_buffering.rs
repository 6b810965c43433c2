//! `fastcgi_request_buffering` (and `proxy_request_buffering`), beside
//! nginx: with it on (the default) the whole body is read before the
//! upstream is asked — in memory up to `client_body_buffer_size`, in a
//! temp file under `client_body_temp_path` beyond, gone from the
//! directory once open — so when the first server reads the body and
//! fails, `*_next_upstream` sends the whole body again to the next (here
//! Debian's php-fpm, whose `upload.php` answers the length and CRC it
//! read). With it off a large body streams and the request is not passed
//! on once the body went out. A chunked body over `client_max_body_size`
//! is 413 before any upstream is asked.

use crate::common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::php::*;
use crate::common::*;

/// A FastCGI server that reads each request whole (up to the empty
/// `STDIN` record), notes how many body bytes came, and closes without
/// answering: the failure NGINX passes to the next server.
struct Swallower {
    port: u16,
    bodies: Arc<Mutex<Vec<usize>>>,
}

impl Swallower {
    fn start() -> Swallower {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let seen = bodies.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                let seen = seen.clone();
                std::thread::spawn(move || {
                    let _ = s.set_read_timeout(Some(Duration::from_secs(20)));
                    if let Some(n) = stdin_bytes(&mut s) {
                        seen.lock().unwrap().push(n);
                    }
                });
            }
        });
        Swallower { port, bodies }
    }

    fn bodies(&self) -> Vec<usize> {
        self.bodies.lock().unwrap().clone()
    }
}

/// The body bytes of one request's `STDIN` records, `None` if the
/// connection ended before the empty one.
fn stdin_bytes(s: &mut TcpStream) -> Option<usize> {
    let mut n = 0;
    loop {
        let mut h = [0u8; 8];
        s.read_exact(&mut h).ok()?;
        let len = (h[4] as usize) << 8 | h[5] as usize;
        let mut content = vec![0; len + h[6] as usize];
        s.read_exact(&mut content).ok()?;
        if h[1] == 5 {
            if len == 0 {
                return Some(n);
            }
            n += len;
        }
    }
}

/// The server block both servers run: `upload.php` behind a group whose
/// first server swallows the request.
fn site(first: u16, fpm: u16, extra: &str) -> String {
    format!(
        "  upstream app {{ server 127.0.0.1:{first}; server 127.0.0.1:{fpm} backup; }}\n\
         \x20 server {{\n    listen 127.0.0.1:{{PORT}};\n    server_name localhost;\n    \
         root {root};\n    client_max_body_size 20m;\n    \
         client_body_temp_path {{PREFIX}}/body 1 2;\n    \
         location ~ \\.php$ {{\n      include {params};\n      \
         fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name;\n      \
         fastcgi_pass app;\n      fastcgi_next_upstream error timeout non_idempotent;\n      \
         fastcgi_read_timeout 5s;\n{extra}\n    }}\n  }}",
        root = app_root().display(),
        params = debian_etc("fastcgi_params").display(),
    )
}

/// A pattern of `total` bytes and what `upload.php` answers for it.
fn pattern(total: usize) -> (Vec<u8>, String) {
    let body: Vec<u8> = (0..total as u32).map(|i| (i * 7 % 251) as u8).collect();
    let want = format!("bytes={total} crc32={:08x}\n", crc32fast::hash(&body));
    (body, want)
}

fn post(port: u16, body: &[u8]) -> Resp {
    let mut req = format!(
        "POST /upload.php HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Content-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    raw(port, &req)
}

/// Files left under `dir` (the body temp files are unlinked once open).
fn files_under(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        if e.file_type().unwrap().is_dir() {
            out.extend(files_under(&e.path()));
        } else {
            out.push(e.path().display().to_string());
        }
    }
    out
}

#[test]
fn buffered_body_goes_whole_to_the_next_server_after_the_first_fails() {
    let fpm = Fpm::start();
    let first = Swallower::start();
    let conf = site(first.port, fpm.port, "");
    let p = Server::start(&one_worker_conf(&conf));
    let n = Nginx::start(&conf).expect("nginx is not installed");
    let (body, want) = pattern(5 * 1024 * 1024);
    for (who, port) in [("porter", p.port), ("nginx", n.port)] {
        let r = post(port, &body);
        assert_eq!(
            r.status,
            200,
            "{who}: {} {}",
            r.text(),
            p.read("logs/error.log")
        );
        assert_eq!(r.text(), want, "{who}");
    }
    // Each server sent the whole body to the first server too.
    assert_eq!(first.bodies(), vec![body.len(), body.len()]);
    let log = p.read("logs/error.log");
    for l in [log.as_str(), &n.error_log()] {
        assert!(
            l.contains("upstream prematurely closed connection while reading response header"),
            "{l}"
        );
        assert!(
            l.contains("a client request body is buffered to a temporary file"),
            "{l}"
        );
    }
    assert!(
        log.contains(&format!("{}/body/", p.prefix.path().display())),
        "{log}"
    );
    let left = files_under(&p.prefix.path().join("body"));
    assert!(left.is_empty(), "temp files left: {left:?}");
}

#[test]
fn small_body_stays_in_memory_and_is_resent_too() {
    let fpm = Fpm::start();
    let first = Swallower::start();
    let conf = site(first.port, fpm.port, "");
    let p = Server::start(&one_worker_conf(&conf));
    let (body, want) = pattern(10_000);
    let r = post(p.port, &body);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), want);
    assert_eq!(first.bodies(), vec![body.len()]);
    let log = p.read("logs/error.log");
    assert!(!log.contains("buffered to a temporary file"), "{log}");
}

#[test]
fn unbuffered_body_streams_and_is_not_passed_on_once_sent() {
    let fpm = Fpm::start();
    let first = Swallower::start();
    let conf = site(first.port, fpm.port, "      fastcgi_request_buffering off;");
    let p = Server::start(&one_worker_conf(&conf));
    let n = Nginx::start(&conf).expect("nginx is not installed");
    let (body, _) = pattern(5 * 1024 * 1024);
    for (who, port) in [("porter", p.port), ("nginx", n.port)] {
        let r = post(port, &body);
        assert_eq!(r.status, 502, "{who}: {}", r.text());
    }
    assert_eq!(first.bodies(), vec![body.len(), body.len()]);
    assert!(!p
        .read("logs/error.log")
        .contains("buffered to a temporary file"));
}

#[test]
fn chunked_body_over_the_limit_is_413_before_any_upstream() {
    let fpm = Fpm::start();
    let first = Swallower::start();
    let conf = site(first.port, fpm.port, "      client_max_body_size 1m;");
    let p = Server::start(&one_worker_conf(&conf));
    let n = Nginx::start(&conf).expect("nginx is not installed");
    let piece = vec![b'a'; 64 * 1024];
    for (who, port) in [("porter", p.port), ("nginx", n.port)] {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(
            b"POST /upload.php HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
              Transfer-Encoding: chunked\r\n\r\n",
        )
        .unwrap();
        for _ in 0..32 {
            let mut c = format!("{:x}\r\n", piece.len()).into_bytes();
            c.extend_from_slice(&piece);
            c.extend_from_slice(b"\r\n");
            if s.write_all(&c).is_err() {
                break;
            }
        }
        let _ = s.write_all(b"0\r\n\r\n");
        let mut buf = Vec::new();
        let r = read_response(&mut s, &mut buf, false).expect(who);
        assert_eq!(r.status, 413, "{who}");
    }
    assert!(first.bodies().is_empty());
    let needle = "client intended to send too large chunked body";
    let log = p.wait_log("logs/error.log", needle, Duration::from_secs(5));
    assert!(log.contains(needle), "{log}");
}

#[test]
fn chunked_body_is_buffered_and_resent_with_its_length() {
    let fpm = Fpm::start();
    let first = Swallower::start();
    let conf = site(first.port, fpm.port, "");
    let p = Server::start(&one_worker_conf(&conf));
    let n = Nginx::start(&conf).expect("nginx is not installed");
    let (body, want) = pattern(3 * 1024 * 1024 + 17);
    for (who, port) in [("nginx", n.port), ("porter", p.port)] {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(
            b"POST /upload.php HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
              Transfer-Encoding: chunked\r\n\r\n",
        )
        .unwrap();
        for c in body.chunks(40_000) {
            let mut out = format!("{:x}\r\n", c.len()).into_bytes();
            out.extend_from_slice(c);
            out.extend_from_slice(b"\r\n");
            s.write_all(&out).unwrap();
        }
        s.write_all(b"0\r\n\r\n").unwrap();
        let mut buf = Vec::new();
        let r = read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!(r.status, 200, "{who}: {}", r.text());
        assert_eq!(r.text(), want, "{who}");
    }
    assert_eq!(first.bodies(), vec![body.len(), body.len()]);
}

/// An HTTP server that reads each request whole (head, then its
/// `Content-Length` body), notes the body's length, and closes without
/// answering.
fn http_swallower() -> (u16, Arc<Mutex<Vec<usize>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let seen = bodies.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let seen = seen.clone();
            std::thread::spawn(move || {
                let _ = s.set_read_timeout(Some(Duration::from_secs(20)));
                let mut buf = Vec::new();
                let Some((_, headers)) = read_head(&mut s, &mut buf) else {
                    return;
                };
                let len: usize = header_in(&headers, "content-length")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                if read_len(&mut s, &mut buf, len).is_some() {
                    seen.lock().unwrap().push(len);
                }
            });
        }
    });
    (port, bodies)
}

#[test]
fn proxy_request_buffering_resends_the_body_to_the_next_server() {
    let (first, seen) = http_swallower();
    let second = common::origin::Origin::start(|r| {
        let text = format!(
            "bytes={} crc32={:08x} length={}\n",
            r.body.len(),
            crc32fast::hash(&r.body),
            r.header("content-length").unwrap_or("-")
        );
        common::origin::Reply::ok(text.as_bytes())
    });
    let conf = format!(
        "  upstream web {{ server 127.0.0.1:{first}; server 127.0.0.1:{} backup; }}\n\
         \x20 server {{\n    listen 127.0.0.1:{{PORT}};\n    client_max_body_size 20m;\n    \
         client_body_temp_path {{PREFIX}}/body;\n    location / {{\n      \
         proxy_pass http://web;\n      proxy_next_upstream error non_idempotent;\n    }}\n  }}",
        second.port
    );
    let p = Server::start(&one_worker_conf(&conf));
    let n = Nginx::start(&conf).expect("nginx is not installed");
    let (body, _) = pattern(2 * 1024 * 1024 + 5);
    let want = format!(
        "bytes={} crc32={:08x} length={}\n",
        body.len(),
        crc32fast::hash(&body),
        body.len()
    );
    for (who, port) in [("porter", p.port), ("nginx", n.port)] {
        let mut req = format!(
            "POST /up HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
             Content-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        req.extend_from_slice(&body);
        let r = raw(port, &req);
        assert_eq!(r.status, 200, "{who}");
        assert_eq!(r.text(), want, "{who}");
    }
    assert_eq!(*seen.lock().unwrap(), vec![body.len(), body.len()]);
    assert!(files_under(&p.prefix.path().join("body")).is_empty());
}
