//! The userid module's directives (`ngx_http_userid_filter_module`):
//! `userid`, `userid_service`, `userid_name`, `userid_domain`,
//! `userid_path`, `userid_expires`, `userid_flags`, `userid_p3p`,
//! `userid_mark`, with NGINX's values and error texts; the settings are
//! `config/userid_conf.rs`, the filter `handlers/userid.rs`.

#[allow(unused_imports)]
use super::*;
use crate::config::userid_conf::*;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("userid", HSL, Arity::N(1), |b, d| {
        let v = match d.args[0].as_str() {
            "off" => UseridMode::Off,
            "log" => UseridMode::Log,
            "v1" => UseridMode::V1,
            "on" => UseridMode::On,
            a => return Err(format!("invalid value \"{a}\"")),
        };
        set_once(&mut b.loc().userid.mode, v, d)
    }),
    d("userid_service", HSL, Arity::N(1), |b, d| {
        let v = d.args[0]
            .parse::<u64>()
            .map_err(|_| format!("\"{}\" directive invalid number", d.name))?;
        set_once(&mut b.loc().userid.service, Some(v as u32), d)
    }),
    d("userid_name", HSL, Arity::N(1), |b, d| {
        set_once(&mut b.loc().userid.name, d.args[0].clone(), d)
    }),
    d("userid_domain", HSL, Arity::N(1), |b, d| {
        let v = match d.args[0].as_str() {
            "none" => String::new(),
            a => format!("; domain={a}"),
        };
        set_once(&mut b.loc().userid.domain, v, d)
    }),
    d("userid_path", HSL, Arity::N(1), |b, d| {
        let v = format!("; path={}", d.args[0]);
        set_once(&mut b.loc().userid.path, v, d)
    }),
    d("userid_expires", HSL, Arity::N(1), |b, d| {
        let v = match d.args[0].as_str() {
            "max" => UID_MAX_EXPIRES,
            "off" => 0,
            a => parse_time(a)
                .ok_or_else(|| format!("\"{}\" directive invalid value", d.name))?
                .as_secs(),
        };
        set_once(&mut b.loc().userid.expires, v, d)
    }),
    d("userid_flags", HSL, Arity::Range(1, 3), set_flags),
    d("userid_p3p", HSL, Arity::N(1), |b, d| {
        let v = match d.args[0].as_str() {
            "none" => String::new(),
            a => a.to_string(),
        };
        set_once(&mut b.loc().userid.p3p, v, d)
    }),
    d("userid_mark", HSL, Arity::N(1), |b, d| {
        let v = match d.args[0].as_bytes() {
            b"off" => 0,
            [c] if c.is_ascii_alphanumeric() || *c == b'=' => *c,
            _ => {
                return Err(format!(
                    "\"{}\" directive value must be \"off\" or a single letter, digit or \"=\"",
                    d.name
                ))
            }
        };
        set_once(&mut b.loc().userid.mark, v, d)
    }),
];

/// `userid_flags`: NGINX's bitmask slot (names matched without regard
/// to case; a repeated one warned about).
fn set_flags(b: &mut Build, d: &Directive) -> Res {
    let mut bits = 0u8;
    for a in &d.args {
        let bit = match a.to_ascii_lowercase().as_str() {
            "off" => UID_OFF,
            "secure" => UID_SECURE,
            "httponly" => UID_HTTPONLY,
            "samesite=strict" => UID_STRICT,
            "samesite=lax" => UID_LAX,
            "samesite=none" => UID_NONE,
            _ => return Err(format!("invalid value \"{a}\"")),
        };
        if bits & bit != 0 {
            warn(d, &format!("duplicate value \"{a}\""));
        }
        bits |= bit;
    }
    set_once(&mut b.loc().userid.flags, bits, d)
}
