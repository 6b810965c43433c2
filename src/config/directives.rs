//! The directive table: every directive porter accepts, the contexts it may
//! appear in, its arity and the small function that applies it. Adding a
//! directive is adding a row here (and a line in `docs/directives.md`, which
//! a test keeps in step with [`TABLE`]).
//!
//! The walker applies a block's plain directives before its nested blocks,
//! so a `server` inherits http-level settings written after it, as NGINX's
//! merge step gives.

use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::model::*;
use super::parser::{ConfError, Directive};
use super::split_clients::SplitClients;
use super::template::{self, Template, Var};
use super::value::{parse_flag, parse_size, parse_time};
use crate::cache::policy::CacheValid;
use crate::cache::{Levels, TempPath, ZoneSpec};
use crate::disk::pool::PoolSpec;
use crate::disk::uring::UringSpec;
use crate::log::format::Escape;
use crate::log::{AccessLog, ErrorLogSpec, Level, LogFiles, LogFormat};
use crate::upstream::balance::{self, HashConf, PeerSet, PeerSpec, UpstreamGroup};

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

/// Every directive porter accepts.
pub static TABLE: &[Spec] = &[
    // main
    d("daemon", MAIN, Arity::N(1), |b, d| {
        let v = flag(d)?;
        set_once(&mut b.daemon, v, d)
    }),
    d("master_process", MAIN, Arity::N(1), |_, d| {
        flag(d).map(|_| ())
    }),
    d("worker_processes", MAIN, Arity::N(1), set_worker_processes),
    d("worker_rlimit_nofile", MAIN, Arity::N(1), |b, d| {
        let n = number(d, &d.args[0])?;
        set_once(&mut b.rlimit_nofile, n, d)
    }),
    d("worker_shutdown_timeout", MAIN, Arity::N(1), |b, d| {
        let t = time(d, &d.args[0])?;
        set_once(&mut b.shutdown_timeout, t, d)
    }),
    d("user", MAIN, Arity::Range(1, 2), |b, d| {
        let u = (d.args[0].clone(), d.args.get(1).cloned());
        set_once(&mut b.user, u, d)
    }),
    d("pid", MAIN, Arity::N(1), |b, d| {
        let p = b.full_path(&d.args[0]);
        set_once(&mut b.pid, p, d)
    }),
    d("error_log", MAIN, Arity::Range(1, 2), set_error_log),
    d("timer_resolution", MAIN, Arity::N(1), |_, d| {
        time(d, &d.args[0]).map(|_| ())
    }),
    d("working_directory", MAIN, Arity::N(1), ignore),
    blk("events", MAIN, Arity::N(0), |b, d| {
        if b.events_seen {
            return Err(dup(d));
        }
        b.events_seen = true;
        b.walk_nested(d, EVENTS)
    }),
    // events
    d("worker_connections", EVENTS, Arity::N(1), |b, d| {
        let n = number(d, &d.args[0])? as usize;
        set_once(&mut b.worker_connections, n, d)
    }),
    d("accept_mutex", EVENTS, Arity::N(1), |b, d| {
        let v = flag(d)?;
        set_once(&mut b.accept_mutex, v, d)
    }),
    d("accept_mutex_delay", EVENTS, Arity::N(1), |_, d| {
        time(d, &d.args[0]).map(|_| ())
    }),
    d("multi_accept", EVENTS, Arity::N(1), |_, d| {
        flag(d).map(|_| ())
    }),
    d("use", EVENTS, Arity::N(1), |_, d| {
        match d.args[0].as_str() {
            "epoll" => Ok(()),
            other => Err(format!("invalid event type \"{other}\"")),
        }
    }),
    // http
    blk("http", MAIN, Arity::N(0), |b, d| {
        if b.http_seen {
            return Err(dup(d));
        }
        b.http_seen = true;
        b.walk_nested(d, HTTP)
    }),
    d("log_format", HTTP, Arity::Min(2), set_log_format),
    blk("split_clients", HTTP, Arity::N(2), set_split_clients),
    // --- proxy cache: what a location caches and how (the zones themselves
    // are `proxy_cache_path`).
    d("proxy_cache", HSL, Arity::N(1), |b, d| {
        let v = match d.args[0].as_str() {
            "off" => None,
            name => Some(template(name)?),
        };
        set_once(&mut b.loc().proxy_cache, v, d)
    }),
    d("proxy_cache_key", HSL, Arity::N(1), |b, d| {
        let t = template(&d.args[0])?;
        set_once(&mut b.loc().proxy_cache_key, Some(t), d)
    }),
    d("proxy_cache_methods", HSL, Arity::Min(1), |b, d| {
        let mut m = CacheMethods::default();
        for a in &d.args {
            match a.as_str() {
                "GET" | "HEAD" => {}
                "POST" => m.post = true,
                _ => return Err(format!("invalid value \"{a}\"")),
            }
        }
        set_once(&mut b.loc().proxy_cache_methods, m, d)
    }),
    d("proxy_cache_min_uses", HSL, Arity::N(1), |b, d| {
        let n = d.args[0]
            .parse::<u64>()
            .map_err(|_| format!("\"{}\" directive invalid number", d.name))?;
        set_once(&mut b.loc().proxy_cache_min_uses, n, d)
    }),
    d("proxy_cache_bypass", HSL, Arity::Min(1), |b, d| {
        push_predicates(&mut b.loc().proxy_cache_bypass, d)
    }),
    d("proxy_no_cache", HSL, Arity::Min(1), |b, d| {
        push_predicates(&mut b.loc().proxy_no_cache, d)
    }),
    d(
        "proxy_cache_lock",
        HSL,
        Arity::N(1),
        loc_flag!(proxy_cache_lock),
    ),
    d(
        "proxy_cache_lock_timeout",
        HSL,
        Arity::N(1),
        loc_time!(proxy_cache_lock_timeout),
    ),
    d(
        "proxy_cache_lock_age",
        HSL,
        Arity::N(1),
        loc_time!(proxy_cache_lock_age),
    ),
    d("proxy_cache_use_stale", HSL, Arity::Min(1), |b, d| {
        let mut bits = 0u16;
        for a in &d.args {
            bits |= match a.as_str() {
                "off" => 0,
                "error" => STALE_ERROR,
                "timeout" => STALE_TIMEOUT,
                "invalid_header" => STALE_INVALID_HEADER,
                "updating" => STALE_UPDATING,
                "http_500" => STALE_500,
                "http_502" => STALE_502,
                "http_503" => STALE_503,
                "http_504" => STALE_504,
                "http_403" => STALE_403,
                "http_404" => STALE_404,
                "http_429" => STALE_429,
                _ => return Err(format!("invalid value \"{a}\"")),
            };
        }
        set_once(&mut b.loc().proxy_cache_use_stale, bits, d)
    }),
    d(
        "proxy_cache_background_update",
        HSL,
        Arity::N(1),
        loc_flag!(proxy_cache_background_update),
    ),
    d(
        "proxy_cache_revalidate",
        HSL,
        Arity::N(1),
        loc_flag!(proxy_cache_revalidate),
    ),
    d("proxy_cache_purge", HSL, Arity::Min(1), set_cache_purge),
    // --- end of proxy cache policy
    blk("server", HTTP, Arity::N(0), set_server),
    d("listen", SRV, Arity::Min(1), set_listen),
    d("server_name", SRV, Arity::Min(1), set_server_name),
    blk("location", SRV | LOC, Arity::Range(1, 2), set_location),
    blk("types", HSL, Arity::N(0), set_types),
    d("default_type", HSL, Arity::N(1), |b, d| {
        let v = d.args[0].clone();
        set_once(&mut b.loc().default_type, v, d)
    }),
    d("root", HSL, Arity::N(1), set_root),
    d("alias", LOC, Arity::N(1), set_root),
    d("index", HSL, Arity::Min(1), set_index),
    d("try_files", SRV | LOC, Arity::Min(2), set_try_files),
    d("internal", LOC, Arity::N(0), |b, _| {
        b.location().internal = true;
        Ok(())
    }),
    d("return", SRV | LOC, Arity::Range(1, 2), set_return),
    d("error_page", HSL, Arity::Min(2), set_error_page),
    d("add_header", HSL, Arity::Range(2, 3), set_add_header),
    d("expires", HSL, Arity::Range(1, 2), set_expires),
    d("charset", HSL, Arity::N(1), |b, d| {
        let v = if d.args[0] == "off" {
            None
        } else {
            Some(d.args[0].clone())
        };
        set_once(&mut b.loc().charset, v, d)
    }),
    d("access_log", HSL, Arity::Range(1, 4), set_access_log),
    d("log_not_found", HSL, Arity::N(1), loc_flag!(log_not_found)),
    d("sendfile", HSL, Arity::N(1), loc_flag!(sendfile)),
    d(
        "sendfile_max_chunk",
        HSL,
        Arity::N(1),
        loc_size!(sendfile_max_chunk),
    ),
    d("tcp_nodelay", HSL, Arity::N(1), loc_flag!(tcp_nodelay)),
    d("tcp_nopush", HSL, Arity::N(1), |_, d| flag(d).map(|_| ())),
    d(
        "keepalive_timeout",
        HSL,
        Arity::Range(1, 2),
        set_keepalive_timeout,
    ),
    d("keepalive_requests", HSL, Arity::N(1), |b, d| {
        let n = number(d, &d.args[0])?;
        set_once(&mut b.loc().keepalive_requests, n, d)
    }),
    d("send_timeout", HSL, Arity::N(1), loc_time!(send_timeout)),
    d(
        "client_header_timeout",
        HTTP | SRV,
        Arity::N(1),
        loc_time!(client_header_timeout),
    ),
    d("client_body_timeout", HSL, Arity::N(1), |_, d| {
        time(d, &d.args[0]).map(|_| ())
    }),
    d(
        "client_header_buffer_size",
        HTTP | SRV,
        Arity::N(1),
        |_, d| size(d, &d.args[0]).map(|_| ()),
    ),
    d(
        "large_client_header_buffers",
        HTTP | SRV,
        Arity::N(2),
        |b, d| {
            let n = number(d, &d.args[0])? as usize;
            let s = size(d, &d.args[1])? as usize;
            if n == 0 || s == 0 {
                return Err(invalid(d));
            }
            set_once(&mut b.loc().large_client_header_buffers, (n, s), d)
        },
    ),
    d(
        "client_max_body_size",
        HSL,
        Arity::N(1),
        loc_size!(client_max_body_size),
    ),
    d("max_ranges", HSL, Arity::N(1), |b, d| {
        let n = number(d, &d.args[0])? as usize;
        set_once(&mut b.loc().max_ranges, Some(n), d)
    }),
    d("if_modified_since", HSL, Arity::N(1), |b, d| {
        let m = match d.args[0].as_str() {
            "off" => ImsMode::Off,
            "exact" => ImsMode::Exact,
            "before" => ImsMode::Before,
            v => return Err(format!("invalid value \"{v}\" in \"{}\" directive", d.name)),
        };
        set_once(&mut b.loc().if_modified_since, m, d)
    }),
    d("etag", HSL, Arity::N(1), loc_flag!(etag)),
    d("server_tokens", HSL, Arity::N(1), loc_flag!(server_tokens)),
    d("msie_padding", HSL, Arity::N(1), loc_flag!(msie_padding)),
    d(
        "absolute_redirect",
        HSL,
        Arity::N(1),
        loc_flag!(absolute_redirect),
    ),
    d(
        "port_in_redirect",
        HSL,
        Arity::N(1),
        loc_flag!(port_in_redirect),
    ),
    d(
        "server_name_in_redirect",
        HSL,
        Arity::N(1),
        loc_flag!(server_name_in_redirect),
    ),
    d(
        "disable_symlinks",
        HSL,
        Arity::N(1),
        loc_flag!(disable_symlinks),
    ),
    d("stub_status", LOC, Arity::Range(0, 1), |b, _| {
        b.location().handler = Handler::StubStatus;
        Ok(())
    }),
    d("thread_pool", MAIN, Arity::Range(2, 3), set_thread_pool),
    d("aio", HSL, Arity::N(1), set_aio),
    d("aio_uring", MAIN, Arity::Range(1, 2), set_aio_uring),
    d("aio_write", HSL, Arity::N(1), loc_flag!(aio_write)),
    d("aio_fast_path", HSL, Arity::N(1), loc_flag!(aio_fast_path)),
    d(
        "open_file_cache",
        HSL,
        Arity::Range(1, 2),
        set_open_file_cache,
    ),
    d(
        "open_file_cache_valid",
        HSL,
        Arity::N(1),
        loc_time!(open_file_cache_valid),
    ),
    d("open_file_cache_min_uses", HSL, Arity::N(1), |b, d| {
        let n = number(d, &d.args[0])?;
        set_once(&mut b.loc().open_file_cache_min_uses, n, d)
    }),
    d(
        "open_file_cache_errors",
        HSL,
        Arity::N(1),
        loc_flag!(open_file_cache_errors),
    ),
    d("porter_metrics", LOC, Arity::N(0), |b, _| {
        b.location().handler = Handler::Metrics;
        Ok(())
    }),
    d("types_hash_max_size", HTTP | SRV | LOC, Arity::N(1), ignore),
    d(
        "types_hash_bucket_size",
        HTTP | SRV | LOC,
        Arity::N(1),
        ignore,
    ),
    d("server_names_hash_max_size", HTTP, Arity::N(1), ignore),
    d("server_names_hash_bucket_size", HTTP, Arity::N(1), ignore),
    d("reset_timedout_connection", HSL, Arity::N(1), |_, d| {
        flag(d).map(|_| ())
    }), // proxy cache store (src/cache): zones, temp path, validity rules.
    d(
        "proxy_cache_path",
        HTTP,
        Arity::Min(2),
        set_proxy_cache_path,
    ),
    d(
        "proxy_temp_path",
        HSL,
        Arity::Range(1, 4),
        set_proxy_temp_path,
    ),
    d(
        "proxy_cache_valid",
        HSL,
        Arity::Min(1),
        set_proxy_cache_valid,
    ),
    // ---- reverse proxy: upstream groups and proxy_* (src/upstream,
    // src/handlers/proxy.rs). `server`, `keepalive_timeout` and
    // `keepalive_requests` inside `upstream { }` are other directives than
    // the same names elsewhere: [`find_in`] picks the row by context.
    blk("upstream", HTTP, Arity::N(1), set_upstream),
    d("server", UPSTREAM, Arity::Min(1), set_upstream_server),
    d("keepalive", UPSTREAM, Arity::N(1), |b, d| {
        let n = match d.args[0].parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => {
                return Err(format!(
                    "invalid value \"{}\" in \"{}\" directive",
                    d.args[0], d.name
                ))
            }
        };
        set_once(&mut b.upstream().keepalive, n, d)
    }),
    d("keepalive_timeout", UPSTREAM, Arity::N(1), |b, d| {
        let t = time(d, &d.args[0])?;
        set_once(&mut b.upstream().keepalive_timeout, t, d)
    }),
    d("keepalive_requests", UPSTREAM, Arity::N(1), |b, d| {
        let n = number(d, &d.args[0])?;
        set_once(&mut b.upstream().keepalive_requests, n, d)
    }),
    d("hash", UPSTREAM, Arity::Range(1, 2), set_upstream_hash),
    d("proxy_pass", LOC, Arity::N(1), set_proxy_pass),
    d("proxy_set_header", HSL, Arity::N(2), |b, d| {
        let v = template(&d.args[1])?;
        let slot = &mut b.loc().proxy_set_header;
        let mut list = slot.as_deref().cloned().unwrap_or_default();
        list.push((d.args[0].clone(), v));
        *slot = Some(Arc::new(list));
        Ok(())
    }),
    d("proxy_http_version", HSL, Arity::N(1), |b, d| {
        let v = match d.args[0].as_str() {
            "1.0" => false,
            "1.1" => true,
            v => return Err(format!("invalid value \"{v}\"")),
        };
        set_once(&mut b.loc().proxy_http11, v, d)
    }),
    d(
        "proxy_connect_timeout",
        HSL,
        Arity::N(1),
        loc_time!(proxy_connect_timeout),
    ),
    d(
        "proxy_read_timeout",
        HSL,
        Arity::N(1),
        loc_time!(proxy_read_timeout),
    ),
    d(
        "proxy_send_timeout",
        HSL,
        Arity::N(1),
        loc_time!(proxy_send_timeout),
    ),
    d("proxy_next_upstream", HSL, Arity::Min(1), |b, d| {
        let v = crate::upstream::NextUpstream::parse(&d.args)?;
        set_once(&mut b.loc().proxy_next_upstream, v, d)
    }),
    d("proxy_next_upstream_tries", HSL, Arity::N(1), |b, d| {
        let n = number(d, &d.args[0])?;
        set_once(&mut b.loc().proxy_next_upstream_tries, n, d)
    }),
    d(
        "proxy_next_upstream_timeout",
        HSL,
        Arity::N(1),
        loc_time!(proxy_next_upstream_timeout),
    ),
    d(
        "proxy_buffering",
        HSL,
        Arity::N(1),
        loc_flag!(proxy_buffering),
    ),
    d(
        "proxy_pass_request_headers",
        HSL,
        Arity::N(1),
        loc_flag!(proxy_pass_request_headers),
    ),
    d(
        "proxy_pass_request_body",
        HSL,
        Arity::N(1),
        loc_flag!(proxy_pass_request_body),
    ),
    d("proxy_hide_header", HSL, Arity::N(1), |b, d| {
        let slot = &mut b.loc().proxy_hide_header;
        let mut list = slot.as_deref().cloned().unwrap_or_default();
        list.push(d.args[0].to_ascii_lowercase());
        *slot = Some(Arc::new(list));
        Ok(())
    }),
    d("proxy_pass_header", HSL, Arity::N(1), |b, d| {
        let slot = &mut b.loc().proxy_pass_header;
        let mut list = slot.as_deref().cloned().unwrap_or_default();
        list.push(d.args[0].to_ascii_lowercase());
        *slot = Some(Arc::new(list));
        Ok(())
    }),
    d(
        "proxy_intercept_errors",
        HSL,
        Arity::N(1),
        loc_flag!(proxy_intercept_errors),
    ),
    d(
        "proxy_buffer_size",
        HSL,
        Arity::N(1),
        loc_size!(proxy_buffer_size),
    ),
    d(
        "proxy_redirect",
        HSL,
        Arity::Range(1, 2),
        set_proxy_redirect,
    ),
    // ---- end of reverse proxy rows
];

