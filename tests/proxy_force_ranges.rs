//! `proxy_force_ranges on` (Mastodon's container config, media proxies):
//! a proxied 200 is served in a range although the upstream ignored the
//! `Range` and said `Accept-Ranges: none`; its `Accept-Ranges` is not
//! copied (the range filter sends its own). Without it the 200 passes
//! through whole. Debian's nginx answers the same requests side by side.

use crate::common::origin::*;
use crate::common::*;

/// Status, Content-Range, Accept-Ranges, Content-Length and body.
type Answer = (u16, Option<String>, Option<String>, Option<String>, Vec<u8>);

/// The answer to each request.
fn answers(port: u16) -> Vec<Answer> {
    [
        ("/forced", "Range: bytes=10-19\r\n"),
        ("/forced", "Range: bytes=990-\r\n"),
        ("/forced", "Range: bytes=5000-\r\n"),
        ("/forced", ""),
        ("/plain", "Range: bytes=10-19\r\n"),
    ]
    .iter()
    .map(|(path, h)| {
        let r = get_with(port, path, h);
        let f = |n: &str| r.header(n).map(String::from);
        (
            r.status,
            f("content-range"),
            f("accept-ranges"),
            f("content-length"),
            r.body.clone(),
        )
    })
    .collect()
}

#[test]
fn forced_ranges_are_cut_from_a_whole_proxied_200() {
    let body = pattern(1000, 7);
    let b = body.clone();
    let origin = Origin::start(move |_| Reply::ok(&b).header("Accept-Ranges", "none"));
    let http = format!(
        "server {{\n listen 127.0.0.1:{{PORT}};\n\
         location /forced {{ proxy_pass http://127.0.0.1:{0}; proxy_force_ranges on; }}\n\
         location /plain {{ proxy_pass http://127.0.0.1:{0}; }}\n}}\n",
        origin.port
    );
    let porter = Server::start(&format!(
        "daemon off;\nworker_processes 1;\nerror_log {{PREFIX}}/logs/error.log info;\n\
         events {{ worker_connections 64; }}\nhttp {{\n access_log off;\n{http}}}\n"
    ));
    let got = answers(porter.port);
    assert_eq!(got[0].0, 206, "{:?}", got[0]);
    assert_eq!(got[0].1.as_deref(), Some("bytes 10-19/1000"));
    assert_eq!(got[0].4, body[10..20].to_vec());
    assert_eq!(got[1].4, body[990..].to_vec());
    assert_eq!(got[2].0, 416);
    assert_eq!(got[3].2.as_deref(), Some("bytes"), "{:?}", got[3]);
    assert_eq!(got[4].0, 200);
    assert_eq!(got[4].2.as_deref(), Some("none"));
    let Some(nginx) = Nginx::start(&http) else {
        eprintln!("nginx not installed: porter alone");
        return;
    };
    let want = answers(nginx.port);
    // The 416 pages name their server.
    let strip = |v: &mut Vec<Answer>| {
        v[2].3 = None;
        v[2].4.clear();
    };
    let (mut got, mut want) = (got, want);
    strip(&mut got);
    strip(&mut want);
    assert_eq!(got, want);
}
