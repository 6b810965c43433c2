//! Heap allocations made while reading a request head (issue 14: 1 KB over
//! TLS at parity with NGINX, which takes a request's memory from one
//! pool). Each used to be a malloc, a copy and a free, a dozen per
//! keep-alive request, and their small chunks overflowed glibc's tcache.
//! This binary counts the allocations of the calling thread through a
//! global allocator of its own.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use porter::http::request::{parse_head, HeadLimits};
use porter::http::uri;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count() {
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// The allocations `f` makes on this thread.
fn allocations(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

/// What wrk sends, and what a browser sends over HTTP/1.1 (a Host to
/// lowercase, a dozen lines, a value that is not UTF-8).
const HEADS: [&[u8]; 2] = [
    b"GET /1k.bin HTTP/1.1\r\nHost: 127.0.0.1:28443\r\n\r\n",
    b"GET /static/app.js?v=3 HTTP/1.1\r\nHost: WWW.Example.COM.\r\n\
      Connection: keep-alive\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\n\
      Accept: */*\r\nSec-Fetch-Site: same-origin\r\nSec-Fetch-Mode: no-cors\r\n\
      Sec-Fetch-Dest: script\r\nReferer: https://www.example.com/\r\n\
      Accept-Encoding: gzip, deflate, br\r\nAccept-Language: en-GB,en;q=0.9\r\n\
      Cookie: a=1; b=\xff2\r\nIf-None-Match: \"5f5e1000-1b\"\r\n\r\n",
];

#[test]
fn a_keep_alive_request_head_is_read_without_allocating() {
    let limits = HeadLimits::default();
    for head in HEADS {
        // The first head of a worker takes its text buffer from an empty
        // free list; the next ones reuse it.
        let first = parse_head(head, &limits).unwrap().unwrap();
        drop(first);
        let n = allocations(|| {
            let h = parse_head(head, &limits).unwrap().unwrap();
            assert_eq!(h.head_len, head.len());
            let host = h.host();
            assert!(matches!(host, Some("127.0.0.1:28443" | "www.example.com")));
            assert!(
                h.headers()
                    .any(|(n, v)| n == "Cookie" && v == "a=1; b=\u{fffd}2")
                    || h.headers().len() == 1
            );
        });
        assert_eq!(
            n,
            0,
            "allocations reading {:?}",
            String::from_utf8_lossy(head)
        );
    }
}

#[test]
fn a_normal_uri_is_copied_once() {
    for path in ["/1k.bin", "/static/app.js", "/"] {
        let mut out = String::new();
        let n = allocations(|| out = uri::normalize_with(path, true).unwrap());
        assert_eq!(out, path);
        assert_eq!(n, 1, "allocations normalising {path}");
    }
    // A path to decode or resolve takes the general way.
    assert_eq!(uri::normalize("/a/./b%41").unwrap(), "/a/bA");
}

#[test]
fn a_keep_alive_wait_is_listed_and_unlisted_without_allocating() {
    use porter::http::reuse::Reusable;
    use std::collections::VecDeque;
    // Fifty connections taking turns: each leaves the worker's list of
    // reusable connections when its next request comes and enters it again
    // after the response, twice a keep-alive request. Once the list has
    // grown to its high-water mark, that allocates nothing (issue 31: it
    // was a BTreeMap, which took a node for every few entries as the
    // numbers moved on and freed the emptied ones).
    let mut waiting: VecDeque<Reusable> = (0..50).map(|_| Reusable::enter_idle()).collect();
    for _ in 0..200 {
        waiting.pop_front();
        waiting.push_back(Reusable::enter_idle());
    }
    let n = allocations(|| {
        for _ in 0..2000 {
            waiting.pop_front();
            waiting.push_back(Reusable::enter_idle());
        }
    });
    assert_eq!(n, 0, "allocations of 2,000 keep-alive waits");
}
