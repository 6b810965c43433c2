//! The SSI filter: `ssi`, `ssi_types`, `ssi_silent_errors`,
//! `ssi_value_length`, `ssi_last_modified` and the commands of NGINX's
//! `ngx_http_ssi_filter_module` (`include`, `echo`, `set`, `if`/`elif`/
//! `else`/`endif`, `config`, `block`/`endblock`), with `$date_local` and
//! `$date_gmt` in the `config timefmt`.
//!
//! The header part runs in the filter chain where NGINX has it (after
//! charset, before gzip) and, for a subrequest, on its own response (so an
//! included page's commands run, as NGINX's filters run for subrequests):
//! a response of an `ssi_types` type whose length is not known to be 0
//! is parsed; for the main request it loses `Content-Length` (chunked on
//! HTTP/1.1, a close on 1.0) and ranges, and `Last-Modified`/`ETag` unless
//! `ssi_last_modified on` (the ETag then weak).
//!
//! The body part, [`SsiStream`], reads the body one piece at a time (the
//! file through the disk layer, or the proxied stream: `PieceSource`) and
//! parses it incrementally ([`parse`]), so a command split across pieces
//! works and the body is never held whole. `include virtual=` and `file=`
//! are subrequests ([`super::subrequest`]) through porter's own request
//! path (static files through the disk layer, proxy, `return`…); the
//! included body is streamed in place before the parse goes on, so
//! includes come out in document order and the loop never waits on a
//! disk. porter runs one include at a time, as NGINX does with `wait=yes`
//! (NGINX may run an include without `wait` while it parses on; the bytes
//! sent are the same). Variables set by `set`, `include set=` and regex
//! captures, and `block`s, are shared by the main request and its
//! subrequests ([`Shared`], carried in `RequestCtx::filter_state`), as in
//! NGINX. Nested includes stop at NGINX's depth of 50.

mod commands;
pub mod eval;
pub mod parse;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use super::body_source::PieceSource;
use super::outcome::Env;
use super::subrequest::{Answer, Subrequest};
use crate::http::context::RequestCtx;
use crate::http::response::{Body, BodyStream, ChunkFuture, Response, StreamBody};
use crate::vars::template::{Var, VarSource};
use eval::Encoding;
use parse::{Event, Parser};

/// NGINX's bound on nested subrequests.
const MAX_DEPTH: u32 = 50;

/// What the main request and its subrequests share.
#[derive(Default)]
pub struct Shared {
    /// SSI variables (lowercased names), in the order set.
    vars: Vec<(String, String)>,
    /// `block`s, in the order defined: name and raw content.
    blocks: Vec<(String, Vec<u8>)>,
    /// The last `if` regex's captures (`$0`…`$9`).
    captures: Vec<String>,
    /// The nesting of the include being started.
    depth: u32,
}

impl Shared {
    fn set_var(&mut self, name: String, value: String) {
        match self.vars.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.vars.push((name, value)),
        }
    }
}

/// Runs the SSI header part on `resp` and wraps its body.
pub fn header_filter(ctx: &mut RequestCtx, env: &Env<'_>, resp: &mut Response) {
    let s = &ctx.loc.s;
    if !s.ssi || resp.content_length == Some(0) {
        return;
    }
    let Some(ct) = resp.content_type.as_deref() else {
        return;
    };
    let base = ct.split(';').next().unwrap_or("").trim();
    if !s
        .ssi_types
        .iter()
        .any(|t| t == "*" || t.eq_ignore_ascii_case(base))
    {
        return;
    }
    if !ctx.subrequest {
        resp.content_length = None;
        resp.allow_ranges = false;
        resp.accept_ranges = false;
        // A proxied `Accept-Ranges` line too (NGINX's
        // `ngx_http_clear_accept_ranges` clears the upstream's).
        resp.headers
            .retain(|(n, _)| !n.eq_ignore_ascii_case("accept-ranges"));
        if s.ssi_last_modified {
            if let Some(e) = resp.etag.as_mut().filter(|e| !e.starts_with("W/")) {
                *e = format!("W/{e}");
            }
        } else {
            resp.last_modified = None;
            resp.etag = None;
            resp.headers.retain(|(n, _)| {
                !n.eq_ignore_ascii_case("last-modified") && !n.eq_ignore_ascii_case("etag")
            });
        }
    }
    if ctx.is_head() || matches!(resp.body, Body::Empty) {
        return;
    }
    if !ctx.subrequest {
        super::body_source::frame_unknown_length(ctx, resp);
    }
    let body = std::mem::replace(&mut resp.body, Body::Empty);
    let stream = SsiStream::new(ctx, env, PieceSource::of(body));
    resp.body = Body::Stream(StreamBody::new(Box::new(stream)));
}

