//! `If-Range` with a date against a `Last-Modified` that `add_header`
//! set: the date it names is the response's (NGINX's
//! `ngx_http_set_last_modified`), so a matching `If-Range` gets the range
//! and another the whole file; an empty `add_header Last-Modified ""`
//! leaves no date to match. nginx answers the same.

use crate::common::*;

const DATE: &str = "Mon, 28 Sep 1970 06:00:00 GMT";

/// Status and `Last-Modified` for each `If-Range`.
fn answers(port: u16) -> Vec<String> {
    let own = get(port, "/t1.html")
        .header("last-modified")
        .unwrap()
        .to_string();
    [
        ("/t1.html", own.as_str()),
        ("/t1.html", "wrong"),
        ("/t2.html", "wrong"),
        ("/t3.html", "wrong"),
        ("/t3.html", DATE),
    ]
    .iter()
    .map(|(path, ir)| {
        let r = get_with(
            port,
            path,
            &format!("Range: bytes=0-9\r\nIf-Range: {ir}\r\n"),
        );
        format!("{path} {ir}: {} {:?}", r.status, r.header("last-modified"))
    })
    .collect()
}

#[test]
fn if_range_compares_the_date_add_header_set() {
    let dir = TempDir::new("ifrange");
    for f in ["t1.html", "t2.html", "t3.html"] {
        let p = dir.write(f, "X".repeat(100));
        set_mode(&p, 0o644);
        set_mode(dir.path(), 0o755);
    }
    let server = format!(
        "root {};\n\
         location /t2.html {{ add_header Last-Modified \"\"; }}\n\
         location /t3.html {{ add_header Last-Modified \"{DATE}\"; }}",
        dir.path().display()
    );
    let (p, n) = both("", &server);
    let porter = answers(p.port);
    let statuses: Vec<&str> = porter
        .iter()
        .map(|l| l.split(": ").nth(1).unwrap())
        .collect();
    assert!(statuses[0].starts_with("206"), "{porter:#?}");
    assert!(statuses[3].starts_with("200 Some(\"Mon, 28"), "{porter:#?}");
    assert!(statuses[4].starts_with("206"), "{porter:#?}");
    if let Some(n) = n {
        assert_eq!(porter, answers(n.port));
    }
}
