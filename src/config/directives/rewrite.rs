//! The rewrite module's directives: `rewrite`, `set`, `if`, `break`,
//! `rewrite_log`, `uninitialized_variable_warn` (and `return`, whose row
//! is in `http.rs`, compiles to the same program). Each appends an
//! instruction to the program of the level it is written in
//! (`config::rewrite`); `if` in a location also opens a location of its
//! own whose directives apply when the condition holds, as in NGINX.

#[allow(unused_imports)]
use super::*;
use crate::config::rewrite::{Cond, FileTest, If, Op, Rewrite, RewriteFlag};
use crate::vars::regex::Regex;

/// Where a rewrite directive may be written: server, location, and the
/// `if` blocks of both.
const RW: u16 = SRV | SIF | LOC;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("rewrite", RW, Arity::Range(2, 3), set_rewrite),
    d("set", RW, Arity::N(2), set_set),
    blk("if", SRV | LOC, Arity::Min(1), set_if),
    d("break", RW, Arity::N(0), |b, _| {
        b.script().push(OpB::Op(Op::Break));
        Ok(())
    }),
    d("rewrite_log", HSL | SIF, Arity::N(1), |b, d| {
        let v = flag(d)?;
        if b.ctx == SIF {
            return Ok(());
        }
        set_once(&mut b.loc().rewrite_log, v, d)
    }),
    d(
        "uninitialized_variable_warn",
        HSL | SIF,
        Arity::N(1),
        |b, d| {
            let v = flag(d)?;
            if b.ctx == SIF {
                return Ok(());
            }
            set_once(&mut b.loc().uninitialized_variable_warn, v, d)
        },
    ),
];

/// An instruction while the configuration is built: an `if` in a location
/// names its location by index until the locations are built.
pub(super) enum OpB {
    Op(Op),
    If {
        cond: Box<Cond>,
        body: Vec<OpB>,
        loc: Option<usize>,
    },
}

impl OpB {
    /// The instruction, with each `if` location taken from `built`.
    pub(super) fn finish(self, built: &[Option<Arc<LocationConf>>]) -> Op {
        match self {
            OpB::Op(op) => op,
            OpB::If { cond, body, loc } => Op::If(Box::new(If {
                cond: *cond,
                body: body.into_iter().map(|o| o.finish(built)).collect(),
                loc: loc.and_then(|i| built.get(i).cloned().flatten()),
            })),
        }
    }
}

impl Build {
    /// The program of the current level.
    pub(super) fn script(&mut self) -> &mut Vec<OpB> {
        match self.ctx {
            SRV | SIF => &mut self.server().script,
            _ => &mut self.location().script,
        }
    }
}

fn set_rewrite(b: &mut Build, d: &Directive) -> Res {
    let regex = Regex::compile(&d.args[0], false)?;
    let mut raw = d.args[1].as_str();
    let mut flag = match d.args.get(2).map(String::as_str) {
        None => RewriteFlag::Continue,
        Some("last") => RewriteFlag::Last,
        Some("break") => RewriteFlag::Break,
        Some("redirect") => RewriteFlag::Redirect(302),
        Some("permanent") => RewriteFlag::Redirect(301),
        Some(f) => return Err(format!("invalid parameter \"{f}\"")),
    };
    let absolute = ["http://", "https://", "$scheme"]
        .iter()
        .any(|p| raw.starts_with(p));
    if absolute && !matches!(flag, RewriteFlag::Redirect(_)) {
        flag = RewriteFlag::Redirect(302);
    }
    // A final `?` drops the request's arguments.
    let add_args = match raw.strip_suffix('?') {
        Some(r) => {
            raw = r;
            false
        }
        None => true,
    };
    let rw = Rewrite {
        regex,
        replacement: template(raw)?,
        has_args: raw.contains('?'),
        add_args,
        flag,
    };
    b.script().push(OpB::Op(Op::Rewrite(Box::new(rw))));
    Ok(())
}

fn set_set(b: &mut Build, d: &Directive) -> Res {
    let name = match d.args[0].strip_prefix('$') {
        Some(n) if !n.is_empty() => n,
        _ => return Err(format!("invalid variable name \"{}\"", d.args[0])),
    };
    if name == "args" {
        // `$args` and `$limit_rate`: built-in variables `set` changes, as
        // NGINX's changeable ones.
        let value = template(&d.args[1])?;
        b.script().push(OpB::Op(Op::SetArgs(value)));
        return Ok(());
    }
    if name == "limit_rate" {
        let value = template(&d.args[1])?;
        b.script().push(OpB::Op(Op::SetLimitRate(value)));
        return Ok(());
    }
    if let Some(v) = Var::from_name(name) {
        if !matches!(v, Var::Indexed(_)) && !v.changeable() {
            return Err(format!("the duplicate \"{name}\" variable"));
        }
    }
    let var = template::declare_indexed(name);
    var.by_set.store(true, std::sync::atomic::Ordering::Relaxed);
    let value = template(&d.args[1])?;
    b.script().push(OpB::Op(Op::Set(var, value)));
    Ok(())
}

fn set_if(b: &mut Build, d: &Directive) -> Res {
    let cond = Box::new(condition(&d.args)?);
    if b.ctx == SRV {
        let outer = std::mem::take(&mut b.server().script);
        let r = b.walk_nested(d, SIF);
        let body = std::mem::replace(&mut b.server().script, outer);
        r?;
        b.server().script.push(OpB::If {
            cond,
            body,
            loc: None,
        });
        return Ok(());
    }
    // In a location: a location of its own, inheriting the enclosing one.
    let (_, idx) = b.push_noname_location();
    let saved = b.cur_loc.replace(idx);
    let r = b.walk_nested(d, LOC);
    b.cur_loc = saved;
    r?;
    let body = std::mem::take(&mut b.server().locations[idx].script);
    b.script().push(OpB::If {
        cond,
        body,
        loc: Some(idx),
    });
    Ok(())
}

