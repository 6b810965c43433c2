//! A response that is already encoded (gzip_static's `.gz`, a proxied
//! gzip) is labelled with its charset only when no recoding is needed:
//! NGINX's charset filter cannot recode it and leaves it alone. And the
//! gzip filter clears a proxied `Accept-Ranges` as its own. nginx answers
//! the same requests the same.

use crate::common::*;

/// `Content-Type`, `Content-Encoding` and `Accept-Ranges` of each request.
fn answers(port: u16) -> Vec<String> {
    [
        ("/t1.html", true),
        ("/t2.html", false),
        ("/t2.html", true),
        ("/p.aa/t1.html", true),
        ("/proxy/t3.html", true),
    ]
    .iter()
    .map(|(path, gzip)| {
        let ae = if *gzip {
            "Accept-Encoding: gzip\r\n"
        } else {
            ""
        };
        let r = get_with(port, path, ae);
        format!(
            "{path} {gzip}: {} {:?} {:?} {:?}",
            r.status,
            r.header("content-type"),
            r.header("content-encoding"),
            r.header("accept-ranges")
        )
    })
    .collect()
}

#[test]
fn encoded_bodies_keep_their_charset_only_when_not_recoded() {
    let dir = TempDir::new("gzcharset");
    for (f, text) in [
        ("t1.html", "X"),
        ("t1.html.gz", "X"),
        ("t2.html", "XXXX"),
        ("t2.html.gz", "XXXX"),
        ("t3.html", &*"X".repeat(64)),
    ] {
        let p = dir.write(f, text);
        set_mode(&p, 0o644);
    }
    let http = "charset_map B A { 58 59; }";
    let server = format!(
        "root {};\n types {{ text/html html; }}\n\
         location /t1 {{ charset utf-8; gzip_static on; }}\n\
         location /t2 {{ gzip_static on; charset A; source_charset B; }}\n\
         location /p.aa/ {{ charset A; source_charset A; proxy_pass http://127.0.0.1:{{PORT}}/; }}\n\
         location /proxy/ {{ gzip on; proxy_pass http://127.0.0.1:{{PORT}}/; }}",
        dir.path().display()
    );
    let (p, n) = both(http, &server);
    let porter = answers(p.port);
    assert_eq!(
        porter[2],
        "/t2.html true: 200 Some(\"text/html\") Some(\"gzip\") None"
    );
    assert!(porter[4].ends_with("Some(\"gzip\") None"), "{porter:#?}");
    if let Some(n) = n {
        assert_eq!(porter, answers(n.port));
    }
}