/// Looks a directive up by name.
pub fn find(name: &str) -> Option<&'static Spec> {
    TABLE.iter().find(|s| s.name == name)
}

/// Looks a directive up by name as written in context `ctx`: the row
/// allowed there (`server` in `upstream { }` is not the `server` block),
/// else the first row of that name (which then reports "not allowed here").
pub fn find_in(name: &str, ctx: u16) -> Option<&'static Spec> {
    TABLE
        .iter()
        .find(|s| s.name == name && s.contexts & ctx != 0)
        .or_else(|| find(name))
}

/// Config under construction.
pub struct Build {
    prefix: PathBuf,
    is_root: bool,
    ctx: u16,
    events_seen: bool,
    http_seen: bool,
    daemon: Option<bool>,
    worker_processes: Option<usize>,
    worker_connections: Option<usize>,
    rlimit_nofile: Option<u64>,
    shutdown_timeout: Option<Duration>,
    accept_mutex: Option<bool>,
    user: Option<(String, Option<String>)>,
    pid: Option<PathBuf>,
    error_log: Vec<ErrorLogSpec>,
    http: LocBuilder,
    formats: HashMap<String, Arc<LogFormat>>,
    logs: LogFiles,
    servers: Vec<ServerB>,
    cur_loc: Option<usize>,
    pools: Vec<PoolSpec>,
    default_pool_used: bool,
    aio_on_at: Option<String>,
    uring: Option<UringSpec>,
    cache: CacheBuild,
    upstreams: Vec<Arc<UpstreamGroup>>,
    implicit_upstreams: HashMap<String, Arc<UpstreamGroup>>,
    cur_upstream: Option<UpstreamB>,
}

