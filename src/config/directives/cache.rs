//! Cache directives: the zones (`proxy_cache_path`, `fastcgi_cache_path`,
//! one namespace), the temp paths, and what a location caches and how
//! (`proxy_cache*`, `proxy_no_cache`, `proxy_cache_valid` and their
//! `fastcgi_` twins), generated per protocol prefix by `cache_rows!` into
//! the protocol's `config::cache_conf::CacheSettings`.

#[allow(unused_imports)]
use super::*;
use crate::config::cache_conf::CacheBuilder;

/// The rows of one protocol's cache directives, `PREFIX_cache*`,
/// `PREFIX_no_cache`, `PREFIX_temp_path`, filling `LocBuilder::$group`
/// (a [`CacheBuilder`](crate::config::cache_conf::CacheBuilder)): a
/// protocol's cache is one line here and one in `model.rs`.
macro_rules! cache_rows {
    ($prefix:literal, $group:ident) => {
        &[
            d(concat!($prefix, "_cache"), HSL, Arity::N(1), |b, d| {
                let v = match d.args[0].as_str() {
                    "off" => None,
                    name => {
                        let t = template(name)?;
                        if t.is_literal() {
                            b.cache.claim(name, $prefix)?;
                        }
                        Some(t)
                    }
                };
                set_once(&mut b.loc().$group.zone, v, d)
            }),
            d(concat!($prefix, "_cache_key"), HSL, Arity::N(1), |b, d| {
                let t = template(&d.args[0])?;
                set_once(&mut b.loc().$group.key, Some(t), d)
            }),
            d(
                concat!($prefix, "_cache_methods"),
                HSL,
                Arity::Min(1),
                |b, d| {
                    let m = cache_methods(d)?;
                    set_once(&mut b.loc().$group.methods, m, d)
                },
            ),
            d(
                concat!($prefix, "_cache_min_uses"),
                HSL,
                Arity::N(1),
                |b, d| {
                    let n = d.args[0]
                        .parse::<u64>()
                        .map_err(|_| format!("\"{}\" directive invalid number", d.name))?;
                    set_once(&mut b.loc().$group.min_uses, n, d)
                },
            ),
            d(
                concat!($prefix, "_cache_bypass"),
                HSL,
                Arity::Min(1),
                |b, d| push_predicates(&mut b.loc().$group.bypass, d),
            ),
            d(concat!($prefix, "_no_cache"), HSL, Arity::Min(1), |b, d| {
                push_predicates(&mut b.loc().$group.no_cache, d)
            }),
            d(concat!($prefix, "_cache_lock"), HSL, Arity::N(1), |b, d| {
                let v = flag(d)?;
                set_once(&mut b.loc().$group.lock, v, d)
            }),
            d(
                concat!($prefix, "_cache_lock_timeout"),
                HSL,
                Arity::N(1),
                |b, d| {
                    let v = time(d, &d.args[0])?;
                    set_once(&mut b.loc().$group.lock_timeout, v, d)
                },
            ),
            d(
                concat!($prefix, "_cache_lock_age"),
                HSL,
                Arity::N(1),
                |b, d| {
                    let v = time(d, &d.args[0])?;
                    set_once(&mut b.loc().$group.lock_age, v, d)
                },
            ),
            d(
                concat!($prefix, "_cache_use_stale"),
                HSL,
                Arity::Min(1),
                |b, d| {
                    let bits = use_stale(d)?;
                    set_once(&mut b.loc().$group.use_stale, bits, d)
                },
            ),
            d(
                concat!($prefix, "_cache_background_update"),
                HSL,
                Arity::N(1),
                |b, d| {
                    let v = flag(d)?;
                    set_once(&mut b.loc().$group.background_update, v, d)
                },
            ),
            d(
                concat!($prefix, "_cache_revalidate"),
                HSL,
                Arity::N(1),
                |b, d| {
                    let v = flag(d)?;
                    set_once(&mut b.loc().$group.revalidate, v, d)
                },
            ),
            d(
                concat!($prefix, "_cache_purge"),
                HSL,
                Arity::Min(1),
                |b, d| {
                    let p = cache_purge(d)?;
                    set_once(&mut b.loc().$group.purge, p, d)
                },
            ),
            d(
                concat!($prefix, "_cache_max_range_offset"),
                HSL,
                Arity::N(1),
                |b, d| {
                    let v = parse_size(&d.args[0]).ok_or_else(|| invalid(d))?;
                    set_once(&mut b.loc().$group.max_range_offset, Some(v), d)
                },
            ),
            d(
                concat!($prefix, "_cache_path"),
                HTTP,
                Arity::Min(2),
                set_cache_path,
            ),
            d(
                concat!($prefix, "_temp_path"),
                HSL,
                Arity::Range(1, 4),
                |b, d| {
                    let t = temp_path(b, d)?;
                    set_once(&mut b.loc().$group.temp_path, Some(t.clone()), d)?;
                    b.cache.paths.push((t.path, t.levels, false, place(d)));
                    Ok(())
                },
            ),
            d(
                concat!($prefix, "_cache_valid"),
                HSL,
                Arity::Min(1),
                |b, d| {
                    let rules = cache_valid(d)?;
                    let slot = &mut b.loc().$group.valid;
                    let mut list: Vec<CacheValid> = slot.as_deref().cloned().unwrap_or_default();
                    list.extend(rules);
                    *slot = Some(Arc::new(list));
                    Ok(())
                },
            ),
        ]
    };
}

