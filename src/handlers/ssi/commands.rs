//! SSI commands, as NGINX's body filter dispatches them: the command
//! table (parameters, which are mandatory, where `elif`/`else`/`endif`
//! may stand), the checks in NGINX's order with its log lines, then each
//! command. A command inside a false `if` branch is skipped but for the
//! conditional ones; inside a `block` it is kept, rewritten, in the block.

use std::rc::Rc;

use super::eval::{self, Encoding, Right};
use super::parse::Command;
use super::{Include, Item, Running, SsiStream, MAX_DEPTH};

/// NGINX's `NGX_HTTP_SSI_MAX_PARAMS`.
const MAX_PARAMS: usize = 16;

/// `conditional`: where a command may stand.
const COND_IF: u8 = 1;
const COND_ELSE: u8 = 2;

/// Which command opens a branch: `if` (not inside another `if`) or
/// `elif`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Branch {
    If,
    Elif,
}

/// One row of the command table.
struct Spec {
    name: &'static str,
    /// Parameter names, and whether each is mandatory.
    params: &'static [(&'static str, bool)],
    /// 0, or the deepest `if` state it may follow.
    conditional: u8,
    /// Runs inside a block being defined (`endblock`).
    block: bool,
}

const fn spec(
    name: &'static str,
    params: &'static [(&'static str, bool)],
    conditional: u8,
    block: bool,
) -> Spec {
    Spec {
        name,
        params,
        conditional,
        block,
    }
}

static COMMANDS: &[Spec] = &[
    spec(
        "include",
        &[
            ("virtual", false),
            ("file", false),
            ("wait", false),
            ("set", false),
            ("stub", false),
        ],
        0,
        false,
    ),
    spec(
        "echo",
        &[("var", true), ("default", false), ("encoding", false)],
        0,
        false,
    ),
    spec("config", &[("errmsg", false), ("timefmt", false)], 0, false),
    spec("set", &[("var", true), ("value", true)], 0, false),
    spec("if", &[("expr", true)], 0, false),
    spec("elif", &[("expr", true)], COND_IF, false),
    spec("else", &[], COND_IF, false),
    spec("endif", &[], COND_ELSE, false),
    spec("block", &[("name", true)], 0, false),
    spec("endblock", &[], 0, true),
];

/// A command's parameters by the table's order.
struct Params(Vec<Option<String>>);

impl Params {
    fn get(&self, i: usize) -> Option<&str> {
        self.0.get(i).and_then(|v| v.as_deref())
    }
}

/// `<!--#name k="v" ... -->` written back, for a block.
fn rewrite(cmd: &Command) -> Vec<u8> {
    let mut s = format!("<!--#{}", cmd.name);
    for (k, v) in &cmd.params {
        s.push_str(&format!(" {k}=\"{v}\""));
    }
    s.push_str(" -->");
    s.into_bytes()
}

/// Checks `cmd`'s parameters against `spec` as NGINX does.
fn params(spec: &Spec, cmd: &Command) -> Result<Params, String> {
    if cmd.params.len() > MAX_PARAMS {
        return Err(format!("too many SSI command parameters: \"{}\"", cmd.name));
    }
    let mut got: Vec<Option<String>> = vec![None; spec.params.len()];
    for (k, v) in &cmd.params {
        let Some(i) = spec.params.iter().position(|(n, _)| n == k) else {
            return Err(format!(
                "invalid parameter name: \"{k}\" in \"{}\" SSI command",
                cmd.name
            ));
        };
        if got[i].is_some() {
            return Err(format!(
                "duplicate \"{k}\" parameter in \"{}\" SSI command",
                cmd.name
            ));
        }
        got[i] = Some(v.clone());
    }
    for (i, (n, mandatory)) in spec.params.iter().enumerate() {
        if *mandatory && got[i].is_none() {
            return Err(format!(
                "mandatory \"{n}\" parameter is absent in \"{}\" SSI command",
                cmd.name
            ));
        }
    }
    Ok(Params(got))
}

