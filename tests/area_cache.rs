//! One test binary for the proxy cache: each file listed below is a
//! module of this crate, as tests are filed by feature (docs/design.md,
//! "Tests"). One crate per area rather than one per file: each binary
//! compiles `tests/common/` and links the library once, which is most of
//! the test build's time. Run one file's tests with
//! `cargo test --release --test area_cache FILE::`.

mod common;

mod proxy_cache;
mod proxy_cache_disks;
mod proxy_cache_errors;
mod proxy_cache_fill;
mod proxy_cache_headers;
mod proxy_cache_health;
mod proxy_cache_hit_head;
mod proxy_cache_integrity;
mod proxy_cache_lock;
mod proxy_cache_open_entries;
mod proxy_cache_purge;
mod proxy_cache_ranges;
mod proxy_cache_stale;
mod proxy_cache_stale_windows;
mod proxy_cache_store;
mod proxy_cache_zone_owner;
