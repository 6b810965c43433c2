//! A response's header lines, parsed once and kept as one text with spans
//! into it: what an upstream (or application server) answered, read by
//! everything that looks at it afterwards — `$upstream_http_*`, the
//! hide/pass rules and `X-Accel-*` of the proxy, the cache's policy and
//! store, the client head. It was three copies of owned strings per line
//! before (the parse, the variables' copy, the client response's), about
//! 30 allocations of a proxied response's 83; now it is two (the text and
//! the shared block) and the variables take a reference to it.
//!
//! The layout is that of the request head (`http/head.rs`): names as
//! sent, values as `String::from_utf8_lossy` reads them (a sequence that
//! is not UTF-8 becomes U+FFFD), spans inline up to [`INLINE_LINES`].
//! [`HeaderLines`] lets a reader take either this or a list of owned
//! pairs (a cached entry's stored headers).

use std::ops::Range;
use std::sync::Arc;

use smallvec::SmallVec;

/// Header lines whose spans a block holds without another allocation.
pub const INLINE_LINES: usize = 16;

/// Where one piece lies in the text (byte offsets).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Span {
    at: u32,
    end: u32,
}

impl Span {
    fn range(self) -> Range<usize> {
        self.at as usize..self.end as usize
    }
}

#[derive(Default)]
struct Block {
    text: String,
    reason: Span,
    lines: SmallVec<[(Span, Span); INLINE_LINES]>,
}

/// A response's reason phrase and header lines, shared (a clone is a
/// reference count).
#[derive(Clone, Default)]
pub struct Fields(Option<Arc<Block>>);

/// Builds a [`Fields`]: the reason and the lines pushed in order.
pub struct FieldsBuilder(Block);

impl FieldsBuilder {
    /// An empty block whose text takes `capacity` bytes without growing.
    pub fn with_capacity(capacity: usize) -> FieldsBuilder {
        FieldsBuilder(Block {
            text: String::with_capacity(capacity),
            ..Block::default()
        })
    }

    fn push(&mut self, s: &str) -> Span {
        let at = self.0.text.len();
        self.0.text.push_str(s);
        self.since(at)
    }

    fn since(&self, at: usize) -> Span {
        // A head beyond 4 GiB is refused long before (`*_buffer_size`).
        let end = u32::try_from(self.0.text.len()).unwrap_or(u32::MAX);
        Span {
            at: u32::try_from(at).unwrap_or(end),
            end,
        }
    }

    fn push_lossy(&mut self, bytes: &[u8]) -> Span {
        let at = self.0.text.len();
        for chunk in bytes.utf8_chunks() {
            self.0.text.push_str(chunk.valid());
            if !chunk.invalid().is_empty() {
                self.0.text.push(char::REPLACEMENT_CHARACTER);
            }
        }
        self.since(at)
    }

    /// Sets the reason phrase.
    pub fn reason(&mut self, reason: &str) {
        self.0.reason = self.push(reason);
    }

    /// Appends a header line whose value is read as
    /// `String::from_utf8_lossy` reads it.
    pub fn line_lossy(&mut self, name: &str, value: &[u8]) {
        let line = (self.push(name), self.push_lossy(value));
        self.0.lines.push(line);
    }

    /// Appends a header line.
    pub fn line(&mut self, name: &str, value: &str) {
        let line = (self.push(name), self.push(value));
        self.0.lines.push(line);
    }

    /// The block.
    pub fn finish(self) -> Fields {
        Fields(Some(Arc::new(self.0)))
    }
}

