//! HTTP core directives: `http`, `server`, `listen` (parsed in `listen.rs`), `server_name`,
//! `location`, `return`, `error_page`, timeouts, header limits, redirects,
//! `split_clients`, and the handlers `stub_status`, `porter_metrics` and
//! `porter_status`.

#[allow(unused_imports)]
use super::*;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    blk("http", MAIN, Arity::N(0), |b, d| {
        if b.http_seen {
            return Err(dup(d));
        }
        b.http_seen = true;
        super::rewrite::declare_variables(d.block.as_deref().unwrap_or(&[]));
        b.walk_nested(d, HTTP)?;
        super::cache::warn_missing_keys(b, d);
        Ok(())
    }),
    blk(
        "split_clients",
        HTTP | STREAM,
        Arity::N(2),
        set_split_clients,
    ),
    blk("server", HTTP, Arity::N(0), set_server),
    d("listen", SRV, Arity::Min(1), super::listen::set_listen),
    d("server_name", SRV, Arity::Min(1), set_server_name),
    blk("location", SRV | LOC, Arity::Range(1, 2), set_location),
    d("internal", LOC, Arity::N(0), |b, _| {
        b.location().internal = true;
        Ok(())
    }),
    d("return", SRV | SIF | LOC, Arity::Range(1, 2), set_return),
    d("error_page", HSL, Arity::Min(2), set_error_page),
    d(
        "tcp_nodelay",
        HSL | STREAM | SSRV,
        Arity::N(1),
        loc_flag!(tcp_nodelay),
    ),
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
    d(
        "keepalive_disable",
        HSL,
        Arity::Min(1),
        set_keepalive_disable,
    ),
    d("send_timeout", HSL, Arity::N(1), loc_time!(send_timeout)),
    d(
        "client_header_timeout",
        HTTP | SRV,
        Arity::N(1),
        loc_time!(client_header_timeout),
    ),
    d(
        "client_body_timeout",
        HSL,
        Arity::N(1),
        loc_time!(client_body_timeout),
    ),
    d("lingering_close", HSL, Arity::N(1), |b, d| {
        let m = match d.args[0].as_str() {
            "off" => LingeringClose::Off,
            "on" => LingeringClose::On,
            "always" => LingeringClose::Always,
            v => return Err(format!("invalid value \"{v}\" in \"{}\" directive", d.name)),
        };
        set_once(&mut b.loc().lingering_close, m, d)
    }),
    d(
        "lingering_time",
        HSL,
        Arity::N(1),
        loc_time!(lingering_time),
    ),
    d(
        "lingering_timeout",
        HSL,
        Arity::N(1),
        loc_time!(lingering_timeout),
    ),
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
    d("server_tokens", HSL, Arity::N(1), |b, d| {
        // `build` adds the build name NGINX was configured with; porter
        // has none, so it is `on` (as NGINX built without `--build`).
        let v = d.args[0] == "build"
            || flag(d).map_err(|_| {
                format!(
                "invalid value \"{}\" in \"{}\" directive, it must be \"on\", \"off\" or \"build\"",
                d.args[0], d.name
            )
            })?;
        set_once(&mut b.loc().server_tokens, v, d)
    }),
    d("msie_padding", HSL, Arity::N(1), loc_flag!(msie_padding)),
    d("msie_refresh", HSL, Arity::N(1), loc_flag!(msie_refresh)),
    d(
        "chunked_transfer_encoding",
        HSL,
        Arity::N(1),
        loc_flag!(chunked_transfer_encoding),
    ),
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
    d("stub_status", LOC, Arity::Range(0, 1), |b, _| {
        b.location().handler = Handler::StubStatus;
        Ok(())
    }),
    d("porter_metrics", LOC, Arity::N(0), |b, _| {
        b.location().handler = Handler::Metrics(b.all_upstreams.clone());
        Ok(())
    }),
    d("porter_status", LOC, Arity::N(0), |b, _| {
        b.location().handler = Handler::Status(b.all_upstreams.clone());
        Ok(())
    }),
    d(
        "types_hash_max_size",
        HSL,
        Arity::N(1),
        super::internals::hash_number,
    ),
    d(
        "types_hash_bucket_size",
        HSL,
        Arity::N(1),
        super::internals::hash_size,
    ),
    d(
        "server_names_hash_max_size",
        HTTP,
        Arity::N(1),
        super::internals::hash_number,
    ),
    d(
        "server_names_hash_bucket_size",
        HTTP,
        Arity::N(1),
        super::internals::hash_size,
    ),
    d(
        "reset_timedout_connection",
        HSL,
        Arity::N(1),
        loc_flag!(reset_timedout_connection),
    ),
];

fn set_server(b: &mut Build, d: &Directive) -> Res {
    b.servers.push(ServerB {
        loc: LocBuilder::default(),
        names: Vec::new(),
        primary: None,
        listens: Vec::new(),
        script: Vec::new(),
        locations: Vec::new(),
        ssl: Default::default(),
        raw_names: Vec::new(),
        acme: None,
    });
    let saved = b.cur_loc.take();
    let r = b.walk_nested(d, SRV);
    b.cur_loc = saved;
    r
}

