//! Tokeniser for NGINX configuration syntax.
//!
//! This is a byte-for-byte port of the state machine in nginx's
//! `ngx_conf_read_token()` (nginx 1.22), so that odd inputs split into the
//! same words and fail with the same messages as under nginx. The lexer knows
//! how many words the current statement has, because nginx decides whether a
//! `;`, `{` or `}` is "unexpected" from exactly that count.
//!
//! Notable nginx rules kept here:
//! - quotes only open a string at the start of a word (`a"b"` is one word);
//! - a closing quote must be followed by whitespace, `;`, `{` or `)`;
//! - `}` does not end an unquoted word (`a}` is one word), `;` and `{` do,
//!   except that `{` directly after `$` stays in the word (`${host}`);
//! - `#` starts a comment only at the start of a word;
//! - `\"`, `\'`, `\\`, `\t`, `\r`, `\n` are unescaped in quoted *and* unquoted
//!   words; any other backslash is kept together with the byte after it;
//! - a word (or comment) spanning nginx's whole 4096-byte read buffer is
//!   rejected as "too long parameter".

use std::path::Path;
use std::sync::Arc;

use super::error::ConfError;

/// Size of nginx's configuration read buffer (`NGX_CONF_BUFFER`); words that
/// fill it make nginx fail, and we fail on the same inputs.
pub const CONF_BUFFER: usize = 4096;

/// Where the text being tokenised came from; decides how errors name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A configuration file (or in-memory text standing in for one).
    File(Arc<Path>),
    /// A `-g` command-line parameter; nginx reports these "in command line".
    CommandLine,
}

impl Origin {
    /// Builds an error located at `line` of this origin, worded as nginx does.
    pub fn error(&self, message: impl Into<String>, line: u32) -> ConfError {
        match self {
            Origin::File(file) => ConfError {
                message: message.into(),
                file: Some(file.clone()),
                line,
            },
            // nginx prints no line number for -g text, only "in command line".
            Origin::CommandLine => ConfError {
                message: format!("{} in command line", message.into()),
                file: None,
                line: 0,
            },
        }
    }
}

/// What a token is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenKind {
    /// A word or string, escapes already processed, variables left as text.
    Word {
        /// The unescaped text.
        text: String,
        /// Whether it was written in single or double quotes; a quoted `"{"`
        /// is a word, and a quoted `""` is a valid empty argument.
        quoted: bool,
    },
    /// `;` ending a simple directive.
    Semicolon,
    /// `{` opening a block.
    OpenBrace,
    /// `}` closing a block.
    CloseBrace,
}

/// One token and the line it is on (for words: the line where they start).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    /// The token itself.
    pub kind: TokenKind,
    /// 1-based line number within the lexer's origin.
    pub line: u32,
}

/// Splits configuration text into tokens, reporting nginx's syntax errors.
pub struct Lexer<'a> {
    src: &'a [u8],
    origin: Origin,
    pos: usize,
    line: u32,
    /// Words seen so far in the current statement (nginx's `cf->args->nelts`).
    nargs: usize,
    /// A quoted word just ended; the next byte must separate it.
    need_space: bool,
    /// nginx's `start`: where the data nginx must keep in its buffer begins.
    start: usize,
    start_line: u32,
    /// A terminator that ended a word, handed out on the next call.
    pending: Option<Token>,
}

fn is_space(ch: u8) -> bool {
    matches!(ch, b' ' | b'\t' | b'\r' | b'\n')
}

/// Renders the byte at `pos` for "unexpected" messages, keeping multi-byte
/// UTF-8 characters whole rather than printing half a character as nginx does.
fn char_at(src: &[u8], pos: usize) -> String {
    let end = (pos + 4).min(src.len());
    String::from_utf8_lossy(&src[pos..end])
        .chars()
        .next()
        .map(String::from)
        .unwrap_or_default()
}

