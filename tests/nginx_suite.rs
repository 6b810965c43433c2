//! NGINX's own test suite (nginx-tests, BSD-2-Clause: `tests/nginx-suite/LICENSE`):
//! the files of it that porter passes are vendored under
//! `tests/nginx-suite/` with `lib/Test/Nginx*`, and run here against the
//! built binary by `tests/nginx-suite/run`, so a change that breaks one of
//! them cannot land. A file that fails or skips (for a module `porter -V`
//! stops claiming, a Perl module or a tool missing) fails this test: each
//! file here passed on porter when it was vendored.
//! `docs/nginx-tests.md` says how the list was chosen and what of the
//! rest of the suite fails and why.

mod common;

use std::path::Path;
use std::process::Command;

#[test]
fn vendored_nginx_tests_pass() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nginx-suite");
    let out = Command::new("/usr/bin/python3")
        .arg(dir.join("run"))
        .arg(&dir)
        .arg(common::BIN)
        .args(["-j", "2", "-t", "120"])
        .output()
        .expect("python3 runs tests/nginx-suite/run");
    let table = String::from_utf8_lossy(&out.stdout);
    let summary = String::from_utf8_lossy(&out.stderr);
    let bad: Vec<&str> = table
        .lines()
        .filter(|l| l.split('\t').nth(1) != Some("pass"))
        .collect();
    assert!(
        !table.is_empty() && bad.is_empty(),
        "nginx-tests files that no longer pass on porter:\n{}\n{}",
        bad.join("\n"),
        summary.lines().last().unwrap_or("")
    );
}
