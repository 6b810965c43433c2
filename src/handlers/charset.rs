//! The charset filter: `charset`, `source_charset`, `override_charset`,
//! `charset_types` and `charset_map`, as NGINX's
//! `ngx_http_charset_filter_module`.
//!
//! The header part labels `Content-Type` with `; charset=NAME` for the
//! `charset_types` (or any type when an earlier pass through the chain
//! chose the charset: the page replacing a 416), leaves a response that
//! names its own charset alone unless `override_charset` is on, and sends
//! no label on 301/302 (NGINX's rule for old browsers). When the source
//! charset (the response's own, else `source_charset`) differs from the
//! destination and a `charset_map` joins them, the body is recoded while
//! it is sent ([`RecodeStream`], piece by piece from the file or the
//! proxied stream, never whole in memory): byte to byte between 8-bit
//! charsets (the length stays), or to and from UTF-8 (the length changes:
//! no `Content-Length`, chunked). Table lookups run at memory speed, so
//! recoding stays on the loop. In the chain it runs before gzip, which
//! then compresses the recoded bytes, as in NGINX.

use std::collections::HashMap;
use std::sync::Arc;

use super::body_source::PieceSource;
use crate::config::CharsetMap;
use crate::http::context::RequestCtx;
use crate::http::response::{Body, BodyStream, ChunkFuture, Response, StreamBody};

/// The type before any parameter, and the `charset` parameter's value.
fn split_type(ct: &str) -> (&str, Option<&str>) {
    let Some((base, params)) = ct.split_once(';') else {
        return (ct.trim(), None);
    };
    let cs = params.split(';').find_map(|p| {
        let (k, v) = p.trim().split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| v.trim().trim_matches('"'))
    });
    (base.trim(), cs)
}

/// Runs the charset filter on `resp`; `carried` is the charset an
/// earlier pass chose. Returns the charset the response is labelled with.
pub fn header_filter(
    ctx: &RequestCtx,
    resp: &mut Response,
    carried: Option<String>,
) -> Option<String> {
    let s = &ctx.loc.s;
    if let Some(cs) = resp.override_charset.take() {
        return overridden(ctx, resp, cs);
    }
    // Nothing to label with (the usual case): no copy of the type.
    if s.charset.is_none() && carried.is_none() {
        return None;
    }
    let ct = resp.content_type.clone()?;
    let (base, own) = split_type(&ct);
    let (charset, source_charset) = names(ctx);
    let typed = s
        .charset_types
        .iter()
        .any(|t| t == "*" || t.eq_ignore_ascii_case(base));
    let dest = match &charset {
        Some(cs) if own.is_some() && s.override_charset => cs.clone(),
        Some(_) if own.is_some() => return None,
        Some(cs) if typed => cs.clone(),
        _ => {
            let cs = carried?;
            label(resp, base, &cs);
            return Some(cs);
        }
    };
    if matches!(resp.status, 301 | 302) {
        return None;
    }
    let source = own.map(str::to_string).or(source_charset);
    let Some(source) = source.filter(|src| !src.eq_ignore_ascii_case(&dest)) else {
        label(resp, base, &dest);
        return Some(dest);
    };
    // An encoded body (gzip_static's, a proxied gzip) cannot be recoded:
    // NGINX leaves it unlabelled and untouched.
    if resp
        .header("content-encoding")
        .is_some_and(|v| !v.is_empty())
    {
        return None;
    }
    // No map between them: NGINX refuses such a configuration when it
    // loads (for `source_charset`) or logs and leaves the response alone
    // (a charset the response names); porter labels a file with the
    // destination charset and leaves a labelled response alone.
    let Some(table) = Table::between(&s.charset_maps, &source, &dest) else {
        if own.is_none() {
            label(resp, base, &dest);
            return Some(dest);
        }
        return None;
    };
    label(resp, base, &dest);
    recode(ctx, resp, table);
    Some(dest)
}

