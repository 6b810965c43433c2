//! Log directives: `error_log`, `log_format`, `access_log`,
//! `log_not_found`, `log_subrequest` (`handlers::subrequest` writes a
//! subrequest's line). `error_log` in `http`, `server` or `location` gives
//! that level's requests their own error log (`RequestCtx::log`);
//! `access_log ... if=COND` skips the line when COND renders empty or `0`;
//! `gzip[=LEVEL]` compresses the lines; a path with variables is
//! rendered per request (`log/by_path.rs`, under `open_log_file_cache`).
//! A `syslog:...` target of either is a `LogFile::syslog` (`log/syslog.rs`).

#[allow(unused_imports)]
use super::*;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d(
        "error_log",
        MAIN | HSL | STREAM | SSRV,
        Arity::Range(1, 2),
        set_error_log,
    ),
    d("log_format", HTTP, Arity::Min(2), set_log_format),
    d(
        "access_log",
        HSL | LMT | STREAM | SSRV,
        Arity::Min(1),
        set_access_log,
    ),
    d("log_not_found", HSL, Arity::N(1), loc_flag!(log_not_found)),
    d(
        "log_subrequest",
        HSL,
        Arity::N(1),
        loc_flag!(log_subrequest),
    ),
];

fn set_error_log(b: &mut Build, d: &Directive) -> Res {
    let level = match d.args.get(1) {
        Some(l) => Level::parse(l).ok_or_else(|| format!("invalid log level \"{l}\""))?,
        None => Level::Error,
    };
    let target = &d.args[0];
    if target.starts_with("memory:") {
        return Err(format!("\"{target}\" is not supported by porter"));
    }
    let file = match target.strip_prefix("syslog:") {
        Some(args) => crate::log::LogFile::syslog(args)?,
        None if target == "stderr" => b.logs.get(Path::new("stderr"))?,
        None => {
            let path = b.full_path(target);
            b.logs.get(&path)?
        }
    };
    let spec = ErrorLogSpec { file, level };
    if b.ctx == MAIN {
        b.error_log.push(spec);
        return Ok(());
    }
    // http, server or location: the lines of this level replace the
    // outer level's, as NGINX's merge does.
    let slot = &mut b.loc().error_log;
    let mut targets = slot
        .as_ref()
        .and_then(|l| l.as_ref())
        .map(|l| l.targets().to_vec())
        .unwrap_or_default();
    targets.push(spec);
    *slot = Some(Some(crate::log::ErrorLog::new(targets)));
    Ok(())
}

fn set_log_format(b: &mut Build, d: &Directive) -> Res {
    let (name, f) = parse_log_format(d)?;
    if b.formats.contains_key(&name) {
        return Err(format!("duplicate \"log_format\" name \"{name}\""));
    }
    b.formats.insert(name, Arc::new(f));
    Ok(())
}

/// `log_format NAME [escape=…] TEXT…` (the `http` and `stream` blocks' alike).
pub(super) fn parse_log_format(d: &Directive) -> Result<(String, LogFormat), String> {
    let name = &d.args[0];
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
    Ok((name.clone(), f))
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
    // The stream block has its own formats, and no default one.
    let in_stream = b.ctx & (STREAM | SSRV) != 0;
    let formats = if in_stream {
        &b.stream.formats
    } else {
        &b.formats
    };
    let format = match d.args.get(1) {
        Some(name) => formats
            .get(name)
            .cloned()
            .ok_or_else(|| format!("unknown log format \"{name}\""))?,
        None if in_stream => return Err("log format is not specified".into()),
        None => LogFormat::combined(),
    };
    let target = &d.args[0];
    let (condition, gzip, buffered) = access_log_params(target, &d.args[2.min(d.args.len())..])?;
    if buffered && target.contains('$') {
        return Err(format!(
            "buffered logs cannot have variables in name \"{target}\""
        ));
    }
    let dest = if let Some(args) = target.strip_prefix("syslog:") {
        if buffered {
            return Err("logs to syslog cannot be buffered".into());
        }
        LogDest::File(crate::log::LogFile::syslog(args)?)
    } else if target.contains('$') {
        LogDest::Path(template(&b.full_path(target).to_string_lossy())?)
    } else {
        LogDest::File(b.logs.get(&b.full_path(target))?)
    };
    let slot = &mut b.loc().access_log;
    let mut list: Vec<AccessLog> = slot.as_deref().cloned().unwrap_or_default();
    list.push(AccessLog {
        dest,
        format,
        condition,
        gzip,
    });
    *slot = Some(Arc::new(list));
    Ok(())
}

/// `access_log`'s parameters after the format, with NGINX's checks:
/// `buffer=SIZE`, `flush=TIME` (only with a buffer), `gzip[=1..9]`,
/// `if=COND`. porter's log thread writes each batch of lines as it comes,
/// so `buffer` and `flush` change no line; `gzip` compresses each batch.
type LogParams = (Option<Template>, Option<u32>, bool);

fn access_log_params(target: &str, params: &[String]) -> Result<LogParams, String> {
    let (mut condition, mut gzip) = (None, None);
    let (mut buffer, mut flush) = (false, false);
    for p in params {
        if let Some(c) = p.strip_prefix("if=") {
            condition = Some(template(c)?);
        } else if let Some(v) = p.strip_prefix("buffer=") {
            parse_size(v).ok_or_else(|| format!("invalid buffer size \"{v}\""))?;
            buffer = true;
        } else if let Some(v) = p.strip_prefix("flush=") {
            parse_time(v).ok_or_else(|| format!("invalid flush time \"{v}\""))?;
            flush = true;
        } else if p == "gzip" {
            gzip = Some(1);
        } else if let Some(v) = p.strip_prefix("gzip=") {
            match v.parse::<u32>() {
                Ok(l @ 1..=9) => gzip = Some(l),
                _ => return Err(format!("invalid compression level \"{v}\"")),
            }
        } else {
            return Err(format!("invalid parameter \"{p}\""));
        }
    }
    if flush && !buffer && gzip.is_none() {
        return Err(format!("no buffer is defined for access_log \"{target}\""));
    }
    Ok((condition, gzip, buffer || gzip.is_some()))
}
