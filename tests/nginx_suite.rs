//! NGINX's own test suite (nginx-tests, BSD-2-Clause: `tests/nginx-suite/LICENSE`):
//! the files of it that porter passes are vendored under
//! `tests/nginx-suite/` with `lib/Test/Nginx*`, and run here against the
//! built binary by `tests/nginx-suite/run`, so a change that breaks one of
//! them cannot land. A file that fails or skips (for a module `porter -V`
//! stops claiming, a Perl module or a tool missing) three times — once among the
//! others, then twice alone — fails this test: each file here passed on porter
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
    // Some files time their checks (a delay, a rate), and some read the
    // access log as soon as the response ends, where porter's log thread may
    // not have written the line yet (`src/log/mod.rs`); on a loaded machine
    // one can miss. Those are run again one at a time, twice: a regression
    // fails all three times.
    let mut names: Vec<String> = bad
        .iter()
        .filter_map(|l| l.split('\t').next())
        .map(str::to_string)
        .collect();
    let mut again = Vec::new();
    let mut summary = String::new();
    for _ in 0..2 {
        let files: Vec<&str> = names.iter().map(String::as_str).collect();
        (again, summary) = run(&dir, "1", &files);
        names = again
            .iter()
            .filter_map(|l| l.split('\t').next())
            .map(str::to_string)
            .collect();
        if again.is_empty() {
            return;
        }
    }
    panic!(
        "nginx-tests files that no longer pass on porter:\n{}\n{summary}\n(first run: {})",
        again.join("\n"),
        bad.join("; ")
    );
}
