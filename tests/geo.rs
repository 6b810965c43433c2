//! `geo`: the variable NGINX's geo module defines from an address, on the
//! real binary beside Debian's nginx (the comparison is skipped, saying
//! so, without `/usr/sbin/nginx`): longest-prefix CIDR matches over IPv4
//! and IPv6 from a variable's address, `ranges` with nested ranges and
//! `delete`, the client address replaced from `X-Forwarded-For` behind a
//! `proxy` (and `proxy_recursive`), and bad blocks refused with NGINX's
//! messages at file:line.

use crate::common::*;

fn ask(port: u16, path: &str, extra: &str) -> String {
    raw(
        port,
        format!("GET {path} HTTP/1.1\r\nHost: x\r\n{extra}Connection: close\r\n\r\n").as_bytes(),
    )
    .text()
}

/// Starts porter (and nginx, when installed) with `http` and asks both
/// each `(path, extra headers, porter's expected answer)`.
fn compare(http: &str, cases: &[(&str, &str, &str)]) {
    let srv = Server::start(&one_worker_conf(http));
    for (path, extra, want) in cases {
        assert_eq!(ask(srv.port, path, extra), *want, "{path} {extra:?}");
    }
    let Some(ngx) = Nginx::start(http) else {
        eprintln!("skipping the comparison: {NGINX} is not installed");
        return;
    };
    for (path, extra, _) in cases {
        assert_eq!(
            ask(srv.port, path, extra),
            ask(ngx.port, path, extra),
            "{path} {extra:?}"
        );
    }
}

#[test]
fn the_longest_prefix_wins_over_ipv4_and_ipv6() {
    let http = "geo $arg_ip $g {\n  default world;\n  10.0.0.0/8 ten;\n  10.1.0.0/16 ten-one;\n\
                10.1.2.3 host;\n  10.9.9.9/8 low-bits;\n  2001:db8::/32 doc;\n  2001:db8:1::/48 doc1;\n\
                ::1 loop6;\n  172.16.0.0/12 private;\n  delete 172.16.0.0/12;\n}\n\
                geo $arg_ip $nodefault { 192.168.0.0/16 lan; }\n\
                server {\n  listen 127.0.0.1:{PORT};\n  location / { return 200 \"$g|$nodefault\"; }\n}";
    compare(
        http,
        &[
            ("/?ip=10.2.0.1", "", "low-bits|"),
            ("/?ip=10.1.9.9", "", "ten-one|"),
            ("/?ip=10.1.2.3", "", "host|"),
            ("/?ip=11.0.0.1", "", "world|"),
            ("/?ip=172.16.1.1", "", "world|"),
            ("/?ip=192.168.7.7", "", "world|lan"),
            ("/?ip=2001:db8:1::5", "", "doc1|"),
            ("/?ip=2001:db8:2::5", "", "doc|"),
            ("/?ip=::1", "", "loop6|"),
            ("/?ip=::ffff:10.1.2.3", "", "host|"),
            ("/?ip=bogus", "", "world|"),
            ("/", "", "world|"),
        ],
    );
}

#[test]
fn ranges_nest_and_delete_as_in_nginx() {
    let http = "geo $arg_ip $r {\n  ranges;\n  default none;\n  10.0.0.0-10.0.255.255 outer;\n\
                10.0.1.0-10.0.1.255 inner;\n  10.1.0.0-10.2.0.5 span;\n  10.3.0.0-10.3.0.9 gone;\n\
                delete 10.3.0.0-10.3.0.9;\n  255.255.0.0-255.255.255.254 top;\n}\n\
                server {\n  listen 127.0.0.1:{PORT};\n  location / { return 200 \"$r\"; }\n}";
    compare(
        http,
        &[
            ("/?ip=10.0.0.9", "", "outer"),
            ("/?ip=10.0.1.9", "", "inner"),
            ("/?ip=10.0.2.9", "", "outer"),
            ("/?ip=10.1.200.1", "", "span"),
            ("/?ip=10.2.0.5", "", "span"),
            ("/?ip=10.2.0.6", "", "none"),
            ("/?ip=10.3.0.1", "", "none"),
            ("/?ip=255.255.1.1", "", "top"),
            ("/?ip=::1", "", "none"),
            ("/?ip=x", "", "none"),
        ],
    );
}

