//! Locations, the rewrite module and `map`, against Debian's nginx: one
//! configuration with every kind of location (prefix, `=`, `^~`, regex
//! `~`/`~*` with numbered and named captures, nested, named `@name`), the
//! automatic 301 of a proxied `location /x/`, server- and location-level
//! `rewrite`/`if`/`set`/`break`/`return`, `map` (exact, regex with
//! captures, `hostnames` wildcards, a map of a map) and a regex
//! `server_name` with captures. Each location answers `return 200
//! "matched NAME …"`, so the body shows which one matched and what its
//! variables held. A corpus of requests goes to both servers; status,
//! `Location` (port normalised) and body must agree.
//!
//! Focused tests follow: the rewrite cycle bound (500 and NGINX's log
//! line; the hop that reaches it for internal redirects, named locations
//! and `rewrite`), `if (-f …)` seeing files appear and go, regex server names.
//!
//! The differential skips itself, saying so, when `/usr/sbin/nginx` is not
//! installed.

use std::path::Path;
use std::time::Duration;

use crate::common::beside::{self, Both};
use crate::common::differential::{self, req, Cases};
use crate::common::origin::{Origin, Reply};
use crate::common::*;

/// The `http { }` body both servers run (`{ROOT}` is the docroot).
const HTTP_BODY: &str = r#"
map $uri $mapped {
    default          "none";
    /map/exact       "exact";
    ~^/map/re/(\w+)$ "re-$1";
    ~*^/map/CI/      "caseless";
}
map $http_host $hostmap {
    hostnames;
    default          "d";
    example.com      "exact";
    *.example.com    "wild-head";
    www.example.*    "wild-tail";
}
map $arg_v $chain {
    default "$mapped-chained";
    1       "one";
}
server {
    listen 127.0.0.1:{PORT};
    server_name localhost;
    root {ROOT};

    rewrite ^/srv-old/(.*)$ /srv-new/$1 last;
    if ($arg_srvret) {
        return 200 "server if $arg_srvret";
    }
    set $srvvar "from-server";

    location / { return 200 "matched root $uri"; }
    location = / { return 200 "matched eq-root"; }
    location = /exact { return 200 "matched exact"; }
    location /exact { return 200 "matched prefix-exact $uri"; }
    location /static/ { return 200 "matched static $uri"; }
    location ^~ /static/noregex/ { return 200 "matched noregex $uri"; }
    location ~ \.(gif|jpg|png)$ { return 200 "matched image $1 $uri"; }
    location ~* \.(CSS|JS)$ { return 200 "matched asset-ci $1"; }
    location ~ ^/re/(?<section>\w+)/(\d+)$ { return 200 "matched named $section $2 $1"; }
    location ~ ^/order/ { return 200 "matched order-first"; }
    location ~ ^/order/b { return 200 "matched order-second"; }
    location ~ ^/look/(?!private)(\w+)$ { return 200 "matched lookahead $1"; }
    location /nest/ {
        location /nest/inner/ { return 200 "matched nest-inner $uri"; }
        location ~ \.txt$ { return 200 "matched nest-regex"; }
        return 200 "matched nest-outer";
    }
    location ^~ /nonest/ {
        location ~ \.gif$ { return 200 "matched nonest-inner-regex"; }
        return 200 "matched nonest";
    }
    location /srv-new/ { return 200 "matched srv-new $uri $args"; }
    location /rw/ {
        rewrite ^/rw/last/(.*)$ /target/$1 last;
        rewrite ^/rw/break/(.*)$ /target/$1 break;
        rewrite ^/rw/redir/(.*)$ /target/$1 redirect;
        rewrite ^/rw/perm/(.*)$ /target/$1 permanent;
        rewrite ^/rw/args/(.*)$ /target/$1?a=1 last;
        rewrite ^/rw/noargs/(.*)$ /target/$1? last;
        rewrite ^/rw/abs/(.*)$ http://example.com/$1;
        rewrite ^/rw/chain1$ /rw/chain2;
        rewrite ^/rw/chain2$ /target/chained;
        rewrite ^/rw/again/(.*)$ /target/again-$1;
        return 200 "matched rw-fallthrough $uri $1";
    }
    location /rw2/ {
        rewrite ^/rw2/(.*)$ /target/$1;
    }
    location /target/ { return 200 "matched target $uri args=$args"; }
    location /ifs/ {
        set $x "none";
        if ($arg_a = "1") { set $x "eq"; }
        if ($arg_b != "") { set $x "$x-ne"; }
        if ($uri ~ ^/ifs/(\w+)$) { set $x "$x-re-$1"; }
        if ($http_x_test ~* ^yes$) { set $x "$x-ci"; }
        if ($uri !~ ^/ifs/keep) { set $x "$x-nre"; }
        if (-f $request_filename) { set $x "$x-file"; }
        if (-d $request_filename) { set $x "$x-dir"; }
        if (!-e $request_filename) { set $x "$x-noent"; }
        return 200 "matched ifs $x $srvvar";
    }
    location /ifloc/ {
        if ($arg_p) { return 200 "matched ifloc-true $arg_p"; }
        return 200 "matched ifloc-false";
    }
    location /brk/ {
        set $y "a";
        break;
        return 200 "not reached";
    }
    location /map/ { return 200 "matched map $mapped $chain"; }
    location /host/ { return 200 "matched host $hostmap"; }
    location /named/ { try_files /nonexistent @fallback; }
    location @fallback { return 200 "matched named-fallback $uri"; }
    location /errpage/ {
        error_page 404 = @err;
        return 404;
    }
    location @err { return 200 "matched named-error $uri"; }
    location /files/ { }
    location ~ ^/alias-re/(.+)$ { alias {ROOT}/files/$1; }
    location /loop/ { rewrite ^/loop/(.*)$ /loop/$1 last; }
    location /proxied/ { proxy_pass http://127.0.0.1:{PORT}/target/; }
    location ~ ^/cap/(\d+)$ { rewrite ^ /target/$1 last; }
    location /outer/ {
        location ~ ^/outer/(\w+)\.x$ { return 200 "matched nested-cap $1"; }
        location = /outer/eq { return 200 "matched nested-eq"; }
    }
    location /ifcap/ {
        if ($uri ~ ^/ifcap/(?<word>[a-z]+)) { set $w $1; }
        return 200 "matched ifcap $w $word $1";
    }
    location /err404/ {
        error_page 404 @keep;
        return 404;
    }
    location @keep { return 200 "matched keep-status $uri"; }
    location /tf/ { try_files $uri $uri/ @tffall; }
    location @tffall { return 200 "matched tf-fallback $uri"; }
    location /pb/ {
        rewrite ^/pb/(.*)$ /target/$1 break;
        proxy_pass http://127.0.0.1:{PORT};
    }
    location /rr/ { rewrite ^/rr/(\w+)$ /target/$1?x=$1 redirect; }
    location ~* ^/CaSe/ { return 200 "matched case $uri"; }
    location /ret/ {
        if ($arg_go) { return 301 /target/$arg_go; }
        return 302 http://example.com$uri;
    }
    location ~ (?<=/lb)/(\w+)$ { return 200 "matched lookbehind $1"; }
    location /setargs/ {
        set $args "s=1&$args";
        rewrite ^/setargs/(.*)$ /target/$1 last;
    }
}
server {
    listen 127.0.0.1:{PORT};
    server_name ~^(?<sub>\w+)\.regex\.test$ ~^(\w+)-(\w+)\.num\.test$;
    location / { return 200 "matched regex-server $sub $1 $2"; }
}
"#;

/// The targets asked without extra header lines.
const TARGETS: &[&str] = &[
    "/",
    "/anything",
    "/exact",
    "/exact?x=1",
    "/exact/",
    "/exactly",
    "/static/",
    "/static/a.txt",
    "/static/a.gif",
    "/static/a.css",
    "/static/A.CSS",
    "/static/noregex/",
    "/static/noregex/b.gif",
    "/static/noregex/b.CSS",
    "/x/y.jpg",
    "/x/y.JPG",
    "/x/app.js",
    "/x/app.Js",
    "/re/news/42",
    "/re/news/x42",
    "/re/a_b/7",
    "/order/a",
    "/order/b",
    "/order/bb",
    "/look/public",
    "/look/private",
    "/nest/",
    "/nest/other",
    "/nest/inner/x",
    "/nest/inner/x.txt",
    "/nest/a.txt",
    "/nest/a.gif",
    "/nonest/",
    "/nonest/a.gif",
    "/srv-old/abc",
    "/srv-old/abc?z=1",
    "/?srvret=7",
    "/static/a.gif?srvret=8",
    "/srv-new/direct",
    "/rw/last/x",
    "/rw/last/x?q=1",
    "/rw/break/f.txt",
    "/rw/break/missing",
    "/rw/redir/x",
    "/rw/redir/x?q=1",
    "/rw/perm/x",
    "/rw/perm/x?q=1&r=2",
    "/rw/args/x",
    "/rw/args/x?q=2",
    "/rw/noargs/x",
    "/rw/noargs/x?q=2",
    "/rw/abs/x",
    "/rw/abs/x?q=1",
    "/rw/chain1",
    "/rw/chain2",
    "/rw/again/z",
    "/rw/other",
    "/rw2/p",
    "/rw2/p?k=v",
    "/target/t?u=1",
    "/ifs/abc",
    "/ifs/abc?a=1",
    "/ifs/abc?a=1&b=2",
    "/ifs/abc?b=",
    "/ifs/keep",
    "/ifs/file.txt",
    "/ifs/dir",
    "/ifs/dir/",
    "/ifloc/x",
    "/ifloc/x?p=yes",
    "/ifloc/x?p=0",
    "/brk/f.txt",
    "/brk/missing",
    "/map/exact",
    "/map/exact?v=1",
    "/map/re/foo",
    "/map/re/foo/bar",
    "/map/ci/x",
    "/map/CI/x",
    "/map/zzz",
    "/named/x",
    "/errpage/x",
    "/files/a.txt",
    "/files/missing",
    "/alias-re/a.txt",
    "/alias-re/missing",
    "/loop/x",
    "/proxied",
    "/proxied?k=1",
    "/proxied/x",
    "/proxied/x?k=2",
    "/%72e/news/1",
    "/cap/42",
    "/cap/x",
    "/outer/abc.x",
    "/outer/eq",
    "/outer/other",
    "/ifcap/hello",
    "/ifcap/123",
    "/err404/x",
    "/tf/a.txt",
    "/tf/missing",
    "/pb/p",
    "/pb/p?y=1",
    "/rr/abc",
    "/rr/abc?o=1",
    "/case/x",
    "/CASE/y",
    "/ret/a",
    "/ret/a?go=b",
    "/lb/word",
    "/xlb/word",
    "/setargs/a",
    "/setargs/a?o=2",
];

/// The requests: (target, extra header lines).
fn corpus() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = TARGETS
        .iter()
        .map(|p| (p.to_string(), String::new()))
        .collect();
    v.push(("/ifs/abc".into(), "X-Test: YES\r\n".into()));
    for host in [
        "example.com",
        "EXAMPLE.com",
        "a.example.com",
        "b.a.example.com",
        "www.example.org",
        "other.net",
        "example.com.",
    ] {
        v.push(("/host/".into(), format!("Host: {host}\r\n")));
    }
    for host in [
        "abc.regex.test",
        "x-y.num.test",
        "ABC.regex.test",
        "a.b.regex.test",
    ] {
        v.push(("/whatever".into(), format!("Host: {host}\r\n")));
    }
    v
}

