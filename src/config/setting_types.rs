//! The value types of location settings (`error_page`, `add_header`,
//! `return`, `try_files`, the cache's methods and purge, `if_modified_since`,
//! `lingering_close`, `aio`, `open_file_cache`, `root`/`alias`,
//! `proxy_store`), the request head's limits and the kinds of location,
//! kept beside `model.rs`, which holds the settings themselves in
//! `loc_settings!`.

use crate::vars::template::Template;
use std::time::Duration;

/// `disable_symlinks off | on | if_not_owner [from=part]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DisableSymlinks {
    /// `on`: no symbolic link on the path; `if_not_owner`: only links
    /// owned as their target is.
    pub mode: SymlinkCheck,
    /// `from=`: the leading part of the path not checked (variables
    /// allowed).
    pub from: Option<Template>,
}

/// What `disable_symlinks` checks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SymlinkCheck {
    /// `off`: links are followed.
    #[default]
    Off,
    /// `on`: any link refuses the path.
    On,
    /// `if_not_owner`: a link whose owner is not its target's refuses it.
    IfNotOwner,
}

/// `keepalive_disable`: the browsers whose connections close after a
/// request (`src/http/user_agent.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepaliveDisable {
    /// `msie6`: MSIE up to 6, after a POST (the default).
    pub msie6: bool,
    /// `safari`: Safari on Mac OS X.
    pub safari: bool,
}

/// One `error_page` rule.
#[derive(Debug, Clone)]
pub struct ErrorPage {
    /// Status codes it applies to.
    pub codes: Vec<u16>,
    /// The status the page is sent with.
    pub status: PageStatus,
    /// Target URI (internal redirect) or URL (redirect).
    pub target: Template,
}

/// The status an `error_page` sends its page with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageStatus {
    /// `error_page 404 /page`: the error's own status.
    Error,
    /// `error_page 404 = /page`: the status of the page's own response.
    Page,
    /// `error_page 404 =200 /page`: this status (for a URL, the
    /// redirect's, when 301–308).
    Set(u16),
}

/// `expires`: how the headers filter sets `Expires` and `Cache-Control`
/// (NGINX's `ngx_http_headers_conf_t.expires`).
#[derive(Debug, Clone)]
pub enum Expires {
    /// A value written in the config, parsed when it loads.
    Fixed(ExpiresRule),
    /// `expires $var` (a value with variables): parsed per request; a value
    /// that does not parse sets nothing, as NGINX ignores it.
    Var(Template),
    /// `expires modified $var`: the same, counted from the file's
    /// modification time (a value such as `epoch` or `@15h` sets nothing).
    ModifiedVar(Template),
}

/// One parsed `expires` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpiresRule {
    /// `off`.
    Off,
    /// `epoch`.
    Epoch,
    /// `max`.
    Max,
    /// `[+|-]TIME`: seconds after the request.
    Access(i64),
    /// `modified [+|-]TIME`: seconds after the file's modification time.
    Modified(i64),
    /// `@TIME`: the next time of day (seconds after local midnight).
    Daily(i64),
}

impl ExpiresRule {
    /// Parses `expires`'s arguments (`modified` first, if given) with
    /// NGINX's error texts (`ngx_http_parse_expires`).
    pub fn parse(modified: bool, value: &str) -> Result<ExpiresRule, &'static str> {
        if !modified {
            match value {
                "epoch" => return Ok(ExpiresRule::Epoch),
                "max" => return Ok(ExpiresRule::Max),
                "off" => return Ok(ExpiresRule::Off),
                _ => {}
            }
        }
        let (daily, minus, t) = match value.as_bytes().first() {
            Some(b'@') if modified => {
                return Err("daily time cannot be used with \"modified\" parameter")
            }
            Some(b'@') => (true, false, &value[1..]),
            Some(b'+') => (false, false, &value[1..]),
            Some(b'-') => (false, true, &value[1..]),
            _ => (false, false, value),
        };
        let secs = crate::config::value::parse_time(t)
            .ok_or("invalid value")?
            .as_secs() as i64;
        if daily {
            if secs > 24 * 60 * 60 {
                return Err("daily time value must be less than 24 hours");
            }
            return Ok(ExpiresRule::Daily(secs));
        }
        let secs = if minus { -secs } else { secs };
        Ok(if modified {
            ExpiresRule::Modified(secs)
        } else {
            ExpiresRule::Access(secs)
        })
    }
}

/// `proxy_bind address [transparent]`.
#[derive(Debug, Clone)]
pub struct ProxyBind {
    /// The local address (`IP` or `IP:PORT`), variables allowed.
    pub addr: Template,
    /// `transparent`: bind to an address this host does not own.
    pub transparent: bool,
}

impl ProxyBind {
    /// The address an `addr` value names: `IP`, `IP:PORT`, `[IPv6]:PORT`
    /// (port 0: the kernel picks one).
    pub fn parse(v: &str) -> Option<std::net::SocketAddr> {
        if let Ok(a) = v.parse::<std::net::SocketAddr>() {
            return Some(a);
        }
        let ip = v.trim_start_matches('[').trim_end_matches(']');
        ip.parse::<std::net::IpAddr>()
            .ok()
            .map(|ip| std::net::SocketAddr::new(ip, 0))
    }
}

