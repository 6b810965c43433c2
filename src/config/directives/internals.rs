//! Directives that tune NGINX's internals (hash table sizes, output
//! buffers, the PCRE JIT, the environment, dynamic modules): validated as
//! NGINX validates them, then one `notice` per line says what porter does
//! instead, so a stock config loads and its reader knows the line changes
//! nothing a client sees. `worker_cpu_affinity` is applied (the worker
//! threads are pinned, `runtime::worker`).

#[allow(unused_imports)]
use super::*;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("map_hash_max_size", HTTP, Arity::N(1), hash_number),
    d("map_hash_bucket_size", HTTP, Arity::N(1), hash_size),
    d("proxy_headers_hash_max_size", HSL, Arity::N(1), hash_number),
    d(
        "proxy_headers_hash_bucket_size",
        HSL,
        Arity::N(1),
        hash_size,
    ),
    d("output_buffers", HSL, Arity::N(2), set_output_buffers),
    d("read_ahead", HSL, Arity::N(1), |b, d| {
        super::tuning::size_only(b, d)?;
        notice(
            d,
            "has no effect: porter reads ahead itself, per stream (\"The disk layer\")",
        );
        Ok(())
    }),
    d("postpone_output", HSL, Arity::N(1), |b, d| {
        super::tuning::size_only(b, d)?;
        notice(
            d,
            "has no effect: porter writes a response's head and first bytes in one system call; the slice filter alone gathers NGINX's default 1460 bytes before its first write",
        );
        Ok(())
    }),
    d(
        "open_log_file_cache",
        HSL,
        Arity::Range(1, 4),
        set_open_log_file_cache,
    ),
    d("pcre_jit", MAIN, Arity::N(1), |_, d| {
        flag(d)?;
        notice(
            d,
            "has no effect: porter's regular expressions are compiled to automata when the configuration loads",
        );
        Ok(())
    }),
    d("env", MAIN, Arity::N(1), |_, d| {
        if d.args[0].is_empty() || d.args[0].starts_with('=') {
            return Err(invalid(d));
        }
        notice(
            d,
            "has no effect: porter's workers are threads of one process and keep its environment",
        );
        Ok(())
    }),
    d("load_module", MAIN, Arity::N(1), load_module),
    d("lock_file", MAIN, Arity::N(1), |_, d| {
        notice(
            d,
            "has no effect: porter's workers are threads and share no lock file",
        );
        Ok(())
    }),
    d("worker_aio_requests", EVENTS, Arity::N(1), |b, d| {
        super::tuning::number_only(b, d)?;
        notice(
            d,
            "has no effect: porter's disk reads go to its thread pool (\"The disk layer\")",
        );
        Ok(())
    }),
    d("send_lowat", HSL, Arity::N(1), |b, d| {
        super::tuning::size_only(b, d)?;
        // NGINX on Linux, where SO_SNDLOWAT cannot be set, says the same.
        super::warn(d, "\"send_lowat\" is not supported, ignored");
        Ok(())
    }),
    d("worker_cpu_affinity", MAIN, Arity::Min(1), set_cpu_affinity),
];

/// `porter: [notice] "NAME" WHAT in FILE:LINE`.
pub(super) fn notice(d: &Directive, what: &str) {
    super::notice(d, &format!("\"{}\" {what}", d.name));
}

pub(super) fn hash_number(b: &mut Build, d: &Directive) -> Res {
    super::tuning::number_only(b, d)?;
    notice(d, "has no effect: porter's lookup tables grow as needed");
    Ok(())
}

pub(super) fn hash_size(b: &mut Build, d: &Directive) -> Res {
    super::tuning::size_only(b, d)?;
    notice(d, "has no effect: porter's lookup tables grow as needed");
    Ok(())
}

/// `output_buffers NUMBER SIZE`.
fn set_output_buffers(_: &mut Build, d: &Directive) -> Res {
    match (d.args[0].parse::<u64>(), parse_size(&d.args[1])) {
        (Ok(n), Some(s)) if n > 0 && s > 0 => {}
        _ => return Err(invalid(d)),
    }
    notice(
        d,
        "has no effect: porter reads files into one connection buffer or sends them with sendfile",
    );
    Ok(())
}