fn docroot() -> TempDir {
    let root = TempDir::new("loc-root");
    root.write("brk/f.txt", "brk file\n");
    root.write("target/f.txt", "target file\n");
    root.write("files/a.txt", "files a\n");
    root.write("ifs/file.txt", "ifs file\n");
    root.write("ifs/dir/keep", "x");
    root.write("tf/a.txt", "tf a\n");
    root
}

fn with_root(body: &str, root: &TempDir) -> String {
    body.replace("{ROOT}", root.path().to_str().unwrap())
}

/// A request with `Host: localhost` unless the extra lines name another.
fn ask(port: u16, target: &str, extra: &str) -> Resp {
    let host = if extra.starts_with("Host:") {
        String::new()
    } else {
        "Host: localhost\r\n".to_string()
    };
    raw(
        port,
        format!("GET {target} HTTP/1.1\r\n{host}{extra}Connection: close\r\n\r\n").as_bytes(),
    )
}

/// What is compared: status, Location with the port replaced, and the body
/// with the server's name in built-in pages replaced.
fn shown(r: &Resp, port: u16) -> String {
    let loc = r
        .header("location")
        .unwrap_or("-")
        .replace(&format!(":{port}"), ":<PORT>");
    let mut body = r.text();
    if let (Some(a), Some(b)) = (body.find("<hr><center>"), body.find("</center>\r\n</body>")) {
        body.replace_range(a..b, "<hr><center><SERVER>");
    }
    format!("{} {loc}\n{body}", r.status)
}