#[test]
fn a_trusted_proxy_is_replaced_by_the_forwarded_address() {
    let http = "geo $plain {\n  default d;\n  127.0.0.1 loopback;\n  1.1.1.0/24 one;\n\
                192.168.0.0/16 lan;\n}\n\
                geo $fwd {\n  default d;\n  proxy 127.0.0.1;\n  127.0.0.1 loopback;\n  1.1.1.0/24 one;\n\
                192.168.0.0/16 lan;\n}\n\
                geo $rec {\n  default d;\n  proxy 127.0.0.0/8;\n  proxy 192.168.0.0/16;\n  proxy_recursive;\n\
                127.0.0.1 loopback;\n  1.1.1.0/24 one;\n  192.168.0.0/16 lan;\n}\n\
                server {\n  listen 127.0.0.1:{PORT};\n  location / { return 200 \"$plain $fwd $rec\"; }\n}";
    compare(
        http,
        &[
            ("/", "", "loopback loopback loopback"),
            ("/", "X-Forwarded-For: 1.1.1.7\r\n", "loopback one one"),
            (
                "/",
                "X-Forwarded-For: 1.1.1.7, 192.168.3.3\r\n",
                "loopback lan one",
            ),
            (
                "/",
                "X-Forwarded-For: 1.1.1.7\r\nX-Forwarded-For: 192.168.3.3\r\n",
                "loopback lan one",
            ),
            (
                "/",
                "X-Forwarded-For: junk, 192.168.3.3\r\n",
                "loopback lan lan",
            ),
            ("/", "X-Forwarded-For: 8.8.8.8:53\r\n", "loopback d d"),
        ],
    );
}

#[test]
fn bad_blocks_name_file_and_line() {
    let cases = [
        (
            "geo $g {\n 10.0.0.0/33 x;\n}",
            "invalid network \"10.0.0.0/33\"",
            2,
        ),
        (
            "geo $g {\n proxy nonsense;\n}",
            "invalid network \"nonsense\"",
            2,
        ),
        (
            "geo $g {\n 10.0.0.0/8 x y;\n}",
            "invalid number of the geo parameters",
            2,
        ),
        (
            "geo $g {\n default x;\n ranges;\n}",
            "the \"ranges\" directive must be the first directive inside \"geo\" block",
            3,
        ),
        (
            "geo $g {\n ranges;\n 10.0.0.9-10.0.0.1 x;\n}",
            "invalid range \"10.0.0.9-10.0.0.1\"",
            3,
        ),
        (
            "geo $g {\n ranges;\n 10.0.0.0-10.0.0.9 a;\n 10.0.0.5-10.0.0.20 b;\n}",
            "range \"10.0.0.5-10.0.0.20\" overlaps \"10.0.0.0-10.0.0.9\"",
            4,
        ),
        (
            "geo $g {\n 255.255.255.255/32 x;\n}",
            "invalid network \"255.255.255.255/32\"",
            2,
        ),
        ("geo g {\n}", "invalid variable name \"g\"", 1),
        (
            "geo remote_addr $g {\n}",
            "invalid variable name \"remote_addr\"",
            1,
        ),
        ("geo $nosuch $g {\n}", "unknown \"nosuch\" variable", 1),
    ];
    for (block, msg, line) in cases {
        let dir = TempDir::new("geo-bad");
        let conf = dir.write("bad.conf", format!("events {{}}\nhttp {{\n{block}\n}}\n"));
        let out = run(&["-t", "-c", conf.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{block}: {err}");
        let at = format!("{}:{}", conf.display(), line + 2);
        assert!(
            err.contains(msg) && err.contains(&at),
            "{block}: want {msg:?} at {at}, got {err}"
        );
        // NGINX reports an unknown variable after reading the file,
        // without its place.
        if let Some(n) = nginx_test(&dir, &conf).filter(|_| !msg.starts_with("unknown")) {
            assert!(n.contains(msg) && n.contains(&at), "nginx says {n}");
        }
    }
}

#[test]
fn warnings_name_file_and_line() {
    let dir = TempDir::new("geo-warn");
    let conf = dir.write(
        "warn.conf",
        "events {}\nhttp {\ngeo $g {\n 10.0.0.0/8 a;\n 10.0.0.0/8 b;\n 10.1.2.3/8 c;\n delete 11.0.0.0/8;\n}\n}\n",
    );
    let out = run(&["-t", "-c", conf.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let c = conf.display();
    for want in [
        format!("duplicate network \"10.0.0.0/8\", value: \"b\", old value: \"a\" in {c}:5"),
        format!("low address bits of 10.1.2.3/8 are meaningless in {c}:6"),
        format!("no network \"11.0.0.0/8\" to delete in {c}:7"),
    ] {
        assert!(err.contains(&want), "want {want:?} in {err}");
        if let Some(n) = nginx_test(&dir, &conf) {
            assert!(n.contains(&want), "nginx says {n}");
        }
    }
}

/// `nginx -t` on `conf`: what it printed, `None` without nginx.
fn nginx_test(dir: &TempDir, conf: &std::path::Path) -> Option<String> {
    if !std::path::Path::new(NGINX).exists() {
        return None;
    }
    let out = std::process::Command::new(NGINX)
        .arg("-t")
        .arg("-p")
        .arg(dir.path())
        .arg("-e")
        .arg("/dev/stderr")
        .arg("-c")
        .arg(conf)
        .output()
        .unwrap();
    Some(String::from_utf8_lossy(&out.stderr).into_owned())
}
