//! Log directives: `error_log`, `log_format`, `access_log`,
//! `log_not_found`. `error_log` in `http`, `server` or `location` gives
//! that level's requests their own error log (`RequestCtx::log`);
//! `access_log ... if=COND` skips the line when COND renders empty or `0`.
//! A `syslog:...` target of either is a `LogFile::syslog` (`log/syslog.rs`).

#[allow(unused_imports)]
use super::*;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("error_log", MAIN | HSL, Arity::Range(1, 2), set_error_log),
    d("log_format", HTTP, Arity::Min(2), set_log_format),
    d("access_log", HSL | LMT, Arity::Range(1, 4), set_access_log),
    d("log_not_found", HSL, Arity::N(1), loc_flag!(log_not_found)),
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
    let mut condition = None;
    let syslog = d.args[0].strip_prefix("syslog:");
    for extra in d.args.iter().skip(2) {
        if let Some(c) = extra.strip_prefix("if=") {
            condition = Some(template(c)?);
        } else if !(extra.starts_with("buffer=")
            || extra.starts_with("flush=")
            || extra.starts_with("gzip"))
        {
            return Err(format!("invalid parameter \"{extra}\""));
        } else if syslog.is_some() {
            return Err("logs to syslog cannot be buffered".into());
        }
    }
    let file = match syslog {
        Some(args) => crate::log::LogFile::syslog(args)?,
        None => {
            let path = b.full_path(&d.args[0]);
            b.logs.get(&path)?
        }
    };
    let slot = &mut b.loc().access_log;
    let mut list: Vec<AccessLog> = slot.as_deref().cloned().unwrap_or_default();
    list.push(AccessLog {
        file,
        format,
        condition,
    });
    *slot = Some(Arc::new(list));
    Ok(())
}
