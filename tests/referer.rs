//! `valid_referers` and `$invalid_referer`, as NGINX's referer module
//! answers them, on the real binary beside Debian's nginx (the comparison
//! is skipped, saying so, without `/usr/sbin/nginx`): `none`, `blocked`,
//! `server_names`, hostnames with a URI part and wildcards, caseless
//! regular expressions, the hotlink-protection idiom `if ($invalid_referer)
//! { return 403; }`, and bad lines refused with NGINX's messages.

use crate::common::*;

fn ask(port: u16, path: &str, referer: Option<&str>) -> Resp {
    let r = referer.map_or(String::new(), |r| format!("Referer: {r}\r\n"));
    raw(
        port,
        format!("GET {path} HTTP/1.1\r\nHost: x\r\n{r}Connection: close\r\n\r\n").as_bytes(),
    )
}

const HTTP: &str = "server {\n  listen 127.0.0.1:{PORT};\n  server_name www.site.test *.cdn.test ~^img\\d+\\.site\\.test$;\n\
  location / {\n    valid_referers none blocked server_names example.com/gal/ *.example.org www.ex.* ~\\.google\\.;\n\
    return 200 \"[$invalid_referer]\";\n  }\n\
  location /strict/ {\n    valid_referers .example.com;\n    if ($invalid_referer) { return 403; }\n    return 200 ok;\n  }\n\
  location /open/ { return 200 \"[$invalid_referer]\"; }\n}";

#[test]
fn referers_are_judged_as_nginx_judges_them() {
    let cases: &[(&str, Option<&str>, &str)] = &[
        ("/", None, "[]"),
        ("/", Some(""), "[]"),
        ("/", Some("junk"), "[]"),
        ("/", Some("http://EXAMPLE.com:8080/gal/x.jpg"), "[]"),
        ("/", Some("http://example.com/other/"), "[1]"),
        ("/", Some("https://a.b.example.org/"), "[]"),
        ("/", Some("https://example.org/"), "[1]"),
        ("/", Some("http://www.ex.co.uk/x"), "[]"),
        ("/", Some("http://www.Google.de/search?q=1"), "[]"),
        ("/", Some("http://www.site.test/page"), "[]"),
        ("/", Some("http://a.cdn.test/"), "[]"),
        ("/", Some("http://cdn.test/"), "[1]"),
        ("/", Some("http://img42.site.test/"), "[]"),
        ("/", Some("http://evil.test/"), "[1]"),
        ("/", Some("ftp://example.com/gal/"), "[]"),
        ("/strict/", None, "403"),
        ("/strict/", Some("junk"), "403"),
        ("/strict/", Some("https://example.com/"), "ok"),
        ("/strict/", Some("https://deep.www.example.com/"), "ok"),
        ("/strict/", Some("https://example.net/"), "403"),
        ("/open/", Some("http://evil.test/"), "[]"),
    ];
    let srv = Server::start(&one_worker_conf(HTTP));
    let seen = |r: Resp| {
        if r.status == 200 {
            r.text()
        } else {
            r.status.to_string()
        }
    };
    for (path, referer, want) in cases {
        assert_eq!(
            seen(ask(srv.port, path, *referer)),
            *want,
            "{path} {referer:?}"
        );
    }
    let Some(ngx) = Nginx::start(HTTP) else {
        eprintln!("skipping the comparison: {NGINX} is not installed");
        return;
    };
    for (path, referer, _) in cases {
        assert_eq!(
            seen(ask(srv.port, path, *referer)),
            seen(ask(ngx.port, path, *referer)),
            "{path} {referer:?}"
        );
    }
}

#[test]
fn bad_lines_name_file_and_line() {
    let cases = [
        ("valid_referers a*b;", "invalid hostname or wildcard \"a*b\""),
        ("valid_referers x.com X.com/y;", "conflicting parameter \"x.com\""),
        ("valid_referers ~;", "empty regex in \"~\""),
        ("valid_referers \"\";", "invalid referer \"\""),
        (
            "valid_referers none blocked;",
            "the \"none\" or \"blocked\" referers are specified in the \"valid_referers\" directive without any valid referer",
        ),
    ];
    for (line, msg) in cases {
        let dir = TempDir::new("referer-bad");
        let conf = dir.write(
            "bad.conf",
            format!("events {{}}\nhttp {{\nserver {{\nlocation / {{\n{line}\n}}\n}}\n}}\n"),
        );
        let out = run(&["-t", "-c", conf.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{line}: {err}");
        let at = format!("{}:5", conf.display());
        assert!(
            err.contains(msg) && err.contains(&at),
            "{line}: want {msg:?} at {at}, got {err}"
        );
        if std::path::Path::new(NGINX).exists() {
            let out = std::process::Command::new(NGINX)
                .args(["-t", "-e", "/dev/stderr", "-p"])
                .arg(dir.path())
                .arg("-c")
                .arg(&conf)
                .output()
                .unwrap();
            let n = String::from_utf8_lossy(&out.stderr);
            assert!(n.contains(msg), "nginx says {n}");
        }
    }
}
