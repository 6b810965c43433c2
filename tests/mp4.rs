//! `mp4` (NGINX's ngx_http_mp4_module) on the real binary beside Debian's
//! nginx 1.22 (the comparison is skipped, saying so, without
//! `/usr/sbin/nginx`), byte for byte: `?start=`/`?end=` on a file whose
//! `moov` follows its `mdat` and on one whose `moov` comes first (made by
//! ffmpeg: `tests/common/media/README.md`), with and without
//! `mp4_start_key_frame`, ranges over the new body, HEAD; and the errors:
//! 500 with NGINX's line for a start past the end, a broken file and a
//! `moov` larger than `mp4_max_buffer_size`.

use crate::common::*;

fn http_body(root: &str) -> String {
    format!(
        "server {{\n  listen 127.0.0.1:{{PORT}};\n  root {root};\n  \
         location / {{ mp4; }}\n  \
         location /key/ {{ mp4; mp4_start_key_frame on; alias {root}/; }}\n  \
         location /small/ {{ mp4; mp4_buffer_size 1k; mp4_max_buffer_size 1k; alias {root}/; }}\n}}"
    )
}

fn ask(port: u16, method: &str, target: &str, extra: &str) -> Resp {
    raw(
        port,
        format!("{method} {target} HTTP/1.1\r\nHost: x\r\n{extra}Connection: close\r\n\r\n")
            .as_bytes(),
    )
}

/// Status, the headers that do not carry the time or the server's name,
/// and the body.
fn seen(r: &Resp) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut h: Vec<(String, String)> = r
        .headers
        .iter()
        .filter(|(n, _)| !matches!(n.to_ascii_lowercase().as_str(), "date" | "server"))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
        .collect();
    h.sort();
    (r.status, h, r.body.clone())
}

/// The nginx-suite's `bad.mp4` (mp4.t): a `co64` chunk past the end.
const BAD: &[u8] = b"\x00\x00\x00\x1cftypisom\x00\x00\x02\x00isomiso2mp41\x00\x00\x00\x09mdat\x00\
\x00\x00\x00\x94moov\x00\x00\x00\x8ctrak\x00\x00\x00\x84mdia\x00\x00\x00\x7cminf\x00\x00\x00\x74stbl\
\x00\x00\x00\x18stts\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x03\x3a\x00\x00\x04\x00\x00\x00\x00\x28stsc\
\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x03\x0f\x00\x00\x00\x01\x00\x00\x00\x02\x00\x00\
\x00\x2b\x00\x00\x00\x01\x00\x00\x00\x14stsz\x00\x00\x00\x00\x00\x00\x05\xa9\x00\x00\x03\x3b\x00\x00\x00\
\x18co64\x00\x00\x00\x00\x00\x00\x00\x01\xff\xff\xff\xff\xf0\x0f\xfb\xe7";

const CASES: &[(&str, &str, &str)] = &[
    ("GET", "/av.mp4", ""),
    ("GET", "/av.mp4?start=0", ""),
    ("GET", "/av.mp4?start=1", ""),
    ("GET", "/av.mp4?start=1.5", ""),
    ("GET", "/av.mp4?start=2.7&end=3.3", ""),
    ("GET", "/av.mp4?end=2", ""),
    ("GET", "/av.mp4?start=1&end=1", ""),
    ("GET", "/av.mp4?start=3.95", ""),
    ("GET", "/av.mp4?start=4.5", ""),
    ("GET", "/av.mp4?start=x", ""),
    ("HEAD", "/av.mp4?start=1", ""),
    ("GET", "/av.mp4?start=1", "Range: bytes=0-9\r\n"),
    ("GET", "/av.mp4?start=1", "Range: bytes=-10\r\n"),
    ("GET", "/av.mp4?start=1", "Range: bytes=0-99\r\n"),
    ("GET", "/av.mp4?start=1", "Range: bytes=0-10,11-99\r\n"),
    ("GET", "/av_faststart.mp4?start=0", ""),
    ("GET", "/av_faststart.mp4?start=2.2", ""),
    ("GET", "/av_faststart.mp4?start=1&end=3", ""),
    ("GET", "/key/av.mp4?start=1.3", ""),
    ("GET", "/key/av.mp4?start=2.1&end=3", ""),
    ("GET", "/key/av_faststart.mp4?start=0.5", ""),
    ("GET", "/small/av.mp4", ""),
    ("GET", "/av.mp4?start=6", ""),
    ("GET", "/bad.mp4?start=0.5", ""),
    ("GET", "/small/av.mp4?start=1", ""),
];

