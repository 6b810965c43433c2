//! `proxy_cookie_flags` (and the regex and variable forms of
//! `proxy_cookie_domain`/`proxy_cookie_path` beside it), run in porter and
//! in Debian's nginx 1.22 against the same in-test origin: every
//! `Set-Cookie` line the client gets must be byte for byte nginx's.

use std::io::Write;
use std::net::TcpStream;

use crate::common::origin::*;
use crate::common::*;

/// The `Set-Cookie` lines the origin sends on every answer.
const COOKIES: &[&str] = &[
    "sid=abc; Path=/app/x; Domain=.backend.local",
    "pref_theme=dark;secure;SameSite=None",
    "other=1;  HttpOnly ; samesite=lax",
    "noval",
    "x=1; domain=a.shop.internal; path=/OLD/stuff",
    "SID=2; Secure; HttpOnly",
    "plain=1; Max-Age=60",
];

fn origin() -> Origin {
    Origin::start(|_| {
        COOKIES
            .iter()
            .fold(Reply::ok(b"c"), |r, c| r.header("Set-Cookie", c))
    })
}

fn server_body(port: u16) -> String {
    format!(
        "proxy_cookie_flags plain httponly;\n\
         location /f/ {{ proxy_pass http://127.0.0.1:{port};\n\
           proxy_cookie_flags sid secure httponly samesite=strict;\n\
           proxy_cookie_flags ~^pref_ nosecure samesite=lax;\n\
           proxy_cookie_flags $arg_c nohttponly nosamesite secure;\n\
           proxy_cookie_flags ~^x$ $arg_f; }}\n\
         location /d/ {{ proxy_pass http://127.0.0.1:{port};\n\
           proxy_cookie_domain .backend.local .example.com;\n\
           proxy_cookie_domain ~\\.(?<sub>[a-z]+)\\.internal$ $sub.example.org;\n\
           proxy_cookie_path /app/ /;\n\
           proxy_cookie_path ~*^/old(.*)$ /new$1; }}\n\
         location /inherit/ {{ proxy_pass http://127.0.0.1:{port}; }}\n\
         location /off/ {{ proxy_pass http://127.0.0.1:{port}; proxy_cookie_flags off; }}"
    )
}

fn cookies(port: u16, target: &str) -> Vec<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut buf = Vec::new();
    let r = read_response(&mut s, &mut buf, false).expect("response");
    assert_eq!(r.status, 200, "{target}");
    r.headers
        .into_iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("set-cookie"))
        .map(|(_, v)| v)
        .collect()
}

#[test]
fn set_cookie_lines_are_rewritten_as_nginx_rewrites_them() {
    let o = origin();
    let body = server_body(o.port);
    let p = Server::start(&one_server_conf("", &body));
    let n = Nginx::start(&format!(
        "server {{\n listen 127.0.0.1:{{PORT}};\n server_name localhost;\n{body}\n}}\n"
    ))
    .expect("Debian's nginx (/usr/sbin/nginx) is needed to compare with");
    let targets = [
        "/f/?c=other&f=samesite=none",
        "/f/?c=SID&f=bogus",
        "/d/",
        "/inherit/",
        "/off/",
    ];
    for t in targets {
        let ours = cookies(p.port, t);
        let theirs = cookies(n.port, t);
        assert_eq!(ours, theirs, "porter vs nginx on {t}");
    }
    // What nginx does, spelled out, so the comparison cannot pass on two
    // servers that both left the lines alone.
    let f = cookies(p.port, "/f/?c=other&f=samesite=none");
    assert_eq!(
        f[0],
        "sid=abc; Path=/app/x; Domain=.backend.local; Secure; HttpOnly; SameSite=Strict"
    );
    assert_eq!(f[1], "pref_theme=dark; SameSite=Lax");
    assert_eq!(f[2], "other=1; Secure");
    assert_eq!(f[3], "noval");
    assert_eq!(
        f[4],
        "x=1; domain=a.shop.internal; path=/OLD/stuff; SameSite=None"
    );
    let d = cookies(p.port, "/d/");
    assert_eq!(d[0], "sid=abc; Path=/x; Domain=.example.com");
    assert_eq!(d[4], "x=1; domain=shop.example.org; path=/new/stuff");
    assert_eq!(d[1], COOKIES[1], "no rule matched: the line as it came");
    assert_eq!(
        cookies(p.port, "/inherit/")[6],
        "plain=1; Max-Age=60; HttpOnly"
    );
    assert_eq!(cookies(p.port, "/off/")[6], COOKIES[6]);
}

#[test]
fn bad_proxy_cookie_flags_lines_are_refused_as_nginx_refuses_them() {
    let refused = |loc: &str| {
        let conf =
            one_server_conf("", &format!("location / {{ {loc} }}")).replace("{PORT}", "8080");
        config_error(&conf)
    };
    let e = refused("proxy_cookie_flags secure;");
    assert!(
        e.contains("invalid parameter \"secure\"") && e.contains(".conf:12"),
        "{e}"
    );
    let e = refused("proxy_cookie_flags off; proxy_cookie_flags a secure;");
    assert!(e.contains("is duplicate"), "{e}");
    let e = refused("proxy_cookie_flags a b c d e;");
    assert!(e.contains("invalid number of arguments"), "{e}");
    let e = refused("proxy_cookie_domain ~(unclosed x;");
    assert!(e.contains("pcre2_compile() failed"), "{e}");
}
