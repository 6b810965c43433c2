//! Conditional requests (`If-None-Match`, `If-Modified-Since`, `If-Match`,
//! `If-Unmodified-Since`, `if_modified_since`, `etag off`) asked of porter
//! and of Debian's nginx on the same docroot (`tests/common/differential.rs`),
//! on files and on error pages and generated bodies; a proxied answer
//! gets no 304 or 412 from the proxy (`tests/common/beside.rs`).

use std::path::Path;

use crate::common::beside::{self, Both};
use crate::common::differential::{
    self, etag_of, req, req_ka, Cases, EARLIER, LAST_MODIFIED, LATER,
};
use crate::common::origin::{Origin, Reply};

#[test]
fn conditional_requests_answer_as_nginx() {
    differential::compare("conditional requests", |root, c| {
        conditional_cases(root, c);
        conditional_special_cases(root, c);
        etag_off_cases(root, c);
    });
}

#[test]
fn conditionals_and_ranges_on_error_pages_answer_as_nginx() {
    differential::compare("conditionals and ranges on error pages", error_page_cases);
}

/// Each conditional header, and pairs of them, on a file.
fn conditional_cases(root: &Path, c: &mut Cases) {
    let a = "/txt/a.txt";
    for (label, h) in &conditional_headers(&etag_of(root, "txt/a.txt")) {
        c.same(&format!("{label} on {a}"), vec![req("GET", a, h)]);
    }
}

/// The conditional header lines asked, by name, given the file's ETag.
fn conditional_headers(et: &str) -> Vec<(&'static str, String)> {
    let lm = LAST_MODIFIED;
    vec![
        ("If-None-Match match", format!("If-None-Match: {et}\r\n")),
        (
            "If-None-Match mismatch",
            "If-None-Match: \"nope\"\r\n".into(),
        ),
        ("If-None-Match *", "If-None-Match: *\r\n".into()),
        (
            "If-None-Match list",
            format!("If-None-Match: \"x\", {et}\r\n"),
        ),
        ("If-None-Match weak", format!("If-None-Match: W/{et}\r\n")),
        (
            "If-Modified-Since exact",
            format!("If-Modified-Since: {lm}\r\n"),
        ),
        (
            "If-Modified-Since earlier",
            format!("If-Modified-Since: {EARLIER}\r\n"),
        ),
        (
            "If-Modified-Since later",
            format!("If-Modified-Since: {LATER}\r\n"),
        ),
        (
            "If-Modified-Since garbage",
            "If-Modified-Since: yesterday\r\n".into(),
        ),
        ("If-Match match", format!("If-Match: {et}\r\n")),
        ("If-Match mismatch", "If-Match: \"nope\"\r\n".into()),
        ("If-Match *", "If-Match: *\r\n".into()),
        ("If-Match weak", format!("If-Match: W/{et}\r\n")),
        (
            "If-Unmodified-Since exact",
            format!("If-Unmodified-Since: {lm}\r\n"),
        ),
        (
            "If-Unmodified-Since earlier",
            format!("If-Unmodified-Since: {EARLIER}\r\n"),
        ),
        (
            "If-Unmodified-Since later",
            format!("If-Unmodified-Since: {LATER}\r\n"),
        ),
        (
            "If-Unmodified-Since garbage",
            "If-Unmodified-Since: whenever\r\n".into(),
        ),
        (
            "INM match + IMS earlier",
            format!("If-None-Match: {et}\r\nIf-Modified-Since: {EARLIER}\r\n"),
        ),
        (
            "INM mismatch + IMS exact",
            format!("If-None-Match: \"nope\"\r\nIf-Modified-Since: {lm}\r\n"),
        ),
        (
            "INM match + IMS exact",
            format!("If-None-Match: {et}\r\nIf-Modified-Since: {lm}\r\n"),
        ),
        (
            "If-Match mismatch + INM match",
            format!("If-Match: \"nope\"\r\nIf-None-Match: {et}\r\n"),
        ),
        (
            "IUS earlier + IMS exact",
            format!("If-Unmodified-Since: {EARLIER}\r\nIf-Modified-Since: {lm}\r\n"),
        ),
        (
            "If-Match match + IMS exact",
            format!("If-Match: {et}\r\nIf-Modified-Since: {lm}\r\n"),
        ),
    ]
}

/// Conditionals on a HEAD, an index, a location with add_header, a missing
/// file, a `return`, and `if_modified_since before`.
fn conditional_special_cases(root: &Path, c: &mut Cases) {
    let et = etag_of(root, "txt/a.txt");
    let lm = LAST_MODIFIED;
    let a = "/txt/a.txt";
    c.same(
        "HEAD If-None-Match match",
        vec![req("HEAD", a, &format!("If-None-Match: {et}\r\n"))],
    );
    c.same(
        "If-None-Match match on directory index",
        vec![req(
            "GET",
            "/sub/",
            &format!("If-None-Match: {}\r\n", etag_of(root, "sub/index.html")),
        )],
    );
    c.same(
        "If-None-Match match with add_header (304 gets X-Static)",
        vec![req(
            "GET",
            "/static/s.css",
            &format!("If-None-Match: {}\r\n", etag_of(root, "static/s.css")),
        )],
    );
    c.same(
        "If-Match mismatch on missing file",
        vec![req("GET", "/static/missing.css", "If-Match: \"nope\"\r\n")],
    );
    c.same(
        "If-None-Match * on return 200",
        vec![req("GET", "/exact", "If-None-Match: *\r\n")],
    );
    c.same(
        "if_modified_since before: IMS later",
        vec![req(
            "GET",
            "/ims/i.txt",
            &format!("If-Modified-Since: {LATER}\r\n"),
        )],
    );
    c.same(
        "if_modified_since before: IMS earlier",
        vec![req(
            "GET",
            "/ims/i.txt",
            &format!("If-Modified-Since: {EARLIER}\r\n"),
        )],
    );
    c.same(
        "if_modified_since before: IMS exact",
        vec![req(
            "GET",
            "/ims/i.txt",
            &format!("If-Modified-Since: {lm}\r\n"),
        )],
    );
}