struct ListenB {
    addr: SocketAddr,
    default_server: bool,
    backlog: i32,
}

struct ServerB {
    loc: LocBuilder,
    names: Vec<ServerName>,
    primary: Option<String>,
    listens: Vec<ListenB>,
    ret: Option<Return>,
    locations: Vec<LocB>,
}

struct LocB {
    path: String,
    kind: LocationKind,
    internal: bool,
    ret: Option<Return>,
    handler: Handler,
    loc: LocBuilder,
    parent: Option<usize>,
}

impl Build {
    /// A new build; `prefix` resolves relative paths.
    pub fn new(prefix: PathBuf) -> Build {
        template::reset_defined();
        Build {
            prefix,
            is_root: rustix::process::geteuid().is_root(),
            ctx: MAIN,
            events_seen: false,
            http_seen: false,
            daemon: None,
            worker_processes: None,
            worker_connections: None,
            rlimit_nofile: None,
            shutdown_timeout: None,
            accept_mutex: None,
            user: None,
            pid: None,
            error_log: Vec::new(),
            http: LocBuilder::default(),
            formats: HashMap::from([("combined".to_string(), LogFormat::combined())]),
            logs: LogFiles::default(),
            servers: Vec::new(),
            cur_loc: None,
            pools: Vec::new(),
            default_pool_used: false,
            aio_on_at: None,
            uring: None,
            cache: CacheBuild::default(),
            upstreams: Vec::new(),
            implicit_upstreams: HashMap::new(),
            cur_upstream: None,
        }
    }

    fn full_path(&self, p: &str) -> PathBuf {
        let p = Path::new(p);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.prefix.join(p)
        }
    }

    /// The location-level settings of the current level.
    fn loc(&mut self) -> &mut LocBuilder {
        match self.ctx {
            HTTP => &mut self.http,
            SRV => &mut self.servers.last_mut().expect("server").loc,
            _ => {
                let i = self.cur_loc.expect("location");
                &mut self.servers.last_mut().expect("server").locations[i].loc
            }
        }
    }

    fn server(&mut self) -> &mut ServerB {
        self.servers.last_mut().expect("server")
    }

    fn upstream(&mut self) -> &mut UpstreamB {
        self.cur_upstream.as_mut().expect("upstream")
    }

    fn location(&mut self) -> &mut LocB {
        let i = self.cur_loc.expect("location");
        &mut self.servers.last_mut().expect("server").locations[i]
    }

    /// Applies `dirs` in the current context: plain directives first, then
    /// nested blocks that open a new level.
    pub fn walk(&mut self, dirs: &[Directive]) -> Result<(), ConfError> {
        // Pass 0 defines variables (`split_clients`), so any directive of
        // the block may use them wherever the definition is written, as
        // NGINX resolves variables after parsing; pass 1 applies the plain
        // directives, pass 2 the blocks that open a new level.
        for pass in 0..3 {
            for dir in dirs {
                let nests = matches!(dir.name.as_str(), "events" | "http" | "server" | "location");
                let defines = dir.name == "split_clients";
                let my_pass = if defines {
                    0
                } else if nests {
                    2
                } else {
                    1
                };
                if pass != my_pass {
                    continue;
                }
                self.apply(dir)?;
            }
        }
        Ok(())
    }

    fn apply(&mut self, dir: &Directive) -> Result<(), ConfError> {
        let at = |m: String| dir.error(m);
        let spec = find_in(&dir.name, self.ctx)
            .ok_or_else(|| at(format!("unknown directive \"{}\"", dir.name)))?;
        if spec.contexts & self.ctx == 0 {
            return Err(at(format!(
                "\"{}\" directive is not allowed here",
                dir.name
            )));
        }
        if spec.block && dir.block.is_none() {
            return Err(at(format!(
                "directive \"{}\" has no opening \"{{\"",
                dir.name
            )));
        }
        if !spec.block && dir.block.is_some() {
            return Err(at(format!(
                "directive \"{}\" is not terminated by \";\"",
                dir.name
            )));
        }
        if !spec.arity.accepts(dir.args.len()) {
            return Err(at(format!(
                "invalid number of arguments in \"{}\" directive",
                dir.name
            )));
        }
        match (spec.set)(self, dir) {
            Ok(()) => Ok(()),
            Err(m) => match NESTED.with(|n| n.borrow_mut().take()) {
                Some(inner) => Err(inner),
                None => Err(at(m)),
            },
        }
    }

    /// Applies `-g` directives (main context), before the file as NGINX does.
    pub fn apply_globals(&mut self, dirs: &[Directive]) -> Result<(), ConfError> {
        self.walk(dirs)
    }

    /// `-e`: the error log used when the config names none (instead of
    /// `logs/error.log`).
    pub fn override_error_log(&mut self, target: &str) -> Res {
        if self.error_log.is_empty() {
            let path = if target == "stderr" {
                PathBuf::from("stderr")
            } else {
                self.full_path(target)
            };
            let file = self.logs.get(&path)?;
            self.error_log.push(ErrorLogSpec {
                file,
                level: Level::Error,
            });
        }
        Ok(())
    }

    /// Resolves everything into a [`Config`].
    pub fn finish(mut self, files: Vec<PathBuf>) -> Result<Config, ConfError> {
        let plain = |m: String| ConfError {
            message: m,
            file: None,
            line: 0,
        };
        if self.error_log.is_empty() {
            let path = self.prefix.join("logs/error.log");
            let file = self.logs.get(&path).map_err(plain)?;
            self.error_log.push(ErrorLogSpec {
                file,
                level: Level::Error,
            });
        }
        if self.http.access_log.is_none() && self.http_seen {
            let path = self.prefix.join("logs/access.log");
            let file = self.logs.get(&path).map_err(plain)?;
            self.http.access_log = Some(Arc::new(vec![AccessLog {
                file,
                format: LogFormat::combined(),
            }]));
        }
        let workers = self.worker_processes.unwrap_or(1);
        let main = MainConf {
            daemon: self.daemon.unwrap_or(true),
            worker_processes: workers,
            worker_connections: self.worker_connections.unwrap_or(512),
            worker_rlimit_nofile: self.rlimit_nofile,
            worker_shutdown_timeout: self.shutdown_timeout,
            accept_mutex: self.accept_mutex.unwrap_or(false),
            user: self.user.take(),
            pid: Some(
                self.pid
                    .take()
                    .unwrap_or_else(|| self.prefix.join("logs/porter.pid")),
            ),
            error_log: std::mem::take(&mut self.error_log),
            thread_pools: {
                let mut v = std::mem::take(&mut self.pools);
                if self.default_pool_used && !v.iter().any(|p| p.name == "default") {
                    v.push(PoolSpec::default_pool());
                }
                v
            },
            aio_on_at: self.aio_on_at.take(),
            aio_uring: self.uring.unwrap_or_default(),
        };

        let mut servers = Vec::new();
        let mut groups: Vec<(ListenGroup, bool)> = Vec::new();
        let default_port = if self.is_root { 80 } else { 8000 };
        for mut sb in std::mem::take(&mut self.servers) {
            sb.loc.inherit(&self.http);
            let base_s = sb.loc.finish();
            let limits = HeadLimitsConf {
                max_line: base_s.large_client_header_buffers.1,
                max_head: base_s.large_client_header_buffers.0
                    * base_s.large_client_header_buffers.1,
                header_timeout: base_s.client_header_timeout,
            };
            let mut exact = HashMap::new();
            let mut prefixes = Vec::new();
            let mut merged: Vec<LocBuilder> = Vec::with_capacity(sb.locations.len());
            for lb in &sb.locations {
                let mut b = lb.loc.clone();
                match lb.parent {
                    Some(p) => b.inherit(&merged[p]),
                    None => b.inherit(&sb.loc),
                }
                let lc = Arc::new(LocationConf {
                    path: lb.path.clone(),
                    kind: lb.kind,
                    internal: lb.internal,
                    ret: lb.ret.clone(),
                    handler: lb.handler.clone(),
                    s: b.finish(),
                });
                merged.push(b);
                match lb.kind {
                    LocationKind::Exact => {
                        exact.insert(lb.path.clone(), lc);
                    }
                    _ => prefixes.push(lc),
                }
            }
            prefixes.sort_by_key(|l| std::cmp::Reverse(l.path.len()));
            let primary = sb.primary.clone().unwrap_or_default();
            let server = Arc::new(ServerConf {
                names: sb.names.clone(),
                primary_name: primary,
                exact,
                prefixes,
                base: Arc::new(LocationConf {
                    path: String::new(),
                    kind: LocationKind::Server,
                    internal: false,
                    ret: None,
                    handler: Handler::Static,
                    s: base_s,
                }),
                server_return: sb.ret.clone(),
                limits,
            });
            if sb.listens.is_empty() {
                sb.listens.push(ListenB {
                    addr: SocketAddr::from(([0, 0, 0, 0], default_port)),
                    default_server: false,
                    backlog: 511,
                });
            }
            for l in &sb.listens {
                match groups.iter_mut().find(|(g, _)| g.addr == l.addr) {
                    Some((g, has_default)) => {
                        if l.default_server {
                            if *has_default {
                                return Err(plain(format!(
                                    "a duplicate default server for {}",
                                    l.addr
                                )));
                            }
                            *has_default = true;
                            g.default = g.servers.len();
                        }
                        g.servers.push(server.clone());
                    }
                    None => groups.push((
                        ListenGroup {
                            addr: l.addr,
                            backlog: l.backlog,
                            servers: vec![server.clone()],
                            default: 0,
                        },
                        l.default_server,
                    )),
                }
            }
            servers.push(server);
        }
        let cache_zones = self.cache.finish().map_err(plain)?;
        Ok(Config {
            main,
            cache_zones,
            servers,
            listens: groups.into_iter().map(|(g, _)| g).collect(),
            files,
            prefix: self.prefix,
        })
    }
}