/// `proxy_cache*`.
pub(super) static PROXY_ROWS: &[Spec] = cache_rows!("proxy", proxy_cache);

/// `fastcgi_cache*` (ngx_http_fastcgi_module's, the proxy's rules).
pub(super) static FASTCGI_ROWS: &[Spec] = cache_rows!("fastcgi", fastcgi_cache);

/// `uwsgi_cache*`, `uwsgi_no_cache`, `uwsgi_temp_path`, `uwsgi_cache_path`.
pub(super) static UWSGI_ROWS: &[Spec] = cache_rows!("uwsgi", uwsgi_cache);

/// `scgi_cache*`, `scgi_no_cache`, `scgi_temp_path`, `scgi_cache_path`.
pub(super) static SCGI_ROWS: &[Spec] = cache_rows!("scgi", scgi_cache);

/// NGINX's merge-time warning `no "fastcgi_cache_key" for
/// "fastcgi_cache"` (FastCGI, uwsgi and SCGI have no default key), once, at the end of the
/// `http` block where nginx 1.22 reports it: a location whose merged
/// settings turn the cache on without a key.
pub(super) fn warn_missing_keys(b: &Build, http: &Directive) {
    type Group = fn(&LocBuilder) -> &CacheBuilder;
    let families: &[(&str, Group)] = &[
        ("fastcgi", |l| &l.fastcgi_cache),
        ("uwsgi", |l| &l.uwsgi_cache),
        ("scgi", |l| &l.scgi_cache),
    ];
    for (prefix, group) in families {
        let missing = b.servers.iter().any(|sb| {
            sb.locations.iter().any(|lb| {
                let mut chain = vec![group(&lb.loc)];
                let mut p = lb.parent;
                while let Some(i) = p {
                    chain.push(group(&sb.locations[i].loc));
                    p = sb.locations[i].parent;
                }
                chain.extend([group(&sb.loc), group(&b.http)]);
                let on = chain.iter().find_map(|c| c.zone.as_ref());
                matches!(on, Some(Some(_))) && chain.iter().all(|c| c.key.is_none())
            })
        });
        if missing {
            let what = format!("no \"{prefix}_cache_key\" for \"{prefix}_cache\"");
            say_at("warn", &http.file, http.end_line, &what);
        }
    }
}

/// `*_cache_methods GET | HEAD | POST ...` (GET and HEAD always in).
fn cache_methods(d: &Directive) -> Result<CacheMethods, String> {
    let mut m = CacheMethods::default();
    for a in &d.args {
        match a.as_str() {
            "GET" | "HEAD" => {}
            "POST" => m.post = true,
            _ => return Err(format!("invalid value \"{a}\"")),
        }
    }
    Ok(m)
}

/// `*_cache_use_stale` conditions as `STALE_*` bits.
fn use_stale(d: &Directive) -> Result<u16, String> {
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
    Ok(bits)
}

/// Appends `proxy_cache_bypass` / `proxy_no_cache` conditions: repeated
/// directives at one level add up, and a level with none inherits its
/// parent's, as NGINX's predicate slots do.
pub(super) fn push_predicates(slot: &mut Option<Arc<Vec<Template>>>, d: &Directive) -> Res {
    let mut list: Vec<Template> = slot.as_deref().cloned().unwrap_or_default();
    for a in &d.args {
        list.push(template(a)?);
    }
    *slot = Some(Arc::new(list));
    Ok(())
}

