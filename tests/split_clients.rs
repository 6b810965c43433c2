//! `split_clients`: the same keys land in the same buckets as in NGINX (so
//! `proxy_cache cache_$disk` and `aio threads=pool_$disk` spread keys over
//! disks exactly as an NGINX node did), the variable works wherever a
//! variable does, and bad blocks are refused with NGINX's messages at
//! file:line.
//!
//! The comparison runs Debian's nginx beside porter with 100 buckets of 1%
//! and asks both for a few hundred keys of every length (MurmurHash2's tail
//! handling included). It skips itself, saying so, when `/usr/sbin/nginx`
//! is not installed; `.ci/run` installs it.

use crate::common::*;

/// 100 buckets of 1%, the last one `*`.
fn hundred_buckets() -> String {
    let mut s: String = (0..99).map(|i| format!("1% b{i}; ")).collect();
    s.push_str("* b99;");
    s
}

/// Keys of every length from 0 to 40 bytes (all four MurmurHash2 tails),
/// deterministic, URL-safe.
fn keys() -> Vec<String> {
    let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789-._~";
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..300)
        .map(|i| {
            let len = i % 41;
            (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    alphabet[(x % alphabet.len() as u64) as usize] as char
                })
                .collect()
        })
        .collect()
}

#[test]
fn buckets_match_nginx() {
    let http = format!(
        "split_clients \"${{arg_k}}\" $bucket {{ {} }}\n",
        hundred_buckets()
    );
    let Some(nginx) = Nginx::start(&format!(
        "{http} server {{ listen 127.0.0.1:{{PORT}}; location / {{ return 200 \"$bucket\"; }} }}"
    )) else {
        eprintln!("SKIPPED: {NGINX} is not installed (.ci/run installs nginx-light)");
        return;
    };
    let porter = Server::start(&format!(
        "daemon off; worker_processes 1; pid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log;\n\
         events {{}}\n\
         http {{ access_log off; {http} server {{ listen 127.0.0.1:{{PORT}}; \
         location / {{ return 200 \"$bucket\"; }} }} }}\n"
    ));
    let nport = nginx.port;

    let mut seen = std::collections::BTreeSet::new();
    for k in keys() {
        let path = format!("/?k={k}");
        let want = get(nport, &path).text();
        let got = get(porter.port, &path).text();
        assert!(want.starts_with('b'), "nginx answered {want:?} for {k:?}");
        assert_eq!(got, want, "key {k:?}");
        seen.insert(want);
    }
    // The keys spread: a constant answer would prove nothing.
    assert!(seen.len() > 80, "only {} distinct buckets", seen.len());
    drop(nginx);
}

#[test]
fn variable_works_in_paths_and_headers() {
    let s = Server::start(
        "daemon off; worker_processes 1; pid {PREFIX}/porter.pid;\n\
         error_log {PREFIX}/logs/error.log;\n\
         events {}\n\
         http { access_log off;\n\
           server { listen 127.0.0.1:{PORT};\n\
             location / { add_header X-Disk $disk; return 200 \"d$disk\"; } }\n\
           # Defined after its use, as NGINX allows.\n\
           split_clients $uri $disk { 50% one; * two; }\n\
         }\n",
    );
    let mut both = std::collections::BTreeSet::new();
    for i in 0..40 {
        let r = get(s.port, &format!("/f{i}"));
        let body = r.text();
        assert!(body == "done" || body == "dtwo", "{body}");
        assert_eq!(
            r.header("x-disk").map(|v| format!("d{v}")),
            Some(body.clone())
        );
        // Stable: the same URI gets the same bucket.
        assert_eq!(get(s.port, &format!("/f{i}")).text(), body);
        both.insert(body);
    }
    assert_eq!(both.len(), 2);
}

#[test]
fn bad_blocks_name_file_and_line() {
    let cases = [
        (
            "split_clients $uri $d {\n 33.333% a;\n * b;\n}",
            "invalid percent value \"33.333%\"",
            2,
        ),
        (
            "split_clients $uri $d {\n 0% a;\n}",
            "invalid percent value \"0%\"",
            2,
        ),
        (
            "split_clients $uri $d {\n * a;\n 10% b;\n}",
            "percent total is greater than 100%",
            4,
        ),
        (
            "split_clients $uri $d {\n 60% a;\n 50% b;\n}",
            "percent total is greater than 100%",
            4,
        ),
        (
            "split_clients $uri d {\n * a;\n}",
            "invalid variable name \"d\"",
            1,
        ),
        (
            "split_clients $nosuch $d {\n * a;\n}",
            "unknown \"nosuch\" variable",
            1,
        ),
        (
            "split_clients $uri $d {\n 50%;\n}",
            "invalid number of arguments",
            2,
        ),
    ];
    for (block, msg, line) in cases {
        let dir = TempDir::new("split-bad");
        let conf = dir.write("bad.conf", format!("events {{}}\nhttp {{\n{block}\n}}\n"));
        let out = run(&["-t", "-c", conf.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{block}: {err}");
        let at = format!("{}:{}", conf.display(), line + 2);
        assert!(
            err.contains(msg) && err.contains(&at),
            "{block}: want {msg:?} at {at}, got {err}"
        );
    }
}