// A nested block's error already carries its own file:line; it travels out
// through the setter's `String` error via this slot so the outer directive
// does not re-label it.
thread_local! {
    static NESTED: std::cell::RefCell<Option<ConfError>> = const { std::cell::RefCell::new(None) };
}

impl Build {
    fn walk_nested(&mut self, d: &Directive, ctx: u16) -> Res {
        let saved = self.ctx;
        self.ctx = ctx;
        let r = self.walk(d.block.as_deref().unwrap_or(&[]));
        self.ctx = saved;
        r.map_err(|e| {
            NESTED.with(|n| *n.borrow_mut() = Some(e));
            String::new()
        })
    }
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

fn set_worker_processes(b: &mut Build, d: &Directive) -> Res {
    let n = if d.args[0] == "auto" {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    } else {
        match d.args[0].parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => {
                return Err(format!(
                    "invalid value \"{}\" in \"{}\" directive",
                    d.args[0], d.name
                ))
            }
        }
    };
    set_once(&mut b.worker_processes, n, d)
}

fn set_error_log(b: &mut Build, d: &Directive) -> Res {
    let level = match d.args.get(1) {
        Some(l) => Level::parse(l).ok_or_else(|| format!("invalid log level \"{l}\""))?,
        None => Level::Error,
    };
    let target = &d.args[0];
    if target.starts_with("syslog:") || target.starts_with("memory:") {
        return Err(format!("\"{target}\" is not supported by porter"));
    }
    let path = if target == "stderr" {
        PathBuf::from("stderr")
    } else {
        b.full_path(target)
    };
    let file = b.logs.get(&path)?;
    b.error_log.push(ErrorLogSpec { file, level });
    Ok(())
}

fn set_log_format(b: &mut Build, d: &Directive) -> Res {
    let name = &d.args[0];
    if b.formats.contains_key(name) {
        return Err(format!("duplicate \"log_format\" name \"{name}\""));
    }
    let mut rest = &d.args[1..];
    let mut escape = Escape::Default;
    if let Some(e) = rest.first().and_then(|a| a.strip_prefix("escape=")) {
        escape = match e {
            "default" => Escape::Default,
            "json" => Escape::Json,
            "none" => Escape::None,
            _ => return Err(format!("unknown log format escaping \"{e}\"")),
        };
        rest = &rest[1..];
    }
    if rest.is_empty() {
        return Err(format!(
            "invalid number of arguments in \"{}\" directive",
            d.name
        ));
    }
    let text: String = rest.concat();
    let f = LogFormat::new(name, &text, escape).map_err(|e| e.0)?;
    b.formats.insert(name.clone(), Arc::new(f));
    Ok(())
}

fn set_access_log(b: &mut Build, d: &Directive) -> Res {
    if d.args[0] == "off" {
        if d.args.len() > 1 {
            return Err(format!("invalid parameter \"{}\"", d.args[1]));
        }
        let slot = &mut b.loc().access_log;
        if slot.is_some() {
            return Err(dup(d));
        }
        *slot = Some(Arc::new(Vec::new()));
        return Ok(());
    }
    let format = match d.args.get(1) {
        Some(name) => b
            .formats
            .get(name)
            .cloned()
            .ok_or_else(|| format!("unknown log format \"{name}\""))?,
        None => LogFormat::combined(),
    };
    for extra in d.args.iter().skip(2) {
        if !(extra.starts_with("buffer=")
            || extra.starts_with("flush=")
            || extra.starts_with("gzip"))
        {
            return Err(format!("invalid parameter \"{extra}\""));
        }
    }
    let path = b.full_path(&d.args[0]);
    let file = b.logs.get(&path)?;
    let slot = &mut b.loc().access_log;
    let mut list: Vec<AccessLog> = slot.as_deref().cloned().unwrap_or_default();
    list.push(AccessLog { file, format });
    *slot = Some(Arc::new(list));
    Ok(())
}

fn set_server(b: &mut Build, d: &Directive) -> Res {
    b.servers.push(ServerB {
        loc: LocBuilder::default(),
        names: Vec::new(),
        primary: None,
        listens: Vec::new(),
        ret: None,
        locations: Vec::new(),
    });
    let saved = b.cur_loc.take();
    let r = b.walk_nested(d, SRV);
    b.cur_loc = saved;
    r
}

/// Parses a `listen` address: `8000`, `127.0.0.1:8000`, `*:80`, `[::1]:80`,
/// `localhost:8000`, `127.0.0.1` (port 80).
pub fn parse_listen_addr(s: &str) -> Result<Vec<SocketAddr>, String> {
    if s.starts_with("unix:") {
        return Err(format!(
            "unix sockets are not supported by porter in \"{s}\" of the \"listen\" directive"
        ));
    }
    let bad_port = || format!("invalid port in \"{s}\" of the \"listen\" directive");
    let port = |p: &str| -> Result<u16, String> {
        match p.parse::<u32>() {
            Ok(n) if (1..=65535).contains(&n) => Ok(n as u16),
            _ => Err(bad_port()),
        }
    };
    if s.bytes().all(|c| c.is_ascii_digit()) {
        return Ok(vec![SocketAddr::from(([0, 0, 0, 0], port(s)?))]);
    }
    let (host, p) = if let Some(rest) = s.strip_prefix('[') {
        let end = rest
            .find(']')
            .ok_or_else(|| format!("invalid host in \"{s}\" of the \"listen\" directive"))?;
        let host = &rest[..end];
        let after = &rest[end + 1..];
        let p = match after.strip_prefix(':') {
            Some(p) => port(p)?,
            None if after.is_empty() => 80,
            None => return Err(bad_port()),
        };
        let ip: std::net::Ipv6Addr = host
            .parse()
            .map_err(|_| format!("invalid host in \"{s}\" of the \"listen\" directive"))?;
        return Ok(vec![SocketAddr::from((ip, p))]);
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h, port(p)?),
            None => (s, 80),
        }
    };
    if host == "*" {
        return Ok(vec![SocketAddr::from(([0, 0, 0, 0], p))]);
    }
    if let Ok(ip) = host.parse::<std::net::Ipv4Addr>() {
        return Ok(vec![SocketAddr::from((ip, p))]);
    }
    let addrs: Vec<SocketAddr> = (host, p)
        .to_socket_addrs()
        .map_err(|_| format!("host not found in \"{s}\" of the \"listen\" directive"))?
        .filter(|a| a.is_ipv4())
        .collect();
    if addrs.is_empty() {
        return Err(format!(
            "host not found in \"{s}\" of the \"listen\" directive"
        ));
    }
    Ok(addrs)
}

