//! Access control and limits against the real binary: `allow`/`deny` in
//! config order with NGINX's inheritance, `satisfy any`, Basic
//! authentication with every htpasswd format NGINX reads (files made by
//! `openssl passwd` and Apache's `htpasswd`), `limit_req` (as counts of
//! answers and `$limit_req_status`, not timings), `limit_conn` with slots
//! held by slow requests, NGINX's configuration errors — and the same
//! configuration run by Debian's nginx, compared answer by answer.

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::origin::{Origin, Reply};
use crate::common::*;

/// `user:hash` lines for every format, the password of each user being
/// `pw-USER`.
fn htpasswd_lines() -> String {
    let sh = |cmd: &str| {
        let out = Command::new("sh").arg("-c").arg(cmd).output().unwrap();
        assert!(out.status.success(), "{cmd}: {out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let mut lines = vec![
        "# comment line".to_string(),
        format!("apr1:{}", sh("openssl passwd -apr1 pw-apr1")),
        format!("sha512:{}", sh("openssl passwd -6 pw-sha512")),
        format!("md5crypt:{}", sh("openssl passwd -1 pw-md5crypt")),
        sh("htpasswd -nbB bcrypt pw-bcrypt"),
        sh("htpasswd -nbs sha pw-sha"),
        format!(
            "ssha:{{SSHA}}{}",
            sh("(printf 'pw-sshasalty'  | openssl dgst -sha1 -binary; printf salty) | base64")
        ),
        "plain:{PLAIN}pw-plain:extra field".to_string(),
    ];
    lines.push(String::new());
    lines.join("\n")
}

const USERS: &[&str] = &[
    "apr1", "sha512", "md5crypt", "bcrypt", "sha", "ssha", "plain",
];

fn b64(s: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("printf '%s' '{s}' | base64 -w0"))
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}

fn basic(user: &str, pw: &str) -> String {
    format!("Authorization: Basic {}\r\n", b64(&format!("{user}:{pw}")))
}

/// The document root and the user file, in a directory both servers read.
fn site() -> TempDir {
    let d = TempDir::new("access-site");
    for dir in [
        "a", "b", "c", "d", "e", "auth", "any", "anyip", "all", "nofile", "nd", "dl", "dry", "st",
        "ok", "no", "pub", "p401",
    ] {
        d.write(&format!("html/{dir}/x"), "ok\n");
    }
    d.write("html/err/401.html", "custom 401 page\n");
    d.write("htpasswd", htpasswd_lines());
    d
}

