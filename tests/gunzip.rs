//! The gunzip filter (`gunzip`, `gunzip_buffers`): gzip answers — a
//! `gzip_static always` file, a proxied gzip body, several gzip members
//! in a row, a body large enough to come out in many reads — inflated for
//! a client that does not take gzip and passed through for one that does;
//! HEAD, ranges, HTTP/1.0, `Vary` and the weak ETag as nginx has them.
//! Compared with Debian's nginx on the same files.

use std::io::Write;

use flate2::write::GzEncoder;
use flate2::Compression;

use crate::common::{both, raw, Resp, TempDir};

fn gz(data: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// The plain text of `t1`, and of `big` (its gzip two members).
fn texts() -> (Vec<u8>, Vec<u8>) {
    let t1: String = (0..100).map(|i| format!("X{i:03}XXXXXX")).collect();
    let big: Vec<u8> = (0..600_000u32)
        .flat_map(|i| format!("{:x}\n", i.wrapping_mul(2_654_435_761)).into_bytes())
        .collect();
    (t1.into_bytes(), big)
}

fn files() -> TempDir {
    let root = TempDir::new("gunzip");
    let (t1, big) = texts();
    root.write("t1.gz", gz(&t1));
    let (a, b) = big.split_at(big.len() / 3);
    let mut two = gz(a);
    two.extend(gz(b));
    root.write("big.gz", two);
    root.write("t3", "not compressed");
    root.write("empty.gz", gz(b""));
    root
}

fn server(root: &TempDir) -> String {
    format!(
        "    root {};\n    default_type text/plain;\n\
         location / {{ gunzip on; gzip_vary on; gzip_static always; }}\n\
         location /gz/ {{ alias {}/; gzip_static always; }}\n\
         location /p/ {{\n        gunzip on; gunzip_buffers 4 8k; gzip_vary on;\n\
         \x20       proxy_pass http://127.0.0.1:{{PORT}}/gz/;\n\
         \x20       proxy_set_header Accept-Encoding gzip;\n    }}",
        root.path().display(),
        root.path().display()
    )
}

fn send(port: u16, line: &str, extra: &str) -> Resp {
    let close = if line.ends_with("1.0") {
        ""
    } else {
        "Connection: close\r\n"
    };
    raw(
        port,
        format!("{line}\r\nHost: localhost\r\n{close}{extra}\r\n").as_bytes(),
    )
}

/// Status, the headers gunzip changes, and the body.
fn shape(r: &Resp) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let kept = [
        "content-encoding",
        "content-length",
        "transfer-encoding",
        "vary",
        "etag",
        "accept-ranges",
        "content-range",
        "connection",
    ];
    let h = r
        .headers
        .iter()
        .filter(|(n, _)| kept.contains(&n.to_ascii_lowercase().as_str()))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
        .collect();
    (r.status, h, r.body.clone())
}

const CASES: &[(&str, &str)] = &[
    ("GET /t1 HTTP/1.1", ""),
    ("GET /t1 HTTP/1.1", "Accept-Encoding: gzip\r\n"),
    ("HEAD /t1 HTTP/1.1", ""),
    ("GET /t1 HTTP/1.1", "Range: bytes=0-9\r\n"),
    ("GET /t1 HTTP/1.0", ""),
    ("GET /t3 HTTP/1.1", ""),
    ("HEAD /t3 HTTP/1.1", ""),
    ("GET /big HTTP/1.1", ""),
    ("GET /empty HTTP/1.1", ""),
    ("GET /p/t1 HTTP/1.1", ""),
    ("GET /p/t1 HTTP/1.1", "Accept-Encoding: gzip\r\n"),
    ("GET /p/big HTTP/1.1", ""),
    ("HEAD /p/big HTTP/1.1", ""),
];

#[test]
fn gzip_answers_are_inflated_for_clients_without_gzip() {
    let root = files();
    let (t1, big) = texts();
    let (p, n) = both("", &server(&root));
    let r = send(p.port, "GET /t1 HTTP/1.1", "");
    assert_eq!(r.body, t1);
    assert!(r.header("content-encoding").is_none());
    assert_eq!(r.header("vary"), Some("Accept-Encoding"));
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert!(r.header("etag").unwrap().starts_with("W/\""));
    let r = send(p.port, "GET /t1 HTTP/1.1", "Accept-Encoding: gzip\r\n");
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(r.body, std::fs::read(root.path().join("t1.gz")).unwrap());
    assert_eq!(send(p.port, "GET /big HTTP/1.1", "").body, big);
    assert_eq!(send(p.port, "GET /p/big HTTP/1.1", "").body, big);
    assert!(send(p.port, "GET /t3 HTTP/1.1", "")
        .header("vary")
        .is_none());
    let Some(n) = n else { return };
    for (line, extra) in CASES {
        let (pr, nr) = (send(p.port, line, extra), send(n.port, line, extra));
        assert_eq!(shape(&pr), shape(&nr), "{line} {extra:?}");
    }
}