fn set_listen(b: &mut Build, d: &Directive) -> Res {
    let addrs = parse_listen_addr(&d.args[0])?;
    let mut default_server = false;
    let mut backlog = 511;
    for p in &d.args[1..] {
        match p.as_str() {
            "default_server" | "default" => default_server = true,
            "reuseport" | "deferred" | "bind" => {}
            p if p.starts_with("backlog=") => {
                backlog = p[8..]
                    .parse::<i32>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("invalid backlog \"{}\"", &p[8..]))?;
            }
            p if p.starts_with("ipv6only=") || p.starts_with("so_keepalive=") => {}
            "ssl" | "http2" | "quic" | "proxy_protocol" => {
                return Err(format!("the \"{p}\" parameter is not supported by porter"));
            }
            p => return Err(format!("invalid parameter \"{p}\"")),
        }
    }
    let srv = b.server();
    for addr in addrs {
        if srv.listens.iter().any(|l| l.addr == addr) {
            return Err(format!("a duplicate listen {addr}"));
        }
        srv.listens.push(ListenB {
            addr,
            default_server,
            backlog,
        });
    }
    Ok(())
}

fn set_server_name(b: &mut Build, d: &Directive) -> Res {
    let srv = b.server();
    for raw in &d.args {
        let n = raw.to_ascii_lowercase();
        if n.starts_with('~') {
            return Err(format!(
                "regex server names are not supported by porter (\"{raw}\")"
            ));
        }
        if srv.primary.is_none() {
            srv.primary = Some(n.clone());
        }
        if let Some(rest) = n.strip_prefix("*.") {
            srv.names.push(ServerName::Suffix(format!(".{rest}")));
        } else if let Some(rest) = n.strip_prefix('.') {
            srv.names.push(ServerName::Exact(rest.to_string()));
            srv.names.push(ServerName::Suffix(n.clone()));
        } else if let Some(rest) = n.strip_suffix(".*") {
            srv.names.push(ServerName::Prefix(format!("{rest}.")));
        } else if n.contains('*') {
            return Err(format!("invalid server name or wildcard \"{raw}\""));
        } else {
            srv.names.push(ServerName::Exact(n));
        }
    }
    Ok(())
}

fn set_location(b: &mut Build, d: &Directive) -> Res {
    let (kind, path) = match d.args.as_slice() {
        [m, p] => match m.as_str() {
            "=" => (LocationKind::Exact, p.clone()),
            "^~" => (LocationKind::Prefix, p.clone()),
            "~" | "~*" => return Err("regex locations are not supported by porter yet".into()),
            _ => return Err(format!("invalid location modifier \"{m}\"")),
        },
        [p] => {
            if let Some(rest) = p.strip_prefix('=') {
                (LocationKind::Exact, rest.to_string())
            } else if let Some(rest) = p.strip_prefix("^~") {
                (LocationKind::Prefix, rest.to_string())
            } else if p.starts_with('~') {
                return Err("regex locations are not supported by porter yet".into());
            } else if p.starts_with('@') {
                return Err("named locations are not supported by porter yet".into());
            } else {
                (LocationKind::Prefix, p.clone())
            }
        }
        _ => unreachable!("arity checked"),
    };
    let parent = if b.ctx == LOC { b.cur_loc } else { None };
    let srv = b.server();
    if let Some(p) = parent {
        let outer = &srv.locations[p];
        if outer.kind == LocationKind::Exact {
            return Err(format!(
                "location \"{path}\" cannot be inside the exact location \"{}\"",
                outer.path
            ));
        }
        if !path.starts_with(&outer.path) {
            return Err(format!(
                "location \"{path}\" is outside location \"{}\"",
                outer.path
            ));
        }
    }
    if srv
        .locations
        .iter()
        .any(|l| l.path == path && l.kind == kind)
    {
        return Err(format!("duplicate location \"{path}\""));
    }
    srv.locations.push(LocB {
        path,
        kind,
        internal: false,
        ret: None,
        handler: Handler::Static,
        loc: LocBuilder::default(),
        parent,
    });
    let idx = srv.locations.len() - 1;
    let saved = b.cur_loc.replace(idx);
    let r = b.walk_nested(d, LOC);
    b.cur_loc = saved;
    r
}

/// Appends `proxy_cache_bypass` / `proxy_no_cache` conditions: repeated
/// directives at one level add up, and a level with none inherits its
/// parent's, as NGINX's predicate slots do.
fn push_predicates(slot: &mut Option<Arc<Vec<Template>>>, d: &Directive) -> Res {
    let mut list: Vec<Template> = slot.as_deref().cloned().unwrap_or_default();
    for a in &d.args {
        list.push(template(a)?);
    }
    *slot = Some(Arc::new(list));
    Ok(())
}

/// `proxy_cache_purge off | METHOD [from all | ADDR[/BITS] ...]`.
fn set_cache_purge(b: &mut Build, d: &Directive) -> Res {
    let method = d.args[0].as_str();
    if method == "off" {
        if d.args.len() > 1 {
            return Err(format!("invalid parameter \"{}\"", d.args[1]));
        }
        return set_once(&mut b.loc().proxy_cache_purge, None, d);
    }
    if method.is_empty() || !method.bytes().all(|c| c.is_ascii_uppercase() || c == b'_') {
        return Err(format!("invalid method \"{method}\""));
    }
    let mut from = Vec::new();
    match d.args.get(1).map(String::as_str) {
        None => {}
        Some("from") if d.args.len() > 2 => {
            for a in &d.args[2..] {
                if a == "all" {
                    from.clear();
                    break;
                }
                let (ip, bits) = match a.split_once('/') {
                    Some((ip, bits)) => (ip, bits.parse::<u8>().ok()),
                    None => (a.as_str(), None),
                };
                let ip: std::net::IpAddr =
                    ip.parse().map_err(|_| format!("invalid address \"{a}\""))?;
                let max = if ip.is_ipv4() { 32 } else { 128 };
                let bits = match bits {
                    Some(n) if n <= max => n,
                    None if !a.contains('/') => max,
                    _ => return Err(format!("invalid address \"{a}\"")),
                };
                from.push((ip, bits));
            }
        }
        Some(p) => return Err(format!("invalid parameter \"{p}\"")),
    }
    let purge = CachePurge {
        method: method.to_string(),
        from,
    };
    set_once(&mut b.loc().proxy_cache_purge, Some(Arc::new(purge)), d)
}

/// An error about a line inside a block, reported at that line.
fn inner_error(entry: &Directive, message: String) -> Res {
    NESTED.with(|n| *n.borrow_mut() = Some(entry.error(message)));
    Err(String::new())
}

fn set_split_clients(_: &mut Build, d: &Directive) -> Res {
    let source = template(&d.args[0])?;
    let name = match d.args[1].strip_prefix('$') {
        Some(n) if !n.is_empty() => n,
        _ => return Err(format!("invalid variable name \"{}\"", d.args[1])),
    };
    let entries = d.block.as_deref().unwrap_or(&[]);
    let mut lines = Vec::with_capacity(entries.len());
    for e in entries {
        if e.block.is_some() {
            return inner_error(e, format!("unexpected \"{{\" after \"{}\"", e.name));
        }
        // NGINX reads a missing value from stale memory and ignores extra
        // words; porter wants exactly `PERCENT VALUE;`.
        if e.args.len() != 1 {
            return inner_error(
                e,
                format!(
                    "invalid number of arguments in \"split_clients\" entry \"{}\", expected \"PERCENT VALUE;\"",
                    e.name
                ),
            );
        }
        lines.push((e.name.as_str(), e.args[0].as_str()));
    }
    match SplitClients::new(name, source, &lines) {
        Ok(sc) => {
            template::define(name, Var::Split(Arc::new(sc)));
            Ok(())
        }
        // NGINX checks bad percentages per line and the total at the end.
        Err(m) => match entries
            .iter()
            .find(|e| m.contains(&format!("\"{}\"", e.name)))
        {
            Some(e) => inner_error(e, m),
            None => {
                let mut end = d.clone();
                end.line = d.end_line;
                inner_error(&end, m)
            }
        },
    }
}

