//! What a location lets WebDAV clients do (NGINX's
//! `ngx_http_dav_module`): the `dav_methods`, `dav_access`,
//! `create_full_put_path` and `min_delete_depth` directives fill one
//! [`DavSettings`], nested in `LocSettings` (`dav`) and merged field by
//! field as NGINX merges its `ngx_http_dav_loc_conf_t`. The handler is
//! `handlers/dav/`; the directives are `config/directives/dav.rs`.

use super::group::settings_group;

/// `dav_methods PUT`.
pub const DAV_PUT: u8 = 1;
/// `dav_methods DELETE`.
pub const DAV_DELETE: u8 = 2;
/// `dav_methods MKCOL`.
pub const DAV_MKCOL: u8 = 4;
/// `dav_methods COPY`.
pub const DAV_COPY: u8 = 8;
/// `dav_methods MOVE`.
pub const DAV_MOVE: u8 = 16;

settings_group! {
    /// The DAV settings as one config level wrote them.
    DavBuilder =>
    /// The DAV settings after merging with outer levels.
    DavSettings;
    /// `dav_methods`: the `DAV_*` bits (0: `off`, the default).
    methods: u8 = 0;
    /// `dav_access`: the mode of files PUT makes (directories get `x`
    /// where there is `r`).
    access: u32 = 0o600;
    /// `create_full_put_path`: PUT makes the missing directories.
    create_full_put_path: bool = false;
    /// `min_delete_depth`: the fewest path segments a DELETE's URI has.
    min_delete_depth: u64 = 0;
}

/// The `DAV_*` bit of a method token (`None`: not a DAV method).
pub fn dav_bit(method: &str) -> Option<u8> {
    Some(match method {
        "PUT" => DAV_PUT,
        "DELETE" => DAV_DELETE,
        "MKCOL" => DAV_MKCOL,
        "COPY" => DAV_COPY,
        "MOVE" => DAV_MOVE,
        _ => return None,
    })
}
