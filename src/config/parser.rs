//! Directive trees from NGINX-syntax files, with `include` expanded in place
//! (globs sorted; a glob matching nothing is fine, a missing plain file is
//! an error) and every directive carrying its file and line.
//!
//! `include mime.types` falls back to porter's embedded copy when no such
//! file sits next to the config, so NGINX configs that include it run as
//! they are.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::lexer::{Lexer, Tok};

/// porter's MIME map, used when `include mime.types` finds no file.
pub const EMBEDDED_MIME_TYPES: &str = include_str!("../../conf/mime.types");

/// Deepest include nesting accepted (a file including itself stops here).
const MAX_INCLUDE_DEPTH: usize = 32;

/// One directive: `name args... ;` or `name args... { block }`.
#[derive(Debug, Clone)]
pub struct Directive {
    /// The directive name.
    pub name: String,
    /// Its arguments, unquoted.
    pub args: Vec<String>,
    /// The block, for block directives.
    pub block: Option<Vec<Directive>>,
    /// File it came from.
    pub file: Arc<Path>,
    /// Line of its name.
    pub line: u32,
}

/// A configuration error, NGINX style: `message in file:line`.
#[derive(Debug, Clone)]
pub struct ConfError {
    /// What is wrong.
    pub message: String,
    /// Where (None for errors not tied to a line).
    pub file: Option<Arc<Path>>,
    /// Line number.
    pub line: u32,
}

impl fmt::Display for ConfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(file) => write!(f, "{} in {}:{}", self.message, file.display(), self.line),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ConfError {}

/// Parses files and strings into directive trees.
pub struct Parser {
    conf_prefix: PathBuf,
    files: Vec<PathBuf>,
    depth: usize,
}

impl Parser {
    /// A parser resolving relative includes against `conf_prefix`.
    pub fn new(conf_prefix: PathBuf) -> Parser {
        Parser {
            conf_prefix,
            files: Vec::new(),
            depth: 0,
        }
    }

