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
//! path (static files through the disk layer, proxy, `return`…), each
//! a task on the worker's loop, so the loop never waits on a disk.
//!
//! Includes run at once, as NGINX's: the parse goes on past an include
//! without `wait=yes` or `set=`, starting the next ones while the first
//! is still being answered, and the output waits in document order (the
//! [`Item`] queue, NGINX's postpone filter): text parsed ahead, and the
//! includes whose bodies are read, one after the other, when their turn
//! to be sent comes (an included body is never read ahead, so it is held
//! by its own upstream or file, not in memory). An include with
//! `wait=yes` or `set=` holds the parse until it is done, as in NGINX
//! (`ctx->wait`). What parsing ahead holds is bounded: at most
//! [`MAX_AHEAD_INCLUDES`] includes and [`MAX_AHEAD_TEXT`] bytes of text
//! wait. For the main request the head waits for the first byte of the
//! body (`HeadTiming::WithFirstPiece`; NGINX's header sits in its output buffer
//! until body bytes join it): an include whose `set=` fails ends the
//! response before anything was sent. Variables set by `set`, `include
//! set=` and regex captures, and `block`s, are shared by the main request
//! and its subrequests ([`Shared`], carried in `RequestCtx::filter_state`
//! with the include's nesting, [`Nested`]), as in NGINX. Nested includes
//! stop at NGINX's depth of 50.

mod commands;
pub mod eval;
pub mod parse;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::Poll;

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

/// The most includes parsed ahead that may wait for their turn to be
/// sent (each a running subrequest, maybe an upstream connection).
const MAX_AHEAD_INCLUDES: usize = 32;

/// The most bytes of parsed text that may wait behind includes.
const MAX_AHEAD_TEXT: usize = 64 * 1024;

/// What the main request and its subrequests share.
#[derive(Default)]
pub struct Shared {
    /// SSI variables (lowercased names), in the order set.
    vars: Vec<(String, String)>,
    /// `block`s, in the order defined: name and raw content.
    blocks: Vec<(String, Vec<u8>)>,
    /// The last `if` regex's captures (`$0`…`$9`).
    captures: Vec<String>,
}

/// What a request's SSI filter finds in its `RequestCtx::filter_state`:
/// the state it shares, and how deep in includes it is (an include's
/// subrequest carries its own, one deeper than its page's).
struct Nested {
    shared: Rc<RefCell<Shared>>,
    depth: u32,
}

/// An include's subrequest, a task on the worker's loop; stopped when
/// dropped (the response it was for is gone).
struct Running(tokio::task::JoinHandle<Answer>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.abort();
    }
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
        resp.head_timing = crate::http::response::HeadTiming::WithFirstPiece;
    }
    let body = std::mem::replace(&mut resp.body, Body::Empty);
    let stream = SsiStream::new(ctx, env, PieceSource::of(body));
    resp.body = Body::Stream(StreamBody::new(Box::new(stream)));
}

/// What is to go out, in document order.
enum Item {
    /// Text the parse put out.
    Text(Vec<u8>),
    /// An include; `waited` (`wait=yes` or `set=`) holds the parse until
    /// it is done.
    Include { include: Include, waited: bool },
}

/// An include in progress.
enum Include {
    /// The subrequest runs; then its body goes out, or into a variable,
    /// or the stub replaces it.
    Pending {
        task: Running,
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
    /// What the parse put out and is still to be sent, in order.
    queue: VecDeque<Item>,
}

/// What came first while the page was parsed ahead: the answer of the
/// include to send next, or the page's next piece.
enum Raced {
    Answer(Box<Result<Answer, tokio::task::JoinError>>),
    Piece(std::io::Result<(Vec<u8>, bool)>),
}

impl SsiStream {
    /// The SSI stream of `ctx`'s response body `source`.
    fn new(ctx: &mut RequestCtx, env: &Env<'_>, source: PieceSource) -> SsiStream {
        let nested = ctx
            .filter_state
            .clone()
            .and_then(|a| a.downcast::<Nested>().ok());
        let (shared, depth) = match nested {
            Some(n) if ctx.subrequest => (Rc::clone(&n.shared), n.depth),
            Some(n) => (Rc::clone(&n.shared), 0),
            None => (Rc::default(), 0),
        };
        ctx.filter_state = Some(Rc::new(Nested {
            shared: Rc::clone(&shared),
            depth,
        }));
        let inner = Nested {
            shared: Rc::clone(&shared),
            depth: depth + 1,
        };
        let sub = Subrequest::of(ctx, env).with_filter_state(Rc::new(inner));
        let mut vars = sub.clone_ctx();
        vars.subrequest = ctx.subrequest;
        vars.slots = ctx.slots.clone();
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
            queue: VecDeque::new(),
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
    fn answered(
        &mut self,
        answer: Answer,
        set: Option<String>,
        stub: Option<Vec<u8>>,
    ) -> Option<Include> {
        let Answer { mut ctx, response } = answer;
        if let Some(name) = set {
            // NGINX keeps the body of a subrequest that did not fail.
            if let Some(r) = response.filter(|r| r.status < 300) {
                let limit = ctx.loc.s.subrequest_output_buffer_size;
                if let Some(len) = r.content_length.filter(|&l| l > limit) {
                    self.log_error(&format!("too big subrequest response: {len}"));
                    return Some(Include::Failed);
                }
                return Some(Include::Collect {
                    body: PieceSource::of(r.body),
                    name,
                    value: Vec::new(),
                    limit,
                });
            }
            return None;
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
                    ctx.filter_state = Some(Rc::new(Nested {
                        shared: Rc::clone(&self.shared),
                        depth: self.depth + 1,
                    }));
                    let env = self.sub.env();
                    let s = SsiStream::new(&mut ctx, &env, PieceSource::Bytes(stub));
                    PieceSource::Stream(Box::new(s))
                } else {
                    PieceSource::Bytes(stub)
                }
            }
            (_, Some(r)) => PieceSource::of(r.body),
            (_, None) => return None,
        };
        Some(Include::Body(body))
    }