/// One `sub_filter STRING REPLACEMENT` pair.
#[derive(Debug, Clone)]
pub struct SubFilter {
    /// The string looked for (variables allowed).
    pub find: Template,
    /// What replaces it (variables allowed).
    pub replace: Template,
}

/// One `add_header` line.
#[derive(Debug, Clone)]
pub struct AddHeader {
    /// Header name.
    pub name: String,
    /// Header value (an empty value suppresses the header, as in NGINX).
    pub value: Template,
    /// `always`: also on error responses.
    pub always: bool,
    /// The value reads the response's header lines (`$sent_http_*`,
    /// directly or through a `map`), so the headers filter lends them to
    /// the request first.
    pub reads_response: bool,
}

impl AddHeader {
    /// The line `name value [always]`.
    pub fn new(name: &str, value: Template, always: bool) -> AddHeader {
        AddHeader {
            name: name.to_string(),
            reads_response: value.reads_sent_http(),
            value,
            always,
        }
    }
}

/// `return code [text|URL]` / `return URL`.
#[derive(Debug, Clone)]
pub struct Return {
    /// Status (444 closes the connection without a response).
    pub code: u16,
    /// Body text, or redirect target for 301/302/303/307/308.
    pub text: Option<Template>,
}

/// `try_files file ... uri|=code`.
#[derive(Debug, Clone)]
pub struct TryFiles {
    /// The files (or directories) to test, in order.
    pub candidates: Vec<TryFile>,
    /// What to do when none exists.
    pub fallback: TryFallback,
}

/// One `try_files` candidate.
#[derive(Debug, Clone)]
pub struct TryFile {
    /// The URI to test, with a trailing `/` removed (as NGINX does).
    pub name: Template,
    /// Written with a trailing `/`: only a directory matches.
    pub dir: bool,
}

/// The last `try_files` parameter.
#[derive(Debug, Clone)]
pub enum TryFallback {
    /// An internal redirect to this URI (with optional arguments).
    Uri(Template),
    /// `=code`.
    Code(u16),
}

/// `proxy_cache_methods`: which request methods may be answered from and
/// stored in the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheMethods {
    /// POST (GET and HEAD are always cacheable, as in NGINX).
    pub post: bool,
}

/// `proxy_cache_use_stale error`.
pub const STALE_ERROR: u16 = 1;
/// `proxy_cache_use_stale timeout`.
pub const STALE_TIMEOUT: u16 = 1 << 1;
/// `proxy_cache_use_stale invalid_header`.
pub const STALE_INVALID_HEADER: u16 = 1 << 2;
/// `proxy_cache_use_stale updating`.
pub const STALE_UPDATING: u16 = 1 << 3;
/// `proxy_cache_use_stale http_500`.
pub const STALE_500: u16 = 1 << 4;
/// `proxy_cache_use_stale http_502`.
pub const STALE_502: u16 = 1 << 5;
/// `proxy_cache_use_stale http_503`.
pub const STALE_503: u16 = 1 << 6;
/// `proxy_cache_use_stale http_504`.
pub const STALE_504: u16 = 1 << 7;
/// `proxy_cache_use_stale http_403`.
pub const STALE_403: u16 = 1 << 8;
/// `proxy_cache_use_stale http_404`.
pub const STALE_404: u16 = 1 << 9;
/// `proxy_cache_use_stale http_429`.
pub const STALE_429: u16 = 1 << 10;

/// The `STALE_*` bit for an upstream status, if `proxy_cache_use_stale`
/// can name it.
pub fn stale_status_bit(status: u16) -> Option<u16> {
    Some(match status {
        500 => STALE_500,
        502 => STALE_502,
        503 => STALE_503,
        504 => STALE_504,
        403 => STALE_403,
        404 => STALE_404,
        429 => STALE_429,
        _ => return None,
    })
}

/// `proxy_cache_purge METHOD [from all | ADDR[/BITS] ...]`: a request with
/// this method removes the entry for its cache key (the same-location
/// syntax of the widely used ngx_cache_purge module; open-source NGINX has
/// no purge).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachePurge {
    /// The request method that purges (e.g. `PURGE`).
    pub method: String,
    /// Client networks allowed to purge (empty = everyone).
    pub from: Vec<(std::net::IpAddr, u8)>,
}

impl CachePurge {
    /// Whether `addr` may purge.
    pub fn allows(&self, addr: std::net::IpAddr) -> bool {
        self.from.is_empty() || self.from.iter().any(|&(net, bits)| in_net(addr, net, bits))
    }
}

fn in_net(addr: std::net::IpAddr, net: std::net::IpAddr, bits: u8) -> bool {
    use std::net::IpAddr;
    match (addr, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - bits as u32).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - bits as u32).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// `if_modified_since off|exact|before`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImsMode {
    /// Ignore If-Modified-Since.
    Off,
    /// 304 only when the time matches exactly (NGINX's default).
    Exact,
    /// 304 when the file is not newer.
    Before,
}

