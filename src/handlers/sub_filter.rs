//! The sub filter: `sub_filter`, `sub_filter_once`, `sub_filter_types`
//! and `sub_filter_last_modified`, as NGINX's `ngx_http_sub_filter_module`.
//!
//! The header part applies to a response of a `sub_filter_types` type
//! (text/html always) whose length is not known to be 0: the body will
//! change length, so `Content-Length` goes (chunked on HTTP/1.1, a close
//! on HTTP/1.0) and ranges with it, and `Last-Modified` and `ETag` go
//! unless `sub_filter_last_modified on` (then the ETag turns weak). Strings
//! with variables are rendered once per request; one that renders empty
//! is left out, as NGINX does.
//!
//! The body part replaces matches while the body is sent, piece by piece
//! from the file or the proxied stream ([`SubStream`]), never whole in
//! memory. Matching is NGINX's: ASCII case-insensitive; at each position
//! from the left the first string in configuration order that matches
//! there wins, and the search goes on after the replacement; with
//! `sub_filter_once on` (the default) each string is replaced at its first
//! match only. A match may span two pieces: the tail of a piece that
//! begins a string waits for the next (a partial match, NGINX's `looked`
//! state); the rest of the piece is sent at once. The search is Aho-Corasick
//! (`aho-corasick`, leftmost-first, the regex crate's own engine), which
//! gives exactly that rule. In the chain it runs after the headers filter
//! and before charset and gzip, as in NGINX.

use aho_corasick::{AhoCorasick, MatchKind};

use super::body_source::PieceSource;
use crate::config::model::SubFilter;
use crate::http::context::RequestCtx;
use crate::http::response::{Body, BodyStream, ChunkFuture, Response, StreamBody};

/// Runs the sub filter's header part on `resp` and wraps its body.
pub fn header_filter(ctx: &RequestCtx, resp: &mut Response) {
    let s = &ctx.loc.s;
    if s.sub_filters.is_empty() || resp.content_length == Some(0) {
        return;
    }
    // `*` takes any response, one without a type too (NGINX's
    // `ngx_http_test_content_type` with an empty types hash).
    let any = s.sub_filter_types.iter().any(|t| t == "*");
    let base = resp
        .content_type
        .as_deref()
        .map(|ct| ct.split(';').next().unwrap_or("").trim());
    let typed =
        any || base.is_some_and(|b| s.sub_filter_types.iter().any(|t| t.eq_ignore_ascii_case(b)));
    if !typed {
        return;
    }
    let pairs: Vec<(String, String)> = s
        .sub_filters
        .iter()
        .map(|p: &SubFilter| (p.find.render(ctx), p.replace.render(ctx)))
        .filter(|(f, _)| !f.is_empty())
        .collect();
    if pairs.is_empty() {
        return;
    }
    resp.content_length = None;
    resp.allow_ranges = false;
    if s.sub_filter_last_modified {
        if let Some(e) = resp.etag.as_mut().filter(|e| !e.starts_with("W/")) {
            *e = format!("W/{e}");
        }
    } else {
        resp.last_modified = None;
        resp.etag = None;
        resp.headers.retain(|(n, _)| {
            !n.eq_ignore_ascii_case("last-modified") && !n.eq_ignore_ascii_case("etag")
        });
    }
    if ctx.is_head() || matches!(resp.body, Body::Empty) {
        return;
    }
    super::body_source::frame_unknown_length(ctx, resp);
    let body = std::mem::replace(&mut resp.body, Body::Empty);
    resp.body = Body::Stream(StreamBody::new(Box::new(SubStream::new(
        PieceSource::of(body),
        pairs,
        s.sub_filter_once,
    ))));
}

/// The strings still to look for, and their search.
struct Matcher {
    /// (string, replacement) in configuration order, the applied ones
    /// removed under `sub_filter_once`.
    pairs: Vec<(String, String)>,
    search: AhoCorasick,
    /// The longest string's length.
    longest: usize,
}

impl Matcher {
    fn new(pairs: Vec<(String, String)>) -> Option<Matcher> {
        if pairs.is_empty() {
            return None;
        }
        let search = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::LeftmostFirst)
            .build(pairs.iter().map(|(f, _)| f.as_bytes()))
            .ok()?;
        let longest = pairs.iter().map(|(f, _)| f.len()).max().unwrap_or(1);
        Some(Matcher {
            pairs,
            search,
            longest,
        })
    }

    /// Where the first partial match of `buf` at or after `from` starts:
    /// the earliest tail of `buf` that is the start of a string (but not
    /// all of it), ASCII case-insensitive; `buf.len()` when there is none.
    /// Only such a tail can change with the next piece, so only it waits
    /// (NGINX's `looked` state); the rest is sent as it came.
    fn partial_from(&self, buf: &[u8], from: usize) -> usize {
        let first = buf.len().saturating_sub(self.longest - 1).max(from);
        (first..buf.len())
            .find(|&i| {
                let tail = &buf[i..];
                self.pairs.iter().any(|(f, _)| {
                    f.len() > tail.len() && f.as_bytes()[..tail.len()].eq_ignore_ascii_case(tail)
                })
            })
            .unwrap_or(buf.len())
    }
}

