//! [`Build`]: the configuration under construction while the walker
//! applies the directive tree — the three-pass walk of a block (variable
//! definitions, plain directives, nested blocks), the checks every
//! directive gets (context, block or not, arity), and the final merge into
//! a [`Config`] (NGINX's defaults, servers and their locations, listen
//! groups).

use super::cache::CacheBuild;
use super::listen::ListenB;
use super::upstream::UpstreamB;
#[allow(unused_imports)]
use super::*;
use crate::config::locations::{LocationTree, NamedLocations};
use crate::vars::regex::Regex;

/// Config under construction.
pub struct Build {
    pub(super) prefix: PathBuf,
    pub(super) is_root: bool,
    pub(super) ctx: u16,
    pub(super) events_seen: bool,
    pub(super) http_seen: bool,
    pub(super) daemon: Option<bool>,
    pub(super) worker_processes: Option<usize>,
    pub(super) worker_connections: Option<usize>,
    pub(super) rlimit_nofile: Option<u64>,
    pub(super) worker_priority: Option<i32>,
    pub(super) cpu_affinity: Option<CpuAffinity>,
    pub(super) shutdown_timeout: Option<Duration>,
    pub(super) accept_mutex: Option<bool>,
    pub(super) user: Option<(String, Option<String>)>,
    pub(super) pid: Option<PathBuf>,
    pub(super) error_log: Vec<ErrorLogSpec>,
    pub(super) http: LocBuilder,
    pub(super) formats: HashMap<String, Arc<LogFormat>>,
    pub(super) logs: LogFiles,
    pub(super) servers: Vec<ServerB>,
    pub(super) cur_loc: Option<usize>,
    pub(super) pools: Vec<PoolSpec>,
    pub(super) default_pool_used: bool,
    pub(super) aio_on_at: Option<String>,
    pub(super) uring: Option<crate::disk::uring::UringSpec>,
    pub(super) cache: CacheBuild,
    pub(super) upstreams: Vec<Arc<UpstreamGroup>>,
    pub(super) implicit_upstreams: HashMap<String, Arc<UpstreamGroup>>,
    /// Every group, for the status handlers; filled by [`Build::finish`].
    pub(super) all_upstreams: Arc<crate::upstream::AllGroups>,
    pub(super) cur_upstream: Option<UpstreamB>,
    pub(super) ssl_http: super::ssl::SslB,
    /// `acme_issuer` blocks by name.
    pub(super) acme_issuers: HashMap<String, Arc<crate::acme::Issuer>>,
    pub(super) access: super::access::AccessB,
    /// Tuning directives without effect already seen, per block (NGINX's
    /// "is duplicate"): `(servers, location, context, name)`.
    pub(super) tuning_seen: std::collections::HashSet<(usize, Option<usize>, u16, String)>,
    /// `stream { }` (`stream.rs`).
    pub(super) stream: super::stream::StreamB,
}

pub(super) struct ServerB {
    pub(super) loc: LocBuilder,
    pub(super) names: Vec<ServerName>,
    pub(super) primary: Option<String>,
    pub(super) listens: Vec<ListenB>,
    pub(super) script: Vec<OpB>,
    pub(super) locations: Vec<LocB>,
    pub(super) ssl: super::ssl::SslB,
    /// `server_name`'s entries as written (ACME's default names).
    pub(super) raw_names: Vec<String>,
    /// `acme_certificate`, resolved when the server's settings merge.
    pub(super) acme: Option<Directive>,
}