#[test]
fn locations_rewrite_and_map_answer_as_nginx_does() {
    let root = docroot();
    let body = with_root(HTTP_BODY, &root);
    let Some(nginx) = Nginx::start(&body) else {
        eprintln!("skipped: {NGINX} is not installed");
        return;
    };
    let porter = Server::start(&one_worker_conf(&body));
    let corpus = corpus();
    assert!(corpus.len() >= 80, "corpus of {}", corpus.len());
    let mut diffs = Vec::new();
    for (target, extra) in &corpus {
        let n = shown(&ask(nginx.port, target, extra), nginx.port);
        let p = shown(&ask(porter.port, target, extra), porter.port);
        if n != p {
            diffs.push(format!(
                "GET {target} {extra:?}\n  nginx:  {n:?}\n  porter: {p:?}"
            ));
        }
    }
    assert!(
        diffs.is_empty(),
        "{} of {} requests differ:\n{}",
        diffs.len(),
        corpus.len(),
        diffs.join("\n")
    );
}

#[test]
fn a_rewrite_cycle_ends_in_500_with_nginx_log_line() {
    let root = docroot();
    let porter = Server::start(&one_worker_conf(&with_root(HTTP_BODY, &root)));
    let r = get(porter.port, "/loop/x");
    assert_eq!(r.status, 500);
    let log = porter.wait_log(
        "logs/error.log",
        "rewrite or internal redirection cycle while processing \"/loop/x\"",
        std::time::Duration::from_secs(5),
    );
    assert!(
        log.contains("[error]")
            && log.contains("rewrite or internal redirection cycle while processing \"/loop/x\""),
        "{log}"
    );
}

