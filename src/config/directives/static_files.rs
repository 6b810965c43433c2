//! Static-file directives: `root`/`alias`, `index`, `try_files`, `types`,
//! `add_header`, `expires`, `charset`, `etag`, `disable_symlinks` (applied
//! by `handlers::disk_io::path_rules` and `disk::open`).

#[allow(unused_imports)]
use super::*;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    blk("types", HSL, Arity::N(0), set_types),
    d("default_type", HSL, Arity::N(1), |b, d| {
        let v = Arc::from(d.args[0].as_str());
        set_once(&mut b.loc().default_type, v, d)
    }),
    d("root", HSL, Arity::N(1), set_root),
    d("alias", LOC, Arity::N(1), set_root),
    d("index", HSL, Arity::Min(1), set_index),
    d("try_files", SRV | LOC, Arity::Min(2), set_try_files),
    d("add_header", HSL, Arity::Range(2, 3), set_add_header),
    d("expires", HSL, Arity::Range(1, 2), set_expires),
    d("charset", HSL, Arity::N(1), |b, d| {
        let v = if d.args[0] == "off" {
            None
        } else {
            Some(d.args[0].clone())
        };
        let var = charset_template(&d.args[0])?;
        set_once(&mut b.loc().charset, v, d)?;
        b.loc().charset_var = Some(var);
        Ok(())
    }),
    d("etag", HSL, Arity::N(1), loc_flag!(etag)),
    d(
        "disable_symlinks",
        HSL,
        Arity::Range(1, 2),
        disable_symlinks,
    ),
];

/// `disable_symlinks off | on | if_not_owner [from=part]`, with NGINX's
/// messages.
fn disable_symlinks(b: &mut Build, d: &Directive) -> Res {
    let mut mode = None;
    let mut from = None;
    for a in &d.args {
        match a.as_str() {
            "off" => mode = Some(SymlinkCheck::Off),
            "on" => mode = Some(SymlinkCheck::On),
            "if_not_owner" => mode = Some(SymlinkCheck::IfNotOwner),
            _ => match a.strip_prefix("from=") {
                Some(part) => from = Some(template(part)?),
                None => return Err(format!("invalid parameter \"{a}\"")),
            },
        }
    }
    let Some(mode) = mode else {
        return Err(format!(
            "\"{}\" must have \"off\", \"on\" or \"if_not_owner\" parameter",
            d.name
        ));
    };
    if d.args.len() == 2 && from.is_none() {
        return Err(format!(
            "duplicate parameters \"{} {}\"",
            d.args[0], d.args[1]
        ));
    }
    if mode == SymlinkCheck::Off && from.is_some() {
        return Err("\"from=\" cannot be used with \"off\" parameter".into());
    }
    set_once(
        &mut b.loc().disable_symlinks,
        DisableSymlinks { mode, from },
        d,
    )
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
        let mime: Arc<str> = Arc::from(entry.name.as_str());
        for ext in &entry.args {
            map.insert(ext.to_ascii_lowercase(), Arc::clone(&mime));
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
            DocRoot::Alias(..) => "alias",
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
    // What the alias replaces: the location's name, or in a regex
    // location the whole URI (NGINX's `clcf->alias`).
    // (`alias` is a location's directive only.)
    b.loc().root = Some(if is_alias {
        let cut = match b.location().kind {
            LocationKind::Regex => None,
            _ => Some(b.location().path.len()),
        };
        DocRoot::Alias(t, cut)
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

fn set_add_header(b: &mut Build, d: &Directive) -> Res {
    let always = match d.args.get(2).map(String::as_str) {
        None => false,
        Some("always") => true,
        Some(p) => return Err(format!("invalid parameter \"{p}\"")),
    };
    let h = AddHeader::new(&d.args[0], template(&d.args[1])?, always);
    let slot = &mut b.loc().add_headers;
    let mut list: Vec<AddHeader> = slot.as_deref().cloned().unwrap_or_default();
    list.push(h);
    *slot = Some(Arc::new(list));
    Ok(())
}

/// A charset name with variables (`charset $arg_c`), rendered per
/// request as NGINX 1.x allows for `charset` and `source_charset`.
pub(super) fn charset_template(name: &str) -> Result<Option<Template>, String> {
    if !name.contains('$') {
        return Ok(None);
    }
    template(name).map(Some)
}

fn set_expires(b: &mut Build, d: &Directive) -> Res {
    let (modified, value) = match d.args.as_slice() {
        [v] => (false, v),
        [m, v] if m == "modified" => (true, v),
        [_, v] => return Err(format!("invalid value \"{v}\"")),
        _ => unreachable!("arity 1-2"),
    };
    let v = if value.contains('$') {
        match modified {
            false => Expires::Var(template(value)?),
            true => Expires::ModifiedVar(template(value)?),
        }
    } else {
        match ExpiresRule::parse(modified, value) {
            Ok(r) => Expires::Fixed(r),
            Err(e) => return Err(format!("{e} \"{value}\"")),
        }
    };
    set_once(&mut b.loc().expires, Some(v), d)
}
