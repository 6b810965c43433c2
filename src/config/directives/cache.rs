//! Proxy-cache directives: the zones (`proxy_cache_path`,
//! `proxy_temp_path`) and what a location caches and how (`proxy_cache*`,
//! `proxy_no_cache`, `proxy_cache_valid`).

#[allow(unused_imports)]
use super::*;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
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
];

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

/// `proxy_cache_purge off | METHOD [from all | ADDR[/BITS] ...]`.
pub(super) fn set_cache_purge(b: &mut Build, d: &Directive) -> Res {
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

/// The proxy cache's part of a build: zones and every cache or temp path
/// with where it was written (NGINX's path registry).
#[derive(Default)]
pub(super) struct CacheBuild {
    zones: Vec<ZoneSpec>,
    /// (path, levels, is a cache path, "file:line").
    paths: Vec<(PathBuf, Levels, bool, String)>,
}

impl CacheBuild {
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

fn place(d: &Directive) -> String {
    format!("{}:{}", d.file.display(), d.line)
}

/// `proxy_cache_path PATH [levels=] keys_zone=NAME:SIZE [inactive=]
/// [max_size=] [min_free=] [use_temp_path=] [manager_*=] [loader_*=]`,
/// with NGINX's checks and messages.
pub(super) fn set_proxy_cache_path(b: &mut Build, d: &Directive) -> Res {
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
pub(super) fn set_proxy_temp_path(b: &mut Build, d: &Directive) -> Res {
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
pub(super) fn set_proxy_cache_valid(b: &mut Build, d: &Directive) -> Res {
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
