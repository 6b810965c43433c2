//! `map $source $variable { … }` (`vars::map`) and `geo [$address]
//! $variable { … }` (`vars::geo`): read in the walker's first pass with
//! `split_clients`, so every directive can use the variable wherever the
//! block is written.

#[allow(unused_imports)]
use super::*;
use crate::vars::geo::GeoBuilder;
use crate::vars::map::MapBuilder;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    blk("map", HTTP | STREAM, Arity::N(2), set_map),
    blk("geo", HTTP | STREAM, Arity::Range(1, 2), set_geo),
];

/// The variable a block defines: `$name` as written, not one porter
/// itself provides. One the configuration defined already (another
/// `map`, `geo` or `split_clients`) is defined again, the last block
/// winning, as NGINX's changeable variables are.
fn defined_name(arg: &str) -> Result<&str, String> {
    let name = match arg.strip_prefix('$') {
        Some(n) if !n.is_empty() => n,
        _ => return Err(format!("invalid variable name \"{arg}\"")),
    };
    if template::is_defined_by_config(name) {
        return Ok(name);
    }
    if let Some(v) = Var::from_name(name) {
        // NGINX's changeable variables (`$uid_reset`) may be defined.
        if !matches!(v, Var::Indexed(_)) && !v.changeable() {
            return Err(format!("the duplicate \"{name}\" variable"));
        }
    }
    Ok(name)
}

/// The variable a `map`, `geo` or `split_clients` block defines.
fn defines(d: &Directive) -> Option<&str> {
    let arg = match d.name.as_str() {
        "map" | "split_clients" => d.args.get(1)?,
        "geo" => d.args.last()?,
        _ => return None,
    };
    arg.strip_prefix('$')
}

/// Whether `d` (its arguments and block, at any depth) mentions `$name`
/// or `${name}`.
fn mentions(d: &Directive, name: &str) -> bool {
    let in_text = |t: &str| {
        t.match_indices('$').any(|(i, _)| {
            let rest = t[i + 1..].strip_prefix('{').unwrap_or(&t[i + 1..]);
            rest.strip_prefix(name).is_some_and(|after| {
                !after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            })
        })
    };
    in_text(&d.name)
        || d.args.iter().any(|a| in_text(a))
        || d.block.iter().flatten().any(|e| mentions(e, name))
}

/// The order to read a block's `map`, `geo` and `split_clients`
/// definitions in: one whose values or source use a variable another of
/// them defines comes after it, as NGINX resolves variables once the
/// whole configuration is read (a map may name a map written below it).
/// A cycle keeps file order, and reading reports the unknown variable.
pub(super) fn definition_order<'a>(defs: &[&'a Directive]) -> Vec<&'a Directive> {
    let mut pending: Vec<&Directive> = defs.to_vec();
    let mut order = Vec::with_capacity(pending.len());
    while !pending.is_empty() {
        let ready = pending.iter().position(|d| {
            pending.iter().all(|other| {
                std::ptr::eq(*other, *d) || defines(other).is_none_or(|n| !mentions(d, n))
            })
        });
        order.push(pending.remove(ready.unwrap_or(0)));
    }
    order
}

fn set_geo(_: &mut Build, d: &Directive) -> Res {
    let (source, name) = match d.args.as_slice() {
        [name] => (None, defined_name(name)?),
        [source, name] => {
            if !source.starts_with('$') || source.len() == 1 {
                return Err(format!("invalid variable name \"{source}\""));
            }
            (Some(template(source)?), defined_name(name)?)
        }
        _ => unreachable!("arity"),
    };
    let mut geo = GeoBuilder::new(name, source, template::new_slot());
    for e in d.block.as_deref().unwrap_or(&[]) {
        if e.block.is_some() {
            return http::inner_error(e, format!("unexpected \"{{\" after \"{}\"", e.name));
        }
        let mut words: Vec<&str> = vec![e.name.as_str()];
        words.extend(e.args.iter().map(String::as_str));
        let r = geo.line(&words);
        for w in geo.take_warnings() {
            warn(e, &w);
        }
        if let Err(m) = r {
            return http::inner_error(e, m);
        }
    }
    template::define(name, crate::vars::geo::var(geo.finish()));
    Ok(())
}

fn set_map(_: &mut Build, d: &Directive) -> Res {
    let source = template(&d.args[0])?;
    let name = defined_name(&d.args[1])?;
    let mut map = MapBuilder::new(name, source, template::new_slot());
    let entries = d.block.as_deref().unwrap_or(&[]);
    for e in entries {
        if e.block.is_some() {
            return http::inner_error(e, format!("unexpected \"{{\" after \"{}\"", e.name));
        }
        let r = match (e.name.as_str(), e.args.as_slice()) {
            ("hostnames", []) => {
                map.hostnames();
                Ok(())
            }
            ("volatile", []) => {
                map.volatile();
                Ok(())
            }
            (key, [value]) => map.entry_with(key, || template(value)),
            _ => Err("invalid number of the map parameters".to_string()),
        };
        if let Err(m) = r {
            return http::inner_error(e, m);
        }
    }
    template::define(name, crate::vars::map::var(map.finish()));
    Ok(())
}
