//! Tokens of NGINX's configuration language, each with its line number:
//! words, quoted strings (with NGINX's escapes), `;`, `{`, `}`; `#` starts a
//! comment to the end of the line. Variables stay as text: templates are
//! compiled by the directive table, where the context is known.

/// One token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    /// A word or quoted string (quoted ones may be empty, and a quoted `{`
    /// is a word, not a brace).
    Word(String),
    /// `;`
    Semi,
    /// `{`
    Open,
    /// `}`
    Close,
    /// End of input.
    Eof,
}

/// A lexing error: message and line (the caller adds the file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LexError {
    /// NGINX's wording.
    pub message: String,
    /// Line number.
    pub line: u32,
}

/// Streams tokens out of one file's text.
pub struct Lexer<'a> {
    src: &'a [u8],
    pos: usize,
    line: u32,
}

impl<'a> Lexer<'a> {
    /// A lexer over `text`.
    pub fn new(text: &'a str) -> Lexer<'a> {
        Lexer {
            src: text.as_bytes(),
            pos: 0,
            line: 1,
        }
    }

    /// The line of the last token returned.
    pub fn line(&self) -> u32 {
        self.line
    }

    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    /// Returns the next token and its line.
    pub fn next_token(&mut self) -> Result<(Tok, u32), LexError> {
        // Skip whitespace and comments.
        loop {
            match self.peek() {
                Some(b'\n') => {
                    self.line += 1;
                    self.pos += 1;
                }
                Some(b' ' | b'\t' | b'\r') => self.pos += 1,
                Some(b'#') => {
                    while let Some(c) = self.peek() {
                        if c == b'\n' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
        let line = self.line;
        let Some(c) = self.peek() else {
            return Ok((Tok::Eof, line));
        };
        match c {
            b';' => {
                self.pos += 1;
                Ok((Tok::Semi, line))
            }
            b'{' => {
                self.pos += 1;
                Ok((Tok::Open, line))
            }
            b'}' => {
                self.pos += 1;
                Ok((Tok::Close, line))
            }
            b'"' | b'\'' => self.quoted(c, line),
            _ => self.word(line),
        }
    }

    fn quoted(&mut self, q: u8, line: u32) -> Result<(Tok, u32), LexError> {
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(LexError {
                    message: "unexpected end of file, expecting \";\" or \"}\"".into(),
                    line: self.line,
                });
            };
            self.pos += 1;
            match c {
                b'\\' => match self.peek() {
                    // NGINX unescapes only \" \' \\ \t \r \n; any other
                    // backslash is kept as written.
                    Some(e @ (b'"' | b'\'' | b'\\')) => {
                        out.push(e);
                        self.pos += 1;
                    }
                    Some(b't') => {
                        out.push(b'\t');
                        self.pos += 1;
                    }
                    Some(b'r') => {
                        out.push(b'\r');
                        self.pos += 1;
                    }
                    Some(b'n') => {
                        out.push(b'\n');
                        self.pos += 1;
                    }
                    _ => out.push(b'\\'),
                },
                b'\n' => {
                    self.line += 1;
                    out.push(c);
                }
                c if c == q => break,
                c => out.push(c),
            }
        }
        // A quoted string must be followed by a separator.
        match self.peek() {
            None | Some(b' ' | b'\t' | b'\r' | b'\n' | b';' | b'{' | b'}') => {}
            Some(c) => {
                return Err(LexError {
                    message: format!("unexpected \"{}\"", c as char),
                    line: self.line,
                })
            }
        }
        Ok((Tok::Word(String::from_utf8_lossy(&out).into_owned()), line))
    }

    fn word(&mut self, line: u32) -> Result<(Tok, u32), LexError> {
        let mut out = Vec::new();
        let mut in_var_brace = false;
        while let Some(c) = self.peek() {
            match c {
                b' ' | b'\t' | b'\r' | b'\n' | b';' => break,
                // `${name}` braces belong to the word.
                b'{' if out.last() == Some(&b'$') => {
                    in_var_brace = true;
                    out.push(c);
                    self.pos += 1;
                }
                b'}' if in_var_brace => {
                    in_var_brace = false;
                    out.push(c);
                    self.pos += 1;
                }
                b'{' | b'}' => break,
                b'\\' => {
                    // Outside quotes a backslash escapes the next byte.
                    self.pos += 1;
                    if let Some(n) = self.peek() {
                        match n {
                            b'"' | b'\'' | b'\\' | b';' | b' ' | b'{' | b'}' | b'#' => out.push(n),
                            b't' => out.push(b'\t'),
                            b'r' => out.push(b'\r'),
                            b'n' => out.push(b'\n'),
                            _ => {
                                out.push(b'\\');
                                out.push(n);
                            }
                        }
                        if n == b'\n' {
                            self.line += 1;
                        }
                        self.pos += 1;
                    }
                }
                _ => {
                    out.push(c);
                    self.pos += 1;
                }
            }
        }
        Ok((Tok::Word(String::from_utf8_lossy(&out).into_owned()), line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        let mut l = Lexer::new(s);
        let mut v = Vec::new();
        loop {
            let (t, _) = l.next_token().unwrap();
            if t == Tok::Eof {
                return v;
            }
            v.push(t);
        }
    }

    fn w(s: &str) -> Tok {
        Tok::Word(s.into())
    }

    #[test]
    fn words_quotes_comments() {
        assert_eq!(
            toks("a b;# c d;\n e 'f g' \"h\\\"i\\n\" \"\" { } "),
            vec![
                w("a"),
                w("b"),
                Tok::Semi,
                w("e"),
                w("f g"),
                w("h\"i\n"),
                w(""),
                Tok::Open,
                Tok::Close
            ]
        );
    }

    #[test]
    fn quoted_brace_is_a_word_and_var_braces_stay() {
        assert_eq!(toks("x \"{\";"), vec![w("x"), w("{"), Tok::Semi]);
        assert_eq!(
            toks("return 200 ${host}x;"),
            vec![w("return"), w("200"), w("${host}x"), Tok::Semi]
        );
        assert_eq!(toks("a\\;b;"), vec![w("a;b"), Tok::Semi]);
    }

    #[test]
    fn line_numbers() {
        let mut l = Lexer::new("a;\n\n b\n;");
        assert_eq!(l.next_token().unwrap(), (w("a"), 1));
        assert_eq!(l.next_token().unwrap(), (Tok::Semi, 1));
        assert_eq!(l.next_token().unwrap(), (w("b"), 3));
        assert_eq!(l.next_token().unwrap(), (Tok::Semi, 4));
    }

    #[test]
    fn unterminated_quote() {
        let mut l = Lexer::new("a \"b");
        l.next_token().unwrap();
        assert!(l.next_token().is_err());
        let mut l = Lexer::new("a \"b\"c;");
        l.next_token().unwrap();
        assert_eq!(l.next_token().unwrap_err().message, "unexpected \"c\"");
    }
}