/// A body with the strings replaced (see the module header).
struct SubStream {
    source: PieceSource,
    /// `None` once every string was replaced under `sub_filter_once`: the
    /// rest passes through.
    matcher: Option<Matcher>,
    once: bool,
    /// The bytes of the last piece a match may still start in.
    carry: Vec<u8>,
    done: bool,
}

impl SubStream {
    fn new(source: PieceSource, pairs: Vec<(String, String)>, once: bool) -> SubStream {
        SubStream {
            source,
            matcher: Matcher::new(pairs),
            once,
            carry: Vec::new(),
            done: false,
        }
    }

    /// Replaces in `self.carry` + `piece`, appending what is settled to
    /// `out` and keeping the rest in `self.carry`.
    fn replace(&mut self, piece: &[u8], last: bool, out: &mut Vec<u8>) {
        self.carry.extend_from_slice(piece);
        let buf = std::mem::take(&mut self.carry);
        let mut pos = 0;
        while let Some(m) = &self.matcher {
            // A match starting before `safe` is whole in the buffer, and so
            // is any the next piece could make start there.
            let safe = if last {
                buf.len()
            } else {
                m.partial_from(&buf, pos)
            };
            let Some(found) = m.search.find(&buf[pos..]) else {
                break;
            };
            let (start, end) = (pos + found.start(), pos + found.end());
            if start >= safe {
                break;
            }
            out.extend_from_slice(&buf[pos..start]);
            let i = found.pattern().as_usize();
            out.extend_from_slice(m.pairs[i].1.as_bytes());
            pos = end;
            if self.once {
                let mut pairs = m.pairs.clone();
                pairs.remove(i);
                self.matcher = Matcher::new(pairs);
            }
        }
        let keep_from = match (&self.matcher, last) {
            (Some(m), false) => m.partial_from(&buf, pos),
            _ => buf.len(),
        };
        out.extend_from_slice(&buf[pos..keep_from]);
        self.carry = buf[keep_from..].to_vec();
    }
}

impl BodyStream for SubStream {
    fn read_chunk<'a>(&'a mut self, out: &'a mut Vec<u8>) -> ChunkFuture<'a> {
        Box::pin(async move {
            while !self.done {
                let (piece, last) = self.source.next().await?;
                self.done = last;
                self.replace(&piece, last, out);
                if !out.is_empty() {
                    return Ok(true);
                }
            }
            Ok(false)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(pairs: &[(&str, &str)], once: bool, pieces: &[&str]) -> String {
        let pairs = pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        let mut s = SubStream::new(PieceSource::Bytes(Vec::new()), pairs, once);
        let mut out = Vec::new();
        for (i, p) in pieces.iter().enumerate() {
            s.replace(p.as_bytes(), i + 1 == pieces.len(), &mut out);
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn case_insensitive_first_string_in_order_wins_at_each_position() {
        let p = [("abc", "1"), ("ab", "2"), ("b", "3")];
        assert_eq!(run(&p, false, &["xABcab bx"]), "x12 3x");
        assert_eq!(run(&p, true, &["xABcab bb"]), "x12 3b");
    }

    #[test]
    fn matches_spanning_pieces_are_found() {
        let p = [("<body>", "<body>HI")];
        assert_eq!(
            run(&p, false, &["<ht", "ml><bo", "dy>", "</body>"]),
            "<html><body>HI</body>"
        );
        // The longest string is kept back, a shorter one is not lost.
        let p = [("abcdef", "L"), ("x", "X")];
        assert_eq!(run(&p, false, &["x", "abc", "def", "x"]), "XLX");
    }

    #[test]
    fn only_a_partial_match_waits_for_the_next_piece() {
        let first = |find: &str| {
            let pairs = vec![(find.to_string(), find.to_uppercase())];
            let mut s = SubStream::new(PieceSource::Bytes(Vec::new()), pairs, false);
            let mut out = Vec::new();
            s.replace(b"xyz", false, &mut out);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(first("za"), "xy");
        assert_eq!(first("ab"), "xyz");
        // A shorter string found inside a longer one's partial match waits.
        let p = [("abcdef", "L"), ("bc", "B")];
        assert_eq!(run(&p, false, &["xabc", "dex"]), "xaBdex");
        assert_eq!(run(&p, false, &["xabc", "def"]), "xL");
    }

    #[test]
    fn once_replaces_each_string_once_then_passes_through() {
        let p = [("a", "1"), ("b", "2")];
        assert_eq!(run(&p, true, &["aabb", "ab"]), "1a2bab");
    }
}