pub(super) struct LocB {
    pub(super) path: String,
    pub(super) kind: LocationKind,
    pub(super) internal: bool,
    pub(super) noregex: bool,
    pub(super) regex: Option<Arc<Regex>>,
    pub(super) script: Vec<OpB>,
    pub(super) handler: Handler,
    pub(super) loc: LocBuilder,
    pub(super) parent: Option<usize>,
    /// `limit_except`: the methods allowed and the block's location.
    pub(super) limit_except: Option<(Vec<String>, usize)>,
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
            worker_priority: None,
            cpu_affinity: None,
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
            all_upstreams: Default::default(),
            cur_upstream: None,
            ssl_http: Default::default(),
            acme_issuers: HashMap::new(),
            access: Default::default(),
            tuning_seen: Default::default(),
            stream: Default::default(),
        }
    }

    pub(super) fn full_path(&self, p: &str) -> PathBuf {
        let p = Path::new(p);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.prefix.join(p)
        }
    }

    /// The location-level settings of the current level.
    pub(super) fn loc(&mut self) -> &mut LocBuilder {
        match self.ctx {
            HTTP => &mut self.http,
            SRV => &mut self.servers.last_mut().expect("server").loc,
            STREAM => &mut self.stream.main,
            SSRV => &mut self.stream.servers.last_mut().expect("server").loc,
            _ => {
                let i = self.cur_loc.expect("location");
                &mut self.servers.last_mut().expect("server").locations[i].loc
            }
        }
    }

    pub(super) fn server(&mut self) -> &mut ServerB {
        self.servers.last_mut().expect("server")
    }

    pub(super) fn upstream(&mut self) -> &mut UpstreamB {
        self.cur_upstream.as_mut().expect("upstream")
    }

    pub(super) fn location(&mut self) -> &mut LocB {
        let i = self.cur_loc.expect("location");
        &mut self.servers.last_mut().expect("server").locations[i]
    }

    /// Opens a location no URI selects (kind `If`, as NGINX's noname ones
    /// for `if` and `limit_except`) inside the current one, inheriting its
    /// path and handler but not its `try_files` (NGINX inherits none into
    /// such a block); returns the enclosing location's index and its own.
    pub(super) fn push_noname_location(&mut self) -> (usize, usize) {
        let parent = self.cur_loc.expect("location");
        let srv = self.server();
        let outer = &srv.locations[parent];
        let (path, handler) = (outer.path.clone(), outer.handler.clone());
        srv.locations.push(LocB {
            path,
            kind: LocationKind::If,
            internal: false,
            noregex: false,
            regex: None,
            script: Vec::new(),
            handler,
            loc: LocBuilder {
                try_files: Some(None),
                ..LocBuilder::default()
            },
            parent: Some(parent),
            limit_except: None,
        });
        (parent, srv.locations.len() - 1)
    }

    /// Applies `dirs` in the current context: plain directives first, then
    /// nested blocks that open a new level.
    pub fn walk(&mut self, dirs: &[Directive]) -> Result<(), ConfError> {
        // Pass 0 defines variables (`split_clients`), so any directive of
        // the block may use them wherever the definition is written, as
        // NGINX resolves variables after parsing; pass 1 applies the plain
        // directives, pass 2 the blocks that open a new level.
        let defs: Vec<&Directive> = dirs
            .iter()
            .filter(|d| matches!(d.name.as_str(), "split_clients" | "map" | "geo"))
            .collect();
        for dir in super::map::definition_order(&defs) {
            self.apply(dir)?;
        }
        for pass in 1..3 {
            for dir in dirs {
                let nests = matches!(dir.name.as_str(), "events" | "http" | "server" | "location");
                let defines = matches!(dir.name.as_str(), "split_clients" | "map" | "geo");
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
        let spec = find_in(&dir.name, self.ctx).ok_or_else(|| at(unknown(&dir.name)))?;
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
        self.default_logs().map_err(plain)?;
        let main = self.main_conf();
        let mut servers = Vec::new();
        let mut groups: Vec<(ListenGroup, bool)> = Vec::new();
        let default_port = if self.is_root { 80 } else { 8000 };
        let mut ssl_shared = super::ssl::SslShared::default();
        let mut client_certs = super::proxy_ssl::ClientCerts::new();
        let mut acme = Vec::new();
        for mut sb in std::mem::take(&mut self.servers) {
            let acme_cert = match &sb.acme {
                Some(d) => Some(super::acme::certificate(
                    &self.acme_issuers,
                    d,
                    &sb.raw_names,
                )?),
                None => None,
            };
            let slot = acme_cert.as_ref().map(|c| Arc::clone(&c.slot));
            acme.extend(acme_cert);
            let server = self.server_conf(&mut sb, &mut ssl_shared, &mut client_certs, slot)?;
            if sb.listens.is_empty() {
                sb.listens.push(ListenB {
                    addr: SocketAddr::from(([0, 0, 0, 0], default_port)),
                    unix: None,
                    default_server: false,
                    backlog: 511,
                    bufs: SocketBufs::default(),
                    ssl: None,
                    http2: false,
                    proxy_protocol: false,
                    quic: None,
                    opts: Default::default(),
                });
            }
            add_listens(&mut groups, &sb.listens, &server).map_err(plain)?;
            servers.push(server);
        }
        self.stream_groups(&mut groups, &mut ssl_shared, &mut client_certs)?;
        quic_keys(&mut groups);
        let cache_zones = self.cache.finish().map_err(plain)?;
        self.access.finish().map_err(plain)?;
        let mut implicit: Vec<_> = self.implicit_upstreams.values().cloned().collect();
        implicit.sort_by(|a, b| a.name.cmp(&b.name));
        self.all_upstreams
            .set(self.upstreams.iter().cloned().chain(implicit).collect());
        Ok(Config {
            main,
            cache_zones,
            body_temp_paths: self.cache.body_temps(&self.prefix),
            servers,
            listens: groups.into_iter().map(|(g, _)| g).collect(),
            files,
            prefix: self.prefix,
            acme,
        })
    }

    /// NGINX's default logs: `logs/error.log` when the config names no
    /// error log, `logs/access.log` (combined) when `http` names no
    /// access log; and the default `root html`, all under the prefix
    /// whatever the working directory (systemd starts servers from `/`).
    /// A default log that cannot be opened (no `logs/` under the prefix)
    /// is an `alert`, not a failure, as NGINX's start-up log is: error
    /// lines go to the standard error and the default access log is off.
    fn default_logs(&mut self) -> Res {
        if self.error_log.is_empty() {
            let path = self.prefix.join("logs/error.log");
            let file = self.logs.get(&path).or_else(|e| {
                eprintln!("porter: [alert] could not open error log file: {e}");
                self.logs.get(Path::new("stderr"))
            })?;
            self.error_log.push(ErrorLogSpec {
                file,
                level: Level::Error,
            });
        }
        if self.http.access_log.is_none() && self.http_seen {
            let path = self.prefix.join("logs/access.log");
            let logs = match self.logs.get(&path) {
                Ok(file) => vec![AccessLog::to_file(file, LogFormat::combined())],
                Err(e) => {
                    eprintln!("porter: [alert] could not open access log file: {e}");
                    Vec::new()
                }
            };
            self.http.access_log = Some(Arc::new(logs));
        }
        if self.http.root.is_none() {
            let html = self.prefix.join("html").to_string_lossy().into_owned();
            self.http.root = Some(DocRoot::Root(Template::literal(&html)));
        }
        Ok(())
    }

    /// The main context's settings, with NGINX's defaults.
    fn main_conf(&mut self) -> MainConf {
        MainConf {
            daemon: self.daemon.unwrap_or(true),
            worker_processes: self.worker_processes.unwrap_or(1),
            worker_connections: self.worker_connections.unwrap_or(512),
            worker_rlimit_nofile: self.rlimit_nofile,
            worker_priority: self.worker_priority,
            worker_cpu_affinity: self.cpu_affinity.take(),
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
            aio_uring: self.uring.take().unwrap_or_default(),
        }
    }

    /// One `server { }` resolved: its settings merged from `http`, its
    /// locations merged from their parents and sorted for lookup.
    fn server_conf(
        &self,
        sb: &mut ServerB,
        ssl_shared: &mut super::ssl::SslShared,
        client_certs: &mut super::proxy_ssl::ClientCerts,
        acme: Option<Arc<crate::acme::slot::CertSlot>>,
    ) -> Result<Arc<ServerConf>, ConfError> {
        sb.loc.inherit(&self.http);
        super::tuning::default_body_temp(&mut sb.loc, &self.prefix);
        let base_s = sb.loc.finish();
        let limits = HeadLimitsConf {
            max_line: base_s.large_client_header_buffers.1,
            max_head: base_s.large_client_header_buffers.0 * base_s.large_client_header_buffers.1,
            header_timeout: base_s.client_header_timeout,
            merge_slashes: base_s.merge_slashes,
            ignore_invalid_headers: base_s.ignore_invalid_headers,
            underscores_in_headers: base_s.underscores_in_headers,
            max_headers: base_s.max_headers,
        };
        // The `listen ... ssl` (else `... quic`) NGINX's message names
        // when the server has no certificate.
        let ssl_listen = sb
            .listens
            .iter()
            .find_map(|l| l.ssl.as_ref().map(|(f, n)| (f, *n, "ssl")))
            .or_else(|| {
                sb.listens
                    .iter()
                    .find_map(|l| l.quic.as_ref().map(|(f, n)| (f, *n, "quic")))
            });
        let quic_listen = sb.listens.iter().find_map(|l| l.quic.as_ref());
        // ALPN offers `h2` where this server speaks HTTP/2.
        let h2 = base_s.http2 || sb.listens.iter().any(|l| l.http2);
        let tls = super::ssl::server_tls(
            &self.ssl_http,
            &sb.ssl,
            ssl_listen,
            limits.header_timeout,
            h2,
            ssl_shared,
            acme,
        )?;
        super::http3::check_quic_tls(quic_listen, tls.as_deref())?;
        let (locations, named) = build_locations(&mut sb.locations, &sb.loc, client_certs)?;
        let script = std::mem::take(&mut sb.script)
            .into_iter()
            .map(|o| o.finish(&[]))
            .collect();
        Ok(Arc::new(ServerConf {
            names: sb.names.clone(),
            primary_name: sb.primary.clone().unwrap_or_default(),
            locations,
            named,
            base: Arc::new(LocationConf {
                path: String::new(),
                kind: LocationKind::Server,
                internal: false,
                noregex: false,
                regex: None,
                nested: LocationTree::default(),
                auto_redirect: false,
                script: Arc::new(Vec::new()),
                handler: Handler::Static,
                limit_except: None,
                s: base_s,
            }),
            script: Arc::new(script),
            limits,
            tls,
            variables: Arc::new(template::defined()),
        }))
    }
}

/// A server's locations built: settings merged top-down (each from its
/// parent, or the server; a proxying location's client certificate
/// loaded), then each location built after the ones inside it (its
/// nested locations and `if` blocks), bottom-up.
fn build_locations(
    list: &mut [LocB],
    server: &LocBuilder,
    client_certs: &mut super::proxy_ssl::ClientCerts,
) -> Result<(LocationTree, NamedLocations), ConfError> {
    // An `if` or `limit_except` block without a handler of its own runs
    // its location's, wherever the location's `proxy_pass` is written.
    for i in 0..list.len() {
        if let (LocationKind::If, Handler::Static, Some(p)) =
            (list[i].kind, &list[i].handler, list[i].parent)
        {
            list[i].handler = list[p].handler.clone();
        }
    }
    let mut merged: Vec<LocBuilder> = Vec::with_capacity(list.len());
    for lb in list.iter() {
        let mut b = lb.loc.clone();
        match lb.parent {
            Some(p) => b.inherit(&merged[p]),
            None => b.inherit(server),
        }
        super::proxy_ssl::load_client_certs(&mut b, &lb.handler, client_certs)?;
        merged.push(b);
    }
    let mut built: Vec<Option<Arc<LocationConf>>> = vec![None; list.len()];
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); list.len()];
    let mut top = Vec::new();
    for (i, lb) in list.iter().enumerate() {
        match lb.parent {
            Some(p) if lb.kind != LocationKind::If => children[p].push(i),
            Some(_) => {}
            None => top.push(i),
        }
    }
    for i in (0..list.len()).rev() {
        let script = std::mem::take(&mut list[i].script)
            .into_iter()
            .map(|o| o.finish(&built))
            .collect();
        let lb = &list[i];
        let nested = tree(children[i].iter().filter_map(|&c| built[c].clone()));
        let auto_redirect = matches!(lb.handler, Handler::Proxy(_))
            && matches!(lb.kind, LocationKind::Prefix | LocationKind::Exact)
            && lb.path.ends_with('/');
        built[i] = Some(Arc::new(LocationConf {
            path: lb.path.clone(),
            kind: lb.kind,
            internal: lb.internal,
            noregex: lb.noregex,
            regex: lb.regex.clone(),
            nested,
            auto_redirect,
            script: Arc::new(script),
            handler: lb.handler.clone(),
            limit_except: super::limit_except::finish(&lb.limit_except, &built),
            s: merged[i].finish(),
        }));
    }
    let mut named = NamedLocations::new();
    let mut at_top = Vec::new();
    for i in top {
        let Some(l) = built[i].clone() else { continue };
        if l.kind == LocationKind::Named {
            named.insert(l.path.clone(), l);
        } else {
            at_top.push(l);
        }
    }
    Ok((tree(at_top.into_iter()), named))
}

