//! What a location caches and how, for one upstream protocol: the
//! `proxy_cache*` directives and their `fastcgi_cache*` twins (and, by one
//! line each, `uwsgi_cache*` / `scgi_cache*`) fill one
//! [`CacheSettings`] each, nested in `LocSettings` (`proxy_cache`,
//! `fastcgi_cache`) and merged field by field as NGINX merges its
//! `ngx_http_upstream_conf_t` cache fields. The cache flow
//! (`handlers/proxy/cache.rs`) reads the protocol's group through
//! `Knobs`; `config/directives/cache.rs` generates each family's rows
//! from its prefix.

use std::sync::Arc;
use std::time::Duration;

use super::group::settings_group;
use super::setting_types::{CacheMethods, CachePurge};
use crate::cache::policy::CacheValid;
use crate::cache::TempPath;
use crate::vars::template::Template;

settings_group! {
    /// One protocol's cache settings as one config level wrote them.
    CacheBuilder =>
    /// One protocol's cache settings after merging with outer levels.
    CacheSettings;
    /// `*_cache` (None = off): the zone name, possibly with variables.
    zone: Option<Template> = None;
    /// `*_cache_key` (None: `$scheme$proxy_host$request_uri` for the
    /// proxy; NGINX's FastCGI, uwsgi and SCGI have no default and warn).
    key: Option<Template> = None;
    /// `*_cache_methods` (GET and HEAD are always in).
    methods: CacheMethods = CacheMethods::default();
    /// `*_cache_min_uses`.
    min_uses: u64 = 1;
    /// `*_cache_bypass` conditions (any non-empty, non-"0" value).
    bypass: Arc<Vec<Template>> = Arc::new(Vec::new());
    /// `*_no_cache` conditions.
    no_cache: Arc<Vec<Template>> = Arc::new(Vec::new());
    /// `*_cache_lock`.
    lock: bool = false;
    /// `*_cache_lock_timeout`.
    lock_timeout: Duration = Duration::from_secs(5);
    /// `*_cache_lock_age`.
    lock_age: Duration = Duration::from_secs(5);
    /// `*_cache_use_stale` (a set of `STALE_*` bits).
    use_stale: u16 = 0;
    /// `*_cache_background_update`.
    background_update: bool = false;
    /// `*_cache_revalidate`.
    revalidate: bool = false;
    /// `*_cache_purge METHOD [from ...]` (None = off).
    purge: Option<Arc<CachePurge>> = None;
    /// `*_cache_valid` rules, in order (empty: only response headers make
    /// a response cacheable).
    valid: Arc<Vec<CacheValid>> = Arc::new(Vec::new());
    /// `*_temp_path` (None: `proxy_temp` under the prefix, see
    /// `cache::TempPath::default_for`).
    temp_path: Option<TempPath> = None;
    /// `*_cache_max_range_offset` (None: no limit): a miss asked for a
    /// range starting at or past it is not stored.
    max_range_offset: Option<u64> = None;
}