/// Hops in each chain of [`cycle_chains`].
const CHAIN: usize = 14;

/// Three chains of locations, one for each way NGINX counts a URI change
/// against its bound (`uri_changes`): `/iK` falls back (`try_files`) to
/// `/iK+1`, an internal redirect; `/nK` to `@nK`, which falls back to
/// `@nK+1`, named-location jumps; `/wK` rewrites its URI to `/wK+1`, a
/// location `rewrite` without a flag. The last of each answers 200.
fn cycle_chains() -> String {
    let mut s = String::from(
        "server {\n    listen 127.0.0.1:{PORT};\n    server_name localhost;\n    root {ROOT};\n",
    );
    for k in 0..CHAIN {
        let next = k + 1;
        s += &format!("    location = /i{k} {{ try_files /none /i{next}; }}\n");
        s += &format!("    location = /n{k} {{ try_files /none @n{k}; }}\n");
        s += &format!("    location @n{k} {{ try_files /none @n{next}; }}\n");
        s += &format!("    location = /w{k} {{ rewrite ^ /w{next}; }}\n");
    }
    s += &format!("    location = /i{CHAIN} {{ return 200 \"end\"; }}\n");
    s += &format!("    location @n{CHAIN} {{ return 200 \"end\"; }}\n");
    s += &format!("    location = /w{CHAIN} {{ return 200 \"end\"; }}\n}}\n");
    s
}

/// The request that takes `hops` steps along chain `kind` to its end.
fn chain_start(kind: char, hops: usize) -> String {
    let first = if kind == 'n' {
        CHAIN + 1 - hops
    } else {
        CHAIN - hops
    };
    format!("/{kind}{first}")
}