/// `charset` and `source_charset` for this request: a name with
/// variables rendered now (empty: none).
fn names(ctx: &RequestCtx) -> (Option<String>, Option<String>) {
    let s = &ctx.loc.s;
    let pick = |var: &Option<crate::vars::template::Template>, fixed: &Option<String>| match var {
        Some(t) => Some(t.render(ctx)).filter(|n| !n.is_empty()),
        None => fixed.clone(),
    };
    (
        pick(&s.charset_var, &s.charset),
        pick(&s.source_charset_var, &s.source_charset),
    )
}

/// An upstream's `X-Accel-Charset: CS` (NGINX's `override_charset` of
/// `headers_out`): CS is the destination whatever the type, provided the
/// configuration names it (`charset`, `source_charset`, `charset_map`);
/// an unknown one leaves the response alone (NGINX also logs it).
fn overridden(ctx: &RequestCtx, resp: &mut Response, dest: String) -> Option<String> {
    let s = &ctx.loc.s;
    let is = |a: &str| a.eq_ignore_ascii_case(&dest);
    let known = s.charset.as_deref().is_some_and(is)
        || s.source_charset.as_deref().is_some_and(is)
        || s.charset_maps.iter().any(|m| is(&m.from) || is(&m.to));
    if !known {
        return None;
    }
    let ct = resp.content_type.clone()?;
    let (base, own) = split_type(&ct);
    let source = own.map(str::to_string).or_else(|| s.source_charset.clone());
    match source.filter(|src| !is(src)) {
        None => label(resp, base, &dest),
        Some(src) => {
            let table = Table::between(&s.charset_maps, &src, &dest)?;
            label(resp, base, &dest);
            recode(ctx, resp, table);
        }
    }
    Some(dest)
}

/// `Content-Type: BASE; charset=CS`.
fn label(resp: &mut Response, base: &str, cs: &str) {
    resp.content_type = Some(format!("{base}; charset={cs}").into());
}

/// Wraps `resp`'s body in a [`RecodeStream`].
fn recode(ctx: &RequestCtx, resp: &mut Response, table: Table) {
    if matches!(resp.body, Body::Empty) {
        return;
    }
    if table.changes_length() {
        resp.content_length = None;
        resp.allow_ranges = false;
        if !ctx.is_head() {
            super::body_source::frame_unknown_length(ctx, resp);
        }
    }
    if ctx.is_head() {
        return;
    }
    let body = std::mem::replace(&mut resp.body, Body::Empty);
    resp.body = Body::Stream(StreamBody::new(Box::new(RecodeStream {
        source: PieceSource::of(body),
        table,
        carry: Vec::new(),
        done: false,
    })));
}

/// How bytes are recoded.
enum Table {
    /// 8-bit to 8-bit: `forward` or `backward` of the map.
    Bytes(Arc<CharsetMap>, bool),
    /// 8-bit to UTF-8.
    ToUtf8(Arc<CharsetMap>),
    /// UTF-8 to 8-bit: code point → byte.
    FromUtf8(HashMap<u32, u8>),
}

impl Table {
    /// The table from `src` to `dst` among `maps`, either way round.
    fn between(maps: &[Arc<CharsetMap>], src: &str, dst: &str) -> Option<Table> {
        let is = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
        for m in maps {
            if is(&m.from, src) && is(&m.to, dst) {
                return Some(if m.to_utf8 {
                    Table::ToUtf8(Arc::clone(m))
                } else {
                    Table::Bytes(Arc::clone(m), true)
                });
            }
            if is(&m.from, dst) && is(&m.to, src) {
                return Some(if m.to_utf8 {
                    Table::FromUtf8(reverse_utf8(m))
                } else {
                    Table::Bytes(Arc::clone(m), false)
                });
            }
        }
        None
    }

    fn changes_length(&self) -> bool {
        !matches!(self, Table::Bytes(..))
    }
}

fn reverse_utf8(m: &CharsetMap) -> HashMap<u32, u8> {
    let mut r = HashMap::new();
    for (b, seq) in m.utf8.iter().enumerate() {
        if let Some(c) = std::str::from_utf8(seq).ok().and_then(|t| t.chars().next()) {
            r.insert(c as u32, b as u8);
        }
    }
    r
}

