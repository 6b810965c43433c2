//! `disable_symlinks off | on | if_not_owner [from=part]` beside Debian's
//! nginx 1.22 on the same tree: links to files and to directories, links
//! owned as their target is and links that are not (`lchown`ed to
//! nobody; the test runs as root, as CI does), a document root reached
//! through a link with and without `from=$document_root`, and `from=`
//! equal to the whole path. Status and body must be nginx's for each.

use std::os::unix::fs::{lchown, symlink};
use std::path::Path;

use crate::common::*;

const KINDS: &[&str] = &["on", "owner", "off", "via", "viafrom", "viaowner", "whole"];

/// Each kind's directory: a file, a link to it, a link to it owned by
/// nobody, a directory, links to that (one owned by nobody).
fn tree(html: &Path) {
    for k in KINDS {
        let d = html.join(k);
        std::fs::create_dir_all(d.join("sub")).unwrap();
        std::fs::write(d.join("real.txt"), format!("real {k}\n")).unwrap();
        std::fs::write(d.join("sub/f.txt"), format!("sub {k}\n")).unwrap();
        symlink("real.txt", d.join("link.txt")).unwrap();
        symlink("real.txt", d.join("foreign.txt")).unwrap();
        symlink("sub", d.join("dirlink")).unwrap();
        symlink("sub", d.join("foreign_dir")).unwrap();
        for l in ["foreign.txt", "foreign_dir"] {
            lchown(d.join(l), Some(65534), Some(65534))
                .expect("lchown to nobody (the test runs as root, as CI does)");
        }
    }
}

fn server_body(prefix: &str) -> String {
    format!(
        "root {prefix}/html;\n\
         location /on/ {{ disable_symlinks on; }}\n\
         location /owner/ {{ disable_symlinks if_not_owner; }}\n\
         location /off/ {{ disable_symlinks off; }}\n\
         location /via/ {{ root {prefix}/htlink; disable_symlinks on; }}\n\
         location /viafrom/ {{ root {prefix}/htlink; disable_symlinks on from=$document_root; }}\n\
         location /viaowner/ {{ root {prefix}/htlink;\n\
           disable_symlinks if_not_owner from=$document_root; }}\n\
         location /whole/ {{ disable_symlinks on from=$request_filename; }}"
    )
}

const FILES: &[&str] = &[
    "real.txt",
    "link.txt",
    "foreign.txt",
    "sub/f.txt",
    "dirlink/f.txt",
    "foreign_dir/f.txt",
    "nope.txt",
    "link.txt/x",
];

#[test]
fn symlinks_are_refused_as_nginx_refuses_them() {
    // One tree, served by both: nginx's workers run as nobody, so it is
    // made readable to all.
    let dir = TempDir::new("symlinks");
    let prefix = dir.path().to_str().unwrap().to_string();
    tree(&dir.path().join("html"));
    symlink(dir.path().join("html"), dir.path().join("htlink")).unwrap();
    let body = server_body(&prefix);
    let n = Nginx::start(&format!(
        "server {{\n listen 127.0.0.1:{{PORT}};\n server_name localhost;\n{body}\n}}\n"
    ))
    .expect("Debian's nginx (/usr/sbin/nginx) is needed to compare with");
    // Each of porter's routes to the disk: inline, the thread pool (the
    // fast path first), the ring with `open_file_cache` (asked twice, the
    // second answer from the cache).
    let mut statuses = Vec::new();
    for route in [
        "aio off;",
        "aio threads;",
        "aio on; open_file_cache max=64;",
    ] {
        let p = Server::start(&one_server_conf("", &format!("{route}\n{body}")));
        statuses.clear();
        for k in KINDS {
            for f in FILES {
                let uri = format!("/{k}/{f}");
                let theirs = get(n.port, &uri);
                for _ in 0..2 {
                    let ours = get(p.port, &uri);
                    // Error pages name the server: bodies compared on success.
                    let body = |r: &Resp| (r.status == 200).then(|| r.text());
                    assert_eq!(
                        (ours.status, body(&ours)),
                        (theirs.status, body(&theirs)),
                        "porter ({route}) vs nginx on {uri}"
                    );
                }
                statuses.push((uri, theirs.status));
            }
        }
    }
    // What nginx answers, spelled out, so that two servers both ignoring
    // the directive cannot pass.
    let status = |u: &str| statuses.iter().find(|(x, _)| x == u).unwrap().1;
    assert_eq!(status("/off/foreign.txt"), 200);
    assert_eq!(status("/on/link.txt"), 403);
    // A link on the way is opened as itself by NGINX's walk: ENOTDIR, 404.
    assert_eq!(status("/on/dirlink/f.txt"), 404);
    assert_eq!(status("/owner/link.txt"), 200);
    assert_eq!(status("/owner/dirlink/f.txt"), 200);
    assert_eq!(status("/owner/foreign.txt"), 403);
    assert_eq!(status("/owner/foreign_dir/f.txt"), 403);
    assert_eq!(status("/via/real.txt"), 404);
    assert_eq!(status("/viafrom/real.txt"), 200);
    assert_eq!(status("/viafrom/link.txt"), 403);
    assert_eq!(status("/viaowner/link.txt"), 200);
    assert_eq!(status("/viaowner/foreign.txt"), 403);
    assert_eq!(status("/whole/foreign.txt"), 200);
}

#[test]
fn disable_symlinks_lines_are_checked_as_nginx_checks_them() {
    let refused = |line: &str| {
        let conf =
            one_server_conf("", &format!("location / {{ {line} }}")).replace("{PORT}", "8080");
        config_error(&conf)
    };
    let e = refused("disable_symlinks maybe;");
    assert!(e.contains("invalid parameter \"maybe\""), "{e}");
    let e = refused("disable_symlinks from=/srv;");
    assert!(
        e.contains("must have \"off\", \"on\" or \"if_not_owner\" parameter"),
        "{e}"
    );
    let e = refused("disable_symlinks off from=/srv;");
    assert!(
        e.contains("\"from=\" cannot be used with \"off\" parameter"),
        "{e}"
    );
    let e = refused("disable_symlinks on off;");
    assert!(e.contains("duplicate parameters \"on off\""), "{e}");
}
