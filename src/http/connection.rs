//! The HTTP/1.1 connection loop: owns the socket, reads and parses request
//! heads (pipelined requests stay in the buffer), lends the request body to
//! the handler ([`ClientBody`]) and discards what it left unread,
//! hands each request to the handlers, writes the response they describe,
//! logs it, and decides whether the connection lives on. A head or URI that
//! cannot be parsed is answered through the handlers too, at the server
//! level (its `error_page` and `add_header ... always` apply, as in NGINX),
//! and the connection closes.
//!
//! Timeouts follow NGINX: `client_header_timeout` while a head is being
//! read, `keepalive_timeout` while idle between requests, `send_timeout`
//! between two successive writes. Closing after an error (or with unread
//! input) is a lingering close, so the client sees the response rather than
//! a reset.

use std::io;
use std::net::Shutdown as SockShutdown;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, Interest};
use tokio::net::TcpStream;

use super::body::ClientBody;
use super::context::{ConnInfo, Method, RequestCtx};
use super::request::{self, parse_head, BadHead, HeadError, HeadLimits, RequestHead, Version};
use super::response::{self, write_head, Body, HeadOptions, Response};
use super::uri;
use crate::config::{Config, ListenGroup, ServerConf};
use crate::disk::{Disk, OpenFile};
use crate::handlers::{self, Env};
use crate::log::{ErrorLog, Level};
use crate::metrics::{self, Gauge};
use crate::util::shutdown::{Mode, ShutdownSignal};

/// Buffer for `sendfile off` copies.
const COPY_CHUNK: usize = 64 * 1024;
/// Lingering close: wait at most this long per read, and in total.
const LINGERING_TIMEOUT: Duration = Duration::from_secs(5);
const LINGERING_TIME: Duration = Duration::from_secs(30);

/// What a connection needs from its worker.
pub struct WorkerEnv {
    /// The configuration generation this worker serves.
    pub config: Arc<Config>,
    /// The error log of that generation.
    pub log: ErrorLog,
    /// The worker's disk layer.
    pub disk: Disk,
    /// Graceful / fast shutdown.
    pub shutdown: ShutdownSignal,
    /// This worker's figures (TTFB).
    pub figures: Arc<crate::metrics::WorkerMetrics>,
}

enum ReadHead {
    Head(RequestHead),
    Closed,
    Error(BadHead),
}

/// Serves one client connection until it closes.
pub async fn serve(mut stream: TcpStream, conn: ConnInfo, group: usize, w: Rc<WorkerEnv>) {
    let group: &ListenGroup = &w.config.listens[group];
    let default_server = Arc::clone(&group.servers[group.default]);
    let limits = HeadLimits {
        max_request_line: default_server.limits.max_line,
        max_header_line: default_server.limits.max_line,
        max_head: default_server.limits.max_head,
    };
    let header_timeout = default_server.limits.header_timeout;
    let mut keepalive_timeout = default_server.base.s.keepalive_timeout;
    let mut buf: Vec<u8> = take_buffer();
    let mut out: Vec<u8> = take_buffer();
    let mut requests: u64 = 0;
    let mut shutdown = w.shutdown.clone();

    loop {
        let head = match Box::pin(read_head(
            &mut stream,
            &mut buf,
            &mut out,
            &limits,
            requests,
            header_timeout,
            keepalive_timeout,
            &mut shutdown,
        ))
        .await
        {
            ReadHead::Head(h) => h,
            ReadHead::Closed => return,
            ReadHead::Error(bad) => {
                Box::pin(refuse(
                    stream,
                    &buf,
                    &mut out,
                    &conn,
                    requests + 1,
                    group,
                    &w,
                    bad,
                ))
                .await;
                return;
            }
        };
        requests += 1;
        // One exchange, boxed: its state (request context, response,
        // handler futures) exists only while a request is in flight, so an
        // idle keep-alive connection stays small.
        let next = Box::pin(exchange(
            &mut stream,
            &mut buf,
            &mut out,
            &conn,
            requests,
            group,
            &default_server,
            &w,
            &shutdown,
            head,
        ))
        .await;
        match next {
            Next::KeepAlive(t) => keepalive_timeout = t,
            Next::Close => return,
            Next::Linger => {
                Box::pin(lingering_close(stream)).await;
                return;
            }
        }
    }
}

