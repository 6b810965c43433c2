//! `Range` requests with NGINX's exact rules (ngx_http_range_filter_module):
//! which syntax errors make a 416 and which are ignored, suffix and open
//! ranges, the rule that ranges adding up to more than the entity are
//! answered in full, `max_ranges`, and the `multipart/byteranges` layout
//! byte for byte.

use std::ops::Range;

/// What to send for a `Range` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeOutcome {
    /// The whole entity (200).
    Full,
    /// These byte ranges (206), in request order.
    Partial(Vec<Range<u64>>),
    /// 416 with `Content-Range: bytes */LEN`.
    Unsatisfiable,
}

/// The first byte a request asks for as NGINX's slice module reads it
/// (`ngx_http_slice_get_start`): 0 with `If-Range`, several ranges, a
/// suffix range or anything but `bytes=N...`.
pub fn slice_first_byte(range: Option<&str>, if_range: bool) -> u64 {
    let Some(r) = range.filter(|r| !if_range && r.len() >= 7) else {
        return 0;
    };
    if !r.as_bytes()[..6].eq_ignore_ascii_case(b"bytes=") || r.contains(',') {
        return 0;
    }
    let digits = r[6..].trim_start_matches(' ');
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    digits[..end].parse().unwrap_or(0)
}

/// Parses `header` against an entity of `len` bytes.
pub fn parse_range(header: &str, len: u64, max_ranges: Option<usize>) -> RangeOutcome {
    let h = header.as_bytes();
    if h.len() < 7 || !h[..6].eq_ignore_ascii_case(b"bytes=") {
        return RangeOutcome::Full;
    }
    if max_ranges == Some(0) {
        return RangeOutcome::Full;
    }
    let mut allowed = max_ranges.unwrap_or(i32::MAX as usize);
    let p = &h[6..];
    let mut i = 0;
    let mut ranges = Vec::new();
    let mut size: u64 = 0;
    loop {
        skip_spaces(p, &mut i);
        let (start, end) = if p.get(i) != Some(&b'-') {
            let Some(start) = number(p, &mut i) else {
                return RangeOutcome::Unsatisfiable;
            };
            skip_spaces(p, &mut i);
            if p.get(i) != Some(&b'-') {
                return RangeOutcome::Unsatisfiable;
            }
            i += 1;
            skip_spaces(p, &mut i);
            if matches!(p.get(i), None | Some(b',')) {
                (start, len)
            } else {
                let Some(e) = number(p, &mut i) else {
                    return RangeOutcome::Unsatisfiable;
                };
                (start, if e >= len { len } else { e + 1 })
            }
        } else {
            i += 1;
            let Some(e) = number(p, &mut i) else {
                return RangeOutcome::Unsatisfiable;
            };
            (len.saturating_sub(e), len)
        };
        skip_spaces(p, &mut i);
        if !matches!(p.get(i), None | Some(b',')) {
            return RangeOutcome::Unsatisfiable;
        }
        if start < end {
            ranges.push(start..end);
            size += end - start;
            if allowed == 0 {
                return RangeOutcome::Full;
            }
            allowed -= 1;
        } else if start == 0 {
            return RangeOutcome::Full;
        }
        if p.get(i) != Some(&b',') {
            break;
        }
        i += 1;
    }
    if ranges.is_empty() {
        return RangeOutcome::Unsatisfiable;
    }
    if size > len {
        return RangeOutcome::Full;
    }
    RangeOutcome::Partial(ranges)
}

fn skip_spaces(p: &[u8], i: &mut usize) {
    while p.get(*i) == Some(&b' ') {
        *i += 1;
    }
}

