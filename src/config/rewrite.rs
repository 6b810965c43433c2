//! The rewrite module's program: what `rewrite`, `return`, `set`, `if` and
//! `break` compile to, in the order written, for one level (a server or a
//! location). `handlers::rewrite` runs it; as in NGINX, a location's
//! program is not inherited by the locations nested in it.

use std::sync::Arc;

use super::model::{LocationConf, Return};
use crate::vars::regex::Regex;
use crate::vars::template::{Indexed, Template};

/// One instruction.
#[derive(Debug)]
pub enum Op {
    /// `rewrite REGEX REPLACEMENT [FLAG]`.
    Rewrite(Box<Rewrite>),
    /// `return`.
    Return(Return),
    /// `set $var VALUE`.
    Set(Arc<Indexed>, Template),
    /// `set $args VALUE`: the request's arguments.
    SetArgs(Template),
    /// `set $limit_rate VALUE`: the request's rate, a size.
    SetLimitRate(Template),
    /// `if (COND) { … }`.
    If(Box<If>),
    /// `break`.
    Break,
}

/// What a `rewrite` does after replacing the URI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RewriteFlag {
    /// No flag: go on with the next instruction; the locations are searched
    /// again after the location's program.
    Continue,
    /// `last`: stop, and search the locations again.
    Last,
    /// `break`: stop, and stay in this location.
    Break,
    /// `redirect` / `permanent` / a replacement starting with `http://`,
    /// `https://` or `$scheme`: answer with this redirect status.
    Redirect(u16),
}

/// One `rewrite`.
#[derive(Debug)]
pub struct Rewrite {
    /// Matched against the URI.
    pub regex: Regex,
    /// The new URI (with `$1`… and variables); may hold `?args`.
    pub replacement: Template,
    /// The replacement has a `?`: what follows becomes the arguments.
    pub has_args: bool,
    /// The request's arguments are appended (not when the replacement ends
    /// in `?`).
    pub add_args: bool,
    /// What follows.
    pub flag: RewriteFlag,
}

/// One `if` block: the condition, the instructions inside, and (in a
/// location) the configuration the block sets when it is true.
#[derive(Debug)]
pub struct If {
    /// The condition.
    pub cond: Cond,
    /// The instructions of the block.
    pub body: Vec<Op>,
    /// An `if` in a location is a location of its own (its directives
    /// apply when it is true); `None` at server level.
    pub loc: Option<Arc<LocationConf>>,
}

/// A file test of `if`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileTest {
    /// `-f`: a regular file.
    File,
    /// `-d`: a directory.
    Dir,
    /// `-e`: exists (file, directory or link).
    Exists,
    /// `-x`: executable.
    Exec,
}

/// An `if` condition.
#[derive(Debug)]
pub enum Cond {
    /// `($var)`: true unless empty or `0`.
    Value(Template),
    /// `($var = text)` (or `!=` with `negate`).
    Equal(Template, Template, bool),
    /// `($var ~ regex)` (`~*` caseless; `!~`, `!~*` with `negate`).
    Match(Template, Regex, bool),
    /// `(-f path)` and the others (`!-f` with `negate`).
    File(Template, FileTest, bool),
}
