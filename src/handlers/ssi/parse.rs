//! The SSI parser: NGINX's `ngx_http_ssi_parse` state machine, fed one
//! body piece at a time. Text passes through; `<!--#command param="value"
//! ... -->` becomes a [`Command`]; a malformed one becomes an error (its
//! text dropped, as NGINX drops it). A command may be split anywhere
//! between pieces: the parser keeps its state and the part of `<!--` it
//! has seen, never the body. Limits are NGINX's: a command name and a
//! parameter name of 32 bytes, a value of `ssi_value_length`.

/// What the parser found.
#[derive(Debug, PartialEq, Eq)]
pub enum Event {
    /// Bytes of the document, to pass on.
    Text(Vec<u8>),
    /// A command, whole.
    Command(Command),
    /// A malformed command (logged with `why`), at its place.
    Error(String),
}

/// One SSI command: its name and parameters in the order written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The command (`include`, `echo`…).
    pub name: String,
    /// `(name, value)` pairs; values unescaped of their quotes only.
    pub params: Vec<(String, String)>,
}

/// NGINX's `NGX_HTTP_SSI_COMMAND_LEN` and `NGX_HTTP_SSI_PARAM_LEN`.
const NAME_LEN: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Start,
    /// `held` bytes of `<!--` seen (1 to 4).
    Tag,
    PreCommand,
    Command,
    PreParam,
    Param,
    PreEqual,
    PreValue,
    Value(u8),
    /// After a backslash inside a value quoted by the byte.
    Escaped(u8),
    PostParam,
    End0,
    End1,
    Error,
    ErrorEnd0,
    ErrorEnd1,
}

/// The incremental parser (see the module header).
pub struct Parser {
    state: State,
    /// How much of `<!--` the `Tag` state has seen.
    held: usize,
    value_len: usize,
    /// The command being read: its name and raw parameters.
    name: String,
    params: Vec<(Vec<u8>, Vec<u8>)>,
    why: String,
}

const OPEN: &[u8] = b"<!--";

fn space(c: u8) -> bool {
    matches!(c, b' ' | b'\r' | b'\n' | b'\t')
}

impl Parser {
    /// A parser whose values may be `value_len` bytes long.
    pub fn new(value_len: usize) -> Parser {
        Parser {
            state: State::Start,
            held: 0,
            value_len,
            name: String::new(),
            params: Vec::new(),
            why: String::new(),
        }
    }

    /// Parses `piece`, appending what it found to `out`.
    pub fn feed(&mut self, piece: &[u8], out: &mut Vec<Event>) {
        let mut text_from = 0;
        let mut i = 0;
        while i < piece.len() {
            if self.state == State::Start {
                match memchr::memchr(b'<', &piece[i..]) {
                    None => break,
                    Some(at) => {
                        i += at;
                        push_text(out, &piece[text_from..i]);
                        self.state = State::Tag;
                        self.held = 1;
                        i += 1;
                        text_from = i;
                        continue;
                    }
                }
            }
            let c = piece[i];
            i += 1;
            if self.state == State::Tag {
                if self.held == 4 && c == b'#' {
                    self.state = State::PreCommand;
                    self.held = 0;
                } else if self.held < 4 && c == OPEN[self.held] {
                    self.held += 1;
                } else {
                    // Not a command: what was held is text; a new `<`
                    // may start one.
                    push_text(out, &OPEN[..self.held]);
                    if c == b'<' {
                        self.held = 1;
                    } else {
                        self.held = 0;
                        self.state = State::Start;
                        i -= 1;
                    }
                }
                text_from = i;
                continue;
            }
            if self.command_byte(c, out) {
                text_from = i;
            }
        }
        if self.state == State::Start {
            push_text(out, &piece[text_from..]);
        }
    }

    /// The end of the body: a `<!--` prefix still held is text; a command
    /// not closed is dropped.
    pub fn finish(&mut self, out: &mut Vec<Event>) {
        if self.state == State::Tag {
            push_text(out, &OPEN[..self.held]);
        }
        self.state = State::Start;
        self.held = 0;
    }

    fn fail(&mut self, why: String, end0: bool) {
        self.why = why;
        self.state = if end0 { State::ErrorEnd0 } else { State::Error };
    }

    fn param(&mut self) -> &mut (Vec<u8>, Vec<u8>) {
        self.params.last_mut().expect("a parameter is being read")
    }