/// Answers a request whose head could not be parsed, then closes.
#[allow(clippy::too_many_arguments)]
async fn refuse(
    stream: TcpStream,
    buf: &[u8],
    out: &mut Vec<u8>,
    conn: &ConnInfo,
    requests: u64,
    group: &ListenGroup,
    w: &WorkerEnv,
    bad: BadHead,
) {
    metrics::inc(&metrics::REQUESTS);
    let line = request::raw_request_line(buf);
    let server = group.find_server(bad.host.as_deref().map(super::context::strip_port));
    let mut ctx = Box::new(request_ctx(
        conn,
        requests,
        unparsed_head(line, bad.host),
        server,
    ));
    w.log.log_conn(
        Level::Info,
        Some(conn.id),
        format_args!("{} while reading client request", bad.error),
        &ctx.log_context(),
    );
    let code = if matches!(bad.error, HeadError::HeaderTooLarge) {
        494
    } else {
        bad.error.status()
    };
    let env = Env {
        disk: &w.disk,
        log: &w.log,
        body: None,
    };
    let Some(mut resp) = handlers::respond_status(&mut ctx, &env, code).await else {
        ctx.status = 444;
        access_log(&ctx);
        return;
    };
    resp.close = true;
    let head_only = ctx.method == Method::Head;
    let _ = write_response(&stream, w, &mut ctx, &resp, false, head_only, out).await;
    access_log(&ctx);
    lingering_close(stream).await;
}

/// Writes `resp` (head, then body) and records in `ctx` what was sent, for
/// the access log.
#[allow(clippy::too_many_arguments)]
async fn write_response(
    stream: &TcpStream,
    w: &WorkerEnv,
    ctx: &mut RequestCtx,
    resp: &Response,
    keep_alive: bool,
    head_only: bool,
    out: &mut Vec<u8>,
) -> io::Result<()> {
    let loc = Arc::clone(&ctx.loc);
    let s = &loc.s;
    let date = date_now();
    let opts = HeadOptions {
        keep_alive,
        keep_alive_header: s.keepalive_header.map(|d| d.as_secs()),
        server_tokens: s.server_tokens,
        date: &date,
    };
    if out.capacity() == 0 {
        *out = take_buffer();
    }
    out.clear();
    write_head(resp, &opts, out);
    if !s.access_log.is_empty() {
        // Only an access log reads `$sent_http_*`.
        ctx.sent_headers = sent_headers(resp);
    }
    let head_len = out.len() as u64;
    let sent = send(stream, &w.disk, resp, head_only, out, s).await;
    ctx.status = resp.status;
    match sent {
        Ok(body_bytes) => {
            ctx.body_bytes_sent = body_bytes;
            ctx.bytes_sent = head_len + body_bytes;
            Ok(())
        }
        Err(e) => {
            ctx.body_bytes_sent = 0;
            Err(e)
        }
    }
}

/// What the connection does after an exchange.
enum Next {
    /// Wait for the next request, this long.
    KeepAlive(Duration),
    /// Close now.
    Close,
    /// Close after draining what the client still sends.
    Linger,
}

