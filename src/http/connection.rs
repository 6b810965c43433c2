//! The HTTP/1.1 connection loop. A `Connection` owns the socket and its
//! two buffers (bytes read and not yet parsed, so pipelined requests stay
//! there; the head of the response being written). It reads and parses
//! request heads, lends the request body to the handlers ([`ClientBody`])
//! and discards what they left unread, asks the handlers for the response
//! (through [`Respond`], which the worker wires to the handlers),
//! writes the response they describe (`writer`), logs it, and decides
//! whether the connection lives on. A head or URI that cannot be parsed is
//! answered through the handlers too, at the server level (its
//! `error_page` and `add_header ... always` apply, as in NGINX), and the
//! connection closes.
//!
//! Timeouts follow NGINX: `client_header_timeout` bounds the whole head
//! (one deadline, not a wait per read, so a client trickling a byte at a
//! time is closed on time), `keepalive_timeout` while idle between
//! requests, `send_timeout` between two successive writes. A request body
//! no handler read is discarded after the response went out, each wait at
//! most `lingering_timeout` and all of it within `lingering_time`. Closing
//! after an error (or with unread input) is a lingering close
//! (`lingering_close`), so the client sees the response rather than a
//! reset; a connection closed on a timeout is reset instead when
//! `reset_timedout_connection` is on. An idle connection holds no buffers
//! (`buffers`). While it waits for a first byte or for the next
//! keep-alive request, a connection is reusable (`reuse`): the worker may
//! close it to admit a new one when `worker_connections` is reached.
//!
//! The stream is plain TCP or TLS (`listen ... ssl`, [`ClientStream`]);
//! a TLS address starts with the handshake (`tls_accept`), and plain HTTP
//! sent to it is answered with NGINX's 497 page after its head is read.
//! A connection that turns out to speak HTTP/2 (ALPN `h2`, the h2c
//! preface) goes to `http2::serve` instead.

use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

use super::body::{BodyKind, ClientBody, DiscardError, Leftover};
use super::buffers;
use super::closing::{self, Linger, TimedOutClose};
use super::context::{strip_port, ConnInfo, RequestCtx, RequestUri};
use super::http2;
use super::request::{self, parse_head, BadHead, HeadError, HeadLimits, RequestHead};
use super::response::{write_head, Body, HeadOptions, Persistence, Response};
use super::reuse::Reusable;
use super::stream::ClientStream;
use super::tls_accept::{self, Accepted};
use super::writer::{log_send_error, Follows, Sending, Writer};
use crate::config::{Config, LingeringClose, ListenGroup, ServerConf};
use crate::disk::Disk;
use crate::log::{ErrorLog, Level};
use crate::metrics::{self, Gauge, WorkerMetrics};
use crate::util::shutdown::{Mode, ShutdownSignal};

mod idle;
mod life;
mod refuse;

/// What the connection asks of the layer above it: the response to a
/// request. The handlers implement it (`handlers::Handlers`) and the
/// worker hands it in ([`WorkerEnv::handlers`]), so `http` imports nothing
/// from the handlers. A response of `None` closes the connection without
/// one (`return 444`).
pub trait Respond {
    /// The response to `ctx`, whose head was read; its body is lent in
    /// `body`, and what the handlers leave unread the connection discards.
    fn respond<'a>(
        &'a self,
        ctx: &mut RequestCtx,
        body: &'a RefCell<ClientBody<'a>>,
    ) -> impl Future<Output = Option<Response>>;

    /// The response with status `code` to a request refused before
    /// location selection (a malformed head or URI): the status's page,
    /// after `error_page` and the header filters of the level `ctx.loc`
    /// names (the server level). `body` is the request body, if the head
    /// was read.
    fn respond_status<'a>(
        &'a self,
        ctx: &mut RequestCtx,
        body: Option<&'a RefCell<ClientBody<'a>>>,
        code: u16,
    ) -> impl Future<Output = Option<Response>>;
}

/// What a connection needs from its worker.
pub struct WorkerEnv<H> {
    /// The configuration generation this worker serves.
    pub config: Arc<Config>,
    /// The error log of that generation.
    pub log: ErrorLog,
    /// The worker's disk layer (file bodies are sent through it; the
    /// handlers share it).
    pub disk: Rc<Disk>,
    /// Graceful / fast shutdown.
    pub shutdown: ShutdownSignal,
    /// This worker's figures (TTFB).
    pub figures: Arc<WorkerMetrics>,
    /// What turns a request into a response.
    pub handlers: H,
}

