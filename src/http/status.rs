//! Status lines and the built-in error pages, byte for byte as NGINX sends
//! them (with porter's name in the tail), so clients and monitoring that
//! match on them keep working.

/// NGINX's reason phrase for `code`; for a code NGINX's table leaves
/// empty (it sends `HTTP/1.1 203 `), the phrase of RFC 9110 section 15,
/// so no status line goes out without one.
pub fn reason(code: u16) -> &'static str {
    match code {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        203 => "Non-Authoritative Information",
        204 => "No Content",
        205 => "Reset Content",
        206 => "Partial Content",
        300 => "Multiple Choices",
        301 => "Moved Permanently",
        302 => "Moved Temporarily",
        303 => "See Other",
        304 => "Not Modified",
        305 => "Use Proxy",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Time-out",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Request Entity Too Large",
        414 => "Request-URI Too Large",
        415 => "Unsupported Media Type",
        416 => "Requested Range Not Satisfiable",
        417 => "Expectation Failed",
        421 => "Misdirected Request",
        422 => "Unprocessable Content",
        425 => "Too Early",
        426 => "Upgrade Required",
        428 => "Precondition Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        451 => "Unavailable For Legal Reasons",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Temporarily Unavailable",
        504 => "Gateway Time-out",
        505 => "HTTP Version Not Supported",
        506 => "Variant Also Negotiates",
        507 => "Insufficient Storage",
        508 => "Loop Detected",
        511 => "Network Authentication Required",
        _ => "",
    }
}

/// Appends the status line (`HTTP/1.1 404 Not Found\r\n`).
pub fn status_line(code: u16, out: &mut Vec<u8>) {
    out.extend_from_slice(b"HTTP/1.1 ");
    super::response::push_decimal(out, u64::from(code));
    out.push(b' ');
    out.extend_from_slice(reason(code).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Appends a status line with the reason phrase `text` (an upstream's).
pub fn status_line_with(code: u16, text: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(b"HTTP/1.1 ");
    super::response::push_decimal(out, u64::from(code));
    out.push(b' ');
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Statuses after which NGINX closes a keep-alive connection.
pub fn forces_close(code: u16) -> bool {
    matches!(
        code,
        400 | 408 | 413 | 414 | 494 | 495 | 496 | 497 | 500 | 501 | 505
    )
}

/// The HTML body NGINX sends for a status it generates itself, or `None`
/// for statuses that have no page (2xx, 304, unknown codes).
pub fn error_page_body(code: u16, server_tokens: bool) -> Option<String> {
    let tail = if server_tokens {
        concat!(
            "<hr><center>porter/",
            env!("CARGO_PKG_VERSION"),
            "</center>\r\n</body>\r\n</html>\r\n"
        )
    } else {
        "<hr><center>porter</center>\r\n</body>\r\n</html>\r\n"
    };
    let head = match code {
        494 => "<html>\r\n<head><title>400 Request Header Or Cookie Too Large</title></head>\r\n<body>\r\n<center><h1>400 Bad Request</h1></center>\r\n<center>Request Header Or Cookie Too Large</center>\r\n".to_string(),
        495 => "<html>\r\n<head><title>400 The SSL certificate error</title></head>\r\n<body>\r\n<center><h1>400 Bad Request</h1></center>\r\n<center>The SSL certificate error</center>\r\n".to_string(),
        496 => "<html>\r\n<head><title>400 No required SSL certificate was sent</title></head>\r\n<body>\r\n<center><h1>400 Bad Request</h1></center>\r\n<center>No required SSL certificate was sent</center>\r\n".to_string(),
        497 => "<html>\r\n<head><title>400 The plain HTTP request was sent to HTTPS port</title></head>\r\n<body>\r\n<center><h1>400 Bad Request</h1></center>\r\n<center>The plain HTTP request was sent to HTTPS port</center>\r\n".to_string(),
        301..=303 | 307 | 308 | 400..=416 | 421 | 429 | 500..=505 | 507 if !reason(code).is_empty() => {
            // NGINX's page says "302 Found" although its status line says
            // "302 Moved Temporarily".
            let title = if code == 302 {
                "302 Found".to_string()
            } else {
                format!("{code} {}", reason(code))
            };
            format!("<html>\r\n<head><title>{title}</title></head>\r\n<body>\r\n<center><h1>{title}</h1></center>\r\n")
        }
        _ => return None,
    };
    Some(head + tail)
}

/// What NGINX appends to a 4xx/5xx page for MSIE and Chrome
/// (`msie_padding`), which would otherwise show their own "friendly" page
/// in place of a short one.
pub const FRIENDLY_PAGE_PADDING: &str = concat!(
    "<!-- a padding to disable MSIE and Chrome friendly error page -->\r\n",
    "<!-- a padding to disable MSIE and Chrome friendly error page -->\r\n",
    "<!-- a padding to disable MSIE and Chrome friendly error page -->\r\n",
    "<!-- a padding to disable MSIE and Chrome friendly error page -->\r\n",
    "<!-- a padding to disable MSIE and Chrome friendly error page -->\r\n",
    "<!-- a padding to disable MSIE and Chrome friendly error page -->\r\n",
);

/// Whether a `User-Agent` is one NGINX pads error pages for: MSIE (not
/// Opera posing as it) or Chrome (not a Gecko browser), by NGINX's tests.
pub fn wants_page_padding(user_agent: &str) -> bool {
    let msie = user_agent
        .find("MSIE ")
        .is_some_and(|i| i + 7 < user_agent.len());
    if user_agent.contains("Opera") {
        return false;
    }
    msie || (!user_agent.contains("Gecko/") && user_agent.contains("Chrome/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_page_matches_nginx_shape() {
        let b = error_page_body(404, false).unwrap();
        assert_eq!(
            b,
            "<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center><h1>404 Not Found</h1></center>\r\n<hr><center>porter</center>\r\n</body>\r\n</html>\r\n"
        );
        assert!(error_page_body(200, true).is_none());
        assert!(error_page_body(304, true).is_none());
        assert!(error_page_body(494, true)
            .unwrap()
            .contains("Request Header Or Cookie Too Large"));
    }

    #[test]
    fn padding_as_nginx() {
        // nginx sends 555 bytes for its 404 page to these browsers.
        let page = error_page_body(404, true).unwrap();
        assert_eq!(
            page.len() - "porter/".len() - env!("CARGO_PKG_VERSION").len()
                + "nginx/1.22.1".len()
                + FRIENDLY_PAGE_PADDING.len(),
            555
        );
        assert!(wants_page_padding("Mozilla/4.0 (compatible; MSIE 6.0)"));
        assert!(wants_page_padding(
            "Mozilla/5.0 (X11) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36"
        ));
        assert!(!wants_page_padding(
            "Mozilla/5.0 (X11; rv:120.0) Gecko/20100101 Firefox/120.0"
        ));
        assert!(!wants_page_padding("Opera/9.80 (compatible; MSIE 6.0)"));
        assert!(!wants_page_padding("MSIE 6"));
        assert!(!wants_page_padding("curl/8.0"));
    }

    #[test]
    fn status_lines() {
        let mut v = Vec::new();
        status_line(405, &mut v);
        assert_eq!(v, b"HTTP/1.1 405 Not Allowed\r\n");
        v.clear();
        status_line(299, &mut v);
        assert_eq!(v, b"HTTP/1.1 299 \r\n");
    }
}