/// Answers one request whose head has been read.
// The request body's RefCell is borrowed across awaits only by this task.
#[allow(clippy::too_many_arguments, clippy::await_holding_refcell_ref)]
async fn exchange(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    out: &mut Vec<u8>,
    conn: &ConnInfo,
    requests: u64,
    group: &ListenGroup,
    default_server: &Arc<ServerConf>,
    w: &WorkerEnv,
    shutdown: &ShutdownSignal,
    head: RequestHead,
) -> Next {
    metrics::inc(&metrics::REQUESTS);
    let _writing = Gauge::new(&metrics::WRITING);
    let start = Instant::now();
    let consumed = head.head_len;
    let (path, args) = uri::split_target(&head.target);
    let normalized = uri::normalize(path);
    let (path, args) = (path.to_string(), args.map(str::to_string));
    // A URI NGINX cannot normalise is refused while it parses the
    // request line, before Host picks a server: the default server
    // answers.
    let server = if normalized.is_ok() {
        group.find_server(head.host.as_deref().map(super::context::strip_port))
    } else {
        default_server
    };
    // Boxed, like the per-phase futures: an idle connection keeps none
    // of a request's state.
    let mut ctx = Box::new(request_ctx(conn, requests, head, server));
    ctx.start = start;
    ctx.uri = normalized.clone().unwrap_or(path);
    ctx.args = args;
    let body_kind = if ctx.head.chunked {
        Some(None)
    } else {
        ctx.head.content_length.filter(|&n| n > 0).map(Some)
    };
    buf.drain(..consumed);

    // The body stays unread unless a handler reads it (the proxy); what is
    // left is discarded after the response is decided.
    let body = std::cell::RefCell::new(ClientBody::new(&*stream, std::mem::take(buf), body_kind));
    let env = Env {
        disk: &w.disk,
        log: &w.log,
        body: Some(&body),
    };
    let resp = if normalized.is_err() {
        w.log.log_conn(
            Level::Info,
            Some(conn.id),
            format_args!("client sent invalid request"),
            &ctx.log_context(),
        );
        handlers::respond_status(&mut ctx, &env, 400)
            .await
            .map(|mut r| {
                r.close = true;
                r
            })
    } else {
        handlers::respond(&mut ctx, &env).await
    };
    // The handlers are done with the body; only this task uses it now.
    let mut body = body.borrow_mut();
    let Some(mut resp) = resp else {
        // `return 444`: close without a response.
        ctx.status = 444;
        access_log(&ctx);
        return Next::Close;
    };
    if ctx.send_continue {
        let t = ctx.loc.s.send_timeout;
        if write_all(stream, b"HTTP/1.1 100 Continue\r\n\r\n", false, t)
            .await
            .is_err()
        {
            return Next::Close;
        }
    }

    // Discard the request body so the next request parses; on a body we
    // refuse (413) or cannot read, close after the response.
    let mut body_ok = true;
    if !body.is_done() {
        if resp.status == 413 || resp.close {
            body_ok = false;
        } else {
            body_ok = body.discard().await.is_ok();
        }
    }
    *buf = std::mem::take(&mut body.buf);
    drop(body);

    let s = &ctx.loc.s;
    let keepalive_timeout = s.keepalive_timeout;
    let keep_alive = ctx.head.keep_alive
        && body_ok
        && !resp.close
        && requests < s.keepalive_requests
        && !keepalive_timeout.is_zero()
        && shutdown.mode() == Mode::Run;
    let head_only = ctx.method == Method::Head || ctx.head.method == "HEAD";
    if resp.status == 304 || resp.status == 204 {
        resp.body = Body::Empty;
    }
    w.figures.ttfb.observe(ctx.start.elapsed());
    if let Err(e) = write_response(stream, w, &mut ctx, &resp, keep_alive, head_only, out).await {
        let file = ctx.request_filename.as_deref().unwrap_or("");
        match crate::disk::disk_error(&e) {
            Some(crate::disk::DiskError::Io { op, text }) => w.log.log_conn(
                Level::Crit,
                Some(conn.id),
                format_args!("{op}() \"{file}\" failed {text}"),
                &ctx.log_context(),
            ),
            Some(pool) => w.log.log_conn(
                Level::Error,
                Some(conn.id),
                format_args!("{pool}"),
                &ctx.log_context(),
            ),
            // A proxied body the upstream cut short: already logged.
            None if response::is_logged(&e) => {}
            None if e.kind() == io::ErrorKind::UnexpectedEof => w.log.log_conn(
                Level::Crit,
                Some(conn.id),
                format_args!("file \"{file}\" was truncated while sending it"),
                &ctx.log_context(),
            ),
            None => w.log.log_conn(
                Level::Info,
                Some(conn.id),
                format_args!(
                    "writev() failed {} while sending response to client",
                    crate::util::errno_text(&e)
                ),
                &ctx.log_context(),
            ),
        }
        access_log(&ctx);
        return Next::Close;
    }
    access_log(&ctx);
    if !keep_alive {
        if buf.is_empty() && body_ok && resp.status < 400 {
            let _ = socket2::SockRef::from(&*stream).shutdown(SockShutdown::Write);
            return Next::Close;
        }
        return Next::Linger;
    }
    Next::KeepAlive(keepalive_timeout)
}

/// A request's state at the start of processing, at `server`'s level.
fn request_ctx(
    conn: &ConnInfo,
    requests: u64,
    head: RequestHead,
    server: &Arc<ServerConf>,
) -> RequestCtx {
    RequestCtx {
        conn: conn.clone(),
        conn_requests: requests,
        method: Method::from_token(&head.method),
        uri: String::new(),
        args: None,
        server: Arc::clone(server),
        loc: Arc::clone(&server.base),
        internal: false,
        error_page: false,
        expect_tested: false,
        send_continue: false,
        start: Instant::now(),
        status: 0,
        body_bytes_sent: 0,
        bytes_sent: 0,
        sent_headers: Vec::new(),
        document_root: None,
        request_filename: None,
        upstream: None,
        head,
    }
}

