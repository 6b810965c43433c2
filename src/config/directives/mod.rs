//! The directive table: every directive porter accepts, the contexts it may
//! appear in, its arity and the small function that applies it. As NGINX
//! keeps each module's directives beside the module, each area's rows and
//! setters live in a file of their own; [`all`] assembles them (and
//! `docs/directives.md` is kept in step with it by a test). Adding a
//! directive is adding a row to its area (and a line in the docs).
//!
//! | File | Area |
//! |---|---|
//! | `core.rs` | main and `events` contexts |
//! | `http.rs` | HTTP core: servers, locations, timeouts, `return`, `error_page` |
//! | `listen.rs` | `listen`: addresses, port ranges, parameters (options in `config::listen_opts`) |
//! | `logs.rs` | `error_log`, `log_format`, `access_log` |
//! | `static_files.rs` | `root`/`alias`, `index`, `try_files`, `types`, headers |
//! | `aio.rs` | `thread_pool`, `aio`, `sendfile`, `open_file_cache` |
//! | `proxy.rs` | `proxy_pass` and `proxy_*` |
//! | `cache.rs` | `proxy_cache_path`, `proxy_cache*` and the `fastcgi_cache*` twins, one macro per prefix |
//! | `grpc.rs` | `grpc_pass` and `grpc_*` |
//! | `acme.rs` | `acme_issuer { }`, `acme_shared_zone`, `acme_certificate` (automatic HTTPS) |
//! | `ssl.rs` | `ssl_*`: certificates, protocols, ciphers, sessions |
//! | `http2.rs` | `http2`, `http2_*` |
//! | `http3.rs` | `http3`, `http3_*`, `quic_*` |
//! | `rewrite.rs` | `rewrite`, `set`, `if`, `break`, `rewrite_log` |
//! | `map.rs` | `map { }`, `geo { }` |
//! | `upstream.rs` | `upstream { }` |
//! | `access.rs` | `allow`/`deny`, `auth_basic`, `limit_req*`, `limit_conn*` |
//! | `fastcgi.rs` | `fastcgi_pass`, `fastcgi_param` and `fastcgi_*` |
//! | `uwsgi.rs`, `scgi.rs` | `uwsgi_pass`, `uwsgi_modifier1/2`, `scgi_pass` |
//! | `app_rows.rs` | the `uwsgi_*`/`scgi_*` twins of the proxy's settings, `*_param` |
//! | `proxy_extra.rs` | `proxy_method`, `proxy_set_body`, `proxy_ignore_headers`, `proxy_cookie_*`, `proxy_cache_convert_head` |
//! | `tuning.rs` | buffer, temp-path, hash and request-head tuning |
//! | `store.rs` | `proxy_store`, `fastcgi_store`, `uwsgi_store`, `scgi_store` and `*_store_access` |
//! | `resolver.rs` | `resolver`, `resolver_timeout` |
//! | `trailers.rs` | `add_trailer` |
//! | `subrequests.rs` | `auth_request`, `auth_request_set`, `mirror`, `mirror_request_body` |
//! | `referer.rs` | `valid_referers`, `referer_hash_*` |
//! | `secure_link.rs` | `secure_link`, `secure_link_md5`, `secure_link_secret` |
//! | `content.rs` | content modules and body filters: `gzip*`, `gzip_static` |
//! | `media.rs` | `flv`, `mp4`, `mp4_*` |
//! | `userid.rs` | `userid`, `userid_*` (the userid filter's cookie) |
//! | `dav.rs` | `dav_methods`, `dav_access`, `create_full_put_path`, `min_delete_depth` (WebDAV) |
//! | `addition.rs` | `add_before_body`, `add_after_body`, `addition_types` |
//! | `build.rs` | [`Build`]: the walker and the final merge into a [`Config`] |
//!
//! The walker applies a block's plain directives before its nested blocks,
//! so a `server` inherits http-level settings written after it, as NGINX's
//! merge step gives.

