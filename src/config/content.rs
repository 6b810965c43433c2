//! The content modules' setting types (gzip, gzip_static, autoindex,
//! charset, limit_rate), kept beside `model.rs`, which holds the settings
//! themselves in `loc_settings!`.

/// `gzip_proxied off` (the default).
pub const GZIP_PROXIED_OFF: u16 = 1;
/// `gzip_proxied expired`.
pub const GZIP_PROXIED_EXPIRED: u16 = 1 << 1;
/// `gzip_proxied no-cache`.
pub const GZIP_PROXIED_NO_CACHE: u16 = 1 << 2;
/// `gzip_proxied no-store`.
pub const GZIP_PROXIED_NO_STORE: u16 = 1 << 3;
/// `gzip_proxied private`.
pub const GZIP_PROXIED_PRIVATE: u16 = 1 << 4;
/// `gzip_proxied no_last_modified`.
pub const GZIP_PROXIED_NO_LM: u16 = 1 << 5;
/// `gzip_proxied no_etag`.
pub const GZIP_PROXIED_NO_ETAG: u16 = 1 << 6;
/// `gzip_proxied auth`.
pub const GZIP_PROXIED_AUTH: u16 = 1 << 7;
/// `gzip_proxied any`.
pub const GZIP_PROXIED_ANY: u16 = 1 << 8;

/// `gzip_disable`: the `msie6` mask and user-agent regexes
/// (case-insensitive, as NGINX compiles them).
#[derive(Debug, Clone)]
pub struct GzipDisable {
    /// `msie6`: MSIE 4-6 (not 6 with SV1).
    pub msie6: bool,
    /// The other values, as regexes.
    pub patterns: Vec<regex::Regex>,
}

/// `gzip_static off|on|always`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GzipStatic {
    /// Off.
    Off,
    /// `FILE.gz` for clients that accept gzip.
    On,
    /// `FILE.gz` for every client.
    Always,
}

/// `autoindex_format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoindexFormat {
    /// `html` (the default).
    Html,
    /// `xml`.
    Xml,
    /// `json`.
    Json,
    /// `jsonp` (JSON with `?callback=`).
    Jsonp,
}

/// One `charset_map FROM TO { … }` table, both ways: an 8-bit charset to
/// another (byte → byte) or to UTF-8 (byte → UTF-8 sequence).
#[derive(Debug, Clone)]
pub struct CharsetMap {
    /// The 8-bit charset (as written).
    pub from: String,
    /// The other charset (as written).
    pub to: String,
    /// `to` is UTF-8.
    pub to_utf8: bool,
    /// Byte → byte in `to`, for 8-bit `to` (identity where unmapped).
    pub forward: [u8; 256],
    /// Byte in `to` → byte, for 8-bit `to`.
    pub backward: [u8; 256],
    /// Byte → UTF-8 bytes, for a UTF-8 `to` (empty where unmapped).
    pub utf8: Vec<Vec<u8>>,
}

impl CharsetMap {
    /// An identity table between `from` and `to`.
    pub fn new(from: &str, to: &str) -> CharsetMap {
        let mut id = [0u8; 256];
        for (i, b) in id.iter_mut().enumerate() {
            *b = i as u8;
        }
        CharsetMap {
            from: from.to_string(),
            to: to.to_string(),
            to_utf8: to.eq_ignore_ascii_case("utf-8"),
            forward: id,
            backward: id,
            utf8: vec![Vec::new(); 256],
        }
    }
}
