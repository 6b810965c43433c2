//! One exchange on an upstream connection, the part of a try that
//! depends on the protocol: the request's head and body out (the body
//! from its temp file, or streamed as it arrives: as is, re-framed as
//! chunks, or as FastCGI `STDIN` records) and the response head in (an HTTP/1 status line and
//! headers, 1xx skipped; a uwsgi or SCGI application's status line or
//! CGI header; or FastCGI records up to the end of the CGI
//! header, the application's stderr logged on the way). Everything around
//! it — peers, tries, logs, variables — is `fetch`'s, the same for every
//! protocol.

use std::sync::Arc;

use super::knobs::Knobs;
use super::request::{client_body_error, spool_failed, too_large, ReqBody, UpstreamError};
use super::tls::TlsTarget;
use crate::disk::Spool;
use crate::h1::chunked;
use crate::handlers::outcome::Env;
use crate::http::context::RequestCtx;
use crate::log::RequestLog;
use crate::upstream::fastcgi::{self, BodyDecoder, HeadReader};
use crate::upstream::wire::{self, HeadError, ResponseHead};
use crate::upstream::{self, app_head, Protocol, UpstreamConn};

/// The request as it goes to every peer tried.
pub(super) struct Outgoing {
    /// The protocol spoken.
    pub proto: Protocol,
    /// The head (with a body read whole appended).
    pub head: Vec<u8>,
    pub body: ReqBody,
    /// The URI sent (empty for FastCGI), for the log's `upstream:`.
    pub uri: String,
    /// A HEAD: the response has no body whatever its framing says.
    pub head_req: bool,
    /// May be sent again after it reached a peer.
    pub idempotent: bool,
    /// `proxy_pass https://`: how to speak TLS to the peer.
    pub tls: Option<TlsTarget>,
    /// The client asked for an upgrade: a `101` becomes a tunnel.
    pub upgrade: bool,
    /// A `101` the client did not ask for is relayed as a head without a
    /// body (an HTTP/1.x client, as NGINX), not refused with a 502.
    pub relay_101: bool,
    /// `proxy_protocol on`: the PROXY header a new connection starts with.
    pub proxy_header: Option<String>,
}

impl Outgoing {
    /// The scheme of the log's `upstream: "…"`, as NGINX prints it.
    pub fn scheme(&self) -> &'static str {
        match (self.proto, self.tls.is_some()) {
            (Protocol::FastCgi, _) => "fastcgi",
            (Protocol::Uwsgi, true) => "suwsgi",
            (Protocol::Uwsgi, false) => "uwsgi",
            (Protocol::Scgi, _) => "scgi",
            (Protocol::Grpc, _) => "grpc",
            (Protocol::Http, true) => "https",
            (Protocol::Http, false) => "http",
        }
    }
}

/// A response head read, with what came after it.
pub(super) struct Got {
    pub conn: UpstreamConn,
    /// Raw bytes read past the head.
    pub buf: Vec<u8>,
    pub head: ResponseHead,
    /// FastCGI: the body's decoder (holding `STDOUT` read with the head).
    pub fcgi: Option<Box<BodyDecoder>>,
}