/// Serves one client connection until it closes.
pub fn serve<H: Respond + 'static>(
    stream: TcpStream,
    conn: ConnInfo,
    group: usize,
    w: Rc<WorkerEnv<H>>,
) -> impl Future<Output = ()> {
    life::Life::new(accept(stream, conn, group, w), Connection::run) // see `life`
}

/// Before the first request: the PROXY header, the TLS handshake (HTTP/2
/// is served here whole); the connection to run, unless it ended.
async fn accept<H: Respond + 'static>(
    mut stream: TcpStream,
    mut conn: ConnInfo,
    group: usize,
    w: Rc<WorkerEnv<H>>,
) -> Option<Connection<H>> {
    let listen = &w.config.listens[group];
    let mut plain_on_tls = false;
    if listen.proxy_protocol {
        // Before anything else, TLS included; boxed, as it is over soon.
        let timeout = listen.servers[listen.default].limits.header_timeout;
        let pp = super::proxy_protocol::accept(&mut stream, timeout, &w.log, &mut conn);
        if !Box::pin(pp).await {
            return None;
        }
    }
    let stream = if listen.ssl {
        // Boxed: the handshake's state (rustls's acceptor and connection
        // being built) is large and lives only until the handshake ends;
        // inline, it would size the connection's task for its whole life,
        // plain HTTP included (bench/RESULTS.md, S5 over TLS).
        match Box::pin(tls_accept::accept(stream, listen, &w.log, &conn)).await {
            Accepted::Tls(s, facts) => {
                conn.tls = Some(facts);
                if s.tls_conn().is_some_and(|t| t.alpn_h2()) {
                    Box::pin(http2::serve(s, Vec::new(), conn, group, w)).await;
                    return None;
                }
                s
            }
            Accepted::PlainHttp(s) => {
                plain_on_tls = true;
                s
            }
            Accepted::Closed => return None,
        }
    } else {
        ClientStream::plain(stream)
    };
    let mut c = Connection::new(stream, conn, group, w);
    c.plain_on_tls = plain_on_tls;
    Some(c)
}

/// What `read_head` found. The head is large (its header spans inline)
/// and the other answers small, but one of these exists per request and
/// only until `run` looks at it: boxing the head would cost the malloc its
/// inline spans save.
#[allow(clippy::large_enum_variant)]
enum ReadHead {
    Head(RequestHead),
    /// The h2c preface: the connection speaks HTTP/2.
    H2c,
    Closed,
    /// `client_header_timeout` ran out.
    TimedOut,
    Error(BadHead),
}

/// What the connection does after a request.
enum Next {
    /// Wait for the next request, this long.
    KeepAlive(Duration),
    /// Close now.
    Close,
    /// Close after draining what the client still sends.
    Linger(Linger),
    /// Close at once, after a timeout fired (with a reset when
    /// `reset_timedout_connection` is on).
    TimedOut(TimedOutClose),
    /// Run the tunnel of an upgraded response whose head is out, then
    /// close: run after the request's future is dropped, so an open
    /// WebSocket does not keep the handlers' finished state.
    Tunnel(Box<(super::tunnel::Upgrade, RequestCtx)>),
}

/// What is left of a request body once the handlers answered.
enum BodyLeft {
    /// Nothing: it was read whole (or there was none).
    Done,
    /// Unread: discarded after the response.
    Unread(Leftover),
    /// Unread and not to be read (a 413, or a response that closes).
    Abandon,
}

