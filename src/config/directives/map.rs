//! `map $source $variable { … }` (`vars::map`): read in the walker's
//! first pass with `split_clients`, so every directive can use the
//! variable wherever the block is written.

#[allow(unused_imports)]
use super::*;
use crate::vars::map::MapBuilder;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[blk("map", HTTP, Arity::N(2), set_map)];

fn set_map(_: &mut Build, d: &Directive) -> Res {
    let source = template(&d.args[0])?;
    let name = match d.args[1].strip_prefix('$') {
        Some(n) if !n.is_empty() => n,
        _ => return Err(format!("invalid variable name \"{}\"", d.args[1])),
    };
    if let Some(v) = Var::from_name(name) {
        if !matches!(v, Var::Indexed(_)) {
            return Err(format!("the duplicate \"{name}\" variable"));
        }
    }
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
