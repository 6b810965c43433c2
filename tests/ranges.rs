//! Range requests (`Range`, `If-Range`, `max_ranges`, multipart answers)
//! asked of porter and of Debian's nginx on the same docroot
//! (`tests/common/differential.rs`).

use std::path::Path;

use crate::common::differential::{self, etag_of, req, Cases, EARLIER, LAST_MODIFIED};

#[test]
fn ranges_answer_as_nginx() {
    differential::compare("ranges", |root, c| {
        range_cases(root, c);
        range_edge_cases(root, c);
    });
}

/// Each shape of `Range` header, on GET and HEAD, with `If-Range`.
fn range_cases(root: &Path, c: &mut Cases) {
    let a = "/txt/a.txt";
    let et = etag_of(root, "txt/a.txt");
    let lm = LAST_MODIFIED;
    let ranges = [
        "bytes=0-9",
        "bytes=10-",
        "bytes=-5",
        "bytes=0-0,5-9",
        "bytes=0-1,3-4,-2",
        "bytes=0-1, 3-4",
        "bytes=0-100",
        "bytes=100-",
        "bytes=5-2",
        "bytes=abc",
        "bytes=0-1,x",
        "bytes=",
        "items=0-1",
        "BYTES=0-1",
        "bytes=0-20,5-26",
        "bytes=-0",
        "bytes=0-0,-1",
    ];
    for r in ranges {
        c.same(
            &format!("Range {r} on {a}"),
            vec![req("GET", a, &format!("Range: {r}\r\n"))],
        );
    }
    c.same(
        "HEAD with Range",
        vec![req("HEAD", a, "Range: bytes=0-9\r\n")],
    );
    c.same(
        "HEAD with multipart Range",
        vec![req("HEAD", a, "Range: bytes=0-1,4-5\r\n")],
    );
    c.same(
        "If-Range matching ETag",
        vec![req(
            "GET",
            a,
            &format!("Range: bytes=0-4\r\nIf-Range: {et}\r\n"),
        )],
    );
    c.same(
        "If-Range non-matching ETag",
        vec![req("GET", a, "Range: bytes=0-4\r\nIf-Range: \"nope\"\r\n")],
    );
    c.same(
        "If-Range matching date",
        vec![req(
            "GET",
            a,
            &format!("Range: bytes=0-4\r\nIf-Range: {lm}\r\n"),
        )],
    );
    c.same(
        "If-Range non-matching date",
        vec![req(
            "GET",
            a,
            &format!("Range: bytes=0-4\r\nIf-Range: {EARLIER}\r\n"),
        )],
    );
    c.same(
        "Range + If-None-Match match",
        vec![req(
            "GET",
            a,
            &format!("Range: bytes=0-4\r\nIf-None-Match: {et}\r\n"),
        )],
    );
}

/// `max_ranges`, files of no and one byte, a large binary, error pages and
/// generated bodies.
fn range_edge_cases(_root: &Path, c: &mut Cases) {
    c.same(
        "max_ranges 1: two ranges",
        vec![req("GET", "/ranges/r.txt", "Range: bytes=0-1,3-4\r\n")],
    );
    c.same(
        "max_ranges 1: one range",
        vec![req("GET", "/ranges/r.txt", "Range: bytes=2-5\r\n")],
    );
    c.same(
        "Range on empty file",
        vec![req("GET", "/empty.txt", "Range: bytes=0-0\r\n")],
    );
    c.same(
        "Range bytes=0-0 on 1-byte file",
        vec![req("GET", "/one.txt", "Range: bytes=0-0\r\n")],
    );
    c.same(
        "Range bytes=1- on 1-byte file",
        vec![req("GET", "/one.txt", "Range: bytes=1-\r\n")],
    );
    c.same(
        "Range inside 100 KB binary",
        vec![req("GET", "/bin/data.bin", "Range: bytes=50000-50099\r\n")],
    );
    c.same(
        "multipart Range on 100 KB binary",
        vec![req("GET", "/bin/data.bin", "Range: bytes=0-9,-10\r\n")],
    );
    c.same(
        "Range on custom 404",
        vec![req("GET", "/missing.txt", "Range: bytes=0-1\r\n")],
    );
    c.same(
        "Range on return 200",
        vec![req("GET", "/exact", "Range: bytes=0-1\r\n")],
    );
    c.same(
        "Range on error_page =200",
        vec![req("GET", "/e200/missing", "Range: bytes=0-1\r\n")],
    );
}
