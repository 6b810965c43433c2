//! `autoindex`: a directory listing for a URI ending in `/` that has no
//! index file, as NGINX's `ngx_http_autoindex_module` writes it — HTML
//! byte for byte (names cut at 50 characters with `..&gt;`, sizes exact
//! or scaled, `autoindex_localtime`), JSON, JSONP (`?callback=`) and XML.
//!
//! The directory is read by the disk layer ([`crate::disk::Io::list_dir`]:
//! one task on the location's pool, like a `stat`), never on the loop.
//! The listing is built in memory (one line per entry, as NGINX's single
//! buffer) and sent chunked, as NGINX sends it (it sets no length).

use std::io;
use std::path::Path;

use super::disk_io::failed;
use super::outcome::{Env, Outcome};
use crate::config::AutoindexFormat;
use crate::disk::{DirEntry, EntryKind, Failure, Io};
use crate::http::context::RequestCtx;
use crate::http::request::Version;
use crate::http::response::{Body, BodyStream, ChunkFuture, Response, StreamBody};
use crate::log::Level;
use crate::util::errno_text;

/// NGINX's `NGX_HTTP_AUTOINDEX_NAME_LEN`: the name column's width.
const NAME_LEN: usize = 50;

/// The listing of `dir` (the mapped path, ending in `/`) for `ctx`.
pub async fn serve(ctx: &mut RequestCtx, env: &Env<'_>, io: &Io, dir: &str) -> Outcome {
    let s = &ctx.loc.s;
    let mut format = s.autoindex_format;
    let mut callback = None;
    if format == AutoindexFormat::Jsonp {
        match jsonp_callback(ctx, env) {
            Err(()) => return Outcome::Status(400),
            Ok(None) => format = AutoindexFormat::Json,
            Ok(cb) => callback = cb,
        }
    }
    let path = if dir.len() > 1 {
        dir.trim_end_matches('/')
    } else {
        dir
    };
    let listing = match io.list_dir(Path::new(path)).await {
        Ok(l) => l,
        Err(e) => return open_dir_failed(ctx, env, path, &e),
    };
    for (p, e) in &listing.refused {
        ctx.log(env.log).line(
            Level::Crit,
            format_args!("stat() \"{}\" failed {}", p.display(), errno_text(e)),
        );
    }
    let mut entries = listing.entries;
    entries.sort_by(|a, b| {
        let (ad, bd) = (a.kind == EntryKind::Dir, b.kind == EntryKind::Dir);
        bd.cmp(&ad).then_with(|| a.name.cmp(&b.name))
    });
    ctx.test_expect();
    let (ct, body) = match format {
        AutoindexFormat::Html => ("text/html", html(ctx, &entries)),
        // NGINX names the charset of its XML listing.
        AutoindexFormat::Xml => ("text/xml; charset=utf-8", xml(&entries)),
        AutoindexFormat::Json => ("application/json", json(&entries, None)),
        AutoindexFormat::Jsonp => (
            "application/javascript",
            json(&entries, callback.as_deref()),
        ),
    };
    Outcome::Send(response(ctx, ct, body))
}

/// A 200 with `body` sent chunked (closed after it for HTTP/1.0), as NGINX
/// sends a body whose length it did not set; no body for HEAD.
fn response(ctx: &RequestCtx, ct: &str, body: Vec<u8>) -> Response {
    let mut r = Response::new(200);
    r.content_type = Some(std::sync::Arc::from(ct));
    r.content_length = None;
    if ctx.is_head() {
        return r;
    }
    if ctx.head.version == Version::Http11 {
        r.chunked = true;
    } else {
        r.close = true;
    }
    r.body = Body::Stream(StreamBody::new(Box::new(OnePiece(Some(body)))));
    r
}

/// A body already in memory, sent as a stream of one piece.
struct OnePiece(Option<Vec<u8>>);

impl BodyStream for OnePiece {
    fn read_chunk<'a>(&'a mut self, out: &'a mut Vec<u8>) -> ChunkFuture<'a> {
        Box::pin(async move {
            match self.0.take() {
                Some(b) => {
                    out.extend_from_slice(&b);
                    Ok(true)
                }
                None => Ok(false),
            }
        })
    }
}

