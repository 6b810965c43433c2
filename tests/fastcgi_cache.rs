//! `fastcgi_cache` against a real PHP (Debian's php-fpm, `common::php`)
//! with Debian's nginx answering the same requests beside porter: the
//! PHP app (`tests/common/php/cache.php`) counts the requests that reach
//! it per name, so each step shows whether the cache answered. MISS →
//! HIT, `$upstream_cache_status` in a header, `fastcgi_cache_valid` per
//! status, bypass and `fastcgi_no_cache`, POST not cached, `Set-Cookie`,
//! `X-Accel-Expires`, `Cache-Control`/`Expires` and
//! `fastcgi_ignore_headers`, expiry, revalidation with the entry's ETag
//! or Last-Modified, background update, stale answers on a timeout and
//! on a php-fpm that is down; then porter alone: the lock (one request
//! reaches PHP), a short answer never stored, purge, the no-key warning.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use crate::common::php::*;
use crate::common::*;

/// The `http { }` body both servers run: one server, the cache settings
/// at its level, one location per behaviour (each passes to `pass`).
fn site(pass: &str, counters: &Path, porter_only: &str) -> String {
    let root = app_root();
    let locs = [
        ("/c/", ""),
        (
            "/ig/",
            "fastcgi_ignore_headers Cache-Control Expires Set-Cookie;",
        ),
        ("/short/", "fastcgi_cache_valid 200 2s;"),
        (
            "/stale/",
            "fastcgi_cache_valid 200 2s; fastcgi_cache_use_stale error timeout; \
             fastcgi_read_timeout 1s;",
        ),
        (
            "/bg/",
            "fastcgi_cache_valid 200 2s; fastcgi_cache_use_stale updating; \
             fastcgi_cache_background_update on;",
        ),
        (
            "/rv/",
            "fastcgi_cache_valid 200 2s; fastcgi_cache_revalidate on;",
        ),
        ("/lock/", "fastcgi_cache_lock on;"),
    ];
    let locs: String = locs
        .iter()
        .map(|(path, extra)| format!("    location {path} {{ fastcgi_pass {pass}; {extra} }}\n"))
        .collect();
    format!(
        "  fastcgi_cache_path {{PREFIX}}/fc levels=1:2 keys_zone=fc:1m;\n  server {{\n    \
         listen 127.0.0.1:{{PORT}};\n    server_name localhost;\n    \
         fastcgi_param SCRIPT_FILENAME {root}/cache.php;\n    \
         fastcgi_param REQUEST_METHOD $request_method;\n    \
         fastcgi_param QUERY_STRING $query_string;\n    \
         fastcgi_param SERVER_PORT $server_port;\n    \
         fastcgi_param COUNTER_DIR {counters};\n    \
         fastcgi_cache fc;\n    fastcgi_cache_key $request_method$uri$arg_n;\n    \
         fastcgi_cache_valid 200 1m;\n    fastcgi_cache_bypass $arg_bypass;\n    \
         fastcgi_no_cache $arg_nocache;\n    \
         add_header X-Cache $upstream_cache_status always;\n{locs}{porter_only}\n  }}",
        root = root.display(),
        counters = counters.display(),
    )
}

/// A directory php-fpm's workers (nobody, when the tests run as root)
/// can write their counters in.
fn counter_dir() -> TempDir {
    let d = TempDir::new("fccount");
    set_mode(d.path(), 0o777);
    d
}

/// How many requests for `name` reached PHP through the server on `port`.
fn reached(counters: &TempDir, port: u16, file: &str) -> u32 {
    std::fs::read_to_string(counters.path().join(port.to_string()).join(file))
        .map(|s| s.trim().parse().unwrap())
        .unwrap_or(0)
}

fn request(port: u16, method: &str, target: &str) -> Resp {
    let mut req = format!("{method} {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    if method == "POST" {
        req.push_str("Content-Length: 0\r\n");
    }
    req.push_str("\r\n");
    raw(port, req.as_bytes())
}

/// What must match between the two servers.
fn essence(r: &Resp) -> String {
    let mut s = format!("{}\n", r.status_line);
    for h in ["x-cache", "x-count", "content-type", "set-cookie"] {
        if let Some(v) = r.header(h) {
            s.push_str(&format!("{h}: {v}\n"));
        }
    }
    if r.status < 500 {
        s.push_str(&r.text());
    }
    s
}