/// One client connection: the socket, its buffers, and what carries over
/// from one request to the next.
struct Connection<H> {
    stream: ClientStream,
    info: ConnInfo,
    worker: Rc<WorkerEnv<H>>,
    /// Its listen group, an index into `config.listens`.
    group: usize,
    /// The group's default server: its limits bound every head, and it
    /// answers a request whose URI cannot be normalised.
    default_server: Arc<ServerConf>,
    limits: HeadLimits,
    header_timeout: Duration,
    /// The wait for the next request (the last location's setting).
    keepalive_timeout: Duration,
    /// Bytes read and not yet consumed (a pipelined request stays here).
    buf: Vec<u8>,
    /// The response head being written; a spare while reading.
    out: Vec<u8>,
    /// Requests read on this connection.
    requests: u64,
    /// The next head was already in `buf` when the last request ended
    /// (`$pipe`).
    pipelined: bool,
    /// When it was accepted (`keepalive_time`).
    opened: Instant,
    shutdown: ShutdownSignal,
    /// Plain HTTP arrived on a TLS address: the first request is answered
    /// with 497 (NGINX's 400 "The plain HTTP request was sent to HTTPS
    /// port") and the connection closes.
    plain_on_tls: bool,
}

impl<H: Respond + 'static> Connection<H> {
    fn new(
        stream: ClientStream,
        info: ConnInfo,
        group: usize,
        w: Rc<WorkerEnv<H>>,
    ) -> Connection<H> {
        let listen: &ListenGroup = &w.config.listens[group];
        let default_server = Arc::clone(&listen.servers[listen.default]);
        let limits = HeadLimits {
            max_request_line: default_server.limits.max_line,
            max_header_line: default_server.limits.max_line,
            max_head: default_server.limits.max_head,
            max_headers: default_server.limits.max_headers,
            ignore_invalid_headers: default_server.limits.ignore_invalid_headers,
            underscores_in_headers: default_server.limits.underscores_in_headers,
        };
        Connection {
            stream,
            info,
            group,
            limits,
            header_timeout: default_server.limits.header_timeout,
            keepalive_timeout: default_server.base.s.keepalive_timeout,
            default_server,
            buf: buffers::take(),
            out: buffers::take(),
            requests: 0,
            pipelined: false,
            opened: Instant::now(),
            shutdown: w.shutdown.clone(),
            plain_on_tls: false,
            worker: w,
        }
    }

    fn group(&self) -> &ListenGroup {
        &self.worker.config.listens[self.group]
    }

    /// Serves requests until the connection closes.
    async fn run(mut self) {
        loop {
            // Not boxed: a connection waits in `read_head` whenever it is
            // idle, so its state is part of every connection anyway, and
            // a box of its own cost a malloc and a free per request.
            self.pipelined = self.requests > 0 && !self.buf.is_empty();
            let head = match self.read_head().await {
                ReadHead::Head(h) => h,
                ReadHead::H2c => {
                    let early = std::mem::take(&mut self.buf);
                    let c = http2::serve(self.stream, early, self.info, self.group, self.worker);
                    return Box::pin(c).await;
                }
                ReadHead::Closed => return,
                ReadHead::TimedOut => {
                    // No byte, no request: NGINX resets only a timed-out
                    // request, and closes a silent connection with a FIN.
                    let reset = self.default_server.base.s.reset_timedout_connection
                        && !self.buf.is_empty();
                    closing::close_timed_out(self.stream, TimedOutClose::reset_if(reset));
                    return;
                }
                ReadHead::Error(bad) => {
                    Box::pin(self.refuse(bad)).await;
                    return;
                }
            };
            self.requests += 1;
            if self.plain_on_tls {
                Box::pin(self.refuse_plain_http(head)).await;
                return;
            }
            // One request, boxed: its state (request context, response,
            // handler futures) exists only while a request is in flight, so
            // an idle keep-alive connection stays small.
            match Box::pin(self.serve_request(head)).await {
                Next::KeepAlive(t) => self.keepalive_timeout = t,
                Next::Close => return,
                Next::Tunnel(t) => {
                    let pending = std::mem::take(&mut self.buf);
                    // The head is out: its buffer goes back for the
                    // tunnel's life.
                    buffers::give(std::mem::take(&mut self.out));
                    // The upgrade and the request stay in the tunnel's
                    // boxed future: taken out of their box here, they
                    // would size every connection's task (by 1.1 KiB).
                    let log = &self.worker.log;
                    Box::pin(super::tunnel::serve(&self.stream, pending, t, log)).await;
                    return;
                }
                Next::Linger(l) => {
                    Box::pin(closing::lingering_close(self.stream, l)).await;
                    return;
                }
                Next::TimedOut(how) => {
                    closing::close_timed_out(self.stream, how);
                    return;
                }
            }
        }
    }

    /// Reads until a whole head is in the buffer (or the connection ends),
    /// all of it within `client_header_timeout` from the first wait for
    /// it (NGINX arms the timer once per head, not per read).
    async fn read_head(&mut self) -> ReadHead {
        let mut _reading: Option<Gauge> = None;
        let mut deadline: Option<tokio::time::Instant> = None;
        loop {
            if !self.buf.is_empty() {
                if _reading.is_none() {
                    _reading = Some(Gauge::new(&metrics::READING));
                }
                let h2c = self.requests == 0 && http2::h2c_enabled(self.group());
                match http2::preface(h2c, &self.buf) {
                    Some(true) => return ReadHead::H2c,
                    Some(false) => {} // Perhaps the preface: read on.
                    None => match parse_head(&self.buf, &self.limits) {
                        Ok(Some(h)) => return ReadHead::Head(h),
                        Ok(None) => {}
                        Err(e) => return ReadHead::Error(e),
                    },
                }
            }
            // Between requests a connection is idle and a graceful shutdown
            // closes it; a new connection gets to send its first request (as
            // NGINX only closes keep-alive connections), bounded by
            // `client_header_timeout`.
            let idle = self.buf.is_empty() && self.requests > 0;
            if idle && self.shutdown.mode() != Mode::Run {
                return ReadHead::Closed;
            }
            if self.buf.capacity() == 0 {
                self.buf = buffers::take();
            }
            if self.buf.capacity() - self.buf.len() < 1024 {
                self.buf.reserve(4096);
            }
            if idle {
                if self.wait_idle().await {
                    continue;
                }
                return ReadHead::Closed;
            }
            let deadline =
                *deadline.get_or_insert_with(|| tokio::time::Instant::now() + self.header_timeout);
            // Until its first read a new connection holds nothing: the
            // worker may reclaim it when `worker_connections` is reached,
            // and then it closes even with bytes waiting (as NGINX).
            let fresh = (self.requests == 0 && self.buf.is_empty()).then(Reusable::enter);
            let read = tokio::time::timeout_at(deadline, async {
                if let Some(r) = &fresh {
                    r.first_read_turn().await;
                }
                self.stream.read_buf(&mut self.buf).await
            });
            let reclaimed = async {
                match &fresh {
                    Some(r) => r.reclaimed().await,
                    None => std::future::pending().await,
                }
            };
            let read = tokio::select! {
                biased;
                _ = reclaimed => return ReadHead::Closed,
                r = read => r,
            };
            match read {
                Err(_) => {
                    self.log_header_timeout();
                    return ReadHead::TimedOut;
                }
                Ok(Ok(0)) => return ReadHead::Closed,
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    self.tls_failed(&e, "while reading client request headers");
                    return ReadHead::Closed;
                }
            }
        }
    }

    /// Answers one request whose head has been read: what the connection
    /// does next.
    async fn serve_request(&mut self, head: RequestHead) -> Next {
        metrics::inc(&metrics::REQUESTS);
        let _writing = Gauge::new(&metrics::WRITING);
        let consumed = head.head_len;
        let (mut ctx, uri) = self.start_request(head);
        ctx.pipelined = self.pipelined;
        let body_kind = BodyKind::of(ctx.head.chunked, ctx.head.content_length);
        self.buf.drain(..consumed);
        let (mut resp, left) = match self.call_handlers(&mut ctx, uri, body_kind).await {
            Ok(answer) => answer,
            Err(next) => return next,
        };
        resp.unchunk_unless(ctx.loc.s.chunked_transfer_encoding);

        let s = &ctx.loc.s;
        let keepalive_timeout = s.keepalive_timeout;
        let linger = Linger::of(s);
        let reset = s.reset_timedout_connection;
        let body_ok = matches!(left, BodyLeft::Done);
        let keep_alive = ctx.head.keep_alive
            && !matches!(left, BodyLeft::Abandon)
            && !resp.close
            && self.requests < s.keepalive_requests
            && self.opened.elapsed() < s.keepalive_time
            && !keepalive_timeout.is_zero()
            && !super::user_agent::closes_after(s.keepalive_disable, &ctx.head)
            && self.shutdown.mode() == Mode::Run;
        let persistence = Persistence::keep_alive_if(keep_alive);
        if resp.status == 304 || resp.status == 204 {
            resp.body = Body::Empty;
        }
        self.worker.figures.ttfb.observe(ctx.start.elapsed());
        if let Err(e) = self.write_response(&mut ctx, &resp, persistence).await {
            log_send_error(&self.worker.log, &ctx, &e);
            ctx.write_access_log();
            let timed_out = e.kind() == io::ErrorKind::TimedOut;
            return Next::TimedOut(TimedOutClose::reset_if(reset && timed_out));
        }
        ctx.completed = true;
        if let Some(up) = resp.upgrade.take() {
            return Next::Tunnel(Box::new((*up, ctx)));
        }
        // The request is over once its mirrors are: its `limit_conn`
        // slots go back at once.
        ctx.wait_background().await;
        ctx.limits.held.clear();
        ctx.write_access_log();
        if let (BodyLeft::Unread(rest), true) = (left, keep_alive) {
            // NGINX discards a body it did not read after the response,
            // within the lingering limits, and then keeps the connection.
            let mut body = ClientBody::attach(&self.stream, rest);
            let drained = body.discard_within(linger.timeout, linger.time).await;
            self.buf = std::mem::take(&mut body.buf);
            match drained {
                Ok(()) => {}
                Err(DiscardError::TimedOut) => {
                    return Next::TimedOut(TimedOutClose::reset_if(reset))
                }
                Err(DiscardError::Failed) => return Next::Close,
            }
        } else if !keep_alive {
            let clean = self.buf.is_empty() && body_ok && resp.status < 400;
            return match linger.mode {
                LingeringClose::Off => Next::Close,
                LingeringClose::On if clean => {
                    self.stream.shutdown_write();
                    Next::Close
                }
                _ => Next::Linger(linger),
            };
        }
        Next::KeepAlive(keepalive_timeout)
    }

    /// The context of a request whose head was read, and whether its URI
    /// could be normalised ([`RequestCtx::start`]). Not boxed: it lives in
    /// `serve_request`'s future, itself boxed, so an idle connection keeps
    /// none of a request's state.
    fn start_request(&self, head: RequestHead) -> (RequestCtx, RequestUri) {
        RequestCtx::start(&self.info, self.group(), self.requests, head)
    }

    /// Lends the request body to the handlers and gets their response,
    /// then sends `100 Continue` if a handler asked for it. Returns the
    /// response and what is left of the body; `Err` when the connection
    /// closes now.
    // The request body's RefCell is borrowed across awaits only by this task.
    #[allow(clippy::await_holding_refcell_ref)]
    async fn call_handlers(
        &mut self,
        ctx: &mut RequestCtx,
        uri: RequestUri,
        body_kind: BodyKind,
    ) -> Result<(Response, BodyLeft), Next> {
        // The body stays unread unless a handler reads it (the proxy); what
        // is left is discarded after the response is sent.
        let buf = std::mem::take(&mut self.buf);
        let body = RefCell::new(ClientBody::new(&self.stream, buf, body_kind));
        let handlers = &self.worker.handlers;
        // A request refused before its location: the status, the log line
        // and a close after the answer.
        let refused = if uri == RequestUri::Invalid {
            Some((400, "client sent invalid request".to_string()))
        } else {
            // `ssl_verify_client` of the server `Host` chose, as NGINX.
            tls_accept::client_cert_refusal(ctx)
                .or_else(|| ctx.early_data.then(|| tls_accept::too_early(ctx)).flatten())
                .map(|(code, why)| (code, format!("{why} while reading client request headers")))
        };
        let resp = match refused {
            Some((code, why)) => {
                ctx.log_in(&self.worker.log)
                    .line(Level::Info, format_args!("{why}"));
                handlers
                    .respond_status(ctx, Some(&body), code)
                    .await
                    .map(|mut r| {
                        r.close = true;
                        r
                    })
            }
            None => handlers.respond(ctx, &body).await,
        };
        // The handlers are done with the body (the borrow they were lent
        // lives as long as the body's own lifetime): take it out.
        let body = std::mem::replace(
            &mut *body.borrow_mut(),
            ClientBody::new(&self.stream, Vec::new(), BodyKind::None),
        );
        let Some(resp) = resp else {
            // `return 444`, or a client gone while it waited (499 kept).
            ctx.status = if ctx.status == 499 { 499 } else { 444 };
            ctx.write_access_log();
            return Err(Next::Close);
        };
        if ctx.send_continue {
            let w = Writer::new(&self.stream, &self.worker.disk, &ctx.loc.s);
            if w.write_all(b"HTTP/1.1 100 Continue\r\n\r\n", Follows::Nothing)
                .await
                .is_err()
            {
                return Err(Next::Close);
            }
        }
        let left = match body.detach() {
            Err(buf) => {
                self.buf = buf;
                BodyLeft::Done
            }
            // A body we refuse (413) or cannot read: close after the
            // response.
            Ok(_) if resp.status == 413 || resp.close => BodyLeft::Abandon,
            Ok(rest) => BodyLeft::Unread(rest),
        };
        Ok((resp, left))
    }

    /// Writes `resp` (head, then body; the head alone for a HEAD), its head
    /// saying `persistence`, and records in `ctx` what was sent, for the
    /// access log.
    async fn write_response(
        &mut self,
        ctx: &mut RequestCtx,
        resp: &Response,
        persistence: Persistence,
    ) -> io::Result<()> {
        let sending = Sending::head_only_if(ctx.is_head());
        let loc = Arc::clone(&ctx.loc);
        let s = &loc.s;
        if self.out.capacity() == 0 {
            self.out = buffers::take();
        }
        self.out.clear();
        // The head goes straight into the connection's reused buffer, the
        // `Date` value borrowed from the worker's per-second cache.
        crate::util::time::with_http_date(|date| {
            let opts = HeadOptions {
                keep_alive: persistence == Persistence::KeepAlive,
                keep_alive_header: s.keepalive_header.map(|d| d.as_secs()),
                server_tokens: s.server_tokens,
                date,
            };
            write_head(resp, &opts, &mut self.out);
        });
        if !s.access_log.is_empty() {
            // Only an access log reads `$sent_http_*`.
            ctx.sent_headers = resp.sent_headers_h1(persistence == Persistence::KeepAlive);
        }
        let head_len = self.out.len() as u64;
        let writer =
            Writer::new(&self.stream, &self.worker.disk, s).with_request_pace(ctx, resp.limit_rate);
        let sent = writer.send(resp, sending, &self.out).await;
        ctx.status = resp.status;
        match sent {
            Ok(body_bytes) => {
                ctx.body_bytes_sent = body_bytes;
                ctx.bytes_sent = head_len + body_bytes;
                // `add_trailer` values are rendered after the body.
                super::trailers::send(ctx, &writer, resp, sending).await
            }
            Err(e) => {
                ctx.body_bytes_sent = 0;
                Err(e)
            }
        }
    }
}