use super::error::ConfError;
use super::model::*;
use super::parser::Directive;
use super::value::{parse_flag, parse_size, parse_time};
use crate::cache::policy::CacheValid;
use crate::cache::{Levels, TempPath, ZoneSpec};
use crate::disk::pool::PoolSpec;
use crate::log::format::Escape;
use crate::log::format::LogDest;
use crate::log::{AccessLog, ErrorLogSpec, Level, LogFiles, LogFormat};
use crate::upstream::balance::{self, HashConf, PeerSet, PeerSpec, UpstreamGroup};
use crate::upstream::PeerAddr;
use crate::vars::split_clients::SplitClients;
use crate::vars::template::{self, Template, Var};
use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Contexts, as bit flags.
pub const MAIN: u16 = 1;

/// `events { }`.
pub const EVENTS: u16 = 2;

/// `http { }`.
pub const HTTP: u16 = 4;

/// `server { }`.
pub const SRV: u16 = 8;

/// `location { }`.
pub const LOC: u16 = 16;

/// `upstream { }`.
pub const UPSTREAM: u16 = 32;

/// `if { }` at server level (only the rewrite module's directives).
pub const SIF: u16 = 64;

/// `limit_except { }` in a location (NGINX's `NGX_HTTP_LMT_CONF`).
pub const LMT: u16 = 128;

/// `stream { }`.
pub const STREAM: u16 = 256;

/// `server { }` inside `stream { }`.
pub const SSRV: u16 = 512;

/// `upstream { }` inside `stream { }`.
pub const SUPS: u16 = 1024;

const HSL: u16 = HTTP | SRV | LOC;

/// How many arguments a directive takes.
#[derive(Debug, Clone, Copy)]
pub enum Arity {
    /// Exactly n.
    N(usize),
    /// n or more.
    Min(usize),
    /// Between a and b inclusive.
    Range(usize, usize),
}

impl Arity {
    fn accepts(self, n: usize) -> bool {
        match self {
            Arity::N(k) => n == k,
            Arity::Min(k) => n >= k,
            Arity::Range(a, b) => n >= a && n <= b,
        }
    }
}

type Res = Result<(), String>;

type Setter = fn(&mut Build, &Directive) -> Res;

/// One row of the directive table.
pub struct Spec {
    /// Directive name.
    pub name: &'static str,
    /// Allowed contexts (bit flags).
    pub contexts: u16,
    /// Accepted argument counts.
    pub arity: Arity,
    /// True for block directives (`http { }`).
    pub block: bool,
    set: Setter,
}

const fn d(name: &'static str, contexts: u16, arity: Arity, set: Setter) -> Spec {
    Spec {
        name,
        contexts,
        arity,
        block: false,
        set,
    }
}

const fn blk(name: &'static str, contexts: u16, arity: Arity, set: Setter) -> Spec {
    Spec {
        name,
        contexts,
        arity,
        block: true,
        set,
    }
}

fn ignore(_: &mut Build, _: &Directive) -> Res {
    Ok(())
}

macro_rules! loc_flag {
    ($field:ident) => {
        |b: &mut Build, d: &Directive| {
            let v = flag(d)?;
            set_once(&mut b.loc().$field, v, d)
        }
    };
}
macro_rules! loc_time {
    ($field:ident) => {
        |b: &mut Build, d: &Directive| {
            let v = time(d, &d.args[0])?;
            set_once(&mut b.loc().$field, v, d)
        }
    };
}
macro_rules! loc_size {
    ($field:ident) => {
        |b: &mut Build, d: &Directive| {
            let v = size(d, &d.args[0])?;
            set_once(&mut b.loc().$field, v, d)
        }
    };
}

