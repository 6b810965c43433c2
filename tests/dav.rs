//! WebDAV (`dav_methods`) on the real binary beside Debian's nginx
//! (porter alone, saying so, without `/usr/sbin/nginx`): the same
//! requests to each, over a docroot of its own, then the statuses and
//! headers compared and the files each left on disk compared (names,
//! kinds, contents, modes). PUT (new, replaced, chunked, to a
//! collection, with `Content-Range`, with escapes and UTF-8, over a
//! directory, `create_full_put_path`, `dav_access`), DELETE (file,
//! tree, `Depth`, `min_delete_depth`), MKCOL, COPY and MOVE (files,
//! trees, `Overwrite`, `Depth`, `Destination` forms, another host, `..`),
//! bodies refused with 415, `client_max_body_size`.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::common::beside::ask;
use crate::common::{one_server_conf, Nginx, Server, TempDir};

/// The server block both run; `{ROOT}` is each one's own docroot.
const SERVER: &str = "absolute_redirect off;\n root {ROOT};\n\
    location / { dav_methods PUT DELETE MKCOL COPY MOVE; }\n\
    location /full/ { dav_methods PUT; create_full_put_path on; dav_access group:rw all:r; }\n\
    location /min/ { dav_methods DELETE; min_delete_depth 3; }\n\
    location /small/ { dav_methods PUT; client_max_body_size 10; }\n\
    location /i/ { alias {ROOT}/al/; dav_methods PUT COPY MOVE DELETE; }\n\
    location /ro/ { }\n";

/// A docroot both servers' workers (`nobody`) may write.
fn docroot(tag: &str) -> TempDir {
    let d = TempDir::new(tag);
    for sub in [
        "", "tree", "tree/sub", "al", "min", "min/a", "min/a/b", "small", "ro",
    ] {
        let p = d.path().join(sub);
        std::fs::create_dir_all(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    d.write("tree/one", "ONE");
    d.write("tree/sub/two", "TWO");
    d.write("old", "OLD");
    d.write("min/a/b/deep", "x");
    d.write("min/top", "x");
    d.write("al/a", "alias");
    d
}

fn put(path: &str, body: &str, extra: &str) -> String {
    format!(
        "PUT {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Content-Length: {}\r\n{extra}\r\n{body}",
        body.len()
    )
}

fn call(method: &str, path: &str, extra: &str) -> String {
    format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{extra}\r\n")
}

/// Marks a request current NGINX refuses where nginx 1.22 goes on: 403
/// for paths that are the same or inside each other ("point to the same
/// location", "could not be COPYed to collection": 1.22 truncates a file
/// copied onto itself, copies a tree into itself), 400 for a
/// `Destination` outside an alias location's prefix. porter follows
/// current NGINX, and nginx 1.22 is not asked.
const NEWER: &str = "X-Newer-Nginx: ";

fn newer(raw: String, status: u16) -> String {
    raw.replacen("\r\n", &format!("\r\n{NEWER}{status}\r\n"), 1)
}

/// The requests, in order (each run on both servers).
fn requests() -> Vec<String> {
    let chunked = "Transfer-Encoding: chunked\r\n";
    vec![
        put("/new", "0123456789", ""),
        put("/new", "", ""),
        put("/sp%20ace", "s", ""),
        put("/%D0%BC%D0%B8", "utf", ""),
        format!(
            "{}{}",
            call("PUT", "/ch", chunked),
            "3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n"
        ),
        put("/coll/", "x", ""),
        put("/rng", "x", "Content-Range: bytes 0-0/2\r\n"),
        put("/tree", "x", ""),
        put("/nodir/f", "x", ""),
        put("/full/a/b/f", "deep", ""),
        put("/small/big", "01234567890", ""),
        put("/ro/x", "x", ""),
        put("/i/put", "al", ""),
        call("MKCOL", "/col/", ""),
        call("MKCOL", "/col/", ""),
        call("MKCOL", "/nocol", ""),
        call("MKCOL", "/no/col/", ""),
        format!("{}x", call("MKCOL", "/b/", "Content-Length: 1\r\n")),
        call("COPY", "/old", "Destination: /copied\r\n"),
        call("COPY", "/old", "Destination: http://localhost/copied2\r\n"),
        call("COPY", "/old", "Destination: http://other/x\r\n"),
        call("COPY", "/old", "Destination: /../x\r\n"),
        call("COPY", "/old", "Destination: /new\r\nOverwrite: F\r\n"),
        call("COPY", "/old", "Destination: /new\r\nOverwrite: x\r\n"),
        newer(call("COPY", "/old", "Destination: /old\r\n"), 403),
        call("COPY", "/old", ""),
        call("COPY", "/old", "Destination: /col/\r\n"),
        call("COPY", "/tree/", "Destination: /tree2/\r\n"),
        newer(call("COPY", "/tree/", "Destination: /tree/sub/x/\r\n"), 403),
        call("COPY", "/old", "Destination: /c1\r\nDepth: 1\r\n"),
        call("MOVE", "/copied", "Destination: /moved\r\n"),
        call("MOVE", "/tree2/", "Destination: /tree3/\r\n"),
        call("MOVE", "/moved", "Destination: /moved2\r\nDepth: 0\r\n"),
        call("COPY", "/i/a", "Destination: /i/b\r\n"),
        newer(call("COPY", "/i/a", "Destination: /elsewhere\r\n"), 400),
        call("DELETE", "/moved", ""),
        call("DELETE", "/moved", ""),
        call("DELETE", "/tree3", ""),
        call("DELETE", "/tree3/", "Depth: 1\r\n"),
        call("DELETE", "/tree3/", ""),
        call("DELETE", "/old", "Depth: bogus\r\n"),
        call("DELETE", "/min/top", ""),
        call("DELETE", "/min/a/b/deep", ""),
        call("DELETE", "/new/x", ""),
        format!(
            "{}",
            call("DELETE", "/new", chunked) + "1\r\nx\r\n0\r\n\r\n"
        ),
        call("GET", "/sp%20ace", ""),
    ]
}

/// What of an answer both must agree on.
fn seen(port: u16, raw: &str) -> String {
    let r = ask(port, raw);
    let mut s = format!("{}", r.status);
    for h in ["location", "content-length", "transfer-encoding"] {
        if let Some(v) = r.header(h) {
            s.push_str(&format!(" {h}={v}"));
        }
    }
    if raw.starts_with("GET ") {
        s.push_str(&format!(" body={}", String::from_utf8_lossy(&r.body)));
    }
    s
}

/// Every file and directory under `root`: kind, mode, contents.
fn tree(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let mode = m.permissions().mode() & 0o777;
            if m.is_dir() {
                out.insert(rel, format!("dir {mode:o}"));
                stack.push(p);
            } else {
                let body = String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned();
                out.insert(rel, format!("file {mode:o} {body}"));
            }
        }
    }
    out
}

