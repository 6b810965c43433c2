//! The SCGI request NGINX's `scgi` module sends, without I/O: a netstring
//! (`LENGTH:` ... `,`) of NUL-terminated names and values,
//! `CONTENT_LENGTH` first (the client's body length, `0` without one),
//! then the `scgi_param` lines (Debian's `scgi_params` sets `SCGI 1`) and
//! the client's headers; the request body follows as is. The response is
//! CGI headers (or an HTTP/1 head), read by [`super::app_head`], and a
//! body up to its `Content-Length` or the close.
//!
//! Written by hand: the SCGI crates on crates.io are servers, none
//! maintained, and the netstring is a few lines.

/// Appends the netstring: `CONTENT_LENGTH` = `content_length`, then
/// `vars` (name, value) in order.
pub fn netstring<'a>(
    out: &mut Vec<u8>,
    content_length: u64,
    vars: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) {
    let mut headers = Vec::with_capacity(1024);
    headers.extend_from_slice(b"CONTENT_LENGTH\0");
    headers.extend_from_slice(content_length.to_string().as_bytes());
    headers.push(0);
    for (n, v) in vars {
        headers.extend_from_slice(n);
        headers.push(0);
        headers.extend_from_slice(v);
        headers.push(0);
    }
    out.reserve(headers.len() + 12);
    out.extend_from_slice(headers.len().to_string().as_bytes());
    out.push(b':');
    out.extend_from_slice(&headers);
    out.push(b',');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn netstring_has_content_length_first_and_nul_separated_pairs() {
        let mut out = Vec::new();
        let vars: [(&[u8], &[u8]); 2] = [(b"SCGI", b"1"), (b"REQUEST_METHOD", b"POST")];
        netstring(&mut out, 27, vars);
        // The example of the SCGI specification, as NGINX builds it.
        let body = b"CONTENT_LENGTH\x0027\x00SCGI\x001\x00REQUEST_METHOD\x00POST\x00";
        let mut want = format!("{}:", body.len()).into_bytes();
        want.extend_from_slice(body);
        want.push(b',');
        assert_eq!(out, want);
    }

    #[test]
    fn empty_values_keep_their_terminator() {
        let mut out = Vec::new();
        let vars: [(&[u8], &[u8]); 1] = [(b"QUERY_STRING", b"")];
        netstring(&mut out, 0, vars);
        assert_eq!(
            out,
            b"31:CONTENT_LENGTH\x000\x00QUERY_STRING\x00\x00,".to_vec()
        );
    }
}