fn set_server_name(b: &mut Build, d: &Directive) -> Res {
    let srv = b.server();
    srv.raw_names.extend(d.args.iter().cloned());
    for raw in &d.args {
        if let Some(re) = raw.strip_prefix('~') {
            // NGINX compiles server name regexes caseless.
            let re = crate::vars::regex::Regex::compile(re, true)?;
            if srv.primary.is_none() {
                srv.primary = Some(raw.clone());
            }
            srv.names.push(ServerName::Regex(Arc::new(re)));
            continue;
        }
        let n = raw.to_ascii_lowercase();
        if srv.primary.is_none() {
            // `$server_name` of `.example.com` is `example.com`.
            srv.primary = Some(n.strip_prefix('.').unwrap_or(&n).to_string());
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

/// `location`'s modifier and name: (kind, name, `~*` or `^~`).
fn location_args(d: &Directive) -> Result<(LocationKind, String, bool), String> {
    Ok(match d.args.as_slice() {
        [m, p] => match m.as_str() {
            "=" => (LocationKind::Exact, p.clone(), false),
            "^~" => (LocationKind::Prefix, p.clone(), true),
            "~" => (LocationKind::Regex, p.clone(), false),
            "~*" => (LocationKind::Regex, p.clone(), true),
            _ => return Err(format!("invalid location modifier \"{m}\"")),
        },
        [p] => {
            if let Some(rest) = p.strip_prefix('=') {
                (LocationKind::Exact, rest.to_string(), false)
            } else if let Some(rest) = p.strip_prefix("^~") {
                (LocationKind::Prefix, rest.to_string(), true)
            } else if let Some(rest) = p.strip_prefix("~*") {
                (LocationKind::Regex, rest.to_string(), true)
            } else if let Some(rest) = p.strip_prefix('~') {
                (LocationKind::Regex, rest.to_string(), false)
            } else if p.starts_with('@') {
                (LocationKind::Named, p.clone(), false)
            } else {
                (LocationKind::Prefix, p.clone(), false)
            }
        }
        _ => unreachable!("arity checked"),
    })
}

/// NGINX's checks on a location nested in `outer`.
fn check_nesting(outer: &LocB, kind: LocationKind, path: &str) -> Res {
    match outer.kind {
        LocationKind::Exact => {
            return Err(format!(
                "location \"{path}\" cannot be inside the exact location \"{}\"",
                outer.path
            ))
        }
        LocationKind::Named => {
            return Err(format!(
                "location \"{path}\" cannot be inside the named location \"{}\"",
                outer.path
            ))
        }
        LocationKind::If => return Err("\"location\" directive is not allowed here".into()),
        _ => {}
    }
    if kind == LocationKind::Named {
        return Err(format!(
            "named location \"{path}\" can be on the server level only"
        ));
    }
    if kind != LocationKind::Regex && !path.starts_with(&outer.path) {
        return Err(format!(
            "location \"{path}\" is outside location \"{}\"",
            outer.path
        ));
    }
    Ok(())
}

/// `keepalive_disable none | msie6 | safari ...`.
fn set_keepalive_disable(b: &mut Build, d: &Directive) -> Res {
    let mut off = KeepaliveDisable {
        msie6: false,
        safari: false,
    };
    for a in &d.args {
        match a.as_str() {
            "none" => {}
            "msie6" => off.msie6 = true,
            "safari" => off.safari = true,
            _ => return Err(format!("invalid value \"{a}\"")),
        }
    }
    set_once(&mut b.loc().keepalive_disable, off, d)
}

fn set_location(b: &mut Build, d: &Directive) -> Res {
    let (kind, path, caseless) = location_args(d)?;
    // `^~` is a prefix that stops the regex search (`caseless` means
    // nothing else for a prefix).
    let noregex = kind == LocationKind::Prefix && caseless;
    let regex = match kind {
        LocationKind::Regex => Some(Arc::new(crate::vars::regex::Regex::compile(
            &path, caseless,
        )?)),
        _ => None,
    };
    let parent = if b.ctx == LOC { b.cur_loc } else { None };
    let srv = b.server();
    if let Some(p) = parent {
        check_nesting(&srv.locations[p], kind, &path)?;
    }
    let same_level = |l: &LocB| l.parent == parent && l.kind != LocationKind::If;
    let clash = |l: &LocB| match (l.kind, kind) {
        (LocationKind::Regex, _) | (_, LocationKind::Regex) => false,
        (LocationKind::Exact, LocationKind::Exact) => true,
        (LocationKind::Exact, _) | (_, LocationKind::Exact) => false,
        _ => true,
    };
    if srv
        .locations
        .iter()
        .any(|l| same_level(l) && l.path == path && clash(l))
    {
        return Err(format!("duplicate location \"{path}\""));
    }
    srv.locations.push(LocB {
        path,
        kind,
        internal: false,
        noregex,
        regex,
        script: Vec::new(),
        handler: Handler::Static,
        loc: LocBuilder::default(),
        parent,
        limit_except: None,
    });
    let idx = srv.locations.len() - 1;
    let saved = b.cur_loc.replace(idx);
    let r = b.walk_nested(d, LOC);
    b.cur_loc = saved;
    r
}

/// An error about a line inside a block, reported at that line.
pub(super) fn inner_error(entry: &Directive, message: String) -> Res {
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
    b.script()
        .push(OpB::Op(crate::config::rewrite::Op::Return(ret)));
    Ok(())
}

fn set_error_page(b: &mut Build, d: &Directive) -> Res {
    let target = d.args.last().unwrap();
    let mut codes = Vec::new();
    let mut status = PageStatus::Error;
    for a in &d.args[..d.args.len() - 1] {
        if let Some(rest) = a.strip_prefix('=') {
            if rest.is_empty() {
                status = PageStatus::Page;
            } else {
                let c: u16 = rest.parse().map_err(|_| format!("invalid value \"{a}\""))?;
                status = PageStatus::Set(c);
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

fn set_keepalive_timeout(b: &mut Build, d: &Directive) -> Res {
    let t = time(d, &d.args[0])?;
    let h = d.args.get(1).map(|s| time(d, s)).transpose()?;
    set_once(&mut b.loc().keepalive_timeout, t, d)?;
    b.loc().keepalive_header = Some(h);
    Ok(())
}