#[test]
fn dav_methods_answer_and_leave_files_as_nginx() {
    let ours = docroot("dav-porter");
    let conf = SERVER.replace("{ROOT}", &ours.path().display().to_string());
    let porter = Server::start(&one_server_conf("", &conf));
    let theirs = docroot("dav-nginx");
    let nconf = SERVER.replace("{ROOT}", &theirs.path().display().to_string());
    let nginx = Nginx::start(&format!(
        "server {{\n listen 127.0.0.1:{{PORT}};\n server_name localhost;\n{nconf}\n}}\n"
    ));
    let expected_first = ["201 location=/new content-length=0", "204"];
    for (i, raw) in requests().iter().enumerate() {
        let got = seen(porter.port, raw);
        if i < 2 {
            assert_eq!(got, expected_first[i], "{raw}");
        }
        if let Some(at) = raw.find(NEWER) {
            let want = &raw[at + NEWER.len()..at + NEWER.len() + 3];
            assert!(got.starts_with(want), "{got}: {raw}");
            continue;
        }
        if let Some(n) = &nginx {
            assert_eq!(got, seen(n.port, raw), "request {i}: {raw}");
        }
    }
    let mine = tree(ours.path());
    assert_eq!(mine.get("new").map(String::as_str), Some("file 600 "));
    assert_eq!(mine.get("ch").map(String::as_str), Some("file 600 abcdefg"));
    assert_eq!(
        mine.get("full/a/b/f").map(String::as_str),
        Some("file 664 deep")
    );
    match &nginx {
        Some(_) => assert_eq!(mine, tree(theirs.path()), "files left on disk"),
        None => eprintln!("nginx not installed: checked porter alone"),
    }
    let log = porter.read("logs/error.log");
    assert!(!log.contains("[alert]"), "{log}");
}
