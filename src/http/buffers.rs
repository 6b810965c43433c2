//! The worker's free list of connection buffers. A connection takes its
//! read buffer and its response-head buffer from here and hands both back
//! while it waits idle between requests, so a busy keep-alive connection
//! reuses a buffer instead of allocating one and an idle connection holds
//! none (NGINX frees its buffers on keep-alive the same way). A worker is
//! one thread, so the list is thread-local.

use std::cell::RefCell;

/// Most buffers kept on the list.
const SPARE_BUFFERS: usize = 256;
/// Larger buffers are freed rather than kept.
const SPARE_MAX_CAPACITY: usize = 16 * 1024;

thread_local! {
    static SPARE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// An empty buffer: one from the list, else a new one of 1 KiB.
pub fn take() -> Vec<u8> {
    SPARE
        .with(|s| s.borrow_mut().pop())
        .unwrap_or_else(|| Vec::with_capacity(1024))
}

/// Hands `v` back (emptied) unless it is unallocated, too large, or the
/// list is full.
pub fn give(mut v: Vec<u8>) {
    if v.capacity() == 0 || v.capacity() > SPARE_MAX_CAPACITY {
        return;
    }
    v.clear();
    SPARE.with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < SPARE_BUFFERS {
            s.push(v);
        }
    });
}