/// `open_log_file_cache off | max=N [inactive=TIME] [min_uses=N]
/// [valid=TIME]`, with NGINX's errors and defaults (10 s, 1, 60 s): the
/// files kept open for access logs whose path has variables
/// (`log/by_path.rs`).
fn set_open_log_file_cache(b: &mut Build, d: &Directive) -> Res {
    if d.args.len() == 1 && d.args[0] == "off" {
        return set_once(&mut b.loc().open_log_file_cache, None, d);
    }
    let mut c = crate::log::OpenLogCache {
        max: 0,
        inactive: std::time::Duration::from_secs(10),
        min_uses: 1,
        valid: std::time::Duration::from_secs(60),
    };
    for a in &d.args {
        let ok = match a.split_once('=') {
            Some(("max", n)) => n
                .parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .map(|n| c.max = n),
            Some(("min_uses", n)) => n.parse::<u32>().ok().map(|n| c.min_uses = n),
            Some(("inactive", t)) => parse_time(t).map(|t| c.inactive = t),
            Some(("valid", t)) => parse_time(t).map(|t| c.valid = t),
            _ => None,
        };
        if ok.is_none() {
            return Err(format!("invalid \"open_log_file_cache\" parameter \"{a}\""));
        }
    }
    if c.max == 0 {
        return Err("\"open_log_file_cache\" must have \"max\" parameter".into());
    }
    set_once(&mut b.loc().open_log_file_cache, Some(Arc::new(c)), d)
}

/// The dynamic modules whose work porter does itself: loading one is a
/// notice. Any other module is skipped with a warning: Debian's and
/// Ubuntu's stock `nginx.conf` loads every module of `modules-enabled/`
/// (geoip, image_filter, xslt, mail, stream), used or not; a directive of
/// a module porter lacks is still an unknown-directive error at its line.
const BUILT_IN: &[&str] = &["ngx_http_realip_module", "ngx_http_split_clients_module"];

fn load_module(_: &mut Build, d: &Directive) -> Res {
    let file = std::path::Path::new(&d.args[0]);
    let stem = file
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    if BUILT_IN.contains(&stem) {
        notice(d, "has no effect: the module is built into porter");
        return Ok(());
    }
    super::warn(
        d,
        &format!(
            "porter has no \"{stem}\" module and loads none (\"{}\"): its directives are unknown to porter",
            d.args[0]
        ),
    );
    Ok(())
}

/// `worker_cpu_affinity auto [MASK] | MASK ...`: one bit mask per worker
/// (the last one repeats), or `auto` to pin worker N to the Nth CPU of
/// the mask (all CPUs without one), as NGINX does.
fn set_cpu_affinity(b: &mut Build, d: &Directive) -> Res {
    if b.cpu_affinity.is_some() {
        return Err(dup(d));
    }
    let mask = |s: &str| -> Result<u64, String> {
        if s.is_empty() || s.len() > 64 || !s.bytes().all(|c| c == b'0' || c == b'1') {
            return Err(format!(
                "invalid character \"{s}\" in \"worker_cpu_affinity\""
            ));
        }
        Ok(u64::from_str_radix(s, 2).unwrap_or(0))
    };
    let v = match d.args.as_slice() {
        [a] if a == "auto" => CpuAffinity::Auto(u64::MAX),
        [a, m] if a == "auto" => CpuAffinity::Auto(mask(m)?),
        masks => CpuAffinity::Masks(masks.iter().map(|m| mask(m)).collect::<Result<_, _>>()?),
    };
    b.cpu_affinity = Some(v);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::CpuAffinity;

    #[test]
    fn cpu_masks_per_worker_as_nginx_assigns_them() {
        let m = CpuAffinity::Masks(vec![0b01, 0b10]);
        assert_eq!(m.mask_of(0, 2), 0b01);
        assert_eq!(m.mask_of(1, 2), 0b10);
        assert_eq!(m.mask_of(5, 2), 0b10);
        let auto = CpuAffinity::Auto(u64::MAX);
        assert_eq!(auto.mask_of(0, 2), 0b01);
        assert_eq!(auto.mask_of(1, 2), 0b10);
        assert_eq!(auto.mask_of(2, 2), 0b01);
        let some = CpuAffinity::Auto(0b1010);
        assert_eq!(some.mask_of(0, 4), 0b0010);
        assert_eq!(some.mask_of(1, 4), 0b1000);
        // A mask naming no CPU the machine has: every CPU.
        assert_eq!(CpuAffinity::Auto(0b1100).mask_of(0, 2), 0b11);
    }
}