    /// The parameter being read, as text for a log line.
    fn shown(&mut self) -> (String, String) {
        let (k, v) = self.param();
        (
            String::from_utf8_lossy(k).into_owned(),
            String::from_utf8_lossy(v).into_owned(),
        )
    }

    /// One byte inside `<!--#...-->`; true once the command ended.
    fn command_byte(&mut self, c: u8, out: &mut Vec<Event>) -> bool {
        match self.state {
            State::Value(_) | State::Escaped(_) | State::PostParam => self.value_byte(c),
            State::End0 | State::End1 | State::Error | State::ErrorEnd0 | State::ErrorEnd1 => {
                return self.end_byte(c, out)
            }
            _ => self.name_byte(c),
        }
        false
    }

    /// A byte of the command's or a parameter's name, or between them.
    fn name_byte(&mut self, c: u8) {
        let ch = c as char;
        match self.state {
            State::PreCommand if space(c) => {}
            State::PreCommand => {
                self.name = String::from(ch);
                self.params.clear();
                self.state = State::Command;
            }
            State::Command | State::PreParam if c == b'-' => self.state = State::End0,
            State::Command if space(c) => self.state = State::PreParam,
            State::Command => {
                if self.name.len() == NAME_LEN {
                    let why = format!("the \"{}{ch}...\" SSI command is too long", self.name);
                    self.fail(why, false);
                } else {
                    self.name.push(ch);
                }
            }
            State::PreParam if space(c) => {}
            State::PreParam => {
                self.params.push((vec![c], Vec::new()));
                self.state = State::Param;
            }
            State::Param if space(c) => self.state = State::PreEqual,
            State::Param | State::PreEqual if c == b'=' => self.state = State::PreValue,
            State::Param if c == b'-' => {
                let why = format!(
                    "unexpected \"-\" symbol after \"{}\" parameter in \"{}\" SSI command",
                    self.shown().0,
                    self.name
                );
                self.fail(why, true);
            }
            State::Param => {
                if self.param().0.len() == NAME_LEN {
                    let why = format!(
                        "too long \"{}{ch}...\" parameter in \"{}\" SSI command",
                        self.shown().0,
                        self.name
                    );
                    self.fail(why, false);
                } else {
                    self.param().0.push(c);
                }
            }
            State::PreEqual | State::PreValue if space(c) => {}
            State::PreEqual => {
                let why = format!(
                    "unexpected \"{ch}\" symbol after \"{}\" parameter in \"{}\" SSI command",
                    self.shown().0,
                    self.name
                );
                self.fail(why, c == b'-');
            }
            State::PreValue if c == b'"' || c == b'\'' => self.state = State::Value(c),
            State::PreValue => {
                let why = format!(
                    "unexpected \"{ch}\" symbol before value of \"{}\" parameter in \"{}\" SSI command",
                    self.shown().0,
                    self.name
                );
                self.fail(why, c == b'-');
            }
            _ => unreachable!("a name state"),
        }
    }

    /// A byte of a quoted value, or just after one.
    fn value_byte(&mut self, c: u8) {
        let ch = c as char;
        match self.state {
            State::Value(q) if c == q => self.state = State::PostParam,
            State::Value(q) | State::Escaped(q) => {
                if self.param().1.len() == self.value_len {
                    let (k, v) = self.shown();
                    let why = format!(
                        "too long \"{v}{ch}...\" value of \"{k}\" parameter in \"{}\" SSI command",
                        self.name
                    );
                    self.fail(why, false);
                } else {
                    // NGINX keeps the backslash; `evaluate` reads it.
                    self.state = if c == b'\\' && self.state == State::Value(q) {
                        State::Escaped(q)
                    } else {
                        State::Value(q)
                    };
                    self.param().1.push(c);
                }
            }
            State::PostParam if space(c) => self.state = State::PreParam,
            State::PostParam if c == b'-' => self.state = State::End0,
            State::PostParam => {
                let (k, v) = self.shown();
                let why = format!(
                    "unexpected \"{ch}\" symbol after \"{v}\" value of \"{k}\" parameter in \"{}\" SSI command",
                    self.name
                );
                self.fail(why, false);
            }
            _ => unreachable!("a value state"),
        }
    }

