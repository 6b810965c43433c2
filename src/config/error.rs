//! [`ConfError`]: a configuration error as NGINX words its `[emerg]`
//! lines (`unknown directive "x" in /etc/porter.conf:3`). Its own file so
//! that the lexer and the parser, which both make them, need not import
//! each other for it.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// A configuration error, worded like nginx's `[emerg]` messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfError {
    /// The message without location, e.g. `unexpected "}"`.
    pub message: String,
    /// The file the error is in; `None` when nginx prints no location.
    pub file: Option<Arc<Path>>,
    /// The line within `file` (meaningless when `file` is `None`).
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
