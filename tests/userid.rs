//! The userid filter (`userid`, `userid_*`, `$uid_got`, `$uid_set`,
//! `$uid_reset`): the `Set-Cookie` and `P3P` lines, a cookie read back,
//! the mark added to an old cookie, a reset, the error lines and the
//! byte order of `v1` and `on` — compared with Debian's nginx where the
//! bytes do not depend on the time or the process.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::common::{both, config_error, get_with, one_server_conf, Resp};
use porter::access::basic;

const SERVER: &str = "
    userid on;
    add_header X-Got $uid_got;
    add_header X-Set $uid_set;
    location / { return 200 ok; }
    location /all {
        userid_name test; userid_path /0123456789; userid_domain test.domain;
        userid_expires max; userid_flags httponly samesite=none secure;
        userid_p3p 'policyref=\"/w3c/p3p.xml\"'; userid_mark t;
        return 200 ok;
    }
    location /v1 { userid v1; userid_mark =; return 200 ok; }
    location /mark { userid_mark t; return 200 ok; }
    location /log { userid log; return 200 ok; }
    location /off { userid off; return 200 ok; }
";

const HTTP: &str = "map $arg_r $uid_reset { default 0; yes 1; log log; }";

/// A uid cookie NGINX made (`userid on`, 127.0.0.1), as a client sends
/// it back.
const SENT: &str = "fwAAAWZGjQAAwA5yAwMEAg==";

fn ask(port: u16, path: &str, cookie: Option<&str>) -> Resp {
    let extra = cookie.map_or(String::new(), |c| format!("Cookie: a=b; uid={c}\r\n"));
    get_with(port, path, &extra)
}

/// The `Set-Cookie` line with its 22 uid characters masked.
fn masked(r: &Resp) -> Option<String> {
    let c = r.header("set-cookie")?;
    let eq = c.find('=')?;
    Some(format!("{}=<uid>{}", &c[..eq], &c[eq + 23..]))
}

#[test]
fn cookie_lines_match_nginx_byte_for_byte() {
    let (p, n) = both(HTTP, SERVER);
    let a = ask(p.port, "/all", None);
    assert_eq!(
        masked(&a).unwrap(),
        "test=<uid>t=; expires=Thu, 31-Dec-37 23:55:55 GMT; domain=test.domain; \
         path=/0123456789; secure; httponly; samesite=none"
    );
    assert_eq!(a.header("p3p"), Some("policyref=\"/w3c/p3p.xml\""));
    assert_eq!(
        masked(&ask(p.port, "/", None)).unwrap(),
        "uid=<uid>==; path=/"
    );
    assert!(ask(p.port, "/log", None).header("set-cookie").is_none());
    assert!(ask(p.port, "/off", None).header("set-cookie").is_none());
    let Some(n) = n else { return };
    for path in ["/all", "/", "/v1", "/mark", "/log", "/off"] {
        let (pr, nr) = (ask(p.port, path, None), ask(n.port, path, None));
        assert_eq!(masked(&pr), masked(&nr), "{path}");
        assert_eq!(pr.header("p3p"), nr.header("p3p"), "{path}");
        let order = |r: &Resp| -> Vec<String> { r.headers.iter().map(|h| h.0.clone()).collect() };
        assert_eq!(order(&pr)[2..], order(&nr)[2..], "{path}");
    }
}