/// The bound, per path: 10 internal redirects pass and the 11th is a 500
/// (counted, then checked); likewise 10 URI changes by `rewrite` and 10
/// named-location jumps, as NGINX (1.22 and current). Each 500 logs the
/// path's own
/// `cycle` line naming the target of the hop that failed (the chain's
/// last). NGINX, when installed, is asked the same to its own bound.
#[test]
fn each_redirect_kind_ends_in_500_at_its_bound() {
    let root = docroot();
    let body = with_root(&cycle_chains(), &root);
    let porter = Server::start(&one_worker_conf(&body));
    let nginx = Nginx::start(&body);
    // (chain, porter's bound, NGINX's bound, the log line's end)
    let cases = [
        ('i', 10, 10, "while internally redirecting to \"/i14\""),
        ('n', 10, 10, "while redirect to named location \"@n14\""),
        ('w', 10, 10, "while processing \"/w14\""),
    ];
    for (done, (kind, bound, nginx_bound, line)) in cases.into_iter().enumerate() {
        let servers = [
            Some((porter.port, bound)),
            nginx.as_ref().map(|n| (n.port, nginx_bound)),
        ];
        for (port, bound) in servers.into_iter().flatten() {
            for (hops, want) in [(bound - 1, 200), (bound, 200), (bound + 1, 500)] {
                let target = chain_start(kind, hops);
                let is_porter = port == porter.port;
                assert_eq!(
                    get(port, &target).status,
                    want,
                    "{target} (porter: {is_porter})"
                );
            }
        }
        let needle = format!("rewrite or internal redirection cycle {line}");
        let log = porter.wait_log("logs/error.log", &needle, std::time::Duration::from_secs(5));
        let cycles: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("redirection cycle"))
            .collect();
        // One line per 500 so far, this one the path's own.
        assert_eq!(cycles.len(), done + 1, "{log}");
        assert!(
            cycles[done].contains(&needle) && cycles[done].contains("[error]"),
            "{log}"
        );
    }
}

#[test]
fn if_file_tests_follow_the_disk() {
    let root = TempDir::new("loc-f");
    let conf = http_conf(&format!(
        "    root {};\n    location / {{\n        if (-f $request_filename) {{ return 200 \"file\"; }}\n        \
         if (-d $request_filename) {{ return 200 \"dir\"; }}\n        \
         if (-x $request_filename) {{ return 200 \"exec\"; }}\n        \
         if (!-e $request_filename) {{ return 200 \"none\"; }}\n        return 200 \"other\";\n    }}\n",
        root.path().display()
    ));
    let s = Server::start(&conf);
    assert_eq!(get(s.port, "/a").text(), "none");
    root.write("a", "x");
    assert_eq!(get(s.port, "/a").text(), "file");
    std::fs::remove_file(root.path().join("a")).unwrap();
    std::fs::create_dir(root.path().join("a")).unwrap();
    assert_eq!(get(s.port, "/a").text(), "dir");
    assert_eq!(get(s.port, "/a/").text(), "dir");
}

#[test]
fn regex_server_names_capture_into_variables() {
    let conf = http_conf(
        "    server_name localhost;\n    location / { return 200 \"default\"; }\n  }\n  server {\n    \
         listen 127.0.0.1:{PORT};\n    server_name ~^(?<user>[a-z]+)\\.users\\.test$ ~^www\\.(.+)$;\n    \
         location / { return 200 \"user=$user one=$1 host=$host\"; }\n",
    );
    let s = Server::start(&conf);
    let ask = |host: &str| {
        raw(
            s.port,
            format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .text()
    };
    assert_eq!(
        ask("ann.users.test"),
        "user=ann one=ann host=ann.users.test"
    );
    assert_eq!(ask("www.site.org"), "user= one=site.org host=www.site.org");
    assert_eq!(ask("localhost"), "default");
    assert_eq!(ask("9.users.test"), "default");
}

#[test]
fn a_set_variable_read_unset_is_empty_and_warned_about() {
    let conf = http_conf(
        "    server_name localhost;\n    location /x { set $later 1; }\n    \
         location / { return 200 \"[$later]\"; }\n    \
         location /quiet { uninitialized_variable_warn off; return 200 \"[$later]\"; }\n",
    );
    let s = Server::start(&conf);
    assert_eq!(get(s.port, "/quiet").text(), "[]");
    assert_eq!(get(s.port, "/").text(), "[]");
    let log = s.wait_log(
        "logs/error.log",
        "using uninitialized",
        std::time::Duration::from_secs(5),
    );
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("using uninitialized \"later\" variable"))
        .collect();
    assert_eq!(lines.len(), 1, "{log}");
    assert!(
        lines[0].contains("[warn]") && lines[0].contains("request: \"GET / HTTP/1.1\""),
        "{log}"
    );
}