/// `etag off`: conditionals by date only.
fn etag_off_cases(_root: &Path, c: &mut Cases) {
    let lm = LAST_MODIFIED;
    c.same("etag off: plain GET", vec![req("GET", "/noetag/n.txt", "")]);
    c.same(
        "etag off: If-None-Match *",
        vec![req("GET", "/noetag/n.txt", "If-None-Match: *\r\n")],
    );
    c.same(
        "etag off: If-Match *",
        vec![req("GET", "/noetag/n.txt", "If-Match: *\r\n")],
    );
    c.same(
        "etag off: If-Modified-Since exact",
        vec![req(
            "GET",
            "/noetag/n.txt",
            &format!("If-Modified-Since: {lm}\r\n"),
        )],
    );
    c.same(
        "etag off: If-Range with date",
        vec![req(
            "GET",
            "/noetag/n.txt",
            &format!("Range: bytes=0-1\r\nIf-Range: {lm}\r\n"),
        )],
    );
}

/// The filter chain on error pages and generated bodies: conditional
/// requests and ranges apply to any 200 (an error page sent with `=200`
/// included), not to an error page keeping its error status; a 416 keeps
/// the 200's add_header lines and adds its own.
fn error_page_cases(root: &Path, c: &mut Cases) {
    let a = "/txt/a.txt";
    let lm = LAST_MODIFIED;
    let page_etag = etag_of(root, "custom404.html");
    c.same(
        "If-None-Match * on error_page =200",
        vec![req("GET", "/e200/missing", "If-None-Match: *\r\n")],
    );
    c.same(
        "If-None-Match match on error_page =200",
        vec![req(
            "GET",
            "/e200/missing",
            &format!("If-None-Match: {page_etag}\r\n"),
        )],
    );
    c.same(
        "If-None-Match match on custom 404",
        vec![req(
            "GET",
            "/missing.txt",
            &format!("If-None-Match: {page_etag}\r\n"),
        )],
    );
    c.same(
        "If-Match mismatch on custom 404",
        vec![req("GET", "/missing.txt", "If-Match: \"nope\"\r\n")],
    );
    c.same(
        "Range bytes=100- on error_page =200",
        vec![req("GET", "/e200/missing", "Range: bytes=100-\r\n")],
    );
    c.same(
        "Range bytes=100- on a directory index",
        vec![req("GET", "/sub/", "Range: bytes=100-\r\n")],
    );
    c.same(
        "HEAD with unsatisfiable Range",
        vec![req("HEAD", a, "Range: bytes=100-\r\n")],
    );
    c.same(
        "Range bytes=100- with add_header in the location",
        vec![req("GET", "/static/s.css", "Range: bytes=100-\r\n")],
    );
    c.same(
        "keep-alive after 416",
        vec![
            req_ka("GET", a, "Range: bytes=100-\r\n"),
            req("GET", "/one.txt", ""),
        ],
    );
    for (label, h) in [
        ("If-Match *", "If-Match: *\r\n".to_string()),
        ("If-Match mismatch", "If-Match: \"nope\"\r\n".to_string()),
        (
            "If-None-Match mismatch",
            "If-None-Match: \"nope\"\r\n".to_string(),
        ),
        ("If-Modified-Since", format!("If-Modified-Since: {lm}\r\n")),
        (
            "If-Unmodified-Since",
            format!("If-Unmodified-Since: {LATER}\r\n"),
        ),
    ] {
        c.same(
            &format!("{label} on return 200"),
            vec![req("GET", "/exact", &h)],
        );
    }
    c.same(
        "HEAD If-None-Match * on return 200",
        vec![req("HEAD", "/exact", "If-None-Match: *\r\n")],
    );
    c.same(
        "try_files directory redirect keeps the arguments",
        vec![req("GET", "/tf/dir?x=1", "")],
    );
}

#[test]
fn proxied_responses_get_no_304_or_412_from_the_proxy() {
    let origin = Origin::start(|_| {
        Reply::ok(b"fresh")
            .header("ETag", "\"v1\"")
            .header("Last-Modified", "Sun, 13 Sep 2020 12:26:40 GMT")
    });
    let b = Both::start(
        "",
        "location / { proxy_pass http://127.0.0.1:{ORIGIN}; }",
        origin.port,
    );
    for (who, port) in b.ports() {
        for h in [
            "If-None-Match: \"v1\"\r\n",
            "If-Modified-Since: Sun, 13 Sep 2020 12:26:40 GMT\r\n",
            "If-Match: \"other\"\r\n",
            "If-Unmodified-Since: Sat, 12 Sep 2020 12:26:40 GMT\r\n",
        ] {
            let r = beside::get_h(port, "/", h);
            assert_eq!((r.status, r.text().as_str()), (200, "fresh"), "{who}: {h}");
        }
    }
}