/// A body recoded piece by piece (see the module header). A UTF-8
/// sequence cut between two pieces waits in `carry` for the rest.
struct RecodeStream {
    source: PieceSource,
    table: Table,
    carry: Vec<u8>,
    done: bool,
}

impl BodyStream for RecodeStream {
    fn read_chunk<'a>(&'a mut self, out: &'a mut Vec<u8>) -> ChunkFuture<'a> {
        Box::pin(async move {
            while !self.done {
                let (piece, last) = self.source.next().await?;
                self.done = last;
                match &self.table {
                    Table::Bytes(m, fwd) => {
                        let t = if *fwd { &m.forward } else { &m.backward };
                        out.extend(piece.iter().map(|&b| t[b as usize]));
                    }
                    Table::ToUtf8(m) => to_utf8(m, &piece, out),
                    Table::FromUtf8(r) => {
                        self.carry.extend_from_slice(&piece);
                        let keep = from_utf8(r, &self.carry, last, out);
                        self.carry.drain(..self.carry.len() - keep);
                    }
                }
                if !out.is_empty() {
                    return Ok(true);
                }
            }
            Ok(false)
        })
    }
}

/// 8-bit to UTF-8; a byte the map leaves out becomes `?`.
fn to_utf8(m: &CharsetMap, piece: &[u8], out: &mut Vec<u8>) {
    for &b in piece {
        if b < 0x80 {
            out.push(b);
        } else {
            match m.utf8[b as usize].as_slice() {
                [] => out.push(b'?'),
                seq => out.extend_from_slice(seq),
            }
        }
    }
}

/// UTF-8 to 8-bit, as NGINX: a character the map lacks becomes `&#N;`,
/// an invalid sequence `?`. Returns how many bytes at the end of `input`
/// are an incomplete sequence to keep for the next piece (none when
/// `last`).
fn from_utf8(r: &HashMap<u32, u8>, input: &[u8], last: bool, out: &mut Vec<u8>) -> usize {
    let mut i = 0;
    while i < input.len() {
        let b = input[i];
        if b < 0x80 {
            out.push(b);
            i += 1;
            continue;
        }
        let need = match b {
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf7 => 4,
            _ => 1,
        };
        if i + need > input.len() && !last {
            return input.len() - i;
        }
        let end = (i + need).min(input.len());
        match std::str::from_utf8(&input[i..end])
            .ok()
            .and_then(|t| t.chars().next())
        {
            Some(c) => match r.get(&(c as u32)) {
                Some(&byte) => out.push(byte),
                None => out.extend_from_slice(format!("&#{};", c as u32).as_bytes()),
            },
            None => out.push(b'?'),
        }
        i = end;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn koi_map() -> CharsetMap {
        let mut m = CharsetMap::new("koi8-r", "utf-8");
        m.utf8[0xc1] = "а".as_bytes().to_vec();
        m.utf8[0xc2] = "б".as_bytes().to_vec();
        m
    }

    #[test]
    fn koi8_to_utf8_and_back() {
        let m = koi_map();
        let mut out = Vec::new();
        to_utf8(&m, &[b'x', 0xc1, 0xc2], &mut out);
        assert_eq!(out, "xаб".as_bytes());
        let r = reverse_utf8(&m);
        let mut back = Vec::new();
        let input = "xаб€".as_bytes();
        // Cut inside "б": the tail waits for the next piece.
        let keep = from_utf8(&r, &input[..4], false, &mut back);
        assert_eq!((back.clone(), keep), (vec![b'x', 0xc1], 1));
        let mut rest = input[4 - keep..].to_vec();
        let keep = from_utf8(&r, &std::mem::take(&mut rest), true, &mut back);
        assert_eq!(keep, 0);
        assert_eq!(back, b"x\xc1\xc2&#8364;".to_vec());
    }

    #[test]
    fn the_charset_parameter_is_found() {
        assert_eq!(
            split_type("text/html; charset=koi8-r"),
            ("text/html", Some("koi8-r"))
        );
        assert_eq!(split_type("text/plain"), ("text/plain", None));
    }
}
