//! Parser turning NGINX configuration text into a generic directive tree.
//!
//! The parser knows no directive except `include`, which it expands in place
//! at any nesting level, as nginx does; everything else (including `types`,
//! `map` and friends, whose entries are just directives with odd names) is
//! left for the caller to interpret. Error messages and the lines they point
//! at follow nginx 1.22 (see NOTES.md for the verified cases).

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::error::ConfError;
use super::lexer::{Lexer, Origin, TokenKind};
use crate::util::errno_text;

/// Porter's own MIME map, used when `include mime.types;` finds no file.
pub const EMBEDDED_MIME_TYPES: &str = include_str!("../../conf/mime.types");

/// The name the embedded MIME map goes by in messages and in [`Parser::files`].
pub const EMBEDDED_MIME_TYPES_NAME: &str = "<embedded>/mime.types";

/// The name given to directives that came from `-g` (see
/// [`Parser::parse_param`]); nginx says "in command line" for them.
pub const COMMAND_LINE: &str = "command line";

/// Deepest include nesting accepted. nginx has no limit and crashes with a
/// stack overflow on a self-include; any sane configuration stays far below.
pub const MAX_INCLUDE_DEPTH: usize = 64;

/// Deepest block nesting accepted, counted across includes. Trees are
/// dropped recursively, so an unbounded depth could overflow the stack.
pub const MAX_BLOCK_DEPTH: usize = 1000;

/// One directive: `name args;` or `name args { block }`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Directive {
    /// The first word of the statement.
    pub name: String,
    /// The remaining words, unescaped, variables not expanded.
    pub args: Vec<String>,
    /// The contents of `{ ... }`, or `None` for a statement ending in `;`.
    pub block: Option<Vec<Directive>>,
    /// The file the directive was read from.
    pub file: Arc<Path>,
    /// The line of the `;` or `{` ending the statement; nginx reports errors
    /// about a directive at this line, not at the line of its name.
    pub line: u32,
    /// The line of the closing `}` of a block (`line` for a statement);
    /// NGINX reports checks made after a block is read at this line.
    pub end_line: u32,
}

impl Directive {
    /// Whether this directive came from `-g` text rather than a file.
    pub fn from_command_line(&self) -> bool {
        self.file.as_os_str() == COMMAND_LINE
    }

    /// An error about this directive, located the way nginx locates it
    /// (`... in file:line`, or `... in command line` for `-g` directives).
    pub fn error(&self, message: impl Into<String>) -> ConfError {
        if self.from_command_line() {
            Origin::CommandLine.error(message, 0)
        } else {
            Origin::File(self.file.clone()).error(message, self.line)
        }
    }
}

/// How a text is being parsed, as nginx's `parse_file` / `parse_param`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    File,
    Param,
}

/// A block still open while parsing one file.
struct Open {
    name: String,
    args: Vec<String>,
    line: u32,
    children: Vec<Directive>,
}

/// Parses configuration files, following includes.
pub struct Parser {
    /// Directory relative include paths resolve against (nginx: the
    /// directory of the main configuration file).
    conf_prefix: PathBuf,
    files: Vec<PathBuf>,
    texts: Vec<Arc<str>>,
    seen: HashSet<PathBuf>,
    /// Canonical paths of the files being parsed, outermost first, so that
    /// a file including itself is caught instead of recursing forever.
    stack: Vec<PathBuf>,
    /// Blocks open in the files that include the one being parsed.
    depth: usize,
}

impl Parser {
    /// Creates a parser resolving relative includes against `conf_prefix`.
    pub fn new(conf_prefix: PathBuf) -> Self {
        Parser {
            conf_prefix,
            files: Vec::new(),
            texts: Vec::new(),
            seen: HashSet::new(),
            stack: Vec::new(),
            depth: 0,
        }
    }

    /// Parses the main configuration file (not resolved against the prefix).
    pub fn parse_file(&mut self, path: &Path) -> Result<Vec<Directive>, ConfError> {
        // nginx gives no location for a main file it cannot open.
        let bytes = read_file(path, None)?;
        let canonical = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        self.parse_source(path, &bytes, canonical)
    }

    /// Parses in-memory text as if it were the file `name` (used for the
    /// embedded default configuration). It is recorded in [`Parser::files`].
    pub fn parse_str(&mut self, text: &str, name: &Path) -> Result<Vec<Directive>, ConfError> {
        self.parse_source(name, text.as_bytes(), name.to_path_buf())
    }

