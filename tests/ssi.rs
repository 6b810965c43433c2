//! The SSI filter on the real binary beside Debian's nginx 1.22 (skipped,
//! saying so, without `/usr/sbin/nginx`): every command (`echo` with its
//! encodings and `default`, `set` with variables, `if`/`elif`/`else` with
//! text, regex and captures, `config errmsg`/`timefmt`, `block` as a
//! stub), `include virtual=`/`file=` with `wait`, `set`, `stub`, nested
//! and relative includes, an include of a proxied location, an SSI page
//! proxied in small pieces (commands split across reads), a command
//! across a 64 KiB read of a large file, errors and
//! `ssi_silent_errors`, `ssi_types`, `ssi_last_modified`, HEAD, and the
//! headers the filter changes.

use crate::common;

use std::time::Duration;

use crate::common::origin::{Origin, Reply};
use crate::common::{one_worker_conf, Nginx, Resp, Server, TempDir};

fn req(port: u16, method: &str, path: &str) -> Resp {
    let r = format!("{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    std::io::Write::write_all(&mut s, r.as_bytes()).unwrap();
    let mut buf = Vec::new();
    common::read_response(&mut s, &mut buf, method == "HEAD").unwrap()
}

/// The header lines the filter changes.
type Changed = Vec<(&'static str, Option<String>)>;

/// Status, body and the headers the filter changes.
fn seen(r: &Resp) -> (u16, String, Changed) {
    let h = [
        "content-type",
        "content-length",
        "transfer-encoding",
        "last-modified",
        "etag",
        "accept-ranges",
    ]
    .into_iter()
    .map(|n| (n, r.header(n).map(str::to_string)))
    .collect();
    // porter's own pages name porter (docs/differences.md).
    let body = r
        .text()
        .replace("<center>porter</center>", "<center>nginx</center>");
    (r.status, body, h)
}

const BIG_CMD: &str = "<!--#echo var=\"arg_a\" default=\"none\" -->";

/// A document of `len` bytes with an `echo` starting at `at`.
fn big_page(len: usize, at: usize) -> String {
    let mut p = "x".repeat(at);
    p.push_str(BIG_CMD);
    p.push_str(&"y".repeat(len - at - BIG_CMD.len()));
    p
}

fn write_files(root: &TempDir) {
    root.write(
        "echo.html",
        "X<!--#echo var=\"arg_a\" -->X<!--#echo var=\"arg_b\" default=\"dflt\" -->X\
         <!--#set var=\"v\" value=\"<a&b> $arg_a ${arg_a}z \\$x\" -->\
         <!--#echo var=\"v\" -->|<!--#echo var=\"v\" encoding=\"url\" -->|\
         <!--#echo var=\"v\" encoding=\"none\" -->|<!--#echo var=\"v\" -->|\
         <!--#echo var=\"nothing\" -->|<!--#echo var=\"nothing\" default=\"\" -->X\n",
    );
    root.write(
        "if.html",
        "<!--#if expr=\"$arg_a\" -->A<!--#elif expr=\"$arg_b = two\" -->B\
         <!--#elif expr=\"$arg_b != /^t(h)(?P<rest>.*)\\$/\" -->C<!--#else -->\
         D<!--#echo var=\"1\" -->-<!--#echo var=\"rest\" --><!--#endif -->|\
         <!--#if expr=\"$arg_missing\" --><!--#if expr=\"x\" -->no<!--#endif -->\
         after<!--#endif -->|<!--#config timefmt=\"%Y\" -->\
         <!--#set var=\"y\" value=\"$date_gmt\" --><!--#if expr=\"$y = /^2[0-9]{3}\\$/\" -->\
         year<!--#endif -->\n",
    );
    root.write(
        "inc.html",
        "<!--#set var=\"v\" value=\"V\" -->\
         [<!--#include virtual=\"/inc/a.html\" -->]\
         [<!--#include virtual=\"inc/nested.html\" -->]\
         [<!--#include file=\"inc/a.html\" -->]\
         [<!--#include virtual=\"/p/origin?q=1\" -->]\
         [<!--#include virtual=\"/inc/setter.html\" wait=\"yes\" --><!--#echo var=\"fromsub\" -->]\
         [<!--#include virtual=\"/p/value\" set=\"got\" --><!--#echo var=\"got\" -->]\
         <!--#block name=\"one\" -->STUB <!--#echo var=\"v\" --><!--#endblock -->\
         [<!--#include virtual=\"/missing\" stub=\"one\" -->]\
         [<!--#include virtual=\"/inc/empty.html\" stub=\"one\" -->]\
         [<!--#include virtual=\"/missing\" -->]\n",
    );
    root.write("inc/a.html", "A<!--#echo var=\"v\" -->A");
    root.write("inc/nested.html", "N<!--#include virtual=\"a.html\" -->N");
    root.write(
        "inc/setter.html",
        "<!--#set var=\"fromsub\" value=\"S\" -->",
    );
    root.write("inc/empty.html", "");
    root.write(
        "err.html",
        "1<!--#nope -->2<!--#echo -->3<!--#echo var=x -->4<!--#else -->\
         5<!--#echo var=\"a\" bogus=\"1\" -->6<!--#config errmsg=\"[E]\" -->\
         <!--#include -->7<!--#include virtual=\"/a\" file=\"/b\" -->8\
         <!--#if expr=\"$a <\" -->9\n",
    );
    root.write("big.html", big_page(70_000, 65_530));
    root.write("t.txt", "<!--#echo var=\"arg_a\" -->");
}

fn conf(root: &std::path::Path, origin: u16) -> String {
    format!(
        "types {{ text/html html; text/plain txt; }}\n\
         server {{\n  listen 127.0.0.1:{{PORT}};\n  root {root};\n  server_tokens off;\n\
           ssi on;\n\
           location /silent/ {{ alias {root}/; ssi_silent_errors on; }}\n\
           location /lm/ {{ alias {root}/; ssi_last_modified on; }}\n\
           location /txt/ {{ alias {root}/; ssi_types text/plain; }}\n\
           location /off/ {{ alias {root}/; ssi off; }}\n\
           location /p/ {{ ssi off; proxy_pass http://127.0.0.1:{origin}/; }}\n\
           location /sp/ {{ proxy_pass http://127.0.0.1:{origin}/; }}\n\
         }}",
        root = root.display()
    )
}

/// The origin: `/value` is a short text, `/page` an SSI page sent in
/// 7-byte pieces, anything else names itself.
fn origin() -> Origin {
    Origin::start(|r| {
        let html = |b: &[u8]| Reply::ok(b).header("Content-Type", "text/html");
        match r.target.as_str() {
            "/value" => Reply::ok(b"from-origin"),
            "/page" => {
                let mut rep = html(
                    b"P<!--#set var=\"s\" value=\"split\" --><!--#echo var=\"s\" -->\
                      <!--#include virtual=\"/inc/a.html\" -->P",
                );
                rep.headers.push((
                    "Last-Modified".into(),
                    "Mon, 01 Jan 2024 00:00:00 GMT".into(),
                ));
                rep.headers.push(("Accept-Ranges".into(), "bytes".into()));
                rep.paced(7, Duration::from_millis(2))
            }
            t => html(format!("<b>origin {t}</b>").as_bytes()),
        }
    })
}

const PATHS: &[(&str, &str)] = &[
    ("GET", "/echo.html?a=1%3C"),
    ("GET", "/echo.html?a="),
    ("GET", "/echo.html"),
    ("GET", "/if.html?a=1"),
    ("GET", "/if.html?b=two"),
    ("GET", "/if.html?b=three"),
    ("GET", "/if.html?b=four"),
    ("GET", "/inc.html"),
    ("GET", "/err.html"),
    ("GET", "/silent/err.html"),
    ("GET", "/big.html?a=FOUND"),
    ("GET", "/sp/page"),
    ("GET", "/lm/echo.html"),
    ("GET", "/txt/t.txt?a=T"),
    ("GET", "/t.txt?a=T"),
    ("GET", "/off/echo.html"),
    ("HEAD", "/echo.html?a=1"),
    ("HEAD", "/lm/echo.html"),
];

#[test]
fn commands_answer_as_nginx_answers_them() {
    let root = TempDir::new("ssi");
    write_files(&root);
    let origin = origin();
    let http = conf(root.path(), origin.port);
    let srv = Server::start(&one_worker_conf(&http));

    let r = req(srv.port, "GET", "/echo.html?a=1%3C");
    assert_eq!(
        r.text(),
        "X1%3CXdfltX&lt;a&amp;b&gt; 1%3C 1%3Cz $x|%3Ca&b%3E%201%253C%201%253Cz%20$x|\
         <a&b> 1%3C 1%3Cz $x|<a&b> 1%3C 1%3Cz $x|(none)|X\n"
    );
    assert_eq!(r.header("content-length"), None);
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert_eq!(r.header("last-modified"), None);
    assert_eq!(
        req(srv.port, "GET", "/if.html?b=three")
            .text()
            .lines()
            .next(),
        Some("Dh-ree|after[an error occurred while processing the directive]|year")
    );
    let inc = req(srv.port, "GET", "/inc.html").text();
    assert!(
        inc.starts_with(
            "[AVA][NAVAN][AVA][<b>origin /origin?q=1</b>][S][from-origin][STUB V][STUB <!--#echo var=\"v\" -->][<html>"
        ),
        "{inc}"
    );
    let big = req(srv.port, "GET", "/big.html?a=FOUND").text();
    assert_eq!(big.len(), 70_000 - BIG_CMD.len() + 5);
    assert_eq!(&big[65_530..65_535], "FOUND");
    assert_eq!(req(srv.port, "GET", "/sp/page").text(), "PsplitA(none)AP");
    req(srv.port, "GET", "/err.html");
    for line in [
        "invalid SSI command: \"nope\"",
        "mandatory \"var\" parameter is absent in \"echo\" SSI command",
        "invalid context of SSI command: \"else\"",
        "invalid parameter name: \"bogus\" in \"echo\" SSI command",
    ] {
        srv.wait_log("logs/error.log", line, Duration::from_secs(5));
    }

    let Some(ngx) = Nginx::start(&http) else {
        eprintln!("skipping the comparison: /usr/sbin/nginx is not installed");
        return;
    };
    for (method, path) in PATHS {
        let (p, n) = (req(srv.port, method, path), req(ngx.port, method, path));
        assert_eq!(seen(&p), seen(&n), "{method} {path}");
    }
}

#[test]
fn an_include_cycle_stops_at_nginx_depth() {
    let root = TempDir::new("ssi-cycle");
    root.write("loop.html", "L<!--#include virtual=\"/loop.html\" -->");
    let http = format!(
        "types {{ text/html html; }}\n\
         server {{ listen 127.0.0.1:{{PORT}}; root {}; ssi on; }}",
        root.path().display()
    );
    let srv = Server::start(&one_worker_conf(&http));
    let r = req(srv.port, "GET", "/loop.html");
    assert_eq!(r.status, 200);
    let body = r.text();
    assert_eq!(body.matches('L').count(), 51, "{body}");
    assert!(body.ends_with("[an error occurred while processing the directive]"));
    let needle = "subrequests cycle while processing \"/loop.html\"";
    let log = srv.wait_log("logs/error.log", needle, Duration::from_secs(5));
    assert!(log.contains(needle), "{log}");
}