/// Applies nginx's escape rules to the raw bytes of one word.
fn unescape(raw: &[u8]) -> String {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'\\' && i + 1 < raw.len() {
            match raw[i + 1] {
                b'"' | b'\'' | b'\\' => {
                    out.push(raw[i + 1]);
                    i += 2;
                    continue;
                }
                b't' => {
                    out.push(b'\t');
                    i += 2;
                    continue;
                }
                b'r' => {
                    out.push(b'\r');
                    i += 2;
                    continue;
                }
                b'n' => {
                    out.push(b'\n');
                    i += 2;
                    continue;
                }
                // Unknown escapes keep the backslash (nginx does, so that
                // regexes like `\.` and `\d` survive).
                _ => {}
            }
        }
        out.push(raw[i]);
        i += 1;
    }
    // Configuration values are used as Rust strings; invalid UTF-8 is replaced
    // rather than rejected, since nginx itself accepts any bytes.
    String::from_utf8_lossy(&out).into_owned()
}

impl<'a> Lexer<'a> {
    /// Creates a lexer over `src`, which came from `origin`.
    pub fn new(src: &'a [u8], origin: Origin) -> Self {
        Lexer {
            src,
            origin,
            pos: 0,
            line: 1,
            nargs: 0,
            need_space: false,
            start: 0,
            start_line: 1,
            pending: None,
        }
    }

    /// The origin given to [`Lexer::new`].
    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// The line the lexer has reached (nginx reports errors found after a
    /// statement, such as a missing include, at this line).
    pub fn line(&self) -> u32 {
        self.line
    }

    fn terminator(&mut self, kind: TokenKind) -> Token {
        // nginx starts each statement with an empty buffer span.
        self.nargs = 0;
        self.start = self.pos;
        self.start_line = self.line;
        Token {
            kind,
            line: self.line,
        }
    }

    fn error(&self, message: impl Into<String>, line: u32) -> ConfError {
        self.origin.error(message, line)
    }

    /// Returns the next token, `Ok(None)` at a clean end of input, or the
    /// syntax error nginx would report (nginx's `ngx_conf_read_token`).
    pub fn next_token(&mut self) -> Result<Option<Token>, ConfError> {
        if let Some(tok) = self.pending.take() {
            return Ok(Some(tok));
        }
        let mut sc = Scan {
            last_space: !self.need_space,
            ..Scan::default()
        };
        loop {
            if self.pos >= self.src.len() {
                return self.end_of_input(&sc);
            }
            self.check_buffer(&sc)?;
            let ch = self.src[self.pos];
            self.pos += 1;
            if ch == b'\n' {
                self.line += 1;
                sc.sharp_comment = false;
            }
            if sc.sharp_comment {
                continue;
            }
            if sc.quoted {
                sc.quoted = false;
                continue;
            }
            if self.need_space {
                match self.after_quote(ch, &mut sc) {
                    Next::Continue => continue,
                    Next::Done(r) => return r,
                    Next::Fallthrough => {}
                }
            }
            let next = if sc.last_space {
                self.word_start(ch, &mut sc)
            } else {
                self.in_word(ch, &mut sc)
            };
            match next {
                Next::Done(r) => return r,
                Next::Continue | Next::Fallthrough => continue,
            }
        }
    }

    /// The input ended: clean between statements, else nginx's error.
    fn end_of_input(&self, sc: &Scan) -> Result<Option<Token>, ConfError> {
        if self.nargs > 0 || !sc.last_space {
            let msg = match self.origin {
                Origin::File(_) => "unexpected end of file, expecting \";\" or \"}\"",
                Origin::CommandLine => "unexpected end of parameter, expecting \";\"",
            };
            return Err(self.error(msg, self.line));
        }
        Ok(None)
    }