/// A decimal number (None when no digit or on overflow, which NGINX also
/// treats as unsatisfiable).
fn number(p: &[u8], i: &mut usize) -> Option<u64> {
    let start = *i;
    let mut n: u64 = 0;
    while let Some(&c) = p.get(*i) {
        if !c.is_ascii_digit() {
            break;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
        *i += 1;
    }
    (*i > start).then_some(n)
}

/// The layout of a `multipart/byteranges` body.
#[derive(Debug, Clone)]
pub struct Multipart {
    /// The boundary string.
    pub boundary: String,
    /// Each part's header (leading CRLF, boundary, Content-Type,
    /// Content-Range, blank line) and its byte range.
    pub parts: Vec<(String, Range<u64>)>,
    /// `CRLF--boundary--CRLF`.
    pub trailer: String,
}

impl Multipart {
    /// Total body length.
    pub fn content_length(&self) -> u64 {
        self.parts
            .iter()
            .map(|(h, r)| h.len() as u64 + (r.end - r.start))
            .sum::<u64>()
            + self.trailer.len() as u64
    }

    /// The response's `Content-Type`.
    pub fn content_type_header(&self) -> String {
        format!("multipart/byteranges; boundary={}", self.boundary)
    }
}

/// Lays out the parts; NGINX's boundary is a 20-digit zero-padded counter.
pub fn multipart(
    ranges: &[Range<u64>],
    len: u64,
    content_type: &str,
    boundary_seq: u64,
) -> Multipart {
    let boundary = format!("{boundary_seq:020}");
    let parts = ranges
        .iter()
        .map(|r| {
            (
                format!(
                    "\r\n--{boundary}\r\nContent-Type: {content_type}\r\nContent-Range: bytes {}-{}/{len}\r\n\r\n",
                    r.start,
                    r.end - 1
                ),
                r.clone(),
            )
        })
        .collect();
    Multipart {
        trailer: format!("\r\n--{boundary}--\r\n"),
        boundary,
        parts,
    }
}

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;
    use RangeOutcome::*;

    #[test]
    fn single_ranges() {
        assert_eq!(parse_range("bytes=0-1", 27, None), Partial(vec![0..2]));
        assert_eq!(parse_range("bytes=5-", 27, None), Partial(vec![5..27]));
        assert_eq!(parse_range("bytes=-3", 27, None), Partial(vec![24..27]));
        assert_eq!(parse_range("bytes=-100", 27, None), Partial(vec![0..27])); // 206, as nginx
        assert_eq!(parse_range("bytes=20-100", 27, None), Partial(vec![20..27]));
        assert_eq!(parse_range("Bytes= 1 - 2", 27, None), Partial(vec![1..3]));
    }

    #[test]
    fn unsatisfiable_and_ignored() {
        assert_eq!(parse_range("bytes=100-", 27, None), Unsatisfiable);
        assert_eq!(parse_range("bytes=100-200", 27, None), Unsatisfiable);
        assert_eq!(parse_range("bytes=x-1", 27, None), Unsatisfiable);
        assert_eq!(parse_range("bytes=1-x", 27, None), Unsatisfiable);
        assert_eq!(parse_range("bytes=2-1", 27, None), Unsatisfiable);
        assert_eq!(parse_range("items=0-1", 27, None), Full);
        assert_eq!(parse_range("bytes", 27, None), Full);
        assert_eq!(parse_range("bytes=0-", 0, None), Full);
        assert_eq!(parse_range("bytes=0-0", 0, None), Full);
    }

    #[test]
    fn multiple_ranges_and_limits() {
        assert_eq!(
            parse_range("bytes=0-1,5-6", 27, None),
            Partial(vec![0..2, 5..7])
        );
        assert_eq!(parse_range("bytes=0-1,5-6", 27, Some(1)), Full);
        assert_eq!(parse_range("bytes=0-1", 27, Some(0)), Full);
        // Overlapping ranges adding up past the entity: the whole entity.
        assert_eq!(parse_range("bytes=0-20,5-25", 27, None), Full);
        assert_eq!(
            parse_range("bytes=0-1,100-200", 27, None),
            Partial(vec![0..2])
        );
    }

    #[test]
    fn multipart_bytes_match_nginx() {
        let m = multipart(&[0..2, 5..7], 27, "text/plain", 1);
        assert_eq!(
            m.content_type_header(),
            "multipart/byteranges; boundary=00000000000000000001"
        );
        assert_eq!(
            m.parts[0].0,
            "\r\n--00000000000000000001\r\nContent-Type: text/plain\r\nContent-Range: bytes 0-1/27\r\n\r\n"
        );
        assert_eq!(m.trailer, "\r\n--00000000000000000001--\r\n");
        // nginx sent Content-Length: 198 for this request.
        assert_eq!(m.content_length(), 198);
    }
}
