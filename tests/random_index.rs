//! `random_index on`: a URI ending in `/` is answered by one of its
//! directory's regular files (through symlinks; dot files, directories
//! and links to directories left out), picked at random, by an internal
//! redirect that keeps the arguments; a directory with none goes on to
//! the index module. Compared with Debian's nginx on the same tree.

use std::collections::BTreeSet;

use crate::common::{both, raw, Resp, TempDir};

fn tree() -> TempDir {
    let root = TempDir::new("random-index");
    root.write("x/one", "ONE");
    root.write("x/.hidden", "HIDDEN");
    root.write("x/d/inner", "INNER");
    root.write("f2", "LINKED");
    std::os::unix::fs::symlink(root.path().join("f2"), root.path().join("x/link")).unwrap();
    std::os::unix::fs::symlink(root.path().join("x/d"), root.path().join("x/dirlink")).unwrap();
    root.write("dirs/only/sub/inner", "x");
    root
}

fn server(root: &TempDir) -> String {
    format!(
        "    root {};\n    location / {{ random_index on; add_header X-Args $args; }}",
        root.path().display()
    )
}

fn send(port: u16, line: &str) -> Resp {
    raw(
        port,
        format!("{line} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

#[test]
fn a_random_regular_file_answers_the_directory() {
    let root = tree();
    let (p, n) = both("", &server(&root));
    let mut seen = BTreeSet::new();
    for _ in 0..60 {
        let r = send(p.port, "GET /x/");
        assert_eq!(r.status, 200);
        seen.insert(r.text());
    }
    let want: BTreeSet<String> = ["LINKED", "ONE"].iter().map(|s| s.to_string()).collect();
    assert_eq!(seen, want);
    assert_eq!(send(p.port, "GET /x/?a=b").header("x-args"), Some("a=b"));
    let Some(n) = n else { return };
    for line in [
        "GET /x/?a=b",
        "HEAD /x/",
        "POST /x/",
        "GET /dirs/only/",
        "GET /nothing/",
    ] {
        let (pr, nr) = (send(p.port, line), send(n.port, line));
        assert_eq!(pr.status, nr.status, "{line}");
        assert_eq!(pr.header("x-args"), nr.header("x-args"), "{line}");
        if pr.status == 200 {
            assert!(
                ["ONE", "LINKED", ""].contains(&pr.text().as_str()),
                "{line}"
            );
        }
    }
}
