//! The response head of a uwsgi or SCGI application, as NGINX's `uwsgi`
//! and `scgi` modules read it (`ngx_http_*_process_status_line`): an
//! HTTP/1 status line and headers when the answer starts with one
//! (uWSGI's default), else CGI headers, the status from `Status:`, a
//! `Location:` without one a 302, else 200 (the FastCGI module's rules,
//! [`super::fastcgi::parse_cgi_head`]). A status line that does not parse
//! is skipped as NGINX's header parser skips an `HTTP/` line.

use super::fastcgi::parse_cgi_head;
use super::wire::{parse_response_head, HeadError, ResponseHead};

/// Parses the head at the start of `buf`: `Ok(None)` when more bytes are
/// needed (and `buf` is still under `max`).
pub fn parse_app_head(buf: &[u8], max: usize) -> Result<Option<ResponseHead>, HeadError> {
    const START: &[u8] = b"HTTP/";
    let n = buf.len().min(START.len());
    if buf[..n] == START[..n] {
        if n < START.len() {
            return Ok(None);
        }
        match parse_response_head(buf, max) {
            Err(HeadError::NoValidHeader) => return after_bad_status_line(buf, max),
            r => return r,
        }
    }
    parse_cgi_head(buf, max)
}

/// A line that starts as a status line but is not one: NGINX reads it as
/// a header line, which its parser skips (`HTTP/...` lines, kept for IIS),
/// and the CGI header goes on after it.
fn after_bad_status_line(buf: &[u8], max: usize) -> Result<Option<ResponseHead>, HeadError> {
    let Some(eol) = buf.iter().position(|&c| c == b'\n') else {
        return if buf.len() >= max {
            Err(HeadError::TooBig)
        } else {
            Ok(None)
        };
    };
    let skip = eol + 1;
    if skip >= max {
        return Err(HeadError::TooBig);
    }
    Ok(parse_cgi_head(&buf[skip..], max - skip)?.map(|mut h| {
        h.len += skip;
        h
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every split of `raw` gives `None` until the head is whole.
    fn parse_split(raw: &[u8]) -> ResponseHead {
        for i in 0..raw.len() {
            if let Ok(Some(h)) = parse_app_head(&raw[..i], 4096) {
                assert!(h.len <= i, "a head before its end at {i}");
            }
        }
        parse_app_head(raw, 4096).unwrap().unwrap()
    }

    #[test]
    fn a_status_line_gives_the_status_and_keeps_a_status_header() {
        let h = parse_split(b"HTTP/1.1 201 Made\r\nStatus: 404\r\nX-A: 1\r\n\r\nbody");
        assert_eq!((h.status, h.reason()), (201, "Made"));
        assert_eq!(h.header("status"), Some("404"));
        assert_eq!(h.len, 42);
    }

    #[test]
    fn cgi_headers_take_status_location_or_200() {
        let h = parse_split(b"Status: 404 Gone Away\r\nContent-Type: text/plain\r\n\r\n");
        assert_eq!((h.status, h.reason()), (404, "Gone Away"));
        let h = parse_split(b"Location: /x\n\n");
        assert_eq!(h.status, 302);
        let h = parse_split(b"Content-Type: text/html\r\n\r\n");
        assert_eq!(h.status, 200);
        // Something that starts as a status line but is not one is a
        // header line NGINX skips.
        let h = parse_split(b"HTTP/1.1 abc\r\nX-A: 1\r\n\r\nbody");
        assert_eq!((h.status, h.header("x-a"), h.len), (200, Some("1"), 24));
    }

    #[test]
    fn malformed_and_oversized_heads_are_refused() {
        assert_eq!(
            parse_app_head(b"Status: abc\r\n\r\n", 4096),
            Err(HeadError::Protocol(
                "upstream sent invalid status \"abc\"".into()
            ))
        );
        assert_eq!(
            parse_app_head(b"Bad Header\r\n\r\n", 4096),
            Err(HeadError::InvalidHeader("Bad\\x20...".into()))
        );
        let long = format!("X-A: {}\r\n", "a".repeat(100));
        assert_eq!(parse_app_head(long.as_bytes(), 50), Err(HeadError::TooBig));
        let line = format!("HTTP/1.1 200 OK\r\n{long}");
        assert_eq!(parse_app_head(line.as_bytes(), 50), Err(HeadError::TooBig));
    }
}
