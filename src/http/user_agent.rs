//! The browsers NGINX tells apart by `User-Agent`
//! (`ngx_http_process_user_agent`), for `keepalive_disable`: MSIE up to 6
//! (a POST answered on a kept-alive connection may stall it) and Safari on
//! Mac OS X (which may send a POST on a connection the server closed);
//! any MSIE for `msie_refresh`.

use super::request::RequestHead;
use crate::config::KeepaliveDisable;

/// Whether `keepalive_disable` closes the connection after the request
/// whose head is `head` (its `User-Agent` and method).
pub fn closes_after(off: KeepaliveDisable, head: &RequestHead) -> bool {
    let post = head.method() == "POST";
    // The default (`msie6`) applies to a POST alone: a GET's head is not
    // searched for its User-Agent (issue 31).
    if !((off.msie6 && post) || off.safari) {
        return false;
    }
    closes(off, head.header("user-agent"), post)
}

/// Whether `keepalive_disable` closes the connection after this request.
pub fn closes(off: KeepaliveDisable, user_agent: Option<&str>, post: bool) -> bool {
    let Some(ua) = user_agent else {
        return false;
    };
    (off.msie6 && post && msie6(ua)) || (off.safari && safari(ua))
}

/// Any MSIE (NGINX's `r->headers_in.msie`: `MSIE ` with at least eight
/// bytes from it), for `msie_refresh`.
pub fn msie(ua: &str) -> bool {
    ua.find("MSIE ").is_some_and(|at| at + 7 < ua.len())
}

/// `MSIE 4.x`, `5.x`, or `6.x` without `SV1`, not Opera (NGINX's test: the
/// first `MSIE `, at least eight bytes of it).
fn msie6(ua: &str) -> bool {
    let Some(at) = ua.find("MSIE ") else {
        return false;
    };
    let m = &ua.as_bytes()[at..];
    if m.len() <= 7 || m[6] != b'.' || ua.contains("Opera") {
        return false;
    }
    match m[5] {
        b'4' | b'5' => true,
        b'6' => !ua[at + 8..].contains("SV1"),
        _ => false,
    }
}

/// Safari on Mac OS X: not MSIE, Opera, Gecko or Chrome (NGINX's order).
fn safari(ua: &str) -> bool {
    let msie = ua.find("MSIE ").is_some_and(|at| ua.len() - at > 7);
    !(msie || ua.contains("Opera") || ua.contains("Gecko/") || ua.contains("Chrome/"))
        && ua.contains("Safari/")
        && ua.contains("Mac OS X")
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULT: KeepaliveDisable = KeepaliveDisable {
        msie6: true,
        safari: false,
    };

    #[test]
    fn msie6_closes_after_a_post_only() {
        let ua = Some("Mozilla/4.0 (compatible; MSIE 5.0; Windows 98)");
        assert!(closes(DEFAULT, ua, true));
        assert!(!closes(DEFAULT, ua, false));
        assert!(!closes(DEFAULT, Some("MSIE 7.0; Windows"), true));
        assert!(!closes(DEFAULT, Some("MSIE 6.0; SV1; x"), true));
        assert!(closes(DEFAULT, Some("MSIE 6.0; Windows"), true));
        assert!(!closes(DEFAULT, Some("MSIE 5.0; Opera"), true));
    }

    #[test]
    fn safari_only_when_listed() {
        let ua = Some("Mac OS X Safari/7534.48.3");
        assert!(!closes(DEFAULT, ua, true));
        let both = KeepaliveDisable {
            msie6: true,
            safari: true,
        };
        assert!(closes(both, ua, false));
        assert!(!closes(both, Some("Mac OS X Chrome/1 Safari/7534"), false));
    }
}