    /// nginx refills its buffer here; if the pending span already fills
    /// the whole buffer it gives up. -g text is never buffered.
    fn check_buffer(&self, sc: &Scan) -> Result<(), ConfError> {
        if !matches!(self.origin, Origin::File(_)) || self.pos - self.start != CONF_BUFFER {
            return Ok(());
        }
        let msg = if sc.d_quoted {
            "too long parameter, probably missing terminating \"\"\" character".to_string()
        } else if sc.s_quoted {
            "too long parameter, probably missing terminating \"'\" character".to_string()
        } else {
            let head = &self.src[self.start..self.start + 10];
            format!(
                "too long parameter \"{}...\" started",
                String::from_utf8_lossy(head)
            )
        };
        Err(self.error(msg, self.start_line))
    }

    /// Right after a closing quote a space, `;`, `{` or `)` must follow.
    fn after_quote(&mut self, ch: u8, sc: &mut Scan) -> Next {
        if is_space(ch) {
            sc.last_space = true;
            self.need_space = false;
            return Next::Continue;
        }
        match ch {
            b';' => {
                self.need_space = false;
                Next::Done(Ok(Some(self.terminator(TokenKind::Semicolon))))
            }
            b'{' => {
                self.need_space = false;
                Next::Done(Ok(Some(self.terminator(TokenKind::OpenBrace))))
            }
            // nginx lets `)` follow a quoted string, for `if ("a")`.
            b')' => {
                sc.last_space = true;
                self.need_space = false;
                Next::Fallthrough
            }
            _ => {
                let msg = format!("unexpected \"{}\"", char_at(self.src, self.pos - 1));
                Next::Done(Err(self.error(msg, self.line)))
            }
        }
    }

    /// After a space: a terminator, a comment, or the start of a word.
    fn word_start(&mut self, ch: u8, sc: &mut Scan) -> Next {
        self.start = self.pos - 1;
        self.start_line = self.line;
        if is_space(ch) {
            return Next::Continue;
        }
        match ch {
            b';' | b'{' => {
                if self.nargs == 0 {
                    let msg = format!("unexpected \"{}\"", ch as char);
                    return Next::Done(Err(self.error(msg, self.line)));
                }
                let kind = if ch == b';' {
                    TokenKind::Semicolon
                } else {
                    TokenKind::OpenBrace
                };
                return Next::Done(Ok(Some(self.terminator(kind))));
            }
            b'}' => {
                if self.nargs != 0 {
                    return Next::Done(Err(self.error("unexpected \"}\"", self.line)));
                }
                return Next::Done(Ok(Some(self.terminator(TokenKind::CloseBrace))));
            }
            b'#' => {
                sc.sharp_comment = true;
                return Next::Continue;
            }
            b'\\' => sc.quoted = true,
            b'"' => {
                self.start += 1;
                sc.d_quoted = true;
            }
            b'\'' => {
                self.start += 1;
                sc.s_quoted = true;
            }
            b'$' => sc.variable = true,
            _ => {}
        }
        sc.last_space = false;
        Next::Continue
    }

    /// Inside a word: escapes, variables, and its end (a space, `;`, `{`
    /// or the closing quote).
    fn in_word(&mut self, ch: u8, sc: &mut Scan) -> Next {
        if ch == b'{' && sc.variable {
            return Next::Continue;
        }
        sc.variable = false;
        if ch == b'\\' {
            sc.quoted = true;
            return Next::Continue;
        }
        if ch == b'$' {
            sc.variable = true;
            return Next::Continue;
        }
        let found = if sc.d_quoted {
            let end = ch == b'"';
            if end {
                sc.d_quoted = false;
                self.need_space = true;
            }
            end
        } else if sc.s_quoted {
            let end = ch == b'\'';
            if end {
                sc.s_quoted = false;
                self.need_space = true;
            }
            end
        } else {
            is_space(ch) || ch == b';' || ch == b'{'
        };
        if !found {
            return Next::Continue;
        }
        let text = unescape(&self.src[self.start..self.pos - 1]);
        let word = Token {
            kind: TokenKind::Word {
                text,
                quoted: self.need_space,
            },
            line: self.start_line,
        };
        self.nargs += 1;
        if !self.need_space {
            match ch {
                b';' => self.pending = Some(self.terminator(TokenKind::Semicolon)),
                b'{' => self.pending = Some(self.terminator(TokenKind::OpenBrace)),
                _ => {}
            }
        }
        Next::Done(Ok(Some(word)))
    }
}