#[test]
fn locations_answer_as_nginx_on_the_shared_docroot() {
    differential::compare("locations", location_cases);
}

fn location_cases(_root: &Path, c: &mut Cases) {
    // --- Locations: exact, ^~, alias, return, try_files, error_page =200.
    for t in [
        "/exact",
        "/exact?x=42",
        "/exact?x=a%20b&y=2",
        "/exact/",
        "/ret.json?x=1",
        "/moved",
        "/moved?a=b",
        "/found",
        "/gone",
        "/static/s.css",
        "/static/sdir",
        "/static/sdir/",
        "/aliased/page.html",
        "/aliased/",
        "/aliased",
        "/tf/t.txt",
        "/tf/dir",
        "/tf/dir/",
        "/tf/nodir",
        "/tf/missing",
        "/tf/",
        "/e200/missing",
        "/e200/real.txt",
        "/e200/",
    ] {
        c.same(&format!("GET {t}"), vec![req("GET", t, "")]);
    }
    c.same("HEAD /exact", vec![req("HEAD", "/exact", "")]);
    c.same("HEAD /e200/missing", vec![req("HEAD", "/e200/missing", "")]);
    c.same("POST /exact", vec![req("POST", "/exact", "")]);
}

#[test]
fn alias_without_trailing_slash_does_not_leave_its_directory() {
    let root = TempDir::new("alias");
    root.write("img/a.png", "image");
    root.write("secret", "the secret");
    root.write("imgfoo.png", "sibling");
    let dir = root.path().display();
    let srv = Server::start(&http_conf(&format!(
        "    location /img {{ alias {dir}/img/; }}\n    location /pre {{ alias {dir}/img; }}"
    )));
    assert_eq!(get(srv.port, "/img/a.png").text(), "image");
    let r = get(srv.port, "/img../secret");
    assert_eq!(r.status, 404, "served {:?}", r.text());
    assert_eq!(get(srv.port, "/img..").status, 404);
    srv.wait_log(
        "logs/error.log",
        "/img/../secret\" is outside of the root or alias directory",
        Duration::from_secs(2),
    );
    // An alias without a slash is a prefix, as in NGINX: a sibling name
    // that only extends it stays allowed.
    assert_eq!(get(srv.port, "/prefoo.png").text(), "sibling");
    assert_eq!(get(srv.port, "/pre/a.png").text(), "image");
}

#[test]
fn proxied_location_with_slash_redirects_the_bare_name() {
    let origin = Origin::start(|r| Reply::ok(r.target.as_bytes()));
    let b = Both::start(
        "",
        "location /x/ { proxy_pass http://127.0.0.1:{ORIGIN}; }\nlocation / { return 200 other; }",
        origin.port,
    );
    for (who, port) in b.ports() {
        let r = beside::get_h(port, "/x", "");
        assert_eq!(r.status, 301, "{who}");
        let loc = r.header("location").unwrap_or_default();
        assert_eq!(loc, format!("http://localhost:{port}/x/"), "{who}");
        let r = beside::get_h(port, "/x?a=1", "");
        assert_eq!(
            r.header("location").unwrap_or_default(),
            format!("http://localhost:{port}/x/?a=1"),
            "{who}"
        );
        assert_eq!(beside::get_h(port, "/x/y", "").text(), "/x/y", "{who}");
    }
}
