//! Content modules and body filters: `gzip` and its settings,
//! `gzip_static` (the handlers: `src/handlers/gzip.rs`), `autoindex`
//! (`src/handlers/autoindex.rs`), `source_charset`, `override_charset`,
//! `charset_types`, `charset_map` (`src/handlers/charset.rs`; `charset`
//! itself is in `static_files.rs`), `limit_rate`, `limit_rate_after`
//! (a size or a value with variables; `src/http/rate.rs`), `empty_gif` (`src/handlers/empty_gif.rs`). Values and error
//! texts as NGINX's `ngx_http_gzip_filter_module`,
//! `ngx_http_gzip_static_module` and the core module's `gzip_*` give them.
//! Also `gunzip`, `gunzip_buffers` (`src/handlers/gunzip.rs`) and
//! `random_index` (`src/handlers/random_index.rs`).

#[allow(unused_imports)]
use super::*;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("empty_gif", LOC, Arity::N(0), |b, _| {
        b.location().handler = Handler::EmptyGif;
        Ok(())
    }),
    d("gzip", HSL, Arity::N(1), loc_flag!(gzip)),
    d("gzip_types", HSL, Arity::Min(1), set_gzip_types),
    d(
        "gzip_min_length",
        HSL,
        Arity::N(1),
        loc_size!(gzip_min_length),
    ),
    d("gzip_comp_level", HSL, Arity::N(1), set_gzip_comp_level),
    d("gzip_vary", HSL, Arity::N(1), loc_flag!(gzip_vary)),
    d("gzip_proxied", HSL, Arity::Min(1), set_gzip_proxied),
    d("gzip_disable", HSL, Arity::Min(1), set_gzip_disable),
    d("gzip_http_version", HSL, Arity::N(1), |b, d| {
        let v = match d.args[0].as_str() {
            "1.0" => true,
            "1.1" => false,
            a => return Err(format!("invalid value \"{a}\"")),
        };
        set_once(&mut b.loc().gzip_http10, v, d)
    }),
    // Accepted: porter compresses each piece of the body into a buffer of
    // its own size (docs/differences.md).
    d("gzip_buffers", HSL, Arity::N(2), |_, d| {
        number(d, &d.args[0])?;
        size(d, &d.args[1])?;
        Ok(())
    }),
    d("gzip_static", HSL, Arity::N(1), |b, d| {
        let v = match d.args[0].as_str() {
            "off" => GzipStatic::Off,
            "on" => GzipStatic::On,
            "always" => GzipStatic::Always,
            a => return Err(format!("invalid value \"{a}\" in \"{}\" directive", d.name)),
        };
        set_once(&mut b.loc().gzip_static, v, d)
    }),
    d("gunzip", HSL, Arity::N(1), loc_flag!(gunzip)),
    d("gunzip_buffers", HSL, Arity::N(2), |b, d| {
        let v = match (d.args[0].parse::<u64>(), parse_size(&d.args[1])) {
            (Ok(n), Some(s)) if n > 0 && s > 0 => (n, s),
            _ => return Err(invalid(d)),
        };
        set_once(&mut b.loc().gunzip_buffers, v, d)
    }),
    d("random_index", LOC, Arity::N(1), loc_flag!(random_index)),
    d("autoindex", HSL, Arity::N(1), loc_flag!(autoindex)),
    d("autoindex_format", HSL, Arity::N(1), |b, d| {
        let v = match d.args[0].as_str() {
            "html" => AutoindexFormat::Html,
            "xml" => AutoindexFormat::Xml,
            "json" => AutoindexFormat::Json,
            "jsonp" => AutoindexFormat::Jsonp,
            a => return Err(format!("invalid value \"{a}\" in \"{}\" directive", d.name)),
        };
        set_once(&mut b.loc().autoindex_format, v, d)
    }),
    d(
        "autoindex_exact_size",
        HSL,
        Arity::N(1),
        loc_flag!(autoindex_exact_size),
    ),
    d(
        "autoindex_localtime",
        HSL,
        Arity::N(1),
        loc_flag!(autoindex_localtime),
    ),
    d("source_charset", HSL, Arity::N(1), |b, d| {
        let v = Some(d.args[0].clone());
        let var = super::static_files::charset_template(&d.args[0])?;
        set_once(&mut b.loc().source_charset, v, d)?;
        b.loc().source_charset_var = Some(var);
        Ok(())
    }),
    d(
        "override_charset",
        HSL,
        Arity::N(1),
        loc_flag!(override_charset),
    ),
    d("charset_types", HSL, Arity::Min(1), |b, d| {
        set_once(&mut b.loc().charset_types, html_and(d), d)
    }),
    blk("charset_map", HTTP, Arity::N(2), set_charset_map),
    d("limit_rate", HSL, Arity::N(1), |b, d| {
        let v = size_or_template(d)?;
        let l = b.loc();
        set_once(&mut l.limit_rate, v.0, d)?;
        l.limit_rate_var = Some(v.1);
        Ok(())
    }),
    d("limit_rate_after", HSL, Arity::N(1), |b, d| {
        let v = size_or_template(d)?;
        let l = b.loc();
        set_once(&mut l.limit_rate_after, v.0, d)?;
        l.limit_rate_after_var = Some(v.1);
        Ok(())
    }),
];