#[test]
fn a_cookie_sent_back_reads_and_is_remarked_as_nginx_does() {
    let (p, n) = both(HTTP, SERVER);
    let kept = ask(p.port, "/", Some(SENT));
    assert!(kept.header("set-cookie").is_none(), "{:?}", kept.headers);
    assert!(kept.header("x-set").is_none());
    let got = kept.header("x-got").unwrap().to_string();
    assert!(got.starts_with("uid=") && got.len() == 36, "{got}");
    // Without its mark the cookie is sent again, marked, the same uid.
    let marked = ask(p.port, "/mark", Some(SENT));
    assert_eq!(
        marked.header("set-cookie"),
        Some(format!("uid={}t=; path=/", &SENT[..22]).as_str())
    );
    assert_eq!(marked.header("x-set"), Some(got.as_str()));
    let Some(n) = n else { return };
    for path in ["/", "/mark", "/v1", "/log", "/off"] {
        let (pr, nr) = (ask(p.port, path, Some(SENT)), ask(n.port, path, Some(SENT)));
        for h in ["x-got", "x-set", "set-cookie"] {
            assert_eq!(pr.header(h), nr.header(h), "{path} {h}");
        }
    }
    for bad in ["abc", "!!!!!!!!!!!!!!!!!!!!!!!!"] {
        let pr = ask(p.port, "/", Some(bad));
        assert_eq!(masked(&pr).unwrap(), "uid=<uid>==; path=/");
        assert!(pr.header("x-got").is_none());
        ask(n.port, "/", Some(bad));
    }
    for line in [
        "client sent too short userid cookie \"a=b; uid=abc\"",
        "client sent invalid userid cookie \"a=b; uid=!!!!!!!!!!!!!!!!!!!!!!!!\"",
    ] {
        assert!(n.error_log().contains(line), "nginx: {line}");
        p.wait_log("logs/error.log", line, std::time::Duration::from_secs(5));
    }
}

/// The four words of a cookie's uid.
fn words(cookie: &str) -> [u8; 16] {
    let b64 = &cookie[cookie.find('=').unwrap() + 1..][..22];
    basic::decode(b64.as_bytes()).unwrap().try_into().unwrap()
}

#[test]
fn on_is_network_order_and_v1_host_order() {
    let (p, _) = both(HTTP, SERVER);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let on = ask(p.port, "/", None);
    let uid = words(on.header("set-cookie").unwrap());
    assert_eq!(uid[..4], [127, 0, 0, 1]);
    let t = u32::from_be_bytes(uid[4..8].try_into().unwrap()) as i64;
    assert!((t - now).abs() < 10, "{t} {now}");
    // `$uid_set` prints each word in host order, as NGINX's `%08XD`.
    let hex: String = uid
        .chunks(4)
        .map(|w| format!("{:08X}", u32::from_ne_bytes(w.try_into().unwrap())))
        .collect();
    assert_eq!(on.header("x-set").unwrap(), format!("uid={hex}"));
    let v1 = words(ask(p.port, "/v1", None).header("set-cookie").unwrap());
    assert_eq!(v1[..4], [0, 0, 0, 0]);
    let t = u32::from_ne_bytes(v1[4..8].try_into().unwrap()) as i64;
    assert!((t - now).abs() < 10, "{t} {now}");
}

#[test]
fn uid_reset_makes_a_new_uid_and_log_says_so() {
    let (p, _) = both(HTTP, SERVER);
    let set = SERVER.replace(
        "location /log",
        "location /set { set $uid_reset 1; return 200 ok; }\n    location /log",
    );
    let (q, _) = both("", &set);
    let r = ask(q.port, "/set", Some(SENT));
    assert_ne!(r.header("x-set"), r.header("x-got"));
    for path in ["/?r=yes", "/?r=log"] {
        let r = ask(p.port, path, Some(SENT));
        let c = r.header("set-cookie").expect(path);
        assert!(
            !c.starts_with(&format!("uid={}", &SENT[..22])),
            "{path}: {c}"
        );
        assert_ne!(r.header("x-set"), r.header("x-got"), "{path}");
    }
    let line = p.wait_log(
        "logs/error.log",
        "was reset",
        std::time::Duration::from_secs(5),
    );
    assert!(
        line.contains("[notice]") && line.contains("userid cookie \"uid="),
        "{line}"
    );
}

#[test]
fn bad_values_are_refused_as_nginx_refuses_them() {
    for (line, err) in [
        ("userid maybe;", "invalid value \"maybe\""),
        ("userid_flags secure bogus;", "invalid value \"bogus\""),
        (
            "userid_mark ab;",
            "\"userid_mark\" directive value must be \"off\" or a single letter, digit or \"=\"",
        ),
        (
            "userid_expires soon;",
            "\"userid_expires\" directive invalid value",
        ),
        (
            "userid_service x;",
            "\"userid_service\" directive invalid number",
        ),
        (
            "userid on; userid off;",
            "\"userid\" directive is duplicate",
        ),
    ] {
        let conf = one_server_conf("", &format!("location / {{ {line} }}"));
        let e = config_error(&conf.replace("{PORT}", "8080"));
        assert!(e.contains(err), "{line}: {e}");
    }
}
