//! Entry points for the fuzz targets in `fuzz/` (cargo-fuzz, libFuzzer)
//! and for `tests/fuzz_corpus.rs`, which replays every corpus file through
//! them on the stable toolchain. Each takes arbitrary bytes, feeds them to
//! one parser of porter's untrusted input, and checks what must hold of
//! its answer (a panic or a failed check is a crash). Not part of the
//! server's interface.

use std::path::{Path, PathBuf};

use crate::cache::format;
use crate::http::chunked::ChunkedDecoder;
use crate::http::range::{self, RangeOutcome};
use crate::http::request::{self, HeadLimits};
use crate::http::uri;
use crate::upstream::wire::{self, Framing};

/// One fuzz target's entry point.
pub type Target = fn(&[u8]);

/// The fuzz targets, by name (the `fuzz/fuzz_targets/NAME.rs` files and the
/// `fuzz/corpus/NAME/` directories).
pub const TARGETS: &[(&str, Target)] = &[
    ("request_head", request_head),
    ("uri", uri_normalize),
    ("range", range_header),
    ("chunked", chunked),
    ("config", config),
    ("cache_header", cache_header),
    ("upstream_response", upstream_response),
    ("h3_request", h3_request),
    ("h3_frame_scan", h3_frame_scan),
];

/// A client's request head (`http::request::parse_head`), with the
/// default limits and with small ones that also drop invalid header names
/// and allow underscores (the first input byte's low bits pick them).
pub fn request_head(data: &[u8]) {
    let flags = data.first().copied().unwrap_or(0);
    let small = HeadLimits {
        max_request_line: 64,
        max_header_line: 64,
        max_head: 256,
        max_headers: 4,
        ignore_invalid_headers: flags & 1 == 0,
        underscores_in_headers: flags & 2 != 0,
    };
    for limits in [HeadLimits::default(), small] {
        if let Ok(Some(h)) = request::parse_head(data, &limits) {
            assert!(h.head_len <= data.len(), "head longer than the input");
        }
    }
}

/// A request target: `uri::split_target`, then `uri::normalize_with` of
/// its path, slashes merged and not (`merge_slashes`). A normalised path
/// starts with `/`, has no `.` or `..` segment, and normalises to itself
/// once its `%` are escaped.
pub fn uri_normalize(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (path, _args) = uri::split_target(&text);
    for merge in [true, false] {
        let Ok(p) = uri::normalize_with(path, merge) else {
            continue;
        };
        assert!(p.starts_with('/'), "{p:?} from {path:?}");
        assert!(
            !p.split('/').any(|s| s == ".." || s == "."),
            "{p:?} keeps a dot segment (from {path:?}, merge {merge})"
        );
        let again = uri::normalize_with(&p.replace('%', "%25"), merge);
        assert_eq!(again.as_deref(), Ok(p.as_str()), "not idempotent");
    }
}

/// A `Range` header against an entity length and `max_ranges` taken from
/// the input's first bytes: every range lies inside the entity, is not
/// empty, and there are no more than `max_ranges`.
pub fn range_header(data: &[u8]) {
    let (len, max, header) = match data {
        [a, b, c, rest @ ..] => {
            let len = u64::from(u16::from_le_bytes([*a, *b]));
            let len = if *c & 0x80 != 0 { len << 24 } else { len };
            let max = (*c & 0x40 != 0).then_some(usize::from(*c & 0x3f));
            (len, max, String::from_utf8_lossy(rest))
        }
        _ => (100, None, String::from_utf8_lossy(data)),
    };
    if let RangeOutcome::Partial(ranges) = range::parse_range(&header, len, max) {
        assert!(!ranges.is_empty());
        if let Some(m) = max {
            assert!(ranges.len() <= m.max(1), "{} ranges over {m}", ranges.len());
        }
        for r in &ranges {
            assert!(r.start < r.end && r.end <= len, "{r:?} of {len}");
        }
    }
}

/// A chunked body fed to `ChunkedDecoder` whole and in pieces of the
/// size the first byte gives: both must agree (any split of the input is
/// decoded the same), and nothing is consumed past the end.
pub fn chunked(data: &[u8]) {
    let Some((&step, body)) = data.split_first() else {
        return;
    };
    let whole = decode_in(body, body.len().max(1));
    let pieces = decode_in(body, usize::from(step % 17) + 1);
    assert_eq!(
        whole,
        pieces,
        "split at {} changes the result",
        step % 17 + 1
    );
}

