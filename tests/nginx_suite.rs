//! NGINX's own test suite (nginx-tests, BSD-2-Clause: `tests/nginx-suite/LICENSE`):
//! the files of it that porter passes are vendored under
//! `tests/nginx-suite/` with `lib/Test/Nginx*`, and run here against the
//! built binary by `tests/nginx-suite/run`, so a change that breaks one of
//! them cannot land. A file that fails or skips (for a module `porter -V`
//! stops claiming, a Perl module or a tool missing) twice — once among the
//! others, then alone — fails this test: each file here passed on porter
//! when it was vendored.
//! `docs/nginx-tests.md` says how the list was chosen and what of the
//! rest of the suite fails and why.

mod common;

use std::path::Path;
use std::process::Command;

/// Runs `files` (all when empty) with the runner; the lines of those
/// that did not pass, and the runner's summary.
fn run(dir: &Path, jobs: &str, files: &[&str]) -> (Vec<String>, String) {
    let out = Command::new("/usr/bin/python3")
        .arg(dir.join("run"))
        .arg(dir)
        .arg(common::BIN)
        .args(["-j", jobs, "-t", "120"])
        .args(files)
        .output()
        .expect("python3 runs tests/nginx-suite/run");
    let table = String::from_utf8_lossy(&out.stdout);
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(!table.is_empty(), "no table: {summary}");
    let bad = table
        .lines()
        .filter(|l| l.split('\t').nth(1) != Some("pass"))
        .map(str::to_string)
        .collect();
    (bad, summary.lines().last().unwrap_or("").to_string())
}

#[test]
fn vendored_nginx_tests_pass() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nginx-suite");
    let (bad, _) = run(&dir, "2", &[]);
    if bad.is_empty() {
        return;
    }
    // Some files time their checks (a delay, a rate); on a loaded machine
    // one can miss. Those are run again one at a time: a regression fails
    // both times.
    let names: Vec<&str> = bad.iter().filter_map(|l| l.split('\t').next()).collect();
    let (again, summary) = run(&dir, "1", &names);
    assert!(
        again.is_empty(),
        "nginx-tests files that no longer pass on porter:\n{}\n{summary}\n(first run: {})",
        again.join("\n"),
        bad.join("; ")
    );
}