    /// A byte of the closing `-->`, or of a command in error; true once
    /// the command (or the error) ended.
    fn end_byte(&mut self, c: u8, out: &mut Vec<Event>) -> bool {
        let ch = c as char;
        match self.state {
            State::End0 | State::End1 => {
                let want = if self.state == State::End0 {
                    b'-'
                } else {
                    b'>'
                };
                if c != want {
                    let why = format!(
                        "unexpected \"{ch}\" symbol in \"{}\" SSI command",
                        self.name
                    );
                    self.fail(why, false);
                } else if self.state == State::End0 {
                    self.state = State::End1;
                } else {
                    self.state = State::Start;
                    let params = self
                        .params
                        .drain(..)
                        .map(|(k, v)| {
                            (
                                String::from_utf8_lossy(&k).into_owned(),
                                String::from_utf8_lossy(&v).into_owned(),
                            )
                        })
                        .collect();
                    let name = std::mem::take(&mut self.name);
                    out.push(Event::Command(Command { name, params }));
                    return true;
                }
            }
            State::Error if c == b'-' => self.state = State::ErrorEnd0,
            State::Error => {}
            State::ErrorEnd0 if c == b'-' => self.state = State::ErrorEnd1,
            State::ErrorEnd1 if c == b'>' => {
                self.state = State::Start;
                out.push(Event::Error(std::mem::take(&mut self.why)));
                return true;
            }
            State::ErrorEnd0 | State::ErrorEnd1 => self.state = State::Error,
            _ => unreachable!("an end state"),
        }
        false
    }
}

/// Appends text, joining it to text just before.
fn push_text(out: &mut Vec<Event>, bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    if let Some(Event::Text(t)) = out.last_mut() {
        t.extend_from_slice(bytes);
    } else {
        out.push(Event::Text(bytes.to_vec()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pieces: &[&str]) -> Vec<Event> {
        let mut p = Parser::new(255);
        let mut out = Vec::new();
        for piece in pieces {
            p.feed(piece.as_bytes(), &mut out);
        }
        p.finish(&mut out);
        // Join text split by pieces, as a reader sees it.
        let mut joined: Vec<Event> = Vec::new();
        for e in out {
            match (joined.last_mut(), e) {
                (Some(Event::Text(a)), Event::Text(b)) => a.extend_from_slice(&b),
                (_, e) => joined.push(e),
            }
        }
        joined
    }

    fn text(s: &str) -> Event {
        Event::Text(s.as_bytes().to_vec())
    }

    fn cmd(name: &str, params: &[(&str, &str)]) -> Event {
        Event::Command(Command {
            name: name.into(),
            params: params
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
        })
    }

    #[test]
    fn commands_and_text_in_order() {
        assert_eq!(
            parse(&["X<!--#echo var=\"a\" default='b' -->Y<!--#endif-->"]),
            vec![
                text("X"),
                cmd("echo", &[("var", "a"), ("default", "b")]),
                text("Y"),
                cmd("endif", &[]),
            ]
        );
    }

    #[test]
    fn a_command_split_at_every_byte_is_found() {
        let doc = "ab<<!-x<!--#set var=\"v\" value=\"1\" -->cd<!-";
        let whole = parse(&[doc]);
        assert_eq!(
            whole,
            vec![
                text("ab<<!-x"),
                cmd("set", &[("var", "v"), ("value", "1")]),
                text("cd<!-"),
            ]
        );
        for cut in 1..doc.len() {
            assert_eq!(parse(&[&doc[..cut], &doc[cut..]]), whole, "cut at {cut}");
        }
        let bytes: Vec<String> = doc.chars().map(String::from).collect();
        let refs: Vec<&str> = bytes.iter().map(String::as_str).collect();
        assert_eq!(parse(&refs), whole);
    }

    #[test]
    fn malformed_commands_are_errors_in_place() {
        let e = parse(&["a<!--#echo var=x -->b"]);
        assert_eq!(e[0], text("a"));
        assert!(matches!(&e[1], Event::Error(w) if w.contains("before value")));
        assert_eq!(e[2], text("b"));
        let long = format!("<!--#{} -->", "x".repeat(40));
        assert!(matches!(&parse(&[&long])[0], Event::Error(w) if w.contains("too long")));
        let mut p = Parser::new(3);
        let mut out = Vec::new();
        p.feed(b"<!--#set var=\"abcd\" -->", &mut out);
        assert!(matches!(&out[0], Event::Error(w) if w.contains("too long \"abc")));
    }

    #[test]
    fn escapes_keep_the_backslash_and_the_quote() {
        assert_eq!(
            parse(&[r#"<!--#set var="a" value="x\"y\\" -->"#]),
            vec![cmd("set", &[("var", "a"), ("value", r#"x\"y\\"#)])]
        );
    }
}