/// An include in progress.
enum Include {
    /// The subrequest runs; then its body goes out, or into a variable,
    /// or the stub replaces it.
    Pending {
        answer: Pin<Box<dyn Future<Output = Answer>>>,
        set: Option<String>,
        stub: Option<Vec<u8>>,
    },
    /// Its body (or the stub) is being sent.
    Body(PieceSource),
    /// A subrequest in memory failed: NGINX ends the main request.
    Failed,
    /// Its body is being read into `set`'s variable.
    Collect {
        body: PieceSource,
        name: String,
        value: Vec<u8>,
        /// The subrequest's `subrequest_output_buffer_size`.
        limit: u64,
    },
}

/// What one SSI-processed body has set for itself (NGINX's per-request
/// SSI context): the `if` state, `block`, `echo` encoding, `config`.
struct Local {
    output: bool,
    output_chosen: bool,
    /// 0, or 1 after `if`/`elif`, 2 after `else` (NGINX's COND_IF/ELSE).
    conditional: u8,
    block: bool,
    encoding: Encoding,
    timefmt: String,
    errmsg: String,
}

/// A body with its SSI commands run (see the module header).
pub struct SsiStream {
    source: PieceSource,
    source_done: bool,
    parser: Parser,
    events: VecDeque<Event>,
    local: Local,
    shared: Rc<RefCell<Shared>>,
    /// The request's variables (a copy of its state when the filter ran).
    vars: RequestCtx,
    /// Makes the includes' subrequests.
    sub: Rc<Subrequest>,
    silent: bool,
    /// This body's include nesting (0 for the main request's).
    depth: u32,
    include: Option<Include>,
}

impl SsiStream {
    /// The SSI stream of `ctx`'s response body `source`.
    fn new(ctx: &mut RequestCtx, env: &Env<'_>, source: PieceSource) -> SsiStream {
        let shared = ctx
            .filter_state
            .clone()
            .and_then(|a| a.downcast::<RefCell<Shared>>().ok())
            .unwrap_or_default();
        ctx.filter_state = Some(shared.clone());
        let sub = Subrequest::of(ctx, env);
        let mut vars = sub.clone_ctx();
        vars.subrequest = ctx.subrequest;
        vars.slots = ctx.slots.clone();
        let depth = if ctx.subrequest {
            shared.borrow().depth
        } else {
            0
        };
        let s = &ctx.loc.s;
        SsiStream {
            source,
            source_done: false,
            parser: Parser::new(s.ssi_value_length as usize),
            events: VecDeque::new(),
            local: Local {
                output: true,
                output_chosen: false,
                conditional: 0,
                block: false,
                encoding: Encoding::Entity,
                timefmt: crate::util::time::SSI_TIMEFMT.to_string(),
                errmsg: "[an error occurred while processing the directive]".to_string(),
            },
            shared,
            vars,
            silent: s.ssi_silent_errors,
            sub: Rc::new(sub),
            depth,
            include: None,
        }
    }

    /// The value of variable `name` (lowercased): a capture of the last
    /// `if` regex, an SSI variable, the date ones in this body's
    /// `timefmt`, else the request's; `None` when it has none.
    fn lookup(&self, name: &str) -> Option<String> {
        {
            let sh = self.shared.borrow();
            if let [d @ b'0'..=b'9'] = name.as_bytes() {
                if let Some(c) = sh.captures.get((d - b'0') as usize) {
                    return Some(c.clone());
                }
            }
            if let Some((_, v)) = sh.vars.iter().find(|(n, _)| n == name) {
                return Some(v.clone());
            }
        }
        let now = crate::util::time::now().0;
        match name {
            "date_gmt" => return Some(crate::util::time::strftime(&self.local.timefmt, now, true)),
            "date_local" => {
                return Some(crate::util::time::strftime(&self.local.timefmt, now, false))
            }
            _ => {}
        }
        let var = match self.vars.server.variables.get(name) {
            Some(v) => v.clone(),
            None => Var::from_name(name)?,
        };
        if !self.vars.var_found(&var) {
            return None;
        }
        let mut v = String::new();
        self.vars.append(&var, &mut v);
        Some(v)
    }

    /// Logs `why` at `error` for this request.
    fn log_error(&self, why: &str) {
        self.vars.log(&self.sub.log).error(format_args!("{why}"));
    }

    /// A failed command: the `errmsg` in its place, unless
    /// `ssi_silent_errors`.
    fn failed(&self, out: &mut Vec<u8>) {
        if !self.silent {
            out.extend_from_slice(self.local.errmsg.as_bytes());
        }
    }