impl SsiStream {
    /// Runs (or skips, or keeps in a block) one command.
    pub(super) fn command(&mut self, cmd: Command, out: &mut Vec<u8>) {
        let Some(spec) = COMMANDS.iter().find(|s| s.name == cmd.name) else {
            if self.local.output {
                self.log_error(&format!("invalid SSI command: \"{}\"", cmd.name));
                self.failed(out);
            }
            return;
        };
        if !self.local.output && !spec.block {
            if self.local.block {
                self.to_block(&rewrite(&cmd));
                return;
            }
            if spec.conditional == 0 {
                return;
            }
        }
        let l = &self.local;
        if spec.conditional != 0 && (l.conditional == 0 || l.conditional > spec.conditional) {
            self.log_error(&format!("invalid context of SSI command: \"{}\"", cmd.name));
            self.failed(out);
            return;
        }
        let result = params(spec, &cmd).and_then(|p| self.run(spec.name, &p, out));
        if let Err(why) = result {
            self.log_error(&why);
            self.failed(out);
        }
    }

    fn run(&mut self, name: &str, p: &Params, out: &mut Vec<u8>) -> Result<(), String> {
        match name {
            "include" => self.include(p),
            "echo" => {
                self.echo(p, out);
                Ok(())
            }
            "config" => {
                if let Some(t) = p.get(1) {
                    self.local.timefmt = t.to_string();
                }
                if let Some(e) = p.get(0) {
                    self.local.errmsg = e.to_string();
                }
                Ok(())
            }
            "set" => {
                let value = self.evaluate(p.get(1).unwrap_or(""), false)?;
                let var = p.get(0).unwrap_or("").to_ascii_lowercase();
                self.shared.borrow_mut().set_var(var, value);
                Ok(())
            }
            "if" => self.if_command(Branch::If, p.get(0).unwrap_or("")),
            "elif" => self.if_command(Branch::Elif, p.get(0).unwrap_or("")),
            "else" => {
                self.local.output = !self.local.output_chosen;
                self.local.conditional = COND_ELSE;
                Ok(())
            }
            "endif" => {
                self.local.output = true;
                self.local.output_chosen = false;
                self.local.conditional = 0;
                Ok(())
            }
            "block" => {
                let name = p.get(0).unwrap_or("").to_string();
                self.shared.borrow_mut().blocks.push((name, Vec::new()));
                self.local.output = false;
                self.local.block = true;
                Ok(())
            }
            _ => {
                // endblock
                self.local.output = true;
                self.local.block = false;
                Ok(())
            }
        }
    }

    /// `text` with its variables (`include`'s URI made absolute).
    fn evaluate(&self, text: &str, uri: bool) -> Result<String, String> {
        let prefix = uri.then_some(self.vars.uri.as_str());
        eval::evaluate(text, prefix, &|n| self.lookup(n))
    }

    fn echo(&mut self, p: &Params, out: &mut Vec<u8>) {
        let name = p.get(0).unwrap_or("").to_ascii_lowercase();
        let value = match self.lookup(&name) {
            Some(v) => v,
            None => p.get(1).unwrap_or("(none)").to_string(),
        };
        if value.is_empty() {
            return;
        }
        if let Some(enc) = p.get(2) {
            match Encoding::named(enc) {
                Some(e) => self.local.encoding = e,
                None => self.log_error(&format!(
                    "unknown encoding \"{enc}\" in the \"echo\" command"
                )),
            }
        }
        self.local.encoding.apply(value.as_bytes(), out);
    }

