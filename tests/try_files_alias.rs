//! `try_files` under `alias`, as NGINX's try_files phase maps it: in a
//! regex location the alias is the whole path and the name follows it (the
//! file found is then served as alias + URI); in a location nested in a
//! prefix location with `alias`, the inherited alias replaces what the
//! outer location matched, for the test and the file served. nginx
//! answers the same requests the same.

use crate::common::*;

/// Status and body of each request.
fn answers(port: u16) -> Vec<String> {
    [
        "/alias-re.html",
        "/alias-nested/found.html",
        "/alias-nested/missing.html",
        "/prefix/found.html",
    ]
    .iter()
    .map(|path| {
        let r = get(port, path);
        let body = if r.status == 200 {
            r.text()
        } else {
            String::new()
        };
        format!("{path}: {} {body}", r.status)
    })
    .collect()
}

#[test]
fn try_files_finds_files_under_an_alias() {
    let dir = TempDir::new("tfalias");
    for (f, text) in [
        ("directory/alias-re.html", "in directory"),
        ("found.html", "found"),
    ] {
        let p = dir.write(f, text);
        set_mode(&p, 0o644);
    }
    set_mode(&dir.path().join("directory"), 0o755);
    let d = dir.path().display();
    let server = format!(
        "location ~ /alias-re.html {{ alias {d}/directory; try_files $uri =404; }}\n\
         location /alias-nested/ {{ alias {d}/; location ~ html {{ try_files $uri =404; }} }}\n\
         location /prefix/ {{ alias {d}/; try_files $uri =404; }}"
    );
    let (p, n) = both("", &server);
    let porter = answers(p.port);
    assert_eq!(
        porter,
        [
            "/alias-re.html: 200 in directory",
            "/alias-nested/found.html: 200 found",
            "/alias-nested/missing.html: 404 ",
            "/prefix/found.html: 200 found",
        ]
    );
    if let Some(n) = n {
        assert_eq!(porter, answers(n.port));
    }
}