    /// Parses `-g` text: no blocks allowed, errors end in "in command line",
    /// and nothing is recorded in [`Parser::files`] (nginx `-T` omits it).
    pub fn parse_param(&mut self, text: &str) -> Result<Vec<Directive>, ConfError> {
        let file: Arc<Path> = Arc::from(Path::new(COMMAND_LINE));
        let mut lexer = Lexer::new(text.as_bytes(), Origin::CommandLine);
        self.parse_tokens(&mut lexer, &file, Mode::Param)
    }

    /// Every file read, in first-read order, each once (as `nginx -T` dumps
    /// them). The embedded MIME map appears as [`EMBEDDED_MIME_TYPES_NAME`].
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// The text read for an entry of [`Parser::files`], for `-T` dumps of
    /// sources that are not on disk (invalid UTF-8 replaced).
    pub fn file_text(&self, path: &Path) -> Option<&str> {
        let i = self.files.iter().position(|f| f == path)?;
        Some(&self.texts[i])
    }

    fn parse_source(
        &mut self,
        name: &Path,
        bytes: &[u8],
        canonical: PathBuf,
    ) -> Result<Vec<Directive>, ConfError> {
        if self.seen.insert(name.to_path_buf()) {
            self.files.push(name.to_path_buf());
            self.texts
                .push(Arc::from(String::from_utf8_lossy(bytes).into_owned()));
        }
        let file: Arc<Path> = Arc::from(name);
        let mut lexer = Lexer::new(bytes, Origin::File(file.clone()));
        self.stack.push(canonical);
        let result = self.parse_tokens(&mut lexer, &file, Mode::File);
        self.stack.pop();
        result
    }

    /// Builds the tree for one file; blocks use an explicit stack so deep
    /// nesting cannot overflow ours. Includes recurse (bounded by depth).
    fn parse_tokens(
        &mut self,
        lexer: &mut Lexer<'_>,
        file: &Arc<Path>,
        mode: Mode,
    ) -> Result<Vec<Directive>, ConfError> {
        let mut open: Vec<Open> = Vec::new();
        let mut current: Vec<Directive> = Vec::new();
        let mut words: Vec<String> = Vec::new();
        let base_depth = self.depth;

        while let Some(tok) = lexer.next_token()? {
            match tok.kind {
                TokenKind::Word { text, .. } => words.push(text),
                TokenKind::Semicolon => {
                    let mut args = std::mem::take(&mut words);
                    let name = args.remove(0);
                    if name == "include" {
                        if args.len() != 1 {
                            return Err(lexer.origin().error(
                                "invalid number of arguments in \"include\" directive",
                                tok.line,
                            ));
                        }
                        self.depth = base_depth + open.len();
                        let included = self.include(&args[0], lexer.origin(), tok.line);
                        self.depth = base_depth;
                        current.extend(included?);
                        continue;
                    }
                    current.push(Directive {
                        name,
                        args,
                        block: None,
                        file: file.clone(),
                        line: tok.line,
                        end_line: tok.line,
                    });
                }
                TokenKind::OpenBrace => {
                    let mut args = std::mem::take(&mut words);
                    let name = args.remove(0);
                    may_open(
                        lexer.origin(),
                        mode,
                        &name,
                        base_depth + open.len(),
                        tok.line,
                    )?;
                    open.push(Open {
                        name,
                        args,
                        line: tok.line,
                        children: std::mem::take(&mut current),
                    });
                }
                TokenKind::CloseBrace => {
                    // A block must close in the file that opened it.
                    let Some(parent) = open.pop() else {
                        return Err(lexer.origin().error("unexpected \"}\"", tok.line));
                    };
                    let block = std::mem::replace(&mut current, parent.children);
                    current.push(Directive {
                        name: parent.name,
                        args: parent.args,
                        block: Some(block),
                        file: file.clone(),
                        line: parent.line,
                        end_line: tok.line,
                    });
                }
            }
        }
        if !open.is_empty() {
            return Err(lexer
                .origin()
                .error("unexpected end of file, expecting \"}\"", lexer.line()));
        }
        Ok(current)
    }