/// One level's locations arranged for lookup.
fn tree(locs: impl Iterator<Item = Arc<LocationConf>>) -> LocationTree {
    let mut t = LocationTree::default();
    for l in locs {
        t.auto_redirects |= l.auto_redirect;
        match l.kind {
            LocationKind::Exact => {
                t.exact.insert(l.path.clone(), l);
            }
            LocationKind::Regex => t.regexes.push(l),
            _ => t.prefixes.push(l),
        }
    }
    t.prefixes.sort_by_key(|l| std::cmp::Reverse(l.path.len()));
    t.combine_regexes();
    t
}

fn plain(m: String) -> ConfError {
    ConfError {
        message: m,
        file: None,
        line: 0,
    }
}

/// The key of each QUIC address: its default server's `quic_host_key`,
/// else random bytes made once for this load (NGINX makes one per
/// reload too: tokens and resets of the previous generation no longer
/// verify).
fn quic_keys(groups: &mut [(ListenGroup, bool)]) {
    let mut random = [0u8; 32];
    crate::tls::fill_random(&mut random);
    let random: Arc<[u8]> = Arc::from(random.to_vec());
    for (g, _) in groups.iter_mut().filter(|(g, _)| g.quic) {
        g.quic_key = g.servers[g.default]
            .base
            .s
            .quic_host_key
            .clone()
            .unwrap_or_else(|| Arc::clone(&random));
    }
}