/// The per-token scanning state of [`Lexer::next_token`] (nginx's local
/// flags in `ngx_conf_read_token`).
#[derive(Default)]
struct Scan {
    last_space: bool,
    sharp_comment: bool,
    quoted: bool,
    d_quoted: bool,
    s_quoted: bool,
    variable: bool,
}

/// What one character decided.
enum Next {
    /// Read the next character.
    Continue,
    /// Go on with this character (a `)` right after a quote).
    Fallthrough,
    /// The token (or the error).
    Done(Result<Option<Token>, ConfError>),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin() -> Origin {
        Origin::File(Arc::from(Path::new("/t.conf")))
    }

    fn lex(src: &str) -> Result<Vec<TokenKind>, String> {
        let mut lx = Lexer::new(src.as_bytes(), origin());
        let mut out = Vec::new();
        loop {
            match lx.next_token() {
                Ok(Some(t)) => out.push(t.kind),
                Ok(None) => return Ok(out),
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    fn w(s: &str) -> TokenKind {
        TokenKind::Word {
            text: s.into(),
            quoted: false,
        }
    }

    fn q(s: &str) -> TokenKind {
        TokenKind::Word {
            text: s.into(),
            quoted: true,
        }
    }

    use TokenKind::{CloseBrace as C, OpenBrace as O, Semicolon as S};

    #[test]
    fn words_and_punctuation() {
        assert_eq!(
            lex("a b;\nc { d; }").unwrap(),
            vec![w("a"), w("b"), S, w("c"), O, w("d"), S, C]
        );
        assert_eq!(lex("a{b;}").unwrap(), vec![w("a"), O, w("b"), S, C]);
    }

    #[test]
    fn quotes_and_escapes() {
        assert_eq!(
            lex(r#"x "a\"b\'c\\d\te\rf\ng\qh\$i";"#).unwrap(),
            vec![w("x"), q("a\"b'c\\d\te\rf\ng\\qh\\$i"), S]
        );
        assert_eq!(
            lex(r#"x 'a\"b\'c' "it's";"#).unwrap(),
            vec![w("x"), q("a\"b'c"), q("it's"), S]
        );
        // Escapes apply to unquoted words too; `\ ` and `\;` do not split.
        assert_eq!(
            lex(r#"x a\"b\tc\qd\ e a\;b;"#).unwrap(),
            vec![w("x"), w("a\"b\tc\\qd\\ e"), w("a\\;b"), S]
        );
        assert_eq!(
            lex(r#"x "" '' "{" '}' ";";"#).unwrap(),
            vec![w("x"), q(""), q(""), q("{"), q("}"), q(";"), S]
        );
        // Quotes inside a word are plain characters.
        assert_eq!(lex(r#"x a"b"c;"#).unwrap(), vec![w("x"), w(r#"a"b"c"#), S]);
        // `)` may follow a closing quote and starts a new word.
        assert_eq!(
            lex(r#"if ($a = "b") {"#).unwrap(),
            vec![w("if"), w("($a"), w("="), q("b"), w(")"), O]
        );
        // A multi-line quoted string keeps its newline.
        assert_eq!(lex("x \"a\nb\";").unwrap(), vec![w("x"), q("a\nb"), S]);
    }

    #[test]
    fn variables_and_braces() {
        assert_eq!(
            lex("x ${host}$uri a}b;").unwrap(),
            vec![w("x"), w("${host}$uri"), w("a}b"), S]
        );
        // `{` after anything but `$` ends the word and opens a block.
        assert_eq!(
            lex("x /${host}{x}").unwrap_err(),
            "unexpected end of file, expecting \";\" or \"}\" in /t.conf:1"
        );
    }

    #[test]
    fn comments() {
        assert_eq!(
            lex("# c1\na b; # c2 ; {\n#c3\nc a#b;#c4").unwrap(),
            vec![w("a"), w("b"), S, w("c"), w("a#b"), S]
        );
        assert_eq!(lex("a \"#x\";").unwrap(), vec![w("a"), q("#x"), S]);
    }

    #[test]
    fn token_lines() {
        let mut lx = Lexer::new(b"a\n\"b\nc\"\n;", origin());
        let lines: Vec<u32> = std::iter::from_fn(|| lx.next_token().unwrap())
            .map(|t| t.line)
            .collect();
        assert_eq!(lines, vec![1, 2, 4]);
    }

    #[test]
    fn syntax_errors() {
        assert_eq!(lex("a;\n;").unwrap_err(), "unexpected \";\" in /t.conf:2");
        assert_eq!(lex("\n{").unwrap_err(), "unexpected \"{\" in /t.conf:2");
        assert_eq!(lex("a b }").unwrap_err(), "unexpected \"}\" in /t.conf:1");
        assert_eq!(
            lex("a \"b\"c;").unwrap_err(),
            "unexpected \"c\" in /t.conf:1"
        );
        assert_eq!(
            lex("a \"b\"};").unwrap_err(),
            "unexpected \"}\" in /t.conf:1"
        );
        assert_eq!(lex("a 'b'#;").unwrap_err(), "unexpected \"#\" in /t.conf:1");
        assert_eq!(
            lex("a\n\"b\n").unwrap_err(),
            "unexpected end of file, expecting \";\" or \"}\" in /t.conf:3"
        );
        assert_eq!(
            lex("a b\n\n").unwrap_err(),
            "unexpected end of file, expecting \";\" or \"}\" in /t.conf:3"
        );
    }

    #[test]
    fn too_long_parameters() {
        let long = "a".repeat(5000);
        assert_eq!(
            lex(&format!("x {long};")).unwrap_err(),
            "too long parameter \"aaaaaaaaaa...\" started in /t.conf:1"
        );
        assert_eq!(
            lex(&format!("x\n\"{long}")).unwrap_err(),
            "too long parameter, probably missing terminating \"\"\" character in /t.conf:2"
        );
        assert_eq!(
            lex(&format!("x '{long}")).unwrap_err(),
            "too long parameter, probably missing terminating \"'\" character in /t.conf:1"
        );
        // A comment filling the buffer fails too; one byte less does not.
        let c = "a".repeat(CONF_BUFFER - 1);
        assert_eq!(
            lex(&format!("#{c}\nx;")).unwrap_err(),
            "too long parameter \"#aaaaaaaaa...\" started in /t.conf:1"
        );
        assert!(lex(&format!("#{}\nx;", &c[1..])).is_ok());
        // A word that ends exactly at end of file meets end of file first.
        let exact = "a".repeat(CONF_BUFFER);
        assert_eq!(
            lex(&format!("x {exact}")).unwrap_err(),
            "unexpected end of file, expecting \";\" or \"}\" in /t.conf:1"
        );
        // Command-line text has no buffer limit.
        let text = format!("x {long};");
        let mut lx = Lexer::new(text.as_bytes(), Origin::CommandLine);
        assert!(lx.next_token().is_ok() && lx.next_token().is_ok());
    }

    #[test]
    fn command_line_wording() {
        // "off" is still unfinished at the end, so the second call fails.
        let mut lx = Lexer::new(b"daemon off", Origin::CommandLine);
        lx.next_token().unwrap();
        assert_eq!(
            lx.next_token().unwrap_err().to_string(),
            "unexpected end of parameter, expecting \";\" in command line"
        );
    }

    #[test]
    fn non_ascii_after_quote() {
        assert_eq!(
            lex("a \"b\"é;").unwrap_err(),
            "unexpected \"é\" in /t.conf:1"
        );
        assert_eq!(lex("a é;").unwrap(), vec![w("a"), w("é"), S]);
    }
}