/// The head of a request refused before it was parsed: nothing known but
/// the request line as received, its method if that much is valid, and the
/// host, if one came before the fault.
fn unparsed_head(line: String, host: Option<String>) -> RequestHead {
    RequestHead {
        method: request::method_token(&line).unwrap_or_default().to_string(),
        line,
        target: String::new(),
        version: Version::Http11,
        headers: Vec::new(),
        host,
        content_length: None,
        chunked: false,
        keep_alive: false,
        head_len: 0,
    }
}

fn date_now() -> String {
    let mut d = String::with_capacity(29);
    crate::util::time::http_date_now(&mut d);
    d
}

fn access_log(ctx: &RequestCtx) {
    for l in ctx.loc.s.access_log.iter() {
        l.write(ctx);
    }
}

fn sent_headers(r: &Response) -> Vec<(String, String)> {
    let mut v = r.headers.clone();
    if let Some(ct) = &r.content_type {
        v.push(("Content-Type".into(), ct.clone()));
    }
    if let Some(l) = r.content_length {
        v.push(("Content-Length".into(), l.to_string()));
    }
    if let Some(l) = &r.location {
        v.push(("Location".into(), l.clone()));
    }
    if let Some(e) = &r.etag {
        v.push(("ETag".into(), e.clone()));
    }
    v
}

/// `try_read_buf`, and a read that did not fill the buffer also clears
/// the socket's read readiness, as NGINX's `ngx_unix_recv` does (`ready =
/// 0` after a short read): the socket is drained, so the next attempt
/// waits for epoll instead of paying a `recv` that says `EAGAIN`. Tokio's
/// `AsyncRead` does the same; its `try_read*` calls do not. Readiness that
/// arrived after the `recv` is kept (Tokio clears only the event it saw).
fn read_now(stream: &TcpStream, buf: &mut Vec<u8>) -> io::Result<usize> {
    let mut got = 0;
    let r = stream.try_io(Interest::READABLE, || {
        let space = buf.capacity() - buf.len();
        let n = rustix::io::read(stream, buf.spare_capacity_mut())
            .map(|(init, _)| init.len())
            .map_err(io::Error::from)?;
        // SAFETY: `read` initialised the first `n` bytes of the spare capacity.
        unsafe { buf.set_len(buf.len() + n) };
        got = n;
        if n > 0 && n < space {
            Err(io::ErrorKind::WouldBlock.into())
        } else {
            Ok(n)
        }
    });
    match r {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock && got > 0 => Ok(got),
        r => r,
    }
}

#[allow(clippy::too_many_arguments)]
async fn read_head(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    spare: &mut Vec<u8>,
    limits: &HeadLimits,
    requests: u64,
    header_timeout: Duration,
    keepalive_timeout: Duration,
    shutdown: &mut ShutdownSignal,
) -> ReadHead {
    let mut _reading: Option<Gauge> = None;
    loop {
        if !buf.is_empty() {
            if _reading.is_none() {
                _reading = Some(Gauge::new(&metrics::READING));
            }
            match parse_head(buf, limits) {
                Ok(Some(h)) => return ReadHead::Head(h),
                Ok(None) => {}
                Err(e) => return ReadHead::Error(e),
            }
        }
        // Between requests a connection is idle and a graceful shutdown
        // closes it; a new connection gets to send its first request (as
        // NGINX only closes keep-alive connections), bounded by
        // `client_header_timeout`.
        let idle = buf.is_empty() && requests > 0;
        if idle && shutdown.mode() != Mode::Run {
            return ReadHead::Closed;
        }
        let wait = if idle {
            keepalive_timeout
        } else {
            header_timeout
        };
        if buf.capacity() == 0 {
            *buf = take_buffer();
        }
        if buf.capacity() - buf.len() < 1024 {
            buf.reserve(4096);
        }
        let read = if idle {
            // A pipelined or quick next request is read at once.
            match read_now(stream, buf) {
                Ok(0) => return ReadHead::Closed,
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return ReadHead::Closed,
            }
            // Going idle: hand both buffers back while the connection
            // waits, so an idle keep-alive connection holds no buffers.
            give_buffer(std::mem::take(buf));
            give_buffer(std::mem::take(spare));
            tokio::select! {
                r = tokio::time::timeout(wait, stream.readable()) => match r {
                    Ok(Ok(())) => continue,
                    _ => return ReadHead::Closed,
                },
                _ = shutdown.wait_for(Mode::Graceful) => return ReadHead::Closed,
            }
        } else {
            tokio::time::timeout(wait, stream.read_buf(buf)).await
        };
        match read {
            Err(_) => return ReadHead::Closed,
            Ok(Ok(0)) => return ReadHead::Closed,
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return ReadHead::Closed,
        }
    }
}

