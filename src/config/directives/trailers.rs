//! `add_trailer NAME VALUE [always]` (issue 13): header fields sent after
//! the last chunk of a chunked HTTP/1.1 response, with NGINX's rules
//! (`handlers::trailers`). Lines inherit as `add_header` lines do: a level
//! with its own replaces its parent's.

#[allow(unused_imports)]
use super::*;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[d("add_trailer", HSL, Arity::Range(2, 3), set_add_trailer)];

fn set_add_trailer(b: &mut Build, d: &Directive) -> Res {
    let always = match d.args.get(2).map(String::as_str) {
        None => false,
        Some("always") => true,
        Some(p) => return Err(format!("invalid parameter \"{p}\"")),
    };
    let t = AddHeader::new(&d.args[0], template(&d.args[1])?, always);
    let slot = &mut b.loc().add_trailers;
    let mut list: Vec<AddHeader> = slot.as_deref().cloned().unwrap_or_default();
    list.push(t);
    *slot = Some(Arc::new(list));
    Ok(())
}