/// A step: a pause first (ms), the request, and the cache status porter
/// must give.
type Step = (u64, &'static str, &'static str, &'static str);

/// Runs `steps` against porter (checking each status) and, when nginx is
/// installed, against nginx, comparing the answers.
fn run_steps(porter: u16, nginx: Option<u16>, steps: &[Step]) {
    for &(pause, method, target, want) in steps {
        std::thread::sleep(Duration::from_millis(pause));
        let p = request(porter, method, target);
        assert_eq!(
            p.header("x-cache").unwrap_or(""),
            want,
            "{method} {target}: {}",
            essence(&p)
        );
        if let Some(n) = nginx {
            let n = request(n, method, target);
            assert_eq!(essence(&p), essence(&n), "{method} {target}");
        }
    }
}

fn servers(pass: &str, counters: &TempDir) -> (Server, Option<Nginx>) {
    let porter = Server::start(&one_worker_conf(&site(pass, counters.path(), "")));
    let nginx = Nginx::start(&site(pass, counters.path(), ""));
    if nginx.is_none() {
        eprintln!("nginx is not installed: porter's answers checked alone");
    }
    (porter, nginx)
}

/// The cache's answers beside nginx's, step by step: bypass, no_cache,
/// validity per status, what the application's headers say, ignored
/// headers, expiry, revalidation and background update.
const STEPS: &[Step] = &[
    (0, "GET", "/c/?n=a", "MISS"),
    (0, "GET", "/c/?n=a", "HIT"),
    (0, "GET", "/c/?n=a&bypass=1", "BYPASS"),
    (0, "GET", "/c/?n=a", "HIT"),
    (0, "GET", "/c/?n=a&nocache=1", "HIT"),
    (0, "GET", "/c/?n=b&nocache=1", "MISS"),
    (0, "GET", "/c/?n=b", "MISS"),
    (0, "GET", "/c/?n=b", "HIT"),
    // Only 200 has a fastcgi_cache_valid time.
    (0, "GET", "/c/?n=c&code=404", "MISS"),
    (0, "GET", "/c/?n=c&code=404", "MISS"),
    (0, "GET", "/c/?n=c&code=201", "MISS"),
    (0, "GET", "/c/?n=c&code=201", "MISS"),
    // What the application says wins over fastcgi_cache_valid.
    (0, "GET", "/c/?n=d&xae=0", "MISS"),
    (0, "GET", "/c/?n=d&xae=0", "MISS"),
    (0, "GET", "/c/?n=e&cc=no-store", "MISS"),
    (0, "GET", "/c/?n=e&cc=no-store", "MISS"),
    (0, "GET", "/c/?n=g&cc=private", "MISS"),
    (0, "GET", "/c/?n=g&cc=private", "MISS"),
    (0, "GET", "/c/?n=l&expires=-100", "MISS"),
    (0, "GET", "/c/?n=l&expires=-100", "MISS"),
    (0, "GET", "/c/?n=f&cookie=1", "MISS"),
    (0, "GET", "/c/?n=f&cookie=1", "MISS"),
    (0, "GET", "/c/?n=u&code=404&cc=max-age=60", "MISS"),
    (0, "GET", "/c/?n=u&code=404&cc=max-age=60", "HIT"),
    // POST is not among fastcgi_cache_methods: no cache status.
    (0, "POST", "/c/?n=h", ""),
    (0, "POST", "/c/?n=h", ""),
    // fastcgi_ignore_headers Cache-Control Expires Set-Cookie.
    (0, "GET", "/ig/?n=i&cc=no-store", "MISS"),
    (0, "GET", "/ig/?n=i&cc=no-store", "HIT"),
    (0, "GET", "/ig/?n=j&cookie=1", "MISS"),
    (0, "GET", "/ig/?n=j&cookie=1", "HIT"),
    (0, "GET", "/ig/?n=k&expires=-100", "MISS"),
    (0, "GET", "/ig/?n=k&expires=-100", "HIT"),
    // Valid 1 s, unless X-Accel-Expires says longer; revalidation;
    // background update.
    (0, "GET", "/short/?n=m&xae=60", "MISS"),
    (0, "GET", "/short/?n=o", "MISS"),
    (0, "GET", "/short/?n=o", "HIT"),
    (0, "GET", "/rv/?n=p&validators=1", "MISS"),
    (0, "GET", "/rv/?n=q&validators=1&lmonly=1", "MISS"),
    (0, "GET", "/bg/?n=r", "MISS"),
    // nginx keeps an entry fresh through its last second, porter
    // not: past three seconds both have it expired (valid 2 s, and the
    // refreshed entries below fresh for at least one more second).
    (3200, "GET", "/short/?n=m&xae=60", "HIT"),
    (0, "GET", "/short/?n=o", "EXPIRED"),
    (0, "GET", "/short/?n=o", "HIT"),
    (0, "GET", "/rv/?n=p&validators=1", "REVALIDATED"),
    (0, "GET", "/rv/?n=p&validators=1", "HIT"),
    (0, "GET", "/rv/?n=q&validators=1&lmonly=1", "REVALIDATED"),
    (0, "GET", "/bg/?n=r", "STALE"),
    (300, "GET", "/bg/?n=r", "HIT"),
];

#[test]
fn cache_answers_as_nginx_does() {
    let fpm = Fpm::start();
    let counters = counter_dir();
    let (porter, nginx) = servers(&format!("unix:{}", fpm.sock.display()), &counters);
    run_steps(porter.port, nginx.as_ref().map(|n| n.port), STEPS);
    // What reached PHP through porter.
    let seen = |f: &str| reached(&counters, porter.port, f);
    assert_eq!(seen("a.count"), 2, "a: the MISS and the BYPASS");
    assert_eq!(seen("b.count"), 2);
    assert_eq!(seen("u.count"), 1);
    assert_eq!(seen("h.count"), 2, "POST");
    assert_eq!(seen("p.count"), 1, "revalidated, not fetched again");
    assert_eq!(seen("p.cond"), 1, "the ETag went to PHP");
    assert_eq!(seen("q.cond"), 1, "the Last-Modified went to PHP");
    assert_eq!(seen("r.count"), 2, "the background update");
    let body = request(porter.port, "GET", "/bg/?n=r").text();
    assert_eq!(body, "n=r count=2 method=GET\n");
    client_validators_stay_off_php(&counters, &porter, nginx.as_ref());
}

/// The client's validators do not reach PHP on a miss (NGINX's cache
/// headers): PHP answers 200, stored; the client gets its 304 from the
/// cache's not-modified filter.
fn client_validators_stay_off_php(counters: &TempDir, porter: &Server, nginx: Option<&Nginx>) {
    let seen = |f: &str| reached(counters, porter.port, f);
    let conditional = |port: u16| {
        let req = "GET /rv/?n=w&validators=1 HTTP/1.1\r\nHost: localhost\r\n\
                   If-None-Match: \"v1\"\r\nConnection: close\r\n\r\n";
        raw(port, req.as_bytes())
    };
    let p = conditional(porter.port);
    assert_eq!((p.status, p.header("x-cache")), (304, Some("MISS")));
    assert_eq!((seen("w.count"), seen("w.cond")), (1, 0));
    if let Some(n) = nginx {
        assert_eq!(essence(&p), essence(&conditional(n.port)));
    }
}

#[test]
fn stale_answers_on_a_timeout_and_on_a_down_php_fpm() {
    let fpm = Fpm::start();
    let counters = counter_dir();
    let (porter, nginx) = servers(&format!("127.0.0.1:{}", fpm.port), &counters);
    let nginx_port = nginx.as_ref().map(|n| n.port);
    run_steps(
        porter.port,
        nginx_port,
        &[
            (0, "GET", "/stale/?n=s", "MISS"),
            (0, "GET", "/stale/?n=t", "MISS"),
            (0, "GET", "/stale/?n=s", "HIT"),
            // Expired; the script is slower than fastcgi_read_timeout.
            (3200, "GET", "/stale/?n=s&sleep=1500", "STALE"),
        ],
    );
    drop(fpm);
    run_steps(
        porter.port,
        nginx_port,
        &[
            (0, "GET", "/stale/?n=t", "STALE"),
            // Nothing stored: the 502 of a down php-fpm.
            (0, "GET", "/c/?n=never", "MISS"),
        ],
    );
    let r = request(porter.port, "GET", "/stale/?n=t");
    assert_eq!(r.text(), "n=t count=1 method=GET\n");
    assert_eq!(request(porter.port, "GET", "/c/?n=never").status, 502);
}

/// porter alone: the lock, a short answer, purge.
fn porter_alone(counters: &TempDir, pass: &str) -> Server {
    let extra =
        "    location /purge/ { fastcgi_pass PASS; fastcgi_cache_purge PURGE from 127.0.0.1; fastcgi_cache_key $uri$arg_n; }"
            .replace("PASS", pass);
    Server::start(&one_worker_conf(&site(pass, counters.path(), &extra)))
}

#[test]
fn the_lock_lets_one_request_reach_php() {
    let fpm = Fpm::start();
    let counters = counter_dir();
    let porter = porter_alone(&counters, &format!("unix:{}", fpm.sock.display()));
    let port = porter.port;
    let answers: Vec<Resp> = (0..8)
        .map(|_| std::thread::spawn(move || request(port, "GET", "/lock/?n=l&sleep=500")))
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    assert_eq!(reached(&counters, port, "l.count"), 1);
    let mut statuses: Vec<&str> = answers
        .iter()
        .map(|r| r.header("x-cache").unwrap_or(""))
        .collect();
    statuses.sort();
    assert_eq!(
        statuses,
        ["HIT"; 7]
            .iter()
            .chain(&["MISS"])
            .copied()
            .collect::<Vec<_>>()
    );
    for r in &answers {
        assert_eq!(r.text(), "n=l count=1 method=GET\n");
    }
}

#[test]
fn a_short_answer_is_never_stored_and_purge_removes_an_entry() {
    let fpm = Fpm::start();
    let counters = counter_dir();
    let porter = porter_alone(&counters, &format!("unix:{}", fpm.sock.display()));
    let port = porter.port;
    // Content-Length 100, six bytes sent: the cache stores nothing.
    for _ in 0..2 {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.write_all(b"GET /c/?n=sh&short=1 HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .unwrap();
        // porter closes the connection short of the length (with the
        // head, or before it when the cut comes with the first piece).
        let got = String::from_utf8_lossy(&read_all(&mut c)).into_owned();
        assert!(!got.contains("X-Cache: HIT"), "{got}");
    }
    assert_eq!(reached(&counters, port, "sh.count"), 2);
    let log = porter.wait_log(
        "logs/error.log",
        "upstream prematurely closed",
        Duration::from_secs(5),
    );
    assert!(log.contains("upstream prematurely closed"), "{log}");
    // The aborted fill's temp file goes through the zone's manager.
    let fc = porter.prefix.path().join("fc");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while entries_in(&fc) != 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(entries_in(&fc), 0, "no entry, no temp file: {fc:?}");
    // Purge: the entry goes, the next GET reaches PHP.
    assert_eq!(
        request(port, "GET", "/purge/?n=pu").header("x-cache"),
        Some("MISS")
    );
    assert_eq!(
        request(port, "GET", "/purge/?n=pu").header("x-cache"),
        Some("HIT")
    );
    let r = request(port, "PURGE", "/purge/?n=pu");
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("Key : /purge/pu"), "{}", r.text());
    assert_eq!(request(port, "PURGE", "/purge/?n=pu").status, 404);
    assert_eq!(
        request(port, "GET", "/purge/?n=pu").header("x-cache"),
        Some("MISS")
    );
    assert_eq!(reached(&counters, port, "pu.count"), 2);
}

fn entries_in(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| match e.file_type().unwrap().is_dir() {
                    true => entries_in(&e.path()),
                    false => 1,
                })
                .sum()
        })
        .unwrap_or(0)
}