/// (body, consumed, ended) or the error, feeding `input` `step` bytes at a
/// time as a connection would (unconsumed bytes are offered again).
fn decode_in(input: &[u8], step: usize) -> Result<(Vec<u8>, usize, bool), String> {
    let mut d = ChunkedDecoder::new();
    let mut out = Vec::new();
    let mut at = 0;
    let mut avail = 0;
    while avail < input.len() {
        avail = (avail + step).min(input.len());
        let (n, done) = d
            .feed(&input[at..avail], Some(&mut out))
            .map_err(|e| e.0.to_string())?;
        assert!(n <= avail - at);
        at += n;
        if done {
            return Ok((out, at, true));
        }
    }
    Ok((out, at, false))
}

/// A configuration text through the parser and the directive handlers
/// (`config::parser`, `config::directives::Build`), as `porter -t` reads
/// it. The directives that read files (`include`, `ssl_certificate`,
/// `ssl_certificate_key`, `ssl_client_certificate`,
/// `proxy_ssl_trusted_certificate`, `proxy_ssl_certificate`,
/// `ssl_password_file`, `proxy_ssl_password_file`) are renamed to unknown
/// ones first: what
/// they read (`include /dev/zero;`) is not the parser's input. (Config
/// escapes cannot make letters, so a name is only ever spelt out.)
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let text = text
        .replace("include", "inclune")
        .replace("certificate", "certificatx")
        .replace("password_file", "password_filx");
    let nowhere = PathBuf::from("/nonexistent/porter-fuzz");
    let mut parser = crate::config::parser::Parser::new(nowhere.clone());
    let Ok(dirs) = parser.parse_str(&text, Path::new("/nonexistent/porter-fuzz/fuzz.conf")) else {
        return;
    };
    let mut build = crate::config::directives::Build::new(nowhere);
    if build.walk(&dirs).is_ok() {
        let _ = build.finish(Vec::new());
    }
}

/// A cache entry file's header (`cache::format`): decoded without a key or
/// size to compare with, and, when it decodes to a version 2 header, encoded
/// again to the same metadata.
pub fn cache_header(data: &[u8]) {
    let _ = format::header_len(data);
    let size = data.len() as u64;
    for file_size in [None, Some(size)] {
        let Ok(h) = format::decode(data, None, file_size) else {
            continue;
        };
        assert!(h.body_offset as usize <= data.len());
        let Some(crc) = h.body_crc else {
            continue;
        };
        let again = format::encode(&h.meta, h.body_len, crc);
        if again.len() as u64 == h.body_offset {
            let d = format::decode(&again, Some(&h.meta.key), None).expect("re-encoded");
            assert_eq!(d, h, "round trip");
        }
    }
}

/// An upstream's response: the head (`upstream::wire::parse_response_head`
/// with a 4 KiB and a 64-byte buffer), its framing for GET and HEAD, and a
/// chunked body decoded from the bytes after the head.
pub fn upstream_response(data: &[u8]) {
    let _ = wire::parse_response_head(data, 64);
    let Ok(Some(head)) = wire::parse_response_head(data, 4096) else {
        return;
    };
    assert!(head.len <= data.len());
    let _ = head.keep_alive();
    let _ = Framing::of(&head, true);
    if let Ok(Framing::Chunked(mut d)) = Framing::of(&head, false) {
        let rest = &data[head.len..];
        if let Ok((n, _)) = d.feed(rest, None) {
            assert!(n <= rest.len());
        }
    }
}

/// An HTTP/3 client's control stream and request stream through h3's
/// server as porter builds it (`http::http3::fuzz::request`: frames,
/// SETTINGS, QPACK field sections, DATA, trailers); the first byte is the
/// control stream's length. An accepted request has a method and a URI.
pub fn h3_request(data: &[u8]) {
    let (control, request) = crate::http::http3::fuzz::request_input(data);
    if let Some(line) = crate::http::http3::fuzz::request(control, request) {
        assert!(line.contains(' '), "{line:?}");
    }
}

/// porter's HTTP/3 frame guard (`http::http3::guard::FrameScan`): the
/// same verdict whether the bytes come whole or in pieces.
pub fn h3_frame_scan(data: &[u8]) {
    crate::http::http3::fuzz::frame_scan(data);
}
