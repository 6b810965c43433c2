//! `porter -V` in NGINX's form: the NGINX release porter answers as and a
//! `configure arguments:` line with `--with-…` for the optional modules it
//! has and `--without-…` for the default ones it lacks. Checked the way
//! NGINX's test suite reads it: `Test::Nginx`'s `has_module` and
//! `has_version` (vendored in tests/nginx-suite/lib) asked about porter and
//! about Debian's nginx 1.22.

use crate::common;

use std::path::Path;
use std::process::Command;

/// `Test::Nginx->new->has_module(m)` (or `has_version(v)`) for `binary`,
/// one answer per line.
fn ask(binary: &str, calls: &[&str]) -> Vec<String> {
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nginx-suite/lib");
    let script = format!(
        "my $t = Test::Nginx->new; {}",
        calls
            .iter()
            .map(|c| format!("print(($t->{c} ? 1 : 0), qq(\\n));"))
            .collect::<String>()
    );
    let out = Command::new("perl")
        .arg("-I")
        .arg(&lib)
        .args(["-MTest::Nginx", "-e", &script])
        .env("TEST_NGINX_BINARY", binary)
        .output()
        .expect("perl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

const CALLS: &[&str] = &[
    "has_module('http')",
    "has_module('proxy')",
    "has_module('rewrite')",
    "has_module('http_ssl')",
    "has_module('sni')",
    "has_module('realip')",
    "has_module('sub')",
    "has_module('http_v2')",
    "has_module('slice')",
    "has_module('cache')",
    "has_module('memcached')",
    "has_module('stream')",
    "has_module('mail')",
    "has_module('perl')",
    "has_version('1.22.1')",
    "has_version('1.23.0')",
];

#[test]
fn test_nginx_reads_what_porter_has() {
    let porter = ask(common::BIN, CALLS);
    let want = [
        "1", "1", "1", "1", "1", "1", "1", "1", "1", "1", "0", "1", "0", "0", "1", "0",
    ];
    for ((call, got), want) in CALLS.iter().zip(&porter).zip(want) {
        assert_eq!(got, want, "porter: {call}");
    }
    // Debian's nginx says the same of the modules both have.
    if Path::new("/usr/sbin/nginx").exists() {
        let nginx = ask("/usr/sbin/nginx", CALLS);
        for (i, call) in CALLS.iter().enumerate().take(10) {
            assert_eq!(nginx[i], porter[i], "nginx and porter differ on {call}");
        }
        assert_eq!(nginx[14..], porter[14..], "has_version");
    }
}

#[test]
fn without_lists_only_what_porter_refuses() {
    let out = common::run(&["-V"]);
    let text = String::from_utf8_lossy(&out.stderr);
    let args = text
        .lines()
        .find_map(|l| l.strip_prefix("configure arguments: "))
        .expect("a configure arguments line");
    assert!(text.contains("nginx version: nginx/1.22.1"), "{text}");
    let dir = common::TempDir::new("cfgargs");
    for word in args.split(' ') {
        let Some(module) = word.strip_prefix("--without-") else {
            continue;
        };
        // The module's directive is an unknown one to porter.
        let directive = match module {
            "http_memcached_module" => "memcached_pass x;",
            "http_browser_module" => "modern_browser msie 5.0;",
            _ => continue,
        };
        let conf = dir.write(
            "t.conf",
            format!("events {{}} http {{ server {{ location / {{ {directive} }} }} }}"),
        );
        let out = common::run(&[
            "-t",
            "-p",
            dir.path().to_str().unwrap(),
            "-c",
            conf.to_str().unwrap(),
        ]);
        assert!(!out.status.success(), "{module} claimed missing but loads");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("unknown directive"),
            "{module}"
        );
    }
}