    fn if_command(&mut self, branch: Branch, expr: &str) -> Result<(), String> {
        if branch == Branch::If && self.local.conditional != 0 {
            return Err("the \"if\" command inside the \"if\" command".into());
        }
        if self.local.output_chosen {
            self.local.output = false;
            return Ok(());
        }
        let cond =
            eval::condition(expr).ok_or_else(|| format!("invalid expression in \"{expr}\""))?;
        let left = self.evaluate(&cond.left, false)?;
        let truth = match cond.compare {
            None => !left.is_empty(),
            Some((negative, Right::Text(t))) => (left == self.evaluate(t, false)?) != negative,
            Some((negative, Right::Regex(r))) => {
                let pattern = self.evaluate(r, false)?;
                self.regex_match(&pattern, &left)? != negative
            }
        };
        self.local.output = truth;
        if truth {
            self.local.output_chosen = true;
        }
        self.local.conditional = COND_IF;
        Ok(())
    }

    /// Matches `/pattern/` (PCRE syntax, `fancy-regex`, compiled per use
    /// as NGINX does) against `subject`; a match keeps its captures for
    /// `$0`…`$9` and sets its named groups as SSI variables.
    fn regex_match(&mut self, pattern: &str, subject: &str) -> Result<bool, String> {
        let re = fancy_regex::Regex::new(pattern)
            .map_err(|e| format!("pcre2_compile() failed: {e} in \"{pattern}\""))?;
        let Ok(Some(caps)) = re.captures(subject) else {
            return Ok(false);
        };
        let mut sh = self.shared.borrow_mut();
        sh.captures = (0..caps.len())
            .map(|i| caps.get(i).map_or("", |m| m.as_str()).to_string())
            .collect();
        for name in re.capture_names().flatten() {
            let v = caps.name(name).map_or("", |m| m.as_str()).to_string();
            sh.set_var(name.to_ascii_lowercase(), v);
        }
        Ok(true)
    }

    /// `include virtual=|file= [wait=] [set=|stub=]`: starts the
    /// subrequest; its answer goes out in its turn.
    fn include(&mut self, p: &Params) -> Result<(), String> {
        let (virt, file, wait, set, stub) = (p.get(0), p.get(1), p.get(2), p.get(3), p.get(4));
        let uri = match (virt, file) {
            (Some(u), Some(f)) => {
                return Err(format!(
                    "inclusion may be either virtual=\"{u}\" or file=\"{f}\""
                ))
            }
            (None, None) => return Err("no parameter in \"include\" SSI command".into()),
            (Some(u), None) | (None, Some(u)) => u,
        };
        if set.is_some() && stub.is_some() {
            return Err(
                "\"set\" and \"stub\" cannot be used together in \"include\" SSI command".into(),
            );
        }
        if let Some(w) = wait {
            if let Some(f) = file {
                return Err(format!("\"wait\" cannot be used with file=\"{f}\""));
            }
            if !w.eq_ignore_ascii_case("yes") && !w.eq_ignore_ascii_case("no") {
                return Err(format!("invalid value \"{w}\" in the \"wait\" parameter"));
            }
        }
        let uri = self.evaluate(uri, true)?;
        let Some((path, args)) = crate::http::uri::parse_unsafe_uri(&uri) else {
            return Err(format!("unsafe URI \"{uri}\" was detected"));
        };
        let stub = match stub {
            Some(name) => {
                let sh = self.shared.borrow();
                match sh.blocks.iter().find(|(n, _)| n == name) {
                    Some((_, b)) => Some(b.clone()),
                    None => return Err(format!("\"stub\"=\"{name}\" for \"include\" not found")),
                }
            }
            None => None,
        };
        if self.depth >= MAX_DEPTH {
            return Err(format!("subrequests cycle while processing \"{path}\""));
        }
        let sub = Rc::clone(&self.sub);
        let task = crate::metrics::timed::spawn(async move { sub.run(path, args).await });
        let waited = set.is_some() || wait.is_some_and(|w| w.eq_ignore_ascii_case("yes"));
        let include = Include::Pending {
            task: Running(task),
            set: set.map(str::to_ascii_lowercase),
            stub,
        };
        self.queue.push_back(Item::Include { include, waited });
        Ok(())
    }
}