/// The `http { }` body both servers run (`{PORT}` left for them; `{ORIGIN}`
/// the slow origin's port).
fn http_body(site: &Path, origin: u16) -> String {
    let d = site.display();
    format!(
        r#"
  limit_req_zone $binary_remote_addr zone=nd:1m rate=1r/s;
  limit_req_zone $binary_remote_addr zone=dl:1m rate=1r/s;
  limit_req_zone $binary_remote_addr zone=dry:1m rate=1r/s;
  limit_req_zone $binary_remote_addr zone=st:1m rate=1r/m;
  limit_conn_zone $binary_remote_addr zone=cz:1m;
  server {{
    listen 127.0.0.1:{{PORT}};
    root {d}/html;
    add_header X-User $remote_user always;
    add_header X-Limit $limit_req_status always;
    location /a/ {{ allow 127.0.0.1; deny all; }}
    location /b/ {{ deny all; allow 127.0.0.1; }}
    location /c/ {{ deny 10.0.0.0/8; allow 127.0.0.0/8; deny all; }}
    location /d/ {{ allow ::1; deny all; }}
    location /e/ {{ deny 127.0.0.2; }}
    location /auth/ {{ auth_basic "Restricted Area"; auth_basic_user_file {d}/htpasswd; }}
    location /any/ {{ satisfy any; deny all; auth_basic "Any"; auth_basic_user_file {d}/htpasswd; }}
    location /anyip/ {{ satisfy any; allow 127.0.0.1; deny all; auth_basic "Any"; auth_basic_user_file {d}/htpasswd; }}
    location /all/ {{ deny all; auth_basic "All"; auth_basic_user_file {d}/htpasswd; }}
    location /nofile/ {{ auth_basic "X"; auth_basic_user_file {d}/missing; }}
    location /nd/ {{ limit_req zone=nd burst=3 nodelay; }}
    location /dl/ {{ limit_req zone=dl burst=3 delay=1; }}
    location /dry/ {{ limit_req zone=dry burst=1 nodelay; limit_req_dry_run on; }}
    location /st/ {{ limit_req zone=st; limit_req_status 429; }}
    location /conn/ {{ limit_conn cz 1; proxy_pass http://127.0.0.1:{origin}; }}
    location /p401/ {{
      auth_basic "P"; auth_basic_user_file {d}/htpasswd; error_page 401 /err/401.html;
    }}
    location /err/ {{ }}
  }}
  server {{
    listen 127.0.0.1:{{PORT}};
    server_name inh.test;
    root {d}/html;
    deny all;
    auth_basic "Inherited";
    auth_basic_user_file {d}/htpasswd;
    location /ok/ {{ allow all; }}
    location /no/ {{ }}
    location /pub/ {{ allow all; auth_basic off; }}
  }}
"#
    )
}

fn porter_conf(body: &str) -> String {
    format!(
        "daemon off;\nworker_processes 2;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\nevents {{ worker_connections 256; }}\n\
         http {{\n  access_log {{PREFIX}}/logs/access.log;\n{body}\n}}\n"
    )
}

fn slow_origin() -> Origin {
    Origin::start(|_| Reply::ok(b"slow\n").delay(Duration::from_millis(700)))
}

fn get_host(port: u16, path: &str, host: &str) -> Resp {
    raw(
        port,
        format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

/// `n` requests for `path` sent at once on `n` connections; the answers.
fn burst(port: u16, path: &str, n: usize) -> Vec<Resp> {
    let mut conns: Vec<TcpStream> = (0..n)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    for c in &mut conns {
        c.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .unwrap();
    }
    conns
        .iter_mut()
        .map(|c| read_response(c, &mut Vec::new(), false).expect("an answer"))
        .collect()
}

/// How many answers have each (status, `X-Limit`) pair, sorted.
fn tally(resps: &[Resp]) -> Vec<(u16, String, usize)> {
    let mut t: Vec<(u16, String, usize)> = Vec::new();
    for r in resps {
        let key = (r.status, r.header("x-limit").unwrap_or("").to_string());
        match t.iter_mut().find(|(s, l, _)| (*s, l.clone()) == key) {
            Some(e) => e.2 += 1,
            None => t.push((key.0, key.1, 1)),
        }
    }
    t.sort();
    t
}

fn start_porter(site: &Path, origin: u16) -> Server {
    Server::start(&porter_conf(&http_body(site, origin)))
}

#[test]
fn allow_and_deny_take_the_first_matching_rule_in_config_order() {
    let site = site();
    let origin = slow_origin();
    let s = start_porter(site.path(), origin.port);
    for (path, want) in [
        ("/a/x", 200),
        ("/b/x", 403),
        ("/c/x", 200),
        ("/d/x", 403),
        ("/e/x", 200),
    ] {
        assert_eq!(get(s.port, path).status, want, "{path}");
    }
    // Server-level rules are inherited by a location without its own, and
    // replaced whole by a location with some; so is `auth_basic`.
    assert_eq!(get_host(s.port, "/no/x", "inh.test").status, 403);
    let r = get_host(s.port, "/ok/x", "inh.test");
    assert_eq!(r.status, 401);
    assert_eq!(
        r.header("www-authenticate"),
        Some("Basic realm=\"Inherited\"")
    );
    assert_eq!(get_host(s.port, "/pub/x", "inh.test").status, 200);
    let log = s.wait_log(
        "logs/error.log",
        "access forbidden by rule",
        Duration::from_secs(5),
    );
    assert!(
        log.contains("access forbidden by rule, client: 127.0.0.1"),
        "{log}"
    );
}

#[test]
fn satisfy_any_lets_one_passing_check_through() {
    let site = site();
    let origin = slow_origin();
    let s = start_porter(site.path(), origin.port);
    // Denied by address, so credentials decide; a 401 wins over the 403.
    let r = get(s.port, "/any/x");
    assert_eq!(r.status, 401);
    assert_eq!(r.header("www-authenticate"), Some("Basic realm=\"Any\""));
    assert_eq!(
        get_with(s.port, "/any/x", &basic("plain", "pw-plain")).status,
        200
    );
    // Allowed by address: no credentials needed.
    let r = get(s.port, "/anyip/x");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("www-authenticate"), None);
    // `satisfy all`: the address rule refuses first, credentials or not.
    let r = get_with(s.port, "/all/x", &basic("plain", "pw-plain"));
    assert_eq!(r.status, 403);
    assert_eq!(r.header("www-authenticate"), None);
}

#[test]
fn basic_auth_checks_every_htpasswd_format() {
    let site = site();
    let origin = slow_origin();
    let s = start_porter(site.path(), origin.port);
    for user in USERS {
        let ok = get_with(s.port, "/auth/x", &basic(user, &format!("pw-{user}")));
        assert_eq!(ok.status, 200, "{user}");
        assert_eq!(ok.header("x-user"), Some(*user), "$remote_user of {user}");
        assert_eq!(ok.text(), "ok\n");
        let bad = get_with(s.port, "/auth/x", &basic(user, "wrong"));
        assert_eq!(bad.status, 401, "{user} with a wrong password");
        assert_eq!(
            bad.header("www-authenticate"),
            Some("Basic realm=\"Restricted Area\"")
        );
    }
    // An error page for the 401 keeps the challenge.
    let page = get(s.port, "/p401/x");
    assert_eq!(page.status, 401);
    assert_eq!(page.header("www-authenticate"), Some("Basic realm=\"P\""));
    assert_eq!(page.text(), "custom 401 page\n");
    let names: Vec<&str> = page.headers.iter().map(|(n, _)| n.as_str()).collect();
    let at = |h: &str| names.iter().position(|n| n.eq_ignore_ascii_case(h));
    assert!(
        at("www-authenticate") < at("etag"),
        "NGINX's order: {names:?}"
    );
    let none = get(s.port, "/auth/x");
    assert_eq!(none.status, 401);
    assert_eq!(
        none.header("www-authenticate"),
        Some("Basic realm=\"Restricted Area\"")
    );
    assert_eq!(
        get_with(s.port, "/auth/x", &basic("nobody", "x")).status,
        401
    );
    // A commented-out line is no user.
    assert_eq!(
        get_with(s.port, "/auth/x", &basic("# comment line", "")).status,
        401
    );
    // A second Authorization header is a bad request, as in NGINX.
    let twice = basic("plain", "pw-plain") + &basic("plain", "pw-plain");
    assert_eq!(get_with(s.port, "/auth/x", &twice).status, 400);
    // A missing user file is a 403, as NGINX answers.
    assert_eq!(
        get_with(s.port, "/nofile/x", &basic("plain", "pw-plain")).status,
        403
    );
    let file = site.path().join("htpasswd").display().to_string();
    let log = s.wait_log(
        "logs/error.log",
        "(2: No such file or directory)",
        Duration::from_secs(5),
    );
    for line in [
        "user \"apr1\": password mismatch".to_string(),
        "user \"bcrypt\": password mismatch".to_string(),
        format!("user \"nobody\" was not found in \"{file}\""),
        "no user/password was provided for basic authentication".to_string(),
        format!(
            "open() \"{}/missing\" failed (2: No such file or directory)",
            site.path().display()
        ),
    ] {
        assert!(log.contains(&line), "missing {line:?} in\n{log}");
    }
    // The file is read per request: a new user works at once.
    site.write(
        "htpasswd",
        format!("{}late:{{PLAIN}}pw-late\n", htpasswd_lines()),
    );
    assert_eq!(
        get_with(s.port, "/auth/x", &basic("late", "pw-late")).status,
        200
    );
}

#[test]
fn limit_req_counts_nodelay_delay_and_dry_run() {
    let site = site();
    let origin = slow_origin();
    let s = start_porter(site.path(), origin.port);
    // rate=1r/s burst=3 nodelay: 1 + 3 served at once, the rest refused.
    assert_eq!(
        tally(&burst(s.port, "/nd/x", 8)),
        vec![(200, "PASSED".into(), 4), (503, "REJECTED".into(), 4)]
    );
    // delay=1: the first excess request at once, two more delayed.
    assert_eq!(
        tally(&burst(s.port, "/dl/x", 6)),
        vec![
            (200, "DELAYED".into(), 2),
            (200, "PASSED".into(), 2),
            (503, "REJECTED".into(), 2)
        ]
    );
    // Dry run: counted, never refused.
    assert_eq!(
        tally(&burst(s.port, "/dry/x", 4)),
        vec![
            (200, "PASSED".into(), 2),
            (200, "REJECTED_DRY_RUN".into(), 2)
        ]
    );
    // limit_req_status.
    assert_eq!(
        tally(&burst(s.port, "/st/x", 2)),
        vec![(200, "PASSED".into(), 1), (429, "REJECTED".into(), 1)]
    );
    let log = s.wait_log("logs/error.log", "by zone \"st\"", Duration::from_secs(5));
    // The excess printed depends on the milliseconds between requests.
    for (level, text, zone) in [
        ("[error]", "limiting requests, excess: ", " by zone \"nd\""),
        ("[warn]", "delaying request, excess: ", ", by zone \"dl\""),
        (
            "[error]",
            "limiting requests, dry run, excess: ",
            " by zone \"dry\"",
        ),
        ("[error]", "limiting requests, excess: ", " by zone \"st\""),
    ] {
        assert!(
            log.lines()
                .any(|l| l.contains(level) && l.contains(text) && l.contains(zone)),
            "missing {level} {text}…{zone} in\n{log}"
        );
    }
}

#[test]
fn limit_conn_refuses_while_the_slot_is_held() {
    let site = site();
    let origin = slow_origin();
    let s = start_porter(site.path(), origin.port);
    let got: Vec<u16> = burst(s.port, "/conn/x", 3)
        .iter()
        .map(|r| r.status)
        .collect();
    let mut sorted = got.clone();
    sorted.sort();
    assert_eq!(sorted, vec![200, 503, 503], "{got:?}");
    // The slot is given back when the request ends (the client may read
    // the answer a moment before the server is done with the request).
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while get(s.port, "/conn/x").status != 200 {
        assert!(std::time::Instant::now() < deadline, "the slot stays held");
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = s.wait_log(
        "logs/error.log",
        "limiting connections",
        Duration::from_secs(5),
    );
    assert!(log.contains("limiting connections by zone \"cz\""), "{log}");
}

#[test]
fn bad_configurations_are_refused_as_nginx_refuses_them() {
    let cases = [
        ("limit_req_zone $remote_addr zone=z:10k rate=1r/s;", "zone \"zone=z:10k\" is too small"),
        ("limit_req_zone $remote_addr zone=z:1m rate=0r/s;", "invalid rate \"rate=0r/s\""),
        ("limit_req_zone $remote_addr zone=z:1m rate=1r/s sync;", "invalid number of arguments in \"limit_req_zone\" directive"),
        ("server { location / { limit_req zone=nope; } }", "zero size shared memory zone \"nope\""),
        ("limit_req_zone $remote_addr zone=z:1m rate=1r/s; server { location / { limit_req zone=z burst=0; } }", "invalid burst value \"burst=0\""),
        ("limit_req_zone $remote_addr zone=z:1m rate=1r/s; server { location / { limit_req zone=z; limit_req zone=z; } }", "\"limit_req\" directive is duplicate"),
        ("server { location / { limit_req burst=3; } }", "\"limit_req\" must have \"zone\" parameter"),
        ("server { deny 1.2.3.4/33; }", "invalid parameter \"1.2.3.4/33\""),
        ("server { satisfy some; }", "invalid value \"some\""),
        ("server { limit_req_status 399; }", "value must be between 400 and 599"),
        ("limit_conn_zone $remote_addr zone=c:1m; server { limit_conn c 0; }", "invalid number of connections \"0\""),
        ("server { auth_basic a; auth_basic b; }", "\"auth_basic\" directive is duplicate"),
    ];
    for (body, want) in cases {
        let dir = TempDir::new("access-conf");
        std::fs::create_dir_all(dir.path().join("logs")).unwrap();
        let conf = dir.write(
            "porter.conf",
            format!("events {{}}\nhttp {{ access_log off; {body} }}\n"),
        );
        let out = run(&[
            "-t",
            "-p",
            dir.path().to_str().unwrap(),
            "-c",
            conf.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{body} accepted");
        assert!(err.contains(want), "{body}: want {want:?}, got {err}");
    }
}

/// Status and the headers that matter here, for comparison.
fn answer(r: &Resp) -> String {
    format!(
        "{} www-authenticate={:?} x-user={:?} x-limit={:?} content-type={:?} body={:?}",
        r.status,
        r.header("www-authenticate"),
        r.header("x-user"),
        r.header("x-limit"),
        r.header("content-type"),
        // The built-in pages name the server; the files must match.
        if r.text().contains("<hr>") {
            String::new()
        } else {
            r.text()
        },
    )
}

/// Every case in turn, the limit bursts as tallies.
fn run_cases(port: u16) -> Vec<String> {
    let mut out = Vec::new();
    for path in [
        "/a/x", "/b/x", "/c/x", "/d/x", "/e/x", "/any/x", "/anyip/x", "/all/x",
    ] {
        out.push(format!("{path}: {}", answer(&get(port, path))));
    }
    for host in ["/ok/x", "/no/x", "/pub/x"] {
        out.push(format!(
            "inh {host}: {}",
            answer(&get_host(port, host, "inh.test"))
        ));
    }
    for user in USERS {
        for pw in [format!("pw-{user}"), "wrong".to_string()] {
            let r = get_with(port, "/auth/x", &basic(user, &pw));
            out.push(format!("{user}:{pw}: {}", answer(&r)));
        }
    }
    for (path, hdr) in [
        ("/auth/x", String::new()),
        ("/auth/x", basic("nobody", "x")),
        ("/auth/x", "Authorization: Basic !!!\r\n".to_string()),
        (
            "/auth/x",
            "Authorization: basic    ".to_string() + &b64("plain:pw-plain") + "\r\n",
        ),
        ("/any/x", basic("sha", "pw-sha")),
        ("/nofile/x", basic("plain", "pw-plain")),
        ("/p401/x", String::new()),
        ("/p401/x", basic("plain", "pw-plain")),
    ] {
        out.push(format!(
            "{path} {hdr:?}: {}",
            answer(&get_with(port, path, &hdr))
        ));
    }
    // A head porter refuses keeps none of its headers for variables
    // (docs/differences.md): only the status is compared.
    let twice = basic("plain", "pw-plain") + &basic("plain", "pw-plain");
    out.push(format!(
        "two Authorization: {}",
        get_with(port, "/auth/x", &twice).status
    ));
    for (path, n) in [("/nd/x", 8), ("/dl/x", 6), ("/dry/x", 4), ("/st/x", 2)] {
        out.push(format!("{path} x{n}: {:?}", tally(&burst(port, path, n))));
    }
    let mut conn: Vec<u16> = burst(port, "/conn/x", 3).iter().map(|r| r.status).collect();
    conn.sort();
    out.push(format!("/conn/x x3: {conn:?}"));
    out
}

#[test]
fn behaves_as_nginx() {
    let site = site();
    let origin = slow_origin();
    let body = http_body(site.path(), origin.port);
    let Some(nginx) = Nginx::start(&body) else {
        eprintln!("SKIPPED: {NGINX} is not installed (.ci/run installs nginx-light)");
        return;
    };
    let porter = Server::start(&porter_conf(&body));
    let theirs = run_cases(nginx.port);
    let ours = run_cases(porter.port);
    for (t, o) in theirs.iter().zip(&ours) {
        assert_eq!(o, t, "porter (left) and nginx (right) differ");
    }
    assert_eq!(ours.len(), theirs.len());
}

#[test]
fn a_reload_keeps_the_zones_it_declares_alike() {
    let site = site();
    let origin = slow_origin();
    let s = start_porter(site.path(), origin.port);
    // rate=1r/m: the bucket does not drain within the test.
    assert_eq!(
        tally(&burst(s.port, "/st/x", 2)),
        vec![(200, "PASSED".into(), 1), (429, "REJECTED".into(), 1)]
    );
    let conf = s.read("porter.conf").replace(
        "location /err/ {",
        "location /v/ { return 200 \"two\"; }\n    location /err/ {",
    );
    s.prefix.write("porter.conf", conf);
    s.signal(1);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while get(s.port, "/v/").text() != "two" {
        assert!(std::time::Instant::now() < deadline, "reload did not apply");
        std::thread::sleep(Duration::from_millis(50));
    }
    // NGINX keeps a shared zone of the same name and size across a reload.
    assert_eq!(get(s.port, "/st/x").status, 429);
}