    /// The include at the front answered (or its task failed): what of
    /// it is still to be read takes its place.
    fn take_answer(
        &mut self,
        answer: Result<Answer, tokio::task::JoinError>,
    ) -> std::io::Result<()> {
        let Some(Item::Include {
            include: Include::Pending { set, stub, .. },
            waited,
        }) = self.queue.pop_front()
        else {
            unreachable!("a pending include at the front");
        };
        let answer = answer.map_err(|_| crate::http::response::logged_error())?;
        if let Some(include) = self.answered(answer, set, stub) {
            self.queue.push_front(Item::Include { include, waited });
        }
        Ok(())
    }

    /// Reads the include at the front of the queue; `Ok(true)` when it
    /// put bytes in `out`. Cancel-safe: state changes only after an await
    /// completed.
    async fn read_front(&mut self, out: &mut Vec<u8>) -> std::io::Result<bool> {
        let Some(Item::Include { include, .. }) = self.queue.front_mut() else {
            unreachable!("an include at the front");
        };
        match include {
            Include::Pending { task, .. } => {
                let answer = (&mut task.0).await;
                self.take_answer(answer)?;
                Ok(false)
            }
            Include::Body(src) => {
                let (piece, last) = src.next().await?;
                if last {
                    self.queue.pop_front();
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
                    *include = Include::Failed;
                    self.log_error("too big subrequest response");
                } else if last {
                    let Some(Item::Include {
                        include: Include::Collect { name, value, .. },
                        ..
                    }) = self.queue.pop_front()
                    else {
                        unreachable!("collecting above");
                    };
                    let value = String::from_utf8_lossy(&value).into_owned();
                    self.shared.borrow_mut().set_var(name, value);
                }
                Ok(false)
            }
        }
    }

    /// Whether the parse must wait: a `wait=yes` or `set=` include is
    /// not done, or as much as [`MAX_AHEAD_INCLUDES`] and
    /// [`MAX_AHEAD_TEXT`] allow waits to be sent.
    fn held(&self) -> bool {
        let (mut includes, mut text) = (0, 0);
        for item in &self.queue {
            match item {
                Item::Text(t) => text += t.len(),
                Item::Include { waited: true, .. } => return true,
                Item::Include { .. } => includes += 1,
            }
        }
        includes >= MAX_AHEAD_INCLUDES || text >= MAX_AHEAD_TEXT
    }

    /// Runs the parsed commands while the parse is not held: text goes
    /// to the queue, includes start.
    fn run_events(&mut self) {
        while !self.held() {
            let Some(ev) = self.events.pop_front() else {
                return;
            };
            let mut text = Vec::new();
            self.event(ev, &mut text);
            if text.is_empty() {
                continue;
            }
            match self.queue.back_mut() {
                Some(Item::Text(t)) => t.extend_from_slice(&text),
                _ => self.queue.push_back(Item::Text(text)),
            }
        }
    }

    /// Parses one more piece of the page.
    fn feed(&mut self, piece: Vec<u8>, last: bool) {
        let mut events = Vec::new();
        self.parser.feed(&piece, &mut events);
        if last {
            self.parser.finish(&mut events);
            self.source_done = true;
        }
        self.events.extend(events);
    }

    /// Waits for the answer of the include at the front or the page's
    /// next piece, whichever comes first (the includes parsed ahead run
    /// meanwhile, as tasks of their own).
    async fn race(&mut self) -> std::io::Result<()> {
        let raced = {
            let Some(Item::Include {
                include: Include::Pending { task, .. },
                ..
            }) = self.queue.front_mut()
            else {
                unreachable!("a pending include at the front");
            };
            let mut piece = std::pin::pin!(self.source.next());
            std::future::poll_fn(|cx| {
                if let Poll::Ready(a) = Pin::new(&mut task.0).poll(cx) {
                    return Poll::Ready(Raced::Answer(Box::new(a)));
                }
                piece.as_mut().poll(cx).map(Raced::Piece)
            })
            .await
        };
        match raced {
            Raced::Answer(a) => self.take_answer(*a),
            Raced::Piece(p) => {
                let (piece, last) = p?;
                self.feed(piece, last);
                Ok(())
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
                self.run_events();
                let can_parse = self.events.is_empty() && !self.source_done && !self.held();
                match self.queue.front() {
                    Some(Item::Text(_)) => {
                        if let Some(Item::Text(t)) = self.queue.pop_front() {
                            out.extend_from_slice(&t);
                        }
                        return Ok(true);
                    }
                    Some(Item::Include {
                        include: Include::Pending { .. },
                        ..
                    }) if can_parse => self.race().await?,
                    Some(Item::Include { .. }) => {
                        if self.read_front(out).await? {
                            return Ok(true);
                        }
                    }
                    None if self.source_done => return Ok(false),
                    None => {
                        let (piece, last) = self.source.next().await?;
                        self.feed(piece, last);
                    }
                }
            }
        })
    }
}
