//! The userid module's settings (`userid`, `userid_*`;
//! `directives/userid.rs`, read by `http::userid` and the filter in
//! `handlers/userid.rs`): one level's [`UseridBuilder`] merged field by
//! field into [`UseridSettings`], as `ngx_http_userid_merge_conf` merges
//! its fields, with its defaults.

use super::group::settings_group;

/// `userid off|log|v1|on`, ordered as NGINX's constants are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum UseridMode {
    /// No cookie read or set; `$uid_got` not found.
    Off,
    /// The cookie is read (`$uid_got`), none set.
    Log,
    /// Cookies set in version 1 byte order (host order).
    V1,
    /// Cookies set in version 2 byte order (network order).
    On,
}

/// `userid_flags secure`.
pub const UID_SECURE: u8 = 1;
/// `userid_flags httponly`.
pub const UID_HTTPONLY: u8 = 2;
/// `userid_flags samesite=strict`.
pub const UID_STRICT: u8 = 4;
/// `userid_flags samesite=lax`.
pub const UID_LAX: u8 = 8;
/// `userid_flags samesite=none`.
pub const UID_NONE: u8 = 16;
/// `userid_flags off` (no flag; kept to tell "set" from "unset").
pub const UID_OFF: u8 = 32;

/// NGINX's `NGX_HTTP_USERID_MAX_EXPIRES` (31 Dec 2037 23:55:55 GMT):
/// `userid_expires max`.
pub const UID_MAX_EXPIRES: u64 = 2_145_916_555;

settings_group! {
    /// The userid settings as one config level wrote them.
    UseridBuilder =>
    /// The userid settings after merging with outer levels.
    UseridSettings;
    /// `userid`.
    mode: UseridMode = UseridMode::Off;
    /// `userid_service` (None: the server's address, or 0 for `v1`).
    service: Option<u32> = None;
    /// `userid_name`.
    name: String = "uid".to_string();
    /// `userid_domain` as it goes into the cookie (`; domain=X`; empty
    /// for `none`).
    domain: String = String::new();
    /// `userid_path` as it goes into the cookie (`; path=X`).
    path: String = "; path=/".to_string();
    /// `userid_p3p` (empty for `none`).
    p3p: String = String::new();
    /// `userid_expires` in seconds (0: off; [`UID_MAX_EXPIRES`]: max).
    expires: u64 = 0;
    /// `userid_flags`, `UID_*` bits.
    flags: u8 = UID_OFF;
    /// `userid_mark` (0: off).
    mark: u8 = 0;
}
