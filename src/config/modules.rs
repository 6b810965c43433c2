//! The NGINX modules porter has built in, as `porter -V` reports them.
//!
//! NGINX's `-V` prints its `configure arguments:`, and tools read them to
//! learn what a binary can do: NGINX's own test suite (`Test::Nginx`'s
//! `has_module`) skips a test file when `--without-http_X_module` is there
//! for a module NGINX builds by default, or when `--with-http_X_module` is
//! missing for one it builds only on request. porter prints the same line so
//! such a tool sees what is really there. A module counts as built in when
//! porter's directive table has the directive that module is known by, so the
//! line follows the table as directives are added and cannot claim what the
//! configuration loader would refuse.

use super::directives;

/// Modules NGINX builds unless `--without-NAME` says otherwise, each with
/// the directive that shows porter has it.
const DEFAULT_MODULES: &[(&str, &str)] = &[
    ("http_charset_module", "charset"),
    ("http_gzip_module", "gzip"),
    ("http_ssi_module", "ssi"),
    ("http_userid_module", "userid"),
    ("http_access_module", "allow"),
    ("http_auth_basic_module", "auth_basic"),
    ("http_mirror_module", "mirror"),
    ("http_autoindex_module", "autoindex"),
    ("http_geo_module", "geo"),
    ("http_map_module", "map"),
    ("http_split_clients_module", "split_clients"),
    ("http_referer_module", "valid_referers"),
    ("http_rewrite_module", "rewrite"),
    ("http_proxy_module", "proxy_pass"),
    ("http_fastcgi_module", "fastcgi_pass"),
    ("http_uwsgi_module", "uwsgi_pass"),
    ("http_scgi_module", "scgi_pass"),
    ("http_grpc_module", "grpc_pass"),
    ("http_memcached_module", "memcached_pass"),
    ("http_limit_conn_module", "limit_conn"),
    ("http_limit_req_module", "limit_req"),
    ("http_empty_gif_module", "empty_gif"),
    ("http_browser_module", "modern_browser"),
    ("http_upstream_hash_module", "hash"),
    ("http_upstream_ip_hash_module", "ip_hash"),
    ("http_upstream_least_conn_module", "least_conn"),
    ("http_upstream_random_module", "random"),
    ("http_upstream_keepalive_module", "keepalive"),
    ("http_upstream_zone_module", "zone"),
    ("http-cache", "proxy_cache_path"),
    ("pcre", "rewrite"),
];

/// Modules NGINX builds only with `--with-NAME`, each with the directive that
/// shows porter has it.
const OPTIONAL_MODULES: &[(&str, &str)] = &[
    ("threads", "thread_pool"),
    ("http_ssl_module", "ssl_certificate"),
    ("http_v2_module", "http2"),
    ("http_v3_module", "http3"),
    ("http_realip_module", "set_real_ip_from"),
    ("http_addition_module", "add_before_body"),
    ("http_xslt_module", "xslt_stylesheet"),
    ("http_image_filter_module", "image_filter"),
    ("http_geoip_module", "geoip_country"),
    ("http_sub_module", "sub_filter"),
    ("http_dav_module", "dav_methods"),
    ("http_flv_module", "flv"),
    ("http_mp4_module", "mp4"),
    ("http_gunzip_module", "gunzip"),
    ("http_gzip_static_module", "gzip_static"),
    ("http_auth_request_module", "auth_request"),
    ("http_random_index_module", "random_index"),
    ("http_secure_link_module", "secure_link"),
    ("http_degradation_module", "degradation"),
    ("http_slice_module", "slice"),
    ("http_stub_status_module", "stub_status"),
    ("http_perl_module", "perl"),
];

/// The `stream` block's modules NGINX builds with `--with-stream` unless
/// `--without-NAME`, each with the directive that shows porter has it in
/// the stream block.
const STREAM_DEFAULT_MODULES: &[(&str, &str)] = &[
    ("stream_access_module", "allow"),
    ("stream_geo_module", "geo"),
    ("stream_limit_conn_module", "limit_conn"),
    ("stream_map_module", "map"),
    ("stream_pass_module", "pass"),
    ("stream_return_module", "return"),
    ("stream_set_module", "set"),
    ("stream_split_clients_module", "split_clients"),
    ("stream_upstream_hash_module", "hash"),
    ("stream_upstream_least_conn_module", "least_conn"),
    ("stream_upstream_random_module", "random"),
    ("stream_upstream_zone_module", "zone"),
];

/// The stream block's modules NGINX builds only with `--with-NAME`.
const STREAM_OPTIONAL_MODULES: &[(&str, &str)] = &[
    ("stream_ssl_module", "ssl_certificate"),
    ("stream_realip_module", "set_real_ip_from"),
    ("stream_ssl_preread_module", "ssl_preread"),
    ("stream_geoip_module", "geoip_country"),
];

/// Whether the stream block (its servers or upstreams) takes `directive`.
fn has_in_stream(directive: &str) -> bool {
    let ctx = directives::STREAM | directives::SSRV | directives::SUPS;
    directives::all().any(|s| s.name == directive && s.contexts & ctx != 0)
}

/// `--with-stream` and the stream modules' arguments, when porter has the
/// `stream` block.
fn stream_arguments() -> Vec<String> {
    if !has("stream") {
        return Vec::new();
    }
    let with = STREAM_OPTIONAL_MODULES
        .iter()
        .filter(|(_, d)| has_in_stream(d))
        .map(|(m, _)| format!("--with-{m}"));
    let without = STREAM_DEFAULT_MODULES
        .iter()
        .filter(|(_, d)| !has_in_stream(d))
        .map(|(m, _)| format!("--without-{m}"));
    std::iter::once("--with-stream".to_string())
        .chain(with)
        .chain(without)
        .collect()
}

fn has(directive: &str) -> bool {
    directives::find(directive).is_some()
}

/// The `configure arguments:` line's arguments: `--with-…` for each optional
/// module porter has, `--without-…` for each default module it lacks, then
/// `--with-stream` and its modules' (mail is never built, so it is not
/// named at all, as in an NGINX configured without `--with-mail`).
pub fn configure_arguments() -> String {
    let with = OPTIONAL_MODULES
        .iter()
        .filter(|(_, d)| has(d))
        .map(|(m, _)| format!("--with-{m}"));
    let without = DEFAULT_MODULES
        .iter()
        .filter(|(_, d)| !has(d))
        .map(|(m, _)| format!("--without-{m}"));
    with.chain(without)
        .chain(stream_arguments())
        .collect::<Vec<_>>()
        .join(" ")
}

/// True when the TLS module is built in (`-V` then says SNI is supported,
/// as NGINX's does: rustls always offers it).
pub fn has_tls() -> bool {
    has("ssl_certificate")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_follow_the_directive_table() {
        let args = configure_arguments();
        let words: Vec<&str> = args.split(' ').collect();
        assert!(words.contains(&"--with-http_ssl_module"), "{args}");
        assert!(words.contains(&"--with-http_slice_module"), "{args}");
        assert!(!words.contains(&"--with-http_perl_module"), "{args}");
        assert!(!words.contains(&"--without-http_proxy_module"), "{args}");
        assert!(words.contains(&"--without-http_memcached_module"), "{args}");
        // Each module's directive is NGINX's (a typo here would say the
        // module is missing for ever).
        let nginx = include_str!("nginx_directives.txt");
        for (m, d) in DEFAULT_MODULES.iter().chain(OPTIONAL_MODULES) {
            assert!(
                has(d) || nginx.lines().any(|l| l == *d),
                "{m}: `{d}` is not an NGINX directive"
            );
        }
    }
}