/// Adds `server` to the group of each address it listens on (one default
/// server per address).
fn add_listens(
    groups: &mut Vec<(ListenGroup, bool)>,
    listens: &[ListenB],
    server: &Arc<ServerConf>,
) -> Res {
    for l in listens {
        let quic = l.quic.is_some();
        match groups
            .iter_mut()
            .find(|(g, _)| g.addr == l.addr && g.quic == quic && g.unix == l.unix)
        {
            Some((g, has_default)) => {
                g.ssl |= l.ssl.is_some();
                g.http2 |= l.http2;
                if l.bufs != SocketBufs::default() {
                    g.bufs = l.bufs;
                }
                // The line with socket options gives the address its
                // socket's (NGINX: at most one line per address has them).
                if l.opts.set {
                    g.opts = l.opts;
                    g.backlog = l.backlog;
                }
                g.proxy_protocol |= l.proxy_protocol;
                if l.default_server {
                    if *has_default {
                        let at = l.name();
                        return Err(format!("a duplicate default server for {at}"));
                    }
                    *has_default = true;
                    g.default = g.servers.len();
                }
                g.servers.push(server.clone());
            }
            None => groups.push((
                ListenGroup {
                    addr: l.addr,
                    unix: l.unix.clone(),
                    backlog: l.backlog,
                    bufs: l.bufs,
                    opts: l.opts,
                    servers: vec![server.clone()],
                    default: 0,
                    ssl: l.ssl.is_some(),
                    http2: l.http2,
                    proxy_protocol: l.proxy_protocol,
                    quic,
                    stream: None,
                    udp: false,
                    quic_key: Arc::from(Vec::new()),
                },
                l.default_server,
            )),
        }
    }
    Ok(())
}

// A nested block's error carries its own file:line; it travels out through
// the setter's `String` error via this slot, not re-labelled by the outer.
thread_local! {
    pub(super) static NESTED: std::cell::RefCell<Option<ConfError>> = const { std::cell::RefCell::new(None) };
}

impl Build {
    pub(super) fn walk_nested(&mut self, d: &Directive, ctx: u16) -> Res {
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

/// NGINX's `unknown directive "NAME"`, saying whether NGINX has the
/// directive (porter lacks it) or not (a typo, or a third-party module's).
fn unknown(name: &str) -> String {
    static NGINX: &str = include_str!("../nginx_directives.txt");
    let known = NGINX
        .lines()
        .filter(|l| !l.starts_with('#'))
        .any(|l| l == name);
    let why = if known {
        "NGINX has it, porter does not"
    } else {
        "not an NGINX directive either: a typo, or a third-party module's"
    };
    format!("unknown directive \"{name}\" ({why})")
}