    /// Every file read so far, in order.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// Parses the file at `path`.
    pub fn parse_file(&mut self, path: &Path) -> Result<Vec<Directive>, ConfError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfError {
            message: format!(
                "open() \"{}\" failed {}",
                path.display(),
                crate::util::errno_text(&e)
            ),
            file: None,
            line: 0,
        })?;
        self.files.push(path.to_path_buf());
        self.parse_str(&text, path)
    }

    /// Parses `text`, naming it `name` in messages.
    pub fn parse_str(&mut self, text: &str, name: &Path) -> Result<Vec<Directive>, ConfError> {
        let file: Arc<Path> = Arc::from(name);
        let mut lex = Lexer::new(text);
        let dirs = self.block(&mut lex, &file, false)?;
        Ok(dirs)
    }

    fn block(
        &mut self,
        lex: &mut Lexer<'_>,
        file: &Arc<Path>,
        nested: bool,
    ) -> Result<Vec<Directive>, ConfError> {
        let err = |message: String, line: u32| ConfError {
            message,
            file: Some(file.clone()),
            line,
        };
        let mut out = Vec::new();
        let mut words: Vec<String> = Vec::new();
        let mut first_line = 0;
        loop {
            let (tok, line) = lex.next_token().map_err(|e| err(e.message, e.line))?;
            match tok {
                Tok::Word(w) => {
                    if words.is_empty() {
                        first_line = line;
                    }
                    words.push(w);
                }
                Tok::Semi => {
                    if words.is_empty() {
                        return Err(err("unexpected \";\"".into(), line));
                    }
                    let name = words.remove(0);
                    let args = std::mem::take(&mut words);
                    if name == "include" {
                        if args.len() != 1 {
                            return Err(err(
                                "invalid number of arguments in \"include\" directive".into(),
                                first_line,
                            ));
                        }
                        out.extend(self.include(&args[0], file, first_line)?);
                        continue;
                    }
                    out.push(Directive {
                        name,
                        args,
                        block: None,
                        file: file.clone(),
                        line: first_line,
                    });
                }
                Tok::Open => {
                    if words.is_empty() {
                        return Err(err("unexpected \"{\"".into(), line));
                    }
                    let name = words.remove(0);
                    let args = std::mem::take(&mut words);
                    let line0 = first_line;
                    let inner = self.block(lex, file, true)?;
                    out.push(Directive {
                        name,
                        args,
                        block: Some(inner),
                        file: file.clone(),
                        line: line0,
                    });
                }
                Tok::Close => {
                    if !words.is_empty() || !nested {
                        return Err(err("unexpected \"}\"".into(), line));
                    }
                    return Ok(out);
                }
                Tok::Eof => {
                    if !words.is_empty() {
                        return Err(err(
                            "unexpected end of file, expecting \";\" or \"}\"".into(),
                            line,
                        ));
                    }
                    if nested {
                        return Err(err("unexpected end of file, expecting \"}\"".into(), line));
                    }
                    return Ok(out);
                }
            }
        }
    }

    fn include(
        &mut self,
        pattern: &str,
        from: &Arc<Path>,
        line: u32,
    ) -> Result<Vec<Directive>, ConfError> {
        let err = |message: String| ConfError {
            message,
            file: Some(from.clone()),
            line,
        };
        if self.depth >= MAX_INCLUDE_DEPTH {
            return Err(err(format!(
                "include of \"{pattern}\" nested too deeply (recursive include?)"
            )));
        }
        let full = if Path::new(pattern).is_absolute() {
            PathBuf::from(pattern)
        } else {
            self.conf_prefix.join(pattern)
        };
        let paths: Vec<PathBuf> = if pattern.contains(['*', '?', '[']) {
            let mut v: Vec<PathBuf> = glob::glob(&full.to_string_lossy())
                .map_err(|e| err(format!("invalid include pattern \"{pattern}\": {e}")))?
                .filter_map(Result::ok)
                .filter(|p| p.is_file())
                .collect();
            v.sort();
            v
        } else {
            vec![full.clone()]
        };
        let mut out = Vec::new();
        self.depth += 1;
        for p in paths {
            let text = match std::fs::read_to_string(&p) {
                Ok(t) => {
                    self.files.push(p.clone());
                    t
                }
                Err(e) if pattern == "mime.types" && e.kind() == std::io::ErrorKind::NotFound => {
                    let name = Path::new("<embedded>/mime.types");
                    let r = self.parse_str(EMBEDDED_MIME_TYPES, name);
                    self.depth -= 1;
                    return r;
                }
                Err(e) => {
                    self.depth -= 1;
                    return Err(err(format!(
                        "open() \"{}\" failed {}",
                        p.display(),
                        crate::util::errno_text(&e)
                    )));
                }
            };
            match self.parse_str(&text, &p) {
                Ok(d) => out.extend(d),
                Err(e) => {
                    self.depth -= 1;
                    return Err(e);
                }
            }
        }
        self.depth -= 1;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Vec<Directive>, ConfError> {
        Parser::new(PathBuf::from("/nonexistent")).parse_str(s, Path::new("/t.conf"))
    }

    #[test]
    fn blog_config_parses() {
        let d = parse("worker_processes 16; events { accept_mutex off; } http { include mime.types; default_type application/octet-stream; access_log off; sendfile on; sendfile_max_chunk 512k; server { listen 8000; location / { root /storage; } } }").unwrap();
        assert_eq!(d.len(), 3);
        let http = d[2].block.as_ref().unwrap();
        // mime.types came from the embedded copy.
        assert_eq!(http[0].name, "types");
        assert!(http[0]
            .block
            .as_ref()
            .unwrap()
            .iter()
            .any(|t| t.name == "text/html"));
        let server = http.iter().find(|x| x.name == "server").unwrap();
        let loc = server
            .block
            .as_ref()
            .unwrap()
            .iter()
            .find(|x| x.name == "location")
            .unwrap();
        assert_eq!(loc.args, vec!["/"]);
        assert_eq!(loc.block.as_ref().unwrap()[0].args, vec!["/storage"]);
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse("a;\n}\n").unwrap_err();
        assert_eq!(e.to_string(), "unexpected \"}\" in /t.conf:2");
        let e = parse("http {\n a;\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unexpected end of file, expecting \"}\" in /t.conf:3"
        );
        let e = parse("a b").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unexpected end of file, expecting \";\" or \"}\" in /t.conf:1"
        );
        let e = parse("\n;").unwrap_err();
        assert_eq!(e.to_string(), "unexpected \";\" in /t.conf:2");
        let e = parse("{").unwrap_err();
        assert_eq!(e.to_string(), "unexpected \"{\" in /t.conf:1");
    }

    #[test]
    fn includes_globs_missing_and_recursion() {
        let dir = std::env::temp_dir().join(format!("porter-parser-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("conf.d")).unwrap();
        std::fs::write(dir.join("conf.d/b.conf"), "b 2;").unwrap();
        std::fs::write(dir.join("conf.d/a.conf"), "a 1;").unwrap();
        std::fs::write(dir.join("self.conf"), "include self.conf;").unwrap();
        let mut p = Parser::new(dir.clone());
        let d = p
            .parse_str(
                "include conf.d/*.conf; include nomatch/*.conf; c;",
                Path::new("/m.conf"),
            )
            .unwrap();
        let names: Vec<_> = d.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(
            d[0].file.to_string_lossy(),
            dir.join("conf.d/a.conf").to_string_lossy()
        );
        let e = p
            .parse_str("\ninclude missing.conf;", Path::new("/m.conf"))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "open() \"{}\" failed (2: No such file or directory) in /m.conf:2",
                dir.join("missing.conf").display()
            )
        );
        let e = p
            .parse_str("include self.conf;", Path::new("/m.conf"))
            .unwrap_err();
        assert!(e.message.contains("nested too deeply"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