fn set_types(b: &mut Build, d: &Directive) -> Res {
    let mut map: Types = match &b.loc().types {
        Some(t) => (**t).clone(),
        None => Types::new(),
    };
    for entry in d.block.as_deref().unwrap_or(&[]) {
        if entry.block.is_some() {
            return Err(format!("unexpected \"{{\" after \"{}\"", entry.name));
        }
        for ext in &entry.args {
            map.insert(ext.to_ascii_lowercase(), entry.name.clone());
        }
    }
    b.loc().types = Some(Arc::new(map));
    Ok(())
}

fn set_root(b: &mut Build, d: &Directive) -> Res {
    let is_alias = d.name == "alias";
    if let Some(prev) = &b.loc().root {
        let prev_name = match prev {
            DocRoot::Root(_) => "root",
            DocRoot::Alias(_) => "alias",
        };
        return Err(if prev_name == d.name {
            dup(d)
        } else {
            format!(
                "\"{}\" directive is duplicate, \"{prev_name}\" directive was specified earlier",
                d.name
            )
        });
    }
    let raw = &d.args[0];
    // A relative root is relative to the prefix, as in NGINX.
    let full = if raw.starts_with('/') || raw.starts_with('$') {
        raw.clone()
    } else {
        b.full_path(raw).to_string_lossy().into_owned()
    };
    let t = template(&full)?;
    b.loc().root = Some(if is_alias {
        DocRoot::Alias(t)
    } else {
        DocRoot::Root(t)
    });
    Ok(())
}

fn set_index(b: &mut Build, d: &Directive) -> Res {
    let mut list = Vec::new();
    for a in &d.args {
        if a.is_empty() {
            return Err("index \"\" in \"index\" directive is invalid".into());
        }
        list.push(template(a)?);
    }
    let slot = &mut b.loc().index;
    match slot {
        Some(v) => v.extend(list),
        None => *slot = Some(list),
    }
    Ok(())
}