    /// Expands `include pattern;` found at `line` of `origin`.
    fn include(
        &mut self,
        pattern: &str,
        origin: &Origin,
        line: u32,
    ) -> Result<Vec<Directive>, ConfError> {
        // nginx concatenates prefix and name (so "" names the prefix itself).
        let full = if Path::new(pattern).is_absolute() {
            PathBuf::from(pattern)
        } else {
            self.conf_prefix.join(pattern)
        };
        let full_str = full.to_string_lossy().into_owned();

        if !full_str.contains(['*', '?', '[']) {
            return self.include_one(&full, origin, line, pattern == "mime.types");
        }

        let options = glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: true,
            // glob(3), which nginx uses, skips dot files unless the pattern
            // names the dot.
            require_literal_leading_dot: true,
        };
        let paths = glob::glob_with(&full_str, options)
            .map_err(|e| origin.error(format!("glob() \"{full_str}\" failed ({})", e.msg), line))?;
        // glob(3) ignores unreadable directories and sorts whole paths
        // bytewise (nginx runs in the C locale); no match is not an error.
        let mut matches: Vec<PathBuf> = paths.filter_map(Result::ok).collect();
        matches.sort_by(|a, b| a.as_os_str().cmp(b.as_os_str()));

        let mut out = Vec::new();
        for path in matches {
            out.extend(self.include_one(&path, origin, line, false)?);
        }
        Ok(out)
    }

    fn include_one(
        &mut self,
        path: &Path,
        origin: &Origin,
        line: u32,
        embedded_fallback: bool,
    ) -> Result<Vec<Directive>, ConfError> {
        if self.stack.len() >= MAX_INCLUDE_DEPTH {
            return Err(origin.error(
                format!(
                    "too deep nesting of includes (more than {MAX_INCLUDE_DEPTH}) at \"{}\"",
                    path.display()
                ),
                line,
            ));
        }
        let bytes = match read_file(path, Some((origin, line))) {
            Ok(bytes) => bytes,
            Err(_) if embedded_fallback && !path.exists() => {
                let name = Path::new(EMBEDDED_MIME_TYPES_NAME);
                return self.parse_source(name, EMBEDDED_MIME_TYPES.as_bytes(), name.to_path_buf());
            }
            Err(e) => return Err(e),
        };
        let canonical = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        if self.stack.contains(&canonical) {
            return Err(origin.error(format!("recursive include of \"{}\"", path.display()), line));
        }
        self.parse_source(path, &bytes, canonical)
    }
}

/// Reads a configuration file, failing with nginx's wording. `at` is the
/// include directive's location; nginx omits it for the main file and for
/// read (as opposed to open) failures.
fn read_file(path: &Path, at: Option<(&Origin, u32)>) -> Result<Vec<u8>, ConfError> {
    use std::io::Read;

    let open_error = |e: io::Error| {
        let msg = format!("open() \"{}\" failed {}", path.display(), errno_text(&e));
        match at {
            Some((origin, line)) => origin.error(msg, line),
            None => ConfError {
                message: msg,
                file: None,
                line: 0,
            },
        }
    };
    let mut f = fs::File::open(path).map_err(open_error)?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).map_err(|e| ConfError {
        message: format!("pread() \"{}\" failed {}", path.display(), errno_text(&e)),
        file: None,
        line: 0,
    })?;
    Ok(bytes)
}

