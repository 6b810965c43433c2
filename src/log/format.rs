//! `log_format` and `access_log`: compiled formats and their rendering with
//! NGINX's escaping rules.

use std::sync::Arc;

use super::{submit, LogFile, OpenLogCache};
use crate::vars::template::{Template, TemplateError, Var, VarSource};

/// NGINX's predefined `combined` format.
pub const COMBINED: &str = "$remote_addr - $remote_user [$time_local] \"$request\" $status $body_bytes_sent \"$http_referer\" \"$http_user_agent\"";

/// `escape=` of `log_format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Escape {
    /// `"`, `\` and bytes outside 0x20..0x7f become `\xHH`.
    Default,
    /// JSON string escaping.
    Json,
    /// No escaping.
    None,
}

/// A named, compiled `log_format`.
#[derive(Debug)]
pub struct LogFormat {
    /// The format's name.
    pub name: String,
    template: Template,
    escape: Escape,
}

impl LogFormat {
    /// Compiles a format from its (already concatenated) string.
    pub fn new(name: &str, text: &str, escape: Escape) -> Result<LogFormat, TemplateError> {
        Ok(LogFormat {
            name: name.to_string(),
            template: Template::compile(text)?,
            escape,
        })
    }

    /// The predefined `combined` format.
    pub fn combined() -> Arc<LogFormat> {
        Arc::new(LogFormat::new("combined", COMBINED, Escape::Default).expect("combined format"))
    }

    /// Renders one line (with its newline).
    pub fn render(&self, src: &dyn VarSource) -> String {
        let mut out = String::with_capacity(160);
        let escape = self.escape;
        self.template
            .render_with(src, &mut out, &|v, var, out| match escape {
                Escape::Default => {
                    // NGINX prints `-` for a variable without a value;
                    // `$request_completion` and `$uri` (empty for a
                    // request line refused) have one, empty.
                    if v.is_empty() && !matches!(var, Var::RequestCompletion | Var::Uri) {
                        out.push('-');
                    }
                    if *var == Var::BinaryRemoteAddr {
                        // its characters stand for bytes
                        escape_bytes(v.chars().map(|c| c as u8), out)
                    } else {
                        escape_default(v, out)
                    }
                }
                Escape::Json => escape_json(v, out),
                Escape::None => out.push_str(v),
            });
        out.push('\n');
        out
    }
}

fn escape_default(v: &str, out: &mut String) {
    escape_bytes(v.bytes(), out)
}

/// NGINX's default escaping: `"`, `\` and bytes outside 0x20–0x7e as
/// `\xHH`.
fn escape_bytes(v: impl Iterator<Item = u8>, out: &mut String) {
    for b in v {
        if b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b) {
            out.push_str(&format!("\\x{b:02X}"));
        } else {
            out.push(b as char);
        }
    }
}

fn escape_json(v: &str, out: &mut String) {
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
}

/// Where an `access_log` writes.
#[derive(Debug, Clone)]
pub enum LogDest {
    /// A file opened when the configuration loads.
    File(Arc<LogFile>),
    /// A path with variables, rendered per request and written by
    /// `by_path.rs`'s thread.
    Path(Template),
}

/// One `access_log PATH [FORMAT] [gzip[=LEVEL]] [if=COND]` target.
#[derive(Debug, Clone)]
pub struct AccessLog {
    /// Where lines go.
    pub dest: LogDest,
    /// The format used.
    pub format: Arc<LogFormat>,
    /// `if=condition`: no line when it renders empty or `0`.
    pub condition: Option<crate::vars::template::Template>,
    /// `gzip[=LEVEL]`: lines written compressed.
    pub gzip: Option<u32>,
}

impl AccessLog {
    /// A log to `file` in `format`, with no condition.
    pub fn to_file(file: Arc<LogFile>, format: Arc<LogFormat>) -> AccessLog {
        AccessLog {
            dest: LogDest::File(file),
            format,
            condition: None,
            gzip: None,
        }
    }

    /// Formats and queues one line for the request described by `src`,
    /// unless its `if=` condition renders empty or `0`; `cache` is the
    /// location's `open_log_file_cache`, for a path with variables.
    pub fn write(&self, src: &dyn VarSource, cache: Option<&Arc<OpenLogCache>>) {
        if let Some(c) = &self.condition {
            let v = c.render(src);
            if v.is_empty() || v == "0" {
                return;
            }
        }
        let line = self.format.render(src);
        match (&self.dest, self.gzip) {
            (LogDest::File(f), None) => match f.syslog_peer() {
                Some(p) => p.send(None, line.strip_suffix('\n').unwrap_or(&line).as_bytes()),
                None => submit(f, line.as_bytes()),
            },
            (LogDest::File(f), Some(level)) => super::submit_gzip(f, level, line.as_bytes()),
            (LogDest::Path(t), gzip) => {
                let mut root = String::new();
                src.append(&Var::DocumentRoot, &mut root);
                let data = match gzip {
                    Some(level) => super::gzip_member(line.as_bytes(), level),
                    None => line.into_bytes(),
                };
                super::by_path::submit(super::by_path::PathLine {
                    path: t.render(src).into(),
                    root,
                    data,
                    cache: cache.cloned(),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vars::template::Var;

    struct Req;
    impl VarSource for Req {
        fn append(&self, var: &Var, out: &mut String) {
            match var {
                Var::RemoteAddr => out.push_str("127.0.0.1"),
                Var::Request => out.push_str("GET /a\"b HTTP/1.1"),
                Var::Status => out.push_str("200"),
                Var::BodyBytesSent => out.push('5'),
                Var::TimeLocal => out.push_str("22/Nov/2026:08:00:00 +0000"),
                Var::Http(h) if h == "user-agent" => out.push_str("curl/8\u{1}"),
                _ => {}
            }
        }
    }

    #[test]
    fn combined_line_matches_nginx_shape() {
        let line = LogFormat::combined().render(&Req);
        assert_eq!(
            line,
            "127.0.0.1 - - [22/Nov/2026:08:00:00 +0000] \"GET /a\\x22b HTTP/1.1\" 200 5 \"-\" \"curl/8\\x01\"\n"
        );
    }

    #[test]
    fn json_escape() {
        let f = LogFormat::new(
            "j",
            "{\"r\":\"$request\",\"u\":\"$remote_user\"}",
            Escape::Json,
        )
        .unwrap();
        assert_eq!(
            f.render(&Req),
            "{\"r\":\"GET /a\\\"b HTTP/1.1\",\"u\":\"\"}\n"
        );
    }
}
