//! The shape of the source tree, kept by a test (issue 10's limits):
//!
//! - no import loop of any length between folders of `src/` (a → b → a,
//!   a → b → c → a, …): a lower layer (the disk layer, HTTP framing, the
//!   cache store) never reaches up, so each can be changed and tested on
//!   its own; what it needs from above is handed in;
//! - no source file is over 700 lines before its unit tests;
//! - no function is over 80 lines, in `src/` and in `tests/` alike.
//!
//! It reads the code as text: `crate::NAME` paths (also inside `use
//! crate::{a, b}` groups) outside comments and `#[cfg(test)]` modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_FILE_LINES: usize = 700;
const MAX_FN_LINES: usize = 80;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The file's code before its unit tests, without comment lines.
fn code_lines(text: &str) -> Vec<&str> {
    text.lines()
        .take_while(|l| l.trim() != "#[cfg(test)]")
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect()
}

/// The top-level modules `code` names through `crate::`.
fn crate_refs(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a::b, c}`: the first segment of each item (nested
            // braces belong to the items' own paths).
            let mut depth = 0;
            let mut item_start = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && (c.is_ascii_alphabetic() || c == '_') => {
                        out.insert(ident(&group[j..]));
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            out.insert(ident(rest));
        }
    }
    out
}

/// Folder → folders it imports, each with one file as the witness.
type Edges = BTreeMap<String, BTreeMap<String, String>>;

fn folder_edges() -> Edges {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut edges = Edges::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let mut parts = rel.components();
        let first = parts.next().unwrap().as_os_str().to_string_lossy();
        if parts.next().is_none() {
            continue; // lib.rs, main.rs: the roots tie everything together
        }
        let text = std::fs::read_to_string(f).unwrap();
        let code = code_lines(&text).join("\n");
        for to in crate_refs(&code) {
            if to != first {
                edges
                    .entry(first.to_string())
                    .or_default()
                    .entry(to)
                    .or_insert_with(|| rel.display().to_string());
            }
        }
    }
    edges
}

/// One import loop through `start`, as the folders in order, if any
/// (a depth-first walk that only visits folders after `start`, so each
/// loop is reported once, from its least folder).
fn loop_from(edges: &Edges, start: &str) -> Option<Vec<String>> {
    fn walk(
        edges: &Edges,
        start: &str,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        let here = path.last().unwrap().clone();
        for to in edges.get(&here).into_iter().flat_map(|m| m.keys()) {
            if to == start {
                return true;
            }
            if to.as_str() > start && seen.insert(to.clone()) {
                path.push(to.clone());
                if walk(edges, start, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start.to_string()];
    walk(edges, start, &mut path, &mut BTreeSet::new()).then_some(path)
}

#[test]
fn no_import_loop_between_folders_of_src() {
    let edges = folder_edges();
    let mut loops = Vec::new();
    for a in edges.keys() {
        if let Some(path) = loop_from(&edges, a) {
            let steps: Vec<String> = path
                .iter()
                .zip(path.iter().skip(1).chain([a]))
                .map(|(x, y)| format!("{x} → {y} ({})", edges[x][y]))
                .collect();
            loops.push(steps.join(", "));
        }
    }
    assert!(
        loops.is_empty(),
        "import loops between folders of src/:\n{}",
        loops.join("\n")
    );
}

#[test]
fn a_loop_of_three_folders_is_found() {
    let mut edges = Edges::new();
    for (a, b) in [
        ("config", "upstream"),
        ("upstream", "http"),
        ("http", "config"),
        ("http", "log"),
    ] {
        edges
            .entry(a.into())
            .or_default()
            .insert(b.into(), format!("{a}/x.rs"));
    }
    assert_eq!(
        loop_from(&edges, "config"),
        Some(vec!["config".into(), "upstream".into(), "http".into()])
    );
    assert_eq!(loop_from(&edges, "log"), None);
}

#[test]
fn files_and_functions_stay_small() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut over = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let rel = f.strip_prefix(&src).unwrap().display().to_string();
        let before_tests = text
            .lines()
            .take_while(|l| l.trim() != "#[cfg(test)]")
            .count();
        if before_tests > MAX_FILE_LINES {
            over.push(format!("{rel}: {before_tests} lines before its tests"));
        }
        over.extend(long_functions(&rel, &text));
    }
    assert!(over.is_empty(), "over the limits:\n{}", over.join("\n"));
}

/// The integration tests and their helpers (`tests/`, `tests/common/`)
/// keep the function limit too: a long test is split into named steps.
#[test]
fn test_functions_stay_small() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut files = Vec::new();
    rust_files(&tests, &mut files);
    files.sort();
    let over: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let rel = f.strip_prefix(&tests).unwrap().display().to_string();
            long_functions(
                &format!("tests/{rel}"),
                &std::fs::read_to_string(f).unwrap(),
            )
        })
        .collect();
    assert!(over.is_empty(), "over the limits:\n{}", over.join("\n"));
}

/// Every file directly in `tests/` runs: it is either a test binary of its
/// own (a `[[test]]` of Cargo.toml, which has `autotests = false`) or a
/// `mod` of exactly one of those (the `area_*.rs` binaries). A new test
/// file that is in neither would build nothing and pass unseen.
#[test]
fn every_test_file_is_in_one_binary() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let binaries: Vec<String> = manifest
        .lines()
        .filter_map(|l| l.strip_prefix("path = \"tests/"))
        .map(|l| l.trim_end_matches(".rs\"").to_string())
        .collect();
    let mut owners: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for b in &binaries {
        owners
            .entry(b.clone())
            .or_default()
            .push("Cargo.toml".into());
        let text = std::fs::read_to_string(root.join(format!("tests/{b}.rs"))).unwrap();
        for m in text.lines().filter_map(|l| l.strip_prefix("mod ")) {
            let m = m.trim_end_matches(';');
            if m != "common" {
                owners.entry(m.to_string()).or_default().push(b.clone());
            }
        }
    }
    let mut wrong = Vec::new();
    for e in std::fs::read_dir(root.join("tests")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".rs") {
            match owners.get(stem).map(Vec::len) {
                Some(1) => {}
                Some(n) => wrong.push(format!("tests/{name} is in {n} binaries")),
                None => wrong.push(format!(
                    "tests/{name} is in no test binary: add `mod {stem};` to its area's tests/area_*.rs"
                )),
            }
        }
    }
    wrong.sort();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// One line for each function of `text` over [`MAX_FN_LINES`], named by
/// `rel` and its line. rustfmt closes a function's body with `}` at the
/// indent of its `fn` line.
fn long_functions(rel: &str, text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut over = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        if !is_fn_line(t) {
            continue;
        }
        // A declaration without a body (a trait's) ends with `;` before
        // any `{`.
        let sig_end = lines[i..]
            .iter()
            .map(|x| x.trim_end())
            .find(|x| x.ends_with('{') || x.ends_with(';'));
        if sig_end.is_none_or(|x| x.ends_with(';')) {
            continue;
        }
        let indent = l.len() - t.len();
        let close = format!("{}}}", " ".repeat(indent));
        let Some(len) = lines[i + 1..].iter().position(|x| *x == close) else {
            continue;
        };
        if len + 2 > MAX_FN_LINES {
            let name: String = t
                .split("fn ")
                .nth(1)
                .unwrap_or("")
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            over.push(format!("{rel}:{}: fn {name} is {} lines", i + 1, len + 2));
        }
    }
    over
}

/// Whether a trimmed line opens a function.
fn is_fn_line(t: &str) -> bool {
    [
        "fn ",
        "pub fn ",
        "pub(crate) fn ",
        "pub(super) fn ",
        "async fn ",
        "pub async fn ",
        "pub(crate) async fn ",
        "pub(super) async fn ",
    ]
    .iter()
    .any(|p| t.starts_with(p))
}

#[test]
fn crate_paths_are_read_from_groups_too() {
    let code =
        "use crate::{disk::{Io, OpenFile}, http::context};\nlet x = crate::log::Level::Crit;";
    let got: Vec<String> = crate_refs(code).into_iter().collect();
    assert_eq!(got, ["disk", "http", "log"]);
}