/// `*_cache_purge off | METHOD [from all | ADDR[/BITS] ...]`.
fn cache_purge(d: &Directive) -> Result<Option<Arc<CachePurge>>, String> {
    let method = d.args[0].as_str();
    if method == "off" {
        if d.args.len() > 1 {
            return Err(format!("invalid parameter \"{}\"", d.args[1]));
        }
        return Ok(None);
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
    Ok(Some(Arc::new(purge)))
}

/// The proxy cache's part of a build: zones and every cache or temp path
/// with where it was written (NGINX's path registry).
#[derive(Default)]
pub(super) struct CacheBuild {
    zones: Vec<ZoneSpec>,
    /// (path, levels, is a cache path, "file:line").
    paths: Vec<(PathBuf, Levels, bool, String)>,
    /// Zone names and the module (`proxy`, `fastcgi`, ...) that declared
    /// or named them first: NGINX's shared memory zone tag.
    owners: Vec<(String, &'static str)>,
    /// A location proxies (`*_pass`) or takes WebDAV PUTs: request bodies
    /// may go to temp files.
    pub(super) proxies: bool,
    /// `client_body_temp_path` directories named in the configuration.
    body_temps: Vec<PathBuf>,
}

impl CacheBuild {
    /// `name` as `module`'s zone (`*_cache_path` declaring it, `*_cache`
    /// naming it): one declared by another module's `*_cache_path` is
    /// NGINX's error, wherever it comes first.
    pub(super) fn claim(&mut self, name: &str, module: &'static str) -> Res {
        match self.owners.iter().find(|(n, _)| n == name) {
            Some((_, m)) if *m != module => Err(format!(
                "the shared memory zone \"{name}\" is already declared for a different use"
            )),
            Some(_) => Ok(()),
            None => {
                self.owners.push((name.to_string(), module));
                Ok(())
            }
        }
    }

    /// A `client_body_temp_path`, checked against the other paths as
    /// NGINX's `ngx_add_path` checks it.
    pub(super) fn body_temp(&mut self, t: &TempPath, place: String) {
        self.paths
            .push((t.path.clone(), t.levels.clone(), false, place));
        self.body_temps.push(t.path.clone());
    }

    /// A module's default temp directory a `*_store` writes to, made at
    /// start-up with the body temp directories.
    pub(super) fn store_temp(&mut self, p: PathBuf) {
        self.body_temps.push(p);
    }

    /// The body temp directories to make at start-up: those named, and
    /// the default under `prefix`, when a location proxies (none else).
    pub(super) fn body_temps(&mut self, prefix: &Path) -> Vec<PathBuf> {
        if !self.proxies {
            return Vec::new();
        }
        let mut v = std::mem::take(&mut self.body_temps);
        v.push(prefix.join(super::tuning::DEFAULT_BODY_TEMP));
        v.sort();
        v.dedup();
        v
    }

    /// NGINX's path check, made after the whole file as NGINX does (so
    /// its message carries both places and no trailing location).
    pub(super) fn finish(&mut self) -> Result<Vec<ZoneSpec>, String> {
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

pub(super) fn place(d: &Directive) -> String {
    format!("{}:{}", d.file.display(), d.line)
}

/// `proxy_cache_path PATH [levels=] keys_zone=NAME:SIZE [inactive=]
/// [max_size=] [min_free=] [use_temp_path=] [manager_*=] [loader_*=]`,
/// with NGINX's checks and messages; `fastcgi_cache_path` the same, its
/// zones in the same namespace.
fn set_cache_path(b: &mut Build, d: &Directive) -> Res {
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
    let module = ["proxy", "fastcgi", "uwsgi", "scgi"]
        .into_iter()
        .find(|m| d.name.strip_suffix("_cache_path") == Some(m))
        .unwrap_or("proxy");
    b.cache.claim(&spec.name, module)?;
    if b.cache.zones.iter().any(|z| z.name == spec.name) {
        return Err(format!("duplicate zone \"{}\"", spec.name));
    }
    b.cache
        .paths
        .push((path, spec.levels.clone(), true, place(d)));
    b.cache.zones.push(spec);
    Ok(())
}

/// `*_temp_path PATH [L1 [L2 [L3]]]` (`client_body_temp_path` too).
pub(super) fn temp_path(b: &Build, d: &Directive) -> Result<TempPath, String> {
    let mut levels = Vec::new();
    for a in &d.args[1..] {
        match a.parse::<u8>() {
            Ok(n) if (1..=9).contains(&n) => levels.push(n),
            _ => return Err(invalid(d)),
        }
    }
    Ok(TempPath {
        path: b.full_path(&d.args[0]),
        levels: Levels(levels),
    })
}

/// `*_cache_valid [code ...|any] time`; without codes: 200 301 302.
/// Each code becomes one rule, in order, as NGINX keeps them.
fn cache_valid(d: &Directive) -> Result<Vec<CacheValid>, String> {
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
    Ok(rules)
}
