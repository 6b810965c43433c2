//! Disk I/O directives: `thread_pool`, `aio`, `aio_write`,
//! `aio_fast_path`, `sendfile`, `sendfile_max_chunk`, `directio`,
//! `directio_alignment`, `open_file_cache*`.

#[allow(unused_imports)]
use super::*;
use crate::disk::uring::UringSpec;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("sendfile", HSL, Arity::N(1), loc_flag!(sendfile)),
    d(
        "sendfile_max_chunk",
        HSL,
        Arity::N(1),
        loc_size!(sendfile_max_chunk),
    ),
    d("directio", HSL, Arity::N(1), set_directio),
    d("directio_alignment", HSL, Arity::N(1), |b, d| {
        match size(d, &d.args[0])? {
            n if n.is_power_of_two() => set_once(&mut b.loc().directio_alignment, n, d),
            _ => Err(format!(
                "\"directio_alignment\" must be a power of two, not \"{}\"",
                d.args[0]
            )),
        }
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
];

/// `thread_pool NAME threads=N [max_queue=M]`, NGINX's messages.
pub(super) fn set_thread_pool(b: &mut Build, d: &Directive) -> Res {
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

/// `aio off | threads[=NAME|=$var] | on`. A literal pool name must be
/// declared (or be `default`); a variable one is resolved per request.
pub(super) fn set_aio(b: &mut Build, d: &Directive) -> Res {
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

/// `directio SIZE | off`: files of at least SIZE bytes are read with
/// `O_DIRECT` on a pool (the `default` one under `aio off`, so it exists).
fn set_directio(b: &mut Build, d: &Directive) -> Res {
    let v = match d.args[0].as_str() {
        "off" => None,
        a => Some(size(d, a)?),
    };
    if v.is_some() {
        b.default_pool_used = true;
    }
    set_once(&mut b.loc().directio, v, d)
}

/// `open_file_cache off | max=N [inactive=T]`.
pub(super) fn set_open_file_cache(b: &mut Build, d: &Directive) -> Res {
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