/// NGINX's answer to a directory it cannot open: 404, 403 or 500, with
/// its `opendir()` line.
pub(super) fn open_dir_failed(
    ctx: &RequestCtx,
    env: &Env<'_>,
    path: &str,
    e: &io::Error,
) -> Outcome {
    if Failure::is_pool(e) {
        return failed(ctx, env, e, "opendir", path);
    }
    let (level, code) = match e.raw_os_error() {
        Some(libc::ENOENT | libc::ENOTDIR | libc::ENAMETOOLONG) => (Level::Error, 404),
        Some(libc::EACCES) => (Level::Error, 403),
        _ => (Level::Crit, 500),
    };
    ctx.log(env.log).line(
        level,
        format_args!("opendir() \"{path}\" failed {}", errno_text(e)),
    );
    Outcome::Status(code)
}

/// `?callback=NAME` for JSONP: `Ok(None)` without one (plain JSON),
/// `Err` (400) for a name NGINX refuses.
fn jsonp_callback(ctx: &RequestCtx, env: &Env<'_>) -> Result<Option<String>, ()> {
    let Some(cb) = ctx.args.as_deref().and_then(|a| {
        a.split('&').find_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            k.eq_ignore_ascii_case("callback").then_some(v)
        })
    }) else {
        return Ok(None);
    };
    if cb.len() > 128 {
        ctx.log(env.log).line(
            Level::Info,
            format_args!("client sent too long callback name: \"{cb}\""),
        );
        return Err(());
    }
    if !cb
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
    {
        ctx.log(env.log).line(
            Level::Info,
            format_args!("client sent invalid callback name: \"{cb}\""),
        );
        return Err(());
    }
    Ok((!cb.is_empty()).then(|| cb.to_string()))
}

/// The HTML listing, as `ngx_http_autoindex_html`.
fn html(ctx: &RequestCtx, entries: &[DirEntry]) -> Vec<u8> {
    let s = &ctx.loc.s;
    let utf8 = s
        .charset
        .as_deref()
        .is_some_and(|c| c.eq_ignore_ascii_case("utf-8"));
    let offset = if s.autoindex_localtime { gmtoff() } else { 0 };
    let uri = escape_html(ctx.uri.as_bytes());
    let mut b = Vec::with_capacity(256 + entries.len() * 120);
    b.extend_from_slice(b"<html>\r\n<head><title>Index of ");
    b.extend_from_slice(&uri);
    b.extend_from_slice(b"</title></head>\r\n<body>\r\n<h1>Index of ");
    b.extend_from_slice(&uri);
    b.extend_from_slice(b"</h1><hr><pre><a href=\"../\">../</a>\r\n");
    for e in entries {
        html_line(&mut b, e, utf8, offset, s.autoindex_exact_size);
    }
    b.extend_from_slice(b"</pre><hr></body>\r\n</html>\r\n");
    b
}

/// One entry's line: link, name cut to the column, date, size.
fn html_line(b: &mut Vec<u8>, e: &DirEntry, utf8: bool, offset: i64, exact: bool) {
    let dir = e.kind == EntryKind::Dir;
    b.extend_from_slice(b"<a href=\"");
    escape_uri_component(&e.name, b);
    if dir {
        b.push(b'/');
    }
    b.extend_from_slice(b"\">");
    let text = std::str::from_utf8(&e.name).ok().filter(|_| utf8);
    let mut len = text.map_or(e.name.len(), |t| t.chars().count());
    let shown = match text {
        // Multibyte UTF-8: cut by characters.
        Some(t) if len != e.name.len() => {
            let keep = if len > NAME_LEN {
                NAME_LEN - 3
            } else {
                NAME_LEN
            };
            let end = t.char_indices().nth(keep).map_or(t.len(), |(i, _)| i);
            &e.name[..end]
        }
        _ if len > NAME_LEN => &e.name[..NAME_LEN - 3],
        _ => &e.name[..],
    };
    b.extend_from_slice(&escape_html(shown));
    if len > NAME_LEN {
        b.extend_from_slice(b"..&gt;</a>");
    } else {
        if dir && len < NAME_LEN {
            b.push(b'/');
            len += 1;
        }
        b.extend_from_slice(b"</a>");
        b.resize(b.len() + (NAME_LEN - len), b' ');
    }
    b.push(b' ');
    let date = crate::util::time::http_date(e.mtime + offset);
    // "Sun, 13 Sep 2020 12:26:40 GMT" → "13-Sep-2020 12:26 "
    let d = date.as_bytes();
    if d.len() >= 29 {
        b.extend_from_slice(&d[5..7]);
        b.push(b'-');
        b.extend_from_slice(&d[8..11]);
        b.push(b'-');
        b.extend_from_slice(&d[12..16]);
        b.push(b' ');
        b.extend_from_slice(&d[17..22]);
        b.push(b' ');
    }
    b.extend_from_slice(size_column(e, exact).as_bytes());
    b.extend_from_slice(b"\r\n");
}