impl Fields {
    /// The lines of an httparse parse (`reason` its reason phrase).
    pub fn parsed(reason: &str, headers: &[httparse::Header<'_>]) -> Fields {
        let size = headers
            .iter()
            .map(|h| h.name.len() + h.value.len())
            .sum::<usize>();
        let mut b = FieldsBuilder::with_capacity(reason.len() + size);
        b.reason(reason);
        for h in headers {
            b.line_lossy(h.name, h.value);
        }
        b.finish()
    }

    /// A block of `reason` and the (name, value) `lines`.
    pub fn from_pairs<'a>(
        reason: &str,
        lines: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Fields {
        let mut b = FieldsBuilder::with_capacity(64);
        b.reason(reason);
        for (n, v) in lines {
            b.line(n, v);
        }
        b.finish()
    }

    fn piece(&self, span: Span) -> &str {
        self.0
            .as_ref()
            .and_then(|b| b.text.get(span.range()))
            .unwrap_or("")
    }

    /// The reason phrase (empty when none).
    pub fn reason(&self) -> &str {
        self.0.as_ref().map_or("", |b| self.piece(b.reason))
    }

    /// The header lines in order, as (name, value).
    pub fn iter(&self) -> Lines<'_> {
        Lines {
            fields: self,
            spans: self.0.as_ref().map_or(&[][..], |b| &b.lines[..]).iter(),
        }
    }

    /// How many header lines.
    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |b| b.lines.len())
    }

    /// No header line.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The lines as owned pairs (what a cache entry stores).
    pub fn to_pairs(&self) -> Vec<(String, String)> {
        self.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }
}

impl PartialEq for Fields {
    fn eq(&self, other: &Fields) -> bool {
        self.reason() == other.reason() && self.iter().eq(other.iter())
    }
}

impl Eq for Fields {}

impl std::fmt::Debug for Fields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fields")
            .field("reason", &self.reason())
            .field("lines", &self.iter().collect::<Vec<_>>())
            .finish()
    }
}

/// The header lines of a [`Fields`], in order.
#[derive(Clone)]
pub struct Lines<'a> {
    fields: &'a Fields,
    spans: std::slice::Iter<'a, (Span, Span)>,
}

impl<'a> Iterator for Lines<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<(&'a str, &'a str)> {
        let &(n, v) = self.spans.next()?;
        Some((self.fields.piece(n), self.fields.piece(v)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.spans.size_hint()
    }
}

impl ExactSizeIterator for Lines<'_> {}

/// Header lines as (name, value) in order, however they are kept: a
/// [`Fields`] block or owned pairs.
pub trait HeaderLines {
    /// The lines in order.
    fn lines(&self) -> impl Iterator<Item = (&str, &str)> + Clone;

    /// The value of the first line named `name` (case-insensitive).
    fn get(&self, name: &str) -> Option<&str> {
        self.lines()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// The values of every line named `name` (case-insensitive).
    fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> {
        self.lines()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }
}

impl HeaderLines for Fields {
    fn lines(&self) -> impl Iterator<Item = (&str, &str)> + Clone {
        self.iter()
    }
}

impl HeaderLines for [(String, String)] {
    fn lines(&self) -> impl Iterator<Item = (&str, &str)> + Clone {
        self.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }
}

impl HeaderLines for Vec<(String, String)> {
    fn lines(&self) -> impl Iterator<Item = (&str, &str)> + Clone {
        self[..].lines()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_back_in_order_with_bad_bytes_replaced() {
        let mut storage = [httparse::EMPTY_HEADER; 4];
        let mut r = httparse::Response::new(&mut storage);
        r.parse(b"HTTP/1.1 404 Not Here\r\nA: 1\r\nB: x\xffy\r\na: 3\r\n\r\n")
            .unwrap();
        let f = Fields::parsed(r.reason.unwrap(), r.headers);
        assert_eq!(f.reason(), "Not Here");
        let all: Vec<_> = f.iter().collect();
        assert_eq!(all, [("A", "1"), ("B", "x\u{fffd}y"), ("a", "3")]);
        assert_eq!((f.len(), f.get("a"), f.get("c")), (3, Some("1"), None));
        assert_eq!(f.clone(), f);
        let pairs = f.to_pairs();
        assert_eq!(pairs.get("B"), Some("x\u{fffd}y"));
        assert_eq!(Fields::from_pairs("Not Here", pairs.lines()), f);
    }

    #[test]
    fn an_empty_block_allocates_nothing_and_reads_empty() {
        let f = Fields::default();
        assert!(f.is_empty());
        assert_eq!((f.reason(), f.iter().next()), ("", None));
        assert_ne!(f, Fields::from_pairs("", [("A", "1")]));
    }
}