/// Quotes a word for [`dump`] when nginx would not read it back unchanged.
fn quote_word(word: &str) -> String {
    let plain = !word.is_empty()
        && !word.starts_with(['#', '"', '\'', '}'])
        && !word
            .bytes()
            .any(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n' | b';' | b'{' | b'\\'));
    if plain {
        return word.to_string();
    }
    let mut out = String::with_capacity(word.len() + 2);
    out.push('"');
    for c in word.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Re-serialises a tree in nginx style, four spaces per level (for
/// debugging; parsing the output gives the same tree, lines aside).
pub fn dump(directives: &[Directive]) -> String {
    fn walk(out: &mut String, directives: &[Directive], depth: usize) {
        for d in directives {
            out.push_str(&"    ".repeat(depth));
            out.push_str(&quote_word(&d.name));
            for arg in &d.args {
                out.push(' ');
                out.push_str(&quote_word(arg));
            }
            match &d.block {
                None => out.push_str(";\n"),
                Some(children) => {
                    out.push_str(" {\n");
                    walk(out, children, depth + 1);
                    out.push_str(&"    ".repeat(depth));
                    out.push_str("}\n");
                }
            }
        }
    }
    let mut out = String::new();
    walk(&mut out, directives, 0);
    out
}

/// Whether block `name` may open at `line`, `depth` blocks deep: not in
/// `-g` text, not `include`, not past [`MAX_BLOCK_DEPTH`].
fn may_open(
    origin: &Origin,
    mode: Mode,
    name: &str,
    depth: usize,
    line: u32,
) -> Result<(), ConfError> {
    if mode == Mode::Param {
        return Err(origin.error("block directives are not supported in -g option", line));
    }
    if name == "include" {
        return Err(origin.error("directive \"include\" is not terminated by \";\"", line));
    }
    if depth >= MAX_BLOCK_DEPTH {
        return Err(origin.error(
            format!("too deep nesting of blocks (more than {MAX_BLOCK_DEPTH})"),
            line,
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fresh directory per test, so tests can run in parallel.
    fn tmpdir() -> PathBuf {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "confparse-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, text).unwrap();
        path
    }

    fn parse(text: &str) -> Result<Vec<Directive>, ConfError> {
        Parser::new(PathBuf::from("/nonexistent")).parse_str(text, Path::new("/t.conf"))
    }

    fn err(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    /// `name args` of every directive, depth-first, for compact assertions.
    fn flat(ds: &[Directive]) -> Vec<String> {
        let mut out = Vec::new();
        for d in ds {
            let mut s = d.name.clone();
            for a in &d.args {
                s.push(' ');
                s.push_str(a);
            }
            out.push(s);
            if let Some(b) = &d.block {
                out.extend(flat(b).into_iter().map(|s| format!("  {s}")));
            }
        }
        out
    }

    #[test]
    fn nesting() {
        let ds = parse("a 1;\nb {\n c { d; }\n e \"\" 2;\n}\nf;").unwrap();
        assert_eq!(flat(&ds), vec!["a 1", "b", "  c", "    d", "  e  2", "f"]);
        assert_eq!(ds[1].block.as_ref().unwrap()[1].args, vec!["", "2"]);
        assert_eq!(ds[0].block, None);
        assert_eq!(ds[1].line, 2);
        assert_eq!(&*ds[1].file, Path::new("/t.conf"));
        let empty = parse("a {}").unwrap();
        assert_eq!(empty[0].block, Some(vec![]));
        assert!(parse("").unwrap().is_empty());
        assert!(parse("# only a comment\n").unwrap().is_empty());
    }

    #[test]
    fn directive_line_is_terminator_line() {
        let ds = parse("worker_processes\n\n  abc;\nserver\n{\n}").unwrap();
        assert_eq!((ds[0].line, ds[1].line), (3, 5));
        assert_eq!(
            ds[0]
                .error("\"worker_processes\" directive invalid value")
                .to_string(),
            "\"worker_processes\" directive invalid value in /t.conf:3"
        );
    }

    #[test]
    fn deep_nesting_is_bounded() {
        let n = MAX_BLOCK_DEPTH;
        let ok = format!("{}{}", "a {".repeat(n), "}".repeat(n));
        assert_eq!(parse(&ok).unwrap().len(), 1);
        let deep = format!("{}{}", "a {\n".repeat(n + 1), "}".repeat(n + 1));
        assert_eq!(
            err(&deep),
            format!(
                "too deep nesting of blocks (more than {n}) in /t.conf:{}",
                n + 1
            )
        );
        let huge = "a {".repeat(1_000_000);
        assert!(err(&huge).starts_with("too deep nesting of blocks"));
    }

    #[test]
    fn quoted_words_in_tree() {
        let ds = parse(r#"return 200 "a \"b\" {c}; 'd'"; "{" x;"#).unwrap();
        assert_eq!(ds[0].args, vec!["200", "a \"b\" {c}; 'd'"]);
        assert_eq!(ds[1].name, "{");
    }

    #[test]
    fn syntax_error_messages() {
        assert_eq!(err("events {}\n}\n"), "unexpected \"}\" in /t.conf:2");
        assert_eq!(
            err("events {}\nfoo bar"),
            "unexpected end of file, expecting \";\" or \"}\" in /t.conf:2"
        );
        assert_eq!(
            err("events {}\nhttp {\n"),
            "unexpected end of file, expecting \"}\" in /t.conf:3"
        );
        assert_eq!(
            err("events {}\nhttp {"),
            "unexpected end of file, expecting \"}\" in /t.conf:2"
        );
        assert_eq!(err("events {}\n;\n"), "unexpected \";\" in /t.conf:2");
        assert_eq!(err("events {}\n{\n"), "unexpected \"{\" in /t.conf:2");
        assert_eq!(err("http { foo }"), "unexpected \"}\" in /t.conf:1");
        assert_eq!(err("a \"1\"x;"), "unexpected \"x\" in /t.conf:1");
        assert_eq!(
            err("a \"1\n"),
            "unexpected end of file, expecting \";\" or \"}\" in /t.conf:2"
        );
        assert_eq!(
            err("include a {\n}"),
            "directive \"include\" is not terminated by \";\" in /t.conf:1"
        );
        assert_eq!(
            err("x;\ninclude;"),
            "invalid number of arguments in \"include\" directive in /t.conf:2"
        );
        assert_eq!(
            err("include a\nb;"),
            "invalid number of arguments in \"include\" directive in /t.conf:2"
        );
    }

    #[test]
    fn error_display_without_file() {
        let e = ConfError {
            message: "boom".into(),
            file: None,
            line: 3,
        };
        assert_eq!(e.to_string(), "boom");
    }

    #[test]
    fn command_line_params() {
        let mut p = Parser::new(PathBuf::from("/nonexistent"));
        let ds = p.parse_param("daemon off; worker_processes 2;").unwrap();
        assert_eq!(flat(&ds), vec!["daemon off", "worker_processes 2"]);
        assert!(ds[0].from_command_line());
        assert_eq!(
            ds[0].error("unknown directive \"daemon\"").to_string(),
            "unknown directive \"daemon\" in command line"
        );
        assert!(p.files().is_empty());
        let e = |t: &str| {
            Parser::new(PathBuf::from("/nonexistent"))
                .parse_param(t)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            e("daemon off"),
            "unexpected end of parameter, expecting \";\" in command line"
        );
        assert_eq!(e("daemon off; }"), "unexpected \"}\" in command line");
        assert_eq!(e("; "), "unexpected \";\" in command line");
        assert_eq!(
            e("events {"),
            "block directives are not supported in -g option in command line"
        );
        assert_eq!(
            e("include x;"),
            "open() \"/nonexistent/x\" failed (2: No such file or directory) in command line"
        );
    }

    #[test]
    fn include_relative_absolute_and_missing() {
        let dir = tmpdir();
        write(&dir, "sub/a.conf", "a 1;\n");
        let inc = write(&dir, "b.conf", "b { c; }\n");
        let main = write(
            &dir,
            "nginx.conf",
            &format!(
                "http {{\n  include sub/a.conf;\n  server {{ include {}; }}\n}}\n",
                inc.display()
            ),
        );
        let mut p = Parser::new(dir.clone());
        let ds = p.parse_file(&main).unwrap();
        assert_eq!(
            flat(&ds),
            vec!["http", "  a 1", "  server", "    b", "      c"]
        );
        let a = &ds[0].block.as_ref().unwrap()[0];
        assert_eq!((&*a.file, a.line), (dir.join("sub/a.conf").as_path(), 1));
        assert_eq!(
            p.files(),
            &[main.clone(), dir.join("sub/a.conf"), inc.clone()]
        );
        assert_eq!(p.file_text(&inc), Some("b { c; }\n"));

        let bad = write(&dir, "bad.conf", "events {}\ninclude nonexist.conf;\n");
        assert_eq!(
            Parser::new(dir.clone())
                .parse_file(&bad)
                .unwrap_err()
                .to_string(),
            format!(
                "open() \"{}\" failed (2: No such file or directory) in {}:2",
                dir.join("nonexist.conf").display(),
                bad.display()
            )
        );
        // A missing main file has no location, like nginx.
        let gone = dir.join("gone.conf");
        let e = Parser::new(dir.clone()).parse_file(&gone).unwrap_err();
        assert_eq!(e.file, None);
        assert_eq!(
            e.to_string(),
            format!(
                "open() \"{}\" failed (2: No such file or directory)",
                gone.display()
            )
        );
        // Including a directory fails on read, which nginx reports unlocated.
        let d = write(&dir, "d.conf", "include sub;");
        assert_eq!(
            Parser::new(dir.clone())
                .parse_file(&d)
                .unwrap_err()
                .to_string(),
            format!(
                "pread() \"{}\" failed (21: Is a directory)",
                dir.join("sub").display()
            )
        );
    }

    #[test]
    fn include_errors_are_reported_in_the_included_file() {
        let dir = tmpdir();
        write(&dir, "inc1.conf", "types {\n a/b c;\n");
        write(&dir, "inc2.conf", "a/b c;\n}");
        let m1 = write(&dir, "m1.conf", "http { include inc1.conf; }");
        let m2 = write(&dir, "m2.conf", "http { types { include inc2.conf; } }");
        let e1 = Parser::new(dir.clone()).parse_file(&m1).unwrap_err();
        assert_eq!(
            e1.to_string(),
            format!(
                "unexpected end of file, expecting \"}}\" in {}:3",
                dir.join("inc1.conf").display()
            )
        );
        let e2 = Parser::new(dir.clone()).parse_file(&m2).unwrap_err();
        assert_eq!(
            e2.to_string(),
            format!("unexpected \"}}\" in {}:2", dir.join("inc2.conf").display())
        );
    }

    #[test]
    fn include_glob() {
        let dir = tmpdir();
        write(&dir, "conf.d/b.conf", "b;");
        write(&dir, "conf.d/a.conf", "a;");
        write(&dir, "conf.d/B.conf", "upper;");
        write(&dir, "conf.d/.hidden.conf", "hidden;");
        write(&dir, "conf.d/c.txt", "txt;");
        let main = write(
            &dir,
            "nginx.conf",
            "http { include conf.d/*.conf; include none/*.conf; include conf.d/[ab].conf; }",
        );
        let mut p = Parser::new(dir.clone());
        let ds = p.parse_file(&main).unwrap();
        assert_eq!(
            flat(&ds),
            vec!["http", "  upper", "  a", "  b", "  a", "  b"]
        );
        // Files read twice are listed once, as nginx -T dumps them.
        assert_eq!(p.files().len(), 4);
    }

    #[test]
    fn include_recursion() {
        let dir = tmpdir();
        let s = write(&dir, "self.conf", "x;\ninclude self.conf;\n");
        let e = Parser::new(dir.clone()).parse_file(&s).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "recursive include of \"{}\" in {}:2",
                s.display(),
                s.display()
            )
        );
        write(&dir, "a.conf", "include b.conf;");
        write(&dir, "b.conf", "include *.conf;");
        let m = write(&dir, "m.conf", "http { include a.conf; }");
        let e = Parser::new(dir.clone()).parse_file(&m).unwrap_err();
        assert!(e.message.starts_with("recursive include of"), "{e}");

        // A long but finite chain is stopped by the depth limit.
        let chain = tmpdir();
        for i in 0..MAX_INCLUDE_DEPTH + 5 {
            write(
                &chain,
                &format!("{i}.conf"),
                &format!("include {}.conf;", i + 1),
            );
        }
        let e = Parser::new(chain.clone())
            .parse_file(&chain.join("0.conf"))
            .unwrap_err();
        assert!(e.message.starts_with("too deep nesting of includes"), "{e}");
    }

    #[test]
    fn embedded_mime_types_fallback() {
        let dir = tmpdir();
        let main = write(
            &dir,
            "nginx.conf",
            "http { include mime.types; default_type application/octet-stream; }",
        );
        let mut p = Parser::new(dir.clone());
        let ds = p.parse_file(&main).unwrap();
        let http = ds[0].block.as_ref().unwrap();
        assert_eq!(http[0].name, "types");
        assert_eq!(&*http[0].file, Path::new(EMBEDDED_MIME_TYPES_NAME));
        assert_eq!(http[1].name, "default_type");
        assert_eq!(p.files()[1], Path::new(EMBEDDED_MIME_TYPES_NAME));
        assert_eq!(
            p.file_text(Path::new(EMBEDDED_MIME_TYPES_NAME)),
            Some(EMBEDDED_MIME_TYPES)
        );

        // A real file on disk wins over the embedded copy.
        write(&dir, "mime.types", "types { a/b c; }");
        let ds = Parser::new(dir.clone()).parse_file(&main).unwrap();
        let types = &ds[0].block.as_ref().unwrap()[0];
        assert_eq!(flat(std::slice::from_ref(types)), vec!["types", "  a/b c"]);

        // Only the bare name falls back.
        let other = write(&dir, "o.conf", "include ./nope/mime.types;");
        assert!(Parser::new(dir.clone()).parse_file(&other).is_err());
    }

    /// Reads a `types { ... }` tree into (extension, type) pairs.
    fn mime_pairs(ds: &[Directive]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for d in ds.iter().filter(|d| d.name == "types") {
            for t in d.block.as_ref().unwrap() {
                for ext in &t.args {
                    out.push((ext.clone(), t.name.clone()));
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn types_block_parses() {
        let ds = parse(
            "types { text/html html htm; image/svg+xml svg svgz; application/vnd.ms-excel xls; }",
        )
        .unwrap();
        assert_eq!(
            flat(&ds),
            vec![
                "types",
                "  text/html html htm",
                "  image/svg+xml svg svgz",
                "  application/vnd.ms-excel xls"
            ]
        );
        let embedded = Parser::new(PathBuf::new())
            .parse_str(EMBEDDED_MIME_TYPES, Path::new(EMBEDDED_MIME_TYPES_NAME))
            .unwrap();
        let pairs = mime_pairs(&embedded);
        assert!(pairs.contains(&("js".into(), "application/javascript".into())));
        assert!(pairs.contains(&("woff2".into(), "font/woff2".into())));
        assert!(pairs.len() > 100);
    }

    /// The embedded map must give the same Content-Type as nginx's own list
    /// for every extension (checked only where nginx is installed).
    #[test]
    fn embedded_mime_types_agree_with_nginx() {
        let system = Path::new("/etc/nginx/mime.types");
        if !system.exists() {
            return;
        }
        let theirs = Parser::new(PathBuf::new()).parse_file(system).unwrap();
        let ours = Parser::new(PathBuf::new())
            .parse_str(EMBEDDED_MIME_TYPES, Path::new(EMBEDDED_MIME_TYPES_NAME))
            .unwrap();
        assert_eq!(mime_pairs(&ours), mime_pairs(&theirs));
    }

    #[test]
    fn thread_pool_blog_config() {
        let dir = tmpdir();
        let main = write(
            &dir,
            "nginx.conf",
            "worker_processes 16;\n\
             events {\n    accept_mutex off;\n}\n\
             http {\n    include mime.types;\n    default_type application/octet-stream;\n\
             \n    access_log off;\n    sendfile on;\n    sendfile_max_chunk 512k;\n\
             \n    server {\n        listen 8000;\n\n        location / {\n            root /storage;\n        }\n    }\n}\n",
        );
        let ds = Parser::new(dir).parse_file(&main).unwrap();
        let f = flat(&ds);
        let expect_tail = vec![
            "  default_type application/octet-stream",
            "  access_log off",
            "  sendfile on",
            "  sendfile_max_chunk 512k",
            "  server",
            "    listen 8000",
            "    location /",
            "      root /storage",
        ];
        assert_eq!(
            &f[..4],
            &[
                "worker_processes 16",
                "events",
                "  accept_mutex off",
                "http"
            ]
        );
        assert_eq!(f[4], "  types");
        assert_eq!(&f[f.len() - expect_tail.len()..], expect_tail.as_slice());
        let http = ds[2].block.as_ref().unwrap();
        assert_eq!(http[0].file.as_os_str(), EMBEDDED_MIME_TYPES_NAME);
        let location = &http[5].block.as_ref().unwrap()[1];
        assert_eq!((location.name.as_str(), location.line), ("location", 16));
    }

    #[test]
    fn dump_round_trips() {
        let text = "a 1 \"\" \"x y\" 'q\"' a\\\\b \"\\t\" \"{\" \"#c\" ${host}$uri;\nb { c { d \"e;f\"; } g; }\ne {}\n";
        let ds = parse(text).unwrap();
        let dumped = dump(&ds);
        let again = parse(&dumped).unwrap();
        assert_eq!(flat(&again), flat(&ds));
        assert_eq!(dump(&again), dumped);
        assert!(dumped.contains("b {\n    c {\n        d \"e;f\";\n    }\n    g;\n}\n"));
    }
}
