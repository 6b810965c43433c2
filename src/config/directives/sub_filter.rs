//! The sub filter's directives (`handlers/sub_filter.rs`): `sub_filter`
//! (several per level, a level with none inheriting its parent's, as
//! NGINX's array), `sub_filter_types`, `sub_filter_once`,
//! `sub_filter_last_modified`.

#[allow(unused_imports)]
use super::*;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("sub_filter", HSL, Arity::N(2), |b, d| {
        let pair = SubFilter {
            find: template(&d.args[0])?,
            replace: template(&d.args[1])?,
        };
        if pair.find.is_literal() && d.args[0].is_empty() {
            return Err(format!("empty search pattern in \"{}\" directive", d.name));
        }
        let slot = &mut b.loc().sub_filters;
        let mut list: Vec<SubFilter> = slot.as_deref().cloned().unwrap_or_default();
        if list.len() == 255 {
            return Err("number of search patterns exceeds 255".into());
        }
        list.push(pair);
        *slot = Some(Arc::new(list));
        Ok(())
    }),
    d("sub_filter_types", HSL, Arity::Min(1), |b, d| {
        let v = super::content::html_and(d);
        set_once(&mut b.loc().sub_filter_types, v, d)
    }),
    d(
        "sub_filter_once",
        HSL,
        Arity::N(1),
        loc_flag!(sub_filter_once),
    ),
    d(
        "sub_filter_last_modified",
        HSL,
        Arity::N(1),
        loc_flag!(sub_filter_last_modified),
    ),
];