/// Parses `( … )` as NGINX's `ngx_http_rewrite_if_condition`.
fn condition(args: &[String]) -> Result<Cond, String> {
    let invalid = |a: &str| format!("invalid condition \"{a}\"");
    let mut v: Vec<&str> = args.iter().map(String::as_str).collect();
    match v[0].strip_prefix('(') {
        Some("") => {
            v.remove(0);
        }
        Some(rest) => v[0] = rest,
        None => return Err(invalid(v[0])),
    }
    let last = v.len().checked_sub(1).ok_or_else(|| invalid(&args[0]))?;
    match v[last].strip_suffix(')') {
        Some("") => {
            v.pop();
        }
        Some(rest) => v[last] = rest,
        None => return Err(invalid(v[last])),
    }
    let first = *v.first().ok_or_else(|| invalid(&args[0]))?;
    if first.len() > 1 && first.starts_with('$') {
        let subject = template(first)?;
        match v.as_slice() {
            [_] => Ok(Cond::Value(subject)),
            [_, op, value] => match *op {
                "=" => Ok(Cond::Equal(subject, template(value)?, false)),
                "!=" => Ok(Cond::Equal(subject, template(value)?, true)),
                "~" => Ok(Cond::Match(subject, Regex::compile(value, false)?, false)),
                "~*" => Ok(Cond::Match(subject, Regex::compile(value, true)?, false)),
                "!~" => Ok(Cond::Match(subject, Regex::compile(value, false)?, true)),
                "!~*" => Ok(Cond::Match(subject, Regex::compile(value, true)?, true)),
                op => Err(format!("unexpected \"{op}\" in condition")),
            },
            _ => Err(invalid(first)),
        }
    } else if let Some(test) = first.strip_prefix('-').or_else(|| first.strip_prefix("!-")) {
        let negate = first.starts_with('!');
        let test = match test {
            "f" => FileTest::File,
            "d" => FileTest::Dir,
            "e" => FileTest::Exists,
            "x" => FileTest::Exec,
            _ => return Err(invalid(first)),
        };
        match v.as_slice() {
            [_, path] => Ok(Cond::File(template(path)?, test, negate)),
            _ => Err(invalid(first)),
        }
    } else {
        Err(invalid(first))
    }
}

/// Declares, before anything is compiled, every variable the `http` block
/// sets (`set $x`) or captures by name (`(?<x>…)` in a regex), so a
/// directive may use one whatever the order of the blocks, as in NGINX.
pub(super) fn declare_variables(dirs: &[Directive]) {
    for d in dirs {
        match d.name.as_str() {
            "set" => {
                if let Some(n) = d.args.first().and_then(|a| a.strip_prefix('$')) {
                    if !n.is_empty() && !template::is_known(n) {
                        template::declare_indexed(n)
                            .by_set
                            .store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            }
            // Read empty, without a warning, until the subrequest sets it.
            "auth_request_set" => {
                if let Some(n) = d.args.first().and_then(|a| a.strip_prefix('$')) {
                    if !n.is_empty() && !template::is_known(n) {
                        template::declare_indexed(n);
                    }
                }
            }
            "location" | "rewrite" | "if" | "server_name" => {
                for a in &d.args {
                    for name in named_groups(a) {
                        if !template::is_known(name) {
                            template::declare_indexed(name);
                        }
                    }
                }
            }
            _ => {}
        }
        if let Some(block) = &d.block {
            declare_variables(block);
        }
    }
}

/// The names of `(?<name>…)` and `(?P<name>…)` groups in a pattern.
fn named_groups(pattern: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = pattern;
    while let Some(i) = rest.find("(?") {
        rest = &rest[i + 2..];
        let after = rest
            .strip_prefix("P<")
            .or_else(|| rest.strip_prefix('<'))
            .filter(|r| !r.starts_with('=') && !r.starts_with('!'));
        if let Some(r) = after {
            if let Some(end) = r.find('>') {
                let name = &r[..end];
                if !name.is_empty() && name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
                {
                    out.push(name);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn conditions_parse_as_nginx() {
        assert!(matches!(
            condition(&args("($host)")).unwrap(),
            Cond::Value(_)
        ));
        assert!(matches!(
            condition(&args("( $host )")).unwrap(),
            Cond::Value(_)
        ));
        assert!(matches!(
            condition(&args("($host != x)")).unwrap(),
            Cond::Equal(_, _, true)
        ));
        assert!(matches!(
            condition(&args("($uri ~* ^/(a|b))")).unwrap(),
            Cond::Match(_, _, false)
        ));
        assert!(matches!(
            condition(&args("(!-f $request_filename)")).unwrap(),
            Cond::File(_, FileTest::File, true)
        ));
        assert_eq!(
            condition(&args("(a)")).unwrap_err(),
            "invalid condition \"a\""
        );
        assert_eq!(
            condition(&args("($host <> b)")).unwrap_err(),
            "unexpected \"<>\" in condition"
        );
    }

    #[test]
    fn named_groups_are_found() {
        assert_eq!(
            named_groups(r"^/(?<a>\d+)/(?P<b_2>x)(?<=y)(?:z)"),
            vec!["a", "b_2"]
        );
    }
}
