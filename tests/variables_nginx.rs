//! Built-in variables NGINX has and porter lacked until nginx-tests
//! named them (issue 26): `$upstream_cookie_NAME` (NGINX's parse of the
//! upstream's `Set-Cookie` lines), `$sent_trailer_NAME` (a trailer
//! `add_trailer` set before), `$connections_*` (the `stub_status`
//! figures), `$arg_` (no name: never found), and built-ins `set` and
//! `auth_request_set` may change (`set $http_foo`, `auth_request_set
//! $args`). Each is compared with Debian's nginx on the same config.

use crate::common::*;

/// The value of header `name` in each response to `paths`.
fn headers(port: u16, paths: &[(&str, &str)], name: &str) -> Vec<String> {
    paths
        .iter()
        .map(|(p, extra)| {
            let r = get_with(port, p, extra);
            format!("{p} {}: {}", r.status, r.header(name).unwrap_or("-"))
        })
        .collect()
}

fn compare(n: Option<Nginx>, porter: Vec<String>, ask: impl Fn(u16) -> Vec<String>) {
    match n {
        Some(n) => assert_eq!(porter, ask(n.port)),
        None => eprintln!("skipped the comparison: nginx is not installed"),
    }
}

#[test]
fn upstream_cookie_reads_the_set_cookie_lines_as_nginx() {
    let server = "location / { add_header X-Uc $upstream_cookie_tc;
                     proxy_pass http://127.0.0.1:{PORT}/o; }
                  location /o { add_header Set-Cookie $http_x_c; return 204; }
                  location /om { add_header X-Uc $upstream_cookie_tc;
                     proxy_pass http://127.0.0.1:{PORT}/two; }
                  location /two { add_header Set-Cookie \"a=1\"; add_header Set-Cookie \"TC = v2 ; x\";
                     add_header Set-Cookie \"tc=v3\"; return 204; }";
    let (p, n) = both("", server);
    let cases: Vec<String> = [
        "tc=",
        "tc= ;",
        "tc=x",
        "tc=\"q\"",
        "tc =  content",
        "tc==;abc",
        "=tc=c",
        "tc\t=\tc",
        "tc=first,tc=second",
        "tc=first;tc=second",
        "tcx=1",
        "tc=con  tent; Domain=e",
    ]
    .iter()
    .map(|c| format!("X-C: {c}\r\n"))
    .collect();
    let mut paths: Vec<(&str, &str)> = cases.iter().map(|c| ("/", c.as_str())).collect();
    paths.push(("/om", ""));
    let porter = headers(p.port, &paths, "x-uc");
    assert_eq!(porter[2], "/ 204: x", "{porter:#?}");
    assert_eq!(porter[12], "/om 204: v2 ", "{porter:#?}");
    compare(n, porter, |port| headers(port, &paths, "x-uc"));
}

#[test]
fn sent_trailer_reads_the_trailers_added_before() {
    let server = "location / { add_trailer X-A $host; add_trailer X-B \"<$sent_trailer_x_a>\";
                     add_trailer X-C \"<$sent_trailer_x_d>\"; add_trailer X-D d; return 200 ok; }";
    let (p, n) = both("", server);
    let ask = |port: u16| {
        use std::io::Write as _;
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .unwrap();
        let all = String::from_utf8_lossy(&read_all(&mut s)).into_owned();
        // The trailer section: after the last chunk.
        all.split_once("\r\n0\r\n")
            .map(|(_, t)| t.to_string())
            .unwrap_or(all)
    };
    let porter = ask(p.port);
    assert!(porter.contains("X-B: <localhost>"), "{porter}");
    assert!(porter.contains("X-C: <>"), "{porter}");
    compare(n, vec![porter], |port| vec![ask(port)]);
}

#[test]
fn connections_variables_are_the_stub_status_figures() {
    let server = "add_header X-F \"$connections_active $connections_reading $connections_writing $connections_waiting\";
                  location / { return 200 ok; }";
    let (p, n) = both("", server);
    let porter = headers(p.port, &[("/", "")], "x-f");
    assert_eq!(porter, ["/ 200: 1 0 1 0"]);
    compare(n, porter, |port| headers(port, &[("/", "")], "x-f"));
}

#[test]
fn set_gives_a_built_in_a_value_of_its_own() {
    let server = "ssi on;
                  location /t1 { set $http_foo set_foo; return 200 \"[$http_foo]\"; }
                  location /t2 { return 200 \"[$http_bar][$arg_][$arg_a]\"; }
                  location /ssi { set $http_foo s; return 200 'X<!--#echo var=\"http_foo\" -->X'; }
                  location /o { set $http_bar set_bar; return 204; }
                  location /auth { return 204; }
                  location /a { auth_request /auth; auth_request_set $args a=setargs;
                      proxy_pass http://127.0.0.1:{PORT}/echo; }
                  location /echo { return 200 \"[$args]\"; }";
    let (p, n) = both("", server);
    let ask = |port: u16| -> Vec<String> {
        ["/t1", "/t2?a=1", "/ssi.html", "/a?b=2"]
            .iter()
            .map(|path| get_with(port, path, "Foo: hf\r\nBar: hb\r\n").text())
            .collect()
    };
    let porter = ask(p.port);
    assert_eq!(porter, ["[set_foo]", "[hb][][1]", "XsX", "[a=setargs]"]);
    compare(n, porter, ask);
}
