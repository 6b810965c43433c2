//! Small helpers shared across modules: OS error text in NGINX's wording,
//! cached time strings, the graceful/fast shutdown signal the master, the
//! workers and the connections share, the user background threads
//! switch to, and a span of time any of its holders may end (`span.rs`).

pub mod cpu_pool;
pub mod net;
pub mod shutdown;
pub mod span;
pub mod thread_user;
pub mod time;

use std::io;

/// The C library's text for an OS error, without Rust's `(os error N)`
/// suffix, so messages read like NGINX's: `(2: No such file or directory)`.
pub fn strerror(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => {
            let s = io::Error::from_raw_os_error(code).to_string();
            match s.rfind(" (os error") {
                Some(i) => s[..i].to_string(),
                None => s,
            }
        }
        None => e.to_string(),
    }
}

/// Formats `(errno: text)` as NGINX appends to failed system calls.
pub fn errno_text(e: &io::Error) -> String {
    format!("({}: {})", e.raw_os_error().unwrap_or(0), strerror(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_text_reads_like_nginx() {
        let e = io::Error::from_raw_os_error(2);
        assert_eq!(errno_text(&e), "(2: No such file or directory)");
    }
}