/// The size column: exact in 19 columns, or scaled (`K`, `M`, `G`,
/// rounded half up) in 7; `-` for a directory.
fn size_column(e: &DirEntry, exact: bool) -> String {
    let dir = e.kind == EntryKind::Dir;
    if exact {
        return if dir {
            format!("{:>19}", "-")
        } else {
            format!("{:>19}", e.size)
        };
    }
    if dir {
        return format!("{:>7}", "-");
    }
    let l = e.size;
    const G: u64 = 1024 * 1024 * 1024;
    const M: u64 = 1024 * 1024;
    let (size, scale) = if l > G - 1 {
        (l / G + u64::from(l % G > G / 2 - 1), 'G')
    } else if l > M - 1 {
        (l / M + u64::from(l % M > M / 2 - 1), 'M')
    } else if l > 9999 {
        (l / 1024 + u64::from(l % 1024 > 511), 'K')
    } else {
        return format!(" {l:>6}");
    };
    format!("{size:>6}{scale}")
}

/// The local time zone's offset now, in seconds (NGINX adds the current
/// offset to every entry's time).
fn gmtoff() -> i64 {
    let mut iso = String::new();
    crate::util::time::time_iso8601(&mut iso);
    // "...+01:00"
    let tail = iso.len().saturating_sub(6);
    let z = &iso[tail..];
    let sign = if z.starts_with('-') { -1 } else { 1 };
    let h: i64 = z.get(1..3).and_then(|v| v.parse().ok()).unwrap_or(0);
    let m: i64 = z.get(4..6).and_then(|v| v.parse().ok()).unwrap_or(0);
    sign * (h * 3600 + m * 60)
}

/// The JSON (or, with `callback`, JSONP) listing.
fn json(entries: &[DirEntry], callback: Option<&str>) -> Vec<u8> {
    let mut b = Vec::with_capacity(16 + entries.len() * 100);
    if let Some(cb) = callback {
        b.extend_from_slice(b"/* callback */\r\n");
        b.extend_from_slice(cb.as_bytes());
        b.push(b'(');
    }
    b.push(b'[');
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            b.push(b',');
        }
        b.extend_from_slice(b"\r\n{ \"name\":\"");
        escape_json(&e.name, &mut b);
        b.extend_from_slice(b"\", \"type\":\"");
        b.extend_from_slice(kind_name(e.kind).as_bytes());
        b.extend_from_slice(b"\", \"mtime\":\"");
        b.extend_from_slice(crate::util::time::http_date(e.mtime).as_bytes());
        if e.kind == EntryKind::File {
            b.extend_from_slice(format!("\", \"size\":{}", e.size).as_bytes());
        } else {
            b.push(b'"');
        }
        b.extend_from_slice(b" }");
    }
    b.extend_from_slice(b"\r\n]");
    if callback.is_some() {
        b.extend_from_slice(b");");
    }
    b
}