/// A size, or (NGINX 1.17 on) a value with variables rendered per
/// request: `(size, None)` or `(0, Some(template))`.
fn size_or_template(d: &Directive) -> Result<(u64, Option<Template>), String> {
    if d.args[0].contains('$') {
        return Ok((0, Some(template(&d.args[0])?)));
    }
    Ok((size(d, &d.args[0])?, None))
}

/// `charset_map FROM TO { XX YY; … }`: hex byte to hex byte, or to the
/// hex bytes of a UTF-8 sequence when TO is `utf-8`; NGINX's checks.
fn set_charset_map(b: &mut Build, d: &Directive) -> Res {
    let (from, to) = (&d.args[0], &d.args[1]);
    let mut map = CharsetMap::new(from, to);
    if from.eq_ignore_ascii_case("utf-8") {
        return Err(format!("\"charset_map\" cannot map from \"{from}\""));
    }
    for e in d.block.as_deref().unwrap_or(&[]) {
        let bad = || format!("invalid value \"{}\"", e.name);
        let [value] = e.args.as_slice() else {
            return Err("invalid parameters number".into());
        };
        let src = u8::from_str_radix(&e.name, 16).map_err(|_| bad())?;
        if e.name.len() != 2 {
            return Err(bad());
        }
        let bytes = (0..value.len())
            .step_by(2)
            .map(|i| {
                value
                    .get(i..i + 2)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
            })
            .collect::<Option<Vec<u8>>>()
            .ok_or_else(|| format!("invalid value \"{value}\""))?;
        if map.to_utf8 {
            if bytes.is_empty() || bytes.len() > 3 || std::str::from_utf8(&bytes).is_err() {
                return Err(format!("invalid value \"{value}\""));
            }
            map.utf8[src as usize] = bytes;
        } else {
            let [dst] = bytes.as_slice() else {
                return Err(format!("invalid value \"{value}\""));
            };
            map.forward[src as usize] = *dst;
            map.backward[*dst as usize] = src;
        }
    }
    let list = b.loc().charset_maps.get_or_insert_with(Default::default);
    Arc::make_mut(list).push(Arc::new(map));
    Ok(())
}

/// `gzip_types`: `text/html` is always in; `*` matches every type.
fn set_gzip_types(b: &mut Build, d: &Directive) -> Res {
    set_once(&mut b.loc().gzip_types, html_and(d), d)
}

/// A MIME type list of NGINX's `ngx_http_types_slot` (`gzip_types`,
/// `charset_types`): the types given, lowercased, and `text/html`, which
/// NGINX always adds.
pub(super) fn html_and(d: &Directive) -> Arc<Vec<String>> {
    let mut list = vec!["text/html".to_string()];
    for a in &d.args {
        let t = a.to_ascii_lowercase();
        if !list.contains(&t) {
            list.push(t);
        }
    }
    Arc::new(list)
}

fn set_gzip_comp_level(b: &mut Build, d: &Directive) -> Res {
    let n = number(d, &d.args[0]).map_err(|_| invalid(d))?;
    if !(1..=9).contains(&n) {
        return Err("value must be equal or more than 1 and equal or less than 9".into());
    }
    set_once(&mut b.loc().gzip_comp_level, n as u32, d)
}

fn set_gzip_proxied(b: &mut Build, d: &Directive) -> Res {
    let mut bits = 0u16;
    for a in &d.args {
        bits |= match a.as_str() {
            "off" => GZIP_PROXIED_OFF,
            "expired" => GZIP_PROXIED_EXPIRED,
            "no-cache" => GZIP_PROXIED_NO_CACHE,
            "no-store" => GZIP_PROXIED_NO_STORE,
            "private" => GZIP_PROXIED_PRIVATE,
            "no_last_modified" => GZIP_PROXIED_NO_LM,
            "no_etag" => GZIP_PROXIED_NO_ETAG,
            "auth" => GZIP_PROXIED_AUTH,
            "any" => GZIP_PROXIED_ANY,
            _ => return Err(format!("invalid value \"{a}\"")),
        };
    }
    set_once(&mut b.loc().gzip_proxied, bits, d)
}

/// `gzip_disable msie6 | degradation | REGEX ...`; a regex matches the
/// `User-Agent` case-insensitively, as NGINX compiles it.
fn set_gzip_disable(b: &mut Build, d: &Directive) -> Res {
    let mut conf = GzipDisable {
        msie6: false,
        patterns: Vec::new(),
    };
    for a in &d.args {
        match a.as_str() {
            "msie6" => conf.msie6 = true,
            // Degradation is an NGINX build option that Debian's nginx
            // lacks too; accepted, never true.
            "degradation" => {}
            re => {
                let r = regex::RegexBuilder::new(re)
                    .case_insensitive(true)
                    .build()
                    .map_err(|e| format!("{e} in \"{re}\""))?;
                conf.patterns.push(r);
            }
        }
    }
    set_once(&mut b.loc().gzip_disable, Some(Arc::new(conf)), d)
}