mod access;
mod acme;
mod addition;
mod aio;
mod app_rows;
mod build;
mod cache;
mod content;
mod core;
mod dav;
mod fastcgi;
mod grpc;
mod http;
mod http2;
mod http3;
mod internals;
mod limit_except;
mod listen;
mod logs;
mod map;
mod media;
mod proxy;
mod proxy_extra;
mod proxy_socket;
mod proxy_ssl;
mod realip;
mod referer;
mod resolver;
mod rewrite;
mod scgi;
mod secure_link;
mod ssi;
mod ssl;
mod static_files;
mod store;
mod stream;
mod stream_ssl;
mod sub_filter;
mod subrequests;
mod trailers;
mod tuning;
mod upstream;
mod userid;
mod uwsgi;

pub use build::Build;
use build::{LocB, ServerB, NESTED};
pub use listen::parse_listen_addr;
pub(crate) use proxy_ssl::default_ciphers as default_proxy_ciphers;
use rewrite::OpB;
use upstream::resolve_upstream;

/// The areas' rows, in lookup order: where two rows share a name (`server`,
/// `keepalive_timeout`, `keepalive_requests`), the `upstream { }` one
/// comes last.
static AREAS: &[&[Spec]] = &[
    core::ROWS,
    http::ROWS,
    http2::ROWS,
    http3::ROWS,
    logs::ROWS,
    limit_except::ROWS,
    static_files::ROWS,
    aio::ROWS,
    proxy::ROWS,
    proxy_extra::ROWS,
    proxy_socket::ROWS,
    proxy_ssl::ROWS,
    store::ROWS,
    grpc::ROWS,
    grpc::COMMON,
    grpc::SSL,
    fastcgi::ROWS,
    fastcgi::COMMON,
    fastcgi::CGI,
    uwsgi::ROWS,
    uwsgi::COMMON,
    uwsgi::CGI,
    uwsgi::SSL,
    scgi::ROWS,
    scgi::COMMON,
    scgi::CGI,
    cache::PROXY_ROWS,
    cache::FASTCGI_ROWS,
    cache::UWSGI_ROWS,
    cache::SCGI_ROWS,
    ssl::ROWS,
    tuning::ROWS,
    internals::ROWS,
    rewrite::ROWS,
    map::ROWS,
    content::ROWS,
    media::ROWS,
    sub_filter::ROWS,
    addition::ROWS,
    dav::ROWS,
    ssi::ROWS,
    upstream::ROWS,
    access::ROWS,
    realip::ROWS,
    referer::ROWS,
    secure_link::ROWS,
    resolver::ROWS,
    trailers::ROWS,
    subrequests::ROWS,
    acme::ROWS,
    userid::ROWS,
    stream::ROWS,
];

/// Every directive porter accepts.
pub fn all() -> impl Iterator<Item = &'static Spec> {
    AREAS.iter().flat_map(|rows| rows.iter())
}

/// Looks a directive up by name.
pub fn find(name: &str) -> Option<&'static Spec> {
    all().find(|s| s.name == name)
}

/// Looks a directive up by name as written in context `ctx`: the row
/// allowed there (`server` in `upstream { }` is not the `server` block),
/// else the first row of that name (which then reports "not allowed here").
pub fn find_in(name: &str, ctx: u16) -> Option<&'static Spec> {
    all()
        .find(|s| s.name == name && s.contexts & ctx != 0)
        .or_else(|| find(name))
}

/// NGINX's `[LEVEL] WHAT in FILE:LINE` line while the configuration
/// loads, on the standard error (`porter -t` and start-up alike).
fn say_at(level: &str, file: &Path, line: u32, what: &str) {
    eprintln!("porter: [{level}] {what} in {}:{line}", file.display());
}

/// A `[warn]` line for directive `d`.
fn warn(d: &Directive, what: &str) {
    say_at("warn", &d.file, d.line, what);
}

/// A `[notice]` line for directive `d`.
fn notice(d: &Directive, what: &str) {
    say_at("notice", &d.file, d.line, what);
}

fn dup(d: &Directive) -> String {
    format!("\"{}\" directive is duplicate", d.name)
}

fn invalid(d: &Directive) -> String {
    format!("\"{}\" directive invalid value", d.name)
}

fn set_once<T>(slot: &mut Option<T>, v: T, d: &Directive) -> Res {
    if slot.is_some() {
        return Err(dup(d));
    }
    *slot = Some(v);
    Ok(())
}