/// The XML listing.
fn xml(entries: &[DirEntry]) -> Vec<u8> {
    let mut b = Vec::with_capacity(64 + entries.len() * 100);
    b.extend_from_slice(b"<?xml version=\"1.0\"?>\r\n<list>\r\n");
    for e in entries {
        let kind = kind_name(e.kind);
        b.push(b'<');
        b.extend_from_slice(kind.as_bytes());
        b.extend_from_slice(b" mtime=\"");
        b.extend_from_slice(iso_utc(e.mtime).as_bytes());
        if e.kind == EntryKind::File {
            b.extend_from_slice(format!("\" size=\"{}", e.size).as_bytes());
        }
        b.extend_from_slice(b"\">");
        b.extend_from_slice(&escape_html(&e.name));
        b.extend_from_slice(format!("</{kind}>\r\n").as_bytes());
    }
    b.extend_from_slice(b"</list>\r\n");
    b
}

fn kind_name(k: EntryKind) -> &'static str {
    match k {
        EntryKind::Dir => "directory",
        EntryKind::File => "file",
        EntryKind::Other => "other",
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` from the HTTP date's fields.
fn iso_utc(secs: i64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let d = crate::util::time::http_date(secs);
    if d.len() < 29 {
        return d;
    }
    let mon = MONTHS.iter().position(|m| *m == &d[8..11]).unwrap_or(0) + 1;
    format!("{}-{mon:02}-{}T{}Z", &d[12..16], &d[5..7], &d[17..25])
}

/// NGINX's `ngx_escape_html`: `<`, `>`, `&`, `"`.
fn escape_html(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    for &c in s {
        match c {
            b'<' => out.extend_from_slice(b"&lt;"),
            b'>' => out.extend_from_slice(b"&gt;"),
            b'&' => out.extend_from_slice(b"&amp;"),
            b'"' => out.extend_from_slice(b"&quot;"),
            _ => out.push(c),
        }
    }
    out
}

/// NGINX's `NGX_ESCAPE_URI_COMPONENT`: everything but letters, digits
/// and `-._~` as `%XX`.
fn escape_uri_component(s: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &c in s {
        if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~') {
            out.push(c);
        } else {
            out.extend_from_slice(&[b'%', HEX[(c >> 4) as usize], HEX[(c & 15) as usize]]);
        }
    }
}

/// NGINX's `ngx_escape_json`.
fn escape_json(s: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &c in s {
        if c > 0x1f {
            if c == b'\\' || c == b'"' {
                out.push(b'\\');
            }
            out.push(c);
            continue;
        }
        out.push(b'\\');
        match c {
            b'\n' => out.push(b'n'),
            b'\r' => out.push(b'r'),
            b'\t' => out.push(b't'),
            8 => out.push(b'b'),
            12 => out.push(b'f'),
            _ => out.extend_from_slice(&[
                b'u',
                b'0',
                b'0',
                HEX[(c >> 4) as usize],
                HEX[(c & 15) as usize],
            ]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, kind: EntryKind, size: u64) -> DirEntry {
        DirEntry {
            name: name.as_bytes().to_vec(),
            kind,
            size,
            mtime: 1_600_000_000,
        }
    }

    #[test]
    fn sizes_scale_as_nginx_rounds_them() {
        let f = |n| size_column(&entry("a", EntryKind::File, n), false);
        assert_eq!(f(9999), "   9999");
        assert_eq!(f(10_000), "    10K");
        assert_eq!(f(10_752), "    11K");
        assert_eq!(f(1024 * 1024), "     1M");
        assert_eq!(f(3 * 1024 * 1024 * 1024 / 2), "     2G");
        assert_eq!(
            size_column(&entry("d", EntryKind::Dir, 0), false),
            "      -"
        );
        assert_eq!(size_column(&entry("a", EntryKind::File, 5), true).len(), 19);
    }

    #[test]
    fn a_long_name_is_cut_with_an_ellipsis() {
        let mut b = Vec::new();
        let name = "x".repeat(60);
        html_line(&mut b, &entry(&name, EntryKind::File, 1), false, 0, true);
        let line = String::from_utf8(b).unwrap();
        assert!(line.contains(&format!(">{}..&gt;</a> 13-Sep-2020 12:26 ", "x".repeat(47))));
    }

    #[test]
    fn xml_times_are_utc_iso() {
        assert_eq!(iso_utc(1_600_000_000), "2020-09-13T12:26:40Z");
    }
}