/// `lingering_close`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LingeringClose {
    /// Never: close at once.
    Off,
    /// When the client may still be sending (NGINX's default).
    On,
    /// After every request that closes the connection.
    Always,
}

/// `types { }` content: lowercase extension → MIME type (shared with each
/// response's `Content-Type`: a clone costs no allocation).
pub type Types = std::collections::HashMap<String, std::sync::Arc<str>>;

/// NGINX's built-in types, used when no `types` block is given.
pub fn builtin_types() -> std::sync::Arc<Types> {
    let mut t = Types::new();
    t.insert("html".into(), "text/html".into());
    t.insert("gif".into(), "image/gif".into());
    t.insert("jpg".into(), "image/jpeg".into());
    std::sync::Arc::new(t)
}

/// A file a directive names, with where it is named (for errors found
/// when the file is read, after the settings merge).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FileAt {
    /// The file, resolved against the prefix.
    pub path: std::path::PathBuf,
    /// The configuration file of the directive.
    pub file: std::sync::Arc<std::path::Path>,
    /// Its line.
    pub line: u32,
}

/// `aio` as written.
#[derive(Debug, Clone)]
pub enum AioConf {
    /// `aio off`.
    Off,
    /// `aio threads[=NAME]`: the pool name, possibly with variables.
    Threads(Template),
    /// `aio on`: the worker's io_uring (the `default` pool without one).
    On,
}

/// `open_file_cache max=N inactive=T`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFileCacheConf {
    /// `max`.
    pub max: usize,
    /// `inactive` (default 60 s).
    pub inactive: Duration,
}

/// `root` or `alias`.
#[derive(Debug, Clone)]
pub enum DocRoot {
    /// `root PATH`: the URI is appended.
    Root(Template),
    /// `alias PATH`: replaces what the location that wrote it matched
    /// (NGINX's `clcf->alias`, inherited with the path by nested
    /// locations): the first N bytes of the URI, the length of that
    /// location's name; or, written in a regex location (`None`), the
    /// whole URI, unless `try_files` chose a file
    /// (`RequestCtx::add_uri_to_alias`).
    Alias(Template, Option<usize>),
}

/// The part of `uri` written after an alias whose location cut `cut`
/// bytes off ([`DocRoot::Alias`]); a regex location's (`None`) appends the
/// URI only after `try_files` chose it (`add_uri`), as NGINX's
/// `ngx_http_map_uri_to_path`.
pub fn alias_tail(cut: Option<usize>, uri: &str, add_uri: bool) -> &str {
    match cut {
        Some(n) => uri.get(n..).unwrap_or(""),
        None if add_uri => uri,
        None => "",
    }
}

/// Where `proxy_store` (`fastcgi_store`...) puts a response:
/// `on` is the file `root`/`alias` map the URI to, a string (variables
/// allowed) the path itself.
#[derive(Debug, Clone)]
pub struct StoreTo {
    /// `*_store PATH` (None: `on`).
    pub path: Option<Template>,
    /// The module's compiled-in temp directory under the prefix
    /// (`proxy_temp`, `fastcgi_temp`...), where no `*_temp_path` is set.
    pub default_temp: std::path::PathBuf,
}

/// Limits on the request head (`large_client_header_buffers`,
/// `client_header_timeout`), server level as in NGINX.
#[derive(Debug, Clone)]
pub struct HeadLimitsConf {
    /// Longest request line or header line.
    pub max_line: usize,
    /// Longest head in total (`number × size`).
    pub max_head: usize,
    /// `client_header_timeout`.
    pub header_timeout: Duration,
    /// `merge_slashes`.
    pub merge_slashes: bool,
    /// `ignore_invalid_headers`.
    pub ignore_invalid_headers: bool,
    /// `underscores_in_headers`.
    pub underscores_in_headers: bool,
    /// `max_headers`.
    pub max_headers: usize,
}

/// How a location matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocationKind {
    /// `location = /x`.
    Exact,
    /// `location /x` or `location ^~ /x`.
    Prefix,
    /// `location ~ re` or `location ~* re`.
    Regex,
    /// `location @name`.
    Named,
    /// The inside of an `if` or `limit_except` block in a location
    /// (NGINX's noname locations: no URI selects them).
    If,
    /// The server level (no `location` block matched).
    Server,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expires_values_parse_as_nginx_parses_them() {
        let p = ExpiresRule::parse;
        assert_eq!(p(false, "epoch"), Ok(ExpiresRule::Epoch));
        assert_eq!(p(false, "1y"), Ok(ExpiresRule::Access(365 * 86400)));
        assert_eq!(p(false, "-1"), Ok(ExpiresRule::Access(-1)));
        assert_eq!(p(false, "@15h30m"), Ok(ExpiresRule::Daily(55800)));
        assert_eq!(p(true, "+1h"), Ok(ExpiresRule::Modified(3600)));
        assert_eq!(p(true, "max"), Err("invalid value"));
        assert_eq!(
            p(false, "@25h"),
            Err("daily time value must be less than 24 hours")
        );
        assert!(p(true, "@1h").is_err());
        assert_eq!(p(false, ""), Err("invalid value"));
    }
}