    /// Handles one parsed event, appending what it outputs.
    fn event(&mut self, ev: Event, out: &mut Vec<u8>) {
        match ev {
            Event::Text(t) if self.local.output => out.extend_from_slice(&t),
            Event::Text(t) => self.to_block(&t),
            Event::Error(why) => {
                self.log_error(&why);
                self.failed(out);
            }
            Event::Command(cmd) => self.command(cmd, out),
        }
    }

    /// Keeps `bytes` in the block being defined, if one is.
    fn to_block(&self, bytes: &[u8]) {
        if self.local.block {
            if let Some((_, b)) = self.shared.borrow_mut().blocks.last_mut() {
                b.extend_from_slice(bytes);
            }
        }
    }

    /// The include's subrequest answered: what to read from it.
    fn answered(&mut self, answer: Answer, set: Option<String>, stub: Option<Vec<u8>>) {
        let Answer { mut ctx, response } = answer;
        if let Some(name) = set {
            // NGINX keeps the body of a subrequest that did not fail.
            if let Some(r) = response.filter(|r| r.status < 300) {
                let limit = ctx.loc.s.subrequest_output_buffer_size;
                if let Some(len) = r.content_length.filter(|&l| l > limit) {
                    self.log_error(&format!("too big subrequest response: {len}"));
                    self.include = Some(Include::Failed);
                    return;
                }
                self.include = Some(Include::Collect {
                    body: PieceSource::of(r.body),
                    name,
                    value: Vec::new(),
                    limit,
                });
            }
            return;
        }
        let silent = response.as_ref().is_none_or(|r| {
            r.special || r.content_length == Some(0) || matches!(r.body, Body::Empty)
        });
        // In place of an error page, NGINX sends the stub with a header of
        // its own, through the subrequest's filters: its commands run
        // where SSI is on. After an empty answer's header it goes as is.
        let special = response.as_ref().is_some_and(|r| r.special);
        let body = match (stub, response) {
            (Some(stub), _) if silent => {
                if special && ctx.loc.s.ssi {
                    ctx.filter_state = Some(self.shared.clone());
                    self.shared.borrow_mut().depth = self.depth + 1;
                    let env = self.sub.env();
                    let s = SsiStream::new(&mut ctx, &env, PieceSource::Bytes(stub));
                    PieceSource::Stream(Box::new(s))
                } else {
                    PieceSource::Bytes(stub)
                }
            }
            (_, Some(r)) => PieceSource::of(r.body),
            (_, None) => return,
        };
        self.include = Some(Include::Body(body));
    }

    /// Reads the include in progress; `Ok(true)` when it put bytes in
    /// `out`. Cancel-safe: state changes only after an await completed.
    async fn read_include(&mut self, out: &mut Vec<u8>) -> std::io::Result<bool> {
        match self.include.as_mut().expect("an include") {
            Include::Pending { answer, .. } => {
                let answer = answer.as_mut().await;
                let Some(Include::Pending { set, stub, .. }) = self.include.take() else {
                    unreachable!("pending above");
                };
                self.answered(answer, set, stub);
                Ok(false)
            }
            Include::Body(src) => {
                let (piece, last) = src.next().await?;
                if last {
                    self.include = None;
                }
                out.extend_from_slice(&piece);
                Ok(!out.is_empty())
            }
            Include::Failed => Err(crate::http::response::logged_error()),
            Include::Collect {
                body, value, limit, ..
            } => {
                let (piece, last) = body.next().await?;
                value.extend_from_slice(&piece);
                if value.len() as u64 > *limit {
                    self.log_error("too big subrequest response");
                    self.include = Some(Include::Failed);
                } else if last {
                    let Some(Include::Collect { name, value, .. }) = self.include.take() else {
                        unreachable!("collecting above");
                    };
                    let value = String::from_utf8_lossy(&value).into_owned();
                    self.shared.borrow_mut().set_var(name, value);
                }
                Ok(false)
            }
        }
    }
}

impl BodyStream for SsiStream {
    fn read_chunk<'a>(&'a mut self, out: &'a mut Vec<u8>) -> ChunkFuture<'a> {
        // Nothing is awaited while `out` holds bytes, and every await is
        // cancel-safe with the state it needs kept in `self`.
        Box::pin(async move {
            loop {
                if self.include.is_some() {
                    if self.read_include(out).await? {
                        return Ok(true);
                    }
                    continue;
                }
                if let Some(ev) = self.events.pop_front() {
                    self.event(ev, out);
                    if !out.is_empty() {
                        return Ok(true);
                    }
                    continue;
                }
                if self.source_done {
                    return Ok(false);
                }
                let (piece, last) = self.source.next().await?;
                let mut events = Vec::new();
                self.parser.feed(&piece, &mut events);
                if last {
                    self.parser.finish(&mut events);
                    self.source_done = true;
                }
                self.events.extend(events);
            }
        })
    }
}