/// Sizes of what an idle connection keeps, for the guard in
/// `runtime::worker`'s tests (which knows the handlers' type).
#[cfg(test)]
pub(crate) mod size_probe {
    use super::*;

    fn ret<A, F>(_: fn(A) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// (what, bytes) of the connection's parts and futures.
    pub(crate) fn sizes<H: Respond + 'static>() -> Vec<(&'static str, usize)> {
        use std::mem::size_of;
        vec![
            ("serve future", {
                fn f<H: Respond + 'static>(
                    a: (TcpStream, ConnInfo, usize, Rc<WorkerEnv<H>>),
                ) -> impl Future<Output = ()> {
                    serve(a.0, a.1, a.2, a.3)
                }
                ret(f::<H>)
            }),
            ("Connection::run future", ret(Connection::<H>::run)),
            (
                "read_head future",
                ret::<&'static mut Connection<H>, _>(Connection::<H>::read_head),
            ),
            ("Connection", size_of::<Connection<H>>()),
            ("ClientStream", size_of::<ClientStream>()),
            ("ConnInfo", size_of::<ConnInfo>()),
            ("RequestCtx", size_of::<RequestCtx>()),
            ("RequestHead", size_of::<RequestHead>()),
            ("Upgrade", size_of::<super::super::tunnel::Upgrade>()),
            ("TlsInfo", size_of::<super::super::context::TlsInfo>()),
        ]
    }
}