pub(super) enum HeadFail {
    Closed,
    Io(std::io::Error, &'static str),
    Invalid(HeadError),
}

pub(super) enum Step {
    /// Failed before any response byte arrived.
    Early(HeadFail),
    /// Failed after part of the head arrived.
    Head(HeadFail),
    /// The client's side failed.
    Client(UpstreamError),
}

/// gRPC's exchange is `handlers::grpc`'s (HTTP/2); only its tries are the
/// proxy's.
pub(super) const GRPC: &str = "grpc_pass exchanges over HTTP/2 in handlers::grpc";

const SENDING: &str = "sending request to upstream";
const READING: &str = "reading response header from upstream";

/// Sends the request (head, body) on `conn` and reads the response head.
pub(super) async fn send_request_read_head(
    ctx: &RequestCtx,
    env: &Env<'_>,
    k: &Knobs<'_>,
    conn: UpstreamConn,
    (out, log): (&Outgoing, &RequestLog),
) -> Result<Got, Step> {
    // A streamed body's head goes with the body's preread part.
    let stream = matches!(out.body, ReqBody::Stream { .. });
    if !stream {
        if let Err(e) = upstream::write_all(&conn.stream, &out.head, k.send_timeout).await {
            return Err(Step::Early(HeadFail::Io(e, SENDING)));
        }
    }
    match &out.body {
        ReqBody::Stream { chunked } => {
            let framing = match out.proto {
                Protocol::FastCgi => BodyFraming::FastCgi,
                Protocol::Http if *chunked => BodyFraming::Chunked,
                // uwsgi and SCGI bodies follow their head as is (a chunked
                // one was read whole: they need its length first).
                Protocol::Http | Protocol::Uwsgi | Protocol::Scgi => BodyFraming::AsIs,
                Protocol::Grpc => unreachable!("{GRPC}"),
            };
            send_body(ctx, env, k, &conn, out, framing).await?;
        }
        ReqBody::Spooled(f) => {
            let fastcgi = out.proto == Protocol::FastCgi;
            send_spooled(ctx, env, k, &conn, f, fastcgi).await?;
        }
        ReqBody::None | ReqBody::Buffered(_) => {}
    }
    match out.proto {
        Protocol::Http => read_response_head(k, conn, wire::parse_response_head).await,
        Protocol::FastCgi => read_fastcgi_head(ctx, k, conn, log).await,
        Protocol::Uwsgi | Protocol::Scgi => {
            read_response_head(k, conn, app_head::parse_app_head).await
        }
        Protocol::Grpc => unreachable!("{GRPC}"),
    }
}

/// How a streamed body is framed on the wire.
#[derive(Clone, Copy, PartialEq, Eq)]
enum BodyFraming {
    AsIs,
    Chunked,
    FastCgi,
}

/// Streams the client's body to the upstream after `out.head`,
/// re-framed as chunks or `STDIN` records (bounded by
/// `client_max_body_size`), as NGINX's unbuffered body: the head goes
/// with what of the body is buffered already (the preread), each read
/// is one chunk, and the last chunk goes with the last data.
// The connection loop waits while the handler runs: no one else borrows
// the request body meanwhile.
#[allow(clippy::await_holding_refcell_ref)]
async fn send_body(
    ctx: &RequestCtx,
    env: &Env<'_>,
    k: &Knobs<'_>,
    conn: &UpstreamConn,
    out: &Outgoing,
    framing: BodyFraming,
) -> Result<(), Step> {
    let st = &conn.stream;
    let b = env.body.expect("a streamed body has a source");
    let mut b = b.borrow_mut();
    let max = ctx.loc.s.client_max_body_size;
    let mut piece = Vec::with_capacity(upstream::READ_CHUNK);
    let mut wire = out.head.clone();
    let mut head_sent = false;
    loop {
        piece.clear();
        let got = match b.read_buffered(&mut piece) {
            Ok(Some(got)) => Ok(got),
            Ok(None) if !head_sent => Ok(true),
            Ok(None) => b.read(&mut piece).await,
            Err(e) => Err(e),
        };
        let more = got.map_err(|e| Step::Client(client_body_error(ctx, env, &e)))?;
        if framing == BodyFraming::Chunked && max != 0 && b.read > max {
            too_large(ctx, env, b.read);
            return Err(Step::Client(UpstreamError::Status(413)));
        }
        let end = !more || b.is_done();
        frame(framing, &piece, end, &mut wire);
        if !wire.is_empty() {
            if let Err(e) = upstream::write_all(st, &wire, k.send_timeout).await {
                let fail = HeadFail::Io(e, SENDING);
                return Err(if head_sent {
                    Step::Head(fail)
                } else {
                    Step::Early(fail)
                });
            }
            wire.clear();
        }
        head_sent = true;
        if end {
            break;
        }
    }
    Ok(())
}

/// Appends `data` to `wire` as `framing` frames it, with the body's end
/// (the last chunk, the empty `STDIN` record) when `end`.
fn frame(framing: BodyFraming, data: &[u8], end: bool, wire: &mut Vec<u8>) {
    match framing {
        BodyFraming::AsIs => wire.extend_from_slice(data),
        BodyFraming::Chunked => {
            if !data.is_empty() {
                use std::io::Write as _;
                let _ = write!(wire, "{:x}\r\n", data.len());
                wire.extend_from_slice(data);
                wire.extend_from_slice(b"\r\n");
            }
            if end {
                wire.extend_from_slice(chunked::LAST_CHUNK);
            }
        }
        BodyFraming::FastCgi => {
            if !data.is_empty() {
                fastcgi::stdin(wire, data);
            }
            if end {
                fastcgi::stdin_end(wire);
            }
        }
    }
}

/// Sends a body read whole into its temp file, piece by piece (each read
/// on a pool thread), as is or as `STDIN` records and the empty one.
async fn send_spooled(
    ctx: &RequestCtx,
    env: &Env<'_>,
    k: &Knobs<'_>,
    conn: &UpstreamConn,
    f: &Spool,
    fastcgi: bool,
) -> Result<(), Step> {
    let mut records = Vec::new();
    let mut at = 0;
    while at < f.len() {
        let piece = match f.read_at(at, upstream::READ_CHUNK).await {
            Ok(p) => p,
            Err(e) => return Err(Step::Client(spool_failed(ctx, env, f, &e, "pread"))),
        };
        at += piece.len() as u64;
        let data = match fastcgi {
            true => {
                records.clear();
                fastcgi::stdin(&mut records, &piece);
                &records[..]
            }
            false => &piece[..],
        };
        if let Err(e) = upstream::write_all(&conn.stream, data, k.send_timeout).await {
            return Err(Step::Head(HeadFail::Io(e, SENDING)));
        }
    }
    if fastcgi {
        records.clear();
        fastcgi::stdin_end(&mut records);
        if let Err(e) = upstream::write_all(&conn.stream, &records, k.send_timeout).await {
            return Err(Step::Head(HeadFail::Io(e, SENDING)));
        }
    }
    Ok(())
}

/// One read while waiting for a head: a close or an error is a failure
/// before any byte (`Early`, retried on a fresh connection when the
/// connection was pooled) unless some arrived; a timeout never is (the
/// peer is slow, not gone). At most `limit` bytes are read.
async fn read_more(
    k: &Knobs<'_>,
    conn: &UpstreamConn,
    buf: &mut Vec<u8>,
    limit: usize,
    got_any: &mut bool,
) -> Result<(), Step> {
    let wrap = |f: HeadFail, any: bool| if any { Step::Head(f) } else { Step::Early(f) };
    match conn.stream.read_some(buf, limit, k.read_timeout).await {
        Ok(0) => Err(wrap(HeadFail::Closed, *got_any)),
        Ok(_) => {
            *got_any = true;
            Ok(())
        }
        Err(e) if e.raw_os_error() == Some(libc::ETIMEDOUT) => {
            Err(Step::Head(HeadFail::Io(e, READING)))
        }
        Err(e) => Err(wrap(HeadFail::Io(e, READING), *got_any)),
    }
}

/// The parser of a response head: at most `max` bytes from the start of
/// the buffer, `None` while incomplete.
type ParseHead = fn(&[u8], usize) -> Result<Option<ResponseHead>, HeadError>;

/// Reads an HTTP/1 response head (or a uwsgi or SCGI application's, by
/// `parse`; at most `*_buffer_size`), skipping 1xx heads but `101`.
async fn read_response_head(
    k: &Knobs<'_>,
    conn: UpstreamConn,
    parse: ParseHead,
) -> Result<Got, Step> {
    let max = k.buffer_size as usize;
    let mut buf = Vec::with_capacity(max.min(upstream::READ_CHUNK));
    let mut got_any = false;
    loop {
        match parse(&buf, max) {
            Ok(Some(h)) if (100..200).contains(&h.status) && h.status != 101 => {
                buf.drain(..h.len);
                continue;
            }
            Ok(Some(h)) => {
                buf.drain(..h.len);
                return Ok(Got {
                    conn,
                    buf,
                    head: h,
                    fcgi: None,
                });
            }
            Ok(None) => {}
            Err(e) => return Err(Step::Head(HeadFail::Invalid(e))),
        }
        // Into the head's buffer only, as NGINX reads a head into
        // `proxy_buffer_size`: a read of READ_CHUNK grew every head's
        // buffer to 64 KiB, and an upgraded response keeps that buffer
        // (its bytes after the head) for the tunnel's life. The parse
        // failed above when the buffer is full, so the bound is never 0.
        let room = max.saturating_sub(buf.len()).max(1);
        read_more(k, &conn, &mut buf, room, &mut got_any).await?;
    }
}

/// Reads FastCGI records up to the end of the CGI header (at most
/// `fastcgi_buffer_size` of it), logging the application's stderr as
/// NGINX does; `fastcgi_catch_stderr` turns a matching line into an
/// invalid header.
async fn read_fastcgi_head(
    ctx: &RequestCtx,
    k: &Knobs<'_>,
    conn: UpstreamConn,
    log: &RequestLog,
) -> Result<Got, Step> {
    let s = &ctx.loc.s.fastcgi;
    let catch: Arc<Vec<String>> = Arc::clone(&s.catch_stderr);
    let max = k.buffer_size as usize;
    let mut reader = HeadReader::default();
    let mut buf = Vec::with_capacity(max.min(upstream::READ_CHUNK));
    let mut stderr = Vec::new();
    let mut got_any = false;
    loop {
        let r = reader.feed(&mut buf, max, &mut stderr);
        for e in stderr.drain(..) {
            log.error(format_args!(
                "FastCGI sent in stderr: \"{e}\" while {READING}"
            ));
            if catch.iter().any(|c| e.contains(c.as_str())) {
                return Err(Step::Head(HeadFail::Invalid(HeadError::CaughtStderr)));
            }
        }
        match r {
            Ok(Some(h)) => {
                let (head, body) = h
                    .finish(s.keep_conn)
                    .map_err(|e| Step::Head(HeadFail::Invalid(e)))?;
                return Ok(Got {
                    conn,
                    buf,
                    head,
                    fcgi: Some(Box::new(body)),
                });
            }
            Ok(None) => {}
            Err(e) => return Err(Step::Head(HeadFail::Invalid(e))),
        }
        read_more(k, &conn, &mut buf, upstream::READ_CHUNK, &mut got_any).await?;
    }
}