fn flag(d: &Directive) -> Result<bool, String> {
    parse_flag(&d.args[0]).ok_or_else(|| {
        format!(
            "invalid value \"{}\" in \"{}\" directive, it must be \"on\" or \"off\"",
            d.args[0], d.name
        )
    })
}

fn time(d: &Directive, s: &str) -> Result<Duration, String> {
    parse_time(s).ok_or_else(|| invalid(d))
}

fn size(d: &Directive, s: &str) -> Result<u64, String> {
    parse_size(s).ok_or_else(|| invalid(d))
}

fn number(d: &Directive, s: &str) -> Result<u64, String> {
    s.parse::<u64>()
        .map_err(|_| format!("invalid value \"{s}\" in \"{}\" directive", d.name))
}

fn template(s: &str) -> Result<Template, String> {
    Template::compile(s).map_err(|e| e.0)
}

/// `http { access_log off; HTTP }` loaded from text, errors to stderr:
/// what the directive files' unit tests parse (`http2.rs`, `http3.rs`).
#[cfg(test)]
pub(super) fn parse_http_for_test(
    http: &str,
) -> Result<crate::config::Config, crate::config::error::ConfError> {
    use std::path::{Path, PathBuf};
    let text = format!("error_log stderr; http {{ access_log off; {http} }}");
    let mut p = crate::config::parser::Parser::new(PathBuf::from("/tmp"));
    let dirs = p.parse_str(&text, Path::new("t.conf"))?;
    let mut b = Build::new(PathBuf::from("/tmp"));
    b.walk(&dirs)?;
    b.finish(Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_forms() {
        assert_eq!(
            parse_listen_addr("8000").unwrap(),
            vec!["0.0.0.0:8000".parse().unwrap()]
        );
        assert_eq!(
            parse_listen_addr("127.0.0.1:81").unwrap(),
            vec!["127.0.0.1:81".parse().unwrap()]
        );
        assert_eq!(
            parse_listen_addr("*:82").unwrap(),
            vec!["0.0.0.0:82".parse().unwrap()]
        );
        assert_eq!(
            parse_listen_addr("[::1]:83").unwrap(),
            vec!["[::1]:83".parse().unwrap()]
        );
        assert_eq!(
            parse_listen_addr("127.0.0.1").unwrap(),
            vec!["127.0.0.1:80".parse().unwrap()]
        );
        assert_eq!(
            parse_listen_addr("80x").unwrap_err(),
            "host not found in \"80x\" of the \"listen\" directive"
        );
        assert_eq!(
            parse_listen_addr("1.2.3.4:0").unwrap_err(),
            "invalid port in \"1.2.3.4:0\" of the \"listen\" directive"
        );
    }

    #[test]
    fn table_names_are_unique_per_context() {
        let table: Vec<&Spec> = all().collect();
        for (i, a) in table.iter().enumerate() {
            for b in &table[i + 1..] {
                assert!(
                    a.name != b.name || a.contexts & b.contexts == 0,
                    "`{}` twice in one context",
                    a.name
                );
            }
        }
        assert_eq!(
            find_in("server", UPSTREAM).unwrap().contexts,
            UPSTREAM | SUPS
        );
        assert_eq!(find_in("server", STREAM).unwrap().contexts, STREAM);
        assert_eq!(find_in("server", HTTP).unwrap().contexts, HTTP);
    }

    #[test]
    fn docs_list_every_directive() {
        let docs = include_str!("../../../docs/directives.md");
        for s in all() {
            assert!(
                docs.contains(&format!("### `{}`", s.name)),
                "docs/directives.md lacks `{}`",
                s.name
            );
        }
        for line in docs.lines() {
            if let Some(rest) = line.strip_prefix("### `") {
                let name = rest.trim_end_matches('`');
                assert!(
                    find(name).is_some(),
                    "docs/directives.md documents unknown `{name}`"
                );
            }
        }
    }
}