fn set_try_files(b: &mut Build, d: &Directive) -> Res {
    let (last, files) = d.args.split_last().unwrap();
    let candidates = files
        .iter()
        .map(|a| {
            // A trailing `/` asks for a directory and is not part of the
            // URI tested, as in NGINX.
            let dir = a.len() > 1 && a.ends_with('/');
            let name = if dir { &a[..a.len() - 1] } else { a.as_str() };
            Ok(TryFile {
                name: template(name)?,
                dir,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let fallback = match last.strip_prefix('=') {
        Some(code) => match code.parse::<u16>() {
            Ok(c) if (100..=999).contains(&c) => TryFallback::Code(c),
            _ => return Err(format!("invalid code \"{code}\"")),
        },
        None => TryFallback::Uri(template(last)?),
    };
    let tf = TryFiles {
        candidates,
        fallback,
    };
    set_once(&mut b.loc().try_files, Some(Arc::new(tf)), d)
}

fn set_return(b: &mut Build, d: &Directive) -> Res {
    let first = &d.args[0];
    let ret = match first.parse::<u16>() {
        Ok(code) => {
            if code > 999 {
                return Err(format!("invalid return code \"{first}\""));
            }
            Return {
                code,
                text: d.args.get(1).map(|t| template(t)).transpose()?,
            }
        }
        Err(_) => {
            if d.args.len() > 1 {
                return Err(format!("invalid return code \"{first}\""));
            }
            if !(first.starts_with("http://")
                || first.starts_with("https://")
                || first.starts_with("$scheme"))
            {
                return Err(format!("invalid return code \"{first}\""));
            }
            Return {
                code: 302,
                text: Some(template(first)?),
            }
        }
    };
    let slot = if b.ctx == SRV {
        &mut b.server().ret
    } else {
        &mut b.location().ret
    };
    if slot.is_none() {
        *slot = Some(ret);
    }
    Ok(())
}

fn set_error_page(b: &mut Build, d: &Directive) -> Res {
    let target = d.args.last().unwrap();
    let mut codes = Vec::new();
    let mut status = None;
    for a in &d.args[..d.args.len() - 1] {
        if let Some(rest) = a.strip_prefix('=') {
            if rest.is_empty() {
                status = Some(None);
            } else {
                let c: u16 = rest.parse().map_err(|_| format!("invalid value \"{a}\""))?;
                status = Some(Some(c));
            }
            continue;
        }
        let c: u16 = a.parse().map_err(|_| format!("invalid value \"{a}\""))?;
        if !(300..=599).contains(&c) || c == 499 {
            return Err(format!("value \"{a}\" must be between 300 and 599"));
        }
        codes.push(c);
    }
    if codes.is_empty() {
        return Err(format!("invalid value \"{target}\""));
    }
    let page = ErrorPage {
        codes,
        status,
        target: template(target)?,
    };
    let slot = &mut b.loc().error_pages;
    let mut list: Vec<ErrorPage> = slot.as_deref().cloned().unwrap_or_default();
    list.push(page);
    *slot = Some(Arc::new(list));
    Ok(())
}

fn set_add_header(b: &mut Build, d: &Directive) -> Res {
    let always = match d.args.get(2).map(String::as_str) {
        None => false,
        Some("always") => true,
        Some(p) => return Err(format!("invalid parameter \"{p}\"")),
    };
    let h = AddHeader {
        name: d.args[0].clone(),
        value: template(&d.args[1])?,
        always,
    };
    let slot = &mut b.loc().add_headers;
    let mut list: Vec<AddHeader> = slot.as_deref().cloned().unwrap_or_default();
    list.push(h);
    *slot = Some(Arc::new(list));
    Ok(())
}

fn set_expires(b: &mut Build, d: &Directive) -> Res {
    if d.args.len() == 2 {
        return Err("\"expires modified\" is not supported by porter".into());
    }
    let a = d.args[0].as_str();
    let v = match a {
        "off" => None,
        "epoch" => Some(i64::MIN),
        "max" => Some(i64::MAX),
        _ => {
            let (neg, t) = match a.strip_prefix('-') {
                Some(t) => (true, t),
                None => (false, a.strip_prefix('+').unwrap_or(a)),
            };
            let secs = parse_time(t)
                .ok_or_else(|| format!("invalid value \"{a}\""))?
                .as_secs() as i64;
            Some(if neg { -secs } else { secs })
        }
    };
    set_once(&mut b.loc().expires, v, d)
}

fn set_keepalive_timeout(b: &mut Build, d: &Directive) -> Res {
    let t = time(d, &d.args[0])?;
    let h = d.args.get(1).map(|s| time(d, s)).transpose()?;
    set_once(&mut b.loc().keepalive_timeout, t, d)?;
    b.loc().keepalive_header = Some(h);
    Ok(())
}

/// `thread_pool NAME threads=N [max_queue=M]`, NGINX's messages.
fn set_thread_pool(b: &mut Build, d: &Directive) -> Res {
    let name = d.args[0].clone();
    let mut threads = 0usize;
    let mut max_queue = 65536usize;
    for a in &d.args[1..] {
        if let Some(v) = a.strip_prefix("threads=") {
            threads = match v.parse::<usize>() {
                Ok(n) if n > 0 => n,
                _ => return Err(format!("invalid threads value \"{a}\"")),
            };
        } else if let Some(v) = a.strip_prefix("max_queue=") {
            max_queue = v
                .parse::<usize>()
                .map_err(|_| format!("invalid max_queue value \"{a}\""))?;
        } else {
            return Err(format!("invalid parameter \"{a}\""));
        }
    }
    if threads == 0 {
        return Err("\"thread_pool\" must have \"threads\" parameter".to_string());
    }
    if b.pools.iter().any(|p| p.name == name) {
        return Err(format!("duplicate thread pool \"{name}\""));
    }
    b.pools.push(PoolSpec {
        name,
        threads,
        max_queue,
    });
    Ok(())
}

/// `aio_uring workers=N [max_in_flight=M]`: io-wq workers and operations
/// in flight per worker's ring.
fn set_aio_uring(b: &mut Build, d: &Directive) -> Res {
    let mut spec = UringSpec::default();
    for a in &d.args {
        let (slot, v) = match a.split_once('=') {
            Some(("workers", v)) => (&mut spec.workers, v),
            Some(("max_in_flight", v)) => (&mut spec.max_in_flight, v),
            _ => return Err(format!("invalid parameter \"{a}\"")),
        };
        *slot = match v.parse::<u32>() {
            Ok(n) if (1..=4096).contains(&n) => n,
            _ => return Err(format!("invalid value \"{a}\"")),
        };
    }
    set_once(&mut b.uring, spec, d)
}

/// `aio off | threads[=NAME|=$var] | on`. A literal pool name must be
/// declared (or be `default`); a variable one is resolved per request.
fn set_aio(b: &mut Build, d: &Directive) -> Res {
    let v = d.args[0].as_str();
    let conf = match v {
        "off" => AioConf::Off,
        "on" => {
            // The default pool carries the calls the ring does not, and
            // everything when the kernel gives no ring.
            b.default_pool_used = true;
            let at = format!("{}:{}", d.file.display(), d.line);
            b.aio_on_at.get_or_insert(at);
            AioConf::On
        }
        "threads" => {
            b.default_pool_used = true;
            AioConf::Threads(Template::literal("default"))
        }
        _ => match v.strip_prefix("threads=") {
            Some(name) if !name.is_empty() => {
                let t = template(name)?;
                if t.is_literal() && !b.pools.iter().any(|p| p.name == name) {
                    if name != "default" {
                        return Err(format!("unknown thread pool \"{name}\""));
                    }
                    b.default_pool_used = true;
                }
                AioConf::Threads(t)
            }
            _ => return Err(invalid(d)),
        },
    };
    set_once(&mut b.loc().aio, conf, d)
}

/// `open_file_cache off | max=N [inactive=T]`.
fn set_open_file_cache(b: &mut Build, d: &Directive) -> Res {
    if d.args[0] == "off" {
        if d.args.len() > 1 {
            return Err(format!(
                "invalid \"open_file_cache\" parameter \"{}\"",
                d.args[1]
            ));
        }
        return set_once(&mut b.loc().open_file_cache, None, d);
    }
    let mut max = None;
    let mut inactive = Duration::from_secs(60);
    for a in &d.args {
        if let Some(v) = a.strip_prefix("max=") {
            max = match v.parse::<usize>() {
                Ok(n) if n > 0 => Some(n),
                _ => return Err(format!("invalid \"open_file_cache\" parameter \"{a}\"")),
            };
        } else if let Some(v) = a.strip_prefix("inactive=") {
            inactive = parse_time(v)
                .ok_or_else(|| format!("invalid \"open_file_cache\" parameter \"{a}\""))?;
        } else {
            return Err(format!("invalid \"open_file_cache\" parameter \"{a}\""));
        }
    }
    let Some(max) = max else {
        return Err("\"open_file_cache\" must have the \"max\" parameter".to_string());
    };
    set_once(
        &mut b.loc().open_file_cache,
        Some(OpenFileCacheConf { max, inactive }),
        d,
    )
}

/// The proxy cache's part of a build: zones and every cache or temp path
/// with where it was written (NGINX's path registry).
#[derive(Default)]
struct CacheBuild {
    zones: Vec<ZoneSpec>,
    /// (path, levels, is a cache path, "file:line").
    paths: Vec<(PathBuf, Levels, bool, String)>,
}

impl CacheBuild {
    /// NGINX's path check, made after the whole file as NGINX does (so
    /// its message carries both places and no trailing location).
    fn finish(&mut self) -> Result<Vec<ZoneSpec>, String> {
        for (j, (pj, lj, cj, wj)) in self.paths.iter().enumerate() {
            for (pi, li, ci, wi) in &self.paths[..j] {
                if pi != pj {
                    continue;
                }
                if *ci || *cj {
                    return Err(format!(
                        "the same path name \"{}\" used in {wi} and in {wj}",
                        pj.display()
                    ));
                }
                if li != lj {
                    return Err(format!(
                        "the same path name \"{}\" in {wj} has the same name as in {wi} with conflicting levels",
                        pj.display()
                    ));
                }
            }
        }
        Ok(std::mem::take(&mut self.zones))
    }
}

fn place(d: &Directive) -> String {
    format!("{}:{}", d.file.display(), d.line)
}

/// `proxy_cache_path PATH [levels=] keys_zone=NAME:SIZE [inactive=]
/// [max_size=] [min_free=] [use_temp_path=] [manager_*=] [loader_*=]`,
/// with NGINX's checks and messages.
fn set_proxy_cache_path(b: &mut Build, d: &Directive) -> Res {
    let path = b.full_path(&d.args[0]);
    let mut spec = ZoneSpec::new("", &path, 0);
    for a in &d.args[1..] {
        let (k, v) = a.split_once('=').unwrap_or((a.as_str(), ""));
        let bad = |what: &str| format!("invalid {what} value \"{a}\"");
        match k {
            "levels" => {
                spec.levels =
                    Levels::parse(v).ok_or_else(|| format!("invalid \"levels\" \"{a}\""))?;
            }
            "use_temp_path" => {
                spec.use_temp_path = parse_flag(v).ok_or_else(|| {
                    format!("invalid use_temp_path value \"{a}\", it must be \"on\" or \"off\"")
                })?;
            }
            "keys_zone" => {
                let (name, sz) = match v.split_once(':') {
                    Some((n, s)) => (n, s),
                    None if v.is_empty() => ("", ""),
                    None => return Err(format!("invalid keys zone size \"{a}\"")),
                };
                spec.name = name.to_string();
                if name.is_empty() {
                    continue;
                }
                let size =
                    parse_size(sz).ok_or_else(|| format!("invalid keys zone size \"{a}\""))?;
                // NGINX: two pages at least.
                if size < 8192 {
                    return Err(format!("keys zone \"{a}\" is too small"));
                }
                spec.keys_size = size;
            }
            "inactive" => spec.inactive = parse_time(v).ok_or_else(|| bad("inactive"))?,
            "max_size" => spec.max_size = Some(parse_size(v).ok_or_else(|| bad("max_size"))?),
            "min_free" => spec.min_free = Some(parse_size(v).ok_or_else(|| bad("min_free"))?),
            "loader_files" => {
                spec.loader_files = v.parse().map_err(|_| bad("loader_files"))?;
            }
            "loader_sleep" => {
                spec.loader_sleep = parse_time(v).ok_or_else(|| bad("loader_sleep"))?
            }
            "loader_threshold" => {
                spec.loader_threshold = parse_time(v).ok_or_else(|| bad("loader_threshold"))?;
            }
            "manager_files" => {
                spec.manager_files = v.parse().map_err(|_| bad("manager_files"))?;
            }
            "manager_sleep" => {
                spec.manager_sleep = parse_time(v).ok_or_else(|| bad("manager_sleep"))?;
            }
            "manager_threshold" => {
                spec.manager_threshold = parse_time(v).ok_or_else(|| bad("manager_threshold"))?;
            }
            _ => return Err(format!("invalid parameter \"{a}\"")),
        }
    }
    if spec.name.is_empty() {
        return Err(format!("\"{}\" must have \"keys_zone\" parameter", d.name));
    }
    if b.cache.zones.iter().any(|z| z.name == spec.name) {
        return Err(format!("duplicate zone \"{}\"", spec.name));
    }
    b.cache
        .paths
        .push((path, spec.levels.clone(), true, place(d)));
    b.cache.zones.push(spec);
    Ok(())
}

/// `proxy_temp_path PATH [L1 [L2 [L3]]]`.
fn set_proxy_temp_path(b: &mut Build, d: &Directive) -> Res {
    let mut levels = Vec::new();
    for a in &d.args[1..] {
        match a.parse::<u8>() {
            Ok(n) if (1..=9).contains(&n) => levels.push(n),
            _ => return Err(invalid(d)),
        }
    }
    let t = TempPath {
        path: b.full_path(&d.args[0]),
        levels: Levels(levels),
    };
    set_once(&mut b.loc().proxy_temp_path, Some(t.clone()), d)?;
    b.cache.paths.push((t.path, t.levels, false, place(d)));
    Ok(())
}

/// `proxy_cache_valid [code ...|any] time`; without codes: 200 301 302.
/// Each code becomes one rule, in order, as NGINX keeps them.
fn set_proxy_cache_valid(b: &mut Build, d: &Directive) -> Res {
    let (last, codes) = d.args.split_last().expect("arity");
    let time = parse_time(last).ok_or_else(|| format!("invalid time value \"{last}\""))?;
    let mut rules = Vec::new();
    for c in codes {
        if c == "any" {
            rules.push(CacheValid {
                codes: Vec::new(),
                time,
            });
            continue;
        }
        match c.parse::<u16>() {
            Ok(n) if (100..=599).contains(&n) => rules.push(CacheValid {
                codes: vec![n],
                time,
            }),
            _ => return Err(format!("invalid status \"{c}\"")),
        }
    }
    if codes.is_empty() {
        rules.extend([200, 301, 302].map(|c| CacheValid {
            codes: vec![c],
            time,
        }));
    }
    let slot = &mut b.loc().proxy_cache_valid;
    let mut list: Vec<CacheValid> = slot.as_deref().cloned().unwrap_or_default();
    list.extend(rules);
    *slot = Some(Arc::new(list));
    Ok(())
}
// ---- reverse proxy: `upstream { }` and `proxy_pass`.

/// An `upstream { }` block being read.
struct UpstreamB {
    name: String,
    primary: Vec<PeerSpec>,
    backup: Vec<PeerSpec>,
    keepalive: Option<usize>,
    keepalive_timeout: Option<Duration>,
    keepalive_requests: Option<u64>,
    hash: Option<(Template, bool)>,
}

/// Resolves `host[:port]` (port 80 when absent) at config time, as NGINX
/// does for upstream servers; the error is NGINX's.
fn resolve_upstream(host: &str, port: Option<u16>, shown: &str) -> Result<Vec<SocketAddr>, String> {
    let port = port.unwrap_or(80);
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<std::net::IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let mut addrs: Vec<SocketAddr> = (bare, port)
        .to_socket_addrs()
        .map_err(|_| format!("host not found in upstream \"{shown}\""))?
        .collect();
    addrs.dedup();
    if addrs.is_empty() {
        return Err(format!("host not found in upstream \"{shown}\""));
    }
    Ok(addrs)
}

fn set_upstream(b: &mut Build, d: &Directive) -> Res {
    let name = d.args[0].clone();
    if b.upstreams.iter().any(|g| g.name == name) {
        return Err(format!("duplicate upstream \"{name}\""));
    }
    b.cur_upstream = Some(UpstreamB {
        name,
        primary: Vec::new(),
        backup: Vec::new(),
        keepalive: None,
        keepalive_timeout: None,
        keepalive_requests: None,
        hash: None,
    });
    let r = b.walk_nested(d, UPSTREAM);
    let ub = b.cur_upstream.take().expect("upstream");
    r?;
    if ub.primary.is_empty() {
        return Err("no servers are inside upstream".to_string());
    }
    if ub.hash.is_some() && !ub.backup.is_empty() {
        return Err("invalid parameter \"backup\"".to_string());
    }
    let hash = ub.hash.map(|(key, consistent)| HashConf {
        key,
        ring: consistent.then(|| balance::ketama_ring(&ub.primary)),
    });
    b.upstreams.push(Arc::new(UpstreamGroup {
        id: balance::next_id(),
        name: ub.name,
        primary: PeerSet::new(ub.primary),
        backup: PeerSet::new(ub.backup),
        hash,
        keepalive: ub.keepalive.unwrap_or(0),
        keepalive_timeout: ub.keepalive_timeout.unwrap_or(Duration::from_secs(60)),
        keepalive_requests: ub.keepalive_requests.unwrap_or(1000),
    }));
    Ok(())
}

/// `server ADDR [weight=N] [max_fails=N] [fail_timeout=T] [backup] [down]`
/// inside `upstream { }`.
fn set_upstream_server(b: &mut Build, d: &Directive) -> Res {
    let addr = &d.args[0];
    let mut weight = 1u32;
    let mut max_fails = 1u32;
    let mut fail_timeout = Duration::from_secs(10);
    let mut backup = false;
    let mut down = false;
    let bad = |p: &str| format!("invalid parameter \"{p}\"");
    for p in &d.args[1..] {
        if let Some(v) = p.strip_prefix("weight=") {
            weight = v
                .parse()
                .ok()
                .filter(|&n: &u32| n > 0)
                .ok_or_else(|| bad(p))?;
        } else if let Some(v) = p.strip_prefix("max_fails=") {
            max_fails = v.parse().map_err(|_| bad(p))?;
        } else if let Some(v) = p.strip_prefix("fail_timeout=") {
            fail_timeout = parse_time(v).ok_or_else(|| bad(p))?;
        } else if p == "backup" {
            backup = true;
        } else if p == "down" {
            down = true;
        } else if p.starts_with("max_conns=") || p.starts_with("slow_start=") {
            return Err(format!("the \"{p}\" parameter is not supported by porter"));
        } else {
            return Err(bad(p));
        }
    }
    if addr.starts_with("unix:") {
        return Err(format!(
            "unix sockets are not supported by porter in upstream \"{addr}\""
        ));
    }
    let split = crate::upstream::split_url(&format!("http://{addr}"))
        .map_err(|_| format!("invalid host in upstream \"{addr}\""))?;
    if split.uri.is_some() {
        return Err(format!("invalid host in upstream \"{addr}\""));
    }
    let addrs = resolve_upstream(&split.host, split.port, addr)?;
    let ub = b.upstream();
    let list = if backup {
        &mut ub.backup
    } else {
        &mut ub.primary
    };
    for a in addrs {
        list.push(PeerSpec {
            server: addr.clone(),
            addr: a,
            weight,
            max_fails,
            fail_timeout,
            down,
        });
    }
    Ok(())
}

fn set_upstream_hash(b: &mut Build, d: &Directive) -> Res {
    let consistent = match d.args.get(1).map(String::as_str) {
        None => false,
        Some("consistent") => true,
        Some(p) => return Err(format!("invalid parameter \"{p}\"")),
    };
    if !b.upstream().backup.is_empty() {
        return Err("load balancing method redefined".to_string());
    }
    let key = template(&d.args[0])?;
    set_once(&mut b.upstream().hash, (key, consistent), d)
}

/// `proxy_pass http://NAME|HOST[:PORT][URI]`: an `upstream` name, else an
/// address resolved now (NGINX's implicit upstream); with variables, the
/// URL is rendered per request.
fn set_proxy_pass(b: &mut Build, d: &Directive) -> Res {
    use crate::upstream::{split_url, ProxyPass, ProxyTarget};
    if matches!(b.location().handler, Handler::Proxy(_)) {
        return Err(dup(d));
    }
    let url = &d.args[0];
    let groups = Arc::new(b.upstreams.clone());
    let location = b.location().path.clone();
    let pass = if url.contains('$') {
        if !(url.starts_with('$') || url.len() > 7 && url[..7].eq_ignore_ascii_case("http://")) {
            split_url(url)?;
        }
        ProxyPass {
            target: ProxyTarget::Dynamic(template(url)?),
            uri: None,
            proxy_host: String::new(),
            proxy_port: 80,
            location,
            groups,
            redirect_default: None,
        }
    } else {
        let split = split_url(url)?;
        let shown = &url[7..];
        let proxy_host = match split.port {
            Some(p) if p != 80 => format!("{}:{p}", split.host),
            _ => split.host.clone(),
        };
        let group = match b.upstreams.iter().find(|g| g.name == split.host) {
            Some(g) => Arc::clone(g),
            None => {
                let key = format!("{}:{}", split.host, split.port.unwrap_or(80));
                match b.implicit_upstreams.get(&key) {
                    Some(g) => Arc::clone(g),
                    None => {
                        let addrs = resolve_upstream(&split.host, split.port, shown)?;
                        let peers = addrs
                            .into_iter()
                            .map(|a| PeerSpec {
                                server: proxy_host.clone(),
                                addr: a,
                                weight: 1,
                                max_fails: 1,
                                fail_timeout: Duration::from_secs(10),
                                down: false,
                            })
                            .collect();
                        let g = Arc::new(UpstreamGroup {
                            id: balance::next_id(),
                            name: proxy_host.clone(),
                            primary: PeerSet::new(peers),
                            backup: PeerSet::new(Vec::new()),
                            hash: None,
                            keepalive: 0,
                            keepalive_timeout: Duration::from_secs(60),
                            keepalive_requests: 1000,
                        });
                        b.implicit_upstreams.insert(key, Arc::clone(&g));
                        g
                    }
                }
            }
        };
        let redirect_default = Some(match &split.uri {
            Some(_) => (url.clone(), location.clone()),
            None => (format!("{url}/"), "/".to_string()),
        });
        ProxyPass {
            target: ProxyTarget::Group(group),
            uri: split.uri,
            proxy_host,
            proxy_port: split.port.unwrap_or(80),
            location,
            groups,
            redirect_default,
        }
    };
    b.location().handler = Handler::Proxy(Arc::new(pass));
    Ok(())
}
/// `proxy_redirect off | default | redirect replacement` (lines add up;
/// `off` clears them).
fn set_proxy_redirect(b: &mut Build, d: &Directive) -> Res {
    use crate::upstream::RedirectRule;
    let rule = match d.args.as_slice() {
        [a] if a == "off" => None,
        [a] if a == "default" => Some(RedirectRule::Default),
        [a] => return Err(format!("invalid parameter \"{a}\"")),
        [from, _] if from.starts_with('~') => {
            return Err("regex \"proxy_redirect\" is not supported by porter".to_string())
        }
        [from, to] => Some(RedirectRule::Replace(template(from)?, template(to)?)),
        _ => unreachable!("arity checked"),
    };
    let slot = &mut b.loc().proxy_redirect;
    let mut list = match (&rule, slot.as_deref()) {
        (None, _) | (_, None) => Vec::new(),
        (Some(_), Some(v)) => v.clone(),
    };
    list.extend(rule);
    *slot = Some(Arc::new(list));
    Ok(())
}
// ---- end of reverse proxy setters

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
        for (i, a) in TABLE.iter().enumerate() {
            for b in &TABLE[i + 1..] {
                assert!(
                    a.name != b.name || a.contexts & b.contexts == 0,
                    "`{}` twice in one context",
                    a.name
                );
            }
        }
        assert_eq!(find_in("server", UPSTREAM).unwrap().contexts, UPSTREAM);
        assert_eq!(find_in("server", HTTP).unwrap().contexts, HTTP);
    }

    #[test]
    fn docs_list_every_directive() {
        let docs = include_str!("../../docs/directives.md");
        for s in TABLE {
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
