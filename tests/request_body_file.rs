//! `$request_body_file` and `client_body_in_file_only on|clean|off`,
//! beside Debian's nginx: a proxied request's body read whole goes to a
//! temp file in `client_body_temp_path` when it outgrows
//! `client_body_buffer_size` (`$request_body_file` names it, the file
//! itself gone once open), or always with `client_body_in_file_only`,
//! where the file keeps its name: left in place with `on` (for another
//! program to take), removed when the request ends with `clean`.
//! `$request_body` is then empty, as NGINX's.

use std::time::{Duration, Instant};

use crate::common::*;

fn site() -> String {
    "server {\n    listen 127.0.0.1:{PORT};\n    server_name localhost;\n    \
     client_body_buffer_size 2k;\n    \
     add_header X-Body \"$request_body\";\n    \
     add_header X-Body-File \"$request_body_file\";\n    \
     location / { proxy_pass http://127.0.0.1:{PORT}/ok; }\n    \
     location /on { client_body_in_file_only on; proxy_pass http://127.0.0.1:{PORT}/ok; }\n    \
     location /clean { client_body_in_file_only clean; proxy_pass http://127.0.0.1:{PORT}/ok; }\n    \
     location = /ok { return 200 \"ok\\n\"; }\n}\n"
        .to_string()
}

fn post(port: u16, path: &str, body: &[u8]) -> Resp {
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    raw(port, &req)
}

/// Waits until `f` is gone (`clean` removes it when the request ends).
fn goes(f: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::path::Path::new(f).exists() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

fn servers() -> Vec<(&'static str, u16, Box<dyn std::any::Any>)> {
    let p = Server::start(&one_worker_conf(&site()));
    let mut out: Vec<(&'static str, u16, Box<dyn std::any::Any>)> =
        vec![("porter", p.port, Box::new(p))];
    if let Some(n) = Nginx::start(&site()) {
        out.push(("nginx", n.port, Box::new(n)));
    }
    out
}

#[test]
fn body_in_file_only_keeps_its_file_and_clean_removes_it() {
    let body = b"0123456789";
    for (who, port, _s) in servers() {
        let r = post(port, "/on", body);
        assert_eq!(r.status, 200, "{who}");
        assert_eq!(r.header("X-Body"), None, "{who}: $request_body empty");
        let f = r
            .header("X-Body-File")
            .expect("$request_body_file")
            .to_string();
        assert_eq!(std::fs::read(&f).unwrap(), body, "{who}: {f}");
        let _ = std::fs::remove_file(&f);
        let r = post(port, "/clean", body);
        let f = r
            .header("X-Body-File")
            .expect("$request_body_file")
            .to_string();
        assert!(goes(&f), "{who}: {f} left with clean");
    }
}

#[test]
fn body_over_the_buffer_goes_to_a_file_named_by_request_body_file() {
    let big = vec![b'x'; 5000];
    for (who, port, _s) in servers() {
        let r = post(port, "/", b"0123456789");
        assert_eq!(r.header("X-Body"), Some("0123456789"), "{who}");
        assert_eq!(r.header("X-Body-File"), None, "{who}");
        let r = post(port, "/", &big);
        assert_eq!(r.status, 200, "{who}");
        assert_eq!(r.header("X-Body"), None, "{who}");
        let f = r.header("X-Body-File").expect("$request_body_file");
        assert!(!std::path::Path::new(f).exists(), "{who}: {f} kept");
    }
}

#[test]
fn client_body_in_file_only_takes_on_off_clean() {
    let conf = one_server_conf("", "client_body_in_file_only yes;");
    let err = config_error(&conf.replace("{PORT}", "1"));
    assert!(
        err.contains("it must be \"on\", \"off\" or \"clean\""),
        "{err}"
    );
}