fn docroot() -> TempDir {
    let d = TempDir::new("mp4");
    for f in ["av.mp4", "av_faststart.mp4"] {
        d.write(f, std::fs::read(support(&format!("media/{f}"))).unwrap());
    }
    d.write("bad.mp4", BAD);
    set_mode(d.path(), 0o755);
    d
}

#[test]
fn a_span_is_the_bytes_nginx_sends() {
    let d = docroot();
    let body = http_body(d.path().to_str().unwrap());
    let srv = Server::start(&one_worker_conf(&body));
    let whole = ask(srv.port, "GET", "/av.mp4", "");
    let cut = ask(srv.port, "GET", "/av.mp4?start=1", "");
    assert_eq!(cut.status, 200);
    assert!(cut.body.len() < whole.body.len());
    assert_eq!(&cut.body[4..8], b"ftyp");
    let Some(ngx) = Nginx::start(&body) else {
        eprintln!("skipping the comparison: {NGINX} is not installed");
        return;
    };
    for (method, target, extra) in CASES {
        let (p, n) = (
            ask(srv.port, method, target, extra),
            ask(ngx.port, method, target, extra),
        );
        if p.status >= 400 {
            // Error pages name the server.
            assert_eq!(p.status, n.status, "{method} {target} {extra:?}");
            continue;
        }
        assert_eq!(seen(&p), seen(&n), "{method} {target} {extra:?}");
    }
}

/// The part of each `[error]` line NGINX and porter share: from the
/// message to the `, client:` context.
fn messages(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains("[error]") || l.contains("[crit]"))
        .filter_map(|l| {
            let m = l.split_once(": *").map_or(l, |(_, r)| r);
            let m = m.split_once(' ').map_or(m, |(_, r)| r);
            Some(m.split(", client:").next()?.to_string())
        })
        .collect()
}

#[test]
fn a_file_that_cannot_be_cut_is_a_500_with_nginx_s_line() {
    let d = docroot();
    let body = http_body(d.path().to_str().unwrap());
    let srv = Server::start(&one_worker_conf(&body));
    let targets = [
        "/av.mp4?start=6",
        "/bad.mp4?start=0.5",
        "/small/av.mp4?start=1",
    ];
    for t in targets {
        assert_eq!(ask(srv.port, "GET", t, "").status, 500, "{t}");
    }
    // The log thread writes the lines after the answers: wait for them.
    let read_log = || std::fs::read_to_string(srv.prefix.path().join("logs/error.log")).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while messages(&read_log()).len() < targets.len() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let log = read_log();
    let ours = messages(&log);
    assert!(
        ours.iter()
            .any(|m| m.contains("mp4 moov atom is too large:")
                && m.ends_with("you may want to increase mp4_max_buffer_size")),
        "{log}"
    );
    let Some(ngx) = Nginx::start(&body) else {
        eprintln!("skipping the comparison: {NGINX} is not installed");
        return;
    };
    for t in targets {
        assert_eq!(ask(ngx.port, "GET", t, "").status, 500, "{t}");
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while messages(&ngx.error_log()).len() < targets.len() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let theirs = messages(&ngx.error_log());
    let strip = |v: Vec<String>| -> Vec<String> {
        v.into_iter()
            .map(|m| m.replace(d.path().to_str().unwrap(), "ROOT"))
            .collect()
    };
    assert_eq!(strip(ours), strip(theirs));
}

#[test]
fn mp4_limit_rate_stays_unknown_as_in_nginx() {
    let e = config_error(&one_worker_conf(
        "server { listen 127.0.0.1:1; location / { mp4; mp4_limit_rate on; } }",
    ));
    assert!(e.contains("unknown directive \"mp4_limit_rate\""), "{e}");
}