#[test]
fn fastcgi_cache_without_a_key_warns_as_nginx() {
    let conf = one_server_conf(
        "  fastcgi_cache_path {PREFIX}/fc keys_zone=z:1m;",
        "    location / { fastcgi_pass 127.0.0.1:9; fastcgi_cache z; }",
    );
    let dir = TempDir::new("fckey");
    std::fs::create_dir_all(dir.path().join("logs")).unwrap();
    let p = dir.write(
        "porter.conf",
        conf.replace("{PREFIX}", dir.path().to_str().unwrap())
            .replace("{PORT}", &free_port().to_string()),
    );
    let out = run(&["-t", "-c", p.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let lines = conf.lines().count();
    assert!(
        err.contains(&format!(
            "[warn] no \"fastcgi_cache_key\" for \"fastcgi_cache\" in {}:{}",
            p.display(),
            lines
        )),
        "{err}"
    );
    // With a key (at any level) no warning.
    let keyed = conf.replace(
        "fastcgi_cache z;",
        "fastcgi_cache z; fastcgi_cache_key $uri;",
    );
    let p = dir.write(
        "keyed.conf",
        keyed
            .replace("{PREFIX}", dir.path().to_str().unwrap())
            .replace("{PORT}", &free_port().to_string()),
    );
    let out = run(&["-t", "-c", p.to_str().unwrap()]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("fastcgi_cache_key"));
}