/// Shuts the write side and drains input for a while, so a client still
/// sending (a pipelined request, a body) reads our response instead of a
/// reset.
async fn lingering_close(mut stream: TcpStream) {
    let _ = socket2::SockRef::from(&stream).shutdown(SockShutdown::Write);
    let deadline = Instant::now() + LINGERING_TIME;
    // On the heap: an array here would make every connection's future 4 KiB bigger.
    let mut junk = vec![0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        match tokio::time::timeout(left.min(LINGERING_TIMEOUT), stream.read(&mut junk)).await {
            Ok(Ok(n)) if n > 0 => continue,
            _ => return,
        }
    }
}

/// Writes `head` then `body` with vectored writes.
async fn write_two(
    stream: &TcpStream,
    head: &[u8],
    body: &[u8],
    send_timeout: Duration,
) -> io::Result<()> {
    let mut done = 0;
    let total = head.len() + body.len();
    while done < total {
        let bufs = if done < head.len() {
            [io::IoSlice::new(&head[done..]), io::IoSlice::new(body)]
        } else {
            [
                io::IoSlice::new(&body[done - head.len()..]),
                io::IoSlice::new(&[]),
            ]
        };
        match stream.try_write_vectored(&bufs) {
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                wait_writable(stream, send_timeout).await?
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Buffers of idle connections go back to a per-worker free list, so a
/// busy keep-alive connection reuses one instead of allocating and an idle
/// one holds none (NGINX frees its buffers on keep-alive the same way).
const SPARE_BUFFERS: usize = 256;
/// Larger buffers are freed rather than kept.
const SPARE_MAX_CAPACITY: usize = 16 * 1024;

thread_local! {
    static SPARE: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn take_buffer() -> Vec<u8> {
    SPARE
        .with(|s| s.borrow_mut().pop())
        .unwrap_or_else(|| Vec::with_capacity(1024))
}

fn give_buffer(mut v: Vec<u8>) {
    if v.capacity() == 0 || v.capacity() > SPARE_MAX_CAPACITY {
        return;
    }
    v.clear();
    SPARE.with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < SPARE_BUFFERS {
            s.push(v);
        }
    });
}

/// Writes all of `buf`; `more` sets `MSG_MORE` (a body follows). Each wait
/// for the socket to drain is bounded by `send_timeout`.
async fn write_all(
    stream: &TcpStream,
    mut buf: &[u8],
    more: bool,
    send_timeout: Duration,
) -> io::Result<()> {
    let flags = if more {
        rustix::net::SendFlags::MORE | rustix::net::SendFlags::NOSIGNAL
    } else {
        rustix::net::SendFlags::NOSIGNAL
    };
    while !buf.is_empty() {
        match stream.try_io(Interest::WRITABLE, || {
            rustix::net::send(stream, buf, flags).map_err(io::Error::from)
        }) {
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                wait_writable(stream, send_timeout).await?
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

async fn wait_writable(stream: &TcpStream, send_timeout: Duration) -> io::Result<()> {
    match tokio::time::timeout(send_timeout, stream.writable()).await {
        Ok(r) => r,
        Err(_) => Err(io::Error::from_raw_os_error(libc::ETIMEDOUT)),
    }
}

/// Writes the head in `out` and the body; returns body bytes sent.
async fn send(
    stream: &TcpStream,
    disk: &Disk,
    resp: &Response,
    head_only: bool,
    out: &[u8],
    s: &crate::config::LocSettings,
) -> io::Result<u64> {
    let t = s.send_timeout;
    if head_only {
        write_all(stream, out, false, t).await?;
        return Ok(0);
    }
    match &resp.body {
        Body::Empty => {
            write_all(stream, out, false, t).await?;
            Ok(0)
        }
        Body::Bytes(b) => {
            // Head and body in one `writev`, without copying the body.
            write_two(stream, out, b, t).await?;
            Ok(b.len() as u64)
        }
        Body::File { file, start, len } => {
            write_all(stream, out, true, t).await?;
            send_file_range(stream, disk, file, *start, *len, s).await?;
            Ok(*len)
        }
        Body::Multipart { file, parts } => {
            write_all(stream, out, true, t).await?;
            let mut total = 0;
            for (hdr, range) in &parts.parts {
                write_all(stream, hdr.as_bytes(), true, t).await?;
                send_file_range(stream, disk, file, range.start, range.end - range.start, s)
                    .await?;
                total += hdr.len() as u64 + (range.end - range.start);
            }
            write_all(stream, parts.trailer.as_bytes(), false, t).await?;
            Ok(total + parts.trailer.len() as u64)
        }
        Body::Stream(body) => send_stream(stream, out, body, resp.chunked, t).await,
    }
}

/// Sends `head` and a streamed body piece by piece, each written before
/// the next is asked for (so a slow client holds back the source), with
/// chunked framing when `chunked`. A first piece already at hand goes out
/// with the head in one write (a small proxied response is one packet);
/// otherwise the head goes at once, as the body may be a while coming.
/// Returns body bytes sent.
#[allow(clippy::await_holding_refcell_ref)]
async fn send_stream(
    stream: &TcpStream,
    head: &[u8],
    body: &response::StreamBody,
    chunked: bool,
    t: Duration,
) -> io::Result<u64> {
    // One writer per response: the borrow lasts the send and nothing else
    // touches the stream.
    let mut source = body.0.borrow_mut();
    let mut piece = Vec::with_capacity(COPY_CHUNK);
    let mut total = 0u64;
    // One poll without a waker: ready only if the piece needs no waiting
    // (body streams are cancel-safe, so a pending poll is simply dropped).
    let first = source
        .read_chunk(&mut piece)
        .as_mut()
        .poll(&mut std::task::Context::from_waker(std::task::Waker::noop()));
    let mut at_hand = match first {
        std::task::Poll::Ready(r) => Some(r?),
        std::task::Poll::Pending => None,
    };
    let mut head = head;
    if at_hand.is_none() {
        write_all(stream, head, false, t).await?;
        head = &[];
    }
    loop {
        let more = match at_hand.take() {
            Some(m) => m,
            None => {
                piece.clear();
                source.read_chunk(&mut piece).await?
            }
        };
        if !more {
            break;
        }
        if piece.is_empty() {
            continue;
        }
        total += piece.len() as u64;
        let mut lead = head.to_vec();
        head = &[];
        if chunked {
            lead.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
            piece.extend_from_slice(b"\r\n");
        }
        write_two(stream, &lead, &piece, t).await?;
    }
    let mut tail = head.to_vec();
    if chunked {
        tail.extend_from_slice(b"0\r\n\r\n");
    }
    write_all(stream, &tail, false, t).await?;
    Ok(total)
}

fn truncated() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "file was truncated")
}

/// Sends `len` bytes of `file` from `start`: `sendfile` when enabled, else
/// read-and-write copies. After each `sendfile_max_chunk` bytes the task
/// yields, so one large response cannot monopolise the worker.
async fn send_file_range(
    stream: &TcpStream,
    disk: &Disk,
    file: &OpenFile,
    start: u64,
    len: u64,
    s: &crate::config::LocSettings,
) -> io::Result<()> {
    let max_chunk = if s.sendfile_max_chunk == 0 {
        u64::MAX
    } else {
        s.sendfile_max_chunk
    };
    let mut offset = start;
    let end = start + len;
    let mut since_yield: u64 = 0;
    if s.sendfile {
        while offset < end {
            let want = (end - offset).min(max_chunk - since_yield) as usize;
            match disk.sendfile(stream, file, &mut offset, want).await {
                Ok(0) => return Err(truncated()),
                Ok(n) => {
                    since_yield += n as u64;
                    if since_yield >= max_chunk {
                        since_yield = 0;
                        tokio::task::yield_now().await;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    since_yield = 0;
                    wait_writable(stream, s.send_timeout).await?
                }
                Err(e) => return Err(e),
            }
        }
    } else {
        let mut chunk = vec![0u8; COPY_CHUNK.min(len as usize)];
        while offset < end {
            let want = ((end - offset) as usize).min(chunk.len());
            let n = disk.read_at(file, &mut chunk[..want], offset).await?;
            if n == 0 {
                return Err(truncated());
            }
            write_all(
                stream,
                &chunk[..n],
                offset + (n as u64) < end,
                s.send_timeout,
            )
            .await?;
            offset += n as u64;
            since_yield += n as u64;
            if since_yield >= max_chunk {
                since_yield = 0;
                tokio::task::yield_now().await;
            }
        }
    }
    Ok(())
}
